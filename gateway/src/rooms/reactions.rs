//! Reactions: `POST` and `DELETE /r/{cap}/reactions {message_id, author,
//! emoji}` add or take back `author`'s reaction, through the conversation
//! actor like a member's (`reaction.added` / `reaction.removed` on every
//! transport). Both are idempotent: a repeat changes nothing and answers
//! the message as it is.

use super::view::{self, RoomMessage};
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::{delete, post, web, HttpResponse};
use serde::Deserialize;
use std::collections::HashMap;
use switchboard_actors::conversation::{Action, Amend, AmendOutcome};
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use utoipa::ToSchema;

/// Body of both reaction calls.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RoomReactionBody {
    /// The decimal id of a message of this room.
    pub message_id: String,
    /// Your display name (unverified).
    pub author: String,
    /// Exactly one emoji (skin tones included); anything else is 400
    /// INVALID_REACTION.
    pub emoji: String,
}

async fn apply(
    state: &AppState,
    cap: &str,
    body: RoomReactionBody,
    add: bool,
) -> Result<HttpResponse, ApiError> {
    let link = super::open(state, cap).await?;
    link.require("react")?;
    super::authors::check_author(&body.author)?;
    let no_message = || ApiError::new(ErrorCode::NotFound, "no such message in this room");
    let id = view::message_id(&body.message_id).ok_or_else(no_message)?;
    // The agent API's rule: exactly one emoji, stored fully qualified.
    let emoji = crate::api::messages::reactions::checked_emoji(&body.emoji)?;
    state.rooms.write(&link.room)?;
    let by = super::authors::author(
        state,
        &link.room,
        &body.author,
        state.settings.rooms.max_authors,
    )
    .await?;
    let action = if add {
        Action::React {
            emoji: emoji.clone(),
        }
    } else {
        Action::Unreact { emoji }
    };
    let outcome = state
        .registry
        .conversation(&link.room.bay, &link.room.conversation)
        .send(Amend {
            by,
            message: id,
            action,
        })
        .await??;
    let message = match outcome {
        AmendOutcome::Changed(m) | AmendOutcome::Unchanged(m) => *m,
        AmendOutcome::NotFound => return Err(no_message()),
        AmendOutcome::Deleted => {
            return Err(ApiError::new(
                ErrorCode::MessageDeleted,
                "the message was removed",
            ))
        }
        AmendOutcome::Forbidden => {
            return Err(ApiError::new(
                ErrorCode::Forbidden,
                "this reaction is not allowed",
            ))
        }
        AmendOutcome::Refused(code, why) => return Err(ApiError::new(code, why)),
    };
    let shown = view::render(
        &*state.store,
        &link.room.bay,
        link.room.brief.as_ref(),
        std::slice::from_ref(&message),
        &HashMap::new(),
    )
    .await?
    .pop()
    .ok_or_else(no_message)?;
    Ok(HttpResponse::Ok().json(shown))
}

/// `POST /r/{cap}/reactions`.
#[utoipa::path(
    operation_id = "reactInRoom",
    tag = "rooms",
    summary = "Add a reaction",
    description = "Adds `author`'s `emoji` to the message; repeating it changes nothing. Guest and owner links.",
    params(("cap" = String, Path, description = "The link's capability")),
    request_body = RoomReactionBody,
    responses(
        (status = 200, description = "The message after the change", body = RoomMessage),
        (status = 400, description = "INVALID_REACTION or INVALID_REQUEST", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: the link cannot react; BAY_SUSPENDED, ACCOUNT_SUSPENDED, AUTHOR_REMOVED or ROOM_AUTHORS_FULL", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown link or message", body = ErrorBody),
        (status = 410, description = "MESSAGE_DELETED or ROOM_EXPIRED", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
)]
#[post("/r/{cap}/reactions")]
pub async fn react(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Json<RoomReactionBody>,
) -> Result<HttpResponse, ApiError> {
    apply(&state, &path, body.into_inner(), true).await
}

/// `DELETE /r/{cap}/reactions`.
#[utoipa::path(
    operation_id = "unreactInRoom",
    tag = "rooms",
    summary = "Take a reaction back",
    description = "Removes `author`'s `emoji` from the message; repeating it changes nothing. Guest and owner links.",
    params(("cap" = String, Path, description = "The link's capability")),
    request_body = RoomReactionBody,
    responses(
        (status = 200, description = "The message after the change", body = RoomMessage),
        (status = 400, description = "INVALID_REACTION or INVALID_REQUEST", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: the link cannot react; BAY_SUSPENDED, ACCOUNT_SUSPENDED or AUTHOR_REMOVED", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown link or message", body = ErrorBody),
        (status = 410, description = "MESSAGE_DELETED or ROOM_EXPIRED", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
)]
#[delete("/r/{cap}/reactions")]
pub async fn unreact(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Json<RoomReactionBody>,
) -> Result<HttpResponse, ApiError> {
    apply(&state, &path, body.into_inner(), false).await
}
