//! The event shape shared by `/updates` (`events[]`) and `/ws` (`event` frames),
//! protocol §11. The two transports serialize the very same [`Event`] value.

use crate::ids::{ConversationId, MessageId, ParticipantId};
use crate::model::{ConversationType, ParticipantKind, Role, SenderType};
use serde::{Deserialize, Serialize};

/// One element of `/updates`'s `events` array, or the payload of a `/ws`
/// `event` frame. Only `type: "message"` exists today; clients ignore types
/// they do not recognise (protocol §11).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
#[schema(examples(json!({
    "type": "message",
    "conversationId": "group",
    "message": {
        "id": "m_01j9zq4k3x2v7w8y9z0a1b2c3d",
        "senderId": "ana",
        "senderType": "USER",
        "content": "hello @Rex",
        "createdAt": "2025-01-31T09:30:00.123Z",
        "metadata": null,
        "sender": {"id": "ana", "name": "Ana", "kind": "user", "role": "member"},
        "mentions": ["rex"],
        "replyTo": null,
        "shouldRespond": true
    },
    "conversation": {"id": "group", "type": "GROUP", "title": "Launch"}
})))]
pub enum Event {
    /// A new message in one of the recipient's conversations.
    #[serde(rename_all = "camelCase")]
    Message {
        conversation_id: ConversationId,
        message: MessageView,
        conversation: ConversationRef,
    },
}

/// `{ id, type, title }` of a conversation (protocol §3, §11).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ConversationRef {
    pub id: ConversationId,
    #[serde(rename = "type")]
    pub kind: ConversationType,
    #[schema(required = true)]
    pub title: Option<String>,
}

/// `sender` of a message: the resolved display identity (protocol §5).
/// `role` is `null` when the sender is no longer a member.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SenderView {
    pub id: ParticipantId,
    pub name: String,
    pub kind: ParticipantKind,
    #[schema(required = true)]
    pub role: Option<Role>,
}

/// `replyTo` of a message (protocol §11, v1.6): the quoted message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplyToView {
    pub id: MessageId,
    pub sender_id: ParticipantId,
    pub sender_type: SenderType,
    /// The quoted message's first 80 characters; `""` once it was deleted.
    pub preview: String,
}

/// Maximum characters of `replyTo.preview` (protocol §11).
pub const REPLY_PREVIEW_CHARS: usize = 80;

/// The message inside an event. Carries **exactly** the fields protocol §11
/// lists for `/updates` and no others: no `conversationId` (it is on the
/// event), no `cardPayload`, `reactions` or `deletedAt`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageView {
    pub id: MessageId,
    pub sender_id: ParticipantId,
    pub sender_type: SenderType,
    pub content: String,
    /// RFC 3339 UTC timestamp with milliseconds.
    #[schema(format = DateTime)]
    pub created_at: String,
    /// The sender's metadata object (server-only keys such as
    /// `addressedAgents` are the server's), or `null`.
    #[schema(required = true, value_type = Option<Object>)]
    pub metadata: Option<serde_json::Value>,
    pub sender: SenderView,
    /// Agent ids @mentioned in `content` (protocol §7).
    pub mentions: Vec<ParticipantId>,
    #[schema(required = true)]
    pub reply_to: Option<ReplyToView>,
    /// This recipient's routing verdict (protocol §4).
    pub should_respond: bool,
}
