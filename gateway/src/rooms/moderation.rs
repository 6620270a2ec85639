//! Owner deletion: `DELETE /r/{cap}/messages/{id}` with the owner link
//! (any other link: 403). The message becomes a tombstone through the
//! conversation actor (`message.deleted` on every transport; FOLLOWs
//! answer its id in `tombstones`) and leaves the brief if it was pinned.

use super::create::OWNER_ID;
use super::view;
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::{delete, web, HttpResponse};
use serde::Serialize;
use switchboard_actors::conversation::{Action, Amend, AmendOutcome};
use switchboard_actors::store::BriefChange;
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use switchboard_protocol::ids::ParticipantId;
use utoipa::ToSchema;

/// A deletion's answer.
#[derive(Serialize, ToSchema)]
pub struct RoomMessageDeleted {
    /// The removed message's decimal id.
    pub id: String,
    /// Always true (a repeat of a done deletion answers the same).
    pub deleted: bool,
}

/// `DELETE /r/{cap}/messages/{id}`.
#[utoipa::path(
    operation_id = "deleteInRoom",
    tag = "rooms",
    summary = "Delete a message (owner link)",
    description = "Leaves a tombstone; a pinned message also leaves the brief. Only the owner link; others get 403. Repeating it changes nothing.",
    params(
        ("cap" = String, Path, description = "The owner link's capability"),
        ("id" = String, Path, description = "The message's decimal id"),
    ),
    responses(
        (status = 200, description = "Deleted", body = RoomMessageDeleted),
        (status = 403, description = "FORBIDDEN: not the owner link", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown link or message", body = ErrorBody),
        (status = 410, description = "ROOM_EXPIRED", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
)]
#[delete("/r/{cap}/messages/{id}")]
pub async fn delete_message(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (cap, wire) = path.into_inner();
    let link = super::open(&state, &cap).await?;
    link.require("delete")?;
    let no_message = || ApiError::new(ErrorCode::NotFound, "no such message in this room");
    let id = view::message_id(&wire).ok_or_else(no_message)?;
    state.rooms.manage(&link.room)?;
    let (bay, conv) = (&link.room.bay, &link.room.conversation);
    let owner = state
        .store
        .participant(bay, &ParticipantId(OWNER_ID.to_owned()))
        .await?
        .ok_or_else(ApiError::not_found)?;
    super::authors::refuse_suspended(&state, bay, &owner.id).await?;
    let outcome = state
        .registry
        .conversation(bay, conv)
        .send(Amend {
            by: owner,
            message: id.clone(),
            action: Action::Delete,
        })
        .await??;
    match outcome {
        AmendOutcome::Changed(_) | AmendOutcome::Unchanged(_) | AmendOutcome::Deleted => {}
        AmendOutcome::NotFound => return Err(no_message()),
        AmendOutcome::Forbidden => {
            return Err(ApiError::new(
                ErrorCode::Forbidden,
                "this message cannot be deleted",
            ))
        }
        AmendOutcome::Refused(code, why) => return Err(ApiError::new(code, why)),
    }
    state
        .store
        .set_brief(bay, conv, BriefChange::Unpin(id))
        .await?;
    Ok(HttpResponse::Ok().json(RoomMessageDeleted {
        id: wire,
        deleted: true,
    }))
}
