//! Stored records: Bays, participants, conversations and messages, as the
//! store keeps them. Wire views are built from these in the gateway.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use switchboard_protocol::event::{ConversationRef, Event, MessageView, ReplyToView, SenderView};
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId};
use switchboard_protocol::model::{
    ConversationType, MessageState, ParticipantKind, Policy, Role, RosterMember,
};
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

/// Joins a conversation's members with their participant records, in
/// member order. Members whose participant record is missing are skipped;
/// of two records with one id the first counts. The records are indexed by
/// id first, so the join is linear in the room size (a search per member
/// made a 1,000-agent webhook fan-out quadratic, BENCHMARKS.md).
pub fn roster(conversation: &Conversation, participants: &[Participant]) -> Vec<RosterMember> {
    let mut by_id: HashMap<&ParticipantId, &Participant> =
        HashMap::with_capacity(participants.len());
    for p in participants {
        by_id.entry(&p.id).or_insert(p);
    }
    conversation
        .members
        .iter()
        .filter_map(|m| {
            by_id.get(&m.participant).map(|p| RosterMember {
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
    /// cap. Every later `shouldRespond` is computed from these alone. An
    /// edit never changes them: new mentions in an edit wake nobody.
    pub routing: Routing,
    /// Position in the conversation's history, from 1, stamped by the store
    /// at append (0 for messages stored before it was kept). Read markers
    /// and `unreadCount` count in it.
    #[serde(default)]
    pub seq: u64,
    /// Bumped by every change after the append (edit, delete, reaction,
    /// vote); the store refuses a change made from an older version, so
    /// concurrent changes on any node never overwrite each other.
    #[serde(default)]
    pub version: u64,
    /// When the sender last edited the content; `None` if never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edited_at: Option<DateTime<Utc>>,
    /// When the message was deleted; a tombstone keeps only its id, sender
    /// and times (content, metadata, card, poll and reactions are removed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted_at: Option<DateTime<Utc>>,
    /// Reactions in the order they were first used, one entry per emoji.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reactions: Vec<Reaction>,
    /// A card the sender attached (protocol v1.11), or the poll card.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card: Option<switchboard_protocol::card::Card>,
    /// The poll this message carries (protocol v1.12, `card.poll`), votes included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll: Option<switchboard_protocol::poll::PollState>,
    /// `complete` for an ordinary message; a draft sent with `"stream":
    /// true` is `streaming` (its `content` is the text so far, and its
    /// `routing` is empty until it completes), then `complete`,
    /// `cancelled` or `failed`.
    #[serde(default, skip_serializing_if = "MessageState::is_complete")]
    pub state: MessageState,
    /// What producing the message cost, as its sender reported it
    /// (protocol §11 `usage`: token counts and `model`); `None` when not
    /// sent, and removed with the content when the message is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<switchboard_protocol::usage::Usage>,
}

/// One emoji's reactions on a message: who reacted, in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reaction {
    /// The emoji, as sent (one extended grapheme cluster).
    pub emoji: String,
    /// Who reacted with it; each participant at most once.
    pub by: Vec<ParticipantId>,
}

impl StoredMessage {
    /// A new message as the write path builds it: no card, poll, reactions
    /// or changes yet; the store stamps `created_at` and `seq`.
    pub fn new(
        id: MessageId,
        conversation_id: ConversationId,
        sender: SenderView,
        content: String,
        metadata: Option<serde_json::Value>,
        reply_to: Option<ReplyToView>,
        routing: Routing,
    ) -> Self {
        StoredMessage {
            id,
            conversation_id,
            sender,
            content,
            created_at: Utc::now(),
            metadata,
            reply_to,
            routing,
            seq: 0,
            version: 0,
            edited_at: None,
            deleted_at: None,
            reactions: Vec::new(),
            card: None,
            poll: None,
            state: MessageState::Complete,
            usage: None,
        }
    }

    /// Whether the message is an open draft.
    pub fn is_streaming(&self) -> bool {
        self.state == MessageState::Streaming
    }

    /// The content's length in Unicode scalar values: a draft's `offset`
    /// unit.
    pub fn length(&self) -> u64 {
        self.content.chars().count() as u64
    }

    /// Whether the message is a tombstone.
    pub fn is_deleted(&self) -> bool {
        self.deleted_at.is_some()
    }

    /// Turns the message into its tombstone: content and everything the
    /// sender gave is removed from storage; id, sender, routing and times stay.
    pub fn tombstone(&mut self, at: DateTime<Utc>) {
        self.deleted_at = Some(at);
        self.content.clear();
        self.metadata = None;
        self.reactions.clear();
        self.card = None;
        self.poll = None;
        self.usage = None;
    }

    /// The wire `metadata`: the sender's object, with `type` set to the
    /// card type when the message carries a card or a poll (protocol
    /// v1.11, v1.12: a poll is a message whose `metadata.type` is `card.poll`),
    /// and for a message with files, freshly signed URLs on each
    /// (protocol §10, [`crate::attachment_links`]; a card never has files).
    pub fn wire_metadata(&self) -> Option<serde_json::Value> {
        let kind = match (&self.poll, &self.card) {
            (Some(_), _) => switchboard_protocol::poll::POLL_CARD_TYPE,
            (None, Some(card)) => card.kind.as_str(),
            (None, None) => {
                let mut metadata = self.metadata.clone();
                // Each copy gets fresh signed URLs (protocol §10).
                if let Some(m) = &mut metadata {
                    crate::attachment_links::decorate(m);
                }
                return metadata;
            }
        };
        let mut map = match &self.metadata {
            Some(serde_json::Value::Object(map)) => map.clone(),
            _ => serde_json::Map::new(),
        };
        map.insert("type".into(), kind.into());
        Some(serde_json::Value::Object(map))
    }

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
            metadata: self.wire_metadata(),
            sender,
            mentions: self.routing.mentions.clone(),
            reply_to: self.reply_to.clone(),
            // A tombstone asks nobody to respond, and neither does a draft
            // (its routing runs at completion).
            should_respond: !self.is_deleted()
                && self.state == MessageState::Complete
                && self.routing.should_respond(recipient, &self.sender.id),
        }
    }

    /// The `/updates` / `/ws` event for `recipient`: `message`, or for a
    /// draft that just opened, `message.streaming`.
    pub fn event_for(&self, conversation: &ConversationRef, recipient: &ParticipantId) -> Event {
        if self.is_streaming() {
            return Event::MessageStreaming {
                conversation_id: conversation.id.clone(),
                message: self.view_for(recipient, self.sender.clone()),
                version: self.version,
                conversation: conversation.clone(),
            };
        }
        Event::Message {
            conversation_id: conversation.id.clone(),
            message: self.view_for(recipient, self.sender.clone()),
            conversation: conversation.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn participant(id: &str, kind: ParticipantKind, name: &str) -> Participant {
        Participant {
            id: ParticipantId(id.into()),
            kind,
            name: name.into(),
            description: Some(format!("{id} does things")),
        }
    }

    fn room(members: &[(&str, Role)]) -> Conversation {
        Conversation {
            id: ConversationId("c".into()),
            kind: ConversationType::Group,
            title: None,
            policy: Policy::default(),
            members: members
                .iter()
                .map(|(id, role)| Member {
                    participant: ParticipantId((*id).into()),
                    role: *role,
                })
                .collect(),
        }
    }

    #[test]
    fn roster_follows_member_order_skips_missing_records_and_takes_the_first_of_an_id() {
        let c = room(&[
            ("b", Role::Admin),
            ("gone", Role::Member),
            ("a", Role::Member),
        ]);
        let ps = [
            participant("a", ParticipantKind::User, "Ann"),
            participant("b", ParticipantKind::Agent, "Bot"),
            participant("a", ParticipantKind::User, "Ann (stale copy)"),
        ];
        let r = roster(&c, &ps);
        let ids: Vec<&str> = r.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["b", "a"]);
        assert_eq!(r[0].role, Role::Admin);
        assert_eq!(r[0].description.as_deref(), Some("b does things"));
        assert_eq!(r[1].name, "Ann");
        // Users' descriptions are never shown (protocol §3).
        assert_eq!(r[1].description, None);
    }

    /// A 1,000-member room: the size the webhook fan-out measured (the
    /// instruction count of `roster` here is in BENCHMARKS.md).
    #[test]
    fn roster_of_a_thousand_members_has_every_member() {
        let ids: Vec<String> = (0..1000).map(|i| format!("p_agent_{i:04}")).collect();
        let members: Vec<(&str, Role)> = ids.iter().map(|i| (i.as_str(), Role::Member)).collect();
        let c = room(&members);
        let ps: Vec<Participant> = ids
            .iter()
            .rev()
            .map(|i| participant(i, ParticipantKind::Agent, i))
            .collect();
        let r = roster(&c, &ps);
        assert_eq!(r.len(), 1000);
        assert!(r.iter().zip(&ids).all(|(m, id)| m.id.as_str() == id));
    }
}
