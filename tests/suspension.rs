//! Standing refusals: an operator suspends a participant or a whole Bay
//! through the admin API, every agent route answers 403 `ACCOUNT_SUSPENDED`
//! / `BAY_SUSPENDED`, open sessions end with the same refusal, and
//! reinstating restores access with the same token. Real gateway processes;
//! the multi-node case runs two gateways on one real `redis-server`.

mod common;

use common::sse::{sse_at, SseOpen};
use common::*;
use reqwest::Method;
use serde_json::Value;
use std::time::Duration;
use switchboard_protocol::error::WsClose;

const BAY: &str = "b1";
const PATIENCE: Duration = Duration::from_secs(20);

async fn standing(gw: &Gateway, path: &str) -> (u16, Value) {
    gw.admin(Method::POST, path, None).await
}

/// The refusal: 403, the code, the JSON error body, and a message that
/// says an operator did it.
#[track_caller]
fn assert_refused(status: u16, body: &Value, code: &str) {
    assert_error(status, body, 403, code);
    let message = body["message"].as_str().unwrap_or_default();
    assert!(message.contains("operator suspended"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_participant_is_refused_everywhere_until_reinstated_with_the_same_token() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    let mut ws = gw.ws_ready(&w.rex, None).await;
    let (_, _) = ws.read_batch().await;

    let (s, b) = standing(&gw, "/bays/b1/participants/rex/suspend").await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["id"], "rex", "{b}");
    assert_eq!(b["kind"], "agent", "{b}");
    assert_eq!(b["suspended"], true, "{b}");
    // The open socket gets the error frame naming the refusal, then 4004.
    ws.expect_server_close(WsClose::AccountSuspended, PATIENCE)
        .await;
    assert_eq!(WsClose::AccountSuspended.close_code(), 4004);

    // Every agent route refuses, with the JSON body.
    let (s, b) = gw.get(&w.rex, "/me").await;
    assert_refused(s, &b, "ACCOUNT_SUSPENDED");
    let (s, b) = gw.get(&w.rex, "/conversations/group/messages").await;
    assert_refused(s, &b, "ACCOUNT_SUSPENDED");
    let (s, b) = gw.get(&w.rex, "/conversations/group/messages/wait").await;
    assert_refused(s, &b, "ACCOUNT_SUSPENDED");
    let (s, b) = gw.post_message(&w.rex, "group", "still here?").await;
    assert_refused(s, &b, "ACCOUNT_SUSPENDED");
    let (s, b) = gw.updates(&w.rex, None, "1").await;
    assert_refused(s, &b, "ACCOUNT_SUSPENDED");
    let (s, b) = gw
        .ws_try(WsAuth::Header(&w.rex))
        .await
        .err()
        .expect("refused");
    assert_refused(s, &b, "ACCOUNT_SUSPENDED");
    let (s, b) = gw
        .ws_try(WsAuth::Query(&w.rex))
        .await
        .err()
        .expect("refused");
    assert_refused(s, &b, "ACCOUNT_SUSPENDED");
    let (s, b) = sse_at(&gw.url(""), &w.rex, SseOpen::default())
        .await
        .err()
        .expect("refused");
    assert_refused(s, &b, "ACCOUNT_SUSPENDED");
    // A wrong token still learns nothing but 401.
    let (s, b) = gw.get("bay_not_a_real_token_00000", "/me").await;
    assert_error(s, &b, 401, "UNAUTHORIZED");
    // Nobody else is touched.
    let (s, b) = gw.get(&w.brain, "/me").await;
    assert_eq!(s, 200, "{b}");

    // Suspending twice is idempotent.
    let (s, b) = standing(&gw, "/bays/b1/participants/rex/suspend").await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["suspended"], true, "{b}");

    // Reinstating: the same token works again, over every transport.
    let (s, b) = standing(&gw, "/bays/b1/participants/rex/reinstate").await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["suspended"], false, "{b}");
    let (s, b) = gw.get(&w.rex, "/me").await;
    assert_eq!(s, 200, "{b}");
    let (s, b) = standing(&gw, "/bays/b1/participants/rex/reinstate").await;
    assert_eq!((s, &b["suspended"]), (200, &Value::Bool(false)), "{b}");

    // A held /updates answers the refusal when the suspension lands.
    let (s, first) = gw.updates(&w.rex, None, "1").await;
    assert_eq!(s, 200, "{first}");
    let held = spawn_poll(&gw.addr, &w.rex, first["cursor"].as_str(), "25");
    gw.until_held(1).await;
    let (s, b) = standing(&gw, "/bays/b1/participants/rex/suspend").await;
    assert_eq!(s, 200, "{b}");
    let (s, b, _) = held.await.unwrap();
    assert_refused(s, &b, "ACCOUNT_SUSPENDED");

    // An open /events stream ends with a `close` event naming it.
    let (s, b) = standing(&gw, "/bays/b1/participants/rex/reinstate").await;
    assert_eq!(s, 200, "{b}");
    let mut sse = sse_at(&gw.url(""), &w.rex, SseOpen::default())
        .await
        .expect("reinstated: the stream opens");
    sse.until("cursor").await;
    let (s, b) = standing(&gw, "/bays/b1/participants/rex/suspend").await;
    assert_eq!(s, 200, "{b}");
    let (close, _) = sse.until("close").await;
    let data: Value = serde_json::from_str(&close.data).unwrap();
    assert_eq!(data["code"], "ACCOUNT_SUSPENDED", "{data}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_bay_refuses_all_its_participants_and_no_other_bay() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    let other = World::create(&gw, "b2").await;
    let mut ws = gw.ws_ready(&w.brain, None).await;
    let (_, _) = ws.read_batch().await;
    let mut elsewhere = gw.ws_ready(&other.brain, None).await;
    let (_, _) = elsewhere.read_batch().await;

    let (s, b) = standing(&gw, "/bays/b1/suspend").await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["id"], "b1", "{b}");
    assert_eq!(b["suspended"], true, "{b}");
    ws.expect_server_close(WsClose::BaySuspended, PATIENCE)
        .await;
    for token in [&w.ana, &w.ben, &w.rex, &w.brain, &w.scout] {
        let (s, b) = gw.get(token, "/me").await;
        assert_refused(s, &b, "BAY_SUSPENDED");
    }
    // The other Bay: its requests and its open socket go on.
    for token in [&other.ana, &other.rex] {
        let (s, b) = gw.get(token, "/me").await;
        assert_eq!(s, 200, "{b}");
    }
    let (s, posted) = gw.post_message(&other.ana, "group", "still open").await;
    assert_eq!(s, 201, "{posted}");
    let (events, _) = elsewhere.read_batch().await;
    assert_eq!(events[0]["message"]["id"], posted["id"], "{events:?}");

    // A participant suspended on its own stays so when the Bay is reinstated.
    let (s, b) = standing(&gw, "/bays/b1/participants/rex/suspend").await;
    assert_eq!(s, 200, "{b}");
    let (s, b) = gw.get(&w.rex, "/me").await;
    assert_refused(s, &b, "BAY_SUSPENDED");
    let (s, b) = standing(&gw, "/bays/b1/suspend").await;
    assert_eq!((s, &b["suspended"]), (200, &Value::Bool(true)), "{b}");
    let (s, b) = standing(&gw, "/bays/b1/reinstate").await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["suspended"], false, "{b}");
    let (s, b) = gw.get(&w.ana, "/me").await;
    assert_eq!(s, 200, "{b}");
    let (s, b) = gw.get(&w.rex, "/me").await;
    assert_refused(s, &b, "ACCOUNT_SUSPENDED");
    let mut ws = gw.ws_ready(&w.brain, None).await;
    let (_, _) = ws.read_batch().await;
}

#[tokio::test]
async fn unknown_ids_are_404_and_the_routes_need_the_admin_token() {
    let gw = Gateway::spawn().await;
    let _w = World::create(&gw, BAY).await;
    for path in [
        "/bays/nobay/suspend",
        "/bays/nobay/reinstate",
        "/bays/nobay/participants/rex/suspend",
        "/bays/b1/participants/ghost/suspend",
        "/bays/b1/participants/ghost/reinstate",
    ] {
        let (s, b) = standing(&gw, path).await;
        assert_error(s, &b, 404, "NOT_FOUND");
    }
    let res = test_http()
        .post(gw.url("/api/admin/bays/b1/suspend"))
        .bearer_auth("wrong")
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let body: Value = res.json().await.unwrap();
    assert_error(status, &body, 401, "UNAUTHORIZED");
    // Nothing was suspended by any of it.
    let (s, b) = gw.get(&_w.rex, "/me").await;
    assert_eq!(s, 200, "{b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspension_through_one_node_closes_a_session_on_another() {
    let redis = RedisServer::start(false);
    let a = Gateway::spawn_with(Opts::default().redis(&redis.url())).await;
    let b = Gateway::spawn_with(Opts::default().redis(&redis.url())).await;
    let w = World::create(&a, BAY).await;
    // Node B has answered (and cached) Rex's token before the suspension.
    let (s, body) = b.get(&w.rex, "/me").await;
    assert_eq!(s, 200, "{body}");
    let mut ws = b.ws_ready(&w.rex, None).await;
    let (_, _) = ws.read_batch().await;

    let (s, body) = standing(&a, "/bays/b1/participants/rex/suspend").await;
    assert_eq!(s, 200, "{body}");
    ws.expect_server_close(WsClose::AccountSuspended, PATIENCE)
        .await;
    for node in [&a, &b] {
        let (s, body) = node.get(&w.rex, "/me").await;
        assert_refused(s, &body, "ACCOUNT_SUSPENDED");
    }

    // Reinstated through node B: node A lets the same token in again.
    let (s, body) = standing(&b, "/bays/b1/participants/rex/reinstate").await;
    assert_eq!(s, 200, "{body}");
    let back = eventually(PATIENCE, || async { a.get(&w.rex, "/me").await.0 == 200 }).await;
    assert!(back, "node A still refuses the reinstated token");

    // A Bay suspension through node B closes a socket on node A.
    let mut ws = a.ws_ready(&w.brain, None).await;
    let (_, _) = ws.read_batch().await;
    let (s, body) = standing(&b, "/bays/b1/suspend").await;
    assert_eq!(s, 200, "{body}");
    ws.expect_server_close(WsClose::BaySuspended, PATIENCE)
        .await;
}

/// A held `GET …/messages/wait` ends with the refusal as soon as its
/// caller is suspended, and with 401 as soon as its token is revoked,
/// rather than when its timeout runs out (and never hands over a message
/// posted meanwhile).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_message_wait_ends_when_its_caller_is_suspended_or_revoked() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    let held = |token: String| {
        let (http, url) = (
            test_http(),
            gw.url("/api/agent-api/conversations/group/messages/wait?timeout=45"),
        );
        tokio::spawn(async move {
            let started = std::time::Instant::now();
            let res = http.get(url).bearer_auth(token).send().await.unwrap();
            let status = res.status().as_u16();
            let body: Value = res.json().await.unwrap_or(Value::Null);
            (status, body, started.elapsed())
        })
    };
    let rex = held(w.rex.clone());
    let brain = held(w.brain.clone());
    // Both waits are registered before the operator acts.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let (s, b) = standing(&gw, "/bays/b1/participants/rex/suspend").await;
    assert_eq!(s, 200, "{b}");
    gw.revoke_token(BAY, "brain").await;
    let (s, b, took) = rex.await.unwrap();
    assert_refused(s, &b, "ACCOUNT_SUSPENDED");
    assert!(took < Duration::from_secs(30), "held for {took:?}");
    let (s, b, took) = brain.await.unwrap();
    assert_error(s, &b, 401, "UNAUTHORIZED");
    assert!(took < Duration::from_secs(30), "held for {took:?}");

    // A wait of someone else is untouched: it still gets the next message.
    let scout = held(w.scout.clone());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (s, m) = gw.post_message(&w.ana, "group", "still here").await;
    assert_eq!(s, 201, "{m}");
    let (s, b, _) = scout.await.unwrap();
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["messages"][0]["content"], "still here");
}
