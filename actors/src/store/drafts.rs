//! Streaming drafts: appends, their end, and the open-draft index.

use super::messages::{Changed, MessageChange};
use super::StoreError;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use switchboard_protocol::cursor::EntryId;
use switchboard_protocol::event::ConversationRef;
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId};
use switchboard_protocol::model::ParticipantKind;

/// One flush window's appends to an open draft, applied by
/// [`DraftStore::append_draft`] in one atomic write that also logs the
/// `message.delta`.
#[derive(Debug, Clone)]
pub struct DraftAppend {
    /// `{ id, type, title }` of the draft's conversation, logged with the delta.
    pub conversation: ConversationRef,
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

/// Outcome of [`DraftStore::append_draft`].
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
/// its append (a draft's completion): see [`next_round`](super::next_round).
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

/// Streaming drafts (protocol §11, streaming replies): appends, their end,
/// and the open drafts the orphan sweep and presence read.
///
/// # Errors
///
/// Every method fails with [`StoreError::Unavailable`] when the backing
/// service cannot be reached and [`StoreError::Corrupt`] when a stored record
/// does not decode.
#[async_trait]
pub trait DraftStore: Send + Sync + 'static {
    /// Appends text to an open draft and logs the `message.delta`, in one
    /// atomic step, if the draft is still open and at `append.version`.
    /// Also refreshes the draft's activity time (see [`DraftStore::open_drafts`]).
    async fn append_draft(
        &self,
        bay: &BayId,
        append: DraftAppend,
    ) -> Result<DraftAppended, StoreError>;
    /// Ends an open draft: replaces it with `change.message` (state
    /// `complete`, `cancelled` or `failed`, at the stored version + 1) and
    /// logs `change.change`, atomically, like [`MessageStore::change_message`](super::MessageStore::change_message).
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
    /// Forgets `bay` in [`DraftStore::draft_bays`] if it has no open draft.
    async fn prune_draft_bay(&self, bay: &BayId) -> Result<(), StoreError>;
    /// Participants with an open streaming draft in the Bay (presence
    /// `streaming`), each once: the authors of [`DraftStore::open_drafts`].
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
}
