//! The `Store` trait: everything Switchboard persists, behind one interface
//! that each engine implements and that one test suite checks.
//!
//! Engines: [`memory::MemoryStore`] (single node, nothing to install, state
//! lost on exit) and [`redis::RedisStore`] (shared by many nodes; Redis ≥ 7).
//! Writes that change what sessions must see (messages,
//! rosters, revocations) append to the Bay's event log in the same atomic
//! step as the change itself, so every node's feed observes them in one
//! order.

pub mod instrumented;
pub mod log;
pub mod memory;
pub mod redis;

use crate::model::{Bay, Conversation, Member, Participant, StoredMessage};
use crate::token::TokenHash;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use log::{LogEvent, LogRecord};
use std::sync::Arc;
use std::time::Duration;
use switchboard_protocol::cursor::{EntryId, LogPosition};
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId, TokenId};
use switchboard_protocol::model::{ParticipantKind, Policy};

/// Store failures. Expected outcomes (not found, already exists, expired
/// cursor) are return values, not errors.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The backing service cannot be reached; callers answer 503 with Retry-After.
    #[error("store unavailable while {doing}: {cause}")]
    Unavailable {
        /// What the caller was doing and on which key, a lowercase phrase
        /// (e.g. `"appending a message"`).
        doing: &'static str,
        /// The underlying failure, as text for logs; never branched on.
        cause: String,
    },
    /// Stored data could not be decoded.
    #[error("corrupt record while {doing}: {cause}")]
    Corrupt {
        /// What the caller was doing and on which key, a lowercase phrase.
        doing: &'static str,
        /// What failed to decode, as text for logs; never branched on.
        cause: String,
    },
}

/// Outcome of a create: the new record, or the id was taken.
#[derive(Debug, Clone, PartialEq)]
pub enum Created<T> {
    /// Stored; the record as stored.
    Created(T),
    /// The id (or, for participants, the token) is taken; nothing changed.
    /// The admin API answers 409 `ALREADY_EXISTS`.
    AlreadyExists,
}

/// What `authenticate` returns for a valid token.
#[derive(Debug, Clone, PartialEq)]
pub struct Principal {
    /// The token's Bay: the caller can see nothing outside it (protocol §1).
    pub bay: BayId,
    /// Who the token authenticates, as currently stored.
    pub participant: Participant,
    /// Public handle of the presented token (first 16 hex digits of its
    /// SHA-256); keys displacement and revocation, safe to log.
    pub token: TokenId,
}

/// Outcome of reading a Bay's log after a position.
#[derive(Debug, Clone)]
pub enum Replay {
    /// Entries after the position, in order, and `through`: the position a
    /// reader is past once it has handled them (the last entry's id, or the
    /// log head when the read reached it).
    Records {
        /// At most `max` records with ids above the position, in log order.
        records: Vec<Arc<LogRecord>>,
        /// The entry a reader is past after handling `records`. Invariant:
        /// at least the requested position and at least the last record's id.
        through: EntryId,
    },
    /// Entries after the position were trimmed from the replay buffer
    /// (or the position lies beyond the head): 409 CURSOR_EXPIRED / `reset`.
    Expired,
    /// The position belongs to another incarnation of the log (it was lost):
    /// 409 CURSOR_EXPIRED / `reset`.
    EpochChanged,
}

/// A message ready to append: routing computed, round cap still to apply.
#[derive(Debug, Clone)]
pub struct NewMessage {
    /// `{ id, type, title }` of the target conversation, logged with the
    /// message so the event needs no second read.
    pub conversation: switchboard_protocol::event::ConversationRef,
    /// The message with its routing; the store stamps `created_at` and sets
    /// `routing.suppressed` when the round cap applies.
    pub message: StoredMessage,
    /// The GROUP round cap (`maxAgentRounds`); `None` for DM / AGENT_CHAT.
    pub round_cap: Option<u8>,
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

/// Outcome of an update addressed at something that may not exist.
#[derive(Debug, Clone, PartialEq)]
pub enum Updated<T> {
    /// Changed; the record after the change.
    Updated(T),
    /// The target does not exist; nothing changed (404).
    NotFound,
}

/// Everything Switchboard persists. All methods are cheap to call
/// concurrently; atomicity is the engine's job and is documented per method.
///
/// # Errors
///
/// Every method fails with [`StoreError::Unavailable`] when the backing
/// service cannot be reached and [`StoreError::Corrupt`] when a stored record
/// does not decode. Not-found, already-exists and expired positions are
/// return values ([`Created`], [`Updated`], `Option`, [`Replay`]).
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Whether the store answers (for `/readyz`).
    async fn ping(&self) -> Result<(), StoreError>;

    // ---- Bays and participants ----

    /// Creates a Bay; `AlreadyExists` when its id is taken.
    async fn create_bay(&self, bay: Bay) -> Result<Created<Bay>, StoreError>;
    /// The Bay, or `None` when it does not exist.
    async fn bay(&self, bay: &BayId) -> Result<Option<Bay>, StoreError>;
    /// Creates a participant with its first token (hash only).
    async fn create_participant(
        &self,
        bay: &BayId,
        participant: Participant,
        token: TokenHash,
    ) -> Result<Created<Participant>, StoreError>;
    /// One participant of the Bay, or `None`.
    async fn participant(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<Option<Participant>, StoreError>;
    /// All participants of a Bay.
    async fn participants(&self, bay: &BayId) -> Result<Vec<Participant>, StoreError>;
    /// The participants with the given ids (unknown ids are skipped), in
    /// the order given. The write path uses it to load one conversation's
    /// roster without touching the rest of the Bay.
    async fn participants_in(
        &self,
        bay: &BayId,
        ids: &[ParticipantId],
    ) -> Result<Vec<Participant>, StoreError>;
    /// Replaces (`Some`) or removes (`None`) a participant's token. The old
    /// token stops authenticating at once, and a `CredentialRevoked` entry
    /// is appended to the Bay's log in the same step so every node closes
    /// its sessions. `NotFound` when the participant does not exist.
    async fn set_token(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        token: Option<TokenHash>,
    ) -> Result<Updated<()>, StoreError>;
    /// Resolves a token hash to its Bay and participant.
    async fn authenticate(&self, token: &TokenHash) -> Result<Option<Principal>, StoreError>;

    // ---- Conversations ----

    /// Creates a conversation and appends its `Roster` entry.
    async fn create_conversation(
        &self,
        bay: &BayId,
        conversation: Conversation,
    ) -> Result<Created<Conversation>, StoreError>;
    /// One conversation of the Bay with its members and policy, or `None`.
    async fn conversation(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
    ) -> Result<Option<Conversation>, StoreError>;
    /// All conversations of a Bay (feeds load their membership index from it).
    async fn conversations(&self, bay: &BayId) -> Result<Vec<Conversation>, StoreError>;
    /// Conversations `participant` is a member of.
    async fn conversations_of(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<Vec<Conversation>, StoreError> {
        // Engines may answer from an index; this default filters the Bay's list.
        let mut all = self.conversations(bay).await?;
        all.retain(|c| c.member(participant).is_some());
        Ok(all)
    }
    /// Adds (or re-roles) a member and appends a `Roster` entry.
    async fn upsert_member(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        member: Member,
    ) -> Result<Updated<Conversation>, StoreError>;
    /// Removes a member and appends a `Roster` entry. `NotFound` when the
    /// conversation does not exist or the participant was not a member.
    async fn remove_member(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        participant: &ParticipantId,
    ) -> Result<Updated<Conversation>, StoreError>;
    /// Changes title and/or policy and appends a `Roster` entry.
    async fn update_conversation(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        title: Option<Option<String>>,
        policy: Option<Policy>,
    ) -> Result<Updated<Conversation>, StoreError>;

    // ---- Messages ----

    /// Appends a message to the conversation history and to the Bay's log,
    /// and applies the round cap, all in one atomic step (protocol §4: the
    /// count of consecutive agent messages since the last human message,
    /// including this one; at the cap an agent message triggers nobody).
    async fn append_message(
        &self,
        bay: &BayId,
        message: NewMessage,
        sender_kind: ParticipantKind,
    ) -> Result<Appended, StoreError>;
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

    // ---- The event log (replay buffer) ----

    /// The log's current head: its epoch and last entry id.
    async fn log_head(&self, bay: &BayId) -> Result<LogPosition, StoreError>;
    /// Reads up to `max` entries after `after`. With `block`, waits up to
    /// that long for the first entry when none is there yet (the feed's tail).
    async fn read_log(
        &self,
        bay: &BayId,
        after: &LogPosition,
        max: usize,
        block: Option<Duration>,
    ) -> Result<Replay, StoreError>;
    /// Appends a control entry (e.g. `SessionOpened`).
    async fn append_control(&self, bay: &BayId, event: LogEvent) -> Result<EntryId, StoreError>;
}
