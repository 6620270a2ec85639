//! The readiness canary: `/readyz` proves delivery end to end. A node
//! writes a canary record into the store every second and waits for its
//! own feed to read it back; when the feed's tail stalls while the store
//! still answers PING, readiness fails within 5 s, and comes back once the
//! tail moves again. The round trip is exported as a metric.

mod common;

use common::stall::TailStallProxy;
use common::{eventually, Gateway, Opts, RedisServer};
use serde_json::Value;
use std::time::{Duration, Instant};

const ROUND_TRIP: &str = "switchboard_canary_round_trip_seconds_count";

async fn readiness(gw: &Gateway) -> (u16, Value) {
    let res = gw.http.get(gw.url("/readyz")).send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// On the test store (memory, or Redis with `SWITCHBOARD_TEST_STORE=redis`):
/// canaries come back, the node is ready, the round trip is measured.
#[tokio::test]
async fn canaries_come_back_and_their_round_trip_is_exported() {
    let gw = Gateway::spawn().await;
    assert!(
        eventually(Duration::from_secs(10), || async {
            gw.metric(ROUND_TRIP).await >= 2.0
        })
        .await,
        "no canary round trip recorded on {}",
        gw.test_store()
    );
    let (status, body) = readiness(&gw).await;
    assert_eq!(status, 200, "{body}");
    let sum = gw.metric("switchboard_canary_round_trip_seconds_sum").await;
    assert!(sum > 0.0 && sum < 10.0, "round trips add up to {sum} s");
}

// Multi-threaded: the proxy keeps pumping while the test waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_feed_fails_readiness_within_5_s_while_ping_still_answers() {
    let redis = RedisServer::start(false);
    let proxy = TailStallProxy::start(redis.port()).await;
    let gw = Gateway::spawn_with(Opts::default().redis(&proxy.url())).await;
    assert!(
        eventually(Duration::from_secs(15), || async {
            gw.metric(ROUND_TRIP).await >= 2.0 && readiness(&gw).await.0 == 200
        })
        .await,
        "the node never became ready with its canary flowing"
    );

    proxy.stall_tail();
    let stalled_at = Instant::now();
    let (status, body) = loop {
        let (status, body) = readiness(&gw).await;
        if status != 200 || stalled_at.elapsed() > Duration::from_secs(10) {
            break (status, body);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let took = stalled_at.elapsed();
    eprintln!("readiness failed {took:?} after the tail stalled");
    assert_eq!(status, 503, "still ready {took:?} after the stall: {body}");
    // Not `store_unavailable`: the store still answers its ping.
    assert_eq!(body["reason"], "delivery_stalled", "{body}");
    assert!(
        took < Duration::from_secs(5),
        "readiness failed after {took:?}"
    );
    assert_eq!(redis.cmd(&["PING"]), "PONG");

    proxy.heal();
    assert!(
        eventually(Duration::from_secs(30), || async {
            readiness(&gw).await.0 == 200
        })
        .await,
        "readiness did not come back once the tail moved again"
    );
}
