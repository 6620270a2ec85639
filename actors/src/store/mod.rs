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
use switchboard_protocol::ids::{
    BayId, ConversationId, MessageId, ParticipantId, SessionId, TokenId,
};
use switchboard_protocol::model::{ParticipantKind, Policy};
use switchboard_protocol::presence::PresenceState;

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

impl Replay {
    /// A page of `records` read after `after` with a limit of `max`, from a
    /// log whose newest entry is `last`: `through` is the last record when
    /// the page is full (more may follow), else the head (the reader has
    /// seen everything). Shared by both engines so they agree exactly.
    pub fn page(records: Vec<Arc<LogRecord>>, max: usize, after: EntryId, last: EntryId) -> Self {
        let through = if records.len() < max {
            last.max(after)
        } else {
            records.last().map(|r| r.id).unwrap_or(after)
        };
        Replay::Records { records, through }
    }
}

/// A record with the revision it was read at. Every change of the record
/// gives it a new random revision, so a writer that routed with revision R
/// can have the store refuse its append when the record moved on; random
/// (not a counter) so that a record re-created after a data loss never
/// repeats a revision a node still has cached.
#[derive(Debug, Clone, PartialEq)]
pub struct Revisioned<T> {
    /// The record as read.
    pub value: T,
    /// Its revision: random, new at creation and at each change (0 for
    /// records written before revisions existed).
    pub revision: u64,
}

/// The Unix time in ms (0 if the clock is before 1970): the clock of
/// presence records and leases.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A fresh revision for [`Revisioned`]: random and never 0.
pub fn new_revision() -> u64 {
    rand::random::<u64>().max(1)
}

/// One change to a conversation's roster, title or policy: both engines
/// apply it with [`ConversationChange::apply`] and log the new roster with
/// the members before it in the same atomic step.
#[derive(Debug, Clone, PartialEq)]
pub enum ConversationChange {
    /// Adds a member, or changes the role of an existing one.
    UpsertMember(Member),
    /// Removes a member; a no-op (and `NotFound`) when it was none.
    RemoveMember(ParticipantId),
    /// Sets the title (`Some(None)` clears it) and/or the policy.
    Update {
        /// `None` leaves the title alone.
        title: Option<Option<String>>,
        /// `None` leaves the policy alone.
        policy: Option<Policy>,
    },
}

impl ConversationChange {
    /// Applies the change; `false` when it changed nothing the caller
    /// should log (removing a participant that was not a member).
    pub fn apply(&self, c: &mut Conversation) -> bool {
        match self {
            ConversationChange::UpsertMember(member) => {
                match c
                    .members
                    .iter_mut()
                    .find(|m| m.participant == member.participant)
                {
                    Some(existing) => existing.role = member.role,
                    None => c.members.push(member.clone()),
                }
                true
            }
            ConversationChange::RemoveMember(participant) => {
                let before = c.members.len();
                c.members.retain(|m| &m.participant != participant);
                c.members.len() != before
            }
            ConversationChange::Update { title, policy } => {
                if let Some(title) = title {
                    c.title = title.clone();
                }
                if let Some(policy) = policy {
                    c.policy = policy.clone();
                }
                true
            }
        }
    }

    /// Operation name for metrics and logs.
    pub fn name(&self) -> &'static str {
        match self {
            ConversationChange::UpsertMember(_) => "upsert_member",
            ConversationChange::RemoveMember(_) => "remove_member",
            ConversationChange::Update { .. } => "update_conversation",
        }
    }
}

/// A roster change as the replay buffer keeps it: who was in
/// `conversation` just before log entry `at` changed it. A replay starting
/// at any cursor rebuilds the memberships in force at that cursor from the
/// first change after it (design rule 6), on any node, whatever that
/// node's feed has seen.
#[derive(Debug, Clone, PartialEq)]
pub struct RosterChange {
    /// Id of the `Roster` entry in the Bay's log.
    pub at: EntryId,
    /// The conversation that changed.
    pub conversation: ConversationId,
    /// Its members just before the change (empty when it was created).
    pub before: Vec<ParticipantId>,
    /// Its members right after the change (what the `Roster` entry says).
    pub after: Vec<ParticipantId>,
}

/// A connection opening on a Bay's displacement channel: the newest opening
/// of a token wins, and every older connection of it, on any node, is
/// displaced (protocol §11: 4000 / an empty answer). The channel is apart
/// from the log so that replays never read it: a resume storm of N clients
/// would otherwise make every replay read the storm's own N openings.
#[derive(Debug, Clone, PartialEq)]
pub struct Opening {
    /// Position on the channel; increasing, comparable only with other openings.
    pub id: EntryId,
    /// Handle of the token the connection authenticated with.
    pub token: TokenId,
    /// The new connection.
    pub session: SessionId,
}

/// Openings kept per Bay on the displacement channel (about; Redis trims
/// approximately). Only feeds lagging by more than this many openings
/// could miss one.
pub const OPENINGS_KEPT: usize = 10_000;

/// Outcome of [`Store::append_message`].
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

/// A change to a stored message, applied by [`Store::change_message`].
#[derive(Debug, Clone)]
pub struct MessageChange {
    /// `{ id, type, title }` of the conversation, logged with the change.
    pub conversation: switchboard_protocol::event::ConversationRef,
    /// Revision of the conversation the change was authorized with (the
    /// caller's membership and role): refused as [`Changed::Stale`] when
    /// the conversation moved on.
    pub revision: u64,
    /// The message after the change. Its `version` must be the stored
    /// version + 1, else [`Changed::Conflict`].
    pub message: StoredMessage,
    /// The log entry's payload: what recipients are told.
    pub change: log::Change,
}

/// Outcome of [`Store::change_message`].
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

/// One flush window's appends to an open draft, applied by
/// [`Store::append_draft`] in one atomic write that also logs the
/// `message.delta`.
#[derive(Debug, Clone)]
pub struct DraftAppend {
    /// `{ id, type, title }` of the draft's conversation, logged with the delta.
    pub conversation: switchboard_protocol::event::ConversationRef,
    /// The draft.
    pub message: MessageId,
    /// Revision of the conversation the author's membership was checked
    /// at: refused as [`DraftAppended::Stale`] when it moved on, so a
    /// removed author cannot append.
    pub revision: u64,
    /// The draft's version the text extends: refused as
    /// [`DraftAppended::Conflict`] when the stored one differs.
    pub version: u64,
    /// The draft's length before `text`, in Unicode scalar values (the
    /// delta's `offset`).
    pub offset: u64,
    /// The text to append; not empty.
    pub text: String,
}

/// Outcome of [`Store::append_draft`].
#[derive(Debug, Clone, PartialEq)]
pub enum DraftAppended {
    /// Stored, and logged at `entry`; the draft is at `version` now.
    Appended {
        /// The `message.delta` entry.
        entry: EntryId,
        /// The draft's new version.
        version: u64,
    },
    /// The draft moved on since `version` (an append through another node,
    /// or its end): read it again and redo.
    Conflict,
    /// The conversation's revision moved on: reload it and check the
    /// author's membership again.
    Stale,
    /// The message is not an open draft (anymore).
    Closed,
    /// No such message in that conversation.
    NotFound,
}

/// A round-cap step applied with a message that becomes final later than
/// its append (a draft's completion): see [`next_round`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoundStep {
    /// The sender's kind: an agent adds a round, a human resets the count.
    pub sender: ParticipantKind,
    /// The GROUP round cap (`maxAgentRounds`); `None` for DM / AGENT_CHAT.
    pub cap: Option<u8>,
}

/// An open draft as the orphan sweep sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenDraft {
    /// Its conversation.
    pub conversation: ConversationId,
    /// The draft.
    pub message: MessageId,
    /// Who streams it.
    pub author: ParticipantId,
    /// When it was opened or last appended to.
    pub last_activity: DateTime<Utc>,
}

/// A member's read state in one conversation (`GET /conversations`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReadState {
    /// The newest message the member has read (posting a message reads
    /// everything before it); `None` before the first.
    pub last_read: Option<MessageId>,
    /// Messages after that one (the member's own are never unread).
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
    pub conversation: switchboard_protocol::event::ConversationRef,
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

/// A participant's webhook (protocol §11, webhook contract v2).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Webhook {
    /// Where deliveries go: an absolute `https` URL (or `http` when the
    /// node allows it), at most 2,048 characters, no userinfo.
    pub url: String,
    /// The signing secret sealed with the node's webhook key (base64 of
    /// nonce ‖ ciphertext), never the secret itself.
    pub sealed_secret: String,
    /// When it was set (RFC 3339).
    pub set_at: DateTime<Utc>,
}

/// How a participant's webhook deliveries are going (`/me.webhookStatus`).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookStatus {
    /// When the receiver last answered 2xx.
    pub last_delivered_at: Option<DateTime<Utc>>,
    /// The last failure, as text (`"HTTP 500"`, `"timed out"`, …).
    pub last_error: Option<String>,
    /// Since when deliveries have failed without a success; `None` when
    /// the last attempt succeeded.
    pub failing_since: Option<DateTime<Utc>>,
}

/// What one node knows of one participant's presence in a Bay: part of
/// the node's presence record ([`Store::set_presence`]). The Bay's
/// presence publisher merges every live node's entries
/// ([`crate::presence::compute`]). Times are Unix ms of the writing
/// node's clock; 0 means "none".
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ParticipantPresence {
    /// Whom the entry is about.
    pub participant: ParticipantId,
    /// Holds a `/ws` or `/updates` session on the node now.
    #[serde(default)]
    pub session: bool,
    /// Its last session on the node ended: it counts as present until
    /// this time (`timing.presence_linger` after the end).
    #[serde(default)]
    pub linger_until_ms: u64,
    /// Its typing indicator, started through this node, lives until this
    /// time (protocol §11: 5 s TTL).
    #[serde(default)]
    pub thinking_until_ms: u64,
    /// When that typing indicator started. A send seen by any node after
    /// it ends it (the conversation actor ends typing on a send; typing
    /// and the send may go through different nodes).
    #[serde(default)]
    pub typed_ms: u64,
    /// Its last send through this node.
    #[serde(default)]
    pub sent_ms: u64,
    /// Its last activity this node saw: a send, a typing indicator, a 👀
    /// reaction, or its first session here.
    #[serde(default)]
    pub active_ms: u64,
}

impl ParticipantPresence {
    /// An entry about `participant` saying nothing yet.
    pub fn new(participant: ParticipantId) -> Self {
        ParticipantPresence {
            participant,
            session: false,
            linger_until_ms: 0,
            thinking_until_ms: 0,
            typed_ms: 0,
            sent_ms: 0,
            active_ms: 0,
        }
    }

    /// Whether the entry makes its participant present at `now_ms`.
    pub fn present_at(&self, now_ms: u64) -> bool {
        self.session || self.linger_until_ms > now_ms
    }
}

/// One participant's published presence changing, logged as a
/// [`LogEvent::Presence`] by [`Store::publish_presence`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresenceChange {
    /// Whose presence changed.
    pub participant: ParticipantId,
    /// The published state the change was computed against; the store
    /// refuses the whole batch when it no longer is (another publisher
    /// went first).
    pub from: PresenceState,
    /// The new state.
    pub to: PresenceState,
    /// When the publisher noticed the change.
    pub at: DateTime<Utc>,
}

/// Outcome of [`Store::publish_presence`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Published {
    /// Recorded, each change logged at these entries, in order.
    Logged(Vec<EntryId>),
    /// Some participant's published state was not its change's `from`:
    /// nothing was recorded or logged; read the states again.
    Conflict,
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
    /// One conversation with its revision, as the write path caches it.
    async fn conversation_revisioned(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
    ) -> Result<Option<Revisioned<Conversation>>, StoreError>;
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
    /// Applies `change` and appends a `Roster` entry (the members after
    /// it) and its [`RosterChange`] (the members before it), atomically,
    /// giving the conversation a new revision. `NotFound` when the
    /// conversation does not exist or the change changed nothing.
    async fn change_conversation(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        change: ConversationChange,
    ) -> Result<Updated<Conversation>, StoreError>;
    /// Adds (or re-roles) a member; see [`Store::change_conversation`].
    async fn upsert_member(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        member: Member,
    ) -> Result<Updated<Conversation>, StoreError> {
        self.change_conversation(bay, conversation, ConversationChange::UpsertMember(member))
            .await
    }
    /// Removes a member. `NotFound` when the conversation does not exist or
    /// the participant was not a member.
    async fn remove_member(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        participant: &ParticipantId,
    ) -> Result<Updated<Conversation>, StoreError> {
        self.change_conversation(
            bay,
            conversation,
            ConversationChange::RemoveMember(participant.clone()),
        )
        .await
    }
    /// Changes title and/or policy.
    async fn update_conversation(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        title: Option<Option<String>>,
        policy: Option<Policy>,
    ) -> Result<Updated<Conversation>, StoreError> {
        self.change_conversation(
            bay,
            conversation,
            ConversationChange::Update { title, policy },
        )
        .await
    }

    // ---- Messages ----

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
    /// Appends text to an open draft and logs the `message.delta`, in one
    /// atomic step, if the draft is still open and at `append.version`.
    /// Also refreshes the draft's activity time (see [`Store::open_drafts`]).
    async fn append_draft(
        &self,
        bay: &BayId,
        append: DraftAppend,
    ) -> Result<DraftAppended, StoreError>;
    /// Ends an open draft: replaces it with `change.message` (state
    /// `complete`, `cancelled` or `failed`, at the stored version + 1) and
    /// logs `change.change`, atomically, like [`Store::change_message`].
    /// With `round`, applies the round cap as an append does (setting
    /// `routing.suppressed` in both the stored and the logged message).
    /// `Conflict` when the draft moved on (or is no longer open).
    async fn close_draft(
        &self,
        bay: &BayId,
        change: MessageChange,
        round: Option<RoundStep>,
    ) -> Result<Changed, StoreError>;
    /// The Bay's open drafts, oldest activity first.
    async fn open_drafts(&self, bay: &BayId) -> Result<Vec<OpenDraft>, StoreError>;
    /// Bays that may hold open drafts (a superset: a Bay leaves the list
    /// once a sweep found none there).
    async fn draft_bays(&self) -> Result<Vec<BayId>, StoreError>;
    /// Forgets `bay` in [`Store::draft_bays`] if it has no open draft.
    async fn prune_draft_bay(&self, bay: &BayId) -> Result<(), StoreError>;
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
        conversation: &switchboard_protocol::event::ConversationRef,
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
    /// Appends a control entry.
    async fn append_control(&self, bay: &BayId, event: LogEvent) -> Result<EntryId, StoreError>;

    // ---- The displacement channel ----

    /// Announces a connection of `token` (see [`Opening`]); returns its id.
    async fn open_session(
        &self,
        bay: &BayId,
        token: &TokenId,
        session: &SessionId,
    ) -> Result<EntryId, StoreError>;
    /// The newest opening's id ([`EntryId::ZERO`] when there is none).
    async fn openings_head(&self, bay: &BayId) -> Result<EntryId, StoreError>;
    /// Up to `max` openings after `after`, oldest first; with `block`,
    /// waits up to that long for the first when none is there yet.
    async fn read_openings(
        &self,
        bay: &BayId,
        after: EntryId,
        max: usize,
        block: Option<Duration>,
    ) -> Result<Vec<Opening>, StoreError>;
    // ---- Webhooks, leases and presence ----

    /// Sets (`Some`) or removes (`None`) `participant`'s webhook. Setting
    /// also sets its delivery position to `from` (deliveries start after
    /// it) and clears its status; removing forgets the webhook and its
    /// position but keeps the last status (why it stopped).
    async fn set_webhook(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        webhook: Option<(Webhook, LogPosition)>,
    ) -> Result<(), StoreError>;
    /// `participant`'s webhook, if set.
    async fn webhook(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<Option<Webhook>, StoreError>;
    /// Every participant with a webhook, in every Bay: what delivery
    /// workers are started for.
    async fn webhook_owners(&self) -> Result<Vec<(BayId, ParticipantId)>, StoreError>;
    /// Where `participant`'s deliveries stand: the log position after the
    /// last record handled (delivered or given up).
    async fn webhook_position(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<Option<LogPosition>, StoreError>;
    /// Moves the delivery position of the webhook `of`; a no-op when the
    /// participant's webhook is no longer `of` (removed or replaced: the
    /// new one starts from its own position).
    async fn set_webhook_position(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        of: &Webhook,
        position: &LogPosition,
    ) -> Result<(), StoreError>;
    /// The delivery status (default when none was recorded), kept after
    /// the webhook is removed.
    async fn webhook_status(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<WebhookStatus, StoreError>;
    /// Records the delivery status of the webhook `of`; a no-op when the
    /// participant's webhook is no longer `of`.
    async fn set_webhook_status(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        of: &Webhook,
        status: &WebhookStatus,
    ) -> Result<(), StoreError>;
    /// Removes the webhook `of` (its receiver answered 410), recording
    /// `status`; a no-op when the participant's webhook is no longer `of`,
    /// so a late 410 from a replaced URL never removes its successor.
    async fn disable_webhook(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        of: &Webhook,
        status: &WebhookStatus,
    ) -> Result<(), StoreError>;
    /// Takes the lease `name` for `holder` for `ttl`, or renews it when
    /// `holder` has it: `true` when `holder` holds it now. One node at a
    /// time delivers an agent's webhooks this way.
    async fn lease(&self, name: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError>;
    /// Gives the lease up if `holder` has it.
    async fn release_lease(&self, name: &str, holder: &str) -> Result<(), StoreError>;
    /// Replaces `node`'s presence record of `bay` with `entries`, valid
    /// until `ttl` from now (nodes refresh it well within; a node that
    /// stops refreshing drops out when it expires).
    async fn set_presence(
        &self,
        bay: &BayId,
        node: &str,
        entries: &[ParticipantPresence],
        ttl: Duration,
    ) -> Result<(), StoreError>;
    /// The entries of every live (unexpired) presence record of `bay`,
    /// all nodes together, in no particular order (one participant may
    /// appear once per node). Engines may forget expired records here.
    async fn presence_records(&self, bay: &BayId) -> Result<Vec<ParticipantPresence>, StoreError>;
    /// Participants of `bay` present on any node now: holding a session,
    /// or within the linger after their last one. Sorted by id.
    async fn online(&self, bay: &BayId) -> Result<Vec<ParticipantId>, StoreError> {
        let now = now_ms();
        let mut out: Vec<ParticipantId> = self
            .presence_records(bay)
            .await?
            .into_iter()
            .filter(|e| e.present_at(now))
            .map(|e| e.participant)
            .collect();
        out.sort();
        out.dedup();
        Ok(out)
    }
    /// The presence states the Bay's publisher last logged, for every
    /// participant not `offline` (absent means `offline`).
    async fn published_presence(
        &self,
        bay: &BayId,
    ) -> Result<Vec<(ParticipantId, PresenceState)>, StoreError>;
    /// Records `changes` as the published states and logs one
    /// [`LogEvent::Presence`] per change, in order, in one atomic step;
    /// [`Published::Conflict`] (nothing done) when any participant's
    /// published state is not its change's `from`, so two publishers
    /// overlapping during a lease hand-over never log a change twice.
    async fn publish_presence(
        &self,
        bay: &BayId,
        changes: &[PresenceChange],
    ) -> Result<Published, StoreError>;
    /// Participants with an open streaming draft in the Bay (presence
    /// `streaming`), each once: the authors of [`Store::open_drafts`].
    async fn draft_authors(&self, bay: &BayId) -> Result<Vec<ParticipantId>, StoreError> {
        let mut authors: Vec<ParticipantId> = self
            .open_drafts(bay)
            .await?
            .into_iter()
            .map(|d| d.author)
            .collect();
        authors.sort();
        authors.dedup();
        Ok(authors)
    }

    /// The roster changes logged after `after`, oldest first, within the
    /// replay buffer (empty when `after` is of another epoch: the replay
    /// itself then answers `EpochChanged`).
    async fn roster_changes(
        &self,
        bay: &BayId,
        after: &LogPosition,
    ) -> Result<Vec<RosterChange>, StoreError>;
}
