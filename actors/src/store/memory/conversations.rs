//! Conversations: rosters, titles, policies: the memory engine's [`ConversationStore`].

use super::log::log_of;
use super::{ConversationState, MemoryStore};
use crate::model::Conversation;
use crate::store::{
    new_revision, ConversationChange, ConversationStore, Created, Revisioned, RosterRule,
    StoreError, Updated,
};
use async_trait::async_trait;
use std::collections::HashMap;
use switchboard_protocol::ids::{BayId, ConversationId};

#[async_trait]
impl ConversationStore for MemoryStore {
    async fn create_conversation(
        &self,
        bay: &BayId,
        conversation: Conversation,
    ) -> Result<Created<Conversation>, StoreError> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let Some(b) = st.bays.get_mut(bay) else {
            return Ok(Created::AlreadyExists);
        };
        if b.conversations.contains_key(&conversation.id) {
            return Ok(Created::AlreadyExists);
        }
        log_of(&mut st.logs, bay).append_roster(Vec::new(), &conversation, &self.limits);
        b.conversations.insert(
            conversation.id.clone(),
            ConversationState {
                conversation: conversation.clone(),
                messages: Vec::new(),
                agent_rounds: 0,
                revision: new_revision(),
                reads: HashMap::new(),
            },
        );
        Ok(Created::Created(conversation))
    }

    async fn conversation(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
    ) -> Result<Option<Conversation>, StoreError> {
        Ok(self
            .state
            .lock()
            .bays
            .get(bay)
            .and_then(|b| b.conversations.get(conversation))
            .map(|c| c.conversation.clone()))
    }

    async fn conversation_revisioned(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
    ) -> Result<Option<Revisioned<Conversation>>, StoreError> {
        Ok(self
            .state
            .lock()
            .bays
            .get(bay)
            .and_then(|b| b.conversations.get(conversation))
            .map(|c| Revisioned {
                value: c.conversation.clone(),
                revision: c.revision,
            }))
    }

    async fn conversations(&self, bay: &BayId) -> Result<Vec<Conversation>, StoreError> {
        let st = self.state.lock();
        let mut out: Vec<Conversation> = st
            .bays
            .get(bay)
            .map(|b| {
                b.conversations
                    .values()
                    .map(|c| c.conversation.clone())
                    .collect()
            })
            .unwrap_or_default();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    async fn change_conversation(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        change: ConversationChange,
    ) -> Result<Updated<Conversation, RosterRule>, StoreError> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let Some(c) = st
            .bays
            .get_mut(bay)
            .and_then(|b| b.conversations.get_mut(conversation))
        else {
            return Ok(Updated::NotFound);
        };
        let before = c.conversation.member_ids();
        let mut snapshot = c.conversation.clone();
        match change.apply(&mut snapshot) {
            Ok(true) => {}
            Ok(false) => return Ok(Updated::NotFound),
            Err(rule) => return Ok(Updated::Refused(rule)),
        }
        c.conversation = snapshot.clone();
        c.revision = new_revision();
        log_of(&mut st.logs, bay).append_roster(before, &snapshot, &self.limits);
        Ok(Updated::Updated(snapshot))
    }
}
