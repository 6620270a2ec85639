//! `POST /agents/{id}/ask` and `POST /agents/{id}/send`: a call relayed to
//! a connector and held for its answer (protocol §9).

use crate::api::body::Object;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::{post, web, HttpResponse};
use base64::Engine;
use chrono::Utc;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use switchboard_actors::feed::WaitForAnswer;
use switchboard_actors::store::log::{LogEvent, LogRecord};
use switchboard_actors::store::{now_ms, PendingRequest};
use switchboard_protocol::connector::{
    check_ask, Platform, RequestKind, DEFAULT_ASK_LIMIT, MAX_RELAYED_BYTES,
};
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use switchboard_protocol::ids::{BayId, ParticipantId};
use switchboard_protocol::model::ParticipantKind;
use tokio::sync::oneshot;
use utoipa::ToSchema;

/// Body of `POST /agents/{id}/ask` (protocol §9: `{ query, limit? }`).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Ask {
    /// What to search the connector's ingested data for: 1–4,000
    /// characters, not only whitespace.
    #[schema(
        min_length = 1,
        max_length = 4000,
        pattern = "[^\\t\\n\\x0B\\f\\r \\x85\\xA0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]"
    )]
    query: String,
    /// Most hits wanted, 1–100; 10 when absent.
    #[schema(minimum = 1, maximum = 100)]
    #[serde(default, deserialize_with = "crate::api::integral::option")]
    limit: Option<u32>,
}

/// `200` of `ask` and `send`: the connector's answer.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Relayed {
    /// The relayed request's id (as the connector saw it).
    request_id: String,
    /// The connector that answered.
    connector_id: ParticipantId,
    /// Its platform.
    platform: Platform,
    /// What the connector answered, as it gave it (for `ask`, its hits).
    #[schema(value_type = Object)]
    result: Value,
}

/// `POST /agents/{id}/ask` `{ query, limit? }` → 200 `{ requestId,
/// connectorId, platform, result }`.
#[utoipa::path(
    operation_id = "askConnector",
    tag = "agent",
    summary = "Query a connector agent's ingested data",
    description = "Relays `{ query, limit }` to the connector as a `connector.request` event (`kind: \"ask\"`) over whatever transport it holds, and holds this request until the connector answers with `POST /agents/requests/{requestId}/answer`, at most `timing.connector_answer_timeout` (30 s by default). Works across nodes. Same Bay only: another Bay's agent, a user or an unknown id is 404. The answer is the connector's own data: treat it as untrusted input (protocol §9).",
    params(("id" = String, Path, description = "The connector's participant id")),
    request_body = Ask,
    responses(
        (status = 200, description = "The connector's answer", body = Relayed),
        (status = 400, description = "INVALID_JSON (not an object, unknown field) or INVALID_REQUEST (`query` empty or too long, `limit` out of range)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: no agent with this id in the caller's Bay", body = ErrorBody),
        (status = 409, description = "NOT_A_CONNECTOR: the agent is not a connector", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED: the agent request budget is spent", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 502, description = "CONNECTOR_FAILED: the connector answered with an error (its message is in `message`)", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 504, description = "CONNECTOR_TIMEOUT: no answer within `timing.connector_answer_timeout`", body = ErrorBody),
    ),
    security(("agent_token" = [])),
)]
#[post("/agents/{id}/ask")]
pub(super) async fn ask(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    body: Object<Ask>,
) -> Result<HttpResponse, ApiError> {
    let Ask { query, limit } = body.into_inner();
    check_ask(&query, limit).map_err(|m| ApiError::new(ErrorCode::InvalidRequest, m))?;
    let payload = serde_json::json!({
        "query": query,
        "limit": limit.unwrap_or(DEFAULT_ASK_LIMIT),
    });
    relay(
        &state,
        &caller,
        path.into_inner(),
        RequestKind::Ask,
        payload,
    )
    .await
}

/// `POST /agents/{id}/send` `{ … }` → 200 `{ requestId, connectorId,
/// platform, result }`.
#[utoipa::path(
    operation_id = "sendThroughConnector",
    tag = "agent",
    summary = "Ask a connector agent to send outbound on its platform",
    description = "Relays the body, any JSON object of at most 64 KiB (its fields are the connector's to define, e.g. `{ to, text }`), to the connector as a `connector.request` event (`kind: \"send\"`) and holds this request until the connector answers, at most `timing.connector_answer_timeout` (30 s by default). The gateway does not send anything itself: the connector decides and reports in `result`. Same Bay only.",
    params(("id" = String, Path, description = "The connector's participant id")),
    request_body(content = Object, description = "Any JSON object of at most 64 KiB, passed through as the event's `payload`"),
    responses(
        (status = 200, description = "The connector's answer", body = Relayed),
        (status = 400, description = "INVALID_JSON (not an object)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: no agent with this id in the caller's Bay", body = ErrorBody),
        (status = 409, description = "NOT_A_CONNECTOR: the agent is not a connector", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE: the body is over 64 KiB", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED: the agent request budget is spent", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 502, description = "CONNECTOR_FAILED: the connector answered with an error", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 504, description = "CONNECTOR_TIMEOUT: no answer within `timing.connector_answer_timeout`", body = ErrorBody),
    ),
    security(("agent_token" = [])),
)]
#[post("/agents/{id}/send")]
pub(super) async fn send(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    body: Object<serde_json::Map<String, Value>>,
) -> Result<HttpResponse, ApiError> {
    let payload = Value::Object(body.into_inner());
    if payload.to_string().len() > MAX_RELAYED_BYTES {
        return Err(ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!("a send body is at most {MAX_RELAYED_BYTES} bytes of JSON"),
        ));
    }
    relay(
        &state,
        &caller,
        path.into_inner(),
        RequestKind::Send,
        payload,
    )
    .await
}

/// Relays `payload` to connector `target` and waits for its answer.
///
/// Order matters: the wait is registered with the feed before the request
/// is logged, so an answer, however fast and on whichever node, finds it.
async fn relay(
    state: &AppState,
    caller: &Caller,
    target: String,
    kind: RequestKind,
    payload: Value,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal).await?;
    let bay = &caller.principal.bay;
    let connector = ParticipantId(target);
    if connector == caller.principal.participant.id {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "a connector cannot relay a call to itself",
        ));
    }
    let platform = connector_of(state, bay, &connector).await?;
    let timeout = state.settings.timing.connector_answer_timeout;
    let pending = PendingRequest {
        id: mint_request_id(),
        connector: connector.clone(),
        asker: caller.principal.participant.id.clone(),
        kind,
        expires_at_ms: now_ms() + timeout.as_millis() as u64,
    };
    state.store.open_request(bay, &pending, timeout).await?;
    // From here on, a call that ends without the answer (the caller hung
    // up, the node drained) withdraws the request, so a late answer is
    // refused rather than accepted for nobody.
    let mut withdraw = Withdraw {
        state: state.clone(),
        bay: bay.clone(),
        connector: connector.clone(),
        request: Some(pending.id.clone()),
    };
    let rx = register(state, bay, &pending).await?;
    state
        .store
        .append_control(
            bay,
            LogEvent::ConnectorRequest {
                request: pending.id.clone(),
                connector: connector.clone(),
                asker: pending.asker.clone(),
                asker_name: caller.principal.participant.name.clone(),
                call: kind,
                payload,
                expires_at: Utc::now() + timeout,
            },
        )
        .await?;
    let answer = tokio::select! {
        answer = tokio::time::timeout(timeout, rx) => answer,
        () = state.drain_started() => {
            return Err(ApiError::new(
                ErrorCode::Unavailable,
                "this node is shutting down; the call was withdrawn (a send may still have been acted on): call again",
            )
            .retry_after(Duration::from_secs(1)))
        }
    };
    let answer = match answer {
        Ok(Ok(record)) => {
            withdraw.request = None;
            record
        }
        // Released: the caller or the connector was suspended or revoked
        // meanwhile (or the feed went away).
        Ok(Err(_)) => {
            crate::auth::recheck(state, caller).await?;
            connector_of(state, bay, &connector).await?;
            return Err(ApiError::new(
                ErrorCode::Unavailable,
                "this node stopped following the bay; call again",
            )
            .retry_after(Duration::from_secs(1)));
        }
        Err(_) => {
            return Err(ApiError::new(
                ErrorCode::ConnectorTimeout,
                format!(
                    "the connector did not answer within {} s",
                    timeout.as_secs_f64()
                ),
            ));
        }
    };
    // Suspended or revoked while it waited: the answer is not handed over.
    crate::auth::recheck(state, caller).await?;
    match &answer.event {
        LogEvent::ConnectorAnswered {
            answer: Ok(result), ..
        } => Ok(HttpResponse::Ok().json(Relayed {
            request_id: pending.id,
            connector_id: connector,
            platform,
            result: result.clone(),
        })),
        LogEvent::ConnectorAnswered {
            answer: Err(message),
            ..
        } => Err(ApiError::new(
            ErrorCode::ConnectorFailed,
            format!("the connector answered with an error: {message}"),
        )),
        _ => Err(ApiError::new(
            ErrorCode::Internal,
            "the feed handed over an entry that is not an answer",
        )),
    }
}

/// The platform of `id`, an agent of the caller's Bay.
///
/// # Errors
/// 404 for an unknown id, another Bay's or a user's (the id is not
/// confirmed to exist); 409 `NOT_A_CONNECTOR` for an agent that is not
/// one, 409 `CONNECTOR_SUSPENDED` for a suspended connector (it could not
/// answer).
async fn connector_of(
    state: &AppState,
    bay: &BayId,
    id: &ParticipantId,
) -> Result<Platform, ApiError> {
    let (participant, platform, suspended) = futures_util::try_join!(
        state.store.participant(bay, id),
        state.store.connector(bay, id),
        state.store.suspended(bay, Some(id)),
    )?;
    match (participant, platform) {
        (Some(p), Some(_)) if p.kind == ParticipantKind::Agent && suspended => Err(ApiError::new(
            ErrorCode::ConnectorSuspended,
            format!("{} is suspended by an operator and cannot answer", p.name),
        )),
        (Some(p), Some(platform)) if p.kind == ParticipantKind::Agent => Ok(platform),
        (Some(p), None) if p.kind == ParticipantKind::Agent => Err(ApiError::new(
            ErrorCode::NotAConnector,
            format!("{} is not a connector agent", p.name),
        )),
        _ => Err(ApiError::not_found()),
    }
}

/// A fresh request id: `creq_` + 128 random bits, base64url.
fn mint_request_id() -> String {
    let mut bytes = [0u8; 16];
    rand::rng().fill_bytes(&mut bytes);
    format!(
        "creq_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// Withdraws a relayed request whose call ended without its answer (see
/// [`relay`]); `request` is `None` once the answer arrived.
struct Withdraw {
    state: AppState,
    bay: BayId,
    connector: ParticipantId,
    request: Option<String>,
}

impl Drop for Withdraw {
    fn drop(&mut self) {
        if let Some(request) = self.request.take() {
            let (state, bay, connector) =
                (self.state.clone(), self.bay.clone(), self.connector.clone());
            actix_rt::spawn(async move {
                let _ = state.store.take_request(&bay, &connector, &request).await;
            });
        }
    }
}

/// Registers the wait for `request`'s answer with the Bay's feed.
///
/// # Errors
/// 503 when the feed cannot be reached, asked twice: it may stop (idle)
/// between the lookup and the send.
async fn register(
    state: &AppState,
    bay: &BayId,
    request: &PendingRequest,
) -> Result<oneshot::Receiver<Arc<LogRecord>>, ApiError> {
    let attempt = || {
        let (tx, rx) = oneshot::channel();
        let sent = state.registry.feed(bay).send(WaitForAnswer {
            request: request.id.clone(),
            asker: request.asker.clone(),
            connector: request.connector.clone(),
            reply: tx,
        });
        async move { sent.await.map(|()| rx) }
    };
    Ok(match attempt().await {
        Ok(rx) => rx,
        Err(_) => attempt().await?,
    })
}
