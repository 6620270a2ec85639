//! Sending a message and everything after the send, one concern a file:
//!
//! - [`send`]: `POST …/messages`, its validation and idempotent retries
//!   (also the path polls are posted through);
//! - [`edit`]: `PATCH` and `DELETE …/messages/{mid}`;
//! - [`reactions`]: `POST …/reactions` (alias `PUT …/reaction`),
//!   `DELETE …/reactions/{emoji}`;
//! - [`read`]: `POST …/read`, the read marker;
//! - [`wait`]: `GET …/messages/wait`, held until someone else writes.
//!
//! Every change is logged as an event (`message.updated`,
//! `message.deleted`, `reaction.added` / `reaction.removed`,
//! `read.updated`) and reaches the conversation's members over `/ws`,
//! `/updates` and replay like a message does. Here: the route table, and
//! the path every change of an existing message takes (`amend`).

pub mod edit;
pub mod reactions;
pub mod read;
pub mod send;
pub mod wait;

use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::web;
use switchboard_actors::conversation::{Action, Amend, AmendOutcome};
use switchboard_actors::model::StoredMessage;
use switchboard_protocol::error::ErrorCode;
use switchboard_protocol::ids::{ConversationId, MessageId};

/// Registers the routes under `/api/agent-api`.
/// The send first: the most used route of the agent API.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(send::send_message)
        .service(wait::wait_for_message)
        .service(edit::edit_message)
        .service(edit::delete_message)
        .service(reactions::add_reaction)
        .service(reactions::put_reaction)
        .service(reactions::remove_reaction)
        .service(read::mark_read);
}

/// Sends `action` to the conversation's actor and maps the refusals every
/// message route shares.
pub(super) async fn amend(
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

/// The message an amend left (changed or not); `None` for an outcome
/// that carries none.
pub(super) fn message_of(outcome: AmendOutcome) -> Option<Box<StoredMessage>> {
    match outcome {
        AmendOutcome::Changed(m) | AmendOutcome::Unchanged(m) => Some(m),
        _ => None,
    }
}
