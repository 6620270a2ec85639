//! Bearer-token authentication (protocol §2): `Authorization: Bearer bay_…`
//! on every agent API call; `/ws` and `/events` also accept `?token=` for clients that
//! cannot set headers. Missing, unknown, rotated or revoked → 401; a valid
//! token of a suspended participant or Bay → 403 `ACCOUNT_SUSPENDED` /
//! `BAY_SUSPENDED`.
//! Answers come from the node's token cache when it has them (kept exact by
//! the node's one credentials tail, see `switchboard_actors::token_cache`),
//! else from the store. Authenticating starts nothing per Bay: no feed, no
//! store connection.
//!
//! [`agent_gate`] runs the check as middleware around the agent API scope,
//! before any extractor reads the body: actix polls a handler's extractors
//! together, so with a store that answers asynchronously (Redis) a body
//! extractor would otherwise finish first and answer a stranger 400 / 413 /
//! 415 instead of 401. The gate leaves the [`Caller`] in the request's
//! extensions, where the extractor and [`authenticate`] find it.

use crate::error::ApiError;
use crate::state::AppState;
use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderMap, AUTHORIZATION};
use actix_web::middleware::Next;
use actix_web::{web, FromRequest, HttpMessage, HttpRequest};
use futures_util::future::LocalBoxFuture;
use switchboard_actors::store::Principal;
use switchboard_actors::token::{looks_like_token, TokenHash};

/// An authenticated caller: its Bay, participant and token handle.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The Bay, participant and token handle the token resolved to.
    pub principal: Principal,
    /// The hash of the presented token (to re-check it after a session attaches).
    pub token_hash: TokenHash,
}

/// Where a request may carry its token: the `Authorization: Bearer` header,
/// or (when `allow_query`) the `token` query parameter.
pub fn presented_token(headers: &HeaderMap, query: &str, allow_query: bool) -> Option<String> {
    if let Some(value) = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()) {
        let (scheme, token) = value.split_once(' ')?;
        return scheme
            .eq_ignore_ascii_case("bearer")
            .then(|| token.trim().to_owned());
    }
    if allow_query {
        return web::Query::<std::collections::HashMap<String, String>>::from_query(query)
            .ok()
            .and_then(|q| q.get("token").cloned());
    }
    None
}

/// Resolves the caller of `req`.
///
/// # Errors
/// 401 UNAUTHORIZED for a missing/unknown token; 503 when the store is down.
pub async fn authenticate(req: &HttpRequest, allow_query: bool) -> Result<Caller, ApiError> {
    if let Some(caller) = req.extensions().get::<Caller>() {
        return Ok(caller.clone());
    }
    let state = req
        .app_data::<web::Data<AppState>>()
        .ok_or_else(ApiError::unauthorized)?;
    authenticate_head(state, req.headers(), req.query_string(), allow_query).await
}

/// Resolves the caller of a request known by its `headers` and `query`
/// string alone (the WebSocket upgrade, which is served before actix-web
/// sees the request).
///
/// # Errors
/// As [`authenticate`].
pub async fn authenticate_head(
    state: &AppState,
    headers: &HeaderMap,
    query: &str,
    allow_query: bool,
) -> Result<Caller, ApiError> {
    authenticate_token(state, presented_token(headers, query, allow_query)).await
}

/// Resolves the caller presenting `token` ([`presented_token`]'s answer),
/// for a request whose head is gone already (a held `/updates` call,
/// `realtime/front.rs`).
///
/// # Errors
/// As [`authenticate`].
pub async fn authenticate_token(
    state: &AppState,
    token: Option<String>,
) -> Result<Caller, ApiError> {
    let token = token.ok_or_else(ApiError::unauthorized)?;
    if !looks_like_token(&token) {
        return Err(ApiError::unauthorized());
    }
    let token_hash = TokenHash::of(&token);
    let tokens = state.registry.tokens();
    if let Some(principal) = tokens.get(&token_hash) {
        return admitted(principal, token_hash);
    }
    let seen = tokens.generation();
    let principal = state
        .store
        .authenticate(&token_hash)
        .await?
        .ok_or_else(ApiError::unauthorized)?;
    // Refused when a change was applied since `seen`, or while the node's
    // credentials tail is not reading.
    tokens.insert(token_hash.clone(), principal.clone(), seen);
    admitted(principal, token_hash)
}

/// Checks again that `caller`'s token still works, for a request held a
/// long time (`GET …/messages/wait`): the node's token cache, which the
/// credentials tail keeps exact, else the store.
///
/// # Errors
/// 401 once the token was rotated or revoked; 403 `ACCOUNT_SUSPENDED` /
/// `BAY_SUSPENDED` once it was suspended; 503 when the store is down.
pub async fn recheck(state: &AppState, caller: &Caller) -> Result<(), ApiError> {
    let tokens = state.registry.tokens();
    let principal = match tokens.get(&caller.token_hash) {
        Some(p) => p,
        None => state
            .store
            .authenticate(&caller.token_hash)
            .await?
            .ok_or_else(ApiError::unauthorized)?,
    };
    admitted(principal, caller.token_hash.clone()).map(drop)
}

/// The caller of a valid token, unless an operator suspended it or its
/// Bay: then 403 `ACCOUNT_SUSPENDED` / `BAY_SUSPENDED` on every agent route
/// (REST, `/updates`, `/ws`, `/events`), the standing refusal BayChat CLI
/// 0.23.1's relay waits out. Checked after the token, so a stranger still
/// gets 401 and learns nothing.
fn admitted(principal: Principal, token_hash: TokenHash) -> Result<Caller, ApiError> {
    if let Some(suspension) = principal.suspended {
        return Err(ApiError::suspended(suspension));
    }
    Ok(Caller {
        principal,
        token_hash,
    })
}

impl FromRequest for Caller {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move { authenticate(&req, false).await })
    }
}

/// Middleware for the agent API scope: authenticates (header, or `?token=`
/// on `/ws` and `/events`) before any extractor looks at the path, query or body, and
/// answers 401 (or 503 when the store is down) without reading further;
/// a method the path is not served with gets its 405 rather than the 401.
pub async fn agent_gate(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    // The streams accept `?token=`: browsers' WebSocket and EventSource
    // cannot set headers.
    let allow_query = req.path().ends_with("/ws") || req.path().ends_with("/events");
    match authenticate(req.request(), allow_query).await {
        Ok(caller) => {
            req.extensions_mut().insert(caller);
            next.call(req)
                .await
                .map(ServiceResponse::map_into_left_body)
        }
        // A method the path is not served with is 405 whatever the
        // credential (e.g. `GET …/pair`, a route that takes no token):
        // only looked up once the credential failed, so sends pay nothing.
        Err(e) => Ok(
            match crate::method_not_allowed::wrong_method(req.request()) {
                Some(res) => req.into_response(res),
                None => req.error_response(e),
            }
            .map_into_right_body(),
        ),
    }
}
