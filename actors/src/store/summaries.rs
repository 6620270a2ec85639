//! Rolling conversation summaries (protocol §6): the summary each
//! conversation's summarizer wrote, the Bay's designated summarizer agent,
//! and the per-conversation budget of `?refresh=1` requests.
//!
//! The designation lives here rather than in the directory: it only
//! matters to summaries, and keeping it beside them lets one area own
//! everything `GET`/`PUT …/summary` read (docs/summary.md).

use super::StoreError;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use switchboard_protocol::ids::{BayId, ConversationId, ParticipantId};
use switchboard_protocol::summary::ConversationMemory;

/// A summary as the store keeps it: the wire record and the `seq` of its
/// boundary message, which orders summaries (a write may not move the
/// boundary back).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredSummary {
    /// The record as `GET …/summary` answers it. `version` is the store's:
    /// whatever a writer puts there is replaced.
    pub memory: ConversationMemory,
    /// `seq` of `memory.through_message_id` in its conversation.
    pub through_seq: u64,
}

/// Outcome of [`SummaryStore::put_summary`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SummaryWritten {
    /// Stored with the next version (1 for the first summary); the record
    /// as stored.
    Stored(StoredSummary),
    /// The stored summary's boundary lies after the new one's: nothing
    /// changed (409 `SUMMARY_STALE`). Carries the stored summary.
    Stale(StoredSummary),
}

/// Outcome of [`SummaryStore::take_summary_refresh`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefreshSlot {
    /// Counted: the refresh may go ahead.
    Taken,
    /// The window's budget is spent; the oldest counted refresh leaves the
    /// window after `retry_after` (429 `SUMMARY_REFRESH_LIMITED`).
    Limited {
        /// How long until one more refresh is allowed (at least 1 ms).
        retry_after: Duration,
    },
}

/// Summaries, the summarizer designation and the refresh budget.
///
/// # Errors
///
/// Every method fails with [`StoreError::Unavailable`] when the backing
/// service cannot be reached and [`StoreError::Corrupt`] when a stored record
/// does not decode.
#[async_trait]
pub trait SummaryStore: Send + Sync + 'static {
    /// The conversation's summary, `None` when none was written.
    async fn summary(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
    ) -> Result<Option<StoredSummary>, StoreError>;
    /// Stores `summary` as the conversation's, atomically: refused
    /// ([`SummaryWritten::Stale`]) when the stored one's `through_seq` is
    /// greater, else stored with `version` = the stored one's + 1 (1 when
    /// there was none). An equal boundary is a rewrite and is accepted.
    async fn put_summary(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        summary: StoredSummary,
    ) -> Result<SummaryWritten, StoreError>;
    /// The Bay's summarizer agent, `None` when none is designated.
    async fn summarizer(&self, bay: &BayId) -> Result<Option<ParticipantId>, StoreError>;
    /// Designates `participant` as the Bay's summarizer (`None`: clears
    /// it). The caller checks that it is an agent of the Bay.
    async fn set_summarizer(
        &self,
        bay: &BayId,
        participant: Option<&ParticipantId>,
    ) -> Result<(), StoreError>;
    /// Counts one `?refresh=1` of the conversation against a sliding
    /// window of `window` holding at most `max` (≥ 1), atomically across
    /// nodes: [`RefreshSlot::Taken`] when it fits (and is counted), else
    /// [`RefreshSlot::Limited`] (not counted).
    async fn take_summary_refresh(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        max: u32,
        window: Duration,
    ) -> Result<RefreshSlot, StoreError>;
}
