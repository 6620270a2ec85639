//! The drain grace (`timing.drain_grace`): after SIGTERM the node keeps
//! listening a while, answering instead of refusing, so a load balancer
//! that takes a moment to notice drops no connection; a second signal
//! stops it at once.

mod common;

use common::{assert_error, Gateway, Opts, World};
use std::time::Duration;

#[tokio::test]
async fn while_draining_the_node_answers_503_instead_of_refusing() {
    let mut gw =
        Gateway::spawn_with(Opts::default().env("SWITCHBOARD_TIMING__DRAIN_GRACE", "4s")).await;
    let w = World::create(&gw, "grace").await;
    let mut ws = gw.ws_ready(&w.rex, None).await;

    // The open session is told to go elsewhere, and so is a socket that
    // has not sent `hello` yet (it has no feed to hear the drain from).
    let mut quiet = gw.ws(&w.ana).await;
    gw.send_signal("-TERM");
    let (code, frames) = ws.expect_close(Duration::from_secs(10)).await;
    assert_eq!(code, Some(4003), "{frames:?}");
    let (code, frames) = quiet.expect_close(Duration::from_secs(2)).await;
    assert_eq!(code, Some(4003), "before hello: {frames:?}");
    assert!(
        frames.iter().any(|f| f["code"] == "GOING_AWAY"),
        "before hello: {frames:?}"
    );

    // The listener still answers: readiness says no, new sessions are
    // refused with a reason and a retry hint.
    let ready = gw
        .http
        .get(gw.url("/readyz"))
        .send()
        .await
        .expect("still listening");
    assert_eq!(ready.status().as_u16(), 503);
    let res = gw
        .http
        .get(gw.url("/api/agent-api/updates?wait=1"))
        .bearer_auth(&w.brain)
        .send()
        .await
        .expect("still listening");
    let status = res.status().as_u16();
    assert!(
        res.headers().contains_key("retry-after"),
        "{:?}",
        res.headers()
    );
    let body: serde_json::Value = res.json().await.unwrap();
    assert_error(status, &body, 503, "UNAVAILABLE");

    // Then it stops by itself.
    assert!(
        gw.wait_for_exit(Duration::from_secs(30)).is_some(),
        "still running"
    );
}

#[tokio::test]
async fn a_second_signal_cuts_the_grace_short() {
    let mut gw =
        Gateway::spawn_with(Opts::default().env("SWITCHBOARD_TIMING__DRAIN_GRACE", "10m")).await;
    gw.send_signal("-TERM");
    // Draining has begun once readiness turns 503.
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            gw.http
                .get(gw.url("/readyz"))
                .send()
                .await
                .is_ok_and(|r| r.status().as_u16() == 503)
        })
        .await
    );
    gw.send_signal("-INT");
    // Far sooner than the 10-minute grace.
    assert!(
        gw.wait_for_exit(Duration::from_secs(30)).is_some(),
        "the second signal did not stop it"
    );
}

#[tokio::test]
async fn a_held_message_wait_is_answered_at_once_when_the_node_drains() {
    let gw =
        Gateway::spawn_with(Opts::default().env("SWITCHBOARD_TIMING__DRAIN_GRACE", "10s")).await;
    let w = World::create(&gw, "waits").await;
    let (http, url, rex) = (
        gw.http.clone(),
        gw.url("/api/agent-api/conversations/dm/messages/wait?timeout=50"),
        w.rex.clone(),
    );
    let held = tokio::spawn(async move {
        let res = http.get(url).bearer_auth(rex).send().await.unwrap();
        let end = res.headers().get("switchboard-session-end").cloned();
        (
            res.status().as_u16(),
            end,
            res.json::<serde_json::Value>().await.unwrap(),
        )
    });
    // Once the wait holds (the node counts it) …
    let holds = common::eventually(Duration::from_secs(10), || async {
        gw.metric("switchboard_message_waits_held").await == 1.0
    })
    .await;
    assert!(holds, "the wait is held");
    let signalled = std::time::Instant::now();
    gw.send_signal("-TERM");
    let (status, end, body) = tokio::time::timeout(Duration::from_secs(5), held)
        .await
        .expect("answered well before the grace ends")
        .unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["messages"], serde_json::json!([]), "{body}");
    assert_eq!(end.unwrap(), "GOING_AWAY");
    assert!(signalled.elapsed() < Duration::from_secs(5));
    // A new wait during the drain is told to go elsewhere.
    let res = gw
        .http
        .get(gw.url("/api/agent-api/conversations/dm/messages/wait?timeout=5"))
        .bearer_auth(&w.rex)
        .send()
        .await
        .expect("still listening");
    let status = res.status().as_u16();
    assert!(res.headers().contains_key("retry-after"));
    let body: serde_json::Value = res.json().await.unwrap();
    assert_error(status, &body, 503, "UNAVAILABLE");
}

/// A held room FOLLOW answers at once when the node drains, as a FOLLOW
/// with nothing new (its cursor carried on), and a new FOLLOW on the
/// draining node is 503 with `Retry-After`: the client polls elsewhere.
#[tokio::test]
async fn a_drain_answers_held_room_follows_and_refuses_new_ones() {
    use common::rooms::{call_on, follow, on, opts, read, room};
    use reqwest::Method;

    let mut gw = Gateway::spawn_with(opts().env("SWITCHBOARD_TIMING__DRAIN_GRACE", "4s")).await;
    let links = room(&gw, "private").await;
    let cursor = read(&gw, &links.reader).await["cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let (http, url) = (
        gw.http.clone(),
        on(&gw, &links.reader, &format!("?cursor={cursor}&wait=25")),
    );
    let held = tokio::spawn(async move {
        let started = std::time::Instant::now();
        let res = http.get(url).send().await.expect("an answer, not a drop");
        let status = res.status().as_u16();
        let body: serde_json::Value = res.json().await.expect("a JSON answer");
        (status, body, started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(800)).await;
    gw.send_signal("-TERM");
    let (status, body, took) = held.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(took < Duration::from_secs(10), "held for {took:?}");
    assert_eq!(body["upserts"], serde_json::json!([]), "{body}");
    assert_eq!(body["tombstones"], serde_json::json!([]), "{body}");
    assert_eq!(body["has_more"], false, "{body}");
    let next = body["cursor"].as_str().expect("a cursor").to_owned();

    let res = gw
        .http
        .get(on(&gw, &links.reader, &format!("?cursor={next}&wait=25")))
        .send()
        .await
        .expect("still listening");
    assert!(
        res.headers().contains_key("retry-after"),
        "{:?}",
        res.headers()
    );
    let status = res.status().as_u16();
    let e: serde_json::Value = res.json().await.unwrap();
    assert_error(status, &e, 503, "UNAVAILABLE");
    let (status, e) = follow(&gw, &links.reader, &next, 0, 10).await;
    assert_error(status, &e, 503, "UNAVAILABLE");
    // READ still answers while the node drains.
    let (status, _) = call_on(&gw, Method::GET, &links.reader, "?format=json", None).await;
    assert_eq!(status, 200);
    assert!(
        gw.wait_for_exit(Duration::from_secs(30)).is_some(),
        "still running"
    );
}
