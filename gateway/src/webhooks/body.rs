//! What a webhook delivery carries (protocol §11, "Webhook contract v2").
//!
//! A message becomes `message.created` with exactly the v2 table's fields:
//! `event`, `eventId`, `schemaVersion`, `conversationId`, `conversation`,
//! `sender`, `participants`, `policy`, `you`, `instructions`, `mentions`,
//! `history` (up to 20 prior turns, oldest first) and `message`. The
//! roster, policy and primer are the conversation's at delivery time;
//! `shouldRespond` and `mentions` are the message's own, as on `/ws`.
//!
//! Lifecycle events (`message.updated`, `reaction.added`, …) go in the same
//! envelope: `event` is their type, `eventId` and `schemaVersion` as above,
//! and the rest is the `/ws` event's fields.
//!
//! `eventId` is derived from the log entry and the recipient, so every
//! retry of one event to one agent carries the same id: receivers dedupe
//! on it (it is also the Standard Webhooks `webhook-id`).

use crate::api::views::Room;
use serde::Serialize;
use sha2::{Digest, Sha256};
use switchboard_actors::model::{Participant, StoredMessage};
use switchboard_actors::store::log::LogRecord;
use switchboard_actors::store::{Store, StoreError};
use switchboard_protocol::context::{ParticipantView, PolicyView};
use switchboard_protocol::cursor::Epoch;
use switchboard_protocol::event::{ConversationRef, Event, ReplyToView, SenderView};
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId};
use switchboard_protocol::model::SenderType;

/// `schemaVersion` of every delivery (protocol §11: v2).
pub const SCHEMA_VERSION: u8 = 2;
/// Prior turns in `history` (protocol §11: "up to 20").
pub const HISTORY_TURNS: usize = 20;

/// The stable id of `record`'s delivery to `agent`: `evt_` + 32 hex digits
/// of SHA-256 over the Bay, the agent, the log epoch and the entry id.
pub fn event_id(bay: &BayId, agent: &ParticipantId, epoch: &Epoch, record: &LogRecord) -> String {
    let mut h = Sha256::new();
    for part in [
        bay.as_str(),
        agent.as_str(),
        epoch.0.as_str(),
        &record.id.to_string(),
    ] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    format!("evt_{}", &hex::encode(h.finalize())[..32])
}

/// `you` of a v2 body.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WebhookYou {
    /// The receiving agent.
    pub agent_id: ParticipantId,
    /// Whether it orchestrates this conversation.
    pub is_orchestrator: bool,
    /// Its verdict for this message (protocol §4): speak only when true.
    pub should_respond: bool,
}

/// One `history` turn.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Turn {
    /// The turn's message id.
    pub id: MessageId,
    /// Who wrote it.
    pub sender_id: ParticipantId,
    /// Their display name as written.
    pub sender_name: String,
    /// `USER` or `AGENT`.
    pub sender_type: SenderType,
    /// Its text (`""` for a deleted message).
    pub content: String,
    /// RFC 3339 UTC, milliseconds.
    pub created_at: String,
    /// The message it quoted, or `null`.
    pub reply_to: Option<ReplyToView>,
}

/// `message` of a v2 body.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WebhookMessage {
    /// The message id.
    pub id: MessageId,
    /// Its sender.
    pub sender_id: ParticipantId,
    /// `USER` or `AGENT`.
    pub sender_type: SenderType,
    /// The text.
    pub content: String,
    /// The metadata object, or `null`.
    pub metadata: Option<serde_json::Value>,
    /// RFC 3339 UTC, milliseconds.
    pub created_at: String,
    /// The message it quotes, or `null`.
    pub reply_to: Option<ReplyToView>,
    /// The recipient's verdict (the same as `you.shouldRespond`).
    pub should_respond: bool,
}

/// A `message.created` delivery, field for field the v2 table.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MessageCreated {
    /// Always `message.created`.
    pub event: &'static str,
    /// Stable per message and agent: dedupe on it.
    pub event_id: String,
    /// Always 2.
    pub schema_version: u8,
    /// The conversation's id.
    pub conversation_id: ConversationId,
    /// `{id, type, title}`.
    pub conversation: ConversationRef,
    /// `{id, name, kind, role}` of the sender.
    pub sender: SenderView,
    /// The full roster, `description` included.
    pub participants: Vec<ParticipantView>,
    /// The policy with `effectiveRule` and `policyApplies`.
    pub policy: PolicyView,
    /// The receiving agent and its verdict.
    pub you: WebhookYou,
    /// The agent's primer for this room.
    pub instructions: String,
    /// Agent ids mentioned in the message.
    pub mentions: Vec<ParticipantId>,
    /// Up to 20 prior turns, oldest first.
    pub history: Vec<Turn>,
    /// The message.
    pub message: WebhookMessage,
}

fn turn(m: &StoredMessage) -> Turn {
    Turn {
        id: m.id.clone(),
        sender_id: m.sender.id.clone(),
        sender_name: m.sender.name.clone(),
        sender_type: m.sender.kind.sender_type(),
        content: m.content.clone(),
        created_at: m.created_at_wire(),
        reply_to: m.reply_to.clone(),
    }
}

/// The JSON body delivering `event` (projected from `record` for `agent`)
/// to `agent`, or `None` when the conversation no longer exists.
///
/// # Errors
///
/// Store failures reading the conversation, its roster or its history.
pub async fn render(
    store: &dyn Store,
    bay: &BayId,
    agent: &Participant,
    event: &Event,
    event_id: &str,
) -> Result<Option<Vec<u8>>, StoreError> {
    let Event::Message {
        conversation_id,
        message,
        conversation,
    } = event
    else {
        return Ok(Some(lifecycle(event, event_id)));
    };
    let Some(current) = store.conversation(bay, conversation_id).await? else {
        return Ok(None);
    };
    let members = store.participants_in(bay, &current.member_ids()).await?;
    let room = Room::new(current, &members);
    let envelope = room.envelope(&agent.id);
    let (mut before, _) = store
        .messages_before(bay, conversation_id, Some(&message.id), HISTORY_TURNS)
        .await?;
    crate::api::views::refresh_previews(store, bay, conversation_id, &mut before).await?;
    let body = MessageCreated {
        event: "message.created",
        event_id: event_id.to_owned(),
        schema_version: SCHEMA_VERSION,
        conversation_id: conversation_id.clone(),
        conversation: conversation.clone(),
        sender: message.sender.clone(),
        participants: envelope.participants,
        policy: envelope.policy,
        you: WebhookYou {
            agent_id: agent.id.clone(),
            is_orchestrator: envelope.you.is_orchestrator,
            should_respond: message.should_respond,
        },
        instructions: envelope.instructions,
        mentions: message.mentions.clone(),
        history: before.iter().map(turn).collect(),
        message: WebhookMessage {
            id: message.id.clone(),
            sender_id: message.sender_id.clone(),
            sender_type: message.sender_type,
            content: message.content.clone(),
            metadata: message.metadata.clone(),
            created_at: message.created_at.clone(),
            reply_to: message.reply_to.clone(),
            should_respond: message.should_respond,
        },
    };
    Ok(Some(serde_json::to_vec(&body).unwrap_or_default()))
}

/// A lifecycle event's body: the `/ws` event with `type` renamed `event`,
/// plus `eventId` and `schemaVersion`.
fn lifecycle(event: &Event, event_id: &str) -> Vec<u8> {
    let mut value = serde_json::to_value(event).unwrap_or_default();
    if let Some(map) = value.as_object_mut() {
        if let Some(kind) = map.remove("type") {
            map.insert("event".into(), kind);
        }
        map.insert("eventId".into(), event_id.into());
        map.insert("schemaVersion".into(), SCHEMA_VERSION.into());
    }
    serde_json::to_vec(&value).unwrap_or_default()
}
