//! The Grafana dashboard (`deploy/grafana/switchboard.json`) against a
//! real node: every metric a panel queries exists in the node's
//! `/metrics` once the node has done some work (a delivery, a draft), and
//! the draft panel's route pattern matches the route labels the node
//! really writes. Runs on memory and on Redis (`SWITCHBOARD_TEST_STORE`).

mod common;

use common::{Gateway, World};
use serde_json::{json, Value};
use std::collections::BTreeSet;

fn dashboard() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/grafana/switchboard.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).expect("the dashboard is JSON")
}

/// Every PromQL expression of every panel.
fn expressions(dash: &Value) -> Vec<String> {
    dash["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .map(|t| {
            t["expr"]
                .as_str()
                .expect("every target has an expr")
                .to_owned()
        })
        .collect()
}

/// The `switchboard_…` metric names an expression reads.
fn metric_names(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("switchboard_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        out.push(tail[..end].to_owned());
        rest = &tail[end..];
    }
    out
}

#[test]
fn the_dashboard_is_well_formed() {
    let dash = dashboard();
    assert_eq!(dash["uid"], "switchboard");
    let ids: BTreeSet<u64> = dash["panels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_u64().unwrap())
        .collect();
    assert_eq!(
        ids.len(),
        dash["panels"].as_array().unwrap().len(),
        "panel ids are unique"
    );
    let titles: Vec<&str> = dash["panels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["title"].as_str().unwrap())
        .collect();
    for wanted in [
        "Connections",
        "Deliveries",
        "Delivery latency",
        "Replays",
        "Slow consumers",
        "Store (Redis) command latency",
        "Webhook outcomes",
        "Drafts",
    ] {
        assert!(
            titles.iter().any(|t| t.starts_with(wanted)),
            "no {wanted} panel in {titles:?}"
        );
    }
    for expr in expressions(&dash) {
        assert!(
            !metric_names(&expr).is_empty(),
            "{expr} reads no switchboard metric"
        );
    }
}

#[tokio::test]
async fn every_metric_the_dashboard_queries_is_exported() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "acme").await;
    // Some work, so histograms have their first samples: a delivery over
    // a WebSocket, and a draft opened, appended to and completed.
    let mut ws = gw.ws_ready(&w.rex, None).await;
    let (status, _) = gw.post_message(&w.ana, "group", "hello").await;
    assert_eq!(status, 201);
    ws.until_frame("event", std::time::Duration::from_secs(10))
        .await;
    let (status, draft) = gw
        .post_json(
            &w.rex,
            "/conversations/group/messages",
            json!({"content": "a", "stream": true}),
        )
        .await;
    assert_eq!(status, 201, "{draft}");
    let mid = draft["id"].as_str().unwrap();
    let (status, body) = gw
        .post_json(
            &w.rex,
            &format!("/conversations/group/messages/{mid}/append"),
            json!({"offset": 1, "text": "b"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    // The canary's first round trip and the first node report.
    let ready = common::eventually(std::time::Duration::from_secs(10), || async {
        gw.metric("switchboard_canary_round_trip_seconds_count")
            .await
            > 0.0
    })
    .await;
    assert!(ready, "no canary round trip");

    let text = gw
        .http
        .get(gw.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let exported: BTreeSet<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    let mut missing = BTreeSet::new();
    for expr in expressions(&dashboard()) {
        for name in metric_names(&expr) {
            if !exported.contains(name.as_str()) {
                missing.insert(name);
            }
        }
    }
    assert!(missing.is_empty(), "queried but not exported: {missing:?}");
    // The draft panel filters routes by pattern: the node's labels match it.
    assert!(
        text.lines()
            .any(|l| l.starts_with("switchboard_http_requests_total")
                && l.contains("route=\"/api/agent-api/conversations/{id}/messages/{mid}/append\"")),
        "no append route label"
    );
    ws.close().await;
}
