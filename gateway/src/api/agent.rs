//! The agent API (protocol §11), same routes for agent (`bay_…`) and user
//! (`bay_u_…`) tokens. Every call here draws on the caller's agent budget
//! (60/min by default); `/updates` and `/ws` live in `realtime`.

use super::views::Room;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::{get, post, web, HttpResponse};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::json;
use switchboard_actors::conversation::{Post, PostOutcome, Typing, TypingOutcome};
use switchboard_protocol::context::ContextEnvelope;
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use switchboard_protocol::ids::{ConversationId, MessageId};
use switchboard_protocol::PROTOCOL_VERSION;
use utoipa::{IntoParams, ToSchema};

/// Most messages one `GET …/messages` returns.
const MAX_PAGE: usize = 200;
/// Page size when `limit` is absent.
const DEFAULT_PAGE: usize = 50;

/// Registers the routes under `/api/agent-api`.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(me_route)
        .service(conversations)
        .service(context)
        .service(list_messages)
        .service(send_message)
        .service(typing);
}

/// `GET /me` → `{ id, name, kind, status, webhookUrl, protocolVersion, bayId }` (protocol §2, §11).
#[utoipa::path(
    operation_id = "me",
    tag = "agent",
    summary = "The caller's identity and the protocol version",
    description = "Works with agent (`bay_…`) and user (`bay_u_…`) tokens alike. `protocolVersion` is the protocol's `major.minor`.",
    responses(
        (status = 200, description = "The caller", body = crate::openapi::schemas::Me),
        (status = 401, description = "UNAUTHORIZED: missing, unknown, rotated or revoked token", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED: the agent request budget (60/min by default) is spent", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 500, description = "INTERNAL", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE: the store or node cannot serve now", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[get("/me")]
async fn me_route(state: web::Data<AppState>, caller: Caller) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal.token).await?;
    let p = &caller.principal.participant;
    Ok(HttpResponse::Ok().json(json!({
        "id": p.id,
        "name": p.name,
        "kind": p.kind,
        "status": "active",
        "webhookUrl": null,
        "protocolVersion": PROTOCOL_VERSION,
        "bayId": caller.principal.bay,
    })))
}

/// `GET /conversations` → `{ conversations: [{ id, type, title, role }] }`.
#[utoipa::path(
    operation_id = "listConversations",
    tag = "agent",
    summary = "Conversations the caller is a member of",
    description = "Every conversation of the caller's Bay that the caller is a member of, with the caller's role in it.",
    responses(
        (status = 200, description = "The caller's conversations", body = crate::openapi::schemas::ConversationList),
        (status = 401, description = "UNAUTHORIZED: missing, unknown, rotated or revoked token", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED: the agent request budget (60/min by default) is spent", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 500, description = "INTERNAL", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE: the store or node cannot serve now", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[get("/conversations")]
async fn conversations(
    state: web::Data<AppState>,
    caller: Caller,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal.token).await?;
    let reader = &caller.principal.participant.id;
    let list = state
        .store
        .conversations_of(&caller.principal.bay, reader)
        .await?;
    let items: Vec<_> = list
        .iter()
        .map(|c| {
            json!({
                "id": c.id,
                "type": c.kind,
                "title": c.title,
                "role": c.member(reader).map(|m| m.role),
            })
        })
        .collect();
    Ok(HttpResponse::Ok().json(json!({ "conversations": items })))
}

/// Loads a conversation the caller is a member of. Unknown ids, other Bays'
/// ids and non-membership all give `None`, so the caller can never tell them apart.
async fn room_of(
    state: &AppState,
    caller: &Caller,
    id: &ConversationId,
) -> Result<Option<Room>, ApiError> {
    let bay = &caller.principal.bay;
    let Some(conversation) = state.store.conversation(bay, id).await? else {
        return Ok(None);
    };
    if conversation
        .member(&caller.principal.participant.id)
        .is_none()
    {
        return Ok(None);
    }
    let participants = state.store.participants(bay).await?;
    Ok(Some(Room::new(conversation, &participants)))
}

fn not_participant() -> ApiError {
    ApiError::new(
        ErrorCode::NotParticipant,
        "you are not a participant of this conversation",
    )
}

/// `GET /conversations/{id}/context` → the context envelope (protocol §3).
/// Non-participants (and unknown ids) get 403 NOT_PARTICIPANT.
#[utoipa::path(
    operation_id = "getContext",
    tag = "agent",
    summary = "The context envelope of a conversation",
    description = "The Agent Context Contract v2 envelope (protocol §3): conversation, participants (name, kind, role and, for agents, the description; never contact details), policy, `you` and the per-reader `instructions`. Non-participants and unknown ids get 403 NOT_PARTICIPANT alike.",
    params(
        ("id" = String, Path, description = "Conversation id"),
    ),
    responses(
        (status = 200, description = "The context envelope for the caller", body = ContextEnvelope),
        (status = 401, description = "UNAUTHORIZED: missing, unknown, rotated or revoked token", body = ErrorBody),
        (status = 403, description = "NOT_PARTICIPANT: not a member of the conversation (also for unknown ids)", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED: the agent request budget (60/min by default) is spent", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 500, description = "INTERNAL", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE: the store or node cannot serve now", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[get("/conversations/{id}/context")]
async fn context(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal.token).await?;
    let room = room_of(&state, &caller, &ConversationId(path.into_inner()))
        .await?
        .ok_or_else(not_participant)?;
    Ok(HttpResponse::Ok().json(room.envelope(&caller.principal.participant.id)))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct MessagesQuery {
    /// ISO-8601: messages strictly newer than this, ascending (forward polling).
    #[param(format = DateTime)]
    since: Option<String>,
    /// A message id: the page of messages older than it (history paging).
    cursor: Option<String>,
    /// Page size, 1–200 (default 50).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 200)]
    limit: Option<String>,
}

/// `GET /conversations/{id}/messages` → `{ messages, context, nextCursor }`
/// (protocol §5, §11). With `since`: newer messages, ascending. Without:
/// the newest page (or the page before `cursor`), ascending, and
/// `nextCursor` naming the page before it (null at the beginning).
#[utoipa::path(
    operation_id = "listMessages",
    tag = "agent",
    summary = "Messages of a conversation: forward polling or history paging",
    description = "With `since`: the messages strictly newer than it, ascending (forward polling; `nextCursor` is null). Without: the newest page, or with `cursor` the page before that message, ascending, and `nextCursor` naming the page before it (null at the beginning). Each message carries the caller's own `shouldRespond`.",
    params(
        ("id" = String, Path, description = "Conversation id"),
        MessagesQuery,
    ),
    responses(
        (status = 200, description = "A page of messages, ascending, with the context envelope", body = crate::openapi::schemas::MessagesPage),
        (status = 400, description = "INVALID_REQUEST (bad `limit`, `since` or query string) or INVALID_CURSOR (`cursor` names no message of this conversation)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED: missing, unknown, rotated or revoked token", body = ErrorBody),
        (status = 403, description = "NOT_PARTICIPANT: not a member of the conversation (also for unknown ids)", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED: the agent request budget (60/min by default) is spent", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 500, description = "INTERNAL", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE: the store or node cannot serve now", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[get("/conversations/{id}/messages")]
async fn list_messages(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    query: web::Query<MessagesQuery>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal.token).await?;
    let id = ConversationId(path.into_inner());
    let room = room_of(&state, &caller, &id)
        .await?
        .ok_or_else(not_participant)?;
    let limit = match &query.limit {
        None => DEFAULT_PAGE,
        Some(raw) => raw
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_PAGE).contains(n))
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::InvalidRequest,
                    "limit must be an integer from 1 to 200",
                )
            })?,
    };
    let bay = &caller.principal.bay;
    let (messages, next_cursor) = match (&query.since, &query.cursor) {
        (Some(since), _) => {
            let since: DateTime<Utc> = DateTime::parse_from_rfc3339(since)
                .map_err(|_| {
                    ApiError::new(
                        ErrorCode::InvalidRequest,
                        "since must be an RFC 3339 timestamp with an offset, e.g. 2026-11-30T13:09:00Z",
                    )
                })?
                .with_timezone(&Utc);
            let page = state.store.messages_since(bay, &id, since, limit).await?;
            (page, None)
        }
        (None, cursor) => {
            let before = cursor.as_ref().map(|c| MessageId(c.clone()));
            if let Some(b) = &before {
                if state.store.message(bay, &id, b).await?.is_none() {
                    return Err(ApiError::new(
                        ErrorCode::InvalidCursor,
                        "cursor names no message of this conversation",
                    ));
                }
            }
            let (page, more) = state
                .store
                .messages_before(bay, &id, before.as_ref(), limit)
                .await?;
            let next = more.then(|| page.first().map(|m| m.id.clone())).flatten();
            (page, next)
        }
    };
    let reader = &caller.principal.participant.id;
    let messages: Vec<_> = messages
        .iter()
        .map(|m| room.rest_message(m, reader))
        .collect();
    Ok(HttpResponse::Ok().json(json!({
        "messages": messages,
        "context": room.envelope(reader),
        "nextCursor": next_cursor,
    })))
}

/// Body of `POST …/messages`. `attachments` / `attachmentId` are refused
/// with 400 INVALID_REQUEST (this gateway stores no files).
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(examples(json!({"content": "On it, @Ana.", "replyToMessageId": null, "metadata": {"runId": "r-42"}})))]
pub(crate) struct SendBody {
    /// The text, 1 to `limits.max_content_chars` (32,000 by default)
    /// characters, not blank. `@Name` mentions route to agents (protocol §7).
    #[schema(value_type = String, min_length = 1, max_length = 32000)]
    content: serde_json::Value,
    /// Quote an earlier message of the same conversation.
    #[schema(value_type = Option<MessageId>)]
    reply_to_message_id: Option<String>,
    /// Free-form object stored with the message (`addressedAgents` is
    /// server-only and dropped).
    #[schema(value_type = Option<Object>)]
    metadata: Option<serde_json::Value>,
    #[schema(ignore)]
    attachments: Option<serde_json::Value>,
    #[schema(ignore)]
    attachment_id: Option<serde_json::Value>,
}

/// `POST /conversations/{id}/messages` `{content, replyToMessageId?, metadata?}`
/// → 201 with the stored message in the GET shape. Non-participants get
/// 404 (protocol §7: never confirm the id exists).
#[utoipa::path(
    operation_id = "sendMessage",
    tag = "agent",
    summary = "Post a message",
    description = "Stores the message and delivers it to every member over `/updates` and `/ws`; `@Name` mentions and the conversation's policy decide each agent's `shouldRespond`. Non-participants and unknown ids get 404 alike (protocol §7: never confirm an id exists). `attachments` / `attachmentId` are refused with 400 INVALID_REQUEST.",
    params(
        ("id" = String, Path, description = "Conversation id"),
    ),
    request_body = SendBody,
    responses(
        (status = 201, description = "The stored message, in the GET shape", body = super::views::RestMessage),
        (status = 400, description = "INVALID_JSON (not JSON, or a field missing or mistyped), INVALID_CONTENT (`content` not a string, empty, blank or too long), INVALID_REPLY_TARGET (`replyToMessageId` outside this conversation) or INVALID_REQUEST (`metadata` not an object, attachments)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED: missing, unknown, rotated or revoked token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown conversation or not a member (never confirms the id exists)", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE: body above `limits.max_body_bytes`", body = ErrorBody),
        (status = 415, description = "UNSUPPORTED_MEDIA_TYPE: content-type is not application/json", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED: the agent request budget (60/min by default) is spent", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 500, description = "INTERNAL", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE: the store or node cannot serve now", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[post("/conversations/{id}/messages")]
async fn send_message(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    body: web::Json<SendBody>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal.token).await?;
    let body = body.into_inner();
    let max = state.settings.limits.max_content_chars;
    let content = match body.content {
        serde_json::Value::String(s) => s,
        _ => {
            return Err(ApiError::new(
                ErrorCode::InvalidContent,
                "content must be a string",
            ))
        }
    };
    let chars = content.chars().count();
    if chars == 0 || chars > max || content.trim().is_empty() {
        return Err(ApiError::new(
            ErrorCode::InvalidContent,
            format!("content must be 1 to {max} characters and not blank"),
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
    if body.attachments.is_some() || body.attachment_id.is_some() {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "attachments are not supported by this gateway",
        ));
    }
    let id = ConversationId(path.into_inner());
    let outcome = state
        .registry
        .conversation(&caller.principal.bay, &id)
        .send(Post {
            sender: caller.principal.participant.clone(),
            content,
            reply_to: body.reply_to_message_id.map(MessageId),
            metadata: body
                .metadata
                .filter(|m| !m.is_null())
                .map(strip_server_fields),
        })
        .await??;
    match outcome {
        PostOutcome::Posted(message) => {
            metrics::counter!(crate::metrics::MESSAGES_ACCEPTED).increment(1);
            let reader = &caller.principal.participant.id;
            let view = message.view_for(reader, message.sender.clone());
            Ok(HttpResponse::Created().json(super::views::RestMessage {
                conversation_id: message.conversation_id.clone(),
                view,
            }))
        }
        PostOutcome::NotFound => Err(ApiError::not_found()),
        PostOutcome::InvalidReplyTarget => Err(ApiError::new(
            ErrorCode::InvalidReplyTarget,
            "replyToMessageId is not a message of this conversation",
        )),
    }
}

/// Metadata keys only the server writes (protocol §4: `addressedAgents` is
/// the server's resolution of plain-name addressing). A sender's own value
/// is dropped, so no one can plant a routing hint in a message.
const SERVER_METADATA_FIELDS: [&str; 1] = ["addressedAgents"];

fn strip_server_fields(mut metadata: serde_json::Value) -> serde_json::Value {
    if let Some(map) = metadata.as_object_mut() {
        for key in SERVER_METADATA_FIELDS {
            map.remove(key);
        }
    }
    metadata
}

/// `POST /conversations/{id}/typing` → `{ ok: true, ttlMs }` (protocol §11:
/// 5 s TTL, self-expiring). Non-participants get 404.
#[utoipa::path(
    operation_id = "startTyping",
    tag = "agent",
    summary = "Show the caller as typing (5 s TTL)",
    description = "The indicator expires by itself after `ttlMs` (`timing.typing_ttl`, 5 s by default); call again to keep it. Non-participants and unknown ids get 404 alike.",
    params(
        ("id" = String, Path, description = "Conversation id"),
    ),
    responses(
        (status = 200, description = "Typing indicator set; it expires by itself", body = crate::openapi::schemas::TypingAck),
        (status = 401, description = "UNAUTHORIZED: missing, unknown, rotated or revoked token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown conversation or not a member (never confirms the id exists)", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED: the agent request budget (60/min by default) is spent", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 500, description = "INTERNAL", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE: the store or node cannot serve now", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[post("/conversations/{id}/typing")]
async fn typing(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal.token).await?;
    let id = ConversationId(path.into_inner());
    let outcome = state
        .registry
        .conversation(&caller.principal.bay, &id)
        .send(Typing {
            participant: caller.principal.participant.id.clone(),
        })
        .await??;
    match outcome {
        TypingOutcome::Started { ttl } => Ok(HttpResponse::Ok().json(json!({
            "ok": true,
            "ttlMs": ttl.as_millis() as u64,
        }))),
        TypingOutcome::NotFound => Err(ApiError::not_found()),
    }
}
