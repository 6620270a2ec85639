//! The cursor invariant end to end (docs/architecture.md, "The cursor
//! invariant"; protocol §11): one opaque cursor shared by `/ws` and `/updates`, at-least-once
//! delivery across reconnects and transport switches, and expiry — never
//! silent skipping — when the position is gone.

mod common;

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use switchboard_protocol::cursor::{EntryId, LogPosition};

const BAY: &str = "b1";

fn entry_of(cursor: &str) -> EntryId {
    LogPosition::decode(cursor)
        .unwrap_or_else(|e| panic!("cursor {cursor:?} does not decode: {e}"))
        .entry
}

fn id_of(v: &Value) -> String {
    v["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id: {v}"))
        .to_owned()
}

fn event_ids(events: &[Value]) -> Vec<String> {
    events.iter().map(|e| id_of(&e["message"])).collect()
}

// ---------------------------------------------------------------- the property

/// One message a writer posted (201).
#[derive(Debug, Clone)]
struct Posted {
    conversation: String,
    id: String,
    created_at: String,
}

/// What the reading client has seen.
#[derive(Default)]
struct Seen {
    ids: HashSet<String>,
    /// Per conversation, message ids in order of first receipt.
    first_receipt: BTreeMap<String, Vec<String>>,
    deliveries: usize,
}

impl Seen {
    fn record(&mut self, event: &Value) {
        assert_eq!(event["type"], "message", "{event}");
        let conversation = event["conversationId"].as_str().unwrap().to_owned();
        let id = id_of(&event["message"]);
        self.deliveries += 1;
        if self.ids.insert(id.clone()) {
            self.first_receipt.entry(conversation).or_default().push(id);
        }
    }
}

fn seed() -> u64 {
    let seed = std::env::var("RESUME_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    // Printed (and shown on failure) so a failing run can be replayed with
    // RESUME_SEED=<seed> cargo test --test resume.
    println!("RESUME_SEED={seed}");
    eprintln!("RESUME_SEED={seed}");
    seed
}

/// Posts `count` messages into `conversation` as `token`, with random
/// pauses; returns what was posted, in the order the server accepted them.
fn writer(
    gw: &Gateway,
    token: &str,
    conversation: &'static str,
    count: usize,
    seed: u64,
) -> tokio::task::JoinHandle<Vec<Posted>> {
    let (http, url, token) = (
        gw.http.clone(),
        gw.url(&format!(
            "/api/agent-api/conversations/{conversation}/messages"
        )),
        token.to_owned(),
    );
    tokio::spawn(async move {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut out = Vec::with_capacity(count);
        for i in 0..count {
            let res = http
                .post(&url)
                .bearer_auth(&token)
                .json(&json!({ "content": format!("{conversation} #{i}") }))
                .send()
                .await
                .unwrap();
            let status = res.status().as_u16();
            let body: Value = res.json().await.unwrap();
            assert_eq!(status, 201, "post into {conversation}: {body}");
            out.push(Posted {
                conversation: conversation.to_owned(),
                id: id_of(&body),
                created_at: body["createdAt"].as_str().unwrap().to_owned(),
            });
            tokio::time::sleep(Duration::from_millis(rng.random_range(5..45))).await;
        }
        out
    })
}

/// Several writers post concurrently into three conversations Rex is in
/// (and one he is not) while Rex's client hops between WebSocket sessions
/// (closed gracefully, abruptly, mid-batch, right after hello) and
/// `/updates` calls (some abandoned mid-flight), always resuming from the
/// last cursor it was given. Nothing addressed to Rex may be missing, and
/// per conversation the first receipts come in posting order. Three rounds
/// (three Bays), each with its own seed derived from the printed one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_disconnects_across_both_transports_lose_nothing() {
    let seed = seed();
    let gw = Gateway::spawn_with(
        Opts::default().env("SWITCHBOARD_TIMING__IDLE_CURSOR_INTERVAL", "200ms"),
    )
    .await;
    for round in 0..3u64 {
        random_disconnect_round(
            &gw,
            &format!("prop{round}"),
            seed.wrapping_add(round * 1000),
        )
        .await;
    }
}

async fn random_disconnect_round(gw: &Gateway, bay: &str, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let w = World::create(gw, bay).await;
    gw.create_conversation(bay, "ops", "GROUP", &["ben", "rex", "brain"])
        .await;
    gw.create_conversation(bay, "side", "GROUP", &["ana", "ben", "scout"])
        .await;

    let (s, first) = gw.updates(&w.rex, None, "1").await;
    assert_eq!(s, 200, "{first}");
    let mut cursor = first["cursor"].as_str().unwrap().to_owned();

    // 5 writers into Rex's conversations (2 share "group", 2 share "ops"),
    // 2 writers into "side" as noise Rex must never see.
    let plan: [(&str, &'static str, usize); 7] = [
        (&w.ana, "group", 50),
        (&w.brain, "group", 50),
        (&w.ana, "dm", 60),
        (&w.ben, "ops", 50),
        (&w.brain, "ops", 50),
        (&w.ben, "side", 25),
        (&w.scout, "side", 25),
    ];
    let writers: Vec<_> = plan
        .iter()
        .enumerate()
        .map(|(i, (token, conv, n))| writer(gw, token, conv, *n, seed.wrapping_add(i as u64 + 1)))
        .collect();
    let finished = Arc::new(Mutex::new(None::<Vec<Posted>>));
    let collector = {
        let finished = finished.clone();
        tokio::spawn(async move {
            let mut all = Vec::new();
            for w in writers {
                all.extend(w.await.unwrap());
            }
            *finished.lock().unwrap() = Some(all);
        })
    };

    let mut seen = Seen::default();
    let (mut ws_sessions, mut polls, mut abrupt, mut abandoned, mut mid_batch) = (0, 0, 0, 0, 0);
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let posted = finished.lock().unwrap().clone();
        if let Some(posted) = &posted {
            let missing = posted
                .iter()
                .filter(|p| p.conversation != "side" && !seen.ids.contains(&p.id))
                .count();
            if missing == 0 {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "seed {seed}: still missing messages after 40 s ({} seen)",
            seen.ids.len()
        );
        if rng.random_bool(0.6) {
            // ---- a WebSocket session
            ws_sessions += 1;
            let mut ws = gw.ws(&w.rex).await;
            ws.hello(Some(&cursor)).await;
            if rng.random_bool(0.1) {
                abrupt += 1;
                drop(ws); // gone before even reading `ready`
                continue;
            }
            let ready = ws.next_json().await;
            assert_eq!(
                ready,
                json!({"t": "ready", "cursor": cursor}),
                "seed {seed}"
            );
            let max_frames = rng.random_range(0..25);
            let until =
                tokio::time::Instant::now() + Duration::from_millis(rng.random_range(0..200));
            let mut in_batch = false;
            for _ in 0..max_frames {
                let left = until.saturating_duration_since(tokio::time::Instant::now());
                match ws.next_within(left).await {
                    WsNext::Json(f) => match f["t"].as_str() {
                        Some("event") => {
                            seen.record(&f["event"]);
                            in_batch = true;
                        }
                        Some("cursor") => {
                            let next = f["cursor"].as_str().unwrap().to_owned();
                            assert!(
                                entry_of(&next) >= entry_of(&cursor),
                                "seed {seed}: cursor went backwards"
                            );
                            cursor = next;
                            in_batch = false;
                        }
                        _ => panic!("seed {seed}: unexpected frame {f}"),
                    },
                    WsNext::Timeout => break,
                    WsNext::Closed(code) => panic!("seed {seed}: server closed with {code:?}"),
                }
            }
            mid_batch += usize::from(in_batch);
            if rng.random_bool(0.5) {
                ws.close().await;
            } else {
                abrupt += 1;
                drop(ws);
            }
        } else {
            // ---- one /updates call
            polls += 1;
            let call = gw.updates(&w.rex, Some(&cursor), "1");
            let answer = if rng.random_bool(0.25) {
                let patience = Duration::from_millis(rng.random_range(0..40));
                match tokio::time::timeout(patience, call).await {
                    Ok(a) => Some(a),
                    Err(_) => {
                        abandoned += 1;
                        None
                    }
                }
            } else {
                Some(call.await)
            };
            if let Some((s, body)) = answer {
                assert_eq!(s, 200, "seed {seed}: {body}");
                for e in body["events"].as_array().unwrap() {
                    seen.record(e);
                }
                let next = body["cursor"].as_str().unwrap().to_owned();
                assert!(
                    entry_of(&next) >= entry_of(&cursor),
                    "seed {seed}: cursor went backwards"
                );
                cursor = next;
            }
        }
    }
    collector.await.unwrap();
    let posted = finished.lock().unwrap().take().unwrap();
    println!(
        "{bay} seed {seed}: {} posted, {} deliveries, {ws_sessions} ws sessions ({abrupt} abrupt, \
         {mid_batch} mid-batch), {polls} polls ({abandoned} abandoned)",
        posted.len(),
        seen.deliveries
    );

    let mut expected: BTreeMap<String, Vec<&Posted>> = BTreeMap::new();
    for p in posted.iter().filter(|p| p.conversation != "side") {
        expected.entry(p.conversation.clone()).or_default().push(p);
    }
    let addressed: usize = expected.values().map(Vec::len).sum();
    assert!(addressed >= 200, "{addressed}");
    let noise: HashSet<&str> = posted
        .iter()
        .filter(|p| p.conversation == "side")
        .map(|p| p.id.as_str())
        .collect();
    assert!(
        seen.ids.iter().all(|id| !noise.contains(id.as_str())),
        "seed {seed}: Rex received messages of a conversation he is not in"
    );
    assert_eq!(
        seen.first_receipt.keys().collect::<Vec<_>>(),
        vec!["dm", "group", "ops"],
        "seed {seed}"
    );
    for (conversation, posts) in &mut expected {
        // Posting order: the server stamps createdAt strictly increasing per
        // conversation in the order it logs the messages.
        posts.sort_by(|a, b| a.created_at.cmp(&b.created_at));
        let want: Vec<&str> = posts.iter().map(|p| p.id.as_str()).collect();
        let got: Vec<&str> = seen.first_receipt[conversation]
            .iter()
            .map(String::as_str)
            .collect();
        let missing: Vec<&&str> = want.iter().filter(|id| !seen.ids.contains(**id)).collect();
        assert!(
            missing.is_empty(),
            "seed {seed}: {conversation} lost {missing:?}"
        );
        assert_eq!(
            got, want,
            "seed {seed}: {conversation} first receipts out of order"
        );
    }
    assert!(ws_sessions > 3 && polls > 3, "seed {seed}: too few hops");
}

// ---------------------------------------------------------------- specific paths

#[tokio::test]
async fn resume_ws_then_long_poll_then_ws_loses_nothing() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    let (_, first) = gw.updates(&w.rex, None, "1").await;
    let c0 = first["cursor"].as_str().unwrap().to_owned();

    // Missed while offline, then picked up by the socket from a poll cursor.
    let (_, m1) = gw.post_message(&w.ana, "dm", "m1").await;
    let mut ws = gw.ws_ready(&w.rex, Some(&c0)).await;
    let (events, _) = ws.read_batch().await;
    assert_eq!(event_ids(&events), vec![id_of(&m1)]);
    let (_, m2) = gw.post_message(&w.ana, "group", "m2").await;
    let (events, c2) = ws.read_batch().await;
    assert_eq!(event_ids(&events), vec![id_of(&m2)]);
    ws.close().await;

    // Missed while offline, then picked up by a poll from a socket cursor.
    let (_, m3) = gw.post_message(&w.ana, "dm", "m3").await;
    let (_, m4) = gw.post_message(&w.ben, "group", "m4").await;
    // One answer or two: a message accepted a moment ago may reach this
    // node's feed after the replay (on a loaded machine), and then comes in
    // the next answer. Together they are exactly m3, m4, in order.
    let mut got = Vec::new();
    let mut c3 = c2.clone();
    while got.len() < 2 {
        let (s, body) = gw.updates(&w.rex, Some(&c3), "5").await;
        assert_eq!(s, 200, "{body}");
        let page = event_ids(body["events"].as_array().unwrap());
        assert!(!page.is_empty(), "an empty answer with {got:?} of m3, m4");
        got.extend(page);
        c3 = body["cursor"].as_str().unwrap().to_owned();
    }
    assert_eq!(got, vec![id_of(&m3), id_of(&m4)]);

    // And back onto a socket from the poll's cursor.
    let (_, m5) = gw.post_message(&w.ana, "dm", "m5").await;
    let mut ws = gw.ws(&w.rex).await;
    ws.hello(Some(&c3)).await;
    assert_eq!(ws.next_json().await, json!({"t": "ready", "cursor": c3}));
    let (events, _) = ws.read_batch().await;
    assert_eq!(event_ids(&events), vec![id_of(&m5)]);
    let (_, m6) = gw.post_message(&w.ana, "dm", "m6").await;
    let (events, _) = ws.read_batch().await;
    assert_eq!(event_ids(&events), vec![id_of(&m6)]);
}

#[tokio::test]
async fn socket_dropped_mid_batch_redelivers_from_the_last_cursor_frame() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    let mut ws = gw.ws_ready(&w.rex, None).await;
    let (_, c0) = ws.read_batch().await;
    drop(ws);
    let mut posted = Vec::new();
    for i in 0..5 {
        let (_, m) = gw.post_message(&w.ana, "dm", &format!("offline {i}")).await;
        posted.push(id_of(&m));
    }
    // Read two events of the replay, then vanish without the cursor frame.
    let mut ws = gw.ws_ready(&w.rex, Some(&c0)).await;
    for want in &posted[..2] {
        let f = ws.next_json().await;
        assert_eq!(f["t"], "event", "{f}");
        assert_eq!(&id_of(&f["event"]["message"]), want);
    }
    drop(ws);
    // Resuming from the last cursor frame seen replays the whole batch.
    let mut ws = gw.ws_ready(&w.rex, Some(&c0)).await;
    let (events, _) = ws.read_batch().await;
    assert_eq!(event_ids(&events), posted);
}

#[tokio::test]
async fn a_long_replay_comes_in_pages_within_the_queue_limit_then_live_events_follow() {
    // Pages of about 16 KiB: 120 messages of ~1 KB make several.
    let gw = Gateway::spawn_with(
        Opts::default().env("SWITCHBOARD_LIMITS__MAX_OUTBOUND_QUEUE_BYTES", "16384"),
    )
    .await;
    let w = World::create(&gw, BAY).await;
    let mut ws = gw.ws_ready(&w.rex, None).await;
    let (_, c0) = ws.read_batch().await;
    drop(ws);
    let text = "y".repeat(1000);
    let mut posted = Vec::new();
    for i in 0..120 {
        let (s, m) = gw.post_message(&w.ana, "dm", &format!("{i} {text}")).await;
        assert_eq!(s, 201, "{m}");
        posted.push(id_of(&m));
    }
    let mut ws = gw.ws_ready(&w.rex, Some(&c0)).await;
    // The first page and its cursor frame, then a message posted while the
    // rest of the replay is still to come: it follows the replay, once.
    let (first, c1) = ws.read_batch().await;
    assert!(
        !first.is_empty() && first.len() < posted.len(),
        "the first page holds part of the replay: {} of {}",
        first.len(),
        posted.len()
    );
    let (_, live) = gw.post_message(&w.ana, "dm", "posted mid-replay").await;
    posted.push(id_of(&live));
    let mut got = event_ids(&first);
    let mut cursors = vec![c1];
    while got.len() < posted.len() {
        let (events, cursor) = ws.read_batch().await;
        got.extend(event_ids(&events));
        cursors.push(cursor);
    }
    assert_eq!(got, posted, "every event once, in log order");
    assert!(
        cursors.len() >= 5,
        "about 120 KB in pages of 16 KiB comes with a cursor frame per page: {}",
        cursors.len()
    );
    let entries: Vec<EntryId> = cursors.iter().map(|c| entry_of(c)).collect();
    assert!(
        entries.windows(2).all(|p| p[0] < p[1]),
        "each page's cursor moves forward: {entries:?}"
    );
    // A resume from a page's cursor starts right after that page.
    drop(ws);
    let mut ws = gw.ws_ready(&w.rex, Some(&cursors[0])).await;
    let (events, _) = ws.read_batch().await;
    assert_eq!(event_ids(&events)[0], posted[first.len()]);
}

#[tokio::test]
async fn replay_over_ws_across_an_add_starts_at_the_add() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    gw.create_conversation(BAY, "pair", "GROUP", &["ana", "rex"])
        .await;
    let mut ws = gw.ws_ready(&w.scout, None).await;
    let (_, c0) = ws.read_batch().await;
    ws.close().await;
    let (_, before) = gw.post_message(&w.ana, "pair", "before scout").await;
    gw.add_member(BAY, "pair", "scout").await;
    let (_, after) = gw.post_message(&w.ana, "pair", "after scout").await;
    gw.remove_member(BAY, "pair", "scout").await;
    let (_, gone) = gw.post_message(&w.ana, "pair", "scout gone").await;
    let (_, sentinel) = gw.post_message(&w.ana, "group", "sentinel").await;
    let mut ws = gw.ws_ready(&w.scout, Some(&c0)).await;
    let (events, _) = ws.read_batch().await;
    assert_eq!(
        event_ids(&events),
        vec![id_of(&after), id_of(&sentinel)],
        "not before ({}) nor after the membership ({})",
        id_of(&before),
        id_of(&gone)
    );
}

#[tokio::test]
async fn idle_socket_reconnecting_in_a_busy_bay_is_never_reset() {
    let gw = Gateway::spawn_with(
        Opts::default()
            .env("SWITCHBOARD_REPLAY_WINDOW", "2s")
            .env("SWITCHBOARD_TIMING__IDLE_CURSOR_INTERVAL", "300ms"),
    )
    .await;
    let w = World::create(&gw, BAY).await;
    let busy = writer(&gw, &w.ana, "dm", 200, 7);
    let mut ws = gw.ws_ready(&w.scout, None).await;
    let (_, mut cursor) = ws.read_batch().await;
    let started = Instant::now();
    let mut sessions = 0;
    while started.elapsed() < Duration::from_secs(5) {
        // Hold the socket ~1 s, keeping the newest cursor frame.
        let until = Instant::now() + Duration::from_secs(1);
        while Instant::now() < until {
            match ws.next_within(Duration::from_millis(100)).await {
                WsNext::Json(f) => {
                    assert_eq!(f["t"], "cursor", "scout is not in the DM: {f}");
                    cursor = f["cursor"].as_str().unwrap().to_owned();
                }
                WsNext::Timeout => {}
                WsNext::Closed(code) => panic!("closed with {code:?}"),
            }
        }
        drop(ws);
        sessions += 1;
        ws = gw.ws(&w.scout).await;
        ws.hello(Some(&cursor)).await;
        assert_eq!(
            ws.next_json().await,
            json!({"t": "ready", "cursor": cursor})
        );
        let f = ws.next_json().await;
        assert_eq!(
            f["t"],
            "cursor",
            "session {sessions} after {:?}: {f}",
            started.elapsed()
        );
        assert!(entry_of(f["cursor"].as_str().unwrap()) >= entry_of(&cursor));
        cursor = f["cursor"].as_str().unwrap().to_owned();
    }
    let posted = busy.await.unwrap();
    assert_eq!(posted.len(), 200, "the Bay was busy");
}

// ---------------------------------------------------------------- node restart

const RESTART_BOOTSTRAP: &str = r#"
[[bays]]
id = "r1"
name = "Restart Bay"

[[bays.participants]]
id = "ana"
kind = "user"
name = "Ana"
token = "bay_u_restart_ana_0000000000000000"

[[bays.participants]]
id = "rex"
kind = "agent"
name = "Rex"
token = "bay_restart_rex_00000000000000000000"

[[bays.conversations]]
id = "dm"
type = "DM"
title = "dm"
members = ["ana", "rex"]
"#;

const ANA: &str = "bay_u_restart_ana_0000000000000000";
const REX: &str = "bay_restart_rex_00000000000000000000";

/// The memory engine loses its log on exit. A cursor from before the
/// restart must be expired (409 / `reset`), never replayed against the new
/// log or silently re-based.
#[tokio::test]
async fn cursor_from_before_a_restart_is_expired_never_silently_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bootstrap.toml");
    std::fs::write(&file, RESTART_BOOTSTRAP).unwrap();
    let opts = Opts::default()
        .arg("--bootstrap")
        .arg(file.to_str().unwrap());

    let old_gw = Gateway::spawn_with(opts.clone()).await;
    let mut ws = old_gw.ws_ready(REX, None).await;
    let (_, ws_cursor) = ws.read_batch().await;
    ws.close().await;
    let (s, body) = old_gw.updates(REX, Some(&ws_cursor), "1").await;
    assert_eq!(s, 200, "{body}");
    let poll_cursor = body["cursor"].as_str().unwrap().to_owned();
    let (s, _) = old_gw
        .post_message(ANA, "dm", "lost with the old node")
        .await;
    assert_eq!(s, 201);
    drop(old_gw);

    let gw = Gateway::spawn_with(opts).await;
    // The new log gets entries (so ids past the old cursor exist).
    let (s, after) = gw.post_message(ANA, "dm", "on the new node").await;
    assert_eq!(s, 201, "bootstrap did not recreate the objects: {after}");
    for old in [&ws_cursor, &poll_cursor] {
        let (s, body) = gw.updates(REX, Some(old), "1").await;
        assert_eq!(s, 409, "{body}");
        assert_eq!(body["code"], "CURSOR_EXPIRED", "{body}");
        let mut ws = gw.ws(REX).await;
        ws.hello(Some(old)).await;
        assert_eq!(ws.next_json().await, json!({"t": "ready", "cursor": old}));
        assert_eq!(ws.next_json().await, json!({"t": "reset"}));
        let (events, _) = ws.read_batch().await;
        assert!(events.is_empty(), "{events:?}");
        // The stream runs on after the reset.
        let (_, live) = gw.post_message(ANA, "dm", "live after reset").await;
        let (events, _) = ws.read_batch().await;
        assert_eq!(event_ids(&events), vec![id_of(&live)]);
        ws.close().await;
    }
    // Recovery per the protocol: no cursor starts over at "now".
    let (s, body) = gw.updates(REX, None, "1").await;
    assert_eq!(s, 200, "{body}");
}

/// A node restarting on Redis meets its reconnect storm from memory: its
/// feed reads the last records of the log once as it starts, so a client
/// resuming from a cursor taken just before the restart is served by the
/// feed, not by a store read of its own (10,000 such reads at once are
/// what saturated Redis after a restart).
#[tokio::test]
async fn after_a_node_restart_resumes_are_served_from_the_warmed_feed() {
    let redis = RedisServer::start(false);
    let opts = Opts::default().redis(&redis.url());
    let gw = Gateway::spawn_with(opts.clone()).await;
    let w = World::create(&gw, "warm").await;
    let mut ws = gw.ws_ready(&w.rex, None).await;
    let (opened, _) = ws.read_batch().await;
    assert!(opened.is_empty(), "{opened:?}");
    let (s, before) = gw.post_message(&w.ana, "group", "before the restart").await;
    assert_eq!(s, 201, "{before}");
    let (events, cursor) = ws.read_batch().await;
    assert_eq!(event_ids(&events), vec![id_of(&before)]);
    let (s, body) = gw.updates(&w.brain, None, "0").await;
    assert_eq!(s, 200, "{body}");
    let poll_cursor = body["cursor"].as_str().unwrap().to_owned();
    drop(ws);
    // Missed by both: the log's head moves past their cursors before the
    // restart, so the new node's feed starts beyond them.
    let (s, gone) = gw.post_message(&w.ana, "group", "just before").await;
    assert_eq!(s, 201, "{gone}");
    drop(gw); // killed, as a crash or a deploy would

    let gw = Gateway::spawn_with(opts).await;
    let (s, missed) = gw.post_message(&w.ana, "group", "while away").await;
    assert_eq!(s, 201, "{missed}");
    let mut ws = gw.ws_ready(&w.rex, Some(&cursor)).await;
    let (events, _) = ws.read_batch().await;
    assert_eq!(event_ids(&events), vec![id_of(&gone), id_of(&missed)]);
    let (s, body) = gw.updates(&w.brain, Some(&poll_cursor), "0").await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(
        event_ids(body["events"].as_array().unwrap()),
        vec![id_of(&gone), id_of(&missed)]
    );
    assert_eq!(
        gw.metric("switchboard_replays_total{source=\"feed\"}")
            .await,
        2.0
    );
    assert_eq!(
        gw.metric("switchboard_replays_total{source=\"store\"}")
            .await,
        0.0
    );
    ws.close().await;
}
