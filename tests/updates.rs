//! End-to-end tests of `GET /api/agent-api/updates` (protocol §11): the
//! held long-poll, its cursor, its errors and limits, displacement,
//! revocation, Bay isolation and membership changes (over both transports).

mod common;

use common::*;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use switchboard_protocol::cursor::{EntryId, LogPosition};

const BAY: &str = "b1";
const PATIENCE: Duration = Duration::from_secs(5);

async fn world() -> (Gateway, World) {
    world_with(Opts::default()).await
}

async fn world_with(opts: Opts) -> (Gateway, World) {
    let gw = Gateway::spawn_with(opts).await;
    let w = World::create(&gw, BAY).await;
    (gw, w)
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .cloned()
        .collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn entry_of(cursor: &str) -> EntryId {
    LogPosition::decode(cursor)
        .unwrap_or_else(|e| panic!("cursor {cursor:?} does not decode: {e}"))
        .entry
}

fn cursor_of(body: &Value) -> String {
    body["cursor"]
        .as_str()
        .unwrap_or_else(|| panic!("no cursor: {body}"))
        .to_owned()
}

/// A first poll (no cursor, `wait=1`): the position "now".
async fn now_cursor(gw: &Gateway, token: &str) -> String {
    let (s, body) = gw.updates(token, None, "1").await;
    assert_eq!(s, 200, "{body}");
    cursor_of(&body)
}

fn ids(body: &Value) -> Vec<String> {
    body["events"]
        .as_array()
        .unwrap_or_else(|| panic!("no events: {body}"))
        .iter()
        .map(|e| e["message"]["id"].as_str().unwrap().to_owned())
        .collect()
}

fn assert_cursor_expired(status: u16, body: &Value) {
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"], "cursor_expired", "{body}");
    assert_eq!(body["code"], "CURSOR_EXPIRED", "{body}");
}

/// Starts a held `/updates` call in the background.
fn spawn_poll(
    gw: &Gateway,
    token: &str,
    cursor: Option<&str>,
    wait: Option<&str>,
) -> tokio::task::JoinHandle<(u16, Value, Instant)> {
    let full = spawn_poll_full(gw, token, cursor, wait);
    tokio::spawn(async move {
        let (status, body, at, _) = full.await.unwrap();
        (status, body, at)
    })
}

/// [`spawn_poll`], with the answer's `Switchboard-Session-End` header.
fn spawn_poll_full(
    gw: &Gateway,
    token: &str,
    cursor: Option<&str>,
    wait: Option<&str>,
) -> tokio::task::JoinHandle<(u16, Value, Instant, Option<String>)> {
    let (http, url, token) = (
        gw.http.clone(),
        gw.url("/api/agent-api/updates"),
        token.to_owned(),
    );
    let mut query: Vec<(String, String)> = Vec::new();
    if let Some(w) = wait {
        query.push(("wait".into(), w.into()));
    }
    if let Some(c) = cursor {
        query.push(("cursor".into(), c.into()));
    }
    tokio::spawn(async move {
        let res = http
            .get(url)
            .query(&query)
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let ended = res
            .headers()
            .get("Switchboard-Session-End")
            .map(|v| v.to_str().unwrap().to_owned());
        let body = res.json::<Value>().await.unwrap_or(Value::Null);
        (status, body, Instant::now(), ended)
    })
}

// ---------------------------------------------------------------- basics

#[tokio::test]
async fn first_call_without_cursor_starts_at_now_with_no_history() {
    let (gw, w) = world().await;
    // Ana's socket shows when this node's Bay feed has the message: "now"
    // is the feed's position, and a message accepted a moment ago may not
    // have reached it yet on a loaded machine.
    let mut ana = gw.ws_ready(&w.ana, None).await;
    ana.read_batch().await;
    let (s, old) = gw.post_message(&w.ana, "dm", "history").await;
    assert_eq!(s, 201, "{old}");
    let (events, _) = ana.read_batch().await;
    assert_eq!(events[0]["message"]["id"], old["id"]);
    let started = Instant::now();
    let (s, body) = gw.updates(&w.rex, None, "1").await;
    assert_eq!(s, 200, "{body}");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "did not hold"
    );
    assert_eq!(keys(&body), set(&["cursor", "events"]));
    assert_eq!(body["events"], json!([]), "no history on a first call");
    // And the cursor it gave does not reach back either.
    let (s, next) = gw.updates(&w.rex, Some(&cursor_of(&body)), "1").await;
    assert_eq!(s, 200);
    assert_eq!(next["events"], json!([]), "{next}");
}

#[tokio::test]
async fn wait_zero_is_clamped_to_one_second() {
    let (gw, w) = world().await;
    let c = now_cursor(&gw, &w.rex).await;
    let started = Instant::now();
    let (s, body) = gw.updates(&w.rex, Some(&c), "0").await;
    let took = started.elapsed();
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["events"], json!([]));
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(4),
        "wait=0 held {took:?}"
    );
}

#[tokio::test]
async fn unparsable_or_absent_wait_holds_like_the_default() {
    let (gw, w) = world().await;
    let rex_c = now_cursor(&gw, &w.rex).await;
    let brain_c = now_cursor(&gw, &w.brain).await;
    let started = Instant::now();
    let garbage = spawn_poll(&gw, &w.rex, Some(&rex_c), Some("abc"));
    let absent = spawn_poll(&gw, &w.brain, Some(&brain_c), None);
    gw.until_held(2).await;
    // Longer than the 1 s minimum: a poll that took `abc` as 0 or 1 answers
    // empty and leaves the held gauge meanwhile. This wait is the property
    // under test (the hold outlives 1 s), not a synchronisation.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert_eq!(
        gw.metric("switchboard_held_polls").await,
        2.0,
        "a poll stopped holding before 2 s"
    );
    let (s, posted) = gw.post_message(&w.ana, "group", "are you held?").await;
    assert_eq!(s, 201);
    for poll in [garbage, absent] {
        let (s, body, at) = tokio::time::timeout(PATIENCE, poll)
            .await
            .expect("a held poll answers when a message arrives")
            .unwrap();
        assert_eq!(s, 200, "{body}");
        assert_eq!(ids(&body), vec![posted["id"].as_str().unwrap()], "{body}");
        assert!(at.duration_since(started) >= Duration::from_millis(2000));
    }
}

#[tokio::test]
async fn answer_has_the_same_shape_with_and_without_events_and_exact_message_fields() {
    let (gw, w) = world().await;
    let c = now_cursor(&gw, &w.rex).await;
    let (s, empty) = gw.updates(&w.rex, Some(&c), "1").await;
    assert_eq!(s, 200);
    assert_eq!(keys(&empty), set(&["cursor", "events"]));
    assert_eq!(empty["events"], json!([]));

    let (s, q) = gw.post_message(&w.ana, "group", "hi @Rex").await;
    assert_eq!(s, 201, "{q}");
    let (s, r) = gw
        .post_json(
            &w.ben,
            "/conversations/group/messages",
            json!({"content": "+1", "replyToMessageId": q["id"], "metadata": {"k": 1}}),
        )
        .await;
    assert_eq!(s, 201, "{r}");
    let (s, full) = gw.updates(&w.rex, Some(&cursor_of(&empty)), "5").await;
    assert_eq!(s, 200, "{full}");
    assert_eq!(keys(&full), set(&["cursor", "events"]));
    let mut events = full["events"].as_array().unwrap().clone();
    if events.len() < 2 {
        let (s, more) = gw.updates(&w.rex, Some(&cursor_of(&full)), "5").await;
        assert_eq!(s, 200);
        events.extend(more["events"].as_array().unwrap().iter().cloned());
    }
    assert_eq!(events.len(), 2, "{events:?}");
    let message_keys = set(&[
        "id",
        "senderId",
        "senderType",
        "content",
        "createdAt",
        "metadata",
        "sender",
        "mentions",
        "replyTo",
        "shouldRespond",
    ]);
    for e in &events {
        assert_eq!(
            keys(e),
            set(&["type", "conversationId", "message", "conversation"])
        );
        assert_eq!(e["type"], "message");
        assert_eq!(e["conversationId"], "group");
        assert_eq!(keys(&e["message"]), message_keys, "{e}");
        assert_eq!(
            keys(&e["message"]["sender"]),
            set(&["id", "name", "kind", "role"])
        );
        assert_eq!(keys(&e["conversation"]), set(&["id", "type", "title"]));
        assert_eq!(e["conversation"]["type"], "GROUP");
    }
    let (first, second) = (&events[0]["message"], &events[1]["message"]);
    assert_eq!(first["id"], q["id"]);
    assert_eq!(first["senderId"], "ana");
    assert_eq!(first["senderType"], "USER");
    assert_eq!(first["content"], "hi @Rex");
    assert_eq!(first["mentions"], json!(["rex"]));
    assert_eq!(first["replyTo"], Value::Null);
    assert_eq!(first["shouldRespond"], true);
    assert_eq!(second["metadata"], json!({"k": 1}));
    assert_eq!(
        keys(&second["replyTo"]),
        set(&["id", "senderId", "senderType", "preview"])
    );
    assert_eq!(second["replyTo"]["id"], q["id"]);
    assert_eq!(second["replyTo"]["preview"], "hi @Rex");
}

#[tokio::test]
async fn held_call_returns_promptly_when_a_message_arrives() {
    let (gw, w) = world().await;
    let c = now_cursor(&gw, &w.rex).await;
    let poll = spawn_poll(&gw, &w.rex, Some(&c), Some("25"));
    gw.until_held(1).await;
    let posted_at = Instant::now();
    let (_, posted) = gw.post_message(&w.ana, "dm", "ping").await;
    let (s, body, at) = tokio::time::timeout(PATIENCE, poll)
        .await
        .expect("held poll did not return")
        .unwrap();
    assert_eq!(s, 200, "{body}");
    assert_eq!(ids(&body), vec![posted["id"].as_str().unwrap()]);
    assert!(at.duration_since(posted_at) < Duration::from_secs(2));
}

// ---------------------------------------------------------------- cursor errors

#[tokio::test]
async fn cursor_past_the_replay_buffer_is_409_cursor_expired() {
    let (gw, w) = world_with(Opts::default().env("SWITCHBOARD_REPLAY_WINDOW", "2s")).await;
    let old = now_cursor(&gw, &w.rex).await;
    gw.post_message(&w.ana, "dm", "will be trimmed").await;
    tokio::time::sleep(Duration::from_millis(2300)).await;
    gw.post_message(&w.ana, "dm", "trims the log").await;
    let (s, body) = gw.updates(&w.rex, Some(&old), "1").await;
    assert_cursor_expired(s, &body);
    // Recovery: no cursor starts over.
    let (s, body) = gw.updates(&w.rex, None, "1").await;
    assert_eq!(s, 200, "{body}");
}

#[tokio::test]
async fn malformed_cursor_is_409_cursor_expired() {
    let (gw, w) = world().await;
    let valid = now_cursor(&gw, &w.rex).await;
    let truncated = &valid[..valid.len() - 3];
    for bad in ["garbage", "u1f", "MS5hYmMuMTIz", "!!!", truncated] {
        let (s, body, _) = gw.updates_full(&w.rex, Some(bad), Some("1")).await;
        assert_cursor_expired(s, &body);
    }
}

// ---------------------------------------------------------------- rate limit

#[tokio::test]
async fn fourth_call_in_a_minute_is_429_with_retry_after() {
    let (gw, w) =
        world_with(Opts::default().env("SWITCHBOARD_LIMITS__UPDATES_PER_MINUTE", "3")).await;
    let mut cursor: Option<String> = None;
    for i in 0..3 {
        let (s, body, _) = gw.updates_full(&w.rex, cursor.as_deref(), Some("1")).await;
        assert_eq!(s, 200, "call {i}: {body}");
        cursor = Some(cursor_of(&body));
    }
    let (s, body, headers) = gw.updates_full(&w.rex, cursor.as_deref(), Some("1")).await;
    assert_eq!(s, 429, "{body}");
    assert_eq!(body["code"], "UPDATES_RATE_LIMITED", "{body}");
    let retry: u64 = headers
        .get("retry-after")
        .expect("Retry-After header")
        .to_str()
        .unwrap()
        .parse()
        .expect("Retry-After in seconds");
    assert!((1..=60).contains(&retry), "Retry-After {retry}");
    // Its own bucket: sends and other tokens are not affected.
    let (s, _) = gw.post_message(&w.rex, "dm", "sending still works").await;
    assert_eq!(s, 201);
    let (s, _, _) = gw.updates_full(&w.brain, None, Some("1")).await;
    assert_eq!(s, 200);
}

// ---------------------------------------------------------------- idle clients

#[tokio::test]
async fn idle_poller_in_a_busy_bay_keeps_advancing_and_never_expires() {
    let (gw, w) = world_with(Opts::default().env("SWITCHBOARD_REPLAY_WINDOW", "2s")).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Busy: the DM (scout is not in it) gets a message every ~50 ms.
    let writer = {
        let (http, url, ana, stop) = (
            gw.http.clone(),
            gw.url("/api/agent-api/conversations/dm/messages"),
            w.ana.clone(),
            stop.clone(),
        );
        tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let res = http
                    .post(&url)
                    .bearer_auth(&ana)
                    .json(&json!({"content": format!("busy {n}")}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(res.status().as_u16(), 201);
                n += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            n
        })
    };
    let mut cursor = now_cursor(&gw, &w.scout).await;
    let started = Instant::now();
    let mut polls = 0;
    while started.elapsed() < Duration::from_secs(5) {
        let (s, body) = gw.updates(&w.scout, Some(&cursor), "1").await;
        assert_eq!(s, 200, "poll {polls} after {:?}: {body}", started.elapsed());
        assert_eq!(body["events"], json!([]), "scout is not in the DM");
        let next = cursor_of(&body);
        assert!(
            entry_of(&next) > entry_of(&cursor),
            "poll {polls}: the cursor did not advance"
        );
        cursor = next;
        polls += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let posted = writer.await.unwrap();
    assert!(posted > 20, "the Bay was not busy: {posted} posts");
    assert!(polls >= 3, "{polls} polls");
}

// ---------------------------------------------------------------- displacement and credentials

#[tokio::test]
async fn second_concurrent_poll_displaces_the_first_which_returns_empty_at_once() {
    let (gw, w) = world().await;
    let c = now_cursor(&gw, &w.rex).await;
    let first = spawn_poll_full(&gw, &w.rex, Some(&c), Some("25"));
    gw.until_held(1).await;
    let second_at = Instant::now();
    let second = spawn_poll_full(&gw, &w.rex, Some(&c), Some("25"));
    let (s, body, at, ended) = tokio::time::timeout(PATIENCE, first)
        .await
        .expect("the displaced poll must return at once")
        .unwrap();
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["events"], json!([]));
    assert!(body["cursor"].is_string());
    // Told apart from an idle answer without guessing from timing.
    assert_eq!(ended.as_deref(), Some("DISPLACED"));
    assert!(at.duration_since(second_at) < Duration::from_secs(3));
    // The newer poll is the one held, and the one that gets the message.
    gw.until_held(1).await;
    let (_, posted) = gw.post_message(&w.ana, "dm", "for the survivor").await;
    let (s, body, _, ended) = tokio::time::timeout(PATIENCE, second)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s, 200);
    assert_eq!(ids(&body), vec![posted["id"].as_str().unwrap()]);
    assert_eq!(ended, None, "an answer with events names no session end");
    // Nor does one that ran out its wait.
    let (s, body, _, ended) = spawn_poll_full(&gw, &w.rex, None, Some("1")).await.unwrap();
    assert_eq!(s, 200, "{body}");
    assert_eq!(ended, None);
}

#[tokio::test]
async fn held_poll_answers_401_when_the_token_is_rotated() {
    let (gw, w) = world().await;
    let c = now_cursor(&gw, &w.rex).await;
    let poll = spawn_poll(&gw, &w.rex, Some(&c), Some("25"));
    gw.until_held(1).await;
    let rotated_at = Instant::now();
    let fresh = gw.rotate_token(BAY, "rex").await;
    let (s, body, at) = tokio::time::timeout(PATIENCE, poll)
        .await
        .expect("held poll must answer at once")
        .unwrap();
    assert_eq!(s, 401, "{body}");
    assert_eq!(body["code"], "UNAUTHORIZED", "{body}");
    assert!(at.duration_since(rotated_at) < Duration::from_secs(3));
    // The new token resumes from the old cursor.
    let (_, posted) = gw.post_message(&w.ana, "dm", "after rotation").await;
    let (s, body) = gw.updates(&fresh, Some(&c), "5").await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(ids(&body), vec![posted["id"].as_str().unwrap()]);
}

#[tokio::test]
async fn held_poll_answers_401_when_the_token_is_revoked() {
    let (gw, w) = world().await;
    let c = now_cursor(&gw, &w.rex).await;
    let poll = spawn_poll(&gw, &w.rex, Some(&c), Some("25"));
    gw.until_held(1).await;
    let revoked_at = Instant::now();
    gw.revoke_token(BAY, "rex").await;
    let (s, body, at) = tokio::time::timeout(PATIENCE, poll)
        .await
        .expect("held poll must answer at once")
        .unwrap();
    assert_eq!(s, 401, "{body}");
    assert!(at.duration_since(revoked_at) < Duration::from_secs(3));
    let (s, _) = gw.updates(&w.rex, Some(&c), "1").await;
    assert_eq!(s, 401);
}

// ---------------------------------------------------------------- Bay isolation

#[tokio::test]
async fn bays_are_isolated_and_a_cursor_does_not_cross_bays() {
    let gw = Gateway::spawn().await;
    // Same participant and conversation ids in both Bays.
    let a = World::create(&gw, "bay-a").await;
    let b = World::create(&gw, "bay-b").await;
    let a_cursor = now_cursor(&gw, &a.rex).await;
    let b_cursor = now_cursor(&gw, &b.rex).await;

    let b_poll = spawn_poll(&gw, &b.rex, Some(&b_cursor), Some("2"));
    let (_, a_msg) = gw.post_message(&a.ana, "dm", "bay a only").await;
    let (_, a_group) = gw.post_message(&a.ana, "group", "bay a group").await;
    let (s, body, _) = b_poll.await.unwrap();
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["events"], json!([]), "Bay B saw Bay A: {body}");
    let b_after = cursor_of(&body);

    // Bay A's own client does see them.
    let (s, body) = gw.updates(&a.rex, Some(&a_cursor), "2").await;
    assert_eq!(s, 200);
    assert_eq!(
        ids(&body),
        vec![
            a_msg["id"].as_str().unwrap(),
            a_group["id"].as_str().unwrap()
        ]
    );

    // A Bay A cursor in Bay B's hands is not addressable: 409, never a replay.
    let (s, body) = gw.updates(&b.rex, Some(&a_cursor), "1").await;
    assert_cursor_expired(s, &body);
    let mut ws = gw.ws(&b.rex).await;
    ws.hello(Some(&a_cursor)).await;
    assert_eq!(ws.next_json().await["t"], "ready");
    assert_eq!(ws.next_json().await, json!({"t": "reset"}));
    let (events, _) = ws.read_batch().await;
    assert!(events.is_empty(), "{events:?}");
    ws.close().await;

    // And Bay B's own traffic still flows to Bay B.
    let (_, b_msg) = gw.post_message(&b.ana, "dm", "bay b").await;
    let (s, body) = gw.updates(&b.rex, Some(&b_after), "2").await;
    assert_eq!(s, 200);
    assert_eq!(ids(&body), vec![b_msg["id"].as_str().unwrap()]);
}

// ---------------------------------------------------------------- membership

#[tokio::test]
async fn added_member_receives_later_messages_over_a_live_socket() {
    let (gw, w) = world().await;
    gw.create_conversation(BAY, "pair", "GROUP", &["ana", "rex"])
        .await;
    // Scout is not in the pair room.
    let mut ws = gw.ws_ready(&w.scout, None).await;
    ws.read_batch().await;
    let (_, before) = gw.post_message(&w.ana, "pair", "before the add").await;
    gw.add_member(BAY, "pair", "scout").await;
    let (_, after) = gw.post_message(&w.ana, "pair", "after the add").await;
    let (events, _) = ws.read_batch().await;
    let got: Vec<&Value> = events.iter().map(|e| &e["message"]["id"]).collect();
    assert_eq!(got, vec![&after["id"]], "before: {}", before["id"]);
    assert_eq!(events[0]["conversationId"], "pair");
}

#[tokio::test]
async fn added_member_receives_later_messages_over_updates() {
    let (gw, w) = world().await;
    gw.create_conversation(BAY, "pair", "GROUP", &["ana", "rex"])
        .await;
    let c = now_cursor(&gw, &w.scout).await;
    let poll = spawn_poll(&gw, &w.scout, Some(&c), Some("25"));
    gw.until_held(1).await;
    gw.add_member(BAY, "pair", "scout").await;
    let (_, after) = gw.post_message(&w.ana, "pair", "after the add").await;
    let (s, body, _) = tokio::time::timeout(PATIENCE, poll).await.unwrap().unwrap();
    assert_eq!(s, 200, "{body}");
    assert_eq!(ids(&body), vec![after["id"].as_str().unwrap()]);
    // And from a cursor taken before the add, by replay.
    let (s, body) = gw.updates(&w.scout, Some(&c), "1").await;
    assert_eq!(s, 200);
    assert_eq!(ids(&body), vec![after["id"].as_str().unwrap()]);
}

#[tokio::test]
async fn removed_member_receives_nothing_more_over_either_transport() {
    let (gw, w) = world().await;
    let c = now_cursor(&gw, &w.scout).await;
    let mut ws = gw.ws_ready(&w.scout, Some(&c)).await;
    ws.read_batch().await;
    gw.remove_member(BAY, "group", "scout").await;
    let (_, gone) = gw.post_message(&w.ana, "group", "scout left").await;
    // A sentinel scout does get, posted after: anything for the group
    // would have arrived before it (events are in log order).
    gw.create_conversation(BAY, "scout-room", "GROUP", &["ana", "scout"])
        .await;
    let (_, sentinel) = gw.post_message(&w.ana, "scout-room", "sentinel").await;
    let (events, cursor) = ws.read_batch().await;
    let got: Vec<&Value> = events.iter().map(|e| &e["message"]["id"]).collect();
    assert_eq!(got, vec![&sentinel["id"]], "must not get {}", gone["id"]);
    ws.close().await;
    let (s, body) = gw.updates(&w.scout, Some(&c), "1").await;
    assert_eq!(s, 200);
    assert_eq!(ids(&body), vec![sentinel["id"].as_str().unwrap()]);
    let (s, body) = gw.updates(&w.scout, Some(&cursor), "1").await;
    assert_eq!(s, 200);
    assert_eq!(body["events"], json!([]));
}

/// Replaying from a cursor taken before an add must not hand out messages
/// of the conversation logged before the add (the live feed does not).
#[tokio::test]
async fn replay_across_an_add_delivers_only_messages_after_the_add() {
    let (gw, w) = world().await;
    gw.create_conversation(BAY, "pair", "GROUP", &["ana", "rex"])
        .await;
    let c = now_cursor(&gw, &w.scout).await;
    let (_, before) = gw.post_message(&w.ana, "pair", "before scout joined").await;
    gw.add_member(BAY, "pair", "scout").await;
    let (_, after) = gw.post_message(&w.ana, "pair", "after scout joined").await;
    let (s, body) = gw.updates(&w.scout, Some(&c), "1").await;
    assert_eq!(s, 200);
    assert_eq!(
        ids(&body),
        vec![after["id"].as_str().unwrap()],
        "pre-add message {} leaked",
        before["id"]
    );
}

/// Replaying from a cursor taken while a member must still deliver what
/// was posted before the removal (at-least-once for everything addressed
/// to the participant while it was in the room).
#[tokio::test]
async fn replay_across_a_removal_still_delivers_messages_from_before_it() {
    let (gw, w) = world().await;
    let c = now_cursor(&gw, &w.scout).await;
    let (_, while_member) = gw.post_message(&w.ana, "group", "scout is here").await;
    gw.remove_member(BAY, "group", "scout").await;
    let (_, after) = gw.post_message(&w.ana, "group", "scout is gone").await;
    let (s, body) = gw.updates(&w.scout, Some(&c), "1").await;
    assert_eq!(s, 200);
    assert_eq!(
        ids(&body),
        vec![while_member["id"].as_str().unwrap()],
        "must get {} and not {}",
        while_member["id"],
        after["id"]
    );
}

// ---------------------------------------------------------------- large backlogs

#[tokio::test]
async fn a_large_backlog_comes_in_pages_without_loss_or_duplicates() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    gw.create_conversation(BAY, "ops", "GROUP", &["ben", "rex"])
        .await;
    let c0 = now_cursor(&gw, &w.rex).await;
    // 700 messages from three concurrent writers, posted while Rex is away.
    let writers: Vec<_> = [(&w.ana, "dm"), (&w.ben, "ops"), (&w.ana, "group")]
        .into_iter()
        .map(|(token, conv)| {
            let (http, url, token) = (
                gw.http.clone(),
                gw.url(&format!("/api/agent-api/conversations/{conv}/messages")),
                token.clone(),
            );
            tokio::spawn(async move {
                let mut ids = Vec::new();
                for i in 0..234 {
                    let res = http
                        .post(&url)
                        .bearer_auth(&token)
                        .json(&json!({"content": format!("backlog {i}")}))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(res.status().as_u16(), 201);
                    ids.push(
                        res.json::<Value>().await.unwrap()["id"]
                            .as_str()
                            .unwrap()
                            .to_owned(),
                    );
                }
                ids
            })
        })
        .collect();
    let mut posted = BTreeSet::new();
    for w in writers {
        posted.extend(w.await.unwrap());
    }
    let mut cursor = c0;
    let mut got: Vec<String> = Vec::new();
    let mut pages = 0;
    while got.len() < posted.len() {
        let (s, body) = gw.updates(&w.rex, Some(&cursor), "1").await;
        assert_eq!(s, 200, "{body}");
        let page = ids(&body);
        assert!(
            !page.is_empty(),
            "page {pages} empty with {} of {} received",
            got.len(),
            posted.len()
        );
        assert!(page.len() <= 500, "page of {}", page.len());
        got.extend(page);
        cursor = cursor_of(&body);
        pages += 1;
    }
    assert!(pages >= 2, "expected the backlog to be paged");
    let unique: BTreeSet<String> = got.iter().cloned().collect();
    assert_eq!(unique.len(), got.len(), "duplicates across pages");
    assert_eq!(unique, posted);
    let (s, body) = gw.updates(&w.rex, Some(&cursor), "1").await;
    assert_eq!(s, 200);
    assert_eq!(body["events"], json!([]));
}
