//! Sending a message and everything after the send: idempotent retries,
//! edits, deletes, reactions, read markers and waiting for a reply.
//! Every change is logged as an event (`message.updated`,
//! `message.deleted`, `reaction.added` / `reaction.removed`,
//! `read.updated`) and reaches the conversation's members over `/ws`,
//! `/updates` and replay like a message does.

use super::views::{reactions_for, ReactionView, RestMessage};
use crate::api::body::Object;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::{delete, get, patch, post, web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::time::Duration;
use switchboard_actors::conversation::{
    Action, Amend, AmendOutcome, Post, PostOutcome, Typing, TypingOutcome,
};
use switchboard_actors::feed::ActivityKind;
use switchboard_actors::feed::WaitForMessage;
use switchboard_actors::model::StoredMessage;
use switchboard_actors::store::Idempotency;
use switchboard_protocol::card::{validate_card, Card};
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use switchboard_protocol::ids::{ConversationId, MessageId, ParticipantId};
use switchboard_protocol::model::{MessageState, ParticipantKind};
use switchboard_protocol::poll::PollState;
use utoipa::{IntoParams, ToSchema};

/// Longest idempotency key accepted, in characters.
pub const MAX_IDEMPOTENCY_KEY: usize = 255;
/// Longest `GET …/messages/wait` hold (the agent mailbox's 50 s cap).
pub const MAX_WAIT: Duration = Duration::from_secs(50);
/// `GET …/messages/wait` hold when `timeout` is absent.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(25);
/// How often a wait re-reads the store as well, so even a wait registered
/// while the Bay's feed was still loading ends within this.
const WAIT_RECHECK: Duration = Duration::from_secs(5);
/// The reaction that also starts the agent's typing indicator: "picked
/// up, working on it" (protocol v1.10).
pub const PICKUP_EMOJI: &str = "👀";

/// Registers the routes under `/api/agent-api`.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(wait_for_message)
        .service(send_message)
        .service(edit_message)
        .service(delete_message)
        .service(add_reaction)
        .service(remove_reaction)
        .service(mark_read);
}

/// Body of `POST …/messages`. `attachments` / `attachmentId` are refused
/// with 400 INVALID_REQUEST (this gateway stores no files).
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(examples(json!({"content": "On it, @Ana.", "replyToMessageId": null, "metadata": {"runId": "r-42"}})))]
pub(crate) struct SendBody {
    /// The text, 1 to `limits.max_content_chars` (32,000 by default)
    /// characters, not blank. `@Name` mentions route to agents (protocol §7).
    /// With a `card`, the plain-text fallback shown where the card cannot
    /// render (protocol v1.11).
    #[schema(value_type = String, min_length = 1, max_length = 32000)]
    #[serde(default, deserialize_with = "present")]
    content: Option<serde_json::Value>,
    /// Quote an earlier message of the same conversation.
    #[schema(value_type = Option<MessageId>)]
    reply_to_message_id: Option<String>,
    /// Free-form object stored with the message (`addressedAgents` is
    /// server-only and dropped; `type` is set by the server for cards).
    #[schema(value_type = Option<Object>)]
    metadata: Option<serde_json::Value>,
    /// `{type, payload}` with `type` `card.calendar` or `card.email`
    /// (protocol v1.11); payloads are strict and refused field by field.
    #[schema(value_type = Option<Card>)]
    card: Option<serde_json::Value>,
    /// The idempotency key, as an alternative to the `Idempotency-Key`
    /// header (the same rules; when both are given they must be equal).
    client_id: Option<String>,
    /// Open a draft that you stream into with `…/append` and finalize with
    /// `…/complete` (docs/websocket.md, "Streaming replies"). `content` is
    /// then optional (the text to start with) and routing runs at completion.
    stream: Option<bool>,
    #[schema(ignore)]
    attachments: Option<serde_json::Value>,
    #[schema(ignore)]
    attachment_id: Option<serde_json::Value>,
}

/// A field that is present, `null` included (`Some(Value::Null)`); with
/// `#[serde(default)]` an absent one is `None`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<serde_json::Value>, D::Error> {
    serde::Deserialize::deserialize(d).map(Some)
}

/// Checks the `content` a draft opens with: absent (or `null`) is `""`;
/// else a string of at most `max` characters (Unicode scalar values).
fn draft_start(content: serde_json::Value, max: usize) -> Result<String, ApiError> {
    match content {
        serde_json::Value::Null => Ok(String::new()),
        serde_json::Value::String(s) if s.chars().count() <= max => Ok(s),
        _ => Err(ApiError::new(
            ErrorCode::InvalidContent,
            format!("content of a draft must be a string of at most {max} characters (unicode scalar values)"),
        )),
    }
}

/// Checks `content` of a send or an edit: a string of 1 to `max`
/// characters (Unicode scalar values), not blank.
pub(crate) fn checked_content(content: serde_json::Value, max: usize) -> Result<String, ApiError> {
    let serde_json::Value::String(content) = content else {
        return Err(ApiError::new(
            ErrorCode::InvalidContent,
            "content must be a string",
        ));
    };
    let chars = content.chars().count();
    if chars == 0 || chars > max || content.trim().is_empty() {
        return Err(ApiError::new(
            ErrorCode::InvalidContent,
            format!("content must be 1 to {max} characters (unicode scalar values) and not blank"),
        ));
    }
    Ok(content)
}

/// The send's idempotency key from the `Idempotency-Key` header (a plain
/// token, or a structured-field string as the IETF httpapi draft defines
/// it: `"..."` with `\"` and `\\` escapes, no parameters) or `clientId`:
/// 1–255 printable ASCII characters. Two headers, or a header and a
/// `clientId` that differ, are refused.
pub(crate) fn idempotency_key(
    req: &HttpRequest,
    client_id: Option<String>,
) -> Result<Option<String>, ApiError> {
    let invalid = |why: &str| ApiError::new(ErrorCode::InvalidIdempotencyKey, why.to_owned());
    let mut values = req.headers().get_all("idempotency-key");
    let header = match (values.next(), values.next()) {
        (None, _) => None,
        (Some(_), Some(_)) => return Err(invalid("send one Idempotency-Key header, not several")),
        (Some(v), None) => {
            let raw = v
                .to_str()
                .map_err(|_| invalid("Idempotency-Key must be printable ascii"))?
                .trim();
            Some(if raw.starts_with('"') {
                sf_string(raw).ok_or_else(|| {
                    invalid("Idempotency-Key is a malformed quoted string (or has parameters)")
                })?
            } else {
                raw.to_owned()
            })
        }
    };
    let key = match (header, client_id) {
        (Some(h), Some(c)) if h != c => {
            return Err(invalid(
                "Idempotency-Key and clientId differ; send one, or the same value",
            ))
        }
        (Some(k), _) | (None, Some(k)) => k,
        (None, None) => return Ok(None),
    };
    let printable = key.bytes().all(|b| (0x20..0x7f).contains(&b));
    if key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY || !printable {
        return Err(invalid(
            "an idempotency key is 1 to 255 printable ascii characters",
        ));
    }
    Ok(Some(key))
}

/// The value of a structured-field string (RFC 8941 §3.3.3): `raw` is
/// `"` … `"`, with `\"` and `\\` as the only escapes and nothing after
/// the closing quote.
fn sf_string(raw: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = raw.strip_prefix('"')?.chars();
    loop {
        match chars.next()? {
            '\\' => match chars.next()? {
                c @ ('"' | '\\') => out.push(c),
                _ => return None,
            },
            '"' => return chars.next().is_none().then_some(out),
            c => out.push(c),
        }
    }
}

/// SHA-256 (hex) of the parts, each length-prefixed so no two lists of
/// parts hash alike.
fn digest(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p);
    }
    hex::encode(h.finalize())
}

/// What a send asks for, as the idempotency fingerprint covers it.
#[derive(Serialize)]
struct Fingerprint<'a> {
    conversation: &'a ConversationId,
    content: &'a str,
    reply_to: Option<&'a str>,
    metadata: &'a Option<serde_json::Value>,
    card: &'a Option<Card>,
    poll: Option<(&'a str, &'a [String], bool)>,
    stream: bool,
}

/// A validated send, ready for the conversation actor.
pub(crate) struct Send {
    pub conversation: ConversationId,
    pub content: String,
    pub reply_to: Option<String>,
    pub metadata: Option<serde_json::Value>,
    pub card: Option<Card>,
    pub poll: Option<PollState>,
    pub key: Option<String>,
    /// Open a draft (`"stream": true`).
    pub stream: bool,
}

/// Posts `send` for `caller` and answers as `POST …/messages` does:
/// 201 with the message; a retried idempotent send gets its first answer
/// again (201, `Idempotent-Replayed: true`), 409 when the key was used
/// for another request, 410 when its message was deleted since.
pub(crate) async fn post_and_answer(
    state: &AppState,
    caller: &Caller,
    send: Send,
) -> Result<HttpResponse, ApiError> {
    let sender = &caller.principal.participant;
    let idempotency = send.key.as_deref().map(|key| Idempotency {
        key: digest(&[sender.id.as_str().as_bytes(), key.as_bytes()]),
        fingerprint: digest(&[serde_json::to_string(&Fingerprint {
            conversation: &send.conversation,
            content: &send.content,
            reply_to: send.reply_to.as_deref(),
            metadata: &send.metadata,
            card: &send.card,
            poll: send
                .poll
                .as_ref()
                .map(|p| (p.question.as_str(), p.options.as_slice(), p.allow_multiple)),
            stream: send.stream,
        })
        .unwrap_or_default()
        .as_bytes()]),
    });
    let outcome = state
        .registry
        .conversation(&caller.principal.bay, &send.conversation)
        .send(Post {
            sender: sender.clone(),
            content: send.content,
            reply_to: send.reply_to.map(MessageId),
            metadata: send.metadata,
            card: send.card,
            poll: send.poll,
            idempotency,
            stream: send.stream,
        })
        .await??;
    let reader = &sender.id;
    let answer = |m: &StoredMessage| RestMessage::of(m, reader, m.sender.clone());
    match outcome {
        PostOutcome::Posted(message) => {
            metrics::counter!(crate::metrics::MESSAGES_ACCEPTED).increment(1);
            state.registry.note_activity(
                &caller.principal.bay,
                sender.id.clone(),
                ActivityKind::Sent,
            );
            Ok(HttpResponse::Created().json(answer(&message)))
        }
        PostOutcome::Duplicate(first) if first.is_deleted() => Err(ApiError::new(
            ErrorCode::MessageDeleted,
            "the message this idempotency key created was deleted; it is not sent again",
        )),
        PostOutcome::Duplicate(first) => Ok(HttpResponse::Created()
            .insert_header(("Idempotent-Replayed", "true"))
            .json(answer(&first))),
        PostOutcome::KeyReused => Err(ApiError::new(
            ErrorCode::IdempotencyKeyReused,
            "this idempotency key was used for a different request",
        )),
        PostOutcome::NotFound => Err(ApiError::not_found()),
        PostOutcome::InvalidReplyTarget => Err(ApiError::new(
            ErrorCode::InvalidReplyTarget,
            "replyToMessageId is not a message of this conversation",
        )),
    }
}

/// `POST /conversations/{id}/messages` `{content, replyToMessageId?,
/// metadata?, card?, clientId?}` → 201 with the stored message in the GET
/// shape. Non-participants get 404 (protocol §7: never confirm the id exists).
#[utoipa::path(
    operation_id = "sendMessage",
    tag = "agent",
    summary = "Post a message",
    description = "Stores the message and delivers it to every member over `/updates` and `/ws`; `@Name` mentions and the conversation's policy decide each agent's `shouldRespond`. Non-participants and unknown ids get 404 alike (protocol §7: never confirm an id exists). `attachments` / `attachmentId` are refused with 400 INVALID_REQUEST.\n\nIdempotent retries: send an `Idempotency-Key` header (or `clientId` in the body). Within the replay window (15 min by default) a retry with the same key and body, on any node, stores nothing and answers the first message again (201, `Idempotent-Replayed: true`); the same key with another body is 409 IDEMPOTENCY_KEY_REUSED; a retry whose message was deleted since is 410 MESSAGE_DELETED. Keys are scoped to their sender.",
    params(
        ("id" = String, Path, description = "Conversation id"),
        ("Idempotency-Key" = Option<String>, Header, description = "1–255 printable ASCII characters; a plain token or a quoted structured-field string"),
    ),
    request_body = SendBody,
    responses(
        (status = 201, description = "The stored message (or, for a retried idempotent send, the first one), in the GET shape", body = RestMessage),
        (status = 400, description = "INVALID_JSON, INVALID_CONTENT (`content` not a string, empty, blank or too long), INVALID_REPLY_TARGET, INVALID_IDEMPOTENCY_KEY, CARD_WITH_ATTACHMENTS, CARD_TYPE_NOT_SENDABLE, INVALID_CARD_PAYLOAD (names the field) or INVALID_REQUEST (`metadata` not an object, attachments)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED: missing, unknown, rotated or revoked token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown conversation or not a member (never confirms the id exists)", body = ErrorBody),
        (status = 409, description = "IDEMPOTENCY_KEY_REUSED: the key was used with a different body", body = ErrorBody),
        (status = 410, description = "MESSAGE_DELETED: the key's message was deleted since; it is not sent again", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE: body above `limits.max_body_bytes`", body = ErrorBody),
        (status = 415, description = "UNSUPPORTED_MEDIA_TYPE: content-type is not application/json", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED: the agent request budget (60/min by default) is spent", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 500, description = "INTERNAL", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE: the store or node cannot serve now; retry with the same Idempotency-Key", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[post("/conversations/{id}/messages")]
async fn send_message(
    state: web::Data<AppState>,
    caller: Caller,
    req: HttpRequest,
    path: web::Path<String>,
    body: Object<SendBody>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal.token).await?;
    let body = body.into_inner();
    let has_attachments = body.attachments.is_some() || body.attachment_id.is_some();
    // A card is judged first so its named refusals win (protocol v1.11).
    let card = match &body.card {
        None | Some(serde_json::Value::Null) => None,
        Some(raw) => Some(
            validate_card(raw, has_attachments).map_err(|e| ApiError::new(e.code, e.message))?,
        ),
    };
    let stream = body.stream.unwrap_or(false);
    let max = state.settings.limits.max_content_chars;
    let content = match (stream, body.content) {
        (true, content) => draft_start(content.unwrap_or_default(), max)?,
        (false, Some(content)) => checked_content(content, max)?,
        (false, None) => {
            return Err(ApiError::new(
                ErrorCode::InvalidJson,
                "invalid json body: missing field `content`",
            ))
        }
    };
    if stream && card.is_some() {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "a streamed message cannot carry a card",
        ));
    }
    if !matches!(
        body.metadata,
        None | Some(serde_json::Value::Object(_)) | Some(serde_json::Value::Null)
    ) {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "metadata must be an object",
        ));
    }
    if has_attachments {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "attachments are not supported by this gateway",
        ));
    }
    let key = idempotency_key(&req, body.client_id)?;
    let send = Send {
        conversation: ConversationId(path.into_inner()),
        content,
        reply_to: body.reply_to_message_id,
        metadata: body
            .metadata
            .filter(|m| !m.is_null())
            .map(strip_server_fields),
        card,
        poll: None,
        key,
        stream,
    };
    post_and_answer(&state, &caller, send).await
}

/// Metadata keys only the server writes (protocol §4: `addressedAgents` is
/// the server's resolution of plain-name addressing). A sender's own value
/// is dropped, so no one can plant a routing hint.
const SERVER_METADATA_FIELDS: [&str; 1] = ["addressedAgents"];

/// Drops what only the server writes: [`SERVER_METADATA_FIELDS`], and a
/// `type` naming a card (`card.…`), so no message passes itself off as a
/// card or poll it does not carry. Other `type` values are the sender's.
pub(crate) fn strip_server_fields(mut metadata: serde_json::Value) -> serde_json::Value {
    if let Some(map) = metadata.as_object_mut() {
        for key in SERVER_METADATA_FIELDS {
            map.remove(key);
        }
        if map
            .get("type")
            .and_then(|t| t.as_str())
            .is_some_and(|t| t.starts_with("card."))
        {
            map.remove("type");
        }
    }
    metadata
}

/// Sends `action` to the conversation's actor and maps the refusals every
/// message route shares.
async fn amend(
    state: &AppState,
    caller: &Caller,
    conversation: &ConversationId,
    message: MessageId,
    action: Action,
) -> Result<AmendOutcome, ApiError> {
    let outcome = state
        .registry
        .conversation(&caller.principal.bay, conversation)
        .send(Amend {
            by: caller.principal.participant.clone(),
            message,
            action,
        })
        .await??;
    match outcome {
        AmendOutcome::NotFound => Err(ApiError::not_found()),
        AmendOutcome::Forbidden => Err(ApiError::new(
            ErrorCode::Forbidden,
            "only the sender (or, to delete, a conversation admin) may do this",
        )),
        AmendOutcome::Deleted => Err(ApiError::new(
            ErrorCode::MessageDeleted,
            "the message was deleted",
        )),
        AmendOutcome::Refused(code, message) => Err(ApiError::new(code, message)),
        done => Ok(done),
    }
}

fn message_of(outcome: AmendOutcome) -> Option<Box<StoredMessage>> {
    match outcome {
        AmendOutcome::Changed(m) | AmendOutcome::Unchanged(m) => Some(m),
        _ => None,
    }
}

/// Body of `PATCH …/messages/{mid}`.
#[derive(Deserialize, ToSchema)]
pub(crate) struct EditBody {
    /// The new text, under the same rules as a send's `content`.
    #[schema(value_type = String, min_length = 1, max_length = 32000)]
    content: serde_json::Value,
}

/// `PATCH /conversations/{id}/messages/{mid}` `{content}` → 200 with the
/// message (`editedAt` set). The sender only.
#[utoipa::path(
    operation_id = "editMessage",
    tag = "agent",
    summary = "Edit a message you sent",
    description = "Replaces the content and sets `editedAt`; members get a `message.updated` event. Routing is not run again: mentions added by an edit wake nobody, and every `shouldRespond` stays as sent. Editing to the same text changes nothing and sends no event.",
    params(
        ("id" = String, Path, description = "Conversation id"),
        ("mid" = String, Path, description = "Message id"),
    ),
    request_body = EditBody,
    responses(
        (status = 200, description = "The message after the edit", body = RestMessage),
        (status = 400, description = "INVALID_JSON, INVALID_CONTENT, or INVALID_REQUEST (a poll's text cannot be edited)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: not the sender", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown conversation or message, or not a member", body = ErrorBody),
        (status = 410, description = "MESSAGE_DELETED", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[patch("/conversations/{id}/messages/{mid}")]
async fn edit_message(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(String, String)>,
    body: Object<EditBody>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal.token).await?;
    let (id, mid) = path.into_inner();
    let content = checked_content(
        body.into_inner().content,
        state.settings.limits.max_content_chars,
    )?;
    let id = ConversationId(id);
    let outcome = amend(
        &state,
        &caller,
        &id,
        MessageId(mid),
        Action::Edit { content },
    )
    .await?;
    let message = message_of(outcome).ok_or_else(ApiError::not_found)?;
    let reader = &caller.principal.participant.id;
    Ok(HttpResponse::Ok().json(RestMessage::of(&message, reader, message.sender.clone())))
}

/// `DELETE /conversations/{id}/messages/{mid}` → 204. The sender or a
/// conversation admin; leaves a tombstone.
#[utoipa::path(
    operation_id = "deleteMessage",
    tag = "agent",
    summary = "Delete a message",
    description = "The sender or a conversation admin. The message becomes a tombstone: `deletedAt` set, content, metadata, card, poll and reactions removed from storage; history reads show it so, and members get a `message.deleted` event. A reply quoting it shows `preview: \"\"`. Deleting it again answers 204 and sends nothing. An idempotent send retried after the delete answers 410 and is never recreated.",
    params(
        ("id" = String, Path, description = "Conversation id"),
        ("mid" = String, Path, description = "Message id"),
    ),
    responses(
        (status = 204, description = "Deleted (or already deleted)"),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: neither the sender nor an admin", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown conversation or message, or not a member", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[delete("/conversations/{id}/messages/{mid}")]
async fn delete_message(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal.token).await?;
    let (id, mid) = path.into_inner();
    amend(
        &state,
        &caller,
        &ConversationId(id),
        MessageId(mid),
        Action::Delete,
    )
    .await?;
    Ok(HttpResponse::NoContent().finish())
}

/// Body of `POST …/reactions`.
#[derive(Deserialize, ToSchema)]
pub(crate) struct ReactionBody {
    /// One emoji, e.g. `👍`. `👀` from an agent also starts its typing
    /// indicator (protocol v1.10: "react 👀 before work").
    emoji: String,
}

/// `POST …/reactions` and `DELETE …/reactions/{emoji}` answer.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Reactions {
    /// The message reacted to.
    message_id: MessageId,
    /// Its reactions after the change, as the caller sees them.
    reactions: Vec<ReactionView>,
}

/// `emoji` when it is exactly one emoji (Unicode's emoji list, through the
/// `emojis` crate, skin tones and all), in its fully-qualified form: `❤`
/// and `❤️` (with or without the variation selector) are one reaction.
fn checked_emoji(emoji: &str) -> Result<String, ApiError> {
    let emoji = emoji.trim();
    let found = emojis::get(emoji).or_else(|| {
        // Unqualified and minimally-qualified forms: look again without
        // variation selectors, and with one at the end.
        let bare = emoji.replace('\u{FE0F}', "");
        emojis::get(&bare).or_else(|| emojis::get(&format!("{bare}\u{FE0F}")))
    });
    match found {
        Some(e) => Ok(e.as_str().to_owned()),
        None => Err(ApiError::new(
            ErrorCode::InvalidReaction,
            "emoji must be exactly one emoji, e.g. 👍",
        )),
    }
}

/// `POST /conversations/{id}/messages/{mid}/reactions` `{emoji}` → 200
/// with the message's reactions.
#[utoipa::path(
    operation_id = "addReaction",
    tag = "agent",
    summary = "React to a message",
    description = "One reaction per (member, emoji): reacting twice with the same emoji changes nothing and sends no event. Members get `reaction.added` with the new count. An agent's 👀 also starts its typing indicator (protocol v1.10).",
    params(
        ("id" = String, Path, description = "Conversation id"),
        ("mid" = String, Path, description = "Message id"),
    ),
    request_body = ReactionBody,
    responses(
        (status = 200, description = "The message's reactions after the change", body = Reactions),
        (status = 400, description = "INVALID_JSON or INVALID_REACTION (not exactly one emoji)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown conversation or message, or not a member", body = ErrorBody),
        (status = 410, description = "MESSAGE_DELETED", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[post("/conversations/{id}/messages/{mid}/reactions")]
async fn add_reaction(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(String, String)>,
    body: Object<ReactionBody>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal.token).await?;
    let (id, mid) = path.into_inner();
    let emoji = checked_emoji(&body.emoji)?;
    let id = ConversationId(id);
    let pickup = emoji == PICKUP_EMOJI;
    let outcome = amend(
        &state,
        &caller,
        &id,
        MessageId(mid),
        Action::React { emoji },
    )
    .await?;
    let me = &caller.principal.participant;
    if pickup && me.kind == ParticipantKind::Agent {
        let started = state
            .registry
            .conversation(&caller.principal.bay, &id)
            .send(Typing {
                participant: me.id.clone(),
            })
            .await??;
        if let TypingOutcome::Started { ttl } = started {
            state.registry.note_activity(
                &caller.principal.bay,
                me.id.clone(),
                ActivityKind::Typing { ttl },
            );
        }
    }
    reactions_answer(outcome, &me.id)
}

fn reactions_answer(
    outcome: AmendOutcome,
    reader: &ParticipantId,
) -> Result<HttpResponse, ApiError> {
    let message = message_of(outcome).ok_or_else(ApiError::not_found)?;
    Ok(HttpResponse::Ok().json(Reactions {
        message_id: message.id.clone(),
        reactions: reactions_for(&message, reader),
    }))
}

/// `DELETE /conversations/{id}/messages/{mid}/reactions/{emoji}` → 200
/// with the message's reactions.
#[utoipa::path(
    operation_id = "removeReaction",
    tag = "agent",
    summary = "Take a reaction back",
    description = "Removes the caller's reaction with that emoji (URL-encoded in the path). Members get `reaction.removed` with the new count; removing a reaction the caller does not hold changes nothing and sends no event.",
    params(
        ("id" = String, Path, description = "Conversation id"),
        ("mid" = String, Path, description = "Message id"),
        ("emoji" = String, Path, description = "The emoji, URL-encoded"),
    ),
    responses(
        (status = 200, description = "The message's reactions after the change", body = Reactions),
        (status = 400, description = "INVALID_REACTION", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown conversation or message, or not a member", body = ErrorBody),
        (status = 410, description = "MESSAGE_DELETED", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[delete("/conversations/{id}/messages/{mid}/reactions/{emoji}")]
async fn remove_reaction(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal.token).await?;
    let (id, mid, emoji) = path.into_inner();
    let emoji = checked_emoji(&emoji)?;
    let outcome = amend(
        &state,
        &caller,
        &ConversationId(id),
        MessageId(mid),
        Action::Unreact { emoji },
    )
    .await?;
    reactions_answer(outcome, &caller.principal.participant.id)
}

/// Body of `POST …/read`.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ReadBody {
    /// The newest message the caller has read; a message of this conversation.
    #[schema(value_type = MessageId)]
    up_to: String,
}

/// Answer of `POST …/read`: the caller's read state after the call.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ReadAnswer {
    /// The newest message read (unchanged when `upTo` was older).
    #[schema(required = true)]
    last_read_message_id: Option<MessageId>,
    /// Messages after it.
    unread_count: u64,
}

/// `POST /conversations/{id}/read` `{upTo}` → 200 with the read state.
#[utoipa::path(
    operation_id = "markRead",
    tag = "agent",
    summary = "Move your read marker forward",
    description = "The marker only ever moves forward: an `upTo` older than the marker changes nothing. Posting a message also reads everything before it. When the marker moves, members get a `read.updated` event. `unreadCount` on `GET /conversations` counts the messages after the marker.",
    params(("id" = String, Path, description = "Conversation id")),
    request_body = ReadBody,
    responses(
        (status = 200, description = "The caller's read state in this conversation", body = ReadAnswer),
        (status = 400, description = "INVALID_JSON, or INVALID_REQUEST (`upTo` names no message of this conversation)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown conversation or not a member", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[post("/conversations/{id}/read")]
async fn mark_read(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    body: Object<ReadBody>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal.token).await?;
    let bay = &caller.principal.bay;
    let me = &caller.principal.participant.id;
    let id = ConversationId(path.into_inner());
    let conversation = state
        .store
        .conversation(bay, &id)
        .await?
        .filter(|c| c.member(me).is_some())
        .ok_or_else(ApiError::not_found)?;
    let message = state
        .store
        .message(bay, &id, &MessageId(body.into_inner().up_to))
        .await?
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::InvalidRequest,
                "upTo names no message of this conversation",
            )
        })?;
    state
        .store
        .mark_read(bay, &conversation.reference(), me, &message)
        .await?;
    let read = state
        .store
        .read_states(bay, me, std::slice::from_ref(&id))
        .await?
        .pop()
        .unwrap_or_default();
    Ok(HttpResponse::Ok().json(ReadAnswer {
        last_read_message_id: read.last_read,
        unread_count: read.unread,
    }))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct WaitQuery {
    /// A message id of this conversation: wait for a message after it.
    /// Absent: after the newest message now.
    after: Option<String>,
    /// Seconds to hold, 1–50 (default 25).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 50)]
    timeout: Option<String>,
}

/// Answer of `GET …/messages/wait`.
#[derive(Serialize, ToSchema)]
pub(crate) struct WaitAnswer {
    /// The first message after `after` that the caller did not send, or
    /// none at the timeout.
    messages: Vec<RestMessage>,
}

/// Counts a wait in [`crate::metrics::WAITS_HELD`] while it lives.
struct HeldWait;

impl HeldWait {
    fn new() -> Self {
        metrics::gauge!(crate::metrics::WAITS_HELD).increment(1.0);
        HeldWait
    }
}

impl Drop for HeldWait {
    fn drop(&mut self) {
        metrics::gauge!(crate::metrics::WAITS_HELD).decrement(1.0);
    }
}

/// The first message after `after` (a `createdAt`) in `id` that `me` did
/// not send and that is not a tombstone.
async fn first_reply(
    state: &AppState,
    caller: &Caller,
    id: &ConversationId,
    after: chrono::DateTime<chrono::Utc>,
) -> Result<Option<StoredMessage>, ApiError> {
    const PAGE: usize = 200;
    let (bay, me) = (&caller.principal.bay, &caller.principal.participant.id);
    let mut since = after;
    loop {
        let page = state.store.messages_since(bay, id, since, PAGE).await?;
        let full = page.len() == PAGE;
        if let Some(last) = page.last() {
            since = last.created_at;
        }
        if let Some(found) = page
            .into_iter()
            .find(|m| &m.sender.id != me && !m.is_deleted() && m.state == MessageState::Complete)
        {
            return Ok(Some(found));
        }
        if !full {
            return Ok(None);
        }
    }
}

/// `GET /conversations/{id}/messages/wait?after=&timeout=` → the first
/// later message the caller did not send, or `[]` at the timeout.
#[utoipa::path(
    operation_id = "waitForMessage",
    tag = "agent",
    summary = "Wait for the next message someone else sends",
    description = "Holds the request until a message the caller did not send arrives after `after` (or answers at once when one already has), else answers `{\"messages\": []}` after `timeout` seconds (1–50, default 25). The wait is registered before the history is read, so nothing falls between two calls: call again with `after` = the message you got. Tombstones and open drafts are skipped: a streamed reply is returned once it completes (at its opening time in the history).",
    params(("id" = String, Path, description = "Conversation id"), WaitQuery),
    responses(
        (status = 200, description = "Zero or one message", body = WaitAnswer),
        (status = 400, description = "INVALID_REQUEST (bad `timeout`) or INVALID_CURSOR (`after` names no message of this conversation)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "NOT_PARTICIPANT: not a member (also for unknown ids)", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[get("/conversations/{id}/messages/wait")]
async fn wait_for_message(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    query: web::Query<WaitQuery>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal.token).await?;
    let timeout = match &query.timeout {
        None => DEFAULT_WAIT,
        Some(raw) => raw
            .parse::<u64>()
            .ok()
            .filter(|s| (1..=MAX_WAIT.as_secs()).contains(s))
            .map(Duration::from_secs)
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::InvalidRequest,
                    "timeout must be an integer from 1 to 50 (seconds)",
                )
            })?,
    };
    let (bay, me) = (&caller.principal.bay, &caller.principal.participant.id);
    let id = ConversationId(path.into_inner());
    state
        .store
        .conversation(bay, &id)
        .await?
        .filter(|c| c.member(me).is_some())
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::NotParticipant,
                "you are not a participant of this conversation",
            )
        })?;
    // Register first, read second: a message appended after the read
    // reaches the waiter (see `WaitForMessage`).
    let register = || async {
        let (tx, rx) = tokio::sync::oneshot::channel();
        state
            .registry
            .feed(bay)
            .send(WaitForMessage {
                conversation: id.clone(),
                excluding: me.clone(),
                reply: tx,
            })
            .await
            .map(|()| rx)
    };
    let mut rx = register().await?;
    // Counted once the history had nothing and the wait really holds.
    let mut held = None;
    let after = match &query.after {
        Some(mid) => {
            state
                .store
                .message(bay, &id, &MessageId(mid.clone()))
                .await?
                .ok_or_else(|| {
                    ApiError::new(
                        ErrorCode::InvalidCursor,
                        "after names no message of this conversation",
                    )
                })?
                .created_at
        }
        None => state
            .store
            .messages_before(bay, &id, None, 1)
            .await?
            .0
            .pop()
            .map_or(chrono::DateTime::<chrono::Utc>::MIN_UTC, |m| m.created_at),
    };
    let deadline = tokio::time::Instant::now() + timeout;
    let found = loop {
        if let Some(m) = first_reply(&state, &caller, &id, after).await? {
            break Some(m);
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            break None;
        }
        let recheck = (now + WAIT_RECHECK).min(deadline);
        held.get_or_insert_with(HeldWait::new);
        if tokio::time::timeout_at(recheck, &mut rx).await.is_ok() {
            // Woken (or the feed went away): wait anew before reading again.
            rx = register().await?;
        }
    };
    let mut found: Vec<StoredMessage> = found.into_iter().collect();
    super::views::refresh_previews(&*state.store, bay, &id, &mut found).await?;
    let messages = found
        .iter()
        .map(|m| RestMessage::of(m, me, m.sender.clone()))
        .collect();
    Ok(HttpResponse::Ok().json(WaitAnswer { messages }))
}

#[cfg(test)]
mod tests {
    use super::{checked_emoji, sf_string};

    #[test]
    fn look_alike_emoji_are_one_reaction() {
        let table = [
            ("👍", "👍\u{FE0F}"),
            ("❤", "❤\u{FE0F}"),
            ("🤷\u{200D}♂", "🤷\u{200D}♂\u{FE0F}"),
            ("😶\u{200D}🌫", "😶\u{200D}🌫\u{FE0F}"),
        ];
        for (a, b) in table {
            let (a, b) = (checked_emoji(a).unwrap(), checked_emoji(b).unwrap());
            assert_eq!(a, b);
        }
        assert_ne!(checked_emoji("👍").unwrap(), checked_emoji("👍🏽").unwrap());
        for bad in ["", "a", "👍👍", "\u{200D}", "thumbs up"] {
            assert!(checked_emoji(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn structured_field_strings_are_parsed_strictly() {
        assert_eq!(sf_string(r#""k-1""#).as_deref(), Some("k-1"));
        assert_eq!(sf_string(r#""a\"b""#).as_deref(), Some("a\"b"));
        assert_eq!(sf_string(r#""a\\b""#).as_deref(), Some("a\\b"));
        for bad in [r#""unterminated"#, r#""x";param=1"#, r#""a\nb""#, r#""a" "#] {
            assert_eq!(sf_string(bad), None, "{bad}");
        }
    }
}
