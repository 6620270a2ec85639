//! The Prometheus exporter: the node's global recorder, `GET /metrics`
//! (text exposition format, through `metrics-exporter-prometheus`) and
//! the gauges read from the node's tables at each scrape.
//!
//! Here, with the other operations endpoints, rather than beside the
//! metric names of [`crate::metrics`]: reading the gauges needs the node's
//! state, and the names must stay a leaf every module can record through.

use crate::metrics::{
    ACTORS, CONNECTIONS, CURSOR_EXPIRED, DISPLACEMENTS, EVENTS_DELIVERED, HELD_POLLS, RATE_LIMITED,
    REPLAYS, SLOW_CONSUMERS, TRACKED, WAITS_HELD, WEBHOOK_DELIVERIES, WEBHOOK_OLDEST_PENDING,
};
use crate::state::AppState;
use actix_web::{get, web, HttpResponse};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;

/// Histogram buckets (seconds) of every `_seconds` metric: 0.5 ms to 5 s.
const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the global recorder once and returns its handle.
pub fn install() -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)
            .unwrap_or_else(|_| PrometheusBuilder::new());
        // Only fails when another recorder is installed (never in this binary).
        let handle = builder
            .install_recorder()
            .expect("no other metrics recorder is installed");
        zero_series();
        handle
    })
}

/// Creates, at 0, the series of every fixed label set that dashboards
/// and alerts read, so they exist from the first scrape: a `rate()` over
/// a series that appears only at its first event misses that event, and
/// "absent" cannot be told from "broken". (Histograms appear with their
/// first sample.)
fn zero_series() {
    const TRANSPORTS: [&str; 3] = ["ws", "updates", "sse"];
    for t in TRANSPORTS {
        metrics::gauge!(CONNECTIONS, "transport" => t).increment(0.0);
        metrics::counter!(EVENTS_DELIVERED, "transport" => t).increment(0);
        metrics::counter!(DISPLACEMENTS, "transport" => t).increment(0);
        metrics::counter!(CURSOR_EXPIRED, "transport" => t).increment(0);
    }
    for source in ["feed", "store"] {
        metrics::counter!(REPLAYS, "source" => source).increment(0);
    }
    for outcome in ["delivered", "failed", "gave_up", "disabled"] {
        metrics::counter!(WEBHOOK_DELIVERIES, "outcome" => outcome).increment(0);
    }
    for bucket in ["updates", "agent"] {
        metrics::counter!(RATE_LIMITED, "bucket" => bucket).increment(0);
    }
    metrics::counter!(SLOW_CONSUMERS).increment(0);
    metrics::gauge!(HELD_POLLS).increment(0.0);
    metrics::gauge!(WAITS_HELD).increment(0.0);
}

/// `GET /metrics`.
#[utoipa::path(
    operation_id = "metrics",
    tag = "operations",
    summary = "Prometheus metrics",
    description = "Text exposition format 0.0.4; metric names start with `switchboard_`.",
    responses((status = 200, description = "The metrics", body = String, content_type = "text/plain; version=0.0.4")),
)]
#[get("/metrics")]
async fn render(state: web::Data<AppState>) -> HttpResponse {
    refresh(&state);
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(install().render())
}

/// Sets the gauges read from the node's tables (and forgets stopped
/// actors on the way): at every scrape, and periodically so the tables are
/// pruned even when nobody scrapes.
pub fn refresh(state: &AppState) {
    let (_, conversations) = state.registry.actor_counts();
    // Tenants' feeds: the readiness canary's own feed never stops and is
    // not a Bay anyone uses.
    let feeds = state
        .registry
        .feed_bays()
        .iter()
        .filter(|b| b.0 != super::canary::CANARY_BAY)
        .count();
    metrics::gauge!(ACTORS, "kind" => "feed").set(feeds as f64);
    metrics::gauge!(ACTORS, "kind" => "conversation").set(conversations as f64);
    metrics::gauge!(WEBHOOK_OLDEST_PENDING).set(state.webhooks.oldest_pending().as_secs_f64());
    let (updates, agent) = state.limits.tracked_tokens().unwrap_or_default();
    metrics::gauge!(TRACKED, "table" => "rate_limit_updates").set(updates as f64);
    metrics::gauge!(TRACKED, "table" => "rate_limit_agent").set(agent as f64);
    metrics::gauge!(TRACKED, "table" => "token_cache").set(state.registry.tokens().len() as f64);
    let (ips, tokens) = state.connections.tracked();
    metrics::gauge!(TRACKED, "table" => "admission_ips").set(ips as f64);
    metrics::gauge!(TRACKED, "table" => "admission_tokens").set(tokens as f64);
}

/// Registers `/metrics` at the root.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(render);
}
