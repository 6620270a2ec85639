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
        /// The conversation the message was posted in. It sits on the event,
        /// not inside `message` (protocol §11); always equals `conversation.id`.
        conversation_id: ConversationId,
        /// The message as this recipient sees it, with its own `shouldRespond`.
        message: MessageView,
        /// `{ id, type, title }` of that conversation, so a client learns of a
        /// new conversation without re-reading `/conversations` (protocol §11).
        conversation: ConversationRef,
    },
}

/// `{ id, type, title }` of a conversation (protocol §3, §11).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ConversationRef {
    /// The conversation's id inside its Bay: 1–64 chars of `[A-Za-z0-9_-]`.
    pub id: ConversationId,
    /// `type` on the wire: `DM`, `AGENT_CHAT` or `GROUP`; fixed at creation.
    #[serde(rename = "type")]
    pub kind: ConversationType,
    /// Display title (up to 200 chars); `null` when none was set. Always
    /// serialized, so clients can rely on the key being present.
    #[schema(required = true)]
    pub title: Option<String>,
}

/// `sender` of a message: the resolved display identity (protocol §5).
/// `role` is `null` when the sender is no longer a member.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SenderView {
    /// The sender's participant id; always equals the message's `senderId`.
    pub id: ParticipantId,
    /// The sender's display name, the one `@mentions` match (protocol §7).
    pub name: String,
    /// `user` or `agent`; matches the message's `senderType`.
    pub kind: ParticipantKind,
    /// The sender's role in the conversation; `null` once it left (the name
    /// still shows, protocol §5).
    #[schema(required = true)]
    pub role: Option<Role>,
}

/// `replyTo` of a message (protocol §11, v1.6): the quoted message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplyToView {
    /// The quoted message; always a message of the same conversation
    /// (another target is refused with 400 `INVALID_REPLY_TARGET`).
    pub id: MessageId,
    /// Who wrote the quoted message. A human replying to an agent addresses
    /// that agent as strongly as an `@mention` (protocol §11).
    pub sender_id: ParticipantId,
    /// `USER` or `AGENT`: the kind of `senderId`.
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
    /// Server-minted id (`msg_` + a lowercase ULID); the client's dedupe key,
    /// since delivery is at-least-once across reconnects (protocol §11).
    pub id: MessageId,
    /// Who sent the message. Recipients never get `shouldRespond = true` on
    /// their own messages (protocol §4, "Never reply to yourself").
    pub sender_id: ParticipantId,
    /// `USER` or `AGENT`: the kind of `senderId`.
    pub sender_type: SenderType,
    /// The text as sent: 1 to `limits.max_content_chars` chars (32,000 by
    /// default). Untrusted data, never instructions (protocol §9).
    pub content: String,
    /// RFC 3339 UTC timestamp with milliseconds.
    #[schema(format = DateTime)]
    pub created_at: String,
    /// The sender's metadata object (server-only keys such as
    /// `addressedAgents` are the server's), or `null`.
    #[schema(required = true, value_type = Option<Object>)]
    pub metadata: Option<serde_json::Value>,
    /// `{ id, name, kind, role }` of the sender (protocol §5). Events carry
    /// the write-time snapshot; REST resolves it against the current roster.
    pub sender: SenderView,
    /// Agent ids @mentioned in `content` (protocol §7).
    pub mentions: Vec<ParticipantId>,
    /// The message this one quotes, or `null` (protocol §11, v1.6).
    #[schema(required = true)]
    pub reply_to: Option<ReplyToView>,
    /// This recipient's routing verdict (protocol §4).
    pub should_respond: bool,
}
