//! `GET /api/agent-api/events` (Server-Sent Events) against a real gateway,
//! read by an independent SSE parser (`eventsource-stream`): ids are
//! cursors, `Last-Event-ID` and `?cursor=` resume, unaddressable cursors
//! get `reset`, one session per token across `/ws` and `/events`, and the
//! comment heartbeat follows `timing.sse_heartbeat`.

mod common;

use common::sse::{sse_at, stream_http, Sse, SseNext, SseOpen};
use common::*;
use futures_util::StreamExt;
use serde_json::Value;
use std::time::Duration;

const BAY: &str = "b1";

fn base(gw: &Gateway) -> String {
    format!("http://{}", gw.addr)
}

/// Opens a stream started at now; returns it and its first `id:` (the
/// cursor event's).
async fn stream_from_now(gw: &Gateway, token: &str) -> (Sse, String) {
    let mut sse = sse_at(&base(gw), token, SseOpen::default()).await.unwrap();
    let start = sse.until("cursor").await.0.id;
    (sse, start)
}

#[tokio::test]
async fn events_carry_the_updates_event_with_the_cursor_after_it_as_id() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    let mut sse = sse_at(&base(&gw), &w.rex, SseOpen::default())
        .await
        .unwrap();
    assert_eq!(
        sse.headers["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    // Started at now: the first thing is the position, as a `cursor` event.
    let first = sse.next_event().await;
    assert_eq!(first.event, "cursor", "{first:?}");
    let data: Value = serde_json::from_str(&first.data).unwrap();
    assert_eq!(data["cursor"], first.id.as_str());

    let (s, m) = gw.post_message(&w.ana, "dm", "hello over sse").await;
    assert_eq!(s, 201, "{m}");
    let got = sse.data_events(1).await;
    let (id, event) = &got[0];
    assert_eq!(event["type"], "message");
    assert_eq!(event["message"]["id"], m["id"]);
    assert_eq!(event["conversationId"], "dm");

    // The id is a cursor: /updates from it has nothing older, and the very
    // event /updates would have carried is the one the stream carried.
    let (s, b) = gw.updates(&w.brain, None, "1").await;
    assert_eq!(s, 200, "{b}");
    let (s, b) = gw.updates(&w.rex, Some(&first.id), "1").await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(&b["events"][0], event, "SSE data differs from /updates");
    let (s, b) = gw.updates(&w.rex, Some(id), "1").await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["events"], serde_json::json!([]), "{b}");
}

#[tokio::test]
async fn last_event_id_resumes_after_the_event_and_wins_over_the_query() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    let (mut sse, start) = stream_from_now(&gw, &w.rex).await;
    let mut sent = Vec::new();
    for i in 0..4 {
        let (s, m) = gw.post_message(&w.ana, "group", &format!("m{i}")).await;
        assert_eq!(s, 201, "{m}");
        sent.push(id_of(&m));
    }
    let got = sse.data_events(4).await;
    let ids: Vec<_> = got
        .iter()
        .map(|(_, e)| e["message"]["id"].clone())
        .collect();
    assert_eq!(ids, sent);
    drop(sse);

    // Two more while away.
    for i in 4..6 {
        let (s, m) = gw.post_message(&w.ana, "group", &format!("m{i}")).await;
        assert_eq!(s, 201, "{m}");
        sent.push(id_of(&m));
    }
    // Resume after the second event: the header wins over an older ?cursor=.
    let after_second = got[1].0.clone();
    let mut sse = sse_at(
        &base(&gw),
        &w.rex,
        SseOpen {
            last_event_id: Some(&after_second),
            cursor: Some(&start),
        },
    )
    .await
    .unwrap();
    let replay = sse.data_events(4).await;
    let ids: Vec<_> = replay
        .iter()
        .map(|(_, e)| e["message"]["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, sent[2..]);
    // The replay always ends with a `cursor` event, even when it names the
    // position the last replayed event's id already named.
    let end = sse.next_event().await;
    assert_eq!(
        (end.event.as_str(), end.id.as_str()),
        ("cursor", replay[3].0.as_str())
    );
    drop(sse);

    // Inside one replayed batch each id resumes right after its own event.
    let mut sse = sse_at(
        &base(&gw),
        &w.rex,
        SseOpen {
            last_event_id: Some(&replay[0].0),
            cursor: None,
        },
    )
    .await
    .unwrap();
    let rest = sse.data_events(3).await;
    let ids: Vec<_> = rest
        .iter()
        .map(|(_, e)| e["message"]["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, sent[3..]);
    drop(sse);

    // ?cursor= alone resumes the same way.
    let mut sse = sse_at(
        &base(&gw),
        &w.rex,
        SseOpen {
            last_event_id: None,
            cursor: Some(&replay[3].0),
        },
    )
    .await
    .unwrap();
    let (cursor, before) = sse.until("cursor").await;
    assert!(
        before.is_empty(),
        "nothing after the last event: {before:?}"
    );
    assert!(!cursor.id.is_empty());
}

#[tokio::test]
async fn an_unaddressable_cursor_gets_reset_and_the_stream_continues_from_now() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    let mut sse = sse_at(
        &base(&gw),
        &w.rex,
        SseOpen {
            last_event_id: Some("not-a-cursor"),
            cursor: None,
        },
    )
    .await
    .unwrap();
    let reset = sse.next_event().await;
    assert_eq!(reset.event, "reset", "{reset:?}");
    let data: Value = serde_json::from_str(&reset.data).unwrap();
    assert_eq!(data["cursor"], reset.id.as_str());
    let (s, m) = gw.post_message(&w.ana, "dm", "after the reset").await;
    assert_eq!(s, 201, "{m}");
    let got = sse.data_events(1).await;
    assert_eq!(got[0].1["message"]["id"], m["id"]);
}

/// A `Last-Event-ID` that is not ASCII (no cursor is) is an unreadable
/// cursor like any other: `reset`, not a silent start at the query's cursor
/// or at now.
#[tokio::test]
async fn a_non_ascii_last_event_id_gets_reset() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    let (first, good) = stream_from_now(&gw, &w.rex).await;
    drop(first);
    for raw in [&b"curs\xc3\xb6r"[..], &b"\xff\xfe"[..]] {
        let res = stream_http()
            .get(format!("{}/api/agent-api/events?cursor={good}", base(&gw)))
            .bearer_auth(&w.rex)
            .header(
                "Last-Event-ID",
                reqwest::header::HeaderValue::from_bytes(raw).unwrap(),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), 200);
        let mut events = eventsource_stream::Eventsource::eventsource(res.bytes_stream());
        let first = tokio::time::timeout(Duration::from_secs(30), events.next())
            .await
            .expect("an event")
            .expect("the stream is open")
            .expect("a parsable event");
        assert_eq!(first.event, "reset", "{raw:?}: {first:?}");
    }
}

#[tokio::test]
async fn a_cursor_from_a_lost_log_gets_reset() {
    // A memory engine restart loses the log: every earlier cursor is dead.
    let mut gw = Gateway::spawn_with(Opts::default().arg("--store").arg("memory")).await;
    let w = World::create(&gw, BAY).await;
    let (sse, old) = stream_from_now(&gw, &w.rex).await;
    drop(sse);
    gw.kill_now();
    let gw = Gateway::spawn_with(Opts::default().arg("--store").arg("memory")).await;
    let w = World::create(&gw, BAY).await;
    let mut sse = sse_at(
        &base(&gw),
        &w.rex,
        SseOpen {
            last_event_id: Some(&old),
            cursor: None,
        },
    )
    .await
    .unwrap();
    assert_eq!(sse.next_event().await.event, "reset");
}

#[tokio::test]
async fn a_websocket_displaces_the_stream_and_the_stream_displaces_a_websocket() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    let mut sse = sse_at(&base(&gw), &w.rex, SseOpen::default())
        .await
        .unwrap();
    sse.until("cursor").await;

    let mut ws = gw.ws_ready(&w.rex, None).await;
    let (close, _) = sse.until("close").await;
    let data: Value = serde_json::from_str(&close.data).unwrap();
    assert_eq!(data["code"], "DISPLACED", "{data}");
    assert!(matches!(
        sse.next_within(Duration::from_secs(10)).await,
        SseNext::Ended
    ));

    let mut sse = sse_at(&base(&gw), &w.rex, SseOpen::default())
        .await
        .unwrap();
    let (code, frames) = ws.expect_close(Duration::from_secs(10)).await;
    assert_eq!(code, Some(4000), "{frames:?}");
    // The newer stream is the live one.
    sse.until("cursor").await;
    let (s, m) = gw.post_message(&w.ana, "dm", "to the stream").await;
    assert_eq!(s, 201, "{m}");
    assert_eq!(sse.data_events(1).await[0].1["message"]["id"], m["id"]);
}

#[tokio::test]
async fn rotating_the_token_ends_the_stream_with_credential_revoked() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    let mut sse = sse_at(&base(&gw), &w.rex, SseOpen::default())
        .await
        .unwrap();
    sse.until("cursor").await;
    let _new = gw.rotate_token(BAY, "rex").await;
    let (close, _) = sse.until("close").await;
    let data: Value = serde_json::from_str(&close.data).unwrap();
    assert_eq!(data["code"], "CREDENTIAL_REVOKED", "{data}");
    // Reconnecting with the old token is refused with the JSON 401.
    let err = sse_at(&base(&gw), &w.rex, SseOpen::default())
        .await
        .err()
        .expect("refused");
    assert_error(err.0, &err.1, 401, "UNAUTHORIZED");
}

#[tokio::test]
async fn bad_credentials_get_a_json_401_before_any_stream() {
    let gw = Gateway::spawn().await;
    let _w = World::create(&gw, BAY).await;
    let res = stream_http()
        .get(gw.url("/api/agent-api/events"))
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let body: Value = res.json().await.unwrap();
    assert_error(status, &body, 401, "UNAUTHORIZED");
}

#[tokio::test]
async fn an_idle_stream_gets_comment_heartbeats_at_the_configured_interval() {
    let gw = Gateway::spawn_with(Opts::default().env("SWITCHBOARD_TIMING__SSE_HEARTBEAT", "200ms"))
        .await;
    let w = World::create(&gw, BAY).await;
    let res = stream_http()
        .get(gw.url("/api/agent-api/events"))
        .bearer_auth(&w.rex)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let mut body = res.bytes_stream();
    let mut text = String::new();
    let saw = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(chunk) = body.next().await {
            text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
            if text.matches(": heartbeat\n\n").count() >= 3 {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    assert!(saw, "no heartbeats: {text:?}");
}

#[tokio::test]
async fn connecting_faster_than_the_connect_bucket_gets_429_with_retry_after() {
    let gw =
        Gateway::spawn_with(Opts::default().env("SWITCHBOARD_LIMITS__UPDATES_PER_MINUTE", "2"))
            .await;
    let w = World::create(&gw, BAY).await;
    let _a = sse_at(&base(&gw), &w.rex, SseOpen::default())
        .await
        .unwrap();
    let _b = sse_at(&base(&gw), &w.rex, SseOpen::default())
        .await
        .unwrap();
    let (status, body) = sse_at(&base(&gw), &w.rex, SseOpen::default())
        .await
        .err()
        .expect("the third connect in a minute is refused");
    assert_error(status, &body, 429, "UPDATES_RATE_LIMITED");
}

#[tokio::test]
async fn a_draining_node_sends_a_final_cursor_then_close_going_away() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    let mut sse = sse_at(&base(&gw), &w.rex, SseOpen::default())
        .await
        .unwrap();
    sse.until("cursor").await;
    gw.send_signal("-TERM");
    let (close, before) = sse.until("close").await;
    let data: Value = serde_json::from_str(&close.data).unwrap();
    assert_eq!(data["code"], "GOING_AWAY", "{data}");
    assert_eq!(
        before.last().map(|e| e.event.as_str()),
        Some("cursor"),
        "{before:?}"
    );
}

#[tokio::test]
async fn a_stream_too_slow_to_keep_up_ends_with_slow_consumer_and_resumes_without_loss() {
    let gw = Gateway::spawn_with(
        Opts::default().env("SWITCHBOARD_LIMITS__MAX_OUTBOUND_QUEUE_BYTES", "262144"),
    )
    .await;
    let w = World::create(&gw, BAY).await;
    let (mut sse, start) = stream_from_now(&gw, &w.rex).await;
    // The client stops reading; the server's queue for it grows.
    let big = "x".repeat(30_000);
    let mut posted = Vec::new();
    let mut disconnected = false;
    for i in 0..1000 {
        let (s, m) = gw.post_message(&w.ana, "dm", &format!("{i} {big}")).await;
        assert_eq!(s, 201, "{m}");
        posted.push(id_of(&m));
        if i % 50 == 49
            && gw
                .metric("switchboard_slow_consumer_disconnects_total")
                .await
                >= 1.0
        {
            disconnected = true;
            break;
        }
    }
    assert!(disconnected, "the stalled stream was never given up");
    // Reading again: what was queued, then `close` SLOW_CONSUMER.
    let mut last_id = start;
    let mut got = Vec::new();
    loop {
        let e = sse.next_event().await;
        match e.event.as_str() {
            "message" => {
                let v: Value = serde_json::from_str(&e.data).unwrap();
                got.push(v["message"]["id"].as_str().unwrap().to_owned());
                last_id = e.id;
            }
            "cursor" => last_id = e.id,
            "close" => {
                let data: Value = serde_json::from_str(&e.data).unwrap();
                assert_eq!(data["code"], "SLOW_CONSUMER", "{data}");
                break;
            }
            other => panic!("unexpected {other}"),
        }
    }
    // The last id resumes the rest.
    let mut sse = sse_at(
        &base(&gw),
        &w.rex,
        SseOpen {
            last_event_id: Some(&last_id),
            cursor: None,
        },
    )
    .await
    .unwrap();
    let rest = sse.data_events(posted.len() - got.len()).await;
    got.extend(
        rest.iter()
            .map(|(_, e)| e["message"]["id"].as_str().unwrap().to_owned()),
    );
    assert_eq!(got, posted, "nothing lost, nothing twice, in order");
}

/// Streaming replies (drafts) flow through SSE with no SSE-specific code:
/// live deltas, and on a resume mid-draft one snapshot then live deltas.
#[tokio::test]
async fn streaming_drafts_flow_through_and_resume_as_one_snapshot() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    let mut brain = sse_at(&base(&gw), &w.brain, SseOpen::default())
        .await
        .unwrap();
    brain.until("cursor").await;
    let path = "/conversations/group/messages";
    let (s, d) = gw
        .post_json(
            &w.rex,
            path,
            serde_json::json!({"content": "Once ", "stream": true}),
        )
        .await;
    assert_eq!(s, 201, "{d}");
    let draft = id_of(&d);
    let append = |offset: u64, text: &'static str| {
        let draft = draft.clone();
        let gw = &gw;
        let rex = w.rex.clone();
        async move {
            let (s, b) = gw
                .post_json(
                    &rex,
                    &format!("{path}/{draft}/append"),
                    serde_json::json!({"offset": offset, "text": text}),
                )
                .await;
            assert_eq!(s, 200, "{b}");
            b["length"].as_u64().unwrap()
        }
    };
    let mut length = append(5, "upon ").await;
    // The draft's opening event, then its first delta.
    let last_id = loop {
        let (id, e) = brain.data_events(1).await.remove(0);
        if e["type"] == "message.delta" {
            break id;
        }
    };
    drop(brain);
    for chunk in ["a ", "time "] {
        length = append(length, chunk).await;
    }
    let mut brain = sse_at(
        &base(&gw),
        &w.brain,
        SseOpen {
            last_event_id: Some(&last_id),
            cursor: None,
        },
    )
    .await
    .unwrap();
    let (_, snapshot) = brain.data_events(1).await.remove(0);
    assert_eq!(snapshot["type"], "message.streaming", "{snapshot}");
    assert_eq!(snapshot["message"]["content"], "Once upon a time ");
    append(length, "there.").await;
    let (s, b) = gw
        .post_json(
            &w.rex,
            &format!("{path}/{draft}/complete"),
            serde_json::json!({}),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    let mut kinds = Vec::new();
    while kinds.last().map(String::as_str) != Some("message.completed") {
        let (_, e) = brain.data_events(1).await.remove(0);
        kinds.push(e["type"].as_str().unwrap().to_owned());
    }
    assert_eq!(kinds, ["message.delta", "message.completed"]);
}

#[tokio::test]
async fn a_long_replay_comes_in_pages_each_closed_by_a_cursor_event() {
    // Pages of about 16 KiB: 60 messages of ~1 KB make several.
    let gw = Gateway::spawn_with(
        Opts::default().env("SWITCHBOARD_LIMITS__MAX_OUTBOUND_QUEUE_BYTES", "16384"),
    )
    .await;
    let w = World::create(&gw, BAY).await;
    let (sse, start) = stream_from_now(&gw, &w.rex).await;
    drop(sse);
    let text = "z".repeat(1000);
    let mut sent = Vec::new();
    for i in 0..60 {
        let (s, m) = gw.post_message(&w.ana, "dm", &format!("{i} {text}")).await;
        assert_eq!(s, 201, "{m}");
        sent.push(id_of(&m));
    }
    let mut sse = sse_at(
        &base(&gw),
        &w.rex,
        SseOpen {
            last_event_id: Some(&start),
            ..SseOpen::default()
        },
    )
    .await
    .unwrap();
    // A message posted while the replay is under way follows it, once.
    let (_, first_page) = sse.until("cursor").await;
    assert!(
        !first_page.is_empty() && first_page.len() < sent.len(),
        "the first page holds part of the replay: {} of {}",
        first_page.len(),
        sent.len()
    );
    let (_, live) = gw.post_message(&w.ana, "dm", "posted mid-replay").await;
    sent.push(id_of(&live));
    let mut got: Vec<String> = first_page
        .iter()
        .map(|e| {
            let v: Value = serde_json::from_str(&e.data).unwrap();
            v["message"]["id"].as_str().unwrap().to_owned()
        })
        .collect();
    let mut cursor_events = 1;
    while got.len() < sent.len() {
        let e = sse.next_event().await;
        match e.event.as_str() {
            "message" => {
                let v: Value = serde_json::from_str(&e.data).unwrap();
                got.push(v["message"]["id"].as_str().unwrap().to_owned());
            }
            "cursor" => cursor_events += 1,
            other => panic!("unexpected {other}: {e:?}"),
        }
    }
    assert_eq!(got, sent, "every event once, in log order");
    assert!(
        cursor_events >= 3,
        "about 60 KB in pages of 16 KiB: a cursor event per page, saw {cursor_events}"
    );
}
