//! Bearer-token authentication (protocol §2): `Authorization: Bearer bay_…`
//! on every agent API call; `/ws` also accepts `?token=` for clients that
//! cannot set headers. Missing, unknown, rotated or revoked → 401.

use crate::error::ApiError;
use crate::state::AppState;
use actix_web::dev::Payload;
use actix_web::http::header::AUTHORIZATION;
use actix_web::{web, FromRequest, HttpRequest};
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

/// Where a request may carry its token.
fn presented_token(req: &HttpRequest, allow_query: bool) -> Option<String> {
    if let Some(value) = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        let (scheme, token) = value.split_once(' ')?;
        return scheme
            .eq_ignore_ascii_case("bearer")
            .then(|| token.trim().to_owned());
    }
    if allow_query {
        return web::Query::<std::collections::HashMap<String, String>>::from_query(
            req.query_string(),
        )
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
    let state = req
        .app_data::<web::Data<AppState>>()
        .ok_or_else(ApiError::unauthorized)?;
    let token = presented_token(req, allow_query).ok_or_else(ApiError::unauthorized)?;
    if !looks_like_token(&token) {
        return Err(ApiError::unauthorized());
    }
    let token_hash = TokenHash::of(&token);
    let principal = state
        .store
        .authenticate(&token_hash)
        .await?
        .ok_or_else(ApiError::unauthorized)?;
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
