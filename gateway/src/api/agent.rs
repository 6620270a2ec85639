//! The agent API (protocol §11), same routes for agent (`bay_…`) and user
//! (`bay_u_…`) tokens. Every call here draws on the caller's agent budget
//! (60/min by default); `/updates` and `/ws` live in `realtime`.

use super::views::Room;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::openapi::schemas::{Me, MeStatus, WebhookStatusView};
use crate::state::AppState;
use actix_web::{get, web, HttpResponse};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::json;
use switchboard_protocol::context::ContextEnvelope;
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use switchboard_protocol::ids::{ConversationId, MessageId};
use switchboard_protocol::PROTOCOL_VERSION;
use utoipa::IntoParams;

/// Most messages one `GET …/messages` returns.
const MAX_PAGE: usize = 200;
/// Page size when `limit` is absent.
const DEFAULT_PAGE: usize = 50;

/// Registers the routes under `/api/agent-api`.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(me_route)
        .service(conversations)
        .service(context)
        .service(list_messages);
}

/// `GET /me` → `{ id, name, kind, status, webhookUrl, webhookStatus,
/// protocolVersion, bayId }` (protocol §2, §11).
#[utoipa::path(
    operation_id = "me",
    tag = "agent",
    summary = "The caller's identity and the protocol version",
    description = "Works with agent (`bay_…`) and user (`bay_u_…`) tokens alike. `protocolVersion` is the protocol's `major.minor`.",
    responses(
        (status = 200, description = "The caller", body = Me),
        (status = 401, description = "UNAUTHORIZED: missing, unknown, rotated or revoked token", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED: the agent request budget (60/min by default) is spent", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 500, description = "INTERNAL", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE: the store or node cannot serve now", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[get("/me")]
async fn me_route(state: web::Data<AppState>, caller: Caller) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal).await?;
    let (bay, p) = (&caller.principal.bay, &caller.principal.participant);
    let webhook = state.store.webhook(bay, &p.id).await?;
    let status = state.store.webhook_status(bay, &p.id).await?;
    let status = (status != Default::default()).then(|| WebhookStatusView::of(&status));
    Ok(HttpResponse::Ok().json(Me {
        id: p.id.clone(),
        name: p.name.clone(),
        kind: p.kind,
        status: MeStatus::Active,
        webhook_url: webhook.map(|w| w.url),
        webhook_status: status,
        protocol_version: PROTOCOL_VERSION.to_owned(),
        bay_id: bay.clone(),
    }))
}

/// `GET /conversations` → `[{ id, type, title, role, unreadCount,
/// lastReadMessageId }]`: a bare array, because the shipped BayChat CLI
/// (0.6.0 `handleListConversations`) reads `.length` and `.map` on the
/// answer itself.
#[utoipa::path(
    operation_id = "listConversations",
    tag = "agent",
    summary = "Conversations the caller is a member of",
    description = "Every conversation of the caller's Bay that the caller is a member of, with the caller's role in it and read state. The answer is a bare JSON array (what shipped BayChat clients read).",
    responses(
        (status = 200, description = "The caller's conversations", body = Vec<crate::openapi::schemas::ConversationSummary>),
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
    state.limits.check_agent(&caller.principal).await?;
    Ok(HttpResponse::Ok().json(conversation_list(&state, &caller).await?))
}

/// The caller's conversations as `GET /conversations` lists them: `{id,
/// type, title, role, unreadCount, lastReadMessageId}` each. Shared with
/// the MCP tool `list_conversations`.
pub(crate) async fn conversation_list(
    state: &AppState,
    caller: &Caller,
) -> Result<Vec<serde_json::Value>, ApiError> {
    let reader = &caller.principal.participant.id;
    let list = state
        .store
        .conversations_of(&caller.principal.bay, reader)
        .await?;
    let ids: Vec<ConversationId> = list.iter().map(|c| c.id.clone()).collect();
    let reads = state
        .store
        .read_states(&caller.principal.bay, reader, &ids)
        .await?;
    Ok(list
        .iter()
        .zip(reads)
        .map(|(c, read)| {
            json!({
                "id": c.id,
                "type": c.kind,
                "title": c.title,
                "role": c.member(reader).map(|m| m.role),
                "unreadCount": read.unread,
                "lastReadMessageId": read.last_read,
            })
        })
        .collect())
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
    state.limits.check_agent(&caller.principal).await?;
    let id = ConversationId(path.into_inner());
    Ok(HttpResponse::Ok().json(context_of(&state, &caller, &id).await?))
}

/// The context envelope of conversation `id` for the caller (protocol §3).
/// Shared with the MCP tool `get_room_context`.
///
/// # Errors
/// 403 NOT_PARTICIPANT for a non-member or an unknown id.
pub(crate) async fn context_of(
    state: &AppState,
    caller: &Caller,
    id: &ConversationId,
) -> Result<ContextEnvelope, ApiError> {
    let room = room_of(state, caller, id)
        .await?
        .ok_or_else(not_participant)?;
    Ok(room.envelope(&caller.principal.participant.id))
}

#[derive(Deserialize, IntoParams, Default)]
#[into_params(parameter_in = Query)]
pub(crate) struct MessagesQuery {
    /// ISO-8601: messages strictly newer than this, ascending (forward polling).
    #[param(format = DateTime)]
    pub since: Option<String>,
    /// A message id: the page of messages older than it (history paging).
    pub cursor: Option<String>,
    /// Page size, 1–200 (default 50).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 200)]
    pub limit: Option<String>,
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
    state.limits.check_agent(&caller.principal).await?;
    let id = ConversationId(path.into_inner());
    Ok(HttpResponse::Ok().json(messages_page(&state, &caller, &id, &query).await?))
}

/// A page of conversation `id` as `GET …/messages` answers it: `{messages,
/// context, nextCursor}`. Shared with the MCP tool `get_messages`.
///
/// # Errors
/// 403 NOT_PARTICIPANT; 400 INVALID_REQUEST (bad `limit` or `since`) or
/// INVALID_CURSOR.
pub(crate) async fn messages_page(
    state: &AppState,
    caller: &Caller,
    id: &ConversationId,
    query: &MessagesQuery,
) -> Result<serde_json::Value, ApiError> {
    let id = id.clone();
    let room = room_of(state, caller, &id)
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
    let mut messages = messages;
    super::views::refresh_previews(&*state.store, bay, &id, &mut messages).await?;
    let reader = &caller.principal.participant.id;
    let messages: Vec<_> = messages
        .iter()
        .map(|m| room.rest_message(m, reader))
        .collect();
    Ok(json!({
        "messages": messages,
        "context": room.envelope(reader),
        "nextCursor": next_cursor,
    }))
}
