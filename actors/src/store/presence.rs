//! Activity presence: node records and the published states.

use super::now_ms;
use super::StoreError;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::sync::Arc;
use std::time::Duration;
use switchboard_protocol::cursor::EntryId;
use switchboard_protocol::ids::{BayId, ParticipantId};
use switchboard_protocol::presence::PresenceState;

/// What one node knows of one participant's presence in a Bay: part of
/// the node's presence record ([`PresenceStore::set_presence`]). The Bay's
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
    /// The transports of its sessions on the node now, sorted; while it
    /// lingers after its last one, the transports that session had (so a
    /// poller between two calls still shows `updates`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transports: Vec<crate::session::Transport>,
    /// The node whose record holds the entry: filled in by
    /// [`PresenceStore::presence_records`], not stored in the entry.
    /// Shared by every entry of one record (a read of a Bay's records
    /// clones one pointer per entry, not the node's id).
    #[serde(skip)]
    pub node: Arc<str>,
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
            transports: Vec::new(),
            node: Arc::default(),
        }
    }

    /// Whether the entry makes its participant present at `now_ms`.
    pub fn present_at(&self, now_ms: u64) -> bool {
        self.session || self.linger_until_ms > now_ms
    }
}

/// One participant's published presence changing, logged as a
/// [`LogEvent::Presence`](super::log::LogEvent::Presence) by [`PresenceStore::publish_presence`].
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

/// Outcome of [`PresenceStore::publish_presence`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Published {
    /// Recorded, each change logged at these entries, in order.
    Logged(Vec<EntryId>),
    /// Some participant's published state was not its change's `from`:
    /// nothing was recorded or logged; read the states again.
    Conflict,
}

/// Activity presence: each node's records of who it serves, and the states
/// the Bay's publisher logged.
///
/// # Errors
///
/// Every method fails with [`StoreError::Unavailable`] when the backing
/// service cannot be reached and [`StoreError::Corrupt`] when a stored record
/// does not decode.
#[async_trait]
pub trait PresenceStore: Send + Sync + 'static {
    /// Replaces `node`'s presence record of `bay` with `entries` (in any
    /// order; taken by value, so an engine that keeps them need not copy
    /// a Bay's worth of entries every interval), valid until `ttl` from
    /// now (nodes refresh it well within; a node that stops refreshing
    /// drops out when it expires).
    async fn set_presence(
        &self,
        bay: &BayId,
        node: &str,
        entries: Vec<ParticipantPresence>,
        ttl: Duration,
    ) -> Result<(), StoreError>;
    /// The entries of every live (unexpired) presence record of `bay`,
    /// all nodes together, in no particular order (one participant may
    /// appear once per node), each entry's `node` naming the record it
    /// came from. Engines may forget expired records here.
    async fn presence_records(&self, bay: &BayId) -> Result<Vec<ParticipantPresence>, StoreError>;
    /// A number that changes whenever what [`PresenceStore::presence_records`]
    /// answers for `bay` may have changed: a record written, or one
    /// expired. The publisher reads and recomputes a Bay's states only when
    /// it changed (or a state is due to change by itself), so an unchanged
    /// Bay of 10,000 participants costs a tick nothing. `None` when the
    /// engine keeps no such number: the publisher then reads every tick.
    async fn presence_version(&self, _bay: &BayId) -> Result<Option<u64>, StoreError> {
        Ok(None)
    }
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
    /// [`LogEvent::Presence`](super::log::LogEvent::Presence) per change, in order, in one atomic step;
    /// [`Published::Conflict`] (nothing done) when any participant's
    /// published state is not its change's `from`, so two publishers
    /// overlapping during a lease hand-over never log a change twice.
    async fn publish_presence(
        &self,
        bay: &BayId,
        changes: &[PresenceChange],
    ) -> Result<Published, StoreError>;
}
