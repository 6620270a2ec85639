//! The node directory: each running gateway node's self-description,
//! refreshed by the node and dropped when it stops refreshing.

use super::StoreError;
use async_trait::async_trait;
use std::collections::BTreeMap;
use std::time::Duration;

/// What one node says of itself, every few seconds (the operator console's
/// Nodes page, `GET /api/admin/nodes`). Figures are the node's own, taken
/// from its metrics at `reported_ms`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeRecord {
    /// The node id ([`crate::node::id`]): new at every start.
    pub id: String,
    /// The gateway's version (the crate version it was built from).
    pub version: String,
    /// When the process started, Unix ms.
    pub started_ms: u64,
    /// When this record was written, Unix ms of the node's clock.
    pub reported_ms: u64,
    /// Open realtime connections by transport (`ws`, `updates`, `sse`).
    pub connections: BTreeMap<String, u64>,
    /// `/updates` calls held right now.
    pub held_polls: u64,
    /// Bay feeds running on the node (tenants' Bays: `bays.len()`).
    pub feeds: u64,
    /// Events handed to clients per second, over the last report interval.
    pub deliveries_per_second: f64,
    /// 99th percentile of publish-to-deliver latency over the last report
    /// interval, ms (an upper bucket bound); `None` with no delivery.
    pub delivery_p99_ms: Option<f64>,
    /// The readiness canary's last round trip, ms; `None` before the first.
    pub canary_ms: Option<f64>,
    /// The Bays whose feed runs on the node (sessions or waits there).
    #[serde(default)]
    pub bays: Vec<String>,
}

/// The node directory.
///
/// # Errors
///
/// Every method fails with [`StoreError::Unavailable`] when the backing
/// service cannot be reached and [`StoreError::Corrupt`] when a stored record
/// does not decode.
#[async_trait]
pub trait NodeStore: Send + Sync + 'static {
    /// Replaces the record of node `record.id`, valid for `ttl` from now
    /// (the node refreshes it well within).
    async fn report_node(&self, record: &NodeRecord, ttl: Duration) -> Result<(), StoreError>;
    /// Every unexpired record, sorted by node id. Engines may forget
    /// expired records here.
    async fn nodes(&self) -> Result<Vec<NodeRecord>, StoreError>;
}
