//! Conversations and their rosters, titles and policies.

use super::StoreError;
use super::{Created, Revisioned, Updated};
use crate::model::{Conversation, Member};
use async_trait::async_trait;
use switchboard_protocol::ids::{BayId, ConversationId, ParticipantId};
use switchboard_protocol::model::{Policy, ReplyPolicy};

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

/// A rule every conversation keeps through roster and policy changes
/// (docs/conversations.md). Both engines check it inside the change's
/// atomic step, so no interleaving of concurrent changes breaks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RosterRule {
    /// A DM or AGENT_CHAT keeps exactly the two members it was created
    /// with: none can be added or removed (roles may change).
    DirectMembersFixed,
    /// A DEDICATED room's designated agent stays a member: it is the one
    /// agent that answers there, so it leaves only after the policy names
    /// another agent or another reply policy.
    DesignatedAgentStays,
}

impl RosterRule {
    /// Whether `c` keeps this rule.
    pub fn holds(self, c: &Conversation) -> bool {
        match self {
            // Checked against the members before the change, in `apply`.
            RosterRule::DirectMembersFixed => true,
            RosterRule::DesignatedAgentStays => {
                c.policy.agent_reply_policy != ReplyPolicy::Dedicated
                    || c.policy
                        .designated_agent_id
                        .as_ref()
                        .is_none_or(|d| c.member(d).is_some())
            }
        }
    }
}

impl ConversationChange {
    /// Applies the change: `Ok(false)` when it changed nothing the caller
    /// should log (removing a participant that was not a member), and
    /// `Err` (with `c` left as it may be half-changed: drop it) when the
    /// result would break a [`RosterRule`] the conversation kept before.
    /// A rule already broken before the change (records stored before the
    /// rule existed) does not block unrelated changes.
    pub fn apply(&self, c: &mut Conversation) -> Result<bool, RosterRule> {
        let before_ids = c.member_ids();
        let dedicated_kept = RosterRule::DesignatedAgentStays.holds(c);
        let changed = self.apply_unchecked(c);
        if c.kind.is_direct() && c.member_ids() != before_ids {
            return Err(RosterRule::DirectMembersFixed);
        }
        if dedicated_kept && !RosterRule::DesignatedAgentStays.holds(c) {
            return Err(RosterRule::DesignatedAgentStays);
        }
        Ok(changed)
    }

    fn apply_unchecked(&self, c: &mut Conversation) -> bool {
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
    /// conversation does not exist or the change changed nothing;
    /// `Refused` (nothing stored) when the change would break a
    /// [`RosterRule`].
    async fn change_conversation(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        change: ConversationChange,
    ) -> Result<Updated<Conversation, RosterRule>, StoreError>;
    /// Adds (or re-roles) a member; see [`ConversationStore::change_conversation`].
    async fn upsert_member(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        member: Member,
    ) -> Result<Updated<Conversation, RosterRule>, StoreError> {
        self.change_conversation(bay, conversation, ConversationChange::UpsertMember(member))
            .await
    }
    /// Removes a member. `NotFound` when the conversation does not exist or
    /// the participant was not a member; `Refused` for a member of a DM or
    /// AGENT_CHAT, or a DEDICATED room's designated agent.
    async fn remove_member(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        participant: &ParticipantId,
    ) -> Result<Updated<Conversation, RosterRule>, StoreError> {
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
    ) -> Result<Updated<Conversation, RosterRule>, StoreError> {
        self.change_conversation(
            bay,
            conversation,
            ConversationChange::Update { title, policy },
        )
        .await
    }
}
