//! `POST /agents/requests/{requestId}/answer`: the connector's answer to a
//! relayed call (protocol §9), handed to the caller held on any node.

use crate::api::body::Object;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::{post, web, HttpResponse};
use serde::Deserialize;
use serde_json::Value;
use switchboard_actors::store::log::LogEvent;
use switchboard_protocol::connector::MAX_RELAYED_BYTES;
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use utoipa::ToSchema;

/// Body of `POST /agents/requests/{requestId}/answer`: exactly one of
/// `result` and `error`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Answer {
    /// What the caller gets as `result`: any JSON value (for `ask`, the
    /// hits), at most 64 KiB.
    #[schema(value_type = Option<Object>)]
    #[serde(default, deserialize_with = "present")]
    result: Option<Value>,
    /// The call failed: the caller gets 502 `CONNECTOR_FAILED` with this
    /// message.
    error: Option<AnswerError>,
}

/// `error` of an [`Answer`].
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AnswerError {
    /// Shown to the caller; 1–1,000 characters.
    #[schema(
        min_length = 1,
        max_length = 1000,
        pattern = "[^\\t\\n\\x0B\\f\\r \\x85\\xA0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]"
    )]
    message: String,
}

/// A field that is present, even as `null`, is `Some` (`result: null` is
/// an answer).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// `POST /agents/requests/{requestId}/answer` → 204.
#[utoipa::path(
    operation_id = "answerConnectorRequest",
    tag = "agent",
    summary = "Answer a relayed call (connectors only)",
    description = "The connector a `connector.request` event was addressed to answers it, once, before its `expiresAt`. `{ result }` is handed to the caller as its 200 `result`; `{ error: { message } }` makes the caller's call fail with 502 `CONNECTOR_FAILED`. The caller may be held on any node. A request that is unknown, already answered, expired, or addressed to another agent is 404 alike.",
    params(("requestId" = String, Path, description = "`requestId` of the `connector.request` event")),
    request_body = Answer,
    responses(
        (status = 204, description = "Answered: the caller gets it"),
        (status = 400, description = "INVALID_JSON (not an object, unknown field) or INVALID_REQUEST (neither or both of `result` and `error`; an empty or long `error.message`)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: no pending request with this id for the caller", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE: `result` is over 64 KiB", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED: the agent request budget is spent", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[post("/agents/requests/{requestId}/answer")]
pub(super) async fn answer(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    body: Object<Answer>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal).await?;
    let answer = outcome(body.into_inner())?;
    let bay = &caller.principal.bay;
    let me = &caller.principal.participant.id;
    let request = path.into_inner();
    let Some(pending) = state.store.take_request(bay, me, &request).await? else {
        return Err(ApiError::new(
            ErrorCode::NotFound,
            "no pending request with this id for you: unknown, already answered, expired, or addressed to another agent",
        ));
    };
    state
        .store
        .append_control(
            bay,
            LogEvent::ConnectorAnswered {
                request: pending.id,
                asker: pending.asker,
                answer,
            },
        )
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

/// The answer as the log keeps it: `Ok(result)` or `Err(message)`.
///
/// # Errors
/// 400 unless exactly one of `result` and `error` is given, or for an
/// empty or over-long message; 413 for a `result` over 64 KiB.
fn outcome(body: Answer) -> Result<Result<Value, String>, ApiError> {
    let invalid = |m: &str| ApiError::new(ErrorCode::InvalidRequest, m);
    match (body.result, body.error) {
        (Some(result), None) => {
            if result.to_string().len() > MAX_RELAYED_BYTES {
                return Err(ApiError::new(
                    ErrorCode::PayloadTooLarge,
                    format!("result is at most {MAX_RELAYED_BYTES} bytes of JSON"),
                ));
            }
            Ok(Ok(result))
        }
        (None, Some(AnswerError { message })) => {
            let chars = message.trim().chars().count();
            if chars == 0 || message.chars().count() > 1000 {
                return Err(invalid("error.message must be 1 to 1000 characters"));
            }
            Ok(Err(message))
        }
        _ => Err(invalid("give exactly one of result and error")),
    }
}
