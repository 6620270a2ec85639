//! The admin API for operators and the platform backend, under
//! `/api/admin`, authenticated by `Authorization: Bearer <admin token>`
//! (from config / `SWITCHBOARD_ADMIN_TOKEN`). With no admin token
//! configured every admin route answers 404, as if it did not exist.
//!
//! The check runs as middleware around the whole scope, before any
//! extractor reads the path or body: a disabled or unauthenticated admin API
//! answers 404 / 401 whatever the request carries, never a 400 / 413 / 415
//! that would confirm a route exists or validate input for a stranger.

use crate::api::body::Object;
use crate::error::ApiError;
use crate::provision::{self, NewConversation, NewParticipant, PolicyInput};
use crate::state::AppState;
use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::AUTHORIZATION;
use actix_web::middleware::{from_fn, Next};
use actix_web::{delete, patch, post, put, web, HttpRequest, HttpResponse};
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};
use switchboard_actors::model::{Conversation, Member};
use switchboard_actors::store::{RosterRule, Updated};
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use switchboard_protocol::ids::{BayId, ConversationId, ParticipantId};
use switchboard_protocol::model::{ParticipantKind, Role};
use utoipa::ToSchema;

/// Registers the routes under `/api/admin`.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("")
            .wrap(from_fn(admin_gate))
            .service(create_bay)
            .service(create_participant)
            .service(rotate_token)
            .service(revoke_token)
            .service(suspend_participant)
            .service(reinstate_participant)
            .service(suspend_bay)
            .service(reinstate_bay)
            .service(create_conversation)
            .service(add_member)
            .service(remove_member)
            .service(patch_conversation)
            .service(set_webhook)
            .service(remove_webhook)
            .configure(super::summarizer::routes)
            .configure(super::connectors::admin_routes)
            .configure(super::pairing::admin_routes)
            .configure(crate::rooms::admin_routes)
            .configure(super::operator::routes),
    );
}

/// Middleware: [`guard`] before anything else of the request is looked at.
async fn admin_gate(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    let verdict = match req.app_data::<web::Data<AppState>>() {
        Some(state) => guard(state, req.request()),
        None => Err(no_such_route()),
    };
    match verdict {
        Ok(()) => next
            .call(req)
            .await
            .map(ServiceResponse::map_into_left_body),
        // A method the path is not served with is 405 whatever the
        // credential, as on the agent API (a disabled admin API stays 404).
        Err(e) => Ok(
            match crate::method_not_allowed::wrong_method(req.request()) {
                Some(res) if e.code != ErrorCode::NotFound => req.into_response(res),
                _ => req.error_response(e),
            }
            .map_into_right_body(),
        ),
    }
}

/// The answer of a route that does not exist (the same as the app's
/// default service), for the disabled admin API.
fn no_such_route() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "no such route")
}

/// Checks the admin bearer token. 404 when the admin API is disabled, 401
/// for a wrong token. Compares SHA-256 digests so timing reveals nothing
/// about the configured token.
fn guard(state: &AppState, req: &HttpRequest) -> Result<(), ApiError> {
    let Some(expected) = &state.admin_token_hash else {
        return Err(no_such_route());
    };
    let presented = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| hex::encode(Sha256::digest(t.trim().as_bytes())))
        .ok_or_else(ApiError::unauthorized)?;
    let same = presented
        .bytes()
        .zip(expected.bytes())
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0;
    if same && presented.len() == expected.len() {
        Ok(())
    } else {
        Err(ApiError::unauthorized())
    }
}

fn conversation_json(c: &Conversation) -> serde_json::Value {
    json!({
        "id": c.id,
        "type": c.kind,
        "title": c.title,
        "policy": c.policy,
        "members": c.members.iter().map(|m| json!({"participantId": m.participant, "role": m.role})).collect::<Vec<_>>(),
    })
}

/// Body of `POST /bays`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewBay {
    /// 1–64 characters of `[A-Za-z0-9_-]`; minted when absent.
    #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    id: Option<String>,
    /// Display name, 1–200 characters, not blank, no control characters.
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = "^[^\\x00-\\x1F\\x7F-\\x9F]*[^\\x00-\\x20\\x7F-\\xA0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000][^\\x00-\\x1F\\x7F-\\x9F]*$"
    )]
    name: String,
}

/// `POST /bays` `{id?, name}` → 201 `{id, name}`; 409 when the id is taken.
#[utoipa::path(
    operation_id = "createBay",
    tag = "admin",
    summary = "Create a Bay (tenant)",
    request_body = NewBay,
    responses(
        (status = 201, description = "The Bay", body = crate::openapi::schemas::AdminBay),
        (status = 400, description = "INVALID_JSON (not JSON, unknown or mistyped field) or INVALID_REQUEST (a value is invalid)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: the admin API is disabled (no admin token configured)", body = ErrorBody),
        (status = 409, description = "ALREADY_EXISTS: a Bay with this id exists", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE", body = ErrorBody),
        (status = 415, description = "UNSUPPORTED_MEDIA_TYPE: content-type is not application/json", body = ErrorBody),
        (status = 500, description = "INTERNAL", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE: the store cannot be reached", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[post("/bays")]
async fn create_bay(
    state: web::Data<AppState>,
    body: Object<NewBay>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    let bay = provision::create_bay(&*state.store, body.id, body.name).await?;
    Ok(HttpResponse::Created().json(bay))
}

/// `POST /bays/{bay}/participants` `{id?, kind, name, description?}` →
/// 201 `{participant, token}`. The token is shown only here.
#[utoipa::path(
    operation_id = "createParticipant",
    tag = "admin",
    summary = "Create a participant and mint its token",
    description = "Mints a `bay_u_…` token for a user or a `bay_…` token for an agent and returns it only in this answer (the server keeps its hash). A `token` field is refused with 400: the server always mints.",
    params(
        ("bay" = String, Path, description = "Bay id"),
    ),
    request_body = NewParticipant,
    responses(
        (status = 201, description = "The participant and its token (shown only here)", body = crate::openapi::schemas::CreatedParticipant),
        (status = 400, description = "INVALID_JSON (not JSON, unknown or mistyped field) or INVALID_REQUEST (a value is invalid)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown bay, or the admin API is disabled (no admin token configured)", body = ErrorBody),
        (status = 409, description = "ALREADY_EXISTS: a participant with this id exists", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE", body = ErrorBody),
        (status = 415, description = "UNSUPPORTED_MEDIA_TYPE: content-type is not application/json", body = ErrorBody),
        (status = 500, description = "INTERNAL", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE: the store cannot be reached", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[post("/bays/{bay}/participants")]
async fn create_participant(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: Object<NewParticipant>,
) -> Result<HttpResponse, ApiError> {
    let mut input = body.into_inner();
    if input.token.is_some() {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "token is minted by the server",
        ));
    }
    input.token = None;
    let connector = input.connector;
    let bay = BayId(path.into_inner());
    let (participant, token) = provision::create_participant(&*state.store, &bay, input).await?;
    let mut created = json!({ "participant": participant, "token": token });
    if let Some(spec) = connector {
        // Echoed so the caller sees the whole of what it created.
        created["connector"] = json!(spec);
    }
    Ok(HttpResponse::Created().json(created))
}

/// `POST /bays/{bay}/participants/{pid}/token` → 201 `{token}`. The old
/// token stops working at once: its WebSocket closes with 4001 and its held
/// `/updates` answers 401, on every node.
#[utoipa::path(
    operation_id = "rotateToken",
    tag = "admin",
    summary = "Rotate a participant's token",
    description = "Mints a new token. The old one stops working at once: its WebSocket closes with 4001 and its held `/updates` answers 401, on every node.",
    params(
        ("bay" = String, Path, description = "Bay id"),
        ("pid" = String, Path, description = "Participant id"),
    ),
    responses(
        (status = 201, description = "The new token; the old one stops working at once", body = crate::openapi::schemas::MintedToken),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown bay or participant, or the admin API is disabled (no admin token configured)", body = ErrorBody),
        (status = 500, description = "INTERNAL", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE: the store cannot be reached", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[post("/bays/{bay}/participants/{pid}/token")]
async fn rotate_token(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (bay, pid) = (BayId(path.0.clone()), ParticipantId(path.1.clone()));
    match provision::rotate_token(&*state.store, &bay, &pid).await? {
        Some((_, token)) => {
            // As a revocation: the old token is refused here from the
            // answer on; other nodes follow the credentials channel.
            state.registry.tokens().revoke(&bay, &pid);
            Ok(HttpResponse::Created().json(json!({ "token": token })))
        }
        None => Err(ApiError::not_found()),
    }
}

/// An agent of `bay`: 404 when there is no such participant, 400 when it
/// is a user (webhooks are for agents).
async fn agent_of(state: &AppState, bay: &BayId, pid: &ParticipantId) -> Result<(), ApiError> {
    match state.store.participant(bay, pid).await? {
        Some(p) if p.kind == ParticipantKind::Agent => Ok(()),
        Some(_) => Err(ApiError::new(
            ErrorCode::InvalidRequest,
            format!("{pid} is a user; webhooks are for agents"),
        )),
        None => Err(ApiError::not_found()),
    }
}

/// `PUT /bays/{bay}/participants/{pid}/webhook` `{url}` → 200 `{url,
/// secret, setAt}`: the agent's `POST /webhook`, for operators.
#[utoipa::path(
    operation_id = "adminSetWebhook",
    tag = "admin",
    summary = "Set an agent's webhook",
    description = "The same as the agent's own `POST /api/agent-api/webhook`: checks the URL, rotates the signing secret (shown only here) and delivers from now on.",
    params(
        ("bay" = String, Path, description = "Bay id"),
        ("pid" = String, Path, description = "An agent's participant id"),
    ),
    request_body = super::webhook::SetWebhook,
    responses(
        (status = 200, description = "Set; the signing secret is shown only here", body = super::webhook::WebhookSet),
        (status = 400, description = "INVALID_JSON, INVALID_WEBHOOK_URL, WEBHOOK_DESTINATION_FORBIDDEN, or INVALID_REQUEST (the participant is a user)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown bay, or no such agent, or the admin API is disabled", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE: the store cannot be reached", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[put("/bays/{bay}/participants/{pid}/webhook")]
async fn set_webhook(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: Object<super::webhook::SetWebhook>,
) -> Result<HttpResponse, ApiError> {
    let (bay, pid) = path.into_inner();
    let (bay, pid) = (BayId(bay), ParticipantId(pid));
    agent_of(&state, &bay, &pid).await?;
    super::webhook::install(&state, &bay, &pid, &body.url).await
}

/// `DELETE /bays/{bay}/participants/{pid}/webhook` → 204.
#[utoipa::path(
    operation_id = "adminRemoveWebhook",
    tag = "admin",
    summary = "Remove an agent's webhook",
    params(
        ("bay" = String, Path, description = "Bay id"),
        ("pid" = String, Path, description = "An agent's participant id"),
    ),
    responses(
        (status = 204, description = "Removed (or none was set)"),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 400, description = "INVALID_REQUEST: the participant is a user", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown bay, or no such agent, or the admin API is disabled", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE: the store cannot be reached", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[delete("/bays/{bay}/participants/{pid}/webhook")]
async fn remove_webhook(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (bay, pid) = path.into_inner();
    let (bay, pid) = (BayId(bay), ParticipantId(pid));
    agent_of(&state, &bay, &pid).await?;
    state.store.set_webhook(&bay, &pid, None).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// `DELETE /bays/{bay}/participants/{pid}/token` → 204. Same effects as a
/// rotation, and the participant has no token until the next rotation.
#[utoipa::path(
    operation_id = "revokeToken",
    tag = "admin",
    summary = "Revoke a participant's token",
    description = "Same effects as a rotation, and the participant has no token until the next rotation.",
    params(
        ("bay" = String, Path, description = "Bay id"),
        ("pid" = String, Path, description = "Participant id"),
    ),
    responses(
        (status = 204, description = "Revoked; the participant has no token until the next rotation"),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown bay or participant, or the admin API is disabled (no admin token configured)", body = ErrorBody),
        (status = 500, description = "INTERNAL", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE: the store cannot be reached", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[delete("/bays/{bay}/participants/{pid}/token")]
async fn revoke_token(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (bay, pid) = (BayId(path.0.clone()), ParticipantId(path.1.clone()));
    match state.store.set_token(&bay, &pid, None).await? {
        Updated::Updated(()) => {
            // This node forgets the token before answering, so the caller's
            // next request here is refused; other nodes follow the
            // credentials channel.
            state.registry.tokens().revoke(&bay, &pid);
            Ok(HttpResponse::NoContent().finish())
        }
        Updated::NotFound => Err(ApiError::not_found()),
    }
}

/// Suspends or reinstates `pid`, answering its record with `suspended`.
async fn set_participant_standing(
    state: &AppState,
    bay: String,
    pid: String,
    suspended: bool,
) -> Result<HttpResponse, ApiError> {
    let (bay, pid) = (BayId(bay), ParticipantId(pid));
    let participant = state
        .store
        .participant(&bay, &pid)
        .await?
        .ok_or_else(ApiError::not_found)?;
    match state
        .store
        .set_suspended(&bay, Some(&pid), suspended)
        .await?
    {
        Updated::Updated(_) => {
            // The cached standing is stale at once on this node (other nodes
            // follow the credentials channel within their tail's lag).
            state.registry.tokens().revoke(&bay, &pid);
            let mut body = json!(participant);
            body["suspended"] = json!(suspended);
            Ok(HttpResponse::Ok().json(body))
        }
        Updated::NotFound => Err(ApiError::not_found()),
    }
}

/// Suspends or reinstates the whole of `bay`, answering its record with
/// `suspended`.
async fn set_bay_standing(
    state: &AppState,
    bay: String,
    suspended: bool,
) -> Result<HttpResponse, ApiError> {
    let bay = BayId(bay);
    let record = state
        .store
        .bay(&bay)
        .await?
        .ok_or_else(ApiError::not_found)?;
    match state.store.set_suspended(&bay, None, suspended).await? {
        Updated::Updated(_) => {
            state.registry.tokens().forget_bay(&bay);
            let mut body = json!(record);
            body["suspended"] = json!(suspended);
            Ok(HttpResponse::Ok().json(body))
        }
        Updated::NotFound => Err(ApiError::not_found()),
    }
}

/// `POST /bays/{bay}/participants/{pid}/suspend` → 200 with the participant
/// and `suspended: true`. Idempotent. Its token stays valid but every agent
/// route answers 403 `ACCOUNT_SUSPENDED`; its WebSocket closes with 4004,
/// its held `/updates` and `/events` end with that 403, on every node; its
/// webhook delivers nothing until reinstated.
#[utoipa::path(
    operation_id = "suspendParticipant",
    tag = "admin",
    summary = "Suspend a participant",
    description = "Idempotent. Nothing is deleted: the token stays valid, but every agent API route answers 403 `ACCOUNT_SUSPENDED`, the participant's WebSocket closes with 4004 after an `error` frame, its held `/updates` and `/events` end with the same 403, on every node, and its webhook delivers nothing until it is reinstated.",
    params(
        ("bay" = String, Path, description = "Bay id"),
        ("pid" = String, Path, description = "Participant id"),
    ),
    responses(
        (status = 200, description = "The participant, `suspended: true`", body = crate::openapi::schemas::AdminParticipantStanding),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown bay or participant, or the admin API is disabled (no admin token configured)", body = ErrorBody),
        (status = 500, description = "INTERNAL", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE: the store cannot be reached", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[post("/bays/{bay}/participants/{pid}/suspend")]
async fn suspend_participant(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (bay, pid) = path.into_inner();
    set_participant_standing(&state, bay, pid, true).await
}

/// `POST /bays/{bay}/participants/{pid}/reinstate` → 200 with the
/// participant and `suspended: false`. Idempotent; the same token works
/// again at once, on every node.
#[utoipa::path(
    operation_id = "reinstateParticipant",
    tag = "admin",
    summary = "Reinstate a suspended participant",
    description = "Idempotent. The same token works again at once, on every node (unless the Bay itself is suspended); its webhook resumes from where it paused (records that left the replay window meanwhile are given up).",
    params(
        ("bay" = String, Path, description = "Bay id"),
        ("pid" = String, Path, description = "Participant id"),
    ),
    responses(
        (status = 200, description = "The participant, `suspended: false`", body = crate::openapi::schemas::AdminParticipantStanding),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown bay or participant, or the admin API is disabled (no admin token configured)", body = ErrorBody),
        (status = 500, description = "INTERNAL", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE: the store cannot be reached", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[post("/bays/{bay}/participants/{pid}/reinstate")]
async fn reinstate_participant(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (bay, pid) = path.into_inner();
    set_participant_standing(&state, bay, pid, false).await
}

/// `POST /bays/{bay}/suspend` → 200 with the Bay and `suspended: true`.
/// Idempotent. As a participant's suspension, for every participant of
/// the Bay at once, with `BAY_SUSPENDED`.
#[utoipa::path(
    operation_id = "suspendBay",
    tag = "admin",
    summary = "Suspend a Bay",
    description = "Idempotent. As suspending each participant of the Bay, with 403 `BAY_SUSPENDED`: every agent API route refuses its tokens, its WebSockets close with 4004 after an `error` frame, its held `/updates` and `/events` end with the same 403, on every node, and its webhooks deliver nothing until it is reinstated. Other Bays are untouched.",
    params(
        ("bay" = String, Path, description = "Bay id"),
    ),
    responses(
        (status = 200, description = "The Bay, `suspended: true`", body = crate::openapi::schemas::AdminBayStanding),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown bay, or the admin API is disabled (no admin token configured)", body = ErrorBody),
        (status = 500, description = "INTERNAL", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE: the store cannot be reached", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[post("/bays/{bay}/suspend")]
async fn suspend_bay(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    set_bay_standing(&state, path.into_inner(), true).await
}

/// `POST /bays/{bay}/reinstate` → 200 with the Bay and `suspended: false`.
#[utoipa::path(
    operation_id = "reinstateBay",
    tag = "admin",
    summary = "Reinstate a suspended Bay",
    description = "Idempotent. Every token of the Bay works again at once, on every node, except those of participants suspended on their own.",
    params(
        ("bay" = String, Path, description = "Bay id"),
    ),
    responses(
        (status = 200, description = "The Bay, `suspended: false`", body = crate::openapi::schemas::AdminBayStanding),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown bay, or the admin API is disabled (no admin token configured)", body = ErrorBody),
        (status = 500, description = "INTERNAL", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE: the store cannot be reached", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[post("/bays/{bay}/reinstate")]
async fn reinstate_bay(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    set_bay_standing(&state, path.into_inner(), false).await
}

/// `POST /bays/{bay}/conversations` `{id?, type, title?, members:[pid], admins?, policy?}` → 201.
#[utoipa::path(
    operation_id = "createConversation",
    tag = "admin",
    summary = "Create a conversation",
    description = "Every member must be a participant of the Bay, and every id of `admins` must also be in `members`. `policy` governs GROUP conversations only (DM and AGENT_CHAT have no policy).",
    params(
        ("bay" = String, Path, description = "Bay id"),
    ),
    request_body = NewConversation,
    responses(
        (status = 201, description = "The conversation", body = crate::openapi::schemas::AdminConversation),
        (status = 400, description = "INVALID_JSON (not JSON, unknown or mistyped field) or INVALID_REQUEST (a value is invalid)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown bay, or the admin API is disabled (no admin token configured)", body = ErrorBody),
        (status = 409, description = "ALREADY_EXISTS: a conversation with this id exists", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE", body = ErrorBody),
        (status = 415, description = "UNSUPPORTED_MEDIA_TYPE: content-type is not application/json", body = ErrorBody),
        (status = 500, description = "INTERNAL", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE: the store cannot be reached", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[post("/bays/{bay}/conversations")]
async fn create_conversation(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: Object<NewConversation>,
) -> Result<HttpResponse, ApiError> {
    let bay = BayId(path.into_inner());
    let c = provision::create_conversation(&*state.store, &bay, body.into_inner()).await?;
    Ok(HttpResponse::Created().json(conversation_json(&c)))
}

/// Body of `POST …/members`.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct NewMember {
    /// A participant of the same Bay.
    participant_id: String,
    /// `member` when absent.
    role: Option<Role>,
}

/// `POST /bays/{bay}/conversations/{cid}/members` `{participantId, role?}` →
/// 200 with the conversation. The member receives the conversation's
/// messages from this point on, over both transports.
#[utoipa::path(
    operation_id = "addMember",
    tag = "admin",
    summary = "Add a member (or change a member's role)",
    description = "The member receives the conversation's messages from then on, over both transports. A DM or AGENT_CHAT keeps exactly its two members: only their roles change (docs/conversations.md).",
    params(
        ("bay" = String, Path, description = "Bay id"),
        ("cid" = String, Path, description = "Conversation id"),
    ),
    request_body = NewMember,
    responses(
        (status = 200, description = "The conversation", body = crate::openapi::schemas::AdminConversation),
        (status = 400, description = "INVALID_JSON (not JSON, unknown or mistyped field) or INVALID_REQUEST (a value is invalid)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown bay or conversation, or the admin API is disabled (no admin token configured)", body = ErrorBody),
        (status = 409, description = "DIRECT_MEMBERS_FIXED: the conversation is a DM or AGENT_CHAT and the participant is not one of its two members", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE", body = ErrorBody),
        (status = 415, description = "UNSUPPORTED_MEDIA_TYPE: content-type is not application/json", body = ErrorBody),
        (status = 500, description = "INTERNAL", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE: the store cannot be reached", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[post("/bays/{bay}/conversations/{cid}/members")]
async fn add_member(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: Object<NewMember>,
) -> Result<HttpResponse, ApiError> {
    let (bay, cid) = path.into_inner();
    let bay = BayId(bay);
    let body = body.into_inner();
    let pid = ParticipantId(body.participant_id);
    if state.store.participant(&bay, &pid).await?.is_none() {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "participantId is not a participant of this bay",
        ));
    }
    let member = Member {
        participant: pid,
        role: body.role.unwrap_or_default(),
    };
    let cid = ConversationId(cid);
    match state.store.upsert_member(&bay, &cid, member).await? {
        Updated::Updated(c) => Ok(HttpResponse::Ok().json(conversation_json(&c))),
        Updated::NotFound => Err(ApiError::not_found()),
        Updated::Refused(rule) => Err(refused(rule)),
    }
}

/// `DELETE /bays/{bay}/conversations/{cid}/members/{pid}` → 204; 404 when
/// the conversation does not exist or the participant is not a member.
#[utoipa::path(
    operation_id = "removeMember",
    tag = "admin",
    summary = "Remove a member",
    description = "The former member receives no more of the conversation's messages; their past messages keep their sender with `role: null`. A DM or AGENT_CHAT keeps exactly its two members, and a DEDICATED room keeps its designated agent until the policy names another (docs/conversations.md).",
    params(
        ("bay" = String, Path, description = "Bay id"),
        ("cid" = String, Path, description = "Conversation id"),
        ("pid" = String, Path, description = "Participant id"),
    ),
    responses(
        (status = 204, description = "Removed"),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown conversation, or the participant is not a member, or the admin API is disabled (no admin token configured)", body = ErrorBody),
        (status = 409, description = "DIRECT_MEMBERS_FIXED (a member of a DM or AGENT_CHAT) or MEMBER_IS_DESIGNATED_AGENT (the designated agent of a DEDICATED room)", body = ErrorBody),
        (status = 500, description = "INTERNAL", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE: the store cannot be reached", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[delete("/bays/{bay}/conversations/{cid}/members/{pid}")]
async fn remove_member(
    state: web::Data<AppState>,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (bay, cid, pid) = path.into_inner();
    match state
        .store
        .remove_member(&BayId(bay), &ConversationId(cid), &ParticipantId(pid))
        .await?
    {
        Updated::Updated(_) => Ok(HttpResponse::NoContent().finish()),
        Updated::NotFound => Err(ApiError::not_found()),
        Updated::Refused(rule) => Err(refused(rule)),
    }
}

/// The 409 of a roster change the store refused (docs/conversations.md).
fn refused(rule: RosterRule) -> ApiError {
    match rule {
        RosterRule::DirectMembersFixed => ApiError::new(
            ErrorCode::DirectMembersFixed,
            "a DM or AGENT_CHAT keeps exactly its two members",
        ),
        RosterRule::DesignatedAgentStays => ApiError::new(
            ErrorCode::MemberIsDesignatedAgent,
            "this agent is the room's DEDICATED agent; change the policy before removing it",
        ),
    }
}

/// Body of `PATCH …/conversations/{cid}`: only the fields present change.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConversationPatch {
    /// Absent: unchanged; `null`: cleared.
    #[serde(default, with = "double_option")]
    #[schema(value_type = Option<String>)]
    title: Option<Option<String>>,
    /// Fields present replace the current policy's; the rest stay.
    policy: Option<PolicyInput>,
}

mod double_option {
    use serde::{Deserialize, Deserializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Option<String>>, D::Error> {
        Option::<String>::deserialize(d).map(Some)
    }
}

/// `PATCH /bays/{bay}/conversations/{cid}` `{title?, policy?}` → 200 with the conversation.
#[utoipa::path(
    operation_id = "updateConversation",
    tag = "admin",
    summary = "Change a conversation's title or policy",
    description = "Only the fields present change: `title: null` (or a blank title) clears the title; `policy` fields present replace the current ones. A conversation shared by link gives its room the new title as its name (its id when untitled).",
    params(
        ("bay" = String, Path, description = "Bay id"),
        ("cid" = String, Path, description = "Conversation id"),
    ),
    request_body = ConversationPatch,
    responses(
        (status = 200, description = "The conversation", body = crate::openapi::schemas::AdminConversation),
        (status = 400, description = "INVALID_JSON (not JSON, unknown or mistyped field) or INVALID_REQUEST (a value is invalid)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown bay or conversation, or the admin API is disabled (no admin token configured)", body = ErrorBody),
        (status = 409, description = "MEMBER_IS_DESIGNATED_AGENT: a concurrent change removed the agent the new DEDICATED policy designates", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE", body = ErrorBody),
        (status = 415, description = "UNSUPPORTED_MEDIA_TYPE: content-type is not application/json", body = ErrorBody),
        (status = 500, description = "INTERNAL", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE: the store cannot be reached", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[patch("/bays/{bay}/conversations/{cid}")]
async fn patch_conversation(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: Object<ConversationPatch>,
) -> Result<HttpResponse, ApiError> {
    let (bay, cid) = path.into_inner();
    let (bay, cid) = (BayId(bay), ConversationId(cid));
    let body = body.into_inner();
    let title = match body.title {
        Some(t) => Some(provision::title(t)?),
        None => None,
    };
    let current = state
        .store
        .conversation(&bay, &cid)
        .await?
        .ok_or_else(ApiError::not_found)?;
    let policy = match body.policy {
        Some(_) if current.kind.is_direct() => return Err(provision::no_direct_policy()),
        Some(p) => {
            let participants = state.store.participants(&bay).await?;
            let policy = p.apply(current.policy.clone(), &participants)?;
            provision::check_shape(current.kind, &current.members, &participants, &policy)?;
            Some(policy)
        }
        None => None,
    };
    let retitled = title.is_some();
    match state
        .store
        .update_conversation(&bay, &cid, title, policy)
        .await?
    {
        Updated::Updated(c) => {
            if retitled {
                // A room shared by link is named after its conversation
                // (its id when untitled); its FOLLOWs get the new record.
                let name = c.title.clone().unwrap_or_else(|| cid.0.clone());
                state.store.rename_room(&bay, &cid, &name).await?;
            }
            Ok(HttpResponse::Ok().json(conversation_json(&c)))
        }
        Updated::NotFound => Err(ApiError::not_found()),
        Updated::Refused(rule) => Err(refused(rule)),
    }
}
