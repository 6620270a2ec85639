//! Connector agents (protocol §9): `POST /agents/{id}/ask` and
//! `POST /agents/{id}/send` relay a call to a connector of the caller's Bay
//! and hold the caller until the connector answers with
//! `POST /agents/requests/{requestId}/answer` (RPC through the gateway),
//! and the admin API marks which agents are connectors.
//!
//! The relay crosses nodes through the Bay's event log: the call is logged
//! as a `connector.request` event addressed to the connector, which gets
//! it over whatever transport it holds (WebSocket, SSE, `/updates` or its
//! webhook), and the answer is logged as a control entry that the asker's
//! node's feed hands to the held call (docs/connectors.md).

pub mod admin;
pub mod answer;
pub mod relay;

use actix_web::web;
use serde::{Deserialize, Serialize};
use switchboard_protocol::connector::Platform;
use utoipa::ToSchema;

pub use admin::routes as admin_routes;

/// Registers the agent API routes (under `/api/agent-api`).
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(relay::ask)
        .service(relay::send)
        .service(answer::answer);
}

/// `{ platform }`: what a connector bridges.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConnectorSpec {
    /// `telegram`, `gmail`, `slack`, `whatsapp` or `discord`.
    pub platform: Platform,
}
