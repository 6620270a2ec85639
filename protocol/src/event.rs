//! The event shape shared by `/updates` (`events[]`) and `/ws` (`event` frames),
//! protocol §11. The two transports serialize the very same [`Event`] value.

use crate::connector::RequestKind;
use crate::ids::{ConversationId, MessageId, ParticipantId};
use crate::model::{ConversationType, ParticipantKind, Role, SenderType};
use crate::presence::PresenceState;
use serde::{Deserialize, Serialize};

/// One element of `/updates`'s `events` array, or the payload of a `/ws`
/// `event` frame. `type: "message"` is the protocol's; the others report
/// what happened to a message after it was sent, in the same envelope
/// (`type`, `conversationId`, `conversation`). Clients ignore types they
/// do not recognise (protocol §11: later versions only add), so a client
/// that knows only `message` keeps working.
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
    /// `message.updated`: the sender edited a message. Routing is not run
    /// again: mentions added by an edit wake nobody.
    #[serde(rename = "message.updated", rename_all = "camelCase")]
    MessageUpdated {
        /// The message's conversation.
        conversation_id: ConversationId,
        /// The message after the edit.
        message: UpdatedMessageView,
        /// `{ id, type, title }` of the conversation.
        conversation: ConversationRef,
    },
    /// `message.deleted`: the message is a tombstone now; REST shows it
    /// with `deletedAt` and no content.
    #[serde(rename = "message.deleted", rename_all = "camelCase")]
    MessageDeleted {
        /// The message's conversation.
        conversation_id: ConversationId,
        /// The deleted message.
        message_id: MessageId,
        /// RFC 3339 UTC with milliseconds.
        #[schema(format = DateTime)]
        deleted_at: String,
        /// The sender, or the conversation admin who deleted it.
        deleted_by: ParticipantId,
        /// `{ id, type, title }` of the conversation.
        conversation: ConversationRef,
    },
    /// `reaction.added`: a member reacted to a message with an emoji.
    #[serde(rename = "reaction.added", rename_all = "camelCase")]
    ReactionAdded {
        /// The message's conversation.
        conversation_id: ConversationId,
        /// What changed.
        #[serde(flatten)]
        reaction: ReactionChange,
        /// `{ id, type, title }` of the conversation.
        conversation: ConversationRef,
    },
    /// `reaction.removed`: a member took a reaction back.
    #[serde(rename = "reaction.removed", rename_all = "camelCase")]
    ReactionRemoved {
        /// The message's conversation.
        conversation_id: ConversationId,
        /// What changed.
        #[serde(flatten)]
        reaction: ReactionChange,
        /// `{ id, type, title }` of the conversation.
        conversation: ConversationRef,
    },
    /// `poll.updated`: a vote was cast, changed or withdrawn, or the poll
    /// closed; carries the new tally as this recipient sees it.
    #[serde(rename = "poll.updated", rename_all = "camelCase")]
    PollUpdated {
        /// The poll message's conversation.
        conversation_id: ConversationId,
        /// The `card.poll` message carrying the poll.
        message_id: MessageId,
        /// The tally (protocol v1.12), `mine` and `canVote` for this recipient.
        poll: crate::poll::PollView,
        /// `{ id, type, title }` of the conversation.
        conversation: ConversationRef,
    },
    /// `read.updated`: a member's read marker moved forward.
    #[serde(rename = "read.updated", rename_all = "camelCase")]
    ReadUpdated {
        /// The conversation read.
        conversation_id: ConversationId,
        /// Who read.
        participant_id: ParticipantId,
        /// The newest message they have read.
        last_read_message_id: MessageId,
        /// `{ id, type, title }` of the conversation.
        conversation: ConversationRef,
    },
    /// `message.streaming`: a draft opened (its author streams the reply
    /// with appends), or, in a replay, the draft's snapshot: its full text
    /// so far at `version`. Live `message.delta` events continue from that
    /// version; a delta at or below it is never sent after the snapshot.
    /// A draft asks nobody to respond (`shouldRespond` is false) until it
    /// completes.
    #[serde(rename = "message.streaming", rename_all = "camelCase")]
    MessageStreaming {
        /// The draft's conversation.
        conversation_id: ConversationId,
        /// The draft as it stands: `content` is the text so far.
        message: MessageView,
        /// The draft's version: bumped by every accepted flush of appends.
        version: u64,
        /// `{ id, type, title }` of the conversation.
        conversation: ConversationRef,
    },
    /// `message.delta`: text appended to a draft, coalesced per flush
    /// window (`timing.draft_flush_interval`, 40 ms by default).
    #[serde(rename = "message.delta", rename_all = "camelCase")]
    MessageDelta {
        /// The draft's conversation.
        conversation_id: ConversationId,
        /// The draft.
        message_id: MessageId,
        /// Where `text` starts in the draft, in Unicode scalar values.
        offset: u64,
        /// The appended text.
        text: String,
        /// The draft's version after this delta.
        version: u64,
        /// `{ id, type, title }` of the conversation.
        conversation: ConversationRef,
    },
    /// `message.completed`: the draft is final. Routing ran on the final
    /// text, once: `shouldRespond` and `mentions` are this recipient's
    /// verdicts, exactly as for a `message` event.
    #[serde(rename = "message.completed", rename_all = "camelCase")]
    MessageCompleted {
        /// The message's conversation.
        conversation_id: ConversationId,
        /// The final message as this recipient sees it.
        message: MessageView,
        /// The message's version at completion.
        version: u64,
        /// `{ id, type, title }` of the conversation.
        conversation: ConversationRef,
    },
    /// `message.cancelled`: a member stopped the draft. Its text stays as
    /// it was; no more appends are accepted.
    #[serde(rename = "message.cancelled", rename_all = "camelCase")]
    MessageCancelled {
        /// The draft's conversation.
        conversation_id: ConversationId,
        /// The draft.
        message_id: MessageId,
        /// Who cancelled it.
        cancelled_by: ParticipantId,
        /// The draft's final length, in Unicode scalar values.
        length: u64,
        /// The draft's version after the cancel.
        version: u64,
        /// `{ id, type, title }` of the conversation.
        conversation: ConversationRef,
    },
    /// `message.cancel_requested`: sent to the draft's author instead of
    /// `message.cancelled`: stop generating. The draft is cancelled
    /// already, so further appends answer 409 `DRAFT_CLOSED`.
    #[serde(rename = "message.cancel_requested", rename_all = "camelCase")]
    MessageCancelRequested {
        /// The draft's conversation.
        conversation_id: ConversationId,
        /// The draft.
        message_id: MessageId,
        /// Who asked.
        requested_by: ParticipantId,
        /// The draft's length when it was cancelled, in Unicode scalar values.
        length: u64,
        /// The draft's version after the cancel.
        version: u64,
        /// `{ id, type, title }` of the conversation.
        conversation: ConversationRef,
    },
    /// `message.failed`: the draft was abandoned: its author held no
    /// session and appended nothing for `timing.draft_orphan_timeout`.
    #[serde(rename = "message.failed", rename_all = "camelCase")]
    MessageFailed {
        /// The draft's conversation.
        conversation_id: ConversationId,
        /// The draft.
        message_id: MessageId,
        /// Why, lowercase text (e.g. `"author went away"`).
        reason: String,
        /// The draft's final length, in Unicode scalar values.
        length: u64,
        /// The draft's version after the failure.
        version: u64,
        /// `{ id, type, title }` of the conversation.
        conversation: ConversationRef,
    },
    /// `typing.started`: a member of the conversation is typing
    /// (`POST …/typing`, or an agent's 👀). Never sent to the typer. There
    /// is no stop event: the indicator ends at `expiresAt`, or earlier when
    /// a message from the same participant arrives (docs/summary.md).
    #[serde(rename = "typing.started", rename_all = "camelCase")]
    TypingStarted {
        /// The conversation typed in.
        conversation_id: ConversationId,
        /// Who is typing.
        participant_id: ParticipantId,
        /// When the indicator ends unless renewed, RFC 3339 UTC with
        /// milliseconds (`timing.typing_ttl`, 5 s, after the call).
        #[schema(format = DateTime)]
        expires_at: String,
        /// `{ id, type, title }` of the conversation.
        conversation: ConversationRef,
    },
    /// `summary.requested`: sent only to the Bay's summarizer agent when a
    /// member asked `GET …/summary?refresh=1`: write a fresh summary of the
    /// conversation with `PUT …/summary` (docs/summary.md).
    #[serde(rename = "summary.requested", rename_all = "camelCase")]
    SummaryRequested {
        /// The conversation to summarize.
        conversation_id: ConversationId,
        /// The member who asked.
        requested_by: ParticipantId,
        /// The stored summary's boundary, `null` when it has none yet: the
        /// messages after it are what the new summary must take in.
        #[schema(required = true)]
        through_message_id: Option<MessageId>,
        /// The stored summary's version, 0 when it has none yet.
        version: u64,
        /// When it was asked, RFC 3339 UTC with milliseconds.
        #[schema(format = DateTime)]
        requested_at: String,
        /// `{ id, type, title }` of the conversation.
        conversation: ConversationRef,
    },
    /// `connector.request`: sent only to a connector agent when another
    /// participant of its Bay called `POST /agents/{id}/ask` or
    /// `POST /agents/{id}/send` (protocol §9). The caller's request is held
    /// until the connector answers with
    /// `POST /agents/requests/{requestId}/answer`, or until `expiresAt`
    /// (docs/connectors.md). Not tied to a conversation.
    #[serde(rename = "connector.request", rename_all = "camelCase")]
    ConnectorRequest {
        /// What the answer names; unguessable, single use.
        request_id: String,
        /// `ask` (search the ingested data) or `send` (send outbound).
        kind: RequestKind,
        /// Who asked: a participant of the same Bay.
        from_id: ParticipantId,
        /// The asker's display name.
        from_name: String,
        /// `ask`: `{ query, limit }`; `send`: the caller's body as given.
        #[schema(value_type = Object)]
        payload: serde_json::Value,
        /// When the caller stops waiting, RFC 3339 UTC with milliseconds;
        /// an answer after it is refused (404).
        #[schema(format = DateTime)]
        expires_at: String,
    },
    /// `presence.updated`: a participant who shares at least one
    /// conversation with the recipient changed its activity presence
    /// (never sent about the recipient itself). Not tied to one
    /// conversation, so it has no `conversationId`.
    #[serde(rename = "presence.updated", rename_all = "camelCase")]
    PresenceUpdated {
        /// Whose presence changed.
        participant_id: ParticipantId,
        /// The new state.
        state: PresenceState,
        /// When the change was noticed, RFC 3339 UTC with milliseconds.
        #[schema(format = DateTime)]
        at: String,
    },
}

impl Event {
    /// The conversation the event happened in; `None` for events about a
    /// participant rather than a conversation (`presence.updated`).
    pub fn conversation_id(&self) -> Option<&ConversationId> {
        Some(match self {
            Event::Message {
                conversation_id, ..
            }
            | Event::MessageUpdated {
                conversation_id, ..
            }
            | Event::MessageDeleted {
                conversation_id, ..
            }
            | Event::ReactionAdded {
                conversation_id, ..
            }
            | Event::ReactionRemoved {
                conversation_id, ..
            }
            | Event::PollUpdated {
                conversation_id, ..
            }
            | Event::ReadUpdated {
                conversation_id, ..
            }
            | Event::MessageStreaming {
                conversation_id, ..
            }
            | Event::MessageDelta {
                conversation_id, ..
            }
            | Event::MessageCompleted {
                conversation_id, ..
            }
            | Event::MessageCancelled {
                conversation_id, ..
            }
            | Event::MessageCancelRequested {
                conversation_id, ..
            }
            | Event::MessageFailed {
                conversation_id, ..
            }
            | Event::TypingStarted {
                conversation_id, ..
            }
            | Event::SummaryRequested {
                conversation_id, ..
            } => conversation_id,
            Event::PresenceUpdated { .. } | Event::ConnectorRequest { .. } => return None,
        })
    }
}

/// The message inside `message.updated`: its current text and when it was
/// edited. No `shouldRespond`: an edit is not routed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdatedMessageView {
    /// The edited message.
    pub id: MessageId,
    /// Its sender (only the sender may edit).
    pub sender_id: ParticipantId,
    /// `USER` or `AGENT`.
    pub sender_type: SenderType,
    /// The new text.
    pub content: String,
    /// When it was first sent, RFC 3339 UTC with milliseconds.
    #[schema(format = DateTime)]
    pub created_at: String,
    /// When it was edited, RFC 3339 UTC with milliseconds.
    #[schema(format = DateTime)]
    pub edited_at: String,
    /// Agent ids mentioned when it was sent (an edit does not re-route).
    pub mentions: Vec<ParticipantId>,
}

/// What a `reaction.added` / `reaction.removed` event says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReactionChange {
    /// The message reacted to.
    pub message_id: MessageId,
    /// The emoji.
    pub emoji: String,
    /// Who added or removed it.
    pub participant_id: ParticipantId,
    /// How many members hold this emoji on the message after the change.
    pub count: u32,
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
