//! Conversation summaries: the memory engine's [`SummaryStore`].

use super::{now_ms, MemoryStore};
use crate::store::{RefreshSlot, StoreError, StoredSummary, SummaryStore, SummaryWritten};
use async_trait::async_trait;
use std::collections::{HashMap, VecDeque};
use std::time::Duration;
use switchboard_protocol::ids::{BayId, ConversationId, ParticipantId};

/// What the summaries area keeps, for every Bay.
#[derive(Default)]
pub(super) struct SummaryState {
    /// The stored summary of each conversation.
    summaries: HashMap<(BayId, ConversationId), StoredSummary>,
    /// Each Bay's designated summarizer.
    summarizers: HashMap<BayId, ParticipantId>,
    /// Times (Unix ms) of the refreshes counted per conversation, oldest
    /// first, pruned to the window on each take.
    refreshes: HashMap<(BayId, ConversationId), VecDeque<u64>>,
}

#[async_trait]
impl SummaryStore for MemoryStore {
    async fn summary(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
    ) -> Result<Option<StoredSummary>, StoreError> {
        let st = self.state.lock();
        let key = (bay.clone(), conversation.clone());
        Ok(st.summaries.summaries.get(&key).cloned())
    }

    async fn put_summary(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        mut summary: StoredSummary,
    ) -> Result<SummaryWritten, StoreError> {
        let mut st = self.state.lock();
        let key = (bay.clone(), conversation.clone());
        let previous = st.summaries.summaries.get(&key);
        if let Some(current) = previous.filter(|c| c.through_seq > summary.through_seq) {
            return Ok(SummaryWritten::Stale(current.clone()));
        }
        summary.memory.version = previous.map_or(0, |c| c.memory.version) + 1;
        st.summaries.summaries.insert(key, summary.clone());
        Ok(SummaryWritten::Stored(summary))
    }

    async fn summarizer(&self, bay: &BayId) -> Result<Option<ParticipantId>, StoreError> {
        Ok(self.state.lock().summaries.summarizers.get(bay).cloned())
    }

    async fn set_summarizer(
        &self,
        bay: &BayId,
        participant: Option<&ParticipantId>,
    ) -> Result<(), StoreError> {
        let mut st = self.state.lock();
        match participant {
            Some(p) => st.summaries.summarizers.insert(bay.clone(), p.clone()),
            None => st.summaries.summarizers.remove(bay),
        };
        Ok(())
    }

    async fn take_summary_refresh(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        max: u32,
        window: Duration,
    ) -> Result<RefreshSlot, StoreError> {
        let now = now_ms();
        let window_ms = window.as_millis().max(1) as u64;
        let mut st = self.state.lock();
        let times = st
            .summaries
            .refreshes
            .entry((bay.clone(), conversation.clone()))
            .or_default();
        while times.front().is_some_and(|t| t + window_ms <= now) {
            times.pop_front();
        }
        if times.len() >= max.max(1) as usize {
            let oldest = times.front().copied().unwrap_or(now);
            let wait = (oldest + window_ms).saturating_sub(now).max(1);
            return Ok(RefreshSlot::Limited {
                retry_after: Duration::from_millis(wait),
            });
        }
        times.push_back(now);
        Ok(RefreshSlot::Taken)
    }
}
