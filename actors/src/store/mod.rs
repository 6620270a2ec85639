//! The store contract: everything Switchboard persists, one trait per area,
//! that each engine implements and one test suite checks.
//!
//! | area | trait | what it keeps |
//! |---|---|---|
//! | [`directory`] | [`DirectoryStore`] | Bays, participants, token hashes, the credentials channel |
//! | [`conversations`] | [`ConversationStore`] | rosters, titles, policies |
//! | [`messages`] | [`MessageStore`] | history, idempotency, round counter, read markers |
//! | [`drafts`] | [`DraftStore`] | streaming drafts and the open-draft index |
//! | [`log`] | [`LogStore`] | the Bay's event log: the replay buffer |
//! | [`displacement`] | [`DisplacementStore`] | connection openings per token |
//! | [`webhooks`] | [`WebhookStore`] | webhook URLs, positions, statuses |
//! | [`leases`] | [`LeaseStore`] | named leases with a TTL |
//! | [`presence`] | [`PresenceStore`] | node presence records, published states |
//! | [`summaries`] | [`SummaryStore`] | conversation summaries, the summarizer, refresh budget |
//! | [`pairing`] | [`PairingStore`] | pairing codes and link requests (hashed, with a TTL) |
//! | [`connectors`] | [`ConnectorStore`] | connector agents, requests awaiting their answer |
//! | [`rooms`] | [`RoomStore`] | rooms shared by link: records, briefs, capabilities (hashed) |
//! | [`files`] | [`FileStore`] | attachment metadata, claims and links, file libraries |
//! | [`nodes`] | [`NodeStore`] | each live gateway node's self-description |
//!
//! [`Store`] is all of them together, implemented for every type that
//! implements each area, so `Arc<dyn Store>` is what nodes pass around;
//! code that needs one area can take that trait alone. Call sites bring
//! the traits' methods into scope with `use store::prelude::*`.
//!
//! Engines: [`memory::MemoryStore`] (single node, nothing to install, state
//! lost on exit) and [`redis::RedisStore`] (shared by many nodes; Redis ≥ 7),
//! each a folder with one file per area; [`instrumented::Instrumented`]
//! wraps either with latency and error metrics. Writes that change what
//! sessions must see (messages, rosters, revocations) append to the Bay's
//! event log in the same atomic step as the change itself, so every node's
//! feed observes them in one order.

pub mod connectors;
pub mod conversations;
pub mod directory;
pub mod displacement;
pub mod drafts;
pub mod files;
pub mod instrumented;
pub mod leases;
pub mod log;
pub mod memory;
pub mod messages;
pub mod nodes;
pub mod pairing;
pub mod presence;
pub mod redis;
pub mod rooms;
pub mod summaries;
pub mod webhooks;

pub use connectors::{ConnectorStore, PendingRequest};
pub use conversations::{ConversationChange, ConversationStore, RosterRule};
pub use directory::{
    CredentialChange, CredentialChangeKind, CredentialsRead, DirectoryStore, Principal, Suspension,
    CREDENTIAL_CHANGES_KEPT,
};
pub use displacement::{DisplacementStore, Opening, OPENINGS_KEPT};
pub use drafts::{DraftAppend, DraftAppended, DraftStore, OpenDraft, RoundStep};
pub use files::{
    Claim, FileEntry, FileLink, FilePage, FileStore, StoredFile, ATTACHMENT_ID_PREFIX,
};
pub use leases::LeaseStore;
pub use log::{LogStore, Replay, RosterChange};
pub use messages::{
    next_round, AppendOutcome, Appended, Budget, Changed, Idempotency, MessageChange, MessageStore,
    NewMessage, ReadState,
};
pub use nodes::{NodeRecord, NodeStore};
pub use pairing::{Approval, LinkRequest, PairingStore, PairingTarget, SecretHash};
pub use presence::{ParticipantPresence, PresenceChange, PresenceStore, Published};
pub use rooms::{BriefChange, Room, RoomAuthor, RoomLink, RoomRole, RoomStore, Visibility};
pub use summaries::{RefreshSlot, StoredSummary, SummaryStore, SummaryWritten};
pub use webhooks::{Webhook, WebhookStatus, WebhookStore};

/// The store traits, for `use switchboard_actors::store::prelude::*`:
/// calling a method on an `Arc<dyn Store>` needs its area's trait in scope.
pub mod prelude {
    pub use super::ConnectorStore;
    pub use super::FileStore;
    pub use super::PairingStore;
    pub use super::RoomStore;
    pub use super::SummaryStore;
    pub use super::{
        ConversationStore, DirectoryStore, DisplacementStore, DraftStore, LeaseStore, LogStore,
        MessageStore, NodeStore, PresenceStore, Store, WebhookStore,
    };
}

/// Store failures. Expected outcomes (not found, already exists, expired
/// cursor) are return values, not errors.
#[derive(Clone, Debug, thiserror::Error)]
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

/// Outcome of an update addressed at something that may not exist. `R` is
/// why a store may refuse the update for breaking a rule of the record
/// (e.g. [`RosterRule`]); updates that keep no such rule leave it
/// uninhabited, so their callers match only the first two variants.
#[derive(Debug, Clone, PartialEq)]
pub enum Updated<T, R = std::convert::Infallible> {
    /// Changed; the record after the change.
    Updated(T),
    /// The target does not exist; nothing changed (404).
    NotFound,
    /// The update would break rule `R`; nothing changed (409).
    Refused(R),
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

/// Everything Switchboard persists: every area's trait together. All
/// methods are cheap to call concurrently; atomicity is the engine's job
/// and is documented per method. Not-found, already-exists and expired
/// positions are return values ([`Created`], [`Updated`], `Option`,
/// [`Replay`]), never errors.
pub trait Store:
    DirectoryStore
    + ConversationStore
    + MessageStore
    + DraftStore
    + LogStore
    + DisplacementStore
    + WebhookStore
    + LeaseStore
    + PresenceStore
    + SummaryStore
    + PairingStore
    + ConnectorStore
    + RoomStore
    + FileStore
    + NodeStore
{
}

impl<T> Store for T where
    T: DirectoryStore
        + ConversationStore
        + MessageStore
        + DraftStore
        + LogStore
        + DisplacementStore
        + WebhookStore
        + LeaseStore
        + PresenceStore
        + SummaryStore
        + PairingStore
        + ConnectorStore
        + RoomStore
        + FileStore
        + NodeStore
        + ?Sized
{
}
