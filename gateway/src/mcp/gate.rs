//! The gate in front of `/api/mcp`: the agent's bearer token (protocol
//! §2) is checked before rmcp sees the request, so a bad token is 401
//! before any session exists; and a session id is honoured only for the
//! token that opened it.
//!
//! A request naming a session another token opened is answered 404
//! `NOT_FOUND`, as for an unknown or expired session, so an id learned by
//! someone else is useless to them and its existence is never confirmed.
//! (A 404 is also what the MCP transport prescribes for an unknown
//! session: the client then initializes a new one.)
//!
//! A `GET` of a session is its event stream, served here
//! ([`super::stream`]) rather than by rmcp. A POST's body is checked here
//! before rmcp reads it, and rmcp's plain-text refusals leave as JSON
//! ([`super::refusals`]).

use crate::auth::authenticate;
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{web, HttpMessage};

/// The header that names an MCP session (Streamable HTTP transport).
pub const SESSION_HEADER: &str = "mcp-session-id";

/// Middleware around the MCP scope: authenticates, holds sessions to
/// their tokens, and records the session an `initialize` opened.
pub async fn mcp_gate(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    let caller = match authenticate(req.request(), false).await {
        Ok(caller) => caller,
        // A method MCP does not take is 405 whatever the credential.
        Err(e) => {
            return Ok(
                match crate::method_not_allowed::wrong_method(req.request()) {
                    Some(res) => req.into_response(res),
                    None => req.error_response(e),
                }
                .map_into_right_body(),
            )
        }
    };
    let Some(state) = req.app_data::<web::Data<AppState>>().cloned() else {
        return Ok(req
            .error_response(ApiError::unauthorized())
            .map_into_right_body());
    };
    let sessions = state.mcp.sessions.clone();
    let named = req
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Some(id) = &named {
        if !sessions.touch(id, &caller.token_hash) {
            let refusal = ApiError::new(
                switchboard_protocol::error::ErrorCode::NotFound,
                "no such MCP session for this token",
            );
            return Ok(req.error_response(refusal).map_into_right_body());
        }
    }
    if let (Some(id), &actix_web::http::Method::GET) = (&named, req.method()) {
        // The session's event stream is ours, not rmcp's (see `stream`).
        let res = match super::stream::open(&state, req.request(), caller, id).await {
            Ok(res) => res,
            Err(e) => {
                let mut res = req.error_response(e);
                if res.status() == actix_web::http::StatusCode::METHOD_NOT_ALLOWED {
                    // The session takes requests still, only not a stream.
                    res.headers_mut().insert(
                        actix_web::http::header::ALLOW,
                        actix_web::http::header::HeaderValue::from_static("POST, DELETE"),
                    );
                }
                return Ok(res.map_into_right_body());
            }
        };
        return Ok(req.into_response(res).map_into_right_body());
    }
    if named.is_none() && req.method() == actix_web::http::Method::POST {
        // A request outside any session opens one (`initialize`): it draws
        // on the agent budget, and a token holds a bounded number open.
        if let Err(e) = admit_session(&state, &caller).await {
            return Ok(req.error_response(e).map_into_right_body());
        }
    }
    if req.method() == actix_web::http::Method::POST {
        let max = state.settings.limits.max_body_bytes;
        if let Err(answer) = super::refusals::check_post(&mut req, max).await {
            return Ok(req.into_response(answer).map_into_right_body());
        }
    }
    req.extensions_mut().insert(caller.clone());
    let deleting = req.method() == actix_web::http::Method::DELETE;
    let mut res = next.call(req).await?;
    if deleting && res.status() == actix_web::http::StatusCode::ACCEPTED {
        // rmcp answers a session's termination 202; the official SDKs
        // expect 200 or 204 (and warn otherwise), and nothing is pending.
        *res.response_mut().status_mut() = actix_web::http::StatusCode::NO_CONTENT;
        if let Some(id) = &named {
            sessions.unbind(id);
        }
    }
    if named.is_none() {
        // An `initialize` answered with a new session: it is this token's.
        if let Some(id) = res
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
        {
            sessions.bind(id, &caller);
        }
    }
    Ok(super::refusals::json_refusal(res)
        .await
        .map_into_left_body())
}

/// Whether `caller` may open another session: one more request on the
/// agent budget (protocol §11, 60/min), and fewer than
/// `limits.max_mcp_sessions_per_token` sessions open on this node.
///
/// # Errors
/// 429 `RATE_LIMITED` (with Retry-After) for either.
async fn admit_session(state: &AppState, caller: &crate::auth::Caller) -> Result<(), ApiError> {
    state.limits.check_agent(&caller.principal).await?;
    let cap = state.settings.limits.max_mcp_sessions_per_token;
    if cap > 0 && state.mcp.sessions.held_by(&caller.token_hash) >= cap {
        return Err(ApiError::new(
            switchboard_protocol::error::ErrorCode::RateLimited,
            format!(
                "this token holds {cap} open MCP sessions on this node (limits.max_mcp_sessions_per_token); \
                 end one with DELETE /api/mcp or let it idle out"
            ),
        )
        .retry_after(std::time::Duration::from_secs(60)));
    }
    Ok(())
}
