//! The embedded engine: everything in process memory, nothing to install.
//!
//! One mutex guards all state, which makes every write (history + log +
//! round counter) trivially atomic. Each Bay's log gets a random epoch when
//! it is first touched in this process, so cursors from an earlier process
//! are expired (409 / `reset`) instead of silently re-based: the log they
//! named is gone.
//!
//! This file holds the state every area shares (Bays, conversations, the
//! lock); each area's file implements its store trait and keeps the state
//! only it uses (the log in `log.rs`, webhooks in `webhooks.rs`, …).

mod connectors;
mod conversations;
mod directory;
mod displacement;
mod drafts;
mod files;
mod leases;
mod log;
mod messages;
mod nodes;
mod pairing;
mod presence;
mod rooms;
mod summaries;
mod webhooks;

use super::{OpenDraft, ParticipantPresence, WebhookStatus};
use crate::model::{Bay, Conversation, StoredMessage};
use crate::token::TokenHash;
use directory::ParticipantState;
use log::Log;
use messages::IdempotentSend;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId, TokenId};
use switchboard_protocol::presence::PresenceState;
use webhooks::WebhookState;

/// Replay-buffer limits of the memory engine.
#[derive(Clone, Copy, Debug)]
pub struct MemoryLimits {
    /// Entries older than this are trimmed (protocol §11: 15 minutes).
    pub replay_window: Duration,
    /// Safety cap on entries kept per Bay, whatever their age.
    pub max_entries: usize,
}

/// The embedded store engine.
pub struct MemoryStore {
    limits: MemoryLimits,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    bays: HashMap<BayId, BayState>,
    /// Token hash → owner. Invariant: exactly the tokens of live participants.
    tokens: HashMap<TokenHash, (BayId, ParticipantId)>,
    /// Each Bay's event log, created on first touch (a read of an unknown
    /// Bay still gets a log, so cursors behave uniformly).
    logs: HashMap<BayId, Log>,
    /// Lease name → (holder, expiry in Unix ms).
    leases: HashMap<String, (String, u64)>,
    /// Group leases: group → lease name → holder, and group → holder →
    /// heartbeat expiry in Unix ms.
    group_leases: HashMap<String, HashMap<String, String>>,
    group_beats: HashMap<String, HashMap<String, u64>>,
    /// Node directory: node id → (record, valid until Unix ms).
    nodes: HashMap<String, (crate::store::NodeRecord, u64)>,
    /// Summaries, summarizers and refresh budgets of every Bay.
    summaries: summaries::SummaryState,
    /// Pairing codes and link requests.
    pairing: pairing::PairingState,
    /// Connector designations and pending requests.
    connectors: connectors::ConnectorState,
    /// Rooms and their capabilities.
    rooms: rooms::RoomState,
    /// Attachment metadata and file libraries.
    files: files::FileState,
    /// The credentials channel (see [`directory::Credentials`]).
    credentials: directory::Credentials,
}

struct BayState {
    bay: Bay,
    participants: HashMap<ParticipantId, ParticipantState>,
    conversations: HashMap<ConversationId, ConversationState>,
    /// Poll id → where its `card.poll` message lives.
    polls: HashMap<String, (ConversationId, MessageId)>,
    /// Idempotency key → the send it answered, until it expires.
    idempotency: HashMap<String, IdempotentSend>,
    /// Webhooks by owner, with their delivery position.
    webhooks: HashMap<ParticipantId, WebhookState>,
    /// Delivery status by owner; outlives the webhook.
    webhook_status: HashMap<ParticipantId, WebhookStatus>,
    /// Node → (its presence record, expiry in Unix ms).
    presence: HashMap<std::sync::Arc<str>, (Vec<ParticipantPresence>, u64)>,
    /// Bumped on every write or expiry of a presence record
    /// (`PresenceStore::presence_version`).
    presence_version: u64,
    /// Published presence states; absent = `offline`.
    published: HashMap<ParticipantId, PresenceState>,
    /// Open drafts by message id: conversation, author, last activity.
    drafts: HashMap<MessageId, OpenDraft>,
    /// Agent request budgets appends take from: token → the bucket's
    /// theoretical arrival time (Unix µs), as the Redis engine's key.
    budgets: HashMap<TokenId, u64>,
    /// Whether an operator suspended the whole Bay.
    suspended: bool,
}

struct ConversationState {
    conversation: Conversation,
    /// History, oldest first. Never trimmed (the replay buffer is the log).
    messages: Vec<StoredMessage>,
    /// Consecutive agent messages since the last human one (protocol §4).
    agent_rounds: u32,
    /// New at creation and at each change; appends routed with another are stale.
    revision: u64,
    /// Read markers: participant → `seq` of the newest message read.
    reads: HashMap<ParticipantId, (u64, MessageId)>,
}

impl ConversationState {
    /// `seq` of the newest message (0 when there is none).
    fn last_seq(&self) -> u64 {
        self.messages.last().map_or(0, |m| m.seq)
    }

    fn position(&self, message: &MessageId) -> Option<usize> {
        self.messages.iter().rposition(|m| &m.id == message)
    }
}

/// The Unix time in µs (0 if the clock is before 1970): the clock of
/// request budgets.
fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// The Unix time in ms (0 if the clock is before 1970): the clock of log
/// ids, idempotency windows, presence records and leases.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl MemoryStore {
    /// Creates an empty store.
    pub fn new(limits: MemoryLimits) -> Self {
        MemoryStore {
            limits,
            state: Mutex::new(State::default()),
        }
    }
}
