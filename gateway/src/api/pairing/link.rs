//! Reverse linking, the client's side (protocol §2, `baychat link`): ask
//! for a link, show the approve URL, poll until an operator approved it,
//! collect the token once.
//!
//! `POST /link-requests {name?}` → 201 `{id, url, pollSecret, expiresAt}`;
//! `GET /link-requests/{id}/info` → the public facts the approve screen
//! shows; `GET /link-requests/{id}?secret=` → `pending`, then (once) the
//! credentials. A wrong or missing secret answers exactly like an unknown
//! id (404), the secret is compared in constant time against its stored
//! hash, and the token is minted at the moment it is collected: nothing
//! secret is ever stored.

use super::code::mint_secret;
use super::{base_url, iso, AgentRef};
use crate::api::body::optional_object;
use crate::error::ApiError;
use crate::provision::{self, check_text, MAX_NAME_CHARS};
use crate::state::AppState;
use actix_web::{get, post, web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;
use switchboard_actors::store::{now_ms, Created, LinkRequest, SecretHash};
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use utoipa::{IntoParams, ToSchema};

/// Body of `POST /link-requests`; the whole body may be absent.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewLinkRequest {
    /// What to call the client on the approve screen (`baychat link
    /// --name`), 1–200 characters; also the new agent's name when the
    /// operator approves it as one without naming it. Not blank, no
    /// control characters.
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = "^[^\\x00-\\x1F\\x7F-\\x9F]*[^\\x00-\\x20\\x7F-\\xA0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000][^\\x00-\\x1F\\x7F-\\x9F]*$"
    )]
    name: Option<String>,
}

/// `POST /link-requests` answer.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LinkRequestCreated {
    /// The request's id (`lr_…`).
    pub id: String,
    /// The approve URL to show (as a QR code, say): `<baseUrl>/link/<id>`.
    /// It carries no secret.
    pub url: String,
    /// The secret that collects the token; keep it, never show it.
    pub poll_secret: String,
    /// When the request goes away, approved or not (ISO 8601).
    pub expires_at: String,
}

/// Whether a request was approved yet.
#[derive(Serialize, ToSchema, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub enum LinkStatus {
    /// Waiting for an operator.
    Pending,
    /// Approved; the token waits to be collected.
    Approved,
}

/// `GET /link-requests/{id}/info`: what the approve screen shows. No secret.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LinkRequestInfo {
    /// The request's id.
    pub id: String,
    /// The name the client asked for, or null.
    pub name: Option<String>,
    /// `pending` or `approved`.
    pub status: LinkStatus,
    /// When it was made (ISO 8601).
    pub created_at: String,
    /// When it goes away (ISO 8601).
    pub expires_at: String,
}

/// `GET /link-requests/{id}?secret=` answer: `{status: "pending",
/// expiresAt}` until approved, then once `{status: "approved", baseUrl,
/// token, agent}`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LinkPoll {
    /// `pending` or `approved`.
    pub status: LinkStatus,
    /// While pending: when the request goes away (ISO 8601).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// Once approved: where the API is (as `POST /pair` answers it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Once approved: the agent's new token, handed over this once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Once approved: the agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentRef>,
}

/// Query of the poll.
#[derive(Deserialize, IntoParams)]
pub struct PollQuery {
    /// The `pollSecret` the request was created with.
    secret: Option<String>,
}

/// The one answer for an unknown, expired or collected request and a
/// wrong secret: the id is never confirmed to exist to a stranger.
fn no_such_request() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "no such link request")
}

/// `POST /link-requests {name?}` → 201 `{id, url, pollSecret, expiresAt}`.
#[utoipa::path(
    operation_id = "createLinkRequest",
    tag = "pairing",
    summary = "Start reverse linking",
    description = "No authentication. The request lives `pairing.link_ttl` (10 minutes by default); an operator approves it with `POST /api/admin/link-requests/{id}/approve`, and the client collects the token with `GET /link-requests/{id}?secret=`. Limited per client IP (`pairing.link_requests_per_minute`, 10/min by default). The body may be empty.",
    request_body(content = Option<NewLinkRequest>, description = "Optional: the body may be empty"),
    responses(
        (status = 201, description = "The request; `pollSecret` is shown only here", body = LinkRequestCreated),
        (status = 400, description = "INVALID_JSON (not a JSON object, unknown field) or INVALID_REQUEST (`name` empty, too long or with control characters)", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED: too many link requests from this IP", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 503, description = "STORE_UNAVAILABLE: the store cannot be reached", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(()),
)]
#[post("/api/agent-api/link-requests")]
pub async fn create(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: Result<web::Bytes, actix_web::Error>,
) -> Result<HttpResponse, ApiError> {
    let body = crate::api::body::raw_body(body)?;
    state.limits.check_link(state.client_of(&req)).await?;
    let name = optional_object::<NewLinkRequest>(&req, &body)?.and_then(|b| b.name);
    if let Some(name) = &name {
        check_text("name", name, MAX_NAME_CHARS, true)?;
    }
    let secret = mint_secret();
    let now = now_ms();
    let request = LinkRequest {
        id: provision::id_or_new(None, "lr_")?,
        name: name.map(|n| n.trim().to_owned()),
        secret: SecretHash::of(&secret),
        created_at_ms: now,
        expires_at_ms: now + state.settings.pairing.link_ttl.as_millis() as u64,
        approved: None,
    };
    let (id, expires_at) = (request.id.clone(), request.expires_at_ms);
    match state.store.create_link_request(request).await? {
        Created::Created(()) => {}
        // A fresh ULID is never taken; if it were, nothing was stored.
        Created::AlreadyExists => {
            return Err(ApiError::new(ErrorCode::Internal, "link request id clash"))
        }
    }
    Ok(HttpResponse::Created().json(LinkRequestCreated {
        url: format!("{}/link/{id}", base_url(&state, &req)),
        id,
        poll_secret: secret,
        expires_at: iso(expires_at),
    }))
}

/// `GET /link-requests/{id}/info` → the approve screen's facts; 404 when
/// unknown, expired or collected.
#[utoipa::path(
    operation_id = "linkRequestInfo",
    tag = "pairing",
    summary = "What the approve screen shows",
    description = "No authentication, and no secret in the answer.",
    params(("id" = String, Path, description = "Link request id")),
    responses(
        (status = 200, description = "The request", body = LinkRequestInfo),
        (status = 404, description = "NOT_FOUND: unknown, expired or already collected", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE: the store cannot be reached", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(()),
)]
#[get("/api/agent-api/link-requests/{id}/info")]
pub async fn info(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let r = state
        .store
        .link_request(&path.into_inner())
        .await?
        .ok_or_else(no_such_request)?;
    Ok(HttpResponse::Ok().json(LinkRequestInfo {
        status: status_of(&r),
        created_at: iso(r.created_at_ms),
        expires_at: iso(r.expires_at_ms),
        id: r.id,
        name: r.name,
    }))
}

fn status_of(r: &LinkRequest) -> LinkStatus {
    match r.approved {
        Some(_) => LinkStatus::Approved,
        None => LinkStatus::Pending,
    }
}

/// `GET /link-requests/{id}?secret=` → `pending`, then once the
/// credentials, after which the request is gone (404).
#[utoipa::path(
    operation_id = "pollLinkRequest",
    tag = "pairing",
    summary = "Poll a link request; collects the token once approved",
    description = "The poll secret is the credential: a wrong or missing one answers exactly like an unknown id. Once approved, the first poll mints the agent's new token (the old one gets 401 and its sessions close with 4001) and hands it over; the request is then gone, and every later poll is 404.",
    params(("id" = String, Path, description = "Link request id"), PollQuery),
    responses(
        (status = 200, description = "`pending` (with `expiresAt`), or `approved` with `baseUrl`, `token` and `agent` (this once)", body = LinkPoll),
        (status = 404, description = "NOT_FOUND: unknown, expired or collected, or a wrong secret (one answer for all)", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE: the store cannot be reached", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(()),
)]
#[get("/api/agent-api/link-requests/{id}")]
pub async fn poll(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
    query: web::Query<PollQuery>,
) -> Result<HttpResponse, ApiError> {
    let id = path.into_inner();
    let presented = SecretHash::of(query.secret.as_deref().unwrap_or(""));
    let r = state
        .store
        .link_request(&id)
        .await?
        .ok_or_else(no_such_request)?;
    if !bool::from(presented.0.as_bytes().ct_eq(r.secret.0.as_bytes())) {
        return Err(no_such_request());
    }
    if r.approved.is_none() {
        return Ok(HttpResponse::Ok().json(LinkPoll {
            status: LinkStatus::Pending,
            expires_at: Some(iso(r.expires_at_ms)),
            base_url: None,
            token: None,
            agent: None,
        }));
    }
    // Exactly one poll claims it; a concurrent one finds it gone.
    let target = state
        .store
        .claim_link_request(&id)
        .await?
        .ok_or_else(no_such_request)?;
    let (agent, token) = provision::rotate_token(&*state.store, &target.bay, &target.participant)
        .await?
        .ok_or_else(no_such_request)?;
    Ok(HttpResponse::Ok().json(LinkPoll {
        status: LinkStatus::Approved,
        expires_at: None,
        base_url: Some(base_url(&state, &req)),
        token: Some(token),
        agent: Some(AgentRef::from(&agent)),
    }))
}
