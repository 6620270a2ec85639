//! Resource release on a long-lived node, end to end: idle Bay feeds and
//! conversation actors stop after `timing.actor_idle_timeout`, and the Bay
//! works exactly as before once it is used again (sessions, deliveries,
//! token revocation through the restarted feed). Runs on the memory
//! engine, and on Redis with `SWITCHBOARD_TEST_STORE=redis`, where the
//! dedicated blocking connections must be given back too.

mod common;

use common::{Gateway, Opts, World};
use std::time::Duration;
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
