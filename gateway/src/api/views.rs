//! Building the agent API's response shapes from stored records: the
//! context envelope (protocol §3) and enriched REST messages (protocol §5).

use serde::Serialize;
use std::collections::{HashMap, HashSet};
use switchboard_actors::model::{roster, Conversation, Participant, StoredMessage};
use switchboard_actors::store::{Store, StoreError};
use switchboard_protocol::context::{ContextEnvelope, ParticipantView, YouView};
use switchboard_protocol::event::REPLY_PREVIEW_CHARS;
use switchboard_protocol::event::{MessageView, SenderView};
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId};
use switchboard_protocol::model::{MessageState, ParticipantKind, Policy, RosterMember};
use switchboard_protocol::poll::PollView;
use switchboard_protocol::routing::{instructions, is_orchestrator, policy_view};

/// A conversation with the participant records of its members.
pub struct Room {
    /// The conversation as read from the store.
    pub conversation: Conversation,
    /// Its members joined with their participant records, in roster order.
    /// Invariant: built from `conversation.members` (members without a
    /// participant record are left out).
    pub roster: Vec<RosterMember>,
}

impl Room {
    /// Joins a conversation with the Bay's participants.
    pub fn new(conversation: Conversation, participants: &[Participant]) -> Self {
        let roster = roster(&conversation, participants);
        Room {
            conversation,
            roster,
        }
    }

    /// The context envelope for `reader` (protocol §3), `instructions` built
    /// for that reader.
    pub fn envelope(&self, reader: &ParticipantId) -> ContextEnvelope {
        let c = &self.conversation;
        let reference = c.reference();
        let policy = self.effective_policy();
        ContextEnvelope {
            participants: self.participant_views(&policy),
            policy: policy_view(c.kind, &policy),
            you: YouView {
                agent_id: reader.clone(),
                is_orchestrator: is_orchestrator(c.kind, &policy, reader),
            },
            instructions: instructions(reader, &reference, &c.policy, &self.roster),
            conversation: reference,
        }
    }

    /// The policy as the envelope states it: the envelope must say what
    /// routing does, so a designated agent that is not (or no longer) an
    /// agent member of the room is no designated agent at all, exactly as
    /// routing and `instructions` treat it.
    pub fn effective_policy(&self) -> Policy {
        let mut policy = self.conversation.policy.clone();
        if let Some(d) = &policy.designated_agent_id {
            let is_agent_member = self
                .roster
                .iter()
                .any(|m| &m.id == d && m.kind == ParticipantKind::Agent);
            if !is_agent_member {
                policy.designated_agent_id = None;
            }
        }
        policy
    }

    /// The envelope's `participants` under `policy` (see
    /// [`Room::effective_policy`]): the same for every reader.
    pub fn participant_views(&self, policy: &Policy) -> Vec<ParticipantView> {
        let kind = self.conversation.kind;
        self.roster
            .iter()
            .map(|m| ParticipantView {
                id: m.id.clone(),
                name: m.name.clone(),
                kind: m.kind,
                role: m.role,
                is_orchestrator: is_orchestrator(kind, policy, &m.id),
                description: m.description.clone(),
            })
            .collect()
    }

    /// A stored message as REST returns it to `reader`: the sender resolved
    /// against the current roster (`role: null` once they left, protocol §5).
    pub fn rest_message(&self, message: &StoredMessage, reader: &ParticipantId) -> RestMessage {
        let sender = match self.roster.iter().find(|m| m.id == message.sender.id) {
            Some(m) => SenderView {
                id: m.id.clone(),
                name: m.name.clone(),
                kind: m.kind,
                role: Some(m.role),
            },
            None => SenderView {
                role: None,
                ..message.sender.clone()
            },
        };
        RestMessage::of(message, reader, sender)
    }
}

/// The REST message shape: the event's message fields plus
/// `conversationId` and the fields protocol §11 keeps off events
/// (`editedAt`, `deletedAt`, `reactions`, `cardPayload`, `poll`): REST is
/// the authority on a message's current state.
#[derive(Serialize, Debug, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestMessage {
    /// The conversation the message belongs to (REST carries it on the
    /// message; events carry it on the event).
    pub conversation_id: ConversationId,
    /// The message fields, flattened: the same as an event's `message`,
    /// with `sender` resolved against the current roster.
    #[serde(flatten)]
    pub view: MessageView,
    /// When the sender last edited it (RFC 3339 UTC, ms), or `null`.
    #[schema(required = true, format = DateTime)]
    pub edited_at: Option<String>,
    /// When it was deleted, or `null`. A deleted message is a tombstone:
    /// `content` is `""`, `metadata`, `cardPayload` and `poll` are `null`.
    #[schema(required = true, format = DateTime)]
    pub deleted_at: Option<String>,
    /// One entry per emoji in first-use order: how many members hold it
    /// and whether the reader is one of them.
    pub reactions: Vec<ReactionView>,
    /// The card's payload when `metadata.type` is a card type (protocol
    /// v1.11: `card.calendar`, `card.email`; v1.12: `card.poll` with
    /// `{pollId, question, options, askedBy, allowMultiple}`), else `null`.
    #[schema(required = true, value_type = Option<Object>)]
    pub card_payload: Option<serde_json::Value>,
    /// A `card.poll` message's tally as the reader sees it, else `null`.
    #[schema(required = true)]
    pub poll: Option<PollView>,
    /// `complete`, or for a streamed message `streaming` (an open draft:
    /// `content` is the text so far), `cancelled` or `failed`.
    pub state: MessageState,
    /// Bumped by every change after the send (edit, delete, reaction, vote,
    /// a draft's flush of appends).
    pub version: u64,
    /// The sender's `usage` as sent (protocol §11: `model` and token
    /// counts under the sender's names), else `null`; kept off events
    /// like `cardPayload`.
    #[schema(required = true, value_type = Option<Object>)]
    pub usage: Option<switchboard_protocol::usage::Usage>,
}

/// One emoji's reactions on a message, as `reader` sees them.
#[derive(Serialize, Debug, PartialEq, Eq, utoipa::ToSchema)]
pub struct ReactionView {
    /// The emoji.
    pub emoji: String,
    /// Members holding it, at least 1.
    pub count: u32,
    /// Whether the reader is one of them.
    pub mine: bool,
}

impl RestMessage {
    /// `message` as REST gives it to `reader` (a member), with `sender` as
    /// resolved by the caller.
    pub fn of(message: &StoredMessage, reader: &ParticipantId, sender: SenderView) -> Self {
        let time = |t: Option<chrono::DateTime<chrono::Utc>>| {
            t.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        };
        RestMessage {
            conversation_id: message.conversation_id.clone(),
            view: message.view_for(reader, sender),
            edited_at: time(message.edited_at),
            deleted_at: time(message.deleted_at),
            reactions: reactions_for(message, reader),
            card_payload: match (&message.poll, &message.card) {
                (Some(poll), _) => Some(poll.card_payload()),
                (None, Some(card)) => Some(card.payload.clone()),
                (None, None) => None,
            },
            poll: message.poll.as_ref().map(|p| p.view(reader, true)),
            state: message.state,
            version: message.version,
            usage: message.usage.clone(),
        }
    }
}

/// The reactions on `message` as `reader` sees them.
pub fn reactions_for(message: &StoredMessage, reader: &ParticipantId) -> Vec<ReactionView> {
    message
        .reactions
        .iter()
        .map(|r| ReactionView {
            emoji: r.emoji.clone(),
            count: r.by.len() as u32,
            mine: r.by.contains(reader),
        })
        .collect()
}

/// Sets each `replyTo.preview` in `messages` to the quoted message's
/// current text (its first 80 characters, `""` once deleted, protocol §11
/// v1.6): the preview stored with a reply must not show text its author
/// has since edited or deleted. Quoted messages outside `messages` are
/// read from the store, each once.
///
/// # Errors
///
/// Store failures reading a quoted message.
pub async fn refresh_previews(
    store: &dyn Store,
    bay: &BayId,
    conversation: &ConversationId,
    messages: &mut [StoredMessage],
) -> Result<(), StoreError> {
    let mut current: HashMap<MessageId, String> = messages
        .iter()
        .map(|m| (m.id.clone(), m.content.clone()))
        .collect();
    let missing: HashSet<MessageId> = messages
        .iter()
        .filter_map(|m| m.reply_to.as_ref().map(|r| r.id.clone()))
        .filter(|id| !current.contains_key(id))
        .collect();
    for id in missing {
        if let Some(quoted) = store.message(bay, conversation, &id).await? {
            current.insert(id, quoted.content);
        }
    }
    for m in messages.iter_mut() {
        if let Some(reply) = &mut m.reply_to {
            if let Some(text) = current.get(&reply.id) {
                reply.preview = text.chars().take(REPLY_PREVIEW_CHARS).collect();
            }
        }
    }
    Ok(())
}
