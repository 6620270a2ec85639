//! The brief: `POST /r/{cap}/pins {message_id}` pins a message (replacing
//! any other brief); `DELETE /r/{cap}/pins/{id}` clears it when it is that
//! message. Both are idempotent participant writes; each change bumps the
//! room's metadata revision, which FOLLOWs answer with the new brief.

use super::read;
use super::view::{self, RoomMessage};
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::{delete, post, web, HttpResponse};
use serde::{Deserialize, Serialize};
use switchboard_actors::store::{BriefChange, Updated};
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use utoipa::ToSchema;

/// Body of `POST /r/{cap}/pins`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RoomPinBody {
    /// The decimal id of a message of this room.
    pub message_id: String,
}

/// A pin's answer: the brief after the change.
#[derive(Serialize, ToSchema)]
pub struct RoomBrief {
    /// The pinned message, or null.
    pub brief: Option<RoomMessage>,
    /// Decimal; the room's metadata revision after the change.
    pub metadata_revision: String,
}

fn no_message() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "no such message in this room")
}

/// Applies `change` for `cap` and answers the brief.
async fn change_brief(
    state: &AppState,
    cap: &str,
    operation: &str,
    wire_id: &str,
    pinning: bool,
) -> Result<HttpResponse, ApiError> {
    let link = super::open(state, cap).await?;
    link.require(operation)?;
    let id = view::message_id(wire_id).ok_or_else(no_message)?;
    state.rooms.write(&link.room)?;
    let (bay, conv) = (&link.room.bay, &link.room.conversation);
    let change = if pinning {
        state
            .store
            .message(bay, conv, &id)
            .await?
            .filter(view::visible)
            .ok_or_else(no_message)?;
        BriefChange::Pin(id)
    } else {
        BriefChange::Unpin(id)
    };
    let Updated::Updated(room) = state.store.set_brief(bay, conv, change).await? else {
        return Err(ApiError::not_found());
    };
    let link = super::Opened { room, ..link };
    Ok(HttpResponse::Ok().json(RoomBrief {
        brief: read::brief(state, &link).await?,
        metadata_revision: link.room.metadata_revision.to_string(),
    }))
}

/// `POST /r/{cap}/pins`.
#[utoipa::path(
    operation_id = "pinInRoom",
    tag = "rooms",
    summary = "Pin a message as the room's brief",
    description = "Replaces the brief with the message; pinning the brief again changes nothing. Guest and owner links.",
    params(("cap" = String, Path, description = "The link's capability")),
    request_body = RoomPinBody,
    responses(
        (status = 200, description = "The brief after the pin", body = RoomBrief),
        (status = 403, description = "FORBIDDEN: the link cannot pin; BAY_SUSPENDED", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown link or message", body = ErrorBody),
        (status = 410, description = "ROOM_EXPIRED", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
)]
#[post("/r/{cap}/pins")]
pub async fn pin(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Json<RoomPinBody>,
) -> Result<HttpResponse, ApiError> {
    change_brief(&state, &path, "pin", &body.message_id, true).await
}

/// `DELETE /r/{cap}/pins/{id}`.
#[utoipa::path(
    operation_id = "unpinInRoom",
    tag = "rooms",
    summary = "Clear the room's brief",
    description = "Clears the brief when it is this message; otherwise changes nothing. Guest and owner links.",
    params(
        ("cap" = String, Path, description = "The link's capability"),
        ("id" = String, Path, description = "The pinned message's decimal id"),
    ),
    responses(
        (status = 200, description = "The brief after the change", body = RoomBrief),
        (status = 403, description = "FORBIDDEN: the link cannot unpin", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown link", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
)]
#[delete("/r/{cap}/pins/{id}")]
pub async fn unpin(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (cap, id) = path.into_inner();
    change_brief(&state, &cap, "unpin", &id, false).await
}
