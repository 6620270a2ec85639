//! The node's entry in the node directory ([`NodeStore`]): every
//! [`REPORT_INTERVAL`] the node writes what it is serving, read off its
//! own metrics, so the operator console can show every live node of a
//! shared store (`GET /api/admin/nodes`).
//!
//! The figures come from the exporter's rendering rather than from new
//! counters: they are exactly what `/metrics` shows, and the rates and
//! the p99 are taken over the last interval from the difference of two
//! renderings.

use crate::state::AppState;
use std::collections::BTreeMap;
use std::time::Duration;
use switchboard_actors::store::{now_ms, NodeRecord};

/// How often a node refreshes its record.
pub const REPORT_INTERVAL: Duration = Duration::from_secs(2);
/// How long a record lasts unrefreshed: a stopped node leaves the
/// directory within this.
pub const REPORT_TTL: Duration = Duration::from_secs(10);

/// The delivery counters of one rendering: events delivered (all
/// transports), and the latency histogram's cumulative buckets (upper
/// bound in seconds → count), all transports added up.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Deliveries {
    /// `switchboard_events_delivered_total`, summed.
    pub events: f64,
    /// `switchboard_delivery_latency_seconds_bucket`, summed per `le`.
    pub buckets: Vec<(f64, f64)>,
}

/// A sample's labels: (name, value) pairs.
type Labels<'a> = Vec<(&'a str, &'a str)>;

/// One sample line of the text exposition format: name, labels, value.
fn sample(line: &str) -> Option<(&str, Labels<'_>, f64)> {
    if line.starts_with('#') || line.is_empty() {
        return None;
    }
    let (series, value) = line.rsplit_once(' ')?;
    let value: f64 = value.parse().ok()?;
    let (name, labels) = match series.split_once('{') {
        Some((name, rest)) => (name, rest.strip_suffix('}')?),
        None => (series, ""),
    };
    // Label values here come from fixed sets (no commas or quotes inside).
    let labels = labels
        .split(',')
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k, v.trim_matches('"')))
        })
        .collect();
    Some((name, labels, value))
}

fn label<'a>(labels: &[(&str, &'a str)], key: &str) -> Option<&'a str> {
    labels.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

/// Reads the node's figures off a rendering: (connections by transport,
/// held polls, delivery counters).
pub fn read(rendered: &str) -> (BTreeMap<String, u64>, u64, Deliveries) {
    let mut connections = BTreeMap::new();
    let mut held = 0;
    let mut d = Deliveries::default();
    let mut buckets: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
    for (name, labels, value) in rendered.lines().filter_map(sample) {
        match name {
            crate::metrics::CONNECTIONS => {
                let t = label(&labels, "transport").unwrap_or("other").to_string();
                *connections.entry(t).or_default() += value.max(0.0) as u64;
            }
            crate::metrics::HELD_POLLS => held = value.max(0.0) as u64,
            crate::metrics::EVENTS_DELIVERED => d.events += value,
            "switchboard_delivery_latency_seconds_bucket" => {
                let le = match label(&labels, "le") {
                    Some("+Inf") => f64::INFINITY,
                    Some(v) => v.parse().unwrap_or(f64::INFINITY),
                    None => continue,
                };
                buckets.entry(le.to_bits()).or_insert((le, 0.0)).1 += value;
            }
            _ => {}
        }
    }
    d.buckets = buckets.into_values().collect();
    d.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    (connections, held, d)
}

/// The 99th percentile (ms, a bucket's upper bound) of the deliveries
/// between two renderings; `None` when there were none. A p99 in the
/// `+Inf` bucket is reported as the largest finite bound.
pub fn p99_ms(before: &Deliveries, after: &Deliveries) -> Option<f64> {
    let count_at = |d: &Deliveries, le: f64| {
        d.buckets
            .iter()
            .find(|(b, _)| *b == le)
            .map_or(0.0, |(_, c)| *c)
    };
    let deltas: Vec<(f64, f64)> = after
        .buckets
        .iter()
        .map(|(le, c)| (*le, c - count_at(before, *le)))
        .collect();
    let total = deltas.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let finite_max = deltas
        .iter()
        .filter(|(le, _)| le.is_finite())
        .map(|(le, _)| *le)
        .fold(0.0, f64::max);
    deltas
        .iter()
        .find(|(_, c)| *c >= total * 0.99)
        .map(|(le, _)| if le.is_finite() { *le } else { finite_max } * 1000.0)
}

/// Writes the node's record every [`REPORT_INTERVAL`] until the process
/// ends. Must run inside an actix system.
pub fn spawn(state: AppState) {
    actix_rt::spawn(async move {
        let started_ms = now_ms();
        let mut before = read(&super::exporter::install().render()).2;
        let mut tick = tokio::time::interval(REPORT_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let (connections, held_polls, now) = read(&super::exporter::install().render());
            let secs = REPORT_INTERVAL.as_secs_f64();
            // The canary's own feed is not a tenant's: neither listed nor counted.
            let bays: Vec<String> = state
                .registry
                .feed_bays()
                .into_iter()
                .map(|b| b.0)
                .filter(|b| b != super::canary::CANARY_BAY)
                .collect();
            let record = NodeRecord {
                id: switchboard_actors::node::id().to_string(),
                version: env!("CARGO_PKG_VERSION").to_string(),
                started_ms,
                reported_ms: now_ms(),
                connections,
                held_polls,
                feeds: bays.len() as u64,
                deliveries_per_second: ((now.events - before.events) / secs).max(0.0),
                delivery_p99_ms: p99_ms(&before, &now),
                canary_ms: state
                    .canary
                    .last_round_trip()
                    .map(|d| d.as_secs_f64() * 1000.0),
                bays,
            };
            before = now;
            if let Err(err) = state.store.report_node(&record, REPORT_TTL).await {
                tracing::warn!(error = %err, "could not report the node to the node directory");
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const RENDERED: &str = "\
# TYPE switchboard_connections gauge
switchboard_connections{transport=\"ws\"} 3
switchboard_connections{transport=\"sse\"} 1
switchboard_held_polls 2
switchboard_events_delivered_total{transport=\"ws\"} 10
switchboard_events_delivered_total{transport=\"sse\"} 5
switchboard_delivery_latency_seconds_bucket{transport=\"ws\",le=\"0.005\"} 90
switchboard_delivery_latency_seconds_bucket{transport=\"ws\",le=\"0.025\"} 99
switchboard_delivery_latency_seconds_bucket{transport=\"ws\",le=\"+Inf\"} 100
";

    #[test]
    fn the_figures_are_read_off_a_rendering() {
        let (conns, held, d) = read(RENDERED);
        assert_eq!(conns.get("ws"), Some(&3));
        assert_eq!(conns.get("sse"), Some(&1));
        assert_eq!(held, 2);
        assert_eq!(d.events, 15.0);
        assert_eq!(d.buckets.len(), 3);
        assert_eq!(p99_ms(&Deliveries::default(), &d), Some(25.0));
        assert_eq!(p99_ms(&d, &d), None, "no delivery in between");
    }
}
