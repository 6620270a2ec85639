//! `/healthz` (the process is alive) and `/readyz` (the store answers and
//! the node is not draining), for load balancers and orchestrators.

use crate::state::AppState;
use actix_web::{get, web, HttpResponse};
use serde_json::json;

/// `GET /healthz` → 200 `{status:"ok"}` while the process runs.
#[utoipa::path(
    tag = "operations",
    summary = "Liveness",
    responses((status = 200, description = "The process runs", body = crate::openapi::schemas::Health)),
)]
#[get("/healthz")]
async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({ "status": "ok" }))
}

/// `GET /readyz` → 200 `{status:"ready"}`, or 503 `{status, reason}` while
/// draining or while the store cannot be reached.
#[utoipa::path(
    tag = "operations",
    summary = "Readiness",
    responses(
        (status = 200, description = "Ready: the store answers and the node is not draining", body = crate::openapi::schemas::Readiness),
        (status = 503, description = "Not ready: draining or the store is unreachable (not the error body)", body = crate::openapi::schemas::Readiness),
    ),
)]
#[get("/readyz")]
async fn readyz(state: web::Data<AppState>) -> HttpResponse {
    if state.is_draining() {
        return HttpResponse::ServiceUnavailable()
            .json(json!({ "status": "not_ready", "reason": "draining" }));
    }
    match state.store.ping().await {
        Ok(()) => HttpResponse::Ok().json(json!({ "status": "ready" })),
        Err(err) => HttpResponse::ServiceUnavailable()
            .json(json!({ "status": "not_ready", "reason": "store_unavailable", "message": err.to_string() })),
    }
}

/// Registers both routes at the root.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(healthz).service(readyz);
}
