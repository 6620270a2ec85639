//! Message history: appends (round cap, idempotency, `createdAt`), changes, polls and read markers.

use super::log::Change;
use super::StoreError;
use crate::model::StoredMessage;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use switchboard_protocol::cursor::EntryId;
use switchboard_protocol::event::ConversationRef;
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId, TokenId};
use switchboard_protocol::model::ParticipantKind;

/// Outcome of [`MessageStore::append_message`].
#[derive(Debug, Clone)]
pub enum AppendOutcome {
    /// Stored and logged.
    Appended(Box<Appended>),
    /// The conversation changed since the revision the message was routed
    /// with: nothing was stored; reload the conversation and route again.
    Stale,
    /// The idempotency key was used before with the same request: nothing
    /// was stored; this is the first request's message as it is now (a
    /// tombstone if it was deleted since).
    Duplicate(Box<StoredMessage>),
    /// The idempotency key was used before with a different request:
    /// nothing was stored (409 `IDEMPOTENCY_KEY_REUSED`).
    KeyReused,
    /// The message's [`Budget`] is spent: nothing was stored; one call
    /// is back after this long (429 `RATE_LIMITED`).
    RateLimited(Duration),
}

/// One call taken from the sender's agent request budget (protocol §11)
/// by the append itself, in its atomic step, so a post asks the store
/// once instead of twice. A GCRA bucket: `burst` calls, one more every
/// `interval_us` µs, keyed by the Bay and the token. A stale append
/// takes nothing (it is routed again); every other outcome of an append
/// that reached the bucket sets [`Budget::taken`], so a request that ends
/// without it (refused before the append) takes its call on its own.
#[derive(Debug, Clone)]
pub struct Budget {
    /// The presented token's public handle: the bucket's owner.
    pub token: TokenId,
    /// One call comes back every this many µs.
    pub interval_us: u64,
    /// The bucket's size.
    pub burst: u32,
    /// Set once the store took (or refused) the call.
    pub taken: Arc<AtomicBool>,
}

impl Budget {
    /// A bucket of `per_minute` calls a minute for `token`.
    pub fn per_minute(token: TokenId, per_minute: u32) -> Self {
        let n = per_minute.max(1);
        Budget {
            token,
            interval_us: (60_000_000 / u64::from(n)).max(1),
            burst: n,
            taken: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Whether the store took (or refused) the call.
    pub fn is_taken(&self) -> bool {
        self.taken.load(Ordering::Acquire)
    }

    /// Notes that the store took (or refused) the call.
    pub fn mark_taken(&self) {
        self.taken.store(true, Ordering::Release);
    }
}

/// A send's idempotency key (the `Idempotency-Key` header or `clientId`),
/// remembered with the message it created for the replay window, so a
/// retry on any node returns that message instead of storing another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Idempotency {
    /// SHA-256 (hex) of the sender's id and the client's key: keys are
    /// scoped to their sender, and a client's raw key never reaches storage.
    pub key: String,
    /// SHA-256 (hex) of what the request asks for (conversation, content,
    /// reply target, metadata, card, poll): a retry must match it.
    pub fingerprint: String,
}

/// A change to a stored message, applied by [`MessageStore::change_message`].
#[derive(Debug, Clone)]
pub struct MessageChange {
    /// `{ id, type, title }` of the conversation, logged with the change.
    pub conversation: ConversationRef,
    /// Revision of the conversation the change was authorized with (the
    /// caller's membership and role): refused as [`Changed::Stale`] when
    /// the conversation moved on.
    pub revision: u64,
    /// The message after the change. Its `version` must be the stored
    /// version + 1, else [`Changed::Conflict`].
    pub message: StoredMessage,
    /// The log entry's payload: what recipients are told.
    pub change: Change,
}

/// Outcome of [`MessageStore::change_message`].
#[derive(Debug, Clone, PartialEq)]
pub enum Changed {
    /// Stored, and logged at this entry.
    Changed(EntryId),
    /// The conversation's revision moved on: reload it and check again.
    Stale,
    /// The message changed since it was read: read it again and redo.
    Conflict,
    /// No such message in that conversation.
    NotFound,
}

/// A member's read state in one conversation (`GET /conversations`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReadState {
    /// The newest message the member has read (posting a message reads
    /// everything before it); `None` before the first.
    pub last_read: Option<MessageId>,
    /// Messages after that one, deleted ones not counted (the member's own
    /// are never unread).
    pub unread: u64,
}

/// Round counter step (protocol §4, "Round caps"): a human message resets
/// the count of consecutive agent messages to 0; an agent message adds one
/// and, under a cap, is suppressed once the count (itself included)
/// reaches it. Returns the new count and whether the message is suppressed
/// (`given` when there is no cap). The Redis append script does the same
/// in Lua, atomically with the append.
pub fn next_round(
    count: u32,
    sender: ParticipantKind,
    cap: Option<u8>,
    given: bool,
) -> (u32, bool) {
    match sender {
        ParticipantKind::User => (0, given),
        ParticipantKind::Agent => {
            let count = count + 1;
            (count, cap.map_or(given, |cap| count >= u32::from(cap)))
        }
    }
}

/// A message ready to append: routing computed, round cap still to apply.
#[derive(Debug, Clone)]
pub struct NewMessage {
    /// `{ id, type, title }` of the target conversation, logged with the
    /// message so the event needs no second read.
    pub conversation: ConversationRef,
    /// The message with its routing; the store stamps `created_at` and sets
    /// `routing.suppressed` when the round cap applies.
    pub message: StoredMessage,
    /// The GROUP round cap (`maxAgentRounds`); `None` for DM / AGENT_CHAT.
    pub round_cap: Option<u8>,
    /// Revision of the conversation the message was routed with; the
    /// append is refused ([`AppendOutcome::Stale`]) when it moved on.
    pub revision: u64,
    /// The send's idempotency key, checked and stored in the same atomic
    /// step as the append.
    pub idempotency: Option<Idempotency>,
    /// The sender's request budget, taken in the same atomic step (after
    /// the revision check, before the idempotency check); `None` when the
    /// caller counted the request itself.
    pub budget: Option<Budget>,
}

/// A stored message and its log entry. `message.routing.suppressed` tells
/// whether the round cap silenced it.
#[derive(Debug, Clone)]
pub struct Appended {
    /// The message as stored (final `created_at` and `routing`).
    pub message: StoredMessage,
    /// Id of the message's entry in the Bay's event log.
    pub entry: EntryId,
}

/// Message history: appends with the round cap and idempotency, changes
/// (edits, deletes, reactions, votes), polls' messages and read markers.
///
/// # Errors
///
/// Every method fails with [`StoreError::Unavailable`] when the backing
/// service cannot be reached and [`StoreError::Corrupt`] when a stored record
/// does not decode.
#[async_trait]
pub trait MessageStore: Send + Sync + 'static {
    /// Appends a message to the conversation history and to the Bay's log,
    /// and applies the round cap, all in one atomic step (protocol §4: the
    /// count of consecutive agent messages since the last human message,
    /// including this one; at the cap an agent message triggers nobody;
    /// see [`next_round`]). [`AppendOutcome::Stale`] (nothing stored) when
    /// the conversation's revision is no longer `message.revision`.
    async fn append_message(
        &self,
        bay: &BayId,
        message: NewMessage,
        sender_kind: ParticipantKind,
    ) -> Result<AppendOutcome, StoreError>;
    /// Replaces a stored message with `change.message` and logs
    /// `change.change`, atomically, if the conversation is still at
    /// `change.revision` and the message at `change.message.version - 1`.
    async fn change_message(
        &self,
        bay: &BayId,
        change: MessageChange,
    ) -> Result<Changed, StoreError>;
    /// Where the poll `poll` lives: its conversation and `card.poll`
    /// message, or `None` when the Bay has no such poll.
    async fn poll_message(
        &self,
        bay: &BayId,
        poll: &str,
    ) -> Result<Option<(ConversationId, MessageId)>, StoreError>;
    /// Moves `participant`'s read marker in `conversation` forward to
    /// `message` (a message of it, with its `seq`) and logs `read.updated`;
    /// `None` when the marker already was at or past it (nothing logged).
    async fn mark_read(
        &self,
        bay: &BayId,
        conversation: &ConversationRef,
        participant: &ParticipantId,
        message: &StoredMessage,
    ) -> Result<Option<EntryId>, StoreError>;
    /// `participant`'s read state in each of `conversations`, in order.
    async fn read_states(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        conversations: &[ConversationId],
    ) -> Result<Vec<ReadState>, StoreError>;
    /// One message of the conversation's history, or `None` (unknown id, or
    /// a message of another conversation).
    async fn message(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        message: &MessageId,
    ) -> Result<Option<StoredMessage>, StoreError>;
    /// Messages created strictly after `since`, oldest first, at most `limit`.
    async fn messages_since(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        since: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError>;
    /// The `limit` newest messages older than `before` (or the newest overall),
    /// returned oldest first, and whether older ones remain.
    async fn messages_before(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        before: Option<&MessageId>,
        limit: usize,
    ) -> Result<(Vec<StoredMessage>, bool), StoreError>;
}
