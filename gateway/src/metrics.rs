//! Prometheus metrics at `GET /metrics` (text exposition format), through
//! the `metrics` facade and `metrics-exporter-prometheus`.
//!
//! Names carry the `switchboard_` prefix and the standard unit suffixes;
//! every label value comes from a fixed set (transport, op, bucket, reason,
//! outcome, a standard method or `other`, a route pattern or `unmatched`),
//! so no request can add a series.

use crate::state::AppState;
use actix_web::{get, web, HttpResponse};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;

/// Open realtime connections (gauge), label `transport` = `ws` | `updates`.
pub const CONNECTIONS: &str = "switchboard_connections";
/// `/updates` calls held right now (gauge): attached to their Bay feed and
/// replayed, waiting for an event, the end of `wait` or a close.
pub const HELD_POLLS: &str = "switchboard_held_polls";
/// Events handed to clients (counter), label `transport`.
pub const EVENTS_DELIVERED: &str = "switchboard_events_delivered_total";
/// Publish-to-deliver latency (histogram, seconds): from the message's
/// `createdAt` to the moment its event frame / answer is written. One
/// sample per batch a session writes: the age of its oldest message.
pub const DELIVERY_SECONDS: &str = "switchboard_delivery_latency_seconds";
/// Connections closed because a newer one of the same token opened (counter), label `transport`.
pub const DISPLACEMENTS: &str = "switchboard_displacements_total";
/// 409 / `reset` answers (counter), label `transport`.
pub const CURSOR_EXPIRED: &str = "switchboard_cursor_expirations_total";
/// 429 answers (counter), label `bucket` = `updates` | `agent`.
pub const RATE_LIMITED: &str = "switchboard_rate_limited_total";
/// Messages accepted (counter).
pub const MESSAGES_ACCEPTED: &str = "switchboard_messages_accepted_total";
/// HTTP requests (counter), labels `method` (a standard method or
/// `other`), `route` (the matched route pattern, or `unmatched`) and `status`.
pub const HTTP_REQUESTS: &str = "switchboard_http_requests_total";
/// HTTP request duration (histogram, seconds), labels `method` and `route`.
pub const HTTP_SECONDS: &str = "switchboard_http_request_duration_seconds";
/// Sessions detached for falling too far behind (counter); counted by the feed.
pub use switchboard_actors::feed::SLOW_CONSUMERS;
/// `GET …/messages/wait` requests registered and not yet answered (gauge).
pub const WAITS_HELD: &str = "switchboard_message_waits_held";
/// Live actors (gauge), label `kind` = `feed` | `conversation`.
pub const ACTORS: &str = "switchboard_actors";
/// Dedicated Redis connections for blocking reads (gauge); set by the
/// Redis engine, absent with the memory engine.
pub use switchboard_actors::store::redis::BLOCKING_CONNECTIONS;
/// Entries of this node's bookkeeping tables (gauge), label `table` =
/// `rate_limit_updates` | `rate_limit_agent` (per-token buckets of the
/// memory engine's limiter; 0 with Redis, which counts in Redis) |
/// `token_cache` (authenticated tokens) | `admission_ips` |
/// `admission_tokens` (connection admission counters). Each is bounded by
/// what is in use, not by what was ever seen.
pub const TRACKED: &str = "switchboard_tracked_entries";
/// Session openings that resumed from a cursor, by `source` (counter).
pub use switchboard_actors::open::REPLAYS;

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
        builder
            .install_recorder()
            .expect("no other metrics recorder is installed")
    })
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
    let (feeds, conversations) = state.registry.actor_counts();
    metrics::gauge!(ACTORS, "kind" => "feed").set(feeds as f64);
    metrics::gauge!(ACTORS, "kind" => "conversation").set(conversations as f64);
    metrics::gauge!(crate::webhooks::dispatcher::WEBHOOK_OLDEST_PENDING)
        .set(state.webhooks.oldest_pending().as_secs_f64());
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
