//! Streaming replies: appending to a draft, completing it, cancelling it.
//! A draft is opened by `POST …/messages` with `"stream": true`
//! (docs/websocket.md, "Streaming replies").
//!
//! Appends do not spend the agent request budget (60/min): a reply streams
//! tens of them per second, and the conversation actor gathers them into
//! one store write per flush window however fast they come.

use super::body::{optional_object, Object};
use super::views::RestMessage;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::{post, web, HttpResponse};
use serde::{Deserialize, Serialize};
use switchboard_actors::conversation::{AppendToDraft, DraftReply, EndDraft, EndOutcome, Ending};
use switchboard_actors::feed::ActivityKind;
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use switchboard_protocol::ids::{ConversationId, MessageId};
use switchboard_protocol::model::MessageState;
use utoipa::ToSchema;

/// Registers the routes under `/api/agent-api`.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(append).service(complete).service(cancel);
}

/// Body of `POST …/messages/{mid}/append`.
#[derive(Deserialize, ToSchema)]
#[schema(examples(json!({"offset": 12, "text": " the launch PR"})))]
pub(crate) struct AppendBody {
    /// The draft's length as the author believes it, in Unicode scalar
    /// values: where `text` starts.
    #[serde(deserialize_with = "crate::api::integral::one")]
    offset: u64,
    /// The text to append; not empty.
    #[schema(min_length = 1)]
    text: String,
}

/// Answer of an accepted append.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Appended {
    /// The draft.
    message_id: MessageId,
    /// The draft's length now, in Unicode scalar values.
    length: u64,
    /// The draft's version now.
    version: u64,
}

/// `POST /conversations/{id}/messages/{mid}/append` `{offset, text}` → 200
/// `{messageId, length, version}` once the text is stored.
#[utoipa::path(
    operation_id = "appendToDraft",
    tag = "agent",
    summary = "Append text to your streaming draft",
    description = "Appends `text` at `offset` (the draft's length in Unicode scalar values, as you believe it). Appends are gathered for `timing.draft_flush_interval` (40 ms by default), stored in one write and delivered to members as one `message.delta`; the answer comes once the text is stored, so an accepted append is never lost. An exact repeat of accepted text is a no-op (200). An `offset` beyond the draft's length is 409 APPEND_GAP, and an overlap that disagrees with stored text is 409 APPEND_CONFLICT; both carry the draft's `length`, where to resume. Appends do not count against the agent request budget.",
    params(
        ("id" = String, Path, description = "Conversation id"),
        ("mid" = String, Path, description = "The draft's message id"),
    ),
    request_body = AppendBody,
    responses(
        (status = 200, description = "Stored (or an exact repeat)", body = Appended),
        (status = 400, description = "INVALID_JSON, INVALID_CONTENT (empty text, or the draft would pass `limits.max_content_chars`; carries `length`)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: not the draft's author", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown conversation or message, or not a member", body = ErrorBody),
        (status = 409, description = "APPEND_GAP or APPEND_CONFLICT (with `length`), or DRAFT_CLOSED: the message is not an open draft", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE: retry the same append", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[post("/conversations/{id}/messages/{mid}/append")]
async fn append(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(String, String)>,
    body: Object<AppendBody>,
) -> Result<HttpResponse, ApiError> {
    let (id, mid) = path.into_inner();
    let body = body.into_inner();
    if body.text.is_empty() {
        return Err(ApiError::new(
            ErrorCode::InvalidContent,
            "text must not be empty",
        ));
    }
    let message = MessageId(mid);
    let reply = state
        .registry
        .conversation(&caller.principal.bay, &ConversationId(id))
        .send(AppendToDraft {
            by: caller.principal.participant.id.clone(),
            message: message.clone(),
            offset: body.offset,
            text: body.text,
        })
        .await??;
    match reply {
        DraftReply::Accepted { length, version } => Ok(HttpResponse::Ok().json(Appended {
            message_id: message,
            length,
            version,
        })),
        DraftReply::Gap { length } => Err(ApiError::new(
            ErrorCode::AppendGap,
            format!("offset is beyond the draft's length {length}; resume from it"),
        )
        .with_length(length)),
        DraftReply::Overlap { length } => Err(ApiError::new(
            ErrorCode::AppendConflict,
            format!("text disagrees with the draft's stored text; its length is {length}"),
        )
        .with_length(length)),
        DraftReply::TooLong { length } => Err(ApiError::new(
            ErrorCode::InvalidContent,
            format!(
                "the draft would pass {} characters (unicode scalar values)",
                state.settings.limits.max_content_chars
            ),
        )
        .with_length(length)),
        DraftReply::Closed { state } => Err(closed(state)),
        DraftReply::NotFound => Err(ApiError::not_found()),
        DraftReply::Forbidden => Err(ApiError::new(
            ErrorCode::Forbidden,
            "only the draft's author may append to it",
        )),
    }
}

/// 409 `DRAFT_CLOSED` naming where the message stands.
fn closed(state: MessageState) -> ApiError {
    let why = match state {
        MessageState::Complete => "is complete",
        MessageState::Streaming => "is still open",
        MessageState::Cancelled => "was cancelled",
        MessageState::Failed => "failed",
    };
    ApiError::new(
        ErrorCode::DraftClosed,
        format!("the message is not an open draft: it {why}"),
    )
}

/// Body of `POST …/messages/{mid}/complete`.
#[derive(Deserialize, ToSchema)]
pub(crate) struct CompleteBody {
    /// The final text instead of the streamed one (same rules as a send's
    /// `content`); absent keeps the streamed text.
    #[schema(value_type = Option<String>, min_length = 1, max_length = 32000, pattern = "[^\\t\\n\\x0B\\f\\r \\x85\\xA0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]")]
    content: Option<serde_json::Value>,
}

/// `POST /conversations/{id}/messages/{mid}/complete` `{content?}` → 200
/// with the final message.
#[utoipa::path(
    operation_id = "completeDraft",
    tag = "agent",
    summary = "Finalize your streaming draft",
    description = "Ends the draft: routing (mentions, `shouldRespond`, the round cap) runs once, on the final text, and members get `message.completed` with their verdicts; webhooks deliver it. Appends accepted before are stored first. The author only. The body is optional (none, or a JSON object); a second complete answers 409 DRAFT_CLOSED.",
    params(
        ("id" = String, Path, description = "Conversation id"),
        ("mid" = String, Path, description = "The draft's message id"),
    ),
    request_body(content = Option<CompleteBody>, description = "Optional: the body may be empty"),
    responses(
        (status = 200, description = "The final message", body = RestMessage),
        (status = 400, description = "INVALID_JSON, or INVALID_CONTENT (the draft is empty and no content was given, or content breaks the send rules)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: not the draft's author", body = ErrorBody),
        (status = 404, description = "NOT_FOUND", body = ErrorBody),
        (status = 409, description = "DRAFT_CLOSED: already completed, cancelled or failed (a retry after a lost answer lands here: read the message to see it completed)", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED: the agent request budget (60/min by default) is spent", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[post("/conversations/{id}/messages/{mid}/complete")]
async fn complete(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(String, String)>,
    req: actix_web::HttpRequest,
    body: Result<web::Bytes, actix_web::Error>,
) -> Result<HttpResponse, ApiError> {
    let body = super::body::raw_body(body)?;
    state.limits.check_agent(&caller.principal).await?;
    let body: Option<CompleteBody> = optional_object(&req, &body)?;
    let content = match body.and_then(|b| b.content) {
        None | Some(serde_json::Value::Null) => None,
        Some(raw) => Some(super::messages::send::checked_content(
            raw,
            state.settings.limits.max_content_chars,
        )?),
    };
    let outcome = end(
        &state,
        &caller,
        path.into_inner(),
        Ending::Complete { content },
    )
    .await?;
    match outcome {
        EndOutcome::Ended(m) => {
            // A completed reply is a send: the author is active, not idle.
            state.registry.note_activity(
                &caller.principal.bay,
                caller.principal.participant.id.clone(),
                ActivityKind::Sent,
            );
            Ok(answer(&caller, &m))
        }
        EndOutcome::NotOpen(m) => Err(closed(m.state)),
        _ => Err(ApiError::new(ErrorCode::Internal, "unexpected outcome")),
    }
}

/// Body of `POST …/messages/{mid}/cancel`: optional, and without fields.
#[derive(Deserialize, ToSchema)]
pub(crate) struct CancelBody {}

/// `POST /conversations/{id}/messages/{mid}/cancel` → 200 with the draft.
#[utoipa::path(
    operation_id = "cancelDraft",
    tag = "agent",
    summary = "Stop a streaming draft",
    description = "Any member may stop a draft. It ends `cancelled` at once, whatever node or transport its author uses: further appends answer 409 DRAFT_CLOSED, members get `message.cancelled`, and the author gets `message.cancel_requested` (stop generating). Cancelling a draft that already ended answers 200 with it as it is, or 409 DRAFT_CLOSED when it completed.",
    params(
        ("id" = String, Path, description = "Conversation id"),
        ("mid" = String, Path, description = "The draft's message id"),
    ),
    request_body(content = Option<CancelBody>, description = "Optional: the body may be empty"),
    responses(
        (status = 200, description = "The draft, `state: cancelled` (or `failed`)", body = RestMessage),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 404, description = "NOT_FOUND", body = ErrorBody),
        (status = 400, description = "INVALID_JSON: a body was sent and is not a JSON object", body = ErrorBody),
        (status = 409, description = "DRAFT_CLOSED: it completed, or was never streamed", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED: the agent request budget (60/min by default) is spent", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[post("/conversations/{id}/messages/{mid}/cancel")]
async fn cancel(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(String, String)>,
    req: actix_web::HttpRequest,
    body: Result<web::Bytes, actix_web::Error>,
) -> Result<HttpResponse, ApiError> {
    let body = super::body::raw_body(body)?;
    state.limits.check_agent(&caller.principal).await?;
    // No fields; a body, if sent, must still be a JSON object.
    let _: Option<CancelBody> = optional_object(&req, &body)?;
    match end(&state, &caller, path.into_inner(), Ending::Cancel).await? {
        EndOutcome::Ended(m) => Ok(answer(&caller, &m)),
        // A repeat (or a race with the sweep) is done already.
        EndOutcome::NotOpen(m)
            if matches!(m.state, MessageState::Cancelled | MessageState::Failed) =>
        {
            Ok(answer(&caller, &m))
        }
        EndOutcome::NotOpen(m) => Err(closed(m.state)),
        _ => Err(ApiError::new(ErrorCode::Internal, "unexpected outcome")),
    }
}

/// Sends the ending to the conversation's actor and maps the refusals
/// both routes share.
async fn end(
    state: &AppState,
    caller: &Caller,
    (id, mid): (String, String),
    ending: Ending,
) -> Result<EndOutcome, ApiError> {
    let outcome = state
        .registry
        .conversation(&caller.principal.bay, &ConversationId(id))
        .send(EndDraft {
            by: caller.principal.participant.clone(),
            message: MessageId(mid),
            ending,
        })
        .await??;
    match outcome {
        EndOutcome::NotFound => Err(ApiError::not_found()),
        EndOutcome::Forbidden => Err(ApiError::new(
            ErrorCode::Forbidden,
            "only the draft's author may complete it",
        )),
        EndOutcome::Refused(code, message) => Err(ApiError::new(code, message)),
        done => Ok(done),
    }
}

fn answer(caller: &Caller, m: &switchboard_actors::model::StoredMessage) -> HttpResponse {
    let reader = &caller.principal.participant.id;
    HttpResponse::Ok().json(RestMessage::of(m, reader, m.sender.clone()))
}
