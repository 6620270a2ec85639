//! Streaming drafts: the memory engine's [`DraftStore`].

use super::log::log_of;
use super::MemoryStore;
use crate::store::log::{Change, LogEvent};
use crate::store::{
    next_round, Changed, DraftAppend, DraftAppended, DraftStore, MessageChange, OpenDraft,
    RoundStep, StoreError,
};
use async_trait::async_trait;
use chrono::Utc;
use switchboard_protocol::ids::BayId;

#[async_trait]
impl DraftStore for MemoryStore {
    async fn append_draft(
        &self,
        bay: &BayId,
        append: DraftAppend,
    ) -> Result<DraftAppended, StoreError> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let Some(b) = st.bays.get_mut(bay) else {
            return Ok(DraftAppended::NotFound);
        };
        let Some(conv) = b.conversations.get_mut(&append.conversation.id) else {
            return Ok(DraftAppended::NotFound);
        };
        if conv.revision != append.revision {
            return Ok(DraftAppended::Stale);
        }
        let Some(at) = conv.position(&append.message) else {
            return Ok(DraftAppended::NotFound);
        };
        let message = &mut conv.messages[at];
        if !message.is_streaming() {
            return Ok(DraftAppended::Closed);
        }
        if message.version != append.version {
            return Ok(DraftAppended::Conflict);
        }
        message.version += 1;
        message.content.push_str(&append.text);
        let version = message.version;
        if let Some(d) = b.drafts.get_mut(&append.message) {
            d.last_activity = Utc::now();
        }
        let entry = log_of(&mut st.logs, bay).append(
            LogEvent::Change {
                conversation: append.conversation,
                change: Box::new(Change::Delta {
                    message: append.message,
                    offset: append.offset,
                    text: append.text,
                    version,
                }),
            },
            &self.limits,
        );
        Ok(DraftAppended::Appended { entry, version })
    }

    async fn close_draft(
        &self,
        bay: &BayId,
        mut change: MessageChange,
        round: Option<RoundStep>,
    ) -> Result<Changed, StoreError> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let Some(b) = st.bays.get_mut(bay) else {
            return Ok(Changed::NotFound);
        };
        let Some(conv) = b.conversations.get_mut(&change.conversation.id) else {
            return Ok(Changed::NotFound);
        };
        if conv.revision != change.revision {
            return Ok(Changed::Stale);
        }
        let Some(at) = conv.position(&change.message.id) else {
            return Ok(Changed::NotFound);
        };
        let current = &conv.messages[at];
        if !current.is_streaming() || current.version + 1 != change.message.version {
            return Ok(Changed::Conflict);
        }
        if let Some(step) = round {
            let suppressed;
            (conv.agent_rounds, suppressed) = next_round(
                conv.agent_rounds,
                step.sender,
                step.cap,
                change.message.routing.suppressed,
            );
            change.message.routing.suppressed = suppressed;
            if let Change::Completed { message } = &mut change.change {
                message.routing.suppressed = suppressed;
            }
        }
        conv.messages[at] = change.message;
        b.drafts.remove(&conv.messages[at].id);
        let entry = log_of(&mut st.logs, bay).append(
            LogEvent::Change {
                conversation: change.conversation,
                change: Box::new(change.change),
            },
            &self.limits,
        );
        Ok(Changed::Changed(entry))
    }

    async fn open_drafts(&self, bay: &BayId) -> Result<Vec<OpenDraft>, StoreError> {
        let st = self.state.lock();
        let mut out: Vec<OpenDraft> = st
            .bays
            .get(bay)
            .map(|b| b.drafts.values().cloned().collect())
            .unwrap_or_default();
        out.sort_by_key(|d| d.last_activity);
        Ok(out)
    }

    async fn draft_bays(&self) -> Result<Vec<BayId>, StoreError> {
        let st = self.state.lock();
        Ok(st
            .bays
            .iter()
            .filter(|(_, b)| !b.drafts.is_empty())
            .map(|(id, _)| id.clone())
            .collect())
    }

    async fn prune_draft_bay(&self, _bay: &BayId) -> Result<(), StoreError> {
        // The list above is computed, never stored: nothing to prune.
        Ok(())
    }
}
