//! Resource release on a long-lived node, end to end: idle Bay feeds and
//! conversation actors stop after `timing.actor_idle_timeout`, and the Bay
//! works exactly as before once it is used again (sessions, deliveries,
//! token revocation through the restarted feed). Runs on the memory
//! engine, and on Redis with `SWITCHBOARD_TEST_STORE=redis`, where the
//! dedicated blocking connections must be given back too. And REST calls
//! of many Bays hold nothing per Bay: authenticating starts no feed, and
//! token changes reach every node's cache through one channel.

mod common;

use common::{Gateway, Opts, RedisServer, World};
use std::time::{Duration, Instant};
use switchboard_protocol::error::WsClose;

const PATIENCE: Duration = Duration::from_secs(30);

async fn feeds(gw: &Gateway) -> f64 {
    gw.metric("switchboard_actors{kind=\"feed\"}").await
}

async fn conversation_actors(gw: &Gateway) -> f64 {
    gw.metric("switchboard_actors{kind=\"conversation\"}").await
}

#[tokio::test]
async fn idle_feeds_and_conversation_actors_stop_and_the_bay_works_after() {
    let gw =
        Gateway::spawn_with(Opts::default().env("SWITCHBOARD_TIMING__ACTOR_IDLE_TIMEOUT", "1s"))
            .await;
    let w = World::create(&gw, "idle").await;
    let mut ws = gw.ws_ready(&w.rex, None).await;
    let (_, cursor) = ws.read_batch().await;
    let (s, b) = gw.post_message(&w.ana, "group", "@Rex before").await;
    assert_eq!(s, 201, "{b}");
    let (events, _) = ws.read_batch().await;
    assert_eq!(events[0]["message"]["content"], "@Rex before");
    assert!(feeds(&gw).await >= 1.0);
    assert!(conversation_actors(&gw).await >= 1.0);

    // Nobody left: the feed and the conversation actor stop.
    ws.close().await;
    let stopped = common::eventually(PATIENCE, || async {
        feeds(&gw).await == 0.0 && conversation_actors(&gw).await == 0.0
    })
    .await;
    assert!(
        stopped,
        "feeds {} conversations {}",
        feeds(&gw).await,
        conversation_actors(&gw).await
    );
    if gw.test_store() == "redis" {
        // Each tail's connection went back to the idle cache (at most 16
        // kept), none stays blocked for a stopped feed.
        let blocking = gw.metric("switchboard_redis_blocking_connections").await;
        assert!(blocking <= 16.0, "{blocking} blocking connections");
    }

    // Used again: resume from the old cursor loses nothing, live
    // deliveries flow, and a revocation still closes the socket at once
    // (the restarted feed keeps the node's token cache exact).
    let (s, b) = gw.post_message(&w.ana, "group", "@Rex after").await;
    assert_eq!(s, 201, "{b}");
    let mut ws = gw.ws_ready(&w.rex, Some(&cursor)).await;
    let (events, _) = ws.read_batch().await;
    let contents: Vec<&str> = events
        .iter()
        .filter_map(|e| e["message"]["content"].as_str())
        .collect();
    assert_eq!(contents, ["@Rex before", "@Rex after"]);
    assert_eq!(feeds(&gw).await, 1.0);
    let (s, b) = gw.post_message(&w.ana, "group", "@Rex live").await;
    assert_eq!(s, 201, "{b}");
    let (events, _) = ws.read_batch().await;
    assert_eq!(events[0]["message"]["content"], "@Rex live");
    gw.revoke_token("idle", "rex").await;
    ws.expect_server_close(WsClose::CredentialRevoked, PATIENCE)
        .await;
}

#[tokio::test]
async fn a_bay_used_only_over_rest_lets_its_feed_stop_and_still_authenticates() {
    let gw =
        Gateway::spawn_with(Opts::default().env("SWITCHBOARD_TIMING__ACTOR_IDLE_TIMEOUT", "1s"))
            .await;
    let w = World::create(&gw, "rest").await;
    let (s, _) = gw.get(&w.rex, "/me").await;
    assert_eq!(s, 200);
    assert!(
        common::eventually(PATIENCE, || async { feeds(&gw).await == 0.0 }).await,
        "the feed an authentication started stops when idle"
    );
    let (s, _) = gw.get(&w.rex, "/me").await;
    assert_eq!(s, 200, "authenticates again (at the store)");
    gw.revoke_token("rest", "rex").await;
    // Within the feed's lag (milliseconds), as for any revocation.
    let refused =
        common::eventually(PATIENCE, || async { gw.get(&w.rex, "/me").await.0 == 401 }).await;
    assert!(refused, "the revoked token is refused");
}

async fn blocking_connections(gw: &Gateway) -> f64 {
    gw.metric("switchboard_redis_blocking_connections").await
}

/// One REST call per agent of 200 Bays, on Redis: the node's blocking
/// connections stay bounded by a constant (the credentials tail's one, the
/// canary's feed, the idle cache), not two per Bay, because authenticating
/// starts no Bay feed. The tokens are cached all the same, and a
/// revocation or a Bay's suspension made through another node reaches this
/// node's cache within about a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_calls_of_many_bays_hold_no_redis_connection_per_bay() {
    let redis = RedisServer::start(false);
    let a = Gateway::spawn_with(Opts::default().redis(&redis.url())).await;
    let b = Gateway::spawn_with(Opts::default().redis(&redis.url())).await;
    const BAYS: usize = 200;
    let mut tokens = Vec::with_capacity(BAYS);
    for i in 0..BAYS {
        let bay = format!("many{i}");
        b.create_bay(&bay).await;
        tokens.push(b.create_participant(&bay, "rex", "agent", "Rex").await);
    }
    let before = blocking_connections(&a).await;
    for token in &tokens {
        let (s, body) = a.get(token, "/me").await;
        assert_eq!(s, 200, "{body}");
    }
    let after = blocking_connections(&a).await;
    let feeds = feeds(&a).await;
    eprintln!("{BAYS} bays: blocking connections {before} before, {after} after; {feeds} feeds");
    assert!(
        after <= 20.0,
        "{after} blocking connections after one call per Bay ({before} before)"
    );
    assert!(feeds <= 1.0, "{feeds} feeds (the canary's at most)");
    let cached = a
        .metric("switchboard_tracked_entries{table=\"token_cache\"}")
        .await;
    assert!(cached >= BAYS as f64, "{cached} tokens cached");

    // A second call is answered from the cache; then a revocation through
    // the other node reaches it within about a second.
    let (s, _) = a.get(&tokens[0], "/me").await;
    assert_eq!(s, 200);
    b.revoke_token("many0", "rex").await;
    let t0 = Instant::now();
    let refused = common::eventually(PATIENCE, || async {
        a.get(&tokens[0], "/me").await.0 == 401
    })
    .await;
    let took = t0.elapsed();
    assert!(refused, "the revoked token is refused");
    assert!(took < Duration::from_millis(1500), "refused after {took:?}");
    let (s, _) = a.get(&tokens[1], "/me").await;
    assert_eq!(s, 200, "another Bay's token still works");

    // A Bay suspended through the other node: refused here too.
    let (s, body) = b
        .admin(reqwest::Method::POST, "/bays/many1/suspend", None)
        .await;
    assert_eq!(s, 200, "{body}");
    let t0 = Instant::now();
    let refused = common::eventually(PATIENCE, || async {
        a.get(&tokens[1], "/me").await.0 == 403
    })
    .await;
    let took = t0.elapsed();
    assert!(refused, "the suspended Bay's token is refused");
    assert!(took < Duration::from_millis(1500), "refused after {took:?}");
    assert!(
        blocking_connections(&a).await <= 20.0,
        "still no connection per Bay"
    );
}
