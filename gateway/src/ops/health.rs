//! `/healthz` (the process is alive) and `/readyz` (the store answers,
//! delivery flows end to end — see [`super::canary`] — and the node is not
//! draining), for load balancers and orchestrators.

use crate::openapi::schemas::{Health, HealthStatus, NotReadyReason, Readiness, ReadyStatus};
use crate::state::AppState;
use actix_web::{route, web, HttpResponse};

/// `GET /healthz` → 200 `{status:"ok"}` while the process runs. `HEAD`
/// answers the same status and headers without the body (load balancers'
/// checks often use it, RFC 9110 §9.3.2).
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "operations",
    summary = "Liveness",
    responses((status = 200, description = "The process runs", body = crate::openapi::schemas::Health)),
)]
#[route("/healthz", method = "GET", method = "HEAD")]
async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(Health {
        status: HealthStatus::Ok,
    })
}

/// `GET /readyz` → 200 `{status:"ready"}`, or 503 `{status, reason}` while
/// draining, while the store cannot be reached, or while the canary finds
/// delivery stalled. `HEAD` as for `/healthz`.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "operations",
    summary = "Readiness",
    responses(
        (status = 200, description = "Ready: the store answers, a canary record comes back through the node's feed, and the node is not draining", body = crate::openapi::schemas::Readiness),
        (status = 503, description = "Not ready: draining, the store is unreachable, or delivery is stalled (a canary record did not come back through the feed in time); not the error body", body = crate::openapi::schemas::Readiness),
    ),
)]
#[route("/readyz", method = "GET", method = "HEAD")]
async fn readyz(state: web::Data<AppState>) -> HttpResponse {
    if state.is_draining() {
        return not_ready(NotReadyReason::Draining, None);
    }
    match state.store.ping().await {
        Ok(()) if state.canary.verdict().is_err() => not_ready(
            NotReadyReason::DeliveryStalled,
            state.canary.verdict().err(),
        ),
        Ok(()) => HttpResponse::Ok().json(Readiness {
            status: ReadyStatus::Ready,
            reason: None,
            message: None,
        }),
        Err(err) => not_ready(NotReadyReason::StoreUnavailable, Some(err.to_string())),
    }
}

/// 503 with the typed body: readiness is not an error, so it has its own
/// shape rather than the error body (the load balancer reads the status).
fn not_ready(reason: NotReadyReason, message: Option<String>) -> HttpResponse {
    HttpResponse::ServiceUnavailable().json(Readiness {
        status: ReadyStatus::NotReady,
        reason: Some(reason),
        message,
    })
}

/// Registers both routes at the root.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(healthz).service(readyz);
}
