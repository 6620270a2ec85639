//! The node directory: a node's record replaces its previous one, is
//! listed while its TTL runs, and is gone after it.

use super::common::unique;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use switchboard_actors::store::{NodeRecord, Store};

conformance!(a_node_record_is_listed_until_its_ttl_runs_out);

fn record(id: &str, feeds: u64) -> NodeRecord {
    NodeRecord {
        id: id.to_string(),
        version: "0.1.0".into(),
        started_ms: 1_000,
        reported_ms: 2_000,
        connections: BTreeMap::from([("ws".to_string(), 3), ("sse".to_string(), 1)]),
        held_polls: 2,
        feeds,
        deliveries_per_second: 12.5,
        delivery_p99_ms: Some(25.0),
        canary_ms: None,
        bays: vec!["acme".into()],
    }
}

async fn a_node_record_is_listed_until_its_ttl_runs_out(store: Arc<dyn Store>) {
    let store = &*store;
    let (a, b) = (unique("n_a"), unique("n_b"));
    let long = Duration::from_secs(30);
    store.report_node(&record(&a, 1), long).await.unwrap();
    store.report_node(&record(&a, 4), long).await.unwrap();
    store
        .report_node(&record(&b, 1), Duration::from_millis(300))
        .await
        .unwrap();
    let mine = |all: Vec<NodeRecord>| {
        all.into_iter()
            .filter(|r| r.id == a || r.id == b)
            .collect::<Vec<_>>()
    };
    let listed = mine(store.nodes().await.unwrap());
    assert_eq!(listed.len(), 2, "{listed:?}");
    let of_a = listed.iter().find(|r| r.id == a).unwrap();
    assert_eq!(of_a, &record(&a, 4), "the newer report replaces the older");
    tokio::time::sleep(Duration::from_millis(700)).await;
    let listed = mine(store.nodes().await.unwrap());
    assert_eq!(
        listed.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        vec![a.as_str()],
        "b's record expired"
    );
}
