//! `POST /conversations/{id}/read`: the caller's read marker, which only
//! moves forward, and the unread count after it.

use crate::api::body::Object;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::{post, web, HttpResponse};
use serde::{Deserialize, Serialize};
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use switchboard_protocol::ids::{ConversationId, MessageId};
use utoipa::ToSchema;

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
    description = "The marker only ever moves forward: an `upTo` older than the marker changes nothing. Posting a message also reads everything before it. When the marker moves, members get a `read.updated` event. `unreadCount` on `GET /conversations` counts the messages after the marker that are not deleted.",
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
pub(super) async fn mark_read(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    body: Object<ReadBody>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal).await?;
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
