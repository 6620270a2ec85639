//! Conversations and their rosters, titles and policies.

use super::StoreError;
use super::{Created, Revisioned, Updated};
use crate::model::{Conversation, Member};
use async_trait::async_trait;
use switchboard_protocol::ids::{BayId, ConversationId, ParticipantId};
use switchboard_protocol::model::Policy;

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

/// Conversations: rosters, titles and policies. Every change appends a
/// `Roster` entry to the Bay's log in the same atomic step, so feeds
/// subscribe members from exactly that entry.
///
/// # Errors
///
/// Every method fails with [`StoreError::Unavailable`] when the backing
/// service cannot be reached and [`StoreError::Corrupt`] when a stored record
/// does not decode.
#[async_trait]
pub trait ConversationStore: Send + Sync + 'static {
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
    /// it) and its [`RosterChange`](super::RosterChange) (the members before it), atomically,
    /// giving the conversation a new revision. `NotFound` when the
    /// conversation does not exist or the change changed nothing.
    async fn change_conversation(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        change: ConversationChange,
    ) -> Result<Updated<Conversation>, StoreError>;
    /// Adds (or re-roles) a member; see [`ConversationStore::change_conversation`].
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
}
