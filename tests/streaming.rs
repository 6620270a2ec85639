//! Streaming replies end to end against real gateway processes: drafts
//! opened with `"stream": true`, appends with their repeat / gap / overlap
//! rules, completion (routing runs once, on the final text), cancel, the
//! orphan timeout, and resuming mid-draft over `/ws` and `/updates` (one
//! snapshot, then live deltas, never duplicated text). Runs on the memory
//! engine, and on Redis with `SWITCHBOARD_TEST_STORE=redis`; the two-node
//! tests always run on Redis.

mod common;

use common::{assert_error, Gateway, Opts, RedisServer, World};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Opens a draft of `token` in `conversation`; returns its id.
async fn open_draft(gw: &Gateway, token: &str, conversation: &str, content: &str) -> String {
    let (s, b) = gw
        .post_json(
            token,
            &format!("/conversations/{conversation}/messages"),
            json!({"content": content, "stream": true}),
        )
        .await;
    assert_eq!(s, 201, "{b}");
    assert_eq!(b["state"], "streaming", "{b}");
    assert_eq!(b["shouldRespond"], false, "{b}");
    b["id"].as_str().unwrap().to_owned()
}

async fn append(
    gw: &Gateway,
    token: &str,
    conversation: &str,
    draft: &str,
    offset: u64,
    text: &str,
) -> (u16, Value) {
    gw.post_json(
        token,
        &format!("/conversations/{conversation}/messages/{draft}/append"),
        json!({"offset": offset, "text": text}),
    )
    .await
}

/// Appends `text` at `offset` and expects it accepted; returns the new length.
async fn appended(gw: &Gateway, token: &str, draft: &str, offset: u64, text: &str) -> u64 {
    let (s, b) = append(gw, token, "group", draft, offset, text).await;
    assert_eq!(s, 200, "{b}");
    b["length"].as_u64().unwrap()
}

async fn end(gw: &Gateway, token: &str, draft: &str, how: &str, body: Value) -> (u16, Value) {
    gw.post_json(
        token,
        &format!("/conversations/group/messages/{draft}/{how}"),
        body,
    )
    .await
}

/// The message `id` as REST shows it to `token`.
async fn rest_message(gw: &Gateway, token: &str, id: &str) -> Value {
    let (s, b) = gw.get(token, "/conversations/group/messages").await;
    assert_eq!(s, 200, "{b}");
    b["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == id)
        .unwrap_or_else(|| panic!("{id} not in {b}"))
        .clone()
}

/// Reads WebSocket events until one of type `until` about `draft` came.
async fn ws_until(ws: &mut common::Ws, until: &str) -> Vec<Value> {
    let mut events = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(Instant::now() < deadline, "no {until} in {events:?}");
        let (batch, _) = ws.read_batch().await;
        let done = batch.iter().any(|e| e["type"] == until);
        events.extend(batch);
        if done {
            return events;
        }
    }
}

/// Reads `/updates` from `cursor` until an event of type `until` came.
async fn updates_until(
    gw: &Gateway,
    token: &str,
    cursor: &str,
    until: &str,
) -> (Vec<Value>, String) {
    let mut events = Vec::new();
    let mut cursor = cursor.to_owned();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(Instant::now() < deadline, "no {until} in {events:?}");
        let (s, b) = gw.updates(token, Some(&cursor), "2").await;
        assert_eq!(s, 200, "{b}");
        let batch = b["events"].as_array().unwrap().clone();
        cursor = b["cursor"].as_str().unwrap().to_owned();
        let done = batch.iter().any(|e| e["type"] == until);
        events.extend(batch);
        if done {
            return (events, cursor);
        }
    }
}

/// The text a client rebuilds from draft events, checking as it goes that
/// every delta starts exactly where the text so far ends (no duplicate,
/// no gap) and that versions only grow.
fn rebuild(events: &[Value], draft: &str) -> String {
    let mut text = String::new();
    let mut version = None::<u64>;
    for e in events {
        let about = e["messageId"] == draft || e["message"]["id"] == draft;
        if !about {
            continue;
        }
        match e["type"].as_str().unwrap() {
            "message.streaming" => {
                text = e["message"]["content"].as_str().unwrap().to_owned();
                version = e["version"].as_u64();
            }
            "message.delta" => {
                let v = e["version"].as_u64().unwrap();
                assert!(
                    version.is_none_or(|seen| v > seen),
                    "version went back: {e}"
                );
                version = Some(v);
                assert_eq!(
                    e["offset"].as_u64().unwrap(),
                    text.chars().count() as u64,
                    "delta does not continue the text {text:?}: {e}"
                );
                text.push_str(e["text"].as_str().unwrap());
            }
            _ => {}
        }
    }
    text
}

#[tokio::test]
async fn a_draft_streams_deltas_and_routes_once_on_completion() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "stream").await;
    let mut brain = gw.ws_ready(&w.brain, None).await;
    let (_, start) = gw.updates(&w.ana, None, "1").await;
    let start = start["cursor"].as_str().unwrap().to_owned();

    let draft = open_draft(&gw, &w.rex, "group", "").await;
    let mut length = 0;
    for chunk in ["Thanks ", "@Bay Brain", ", the PR ", "looks good ✅"] {
        length = appended(&gw, &w.rex, &draft, length, chunk).await;
    }
    let (s, done) = end(&gw, &w.rex, &draft, "complete", json!({})).await;
    assert_eq!(s, 200, "{done}");
    assert_eq!(done["state"], "complete");
    assert_eq!(done["content"], "Thanks @Bay Brain, the PR looks good ✅");
    assert_eq!(done["mentions"], json!(["brain"]));

    // Live over /ws: the opening, deltas that rebuild the text, and the
    // completion, the only event asking Bay Brain to respond.
    let events = ws_until(&mut brain, "message.completed").await;
    assert_eq!(events[0]["type"], "message.streaming", "{events:?}");
    assert_eq!(rebuild(&events, &draft), done["content"]);
    for e in &events {
        let wakes = e["message"]["shouldRespond"] == true;
        assert_eq!(wakes, e["type"] == "message.completed", "{e}");
    }
    let completed = events.last().unwrap();
    assert_eq!(completed["message"]["content"], done["content"]);
    assert_eq!(completed["version"], done["version"]);

    // A replay over /updates of a draft that completed meanwhile skips
    // its history: the completion carries the whole message.
    let (events, _) = updates_until(&gw, &w.ana, &start, "message.completed").await;
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["message.completed"], "{events:?}");
    assert_eq!(events[0]["message"]["content"], done["content"]);
    assert_eq!(
        events[0]["message"]["shouldRespond"], false,
        "ana was not asked"
    );

    // Completing again is refused; so is appending.
    let (s, b) = end(&gw, &w.rex, &draft, "complete", json!({})).await;
    assert_error(s, &b, 409, "DRAFT_CLOSED");
    let (s, b) = append(&gw, &w.rex, "group", &draft, length, "more").await;
    assert_error(s, &b, 409, "DRAFT_CLOSED");
}

#[tokio::test]
async fn appends_follow_the_repeat_gap_and_overlap_rules() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "rules").await;
    let draft = open_draft(&gw, &w.rex, "group", "héllo").await;
    assert_eq!(appended(&gw, &w.rex, &draft, 5, " wörld").await, 11);
    // An exact repeat changes nothing.
    let (s, b) = append(&gw, &w.rex, "group", &draft, 5, " wörld").await;
    assert_eq!((s, b["length"].as_u64()), (200, Some(11)), "{b}");
    // An overlap that agrees adds only what is new.
    assert_eq!(appended(&gw, &w.rex, &draft, 8, "rld!").await, 12);
    // A gap and a disagreeing overlap are refused with the length.
    let (s, b) = append(&gw, &w.rex, "group", &draft, 20, "x").await;
    assert_error(s, &b, 409, "APPEND_GAP");
    assert_eq!(b["length"], 12);
    let (s, b) = append(&gw, &w.rex, "group", &draft, 6, "WORLD").await;
    assert_error(s, &b, 409, "APPEND_CONFLICT");
    assert_eq!(b["length"], 12);
    // Bad input gets named errors; nothing changes.
    let (s, b) = append(&gw, &w.rex, "group", &draft, 12, "").await;
    assert_error(s, &b, 400, "INVALID_CONTENT");
    let (s, b) = gw
        .post_json(
            &w.rex,
            &format!("/conversations/group/messages/{draft}/append"),
            json!({"offset": -1, "text": "x"}),
        )
        .await;
    assert_error(s, &b, 400, "INVALID_JSON");
    let (s, b) = append(&gw, &w.brain, "group", &draft, 12, "x").await;
    assert_error(s, &b, 403, "FORBIDDEN");
    let (s, b) = append(&gw, &w.rex, "group", "msg_nope", 0, "x").await;
    assert_error(s, &b, 404, "NOT_FOUND");
    // An ordinary message is no draft.
    let (_, plain) = gw.post_message(&w.rex, "group", "plain").await;
    let plain = plain["id"].as_str().unwrap();
    let (s, b) = append(&gw, &w.rex, "group", plain, 5, "x").await;
    assert_error(s, &b, 409, "DRAFT_CLOSED");
    // An open draft takes reactions, but no edit or delete.
    let path = format!("/api/agent-api/conversations/group/messages/{draft}");
    for method in [reqwest::Method::PATCH, reqwest::Method::DELETE] {
        let res = gw
            .http
            .request(method, gw.url(&path))
            .bearer_auth(&w.rex)
            .json(&json!({"content": "edited"}))
            .send()
            .await
            .unwrap();
        let s = res.status().as_u16();
        let b: Value = res.json().await.unwrap();
        assert_error(s, &b, 400, "INVALID_REQUEST");
    }
    let (s, b) = gw
        .post_json(
            &w.ana,
            &format!("/conversations/group/messages/{draft}/reactions"),
            json!({"emoji": "👀"}),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    // The reaction moved the draft's version on; appends carry on.
    assert_eq!(appended(&gw, &w.rex, &draft, 12, "?").await, 13);
    let m = rest_message(&gw, &w.ana, &draft).await;
    assert_eq!(m["content"], "héllo wörld!?");
    assert_eq!(m["state"], "streaming");
}

#[tokio::test]
async fn appends_in_one_flush_window_are_stored_together_and_all_answered() {
    let gw = Gateway::spawn_with(
        Opts::default().env("SWITCHBOARD_TIMING__DRAFT_FLUSH_INTERVAL", "300ms"),
    )
    .await;
    let w = World::create(&gw, "window").await;
    let mut ana = gw.ws_ready(&w.ana, None).await;
    let draft = open_draft(&gw, &w.rex, "group", "").await;
    // Ten appends sent at once: each names its offset.
    let chunks: Vec<String> = (0..10).map(|i| format!("chunk{i} ")).collect();
    let mut offset = 0u64;
    let mut calls = Vec::new();
    for c in &chunks {
        let (gw, rex, draft, text) = (&gw, w.rex.clone(), draft.clone(), c.clone());
        calls.push(async move { append(gw, &rex, "group", &draft, offset, &text).await });
        offset += c.chars().count() as u64;
    }
    let answers = futures_util::future::join_all(calls).await;
    for (s, b) in &answers {
        assert_eq!(*s, 200, "{b}");
    }
    let (s, _) = end(&gw, &w.rex, &draft, "complete", json!({})).await;
    assert_eq!(s, 200);
    let events = ws_until(&mut ana, "message.completed").await;
    let deltas = events
        .iter()
        .filter(|e| e["type"] == "message.delta")
        .count();
    assert!(
        deltas < chunks.len(),
        "appends were not gathered: {deltas} deltas"
    );
    assert_eq!(rebuild(&events, &draft), chunks.concat());
}

#[tokio::test]
async fn resuming_mid_draft_gives_a_snapshot_then_live_deltas_without_duplicates() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "resume").await;
    let draft = open_draft(&gw, &w.rex, "group", "Once ").await;
    let mut length = appended(&gw, &w.rex, &draft, 5, "upon ").await;
    // Bay Brain sees the start live, then drops off.
    let mut brain = gw.ws_ready(&w.brain, None).await;
    length = appended(&gw, &w.rex, &draft, length, "a ").await;
    // Idle cursor frames may come first: read up to the delta's batch.
    let (seen, cursor) = loop {
        let (batch, c) = brain.read_batch().await;
        if !batch.is_empty() {
            break (batch, c);
        }
    };
    assert_eq!(seen[0]["type"], "message.delta", "{seen:?}");
    brain.close().await;
    for chunk in ["time ", "there ", "was "] {
        length = appended(&gw, &w.rex, &draft, length, chunk).await;
    }
    // The resume replays one snapshot with everything so far.
    let mut brain = gw.ws_ready(&w.brain, Some(&cursor)).await;
    let (replayed, _) = brain.read_batch().await;
    assert_eq!(replayed.len(), 1, "{replayed:?}");
    assert_eq!(replayed[0]["type"], "message.streaming");
    assert_eq!(
        replayed[0]["message"]["content"],
        "Once upon a time there was "
    );
    // Live deltas continue from the snapshot's version.
    length = appended(&gw, &w.rex, &draft, length, "a gateway.").await;
    let (s, _) = end(&gw, &w.rex, &draft, "complete", json!({})).await;
    assert_eq!(s, 200);
    let mut events = replayed.clone();
    events.extend(ws_until(&mut brain, "message.completed").await);
    assert_eq!(
        rebuild(&events, &draft),
        "Once upon a time there was a gateway."
    );
    assert_eq!(length, 37);

    // The same over /updates, from the same old cursor, after the end:
    // just the completion, with the final text.
    let (events, _) = updates_until(&gw, &w.brain, &cursor, "message.completed").await;
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["message.completed"], "{events:?}");
    assert_eq!(
        events[0]["message"]["content"],
        "Once upon a time there was a gateway."
    );
}

#[tokio::test]
async fn a_draft_resumed_across_replay_pages_gives_one_snapshot_and_no_stale_deltas() {
    // Pages of about 4 KiB: the draft's 24 deltas of 400 characters span
    // several, and only the first page's snapshot may reach the client.
    let gw = Gateway::spawn_with(
        Opts::default().env("SWITCHBOARD_LIMITS__MAX_OUTBOUND_QUEUE_BYTES", "4096"),
    )
    .await;
    let w = World::create(&gw, "pages").await;
    let mut brain = gw.ws_ready(&w.brain, None).await;
    let (_, cursor) = brain.read_batch().await;
    brain.close().await;
    let draft = open_draft(&gw, &w.rex, "group", "").await;
    let mut length = 0;
    let mut text = String::new();
    for i in 0..24 {
        let chunk = format!("{:<400}", format!("part {i}"));
        length = appended(&gw, &w.rex, &draft, length, &chunk).await;
        text.push_str(&chunk);
    }
    let (s, sentinel) = gw.post_message(&w.ana, "group", "sentinel").await;
    assert_eq!(s, 201, "{sentinel}");
    let mut brain = gw.ws_ready(&w.brain, Some(&cursor)).await;
    let mut replayed = Vec::new();
    let mut pages = 0;
    while !replayed
        .iter()
        .any(|e: &Value| e["message"]["id"] == sentinel["id"])
    {
        let (batch, _) = brain.read_batch().await;
        replayed.extend(batch);
        pages += 1;
    }
    assert!(pages >= 2, "the replay came in one page");
    // The first page's snapshot holds the text as far as that page goes;
    // the later pages continue it with the deltas after it.
    let types: Vec<&str> = replayed
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(types[0], "message.streaming", "{types:?}");
    assert_eq!(types.last(), Some(&"message"), "{types:?}");
    assert!(
        types[1..types.len() - 1]
            .iter()
            .all(|t| *t == "message.delta"),
        "one snapshot, then deltas: {types:?}"
    );
    let versions = draft_versions(&replayed, &draft);
    assert!(versions.windows(2).all(|p| p[0] < p[1]), "{versions:?}");
    assert_eq!(versions.last(), Some(&24), "{versions:?}");
    assert_eq!(rebuild(&replayed, &draft), text);
    // Live deltas continue right after the snapshot. The completion, which
    // carries the whole text (more than the limit), is sent once the delta
    // was read: alone in the queue it fits.
    appended(&gw, &w.rex, &draft, length, "end.").await;
    let mut events = replayed.clone();
    events.extend(ws_until(&mut brain, "message.delta").await);
    let (s, _) = end(&gw, &w.rex, &draft, "complete", json!({})).await;
    assert_eq!(s, 200);
    events.extend(ws_until(&mut brain, "message.completed").await);
    assert_eq!(rebuild(&events, &draft), format!("{text}end."));
}

#[tokio::test]
async fn cancel_reaches_the_author_and_stops_its_appends() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "cancel").await;
    let mut rex = gw.ws_ready(&w.rex, None).await;
    let mut brain = gw.ws_ready(&w.brain, None).await;
    let (_, early) = gw.updates(&w.scout, None, "1").await;
    let early = early["cursor"].as_str().unwrap().to_owned();
    let draft = open_draft(&gw, &w.rex, "group", "Let me think").await;
    let length = appended(&gw, &w.rex, &draft, 12, " about it").await;
    let (s, b) = end(&gw, &w.ana, &draft, "cancel", json!({})).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["state"], "cancelled");
    // The author is asked to stop; everyone else learns it was cancelled.
    let events = ws_until(&mut rex, "message.cancel_requested").await;
    let asked = events.last().unwrap();
    assert_eq!(asked["requestedBy"], "ana");
    assert_eq!(asked["length"], length);
    let events = ws_until(&mut brain, "message.cancelled").await;
    assert_eq!(events.last().unwrap()["cancelledBy"], "ana");
    // Appends stop; cancelling again is harmless; completing is refused.
    let (s, b) = append(&gw, &w.rex, "group", &draft, length, " more").await;
    assert_error(s, &b, 409, "DRAFT_CLOSED");
    let (s, b) = end(&gw, &w.ben, &draft, "cancel", json!({})).await;
    assert_eq!((s, b["state"].as_str()), (200, Some("cancelled")), "{b}");
    let (s, b) = end(&gw, &w.rex, &draft, "complete", json!({})).await;
    assert_error(s, &b, 409, "DRAFT_CLOSED");
    // A late resumer sees the state.
    let (events, _) = updates_until(&gw, &w.scout, &early, "message.cancelled").await;
    assert_eq!(events.last().unwrap()["type"], "message.cancelled");
    let m = rest_message(&gw, &w.scout, &draft).await;
    assert_eq!(
        (m["state"].as_str(), m["content"].as_str()),
        (Some("cancelled"), Some("Let me think about it"))
    );
}

#[tokio::test]
async fn an_orphaned_draft_fails_and_a_disconnect_alone_does_not_end_it() {
    let gw =
        Gateway::spawn_with(Opts::default().env("SWITCHBOARD_TIMING__DRAFT_ORPHAN_TIMEOUT", "1s"))
            .await;
    let w = World::create(&gw, "orphan").await;
    let mut ana = gw.ws_ready(&w.ana, None).await;
    // Rex holds a session: its draft outlives the timeout.
    let rex = gw.ws_ready(&w.rex, None).await;
    let kept = open_draft(&gw, &w.rex, "group", "thinking").await;
    // Scout holds none: its draft fails once the timeout passes.
    let orphan = open_draft(&gw, &w.scout, "group", "half a tho").await;
    let events = ws_until(&mut ana, "message.failed").await;
    let failed = events.last().unwrap();
    assert_eq!(failed["messageId"], orphan.as_str());
    assert_eq!(failed["length"], 10);
    assert_eq!(rest_message(&gw, &w.ana, &orphan).await["state"], "failed");
    let (s, b) = append(&gw, &w.scout, "group", &orphan, 10, "ught").await;
    assert_error(s, &b, 409, "DRAFT_CLOSED");
    assert_eq!(rest_message(&gw, &w.ana, &kept).await["state"], "streaming");
    // Rex disconnects: the draft stays open until the timeout, and its
    // text is kept.
    rex.close().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let m = rest_message(&gw, &w.ana, &kept).await;
        if m["state"] == "failed" {
            assert_eq!(m["content"], "thinking");
            break;
        }
        assert!(Instant::now() < deadline, "never failed: {m}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_draft_keeps_its_open_state_at_the_protocol_default_timings() {
    // Default flush window and orphan timeout: a draft with a live author
    // session streams and completes like any other.
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "defaults").await;
    let mut ana = gw.ws_ready(&w.ana, None).await;
    let draft = open_draft(&gw, &w.rex, "dm", "").await;
    let (s, b) = append(&gw, &w.rex, "dm", &draft, 0, "Hi Ana").await;
    assert_eq!(s, 200, "{b}");
    let (s, b) = gw
        .post_json(
            &w.rex,
            &format!("/conversations/dm/messages/{draft}/complete"),
            json!({"content": "Hi Ana, all set."}),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    let events = ws_until(&mut ana, "message.completed").await;
    let done = events.last().unwrap();
    assert_eq!(done["message"]["content"], "Hi Ana, all set.");

    // The optional bodies of complete and cancel are JSON when present.
    let other = open_draft(&gw, &w.rex, "dm", "").await;
    for action in ["complete", "cancel"] {
        let req = gw
            .http
            .post(gw.url(&format!(
                "/api/agent-api/conversations/dm/messages/{other}/{action}"
            )))
            .bearer_auth(&w.rex)
            .header("Content-Type", "text/plain")
            .body(r#"{"content":"x"}"#);
        let (s, _, b) = gw.send_raw(req).await;
        assert_error(s, &b, 415, "UNSUPPORTED_MEDIA_TYPE");
    }
}

#[tokio::test]
async fn cancel_reaches_the_author_on_another_node_and_a_kill_loses_no_accepted_text() {
    let redis = RedisServer::start(false);
    let mut a = Gateway::spawn_with(Opts::default().redis(&redis.url())).await;
    let b = Gateway::spawn_with(Opts::default().redis(&redis.url())).await;
    let w = World::create(&a, "twonode").await;
    // Appends through both nodes continue one text.
    let draft = open_draft(&a, &w.rex, "group", "").await;
    let mut length = 0;
    for (i, chunk) in ["one ", "two ", "three ", "four "].iter().enumerate() {
        let node = if i % 2 == 0 { &a } else { &b };
        length = appended(node, &w.rex, &draft, length, chunk).await;
    }
    // Node a dies: every accepted append is there on node b.
    a.kill_now();
    let m = rest_message(&b, &w.ana, &draft).await;
    assert_eq!(m["content"], "one two three four ");
    assert_eq!(length, 19);
    length = appended(&b, &w.rex, &draft, length, "five").await;
    // Rex listens on a node of its own; Ana cancels on b.
    let c = Gateway::spawn_with(Opts::default().redis(&redis.url())).await;
    let mut rex = c.ws_ready(&w.rex, None).await;
    let (s, body) = end(&b, &w.ana, &draft, "cancel", json!({})).await;
    assert_eq!(s, 200, "{body}");
    let events = ws_until(&mut rex, "message.cancel_requested").await;
    assert_eq!(events.last().unwrap()["length"], length);
}

#[tokio::test]
async fn a_removed_member_reads_no_draft_text_written_after_removal() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "removal").await;
    let (_, start) = gw.updates(&w.ben, None, "1").await;
    let start = start["cursor"].as_str().unwrap().to_owned();
    let draft = open_draft(&gw, &w.rex, "group", "public ").await;
    let length = appended(&gw, &w.rex, &draft, 7, "part ").await;
    gw.remove_member("removal", "group", "ben").await;
    appended(&gw, &w.rex, &draft, length, "SECRET").await;
    let (s, b) = end(
        &gw,
        &w.rex,
        &draft,
        "complete",
        json!({"content": "FINAL secret"}),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    let (s, b) = gw.updates(&w.ben, Some(&start), "1").await;
    assert_eq!(s, 200, "{b}");
    let body = b.to_string();
    assert!(
        !body.contains("SECRET") && !body.contains("secret"),
        "{body}"
    );
    assert_eq!(
        rebuild(b["events"].as_array().unwrap(), &draft),
        "public part "
    );
}

#[tokio::test]
async fn a_removed_author_cannot_append_and_a_stranger_learns_nothing() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "outsider").await;
    let draft = open_draft(&gw, &w.rex, "group", "draft ").await;
    // Ben is not in the DM: a draft there and an unknown id look alike.
    let dm = open_draft(&gw, &w.rex, "dm", "private ").await;
    let (s, b) = append(&gw, &w.ben, "dm", &dm, 8, "x").await;
    assert_error(s, &b, 404, "NOT_FOUND");
    let (s, b) = append(&gw, &w.ben, "dm", "msg_unknown", 8, "x").await;
    assert_error(s, &b, 404, "NOT_FOUND");
    gw.remove_member("outsider", "group", "rex").await;
    let (s, b) = append(&gw, &w.rex, "group", &draft, 6, "after removal").await;
    assert_error(s, &b, 404, "NOT_FOUND");
    assert_eq!(rest_message(&gw, &w.ana, &draft).await["content"], "draft ");
}

#[tokio::test]
async fn a_replay_after_completion_and_an_edit_never_goes_back_in_versions() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "versions").await;
    let (_, start) = gw.updates(&w.scout, None, "1").await;
    let start = start["cursor"].as_str().unwrap().to_owned();
    let draft = open_draft(&gw, &w.rex, "group", "one").await;
    appended(&gw, &w.rex, &draft, 3, " two").await;
    let (s, _) = end(&gw, &w.rex, &draft, "complete", json!({})).await;
    assert_eq!(s, 200);
    let res = gw
        .http
        .patch(gw.url(&format!(
            "/api/agent-api/conversations/group/messages/{draft}"
        )))
        .bearer_auth(&w.rex)
        .json(&json!({"content": "EDITED"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let (events, _) = updates_until(&gw, &w.scout, &start, "message.updated").await;
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        ["message.completed", "message.updated"],
        "{events:?}"
    );
    assert_eq!(events[0]["message"]["content"], "one two");
}

#[tokio::test]
async fn waiting_for_a_reply_skips_an_open_draft_and_returns_it_completed() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "waitdraft").await;
    let (_, asked) = gw.post_message(&w.ana, "dm", "@Rex status?").await;
    let asked = asked["id"].as_str().unwrap().to_owned();
    let draft = open_draft(&gw, &w.rex, "dm", "Checking").await;
    let wait = {
        let (http, url, ana) = (
            gw.http.clone(),
            gw.url(&format!(
                "/api/agent-api/conversations/dm/messages/wait?after={asked}&timeout=20"
            )),
            w.ana.clone(),
        );
        tokio::spawn(async move {
            let res = http.get(url).bearer_auth(ana).send().await.unwrap();
            res.json::<Value>().await.unwrap()
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!wait.is_finished(), "an open draft answered the wait");
    let (s, b) = gw
        .post_json(
            &w.rex,
            &format!("/conversations/dm/messages/{draft}/complete"),
            json!({"content": "All green."}),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    let got = wait.await.unwrap();
    assert_eq!(got["messages"][0]["content"], "All green.", "{got}");
    assert_eq!(got["messages"][0]["state"], "complete");
}

/// The versions of `draft`'s events in `events`, in order.
fn draft_versions(events: &[Value], draft: &str) -> Vec<u64> {
    events
        .iter()
        .filter(|e| e["messageId"] == draft || e["message"]["id"] == draft)
        .filter_map(|e| e["version"].as_u64())
        .collect()
}

/// A replay in small pages puts a draft's snapshot in the page that holds
/// its first deltas; its later deltas lie past that page's cursor. A client
/// that takes that page, leaves, and resumes from its cursor in a new
/// session after the draft ended (so that replay sends the deltas as they
/// are) sees the draft's versions only grow.
#[tokio::test]
async fn versions_only_grow_for_a_client_that_follows_the_cursor_across_sessions() {
    let gw = Gateway::spawn_with(
        Opts::default().env("SWITCHBOARD_LIMITS__MAX_OUTBOUND_QUEUE_BYTES", "65536"),
    )
    .await;
    let w = World::create(&gw, "pages").await;
    let mut ana = gw.ws_ready(&w.ana, None).await;
    let (_, start) = ana.read_batch().await;
    ana.close().await;
    let draft = open_draft(&gw, &w.rex, "group", "").await;
    let mut length = 0;
    for i in 0..5 {
        length = appended(&gw, &w.rex, &draft, length, &format!("early {i}. ")).await;
    }
    // More than a page between the draft's early and late deltas.
    let big = "x".repeat(20_000);
    for i in 0..8 {
        let (s, m) = gw
            .post_message(&w.ben, "group", &format!("{i} {big}"))
            .await;
        assert_eq!(s, 201, "{m}");
    }
    for i in 0..10 {
        length = appended(&gw, &w.rex, &draft, length, &format!("late {i}. ")).await;
    }
    // The first session takes the first page only.
    let mut first = gw.ws_ready(&w.ana, Some(&start)).await;
    let (page, cursor) = first.read_batch().await;
    drop(first);
    let seen = draft_versions(&page, &draft);
    let held = *seen.last().expect("the first page holds the draft");
    assert!(
        !page.iter().any(|e| e["type"] == "message"
            && e["message"]["content"]
                .as_str()
                .is_some_and(|c| c.starts_with('7'))),
        "the replay came in one page; it should take several"
    );
    // The draft ends; a new session resumes from the page's cursor.
    let (s, b) = end(&gw, &w.ana, &draft, "cancel", json!({})).await;
    assert_eq!(s, 200, "{b}");
    let mut second = gw.ws_ready(&w.ana, Some(&cursor)).await;
    let mut later = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !later
        .iter()
        .any(|e: &Value| e["type"] == "message.cancelled")
    {
        assert!(Instant::now() < deadline, "no cancel in {later:?}");
        later.extend(second.read_batch().await.0);
    }
    let versions = draft_versions(&later, &draft);
    assert!(
        versions.iter().all(|v| *v > held),
        "after holding version {held}, the next session got versions {versions:?}"
    );
    assert!(
        versions.windows(2).all(|p| p[0] < p[1]),
        "versions go back within a session: {versions:?}"
    );
}
