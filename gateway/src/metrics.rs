//! The names of the gateway's Prometheus metrics, and what each measures.
//!
//! Names only: every metric is recorded where its event happens, through
//! the `metrics` facade, and exported at `GET /metrics` by
//! [`crate::ops::exporter`]. This file depends on nothing in the crate, so
//! any module may record a metric without reaching the node's state.
//!
//! Names carry the `switchboard_` prefix and the standard unit suffixes;
//! every label value comes from a fixed set (transport, op, bucket, reason,
//! outcome, a standard method or `other`, a route pattern or `unmatched`),
//! so no request can add a series.

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
/// Live actors (gauge), label `kind` = `feed` | `conversation`; the
/// readiness canary's own feed is not counted.
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
/// Webhook deliveries by outcome (counter), label `outcome` = `delivered`
/// | `failed` (one attempt) | `gave_up` | `disabled`.
pub const WEBHOOK_DELIVERIES: &str = "switchboard_webhook_deliveries_total";
/// Duration of one webhook delivery attempt (histogram, seconds).
pub const WEBHOOK_ATTEMPT_SECONDS: &str = "switchboard_webhook_attempt_duration_seconds";
/// Round trip of the readiness canary (histogram, seconds): from writing
/// a canary record into the store to this node's feed reading it back
/// (`gateway/src/ops/canary.rs`).
pub const CANARY_SECONDS: &str = "switchboard_canary_round_trip_seconds";
/// Age of the oldest record a webhook worker on this node is still trying
/// to deliver (gauge, seconds; 0 when nothing is pending).
pub const WEBHOOK_OLDEST_PENDING: &str = "switchboard_webhook_oldest_undelivered_seconds";
