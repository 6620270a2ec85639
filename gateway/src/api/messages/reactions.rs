//! Reactions: `POST …/messages/{mid}/reactions` (and its alias `PUT
//! …/messages/{mid}/reaction`) and `DELETE …/reactions/{emoji}`, one per (member, emoji), emoji compared
//! in their fully-qualified form. An agent's 👀 also starts its typing
//! indicator (protocol v1.10).

use super::{amend, message_of};
use crate::api::body::Object;
use crate::api::views::{reactions_for, ReactionView};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::{delete, post, put, web, HttpResponse};
use serde::{Deserialize, Serialize};
use switchboard_actors::conversation::{Action, AmendOutcome};
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use switchboard_protocol::ids::{ConversationId, MessageId, ParticipantId};
use switchboard_protocol::model::ParticipantKind;
use utoipa::ToSchema;

/// The reaction that also starts the agent's typing indicator: "picked
/// up, working on it" (protocol v1.10).
pub const PICKUP_EMOJI: &str = "👀";

/// Body of `POST …/reactions`.
#[derive(Deserialize, ToSchema)]
pub(crate) struct ReactionBody {
    /// One emoji, e.g. `👍`. `👀` from an agent also starts its typing
    /// indicator (protocol v1.10: "react 👀 before work").
    #[schema(value_type = crate::openapi::schemas::Emoji)]
    emoji: String,
}

/// `POST …/reactions` and `DELETE …/reactions/{emoji}` answer.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Reactions {
    /// The message reacted to.
    pub message_id: MessageId,
    /// Its reactions after the change, as the caller sees them.
    pub reactions: Vec<ReactionView>,
}

/// `emoji` when it is exactly one emoji (Unicode's emoji list, through the
/// `emojis` crate, skin tones and all), in its fully-qualified form: `❤`
/// and `❤️` (with or without the variation selector) are one reaction.
pub(crate) fn checked_emoji(emoji: &str) -> Result<String, ApiError> {
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
pub(super) async fn add_reaction(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(String, String)>,
    body: Object<ReactionBody>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal).await?;
    let answer = react(&state, &caller, path.into_inner(), &body.emoji).await?;
    Ok(HttpResponse::Ok().json(answer))
}

/// `PUT /conversations/{id}/messages/{mid}/reaction` `{emoji}`: the same
/// as `POST …/reactions`, under the path the shipped BayChat CLI calls
/// (0.23.1 `react_to_message`). PUT fits: reacting twice holds one
/// reaction, so a retry changes nothing.
#[utoipa::path(
    operation_id = "putReaction",
    tag = "agent",
    summary = "React to a message (the BayChat CLI's path)",
    description = "An alias of `POST …/reactions` with the same body, answer, events and refusals: one reaction per (member, emoji), the same emoji again changes nothing. An agent's 👀 also starts its typing indicator (protocol v1.10).",
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
#[put("/conversations/{id}/messages/{mid}/reaction")]
pub(super) async fn put_reaction(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(String, String)>,
    body: Object<ReactionBody>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal).await?;
    let answer = react(&state, &caller, path.into_inner(), &body.emoji).await?;
    Ok(HttpResponse::Ok().json(answer))
}

/// Adds the caller's `emoji` to message `mid` of conversation `id`, and
/// for an agent's 👀 starts its typing indicator. Shared with the MCP tool
/// `react_to_message`.
///
/// # Errors
/// 400 INVALID_REACTION; 404 for a non-member or an unknown message.
pub(crate) async fn react(
    state: &AppState,
    caller: &Caller,
    (id, mid): (String, String),
    emoji: &str,
) -> Result<Reactions, ApiError> {
    let emoji = checked_emoji(emoji)?;
    let id = ConversationId(id);
    let pickup = emoji == PICKUP_EMOJI;
    let outcome = amend(state, caller, &id, MessageId(mid), Action::React { emoji }).await?;
    let me = &caller.principal.participant;
    if pickup && me.kind == ParticipantKind::Agent {
        crate::api::typing::start_typing(state, &caller.principal.bay, &id, &me.id).await?;
    }
    reactions_answer(outcome, &me.id)
}

fn reactions_answer(outcome: AmendOutcome, reader: &ParticipantId) -> Result<Reactions, ApiError> {
    let message = message_of(outcome).ok_or_else(ApiError::not_found)?;
    Ok(Reactions {
        message_id: message.id.clone(),
        reactions: reactions_for(&message, reader),
    })
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
        ("emoji" = crate::openapi::schemas::Emoji, Path, description = "The emoji, URL-encoded"),
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
pub(super) async fn remove_reaction(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal).await?;
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
    let answer = reactions_answer(outcome, &caller.principal.participant.id)?;
    Ok(HttpResponse::Ok().json(answer))
}

#[cfg(test)]
mod tests {
    use super::checked_emoji;

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
}
