//! Stored records: Bays, participants, conversations and messages, as the
//! store keeps them. Wire views are built from these in the gateway.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use switchboard_protocol::event::{ConversationRef, Event, MessageView, ReplyToView, SenderView};
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId};
use switchboard_protocol::model::{ConversationType, ParticipantKind, Policy, Role, RosterMember};
use switchboard_protocol::routing::Routing;

/// A tenant. Nothing is ever visible across Bays (protocol §1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bay {
    /// Caller-chosen (1–64 chars of `[A-Za-z0-9_-]`) or minted; unique
    /// across the store and never changed.
    pub id: BayId,
    /// Display name, 1–200 chars.
    pub name: String,
}

/// A human (`user`) or AI (`agent`) participant of a Bay.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Participant {
    /// Caller-chosen (1–64 chars of `[A-Za-z0-9_-]`) or minted as `p_` + a
    /// lowercase ULID; unique within the Bay.
    pub id: ParticipantId,
    /// `user` or `agent`; fixed at creation, and it fixes the token prefix
    /// (`bay_u_…` / `bay_…`, protocol §2).
    pub kind: ParticipantKind,
    /// Display name, 1–200 chars, trimmed; what `@mentions` match (protocol §7).
    pub name: String,
    /// What an agent is FOR; never exposed for users (protocol §3).
    pub description: Option<String>,
}

/// A conversation member and its role.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// A participant of the same Bay.
    pub participant: ParticipantId,
    /// The member's role in this conversation.
    pub role: Role,
}

/// A conversation with its roster and policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conversation {
    /// Caller-chosen (1–64 chars of `[A-Za-z0-9_-]`) or minted as `c_` + a
    /// lowercase ULID; unique within the Bay.
    pub id: ConversationId,
    /// `DM`, `AGENT_CHAT` or `GROUP`; fixed at creation.
    pub kind: ConversationType,
    /// Display title, up to 200 chars; `None` when unset.
    pub title: Option<String>,
    /// The reply policy; stored for every type but applied only to GROUP
    /// (protocol §3).
    pub policy: Policy,
    /// Invariant: each participant appears at most once.
    pub members: Vec<Member>,
}

impl Conversation {
    /// The `{id, type, title}` reference events and envelopes carry.
    pub fn reference(&self) -> ConversationRef {
        ConversationRef {
            id: self.id.clone(),
            kind: self.kind,
            title: self.title.clone(),
        }
    }

    /// The member entry of `participant`, if it is one.
    pub fn member(&self, participant: &ParticipantId) -> Option<&Member> {
        self.members.iter().find(|m| &m.participant == participant)
    }

    /// Member ids in roster order.
    pub fn member_ids(&self) -> Vec<ParticipantId> {
        self.members.iter().map(|m| m.participant.clone()).collect()
    }
}

/// Joins a conversation's members with their participant records. Members
/// whose participant record is missing are skipped.
pub fn roster(conversation: &Conversation, participants: &[Participant]) -> Vec<RosterMember> {
    conversation
        .members
        .iter()
        .filter_map(|m| {
            participants
                .iter()
                .find(|p| p.id == m.participant)
                .map(|p| RosterMember {
                    id: p.id.clone(),
                    name: p.name.clone(),
                    kind: p.kind,
                    role: m.role,
                    description: match p.kind {
                        ParticipantKind::Agent => p.description.clone(),
                        ParticipantKind::User => None,
                    },
                })
        })
        .collect()
}

/// A stored message. `sender` is a snapshot taken at write time, and
/// `routing` holds the write-time routing facts, so every later delivery
/// (live, replay, REST) gives each recipient the same `shouldRespond`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredMessage {
    /// `msg_` + a lowercase ULID, minted by the conversation actor; the
    /// client's dedupe key.
    pub id: MessageId,
    /// The conversation whose history holds the message.
    pub conversation_id: ConversationId,
    /// The sender as of write time (name, kind, role then). Events deliver
    /// this snapshot; REST re-resolves it against the current roster.
    pub sender: SenderView,
    /// The text as sent, 1 to `limits.max_content_chars` chars.
    pub content: String,
    /// Server time of the append. Invariant: strictly increasing within a
    /// conversation (the store bumps it by 1 ms when needed), so history
    /// ordered by `created_at` is append order and `?since=` never skips.
    pub created_at: DateTime<Utc>,
    /// The sender's metadata object, with `addressedAgents` written by the
    /// server only (protocol §4); `None` when there is none.
    pub metadata: Option<serde_json::Value>,
    /// The quoted message, resolved at write time (protocol §11, v1.6).
    pub reply_to: Option<ReplyToView>,
    /// Write-time routing facts; `suppressed` is set by the store's round
    /// cap. Every later `shouldRespond` is computed from these alone.
    pub routing: Routing,
}

impl StoredMessage {
    /// `createdAt` on the wire: RFC 3339, UTC, milliseconds.
    pub fn created_at_wire(&self) -> String {
        self.created_at.to_rfc3339_opts(SecondsFormat::Millis, true)
    }

    /// The protocol §11 message view for `recipient`, with `sender` as given
    /// (events use the write-time snapshot, REST resolves it against the
    /// current roster).
    pub fn view_for(&self, recipient: &ParticipantId, sender: SenderView) -> MessageView {
        MessageView {
            id: self.id.clone(),
            sender_id: self.sender.id.clone(),
            sender_type: self.sender.kind.sender_type(),
            content: self.content.clone(),
            created_at: self.created_at_wire(),
            metadata: self.metadata.clone(),
            sender,
            mentions: self.routing.mentions.clone(),
            reply_to: self.reply_to.clone(),
            should_respond: self.routing.should_respond(recipient, &self.sender.id),
        }
    }

    /// The `/updates` / `/ws` event for `recipient`.
    pub fn event_for(&self, conversation: &ConversationRef, recipient: &ParticipantId) -> Event {
        Event::Message {
            conversation_id: conversation.id.clone(),
            message: self.view_for(recipient, self.sender.clone()),
            conversation: conversation.clone(),
        }
    }
}
