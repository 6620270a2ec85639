//! `PATCH /conversations/{id}/messages/{mid}` (the sender edits) and
//! `DELETE …` (the sender or an admin leaves a tombstone).

use super::send::checked_content;
use super::{amend, message_of};
use crate::api::body::Object;
use crate::api::views::RestMessage;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::{delete, patch, web, HttpResponse};
use serde::Deserialize;
use switchboard_actors::conversation::Action;
use switchboard_protocol::error::ErrorBody;
use switchboard_protocol::ids::{ConversationId, MessageId};
use utoipa::ToSchema;

/// Body of `PATCH …/messages/{mid}`.
#[derive(Deserialize, ToSchema)]
pub(crate) struct EditBody {
    /// The new text, under the same rules as a send's `content`.
    #[schema(value_type = String, min_length = 1, max_length = 32000, pattern = "[^\\t\\n\\x0B\\f\\r \\x85\\xA0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]")]
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
pub(super) async fn edit_message(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(String, String)>,
    body: Object<EditBody>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal).await?;
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
pub(super) async fn delete_message(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal).await?;
    let (id, mid) = path.into_inner();
    let (conversation, message) = (ConversationId(id), MessageId(mid));
    amend(
        &state,
        &caller,
        &conversation,
        message.clone(),
        Action::Delete,
    )
    .await?;
    // Its files go with it (protocol §10); deleting again finds none.
    state
        .files
        .forget_message(&caller.principal.bay, &conversation, &message)
        .await;
    Ok(HttpResponse::NoContent().finish())
}
