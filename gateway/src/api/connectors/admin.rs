//! The admin API's connector designation (protocol §9): which agents of a
//! Bay are connectors, and of which platform. Registered inside the admin
//! scope, so the admin token check runs first.

use super::ConnectorSpec;
use crate::api::body::Object;
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::{delete, get, put, web, HttpResponse};
use serde::Serialize;
use switchboard_protocol::connector::Platform;
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use switchboard_protocol::ids::{BayId, ParticipantId};
use switchboard_protocol::model::ParticipantKind;
use utoipa::ToSchema;

/// Registers the routes (under `/api/admin`).
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(get_connector)
        .service(set_connector)
        .service(clear_connector);
}

/// A participant's connector designation.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Designation {
    /// The participant.
    pub participant_id: ParticipantId,
    /// `{ platform }`, or `null` when it is not a connector.
    #[schema(required = true)]
    pub connector: Option<ConnectorSpec>,
}

/// The participant, 404 unless it exists in the Bay.
async fn participant_kind(
    state: &AppState,
    bay: &BayId,
    pid: &ParticipantId,
) -> Result<ParticipantKind, ApiError> {
    match state.store.participant(bay, pid).await? {
        Some(p) => Ok(p.kind),
        None => Err(ApiError::not_found()),
    }
}

/// The answer for `pid` with `platform`.
fn designation(pid: ParticipantId, platform: Option<Platform>) -> HttpResponse {
    HttpResponse::Ok().json(Designation {
        participant_id: pid,
        connector: platform.map(|platform| ConnectorSpec { platform }),
    })
}

/// `GET /bays/{bay}/participants/{pid}/connector` → `{ participantId, connector }`.
#[utoipa::path(
    operation_id = "getConnector",
    tag = "admin",
    summary = "Whether a participant is a connector",
    params(
        ("bay" = String, Path, description = "Bay id"),
        ("pid" = String, Path, description = "Participant id"),
    ),
    responses(
        (status = 200, description = "The designation (`connector` null: not a connector)", body = Designation),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown bay or participant, or the admin API is disabled", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE: the store cannot be reached", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[get("/bays/{bay}/participants/{pid}/connector")]
async fn get_connector(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (bay, pid) = path.into_inner();
    let (bay, pid) = (BayId(bay), ParticipantId(pid));
    participant_kind(&state, &bay, &pid).await?;
    let platform = state.store.connector(&bay, &pid).await?;
    Ok(designation(pid, platform))
}

/// `PUT /bays/{bay}/participants/{pid}/connector` `{ platform }` →
/// `{ participantId, connector }`.
#[utoipa::path(
    operation_id = "setConnector",
    tag = "admin",
    summary = "Mark an agent as a connector",
    description = "The agent then shows `connector: { platform }` and `capabilities: [\"ask\", \"send\"]` in `GET /agents`, and receives `connector.request` events for the `ask` and `send` calls other participants of its Bay make. Replaces an earlier platform.",
    params(
        ("bay" = String, Path, description = "Bay id"),
        ("pid" = String, Path, description = "Participant id"),
    ),
    request_body = ConnectorSpec,
    responses(
        (status = 200, description = "Marked", body = Designation),
        (status = 400, description = "INVALID_JSON (not an object, unknown field, unknown platform) or INVALID_REQUEST (the participant is a user)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown bay or participant, or the admin API is disabled", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE: the store cannot be reached", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[put("/bays/{bay}/participants/{pid}/connector")]
async fn set_connector(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: Object<ConnectorSpec>,
) -> Result<HttpResponse, ApiError> {
    let (bay, pid) = path.into_inner();
    let (bay, pid) = (BayId(bay), ParticipantId(pid));
    if participant_kind(&state, &bay, &pid).await? != ParticipantKind::Agent {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "only an agent can be a connector",
        ));
    }
    let platform = body.into_inner().platform;
    state
        .store
        .set_connector(&bay, &pid, Some(platform))
        .await?;
    Ok(designation(pid, Some(platform)))
}

/// `DELETE /bays/{bay}/participants/{pid}/connector` → 204.
#[utoipa::path(
    operation_id = "clearConnector",
    tag = "admin",
    summary = "Stop treating an agent as a connector",
    description = "Idempotent. Calls already relayed to it can still be answered until they expire.",
    params(
        ("bay" = String, Path, description = "Bay id"),
        ("pid" = String, Path, description = "Participant id"),
    ),
    responses(
        (status = 204, description = "Not a connector any more"),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown bay or participant, or the admin API is disabled", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE: the store cannot be reached", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[delete("/bays/{bay}/participants/{pid}/connector")]
async fn clear_connector(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (bay, pid) = path.into_inner();
    let (bay, pid) = (BayId(bay), ParticipantId(pid));
    participant_kind(&state, &bay, &pid).await?;
    state.store.set_connector(&bay, &pid, None).await?;
    Ok(HttpResponse::NoContent().finish())
}
