//! End-to-end tests of activity presence: `presence.updated` events over
//! `/ws` and `/updates`, and `presence` in `GET /agents`, against real
//! `switchboard` processes (one node, and two nodes on one Redis with one
//! killed). Most tests shorten the presence timings; one runs on the
//! defaults.

mod common;

use common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Presence timings shortened for tests: records every 500 ms, a 1 s
/// linger, the publisher looking every 200 ms.
fn fast() -> Opts {
    Opts::default()
        .env("SWITCHBOARD_TIMING__PRESENCE_INTERVAL", "500ms")
        .env("SWITCHBOARD_TIMING__PRESENCE_LINGER", "1s")
        .env("SWITCHBOARD_TIMING__PRESENCE_TICK", "200ms")
}

/// The shipped presence timings. The test harness turns presence events
/// off for the other suites (`presence_tick = 0s`); this sets the
/// default tick back.
fn defaults() -> Opts {
    Opts::default().env("SWITCHBOARD_TIMING__PRESENCE_TICK", "500ms")
}

/// Reads `ws` until `who` shows `online` and then, left quiet, `idle`.
async fn went_online_then_idle(ws: &mut Ws, who: &str) {
    for state in ["online", "idle"] {
        assert_eq!(next_state_of(ws, who, Duration::from_secs(10)).await, state);
    }
}

/// Reads `ws` until a `presence.updated` about `who` arrives; returns it.
async fn next_presence_of(ws: &mut Ws, who: &str, patience: Duration) -> Value {
    let deadline = tokio::time::Instant::now() + patience;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match ws.next_within(left).await {
            WsNext::Json(f)
                if f["t"] == "event"
                    && f["event"]["type"] == "presence.updated"
                    && f["event"]["participantId"] == who =>
            {
                return f["event"].clone()
            }
            WsNext::Json(_) => continue,
            other => panic!("no presence.updated about {who} within {patience:?}: {other:?}"),
        }
    }
}

/// The state of the next `presence.updated` about `who` on `ws`.
async fn next_state_of(ws: &mut Ws, who: &str, patience: Duration) -> String {
    next_presence_of(ws, who, patience).await["state"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Reads `ws` until the `message` event with id `marker`; returns the
/// `presence.updated` events seen before it.
async fn presence_until_message(ws: &mut Ws, marker: &Value) -> Vec<Value> {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match ws.next_within(left).await {
            WsNext::Json(f) if f["t"] == "event" => {
                let event = &f["event"];
                if event["type"] == "message" && event["message"]["id"] == *marker {
                    return seen;
                }
                if event["type"] == "presence.updated" {
                    seen.push(event.clone());
                }
            }
            WsNext::Json(_) => continue,
            other => panic!("the marker message never came: {other:?}; presence seen: {seen:?}"),
        }
    }
}

/// Whether `at` reads `YYYY-MM-DDTHH:MM:SS.mmmZ` (RFC 3339, UTC, ms).
fn is_utc_millis(at: &str) -> bool {
    let shape = "0000-00-00T00:00:00.000Z";
    at.len() == shape.len()
        && at.chars().zip(shape.chars()).all(|(c, s)| match s {
            '0' => c.is_ascii_digit(),
            other => c == other,
        })
}

/// Posts `content` as `token` in `conversation`; returns the message id.
async fn post(gw: &Gateway, token: &str, conversation: &str, content: &str) -> Value {
    let (s, m) = gw.post_message(token, conversation, content).await;
    assert_eq!(s, 201, "{m}");
    m["id"].clone()
}

/// `(status, presence)` of `agent` in `GET /agents` asked as `token`.
async fn listed(gw: &Gateway, token: &str, agent: &str) -> (String, String) {
    let (s, b) = gw.get(token, "/agents").await;
    assert_eq!(s, 200, "{b}");
    let a = b["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == agent)
        .unwrap_or_else(|| panic!("{agent} not listed: {b}"))
        .clone();
    (
        a["status"].as_str().unwrap().to_owned(),
        a["presence"].as_str().unwrap().to_owned(),
    )
}

/// Waits until `GET /agents` (as `token`) lists `agent` with `want`
/// (`(status, presence)`).
async fn wait_listed(gw: &Gateway, token: &str, agent: &str, want: (&str, &str)) {
    let patience = Duration::from_secs(10);
    let shown = eventually(patience, || async {
        let (status, presence) = listed(gw, token, agent).await;
        (status.as_str(), presence.as_str()) == want
    })
    .await;
    assert!(
        shown,
        "{agent} not listed as {want:?} within {patience:?}: {:?}",
        listed(gw, token, agent).await
    );
}

#[tokio::test]
async fn a_peer_sees_an_agent_come_online_over_ws_and_over_updates_and_nobody_else_does() {
    let gw = Gateway::spawn_with(fast()).await;
    let w = World::create(&gw, "b1").await;
    // Loner shares a conversation with Ana only, none with Rex.
    let loner = gw.create_participant("b1", "loner", "agent", "Loner").await;
    gw.create_conversation("b1", "solo", "DM", &["ana", "loner"])
        .await;

    let (s, first) = gw.updates(&w.ana, None, "1").await;
    assert_eq!(s, 200, "{first}");
    let mut cursor = first["cursor"].as_str().unwrap().to_owned();
    let mut brain = gw.ws_ready(&w.brain, None).await;
    let mut loner_ws = gw.ws_ready(&loner, None).await;

    let mut rex = gw.ws_ready(&w.rex, None).await;
    let event = next_presence_of(&mut brain, "rex", Duration::from_secs(10)).await;
    assert_eq!(event["state"], "online", "{event}");
    let keys: Vec<&str> = event
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    assert_eq!(keys.len(), 4, "{event}");
    assert_eq!(event["type"], "presence.updated");
    let at = event["at"].as_str().unwrap();
    assert!(is_utc_millis(at), "at is RFC 3339, UTC, milliseconds: {at}");

    // The same event reaches Ana's /updates.
    let deadline = Instant::now() + Duration::from_secs(15);
    let over_updates = loop {
        assert!(
            Instant::now() < deadline,
            "no presence.updated over /updates"
        );
        let (s, body) = gw.updates(&w.ana, Some(&cursor), "5").await;
        assert_eq!(s, 200, "{body}");
        cursor = body["cursor"].as_str().unwrap().to_owned();
        let found = body["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["type"] == "presence.updated" && e["participantId"] == "rex")
            .cloned();
        if let Some(e) = found {
            break e;
        }
    };
    assert_eq!(over_updates, event, "the same event on both transports");

    // Rex is never told of itself; Loner, who shares nothing with Rex,
    // is not told either. Markers posted after the event bound the reads.
    let marker = post(&gw, &w.ana, "group", "marker for rex").await;
    let to_rex = presence_until_message(&mut rex, &marker).await;
    assert!(
        to_rex.iter().all(|e| e["participantId"] != "rex"),
        "rex was told of itself: {to_rex:?}"
    );
    let marker = post(&gw, &w.ana, "solo", "marker for loner").await;
    let to_loner = presence_until_message(&mut loner_ws, &marker).await;
    assert!(
        to_loner.iter().all(|e| e["participantId"] != "rex"),
        "loner shares no conversation with rex: {to_loner:?}"
    );
    wait_listed(&gw, &w.brain, "rex", ("online", "online")).await;
}

#[tokio::test]
async fn a_room_over_the_presence_cap_carries_no_presence_but_a_small_shared_room_does() {
    // The group has five members; with a cap of two only the DMs count.
    let gw = Gateway::spawn_with(fast().env("SWITCHBOARD_LIMITS__PRESENCE_MAX_MEMBERS", "2")).await;
    let w = World::create(&gw, "b1").await;
    gw.create_conversation("b1", "pair", "DM", &["brain", "rex"])
        .await;
    let mut brain = gw.ws_ready(&w.brain, None).await;
    let mut ben = gw.ws_ready(&w.ben, None).await;
    let (s, first) = gw.updates(&w.scout, None, "1").await;
    assert_eq!(s, 200, "{first}");
    let mut scout_cursor = first["cursor"].as_str().unwrap().to_owned();

    let _rex = gw.ws_ready(&w.rex, None).await;
    // Brain shares the two-member "pair" with Rex: told.
    assert_eq!(
        next_state_of(&mut brain, "rex", Duration::from_secs(10)).await,
        "online"
    );
    // Ben shares only the five-member group with Rex: not told, though
    // the event was logged before the marker (Brain saw it first).
    let marker = post(&gw, &w.ana, "group", "marker for ben").await;
    let to_ben = presence_until_message(&mut ben, &marker).await;
    assert!(
        to_ben.iter().all(|e| e["participantId"] != "rex"),
        "the group is over the cap: {to_ben:?}"
    );
    // A replay judges by the same rule: Scout, also only in the group,
    // reads from a cursor taken before Rex connected through the marker.
    let mut replayed = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !replayed
        .iter()
        .any(|e: &Value| e["message"]["id"] == marker)
    {
        assert!(Instant::now() < deadline, "no marker over /updates");
        let (s, body) = gw.updates(&w.scout, Some(&scout_cursor), "5").await;
        assert_eq!(s, 200, "{body}");
        scout_cursor = body["cursor"].as_str().unwrap().to_owned();
        replayed.extend(body["events"].as_array().unwrap().iter().cloned());
    }
    assert!(
        replayed.iter().all(|e| e["type"] != "presence.updated"),
        "the group is over the cap: {replayed:?}"
    );
    // GET /agents still shows every member's presence.
    wait_listed(&gw, &w.ben, "rex", ("online", "online")).await;
}

#[tokio::test]
async fn offline_follows_a_clean_close_but_a_reconnect_inside_the_linger_emits_nothing() {
    let linger = Duration::from_secs(3);
    let gw = Gateway::spawn_with(fast().env("SWITCHBOARD_TIMING__PRESENCE_LINGER", "3s")).await;
    let w = World::create(&gw, "b1").await;
    let mut brain = gw.ws_ready(&w.brain, None).await;
    let rex = gw.ws_ready(&w.rex, None).await;
    assert_eq!(
        next_state_of(&mut brain, "rex", Duration::from_secs(10)).await,
        "online"
    );

    // Close, reconnect a second later (five publisher ticks, well inside
    // the linger), then let the first close's linger run out (a negative
    // needs the wait): had it counted, an `offline` would have been logged
    // before the marker.
    rex.close().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rex = gw.ws_ready(&w.rex, None).await;
    tokio::time::sleep(linger + Duration::from_secs(1)).await;
    let marker = post(&gw, &w.ana, "group", "marker").await;
    let seen = presence_until_message(&mut brain, &marker).await;
    assert!(
        seen.iter().all(|e| e["participantId"] != "rex"),
        "a reconnect inside the linger changed rex's presence: {seen:?}"
    );
    wait_listed(&gw, &w.brain, "rex", ("online", "online")).await;

    rex.close().await;
    assert_eq!(
        next_state_of(&mut brain, "rex", linger + Duration::from_secs(5)).await,
        "offline"
    );
    wait_listed(&gw, &w.brain, "rex", ("offline", "offline")).await;
}

/// A poll loop ends a session between every two calls, and its gaps can
/// hold a rate-limit wait: a poller stays present across gaps longer than
/// the WebSocket linger (`presence_poll_linger`), so it does not flicker
/// offline and wake every held poll of its rooms; once it stops polling it
/// goes offline after that linger.
#[tokio::test]
async fn a_poller_stays_online_across_its_loops_gaps_and_goes_offline_after_it_stops() {
    let gw =
        Gateway::spawn_with(fast().env("SWITCHBOARD_TIMING__PRESENCE_POLL_LINGER", "4s")).await;
    let w = World::create(&gw, "poll").await;
    let mut brain = gw.ws_ready(&w.brain, None).await;
    let (s, body) = gw.updates(&w.scout, None, "0").await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(
        next_state_of(&mut brain, "scout", Duration::from_secs(10)).await,
        "online"
    );
    let mut cursor = body["cursor"].as_str().unwrap().to_owned();
    // Gaps of 2 s: twice the 1 s linger of a socket, inside the poll linger.
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (s, body) = gw.updates(&w.scout, Some(&cursor), "0").await;
        assert_eq!(s, 200, "{body}");
        cursor = body["cursor"].as_str().unwrap().to_owned();
    }
    let marker = post(&gw, &w.ana, "group", "still polling").await;
    let seen = presence_until_message(&mut brain, &marker).await;
    assert!(
        seen.iter().all(|e| e["participantId"] != "scout"),
        "the poller flickered: {seen:?}"
    );
    // It stops: offline after the poll linger (4 s), not the socket's 1 s.
    let stopped = Instant::now();
    assert_eq!(
        next_state_of(&mut brain, "scout", Duration::from_secs(15)).await,
        "offline"
    );
    assert!(
        stopped.elapsed() >= Duration::from_millis(2500),
        "offline after {:?}, inside the poll linger",
        stopped.elapsed()
    );
}

#[tokio::test]
async fn typing_shows_thinking_until_the_indicator_expires() {
    let gw = Gateway::spawn_with(fast().env("SWITCHBOARD_TIMING__TYPING_TTL", "3s")).await;
    let w = World::create(&gw, "b1").await;
    let mut brain = gw.ws_ready(&w.brain, None).await;
    let _rex = gw.ws_ready(&w.rex, None).await;
    assert_eq!(
        next_state_of(&mut brain, "rex", Duration::from_secs(10)).await,
        "online"
    );

    let (s, b) = gw
        .post_json(&w.rex, "/conversations/group/typing", json!({}))
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(
        next_state_of(&mut brain, "rex", Duration::from_secs(3)).await,
        "thinking"
    );
    let (status, presence) = listed(&gw, &w.brain, "rex").await;
    assert_eq!((status.as_str(), presence.as_str()), ("online", "thinking"));
    // No stop call: it ends with the indicator's TTL.
    assert_eq!(
        next_state_of(&mut brain, "rex", Duration::from_secs(10)).await,
        "online"
    );
    wait_listed(&gw, &w.brain, "rex", ("online", "online")).await;
}

#[tokio::test]
async fn an_agents_eyes_reaction_shows_thinking_and_its_reply_ends_it() {
    // A typing TTL far beyond the test: only the reply can end thinking.
    let gw = Gateway::spawn_with(fast().env("SWITCHBOARD_TIMING__TYPING_TTL", "60s")).await;
    let w = World::create(&gw, "b1").await;
    let mut brain = gw.ws_ready(&w.brain, None).await;
    let _rex = gw.ws_ready(&w.rex, None).await;
    assert_eq!(
        next_state_of(&mut brain, "rex", Duration::from_secs(10)).await,
        "online"
    );

    let question = post(&gw, &w.ana, "group", "@Rex can you look?").await;
    let question = question.as_str().unwrap();
    let (s, b) = gw
        .post_json(
            &w.rex,
            &format!("/conversations/group/messages/{question}/reactions"),
            json!({"emoji": "👀"}),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(
        next_state_of(&mut brain, "rex", Duration::from_secs(3)).await,
        "thinking"
    );
    post(&gw, &w.rex, "group", "on it").await;
    assert_eq!(
        next_state_of(&mut brain, "rex", Duration::from_secs(5)).await,
        "online"
    );
}

#[tokio::test]
async fn a_quiet_agent_turns_idle_and_a_send_brings_it_back_online() {
    let gw = Gateway::spawn_with(fast().env("SWITCHBOARD_TIMING__PRESENCE_IDLE_AFTER", "2s")).await;
    let w = World::create(&gw, "b1").await;
    let mut brain = gw.ws_ready(&w.brain, None).await;
    let _rex = gw.ws_ready(&w.rex, None).await;
    went_online_then_idle(&mut brain, "rex").await;
    // Idle keeps the session-based `status`.
    let (status, presence) = listed(&gw, &w.brain, "rex").await;
    assert_eq!((status.as_str(), presence.as_str()), ("online", "idle"));

    post(&gw, &w.rex, "group", "back").await;
    assert_eq!(
        next_state_of(&mut brain, "rex", Duration::from_secs(5)).await,
        "online"
    );
}

#[tokio::test]
async fn on_the_default_timings_offline_follows_a_clean_close_within_three_seconds() {
    let gw = Gateway::spawn_with(defaults()).await;
    let w = World::create(&gw, "b1").await;
    let mut brain = gw.ws_ready(&w.brain, None).await;
    let rex = gw.ws_ready(&w.rex, None).await;
    assert_eq!(
        next_state_of(&mut brain, "rex", Duration::from_secs(10)).await,
        "online"
    );
    wait_listed(&gw, &w.brain, "rex", ("online", "online")).await;

    let closed = Instant::now();
    rex.close().await;
    assert_eq!(
        next_state_of(&mut brain, "rex", Duration::from_secs(10)).await,
        "offline"
    );
    // The rule is 3 s (a 2.5 s linger, then the publisher's wake-up at
    // its end); the extra second is for this test's own reads on a busy
    // machine.
    let took = closed.elapsed();
    assert!(
        took < Duration::from_secs(4),
        "offline took {took:?} after a clean close"
    );
}

/// An SSE client that closes its connection shows offline as fast as a
/// WebSocket's clean close (3 s), not at the next heartbeat (20 s): the
/// node notices the peer's close itself, without writing to it.
#[tokio::test]
async fn on_the_default_timings_offline_follows_an_sse_close_within_three_seconds() {
    let gw = Gateway::spawn_with(defaults()).await;
    let w = World::create(&gw, "b1").await;
    let mut brain = gw.ws_ready(&w.brain, None).await;
    let mut sse = common::sse::sse_at(
        &format!("http://{}", gw.addr),
        &w.rex,
        common::sse::SseOpen::default(),
    )
    .await
    .unwrap();
    sse.until("cursor").await;
    assert_eq!(
        next_state_of(&mut brain, "rex", Duration::from_secs(10)).await,
        "online"
    );
    wait_listed(&gw, &w.brain, "rex", ("online", "online")).await;

    let closed = Instant::now();
    drop(sse);
    assert_eq!(
        next_state_of(&mut brain, "rex", Duration::from_secs(30)).await,
        "offline"
    );
    let took = closed.elapsed();
    assert!(
        took < Duration::from_secs(4),
        "offline took {took:?} after the SSE client closed"
    );
    let (status, presence) = listed(&gw, &w.brain, "rex").await;
    assert_eq!((status.as_str(), presence.as_str()), ("offline", "offline"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_node_that_holds_an_agents_session_and_publishes_shows_it_offline_elsewhere() {
    let redis = RedisServer::start(false);
    let mut a = Gateway::spawn_with(defaults().redis(&redis.url())).await;
    let b = Gateway::spawn_with(defaults().redis(&redis.url())).await;
    let w = World::create(&a, "b1").await;

    // Rex connects to node A first: A's feed is the only one of the Bay,
    // so A takes the presence lease and publishes.
    let _rex = a.ws_ready(&w.rex, None).await;
    let lease_taken = eventually(Duration::from_secs(10), || async {
        redis
            .cmd(&["GET", "sb:lease:presence:b1"])
            .starts_with("n_")
    })
    .await;
    assert!(lease_taken, "nobody took the presence lease");
    let publisher = redis.cmd(&["GET", "sb:lease:presence:b1"]);
    wait_listed(&b, &w.brain, "rex", ("online", "online")).await;

    let mut brain = b.ws_ready(&w.brain, None).await;
    let killed = Instant::now();
    a.kill_now();
    // Brain may connect before node A logged Rex's `online`: then that
    // comes first.
    let mut state = next_state_of(&mut brain, "rex", Duration::from_secs(20)).await;
    if state == "online" {
        state = next_state_of(&mut brain, "rex", Duration::from_secs(20)).await;
    }
    assert_eq!(state, "offline");
    // The rule is 10 s: a record lives 6 s, the lease 2 s.
    let took = killed.elapsed();
    assert!(took < Duration::from_secs(11), "offline took {took:?}");
    assert_ne!(
        redis.cmd(&["GET", "sb:lease:presence:b1"]),
        publisher,
        "node B took the presence lease over"
    );
    let (status, presence) = listed(&b, &w.brain, "rex").await;
    assert_eq!((status.as_str(), presence.as_str()), ("offline", "offline"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_moving_off_a_draining_node_within_the_linger_emits_nothing() {
    let redis = RedisServer::start(false);
    let a = Gateway::spawn_with(defaults().redis(&redis.url())).await;
    let b = Gateway::spawn_with(defaults().redis(&redis.url())).await;
    let w = World::create(&a, "b1").await;
    let mut brain = b.ws_ready(&w.brain, None).await;
    let mut rex = a.ws_ready(&w.rex, None).await;
    assert_eq!(
        next_state_of(&mut brain, "rex", Duration::from_secs(10)).await,
        "online"
    );

    // Node A drains: Rex's socket closes with 4003 and it reconnects to B
    // a second later (longer than the publisher's tick), within the 2.5 s
    // linger.
    a.send_signal("-TERM");
    let (code, _) = rex.expect_close(Duration::from_secs(10)).await;
    assert_eq!(code, Some(4003));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let _rex = b.ws_ready(&w.rex, None).await;
    // Past the linger (a negative needs the wait), a marker bounds the read.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let marker = post(&b, &w.ana, "group", "marker").await;
    let seen = presence_until_message(&mut brain, &marker).await;
    assert!(
        seen.iter().all(|e| e["participantId"] != "rex"),
        "moving off a draining node changed rex's presence: {seen:?}"
    );
    wait_listed(&b, &w.brain, "rex", ("online", "online")).await;
}

/// Connecting counts as activity, a reconnect within the linger does
/// not, whichever node it goes through: an idle agent that reconnects
/// through another node stays idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_agent_reconnecting_through_another_node_within_the_linger_stays_idle() {
    let redis = RedisServer::start(false);
    let opts = || {
        fast()
            .env("SWITCHBOARD_TIMING__PRESENCE_IDLE_AFTER", "2s")
            .redis(&redis.url())
    };
    let a = Gateway::spawn_with(opts()).await;
    let b = Gateway::spawn_with(opts()).await;
    let w = World::create(&a, "b1").await;
    let mut brain = b.ws_ready(&w.brain, None).await;
    let rex = a.ws_ready(&w.rex, None).await;
    went_online_then_idle(&mut brain, "rex").await;

    // Off node A, onto node B 300 ms later, inside A's 1 s linger; then
    // past the linger (a negative needs the wait) a marker bounds the read.
    rex.close().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _rex = b.ws_ready(&w.rex, None).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let marker = post(&b, &w.ana, "group", "marker").await;
    let seen = presence_until_message(&mut brain, &marker).await;
    assert!(
        seen.iter().all(|e| e["participantId"] != "rex"),
        "a reconnect through another node changed rex's presence: {seen:?}"
    );
    let (status, presence) = listed(&b, &w.brain, "rex").await;
    assert_eq!((status.as_str(), presence.as_str()), ("online", "idle"));
}

#[tokio::test]
async fn an_open_draft_shows_streaming_until_it_completes() {
    let gw = Gateway::spawn_with(fast()).await;
    let w = World::create(&gw, "b9").await;
    let mut brain = gw.ws_ready(&w.brain, None).await;
    let _rex = gw.ws_ready(&w.rex, None).await;
    assert_eq!(
        next_state_of(&mut brain, "rex", Duration::from_secs(10)).await,
        "online"
    );
    let (s, draft) = gw
        .post_json(
            &w.rex,
            "/conversations/group/messages",
            json!({"content": "", "stream": true}),
        )
        .await;
    assert_eq!(s, 201, "{draft}");
    let id = draft["id"].as_str().unwrap();
    assert_eq!(
        next_state_of(&mut brain, "rex", Duration::from_secs(5)).await,
        "streaming"
    );
    let (status, presence) = listed(&gw, &w.brain, "rex").await;
    assert_eq!(
        (status.as_str(), presence.as_str()),
        ("online", "streaming")
    );
    let (s, b) = gw
        .post_json(
            &w.rex,
            &format!("/conversations/group/messages/{id}/complete"),
            json!({"content": "done"}),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(
        next_state_of(&mut brain, "rex", Duration::from_secs(5)).await,
        "online"
    );
    wait_listed(&gw, &w.brain, "rex", ("online", "online")).await;
}

/// Six connects of one token at once, each sending `hello` and hanging up
/// at once, round after round: however the openings and hang-ups
/// interleave, no session stays attached for nobody. The agent goes
/// offline after the linger, and its open draft fails as an orphan.
#[tokio::test]
async fn a_storm_of_connects_that_hang_up_at_once_leaves_no_ghost_session() {
    let gw =
        Gateway::spawn_with(fast().env("SWITCHBOARD_TIMING__DRAFT_ORPHAN_TIMEOUT", "2s")).await;
    let w = World::create(&gw, "b10").await;
    let mut ana = gw.ws_ready(&w.ana, None).await;
    ana.read_batch().await;
    let (s, draft) = gw
        .post_json(
            &w.rex,
            "/conversations/group/messages",
            json!({"content": "", "stream": true}),
        )
        .await;
    assert_eq!(s, 201, "{draft}");
    for _ in 0..25 {
        let storm = (0..6).map(|_| async {
            let mut ws = gw.ws(&w.rex).await;
            ws.hello(None).await;
            // Dropped: the TCP connection ends without a close handshake.
        });
        futures_util::future::join_all(storm).await;
    }
    let patience = Duration::from_secs(15);
    let offline = eventually(patience, || async {
        listed(&gw, &w.brain, "rex").await.0 == "offline"
    })
    .await;
    assert!(
        offline,
        "rex still listed {:?} after the storm; sessions: {}",
        listed(&gw, &w.brain, "rex").await,
        gw.metric("switchboard_connections").await
    );
    let deadline = Instant::now() + patience;
    loop {
        assert!(Instant::now() < deadline, "the draft never failed");
        let (batch, _) = ana.read_batch().await;
        if let Some(failed) = batch.iter().find(|e| e["type"] == "message.failed") {
            assert_eq!(failed["messageId"], draft["id"], "{failed}");
            break;
        }
    }
}

/// `total_net_input_bytes` of `redis` (its `INFO stats`): what its
/// clients sent it.
fn redis_input_bytes(redis: &RedisServer) -> u64 {
    let info = redis.cmd(&["INFO", "stats"]);
    info.lines()
        .find_map(|l| l.strip_prefix("total_net_input_bytes:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("total_net_input_bytes in INFO stats")
}

/// A node's presence record is written per participant: with 1,000
/// sessions on the node, an interval sends Redis its heartbeat and the
/// entries that changed, not all 1,000 entries. What readers see stays
/// the same: every session is online in `GET /agents`.
#[tokio::test]
async fn presence_intervals_write_only_what_changed() {
    const SESSIONS: usize = 1_000;
    const INTERVAL: Duration = Duration::from_millis(500);
    const WINDOW: Duration = Duration::from_secs(5);
    let redis = RedisServer::start(false);
    let gw = Gateway::spawn_with(
        Opts::default()
            .redis(&redis.url())
            .env("SWITCHBOARD_TIMING__PRESENCE_INTERVAL", "500ms")
            .env("SWITCHBOARD_TIMING__PRESENCE_LINGER", "1s")
            .env("SWITCHBOARD_TIMING__WATERMARK_INTERVAL", "30s")
            .env("SWITCHBOARD_LIMITS__MAX_CONNECTIONS_PER_IP", "5000"),
    )
    .await;
    let w = World::create(&gw, "crowd").await;
    let mut sockets = Vec::with_capacity(SESSIONS);
    for i in 0..SESSIONS {
        let token = gw
            .create_participant("crowd", &format!("a{i:04}"), "agent", &format!("A {i}"))
            .await;
        sockets.push(gw.ws_ready(&token, None).await);
    }
    // Readers see every session: the online count of the Bay's agents.
    let online = || async {
        let (s, agents) = gw.get(&w.ana, "/agents").await;
        assert_eq!(s, 200, "{agents}");
        agents["agents"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|x| x["id"].as_str().is_some_and(|id| id.starts_with('a')))
                    .filter(|x| x["status"] == "online" && x["presence"] == "online")
                    .count()
            })
            .unwrap_or(0)
    };
    let all = eventually(Duration::from_secs(20), || async {
        online().await == SESSIONS
    })
    .await;
    assert!(all, "{} of {SESSIONS} online", online().await);
    tokio::time::sleep(Duration::from_secs(2)).await;

    let intervals = WINDOW.as_secs_f64() / INTERVAL.as_secs_f64();
    let before = redis_input_bytes(&redis);
    tokio::time::sleep(WINDOW).await;
    let quiet = (redis_input_bytes(&redis) - before) as f64 / intervals;
    // One session ends within the next window: one entry changes.
    let before = redis_input_bytes(&redis);
    sockets.pop().unwrap().close().await;
    tokio::time::sleep(WINDOW).await;
    let one_changed = (redis_input_bytes(&redis) - before) as f64 / intervals;
    println!(
        "{SESSIONS} sessions: {quiet:.0} bytes to Redis per presence interval unchanged, \
         {one_changed:.0} with one session ending"
    );
    // A whole record is over 100 bytes per session (over 100 KB here).
    for (what, bytes) in [("unchanged", quiet), ("one changed", one_changed)] {
        assert!(
            bytes < 8_000.0,
            "{what}: {bytes:.0} bytes per interval for {SESSIONS} sessions"
        );
    }
    let gone = format!("a{:04}", SESSIONS - 1);
    assert_eq!(
        listed(&gw, &w.ana, &gone).await,
        ("offline".to_owned(), "offline".to_owned())
    );
    assert_eq!(online().await, SESSIONS - 1);
}
