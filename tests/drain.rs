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
    tokio::time::sleep(Duration::from_millis(500)).await;
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
