//! Typing indicators (protocol §11: `POST …/typing`, 5 s TTL, no stop
//! call). Starting one shows the caller as `thinking` in presence and tells
//! the conversation's other members with a `typing.started` event, over
//! every transport (docs/summary.md, "Typing").

use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::{post, web, HttpResponse};
use chrono::Utc;
use serde_json::json;
use switchboard_actors::conversation::{Typing, TypingOutcome};
use switchboard_actors::feed::ActivityKind;
use switchboard_actors::store::log::{Change, LogEvent};
use switchboard_protocol::error::ErrorBody;
use switchboard_protocol::ids::{BayId, ConversationId, ParticipantId};

/// Registers the route under `/api/agent-api`.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(typing);
}

/// Starts `participant`'s typing indicator in `conversation`: presence
/// (`thinking`) and, when the actor says the room should hear of it and
/// the room has at most `limits.presence_max_members` members (the
/// presence cap: N members typing cost N² deliveries), a `typing.started`
/// entry in the Bay's log. [`TypingOutcome::NotFound`] for non-members.
///
/// # Errors
///
/// Store failures (503) and a conversation actor that cannot be reached.
pub async fn start_typing(
    state: &AppState,
    bay: &BayId,
    conversation: &ConversationId,
    participant: &ParticipantId,
) -> Result<TypingOutcome, ApiError> {
    let outcome = state
        .registry
        .conversation(bay, conversation)
        .send(Typing {
            participant: participant.clone(),
        })
        .await??;
    if let TypingOutcome::Started {
        ttl,
        announce,
        conversation,
        members,
    } = &outcome
    {
        state
            .registry
            .note_activity(bay, participant.clone(), ActivityKind::Typing { ttl: *ttl });
        if *announce && *members <= state.settings.limits.presence_max_members {
            let until = Utc::now() + chrono::Duration::from_std(*ttl).unwrap_or_default();
            state
                .store
                .append_control(
                    bay,
                    LogEvent::Change {
                        conversation: conversation.clone(),
                        change: Box::new(Change::Typing {
                            participant: participant.clone(),
                            until,
                        }),
                    },
                )
                .await?;
        }
    }
    Ok(outcome)
}

/// `POST /conversations/{id}/typing` → `{ ok: true, ttlMs }` (protocol §11:
/// 5 s TTL, self-expiring). Non-participants get 404.
#[utoipa::path(
    operation_id = "startTyping",
    tag = "agent",
    summary = "Show the caller as typing (5 s TTL)",
    description = "The indicator expires by itself after `ttlMs` (`timing.typing_ttl`, 5 s by default); call again to keep it. The other members get a `typing.started` event (`conversationId`, `participantId`, `expiresAt`) over every transport, at most about once per half TTL per caller however often it calls, and only in conversations of at most `limits.presence_max_members` (100) members; the caller also shows as `thinking` in presence. Non-participants and unknown ids get 404 alike.",
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
    state.limits.check_agent(&caller.principal).await?;
    let id = ConversationId(path.into_inner());
    let p = &caller.principal;
    match start_typing(&state, &p.bay, &id, &p.participant.id).await? {
        TypingOutcome::Started { ttl, .. } => Ok(HttpResponse::Ok().json(json!({
            "ok": true,
            "ttlMs": ttl.as_millis() as u64,
        }))),
        TypingOutcome::NotFound => Err(ApiError::not_found()),
    }
}
