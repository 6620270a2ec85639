//! `GET /api/admin/bays` (behind the admin gate): every Bay of the store
//! with its counts, for the operator console's Bays page.

use crate::error::ApiError;
use crate::state::AppState;
use actix_web::{get, web, HttpResponse};
use serde_json::{json, Value};
use std::collections::HashSet;
use switchboard_protocol::error::ErrorBody;
use switchboard_protocol::model::ParticipantKind;

/// Registers the route (inside the admin scope).
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(bays);
}

/// `GET /bays` → 200 `{bays: [{id, name, agents, humans, conversations,
/// online, feedsOn}]}`, sorted by id: every Bay of the store (its
/// directory area), with how many agents and humans it has, how many
/// conversations, how many participants are present now (a session, or
/// within the linger, on any node), and the live nodes running a feed of
/// it. Reads each Bay's participants and conversations: one answer costs
/// a few store reads per Bay.
#[utoipa::path(
    operation_id = "adminBays",
    tag = "admin",
    summary = "Every Bay, with counts",
    responses(
        (status = 200, description = "`{bays: [{id, name, agents, humans, conversations, online, feedsOn: [node id]}]}`", body = serde_json::Value),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: the admin API is disabled", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[get("/bays")]
async fn bays(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let nodes = state.store.nodes().await?;
    let mut out: Vec<Value> = Vec::new();
    for bay in state.store.bays().await? {
        let (participants, conversations, online) = futures_util::try_join!(
            state.store.participants(&bay.id),
            state.store.conversations(&bay.id),
            state.store.online(&bay.id),
        )?;
        let agents = participants
            .iter()
            .filter(|p| p.kind == ParticipantKind::Agent)
            .count();
        let feeds_on: HashSet<&str> = nodes
            .iter()
            .filter(|n| n.bays.contains(&bay.id.0))
            .map(|n| n.id.as_str())
            .collect();
        let mut feeds_on: Vec<&str> = feeds_on.into_iter().collect();
        feeds_on.sort_unstable();
        out.push(json!({
            "id": bay.id, "name": bay.name,
            "agents": agents, "humans": participants.len() - agents,
            "conversations": conversations.len(), "online": online.len(),
            "feedsOn": feeds_on,
        }));
    }
    Ok(HttpResponse::Ok().json(json!({ "bays": out })))
}
