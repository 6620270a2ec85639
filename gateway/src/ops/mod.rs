//! The operations endpoints, served at the root without authentication:
//! what load balancers, orchestrators and scrapers call (OpenAPI tag
//! `operations`).
//!
//! - [`health`]: `/healthz` (alive) and `/readyz` (the store answers,
//!   delivery flows, the node is not draining); [`canary`]: the probe
//!   behind "delivery flows";
//! - [`exporter`]: `/metrics`, the Prometheus recorder behind it and the
//!   gauges read from the node's state at each scrape;
//! - [`node_report`]: the node's entry in the store's node directory.
//!
//! They live apart from the wire API because they read the whole node's
//! state ([`crate::state::AppState`]) rather than a caller's; the metric
//! names themselves are in [`crate::metrics`], which every module records
//! through.

pub mod canary;
pub mod exporter;
pub mod health;
pub mod node_report;

use actix_web::web;

/// Registers every operations route at the root.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.configure(health::routes).configure(exporter::routes);
}
