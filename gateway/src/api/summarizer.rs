//! The admin API's summarizer designation (docs/summary.md): which agent
//! of a Bay writes its conversations' summaries and receives
//! `summary.requested`. Registered inside the admin scope, so the admin
//! token check runs first.

use crate::api::body::Object;
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::{delete, get, put, web, HttpResponse};
use serde::{Deserialize, Serialize};
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use switchboard_protocol::ids::{BayId, ParticipantId};
use switchboard_protocol::model::ParticipantKind;
use utoipa::ToSchema;

/// Registers the routes (under `/api/admin`).
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(get_summarizer)
        .service(set_summarizer)
        .service(clear_summarizer);
}

/// `PUT /bays/{bay}/summarizer`.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SetSummarizer {
    /// An agent of the Bay.
    pub participant_id: ParticipantId,
}

/// The Bay's summarizer.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Summarizer {
    /// The Bay.
    pub bay_id: BayId,
    /// Its summarizer agent, `null` when none is designated.
    #[schema(required = true)]
    pub participant_id: Option<ParticipantId>,
}

/// 404 unless the Bay exists.
async fn bay_exists(state: &AppState, bay: &BayId) -> Result<(), ApiError> {
    match state.store.bay(bay).await? {
        Some(_) => Ok(()),
        None => Err(ApiError::not_found()),
    }
}

/// `GET /bays/{bay}/summarizer` → `{ bayId, participantId }`.
#[utoipa::path(
    operation_id = "getSummarizer",
    tag = "admin",
    summary = "The Bay's summarizer agent",
    params(("bay" = String, Path, description = "Bay id")),
    responses(
        (status = 200, description = "The designation (`participantId` null: none)", body = Summarizer),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown bay, or the admin API is disabled", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE: the store cannot be reached", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[get("/bays/{bay}/summarizer")]
async fn get_summarizer(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let bay = BayId(path.into_inner());
    bay_exists(&state, &bay).await?;
    let participant_id = state.store.summarizer(&bay).await?;
    Ok(HttpResponse::Ok().json(Summarizer {
        bay_id: bay,
        participant_id,
    }))
}

/// `PUT /bays/{bay}/summarizer` `{ participantId }` → `{ bayId,
/// participantId }`. Replaces any earlier designation.
#[utoipa::path(
    operation_id = "setSummarizer",
    tag = "admin",
    summary = "Designate the Bay's summarizer agent",
    description = "The agent then alone may `PUT …/conversations/{id}/summary` for every conversation of the Bay, may read `GET …/summary` of any of them, and receives `summary.requested` events. Replaces any earlier designation.",
    params(("bay" = String, Path, description = "Bay id")),
    request_body = SetSummarizer,
    responses(
        (status = 200, description = "Designated", body = Summarizer),
        (status = 400, description = "INVALID_JSON, or INVALID_REQUEST: the participant is a user", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown bay or participant, or the admin API is disabled", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE: the store cannot be reached", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[put("/bays/{bay}/summarizer")]
async fn set_summarizer(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: Object<SetSummarizer>,
) -> Result<HttpResponse, ApiError> {
    let bay = BayId(path.into_inner());
    let pid = body.into_inner().participant_id;
    bay_exists(&state, &bay).await?;
    match state.store.participant(&bay, &pid).await? {
        Some(p) if p.kind == ParticipantKind::Agent => {}
        Some(_) => {
            return Err(ApiError::new(
                ErrorCode::InvalidRequest,
                format!("{pid} is a user; the summarizer must be an agent"),
            ))
        }
        None => return Err(ApiError::not_found()),
    }
    state.store.set_summarizer(&bay, Some(&pid)).await?;
    Ok(HttpResponse::Ok().json(Summarizer {
        bay_id: bay,
        participant_id: Some(pid),
    }))
}

/// `DELETE /bays/{bay}/summarizer` → 204: the Bay has no summarizer.
#[utoipa::path(
    operation_id = "clearSummarizer",
    tag = "admin",
    summary = "Clear the Bay's summarizer designation",
    description = "Stored summaries stay readable; no one may write new ones and `?refresh=1` answers `refresh.requested: false` until an agent is designated again.",
    params(("bay" = String, Path, description = "Bay id")),
    responses(
        (status = 204, description = "Cleared (or none was designated)"),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown bay, or the admin API is disabled", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE: the store cannot be reached", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[delete("/bays/{bay}/summarizer")]
async fn clear_summarizer(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let bay = BayId(path.into_inner());
    bay_exists(&state, &bay).await?;
    state.store.set_summarizer(&bay, None).await?;
    Ok(HttpResponse::NoContent().finish())
}
