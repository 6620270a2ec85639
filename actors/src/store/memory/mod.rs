//! The embedded engine: everything in process memory, nothing to install.
//!
//! One mutex guards all state, which makes every write (history + log +
//! round counter) trivially atomic. Each Bay's log gets a random epoch when
//! it is first touched in this process, so cursors from an earlier process
//! are expired (409 / `reset`) instead of silently re-based: the log they
//! named is gone.

mod conversations;
mod directory;
mod displacement;
mod drafts;
mod leases;
mod log;
mod messages;
mod presence;
mod webhooks;

use super::log::{Change, LogEvent, LogRecord};
use super::{
    new_revision, next_round, AppendOutcome, Appended, Changed, ConversationChange, Created,
    DraftAppend, DraftAppended, MessageChange, NewMessage, OpenDraft, Opening, ParticipantPresence,
    PresenceChange, Principal, Published, ReadState, Replay, Revisioned, RosterChange, RoundStep,
    StoreError, Updated, Webhook, WebhookStatus, OPENINGS_KEPT,
};
use crate::model::{Bay, Conversation, Participant, StoredMessage};
use crate::token::TokenHash;
use async_trait::async_trait;
use chrono::{DateTime, SubsecRound, Utc};
use parking_lot::Mutex;
use rand::Rng;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use switchboard_protocol::cursor::{EntryId, Epoch, LogPosition};
use switchboard_protocol::event::ConversationRef;
use switchboard_protocol::ids::{
    BayId, ConversationId, MessageId, ParticipantId, SessionId, TokenId,
};
use switchboard_protocol::model::ParticipantKind;
use switchboard_protocol::presence::PresenceState;
use tokio::sync::watch;

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
    presence: HashMap<String, (Vec<ParticipantPresence>, u64)>,
    /// Published presence states; absent = `offline`.
    published: HashMap<ParticipantId, PresenceState>,
    /// Open drafts by message id: conversation, author, last activity.
    drafts: HashMap<MessageId, OpenDraft>,
}

/// A webhook with where its deliveries stand.
struct WebhookState {
    webhook: Webhook,
    position: LogPosition,
}

/// A remembered idempotent send.
struct IdempotentSend {
    fingerprint: String,
    conversation: ConversationId,
    message: MessageId,
    /// Forgotten after the replay window, like the Redis key's TTL.
    expires_ms: u64,
}

struct ParticipantState {
    participant: Participant,
    token: Option<TokenHash>,
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

struct Log {
    epoch: Epoch,
    entries: VecDeque<Arc<LogRecord>>,
    /// The roster changes among `entries`, oldest first, trimmed with them.
    rosters: VecDeque<RosterChange>,
    /// Id of the newest entry ever appended (the head).
    last: EntryId,
    /// Id of the newest entry trimmed away. A cursor below it is expired.
    max_deleted: EntryId,
    /// Wakes tails when `last` moves.
    head_tx: watch::Sender<EntryId>,
    /// The displacement channel: the newest [`OPENINGS_KEPT`] openings.
    openings: VecDeque<Opening>,
    /// Wakes openings tails with the newest opening's id.
    openings_tx: watch::Sender<EntryId>,
}

impl Log {
    fn new() -> Self {
        let epoch: String = rand::rng()
            .sample_iter(rand::distr::Alphanumeric)
            .take(10)
            .map(|c| (c as char).to_ascii_lowercase())
            .collect();
        Log {
            epoch: Epoch(epoch),
            entries: VecDeque::new(),
            rosters: VecDeque::new(),
            last: EntryId::ZERO,
            max_deleted: EntryId::ZERO,
            head_tx: watch::channel(EntryId::ZERO).0,
            openings: VecDeque::new(),
            openings_tx: watch::channel(EntryId::ZERO).0,
        }
    }

    fn append(&mut self, event: LogEvent, limits: &MemoryLimits) -> EntryId {
        let now = now_ms();
        let id = if now > self.last.ms {
            EntryId::new(now, 0)
        } else {
            self.last.next()
        };
        self.entries.push_back(Arc::new(LogRecord::new(id, event)));
        self.last = id;
        self.trim(now, limits);
        self.head_tx.send_replace(id);
        id
    }

    /// Drops entries older than the replay window (like Redis `XTRIM MINID`)
    /// and beyond the entry cap (like `MAXLEN`).
    fn trim(&mut self, now: u64, limits: &MemoryLimits) {
        let min_ms = now.saturating_sub(limits.replay_window.as_millis() as u64);
        while let Some(front) = self.entries.front() {
            if front.id.ms < min_ms || self.entries.len() > limits.max_entries {
                self.max_deleted = front.id;
                self.entries.pop_front();
            } else {
                break;
            }
        }
        while self
            .rosters
            .front()
            .is_some_and(|r| r.at <= self.max_deleted)
        {
            self.rosters.pop_front();
        }
    }

    /// Appends a `Roster` entry for `after` and remembers who was a member
    /// `before` it.
    fn append_roster(
        &mut self,
        before: Vec<ParticipantId>,
        after: &Conversation,
        limits: &MemoryLimits,
    ) -> EntryId {
        let at = self.append(LogEvent::roster(after), limits);
        // The append may have trimmed; an entry it just wrote never is.
        self.rosters.push_back(RosterChange {
            at,
            conversation: after.id.clone(),
            before,
            after: after.member_ids(),
        });
        at
    }

    fn open(&mut self, token: &TokenId, session: &SessionId) -> EntryId {
        let last = *self.openings_tx.borrow();
        let now = now_ms();
        let id = if now > last.ms {
            EntryId::new(now, 0)
        } else {
            last.next()
        };
        self.openings.push_back(Opening {
            id,
            token: token.clone(),
            session: session.clone(),
        });
        if self.openings.len() > OPENINGS_KEPT {
            self.openings.pop_front();
        }
        self.openings_tx.send_replace(id);
        id
    }

    fn openings_after(&self, after: EntryId, max: usize) -> Vec<Opening> {
        let start = self.openings.partition_point(|o| o.id <= after);
        self.openings
            .iter()
            .skip(start)
            .take(max)
            .cloned()
            .collect()
    }

    fn read(&self, after: &LogPosition, max: usize) -> Replay {
        if after.epoch != self.epoch {
            return Replay::EpochChanged;
        }
        if after.entry < self.max_deleted || after.entry > self.last {
            return Replay::Expired;
        }
        let start = self.entries.partition_point(|r| r.id <= after.entry);
        let records: Vec<_> = self.entries.iter().skip(start).take(max).cloned().collect();
        Replay::page(records, max, after.entry, self.last)
    }
}

fn log_of<'a>(logs: &'a mut HashMap<BayId, Log>, bay: &BayId) -> &'a mut Log {
    logs.entry(bay.clone()).or_insert_with(Log::new)
}

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

impl MemoryStore {
    /// Openings after `after`, or a receiver to wait on when there are none.
    fn openings_or_wait(
        &self,
        bay: &BayId,
        after: EntryId,
        max: usize,
    ) -> Result<Vec<Opening>, watch::Receiver<EntryId>> {
        let mut st = self.state.lock();
        let log = log_of(&mut st.logs, bay);
        let found = log.openings_after(after, max);
        if found.is_empty() {
            let mut rx = log.openings_tx.subscribe();
            rx.mark_unchanged();
            Err(rx)
        } else {
            Ok(found)
        }
    }

    fn with_webhook<T>(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        f: impl FnOnce(&WebhookState) -> T,
    ) -> Option<T> {
        let st = self.state.lock();
        st.bays
            .get(bay)
            .and_then(|b| b.webhooks.get(participant))
            .map(f)
    }

    fn with_history<T: Default>(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        f: impl FnOnce(&[StoredMessage]) -> T,
    ) -> T {
        let st = self.state.lock();
        st.bays
            .get(bay)
            .and_then(|b| b.conversations.get(conversation))
            .map(|c| f(&c.messages))
            .unwrap_or_default()
    }
}
