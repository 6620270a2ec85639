//! Protection limits: connections per IP and per node, and the bounded
//! outbound queue that disconnects a consumer too slow to keep up without
//! losing anything it can resume.

mod common;

use common::*;
use serde_json::Value;
use std::time::Duration;
use switchboard_protocol::error::WsClose;

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

async fn metric(gw: &Gateway, name: &str) -> f64 {
    gw.metric(name).await
}

#[tokio::test]
async fn connections_beyond_the_per_ip_cap_get_429_and_a_freed_slot_is_reusable() {
    let gw =
        Gateway::spawn_with(Opts::default().env("SWITCHBOARD_LIMITS__MAX_CONNECTIONS_PER_IP", "2"))
            .await;
    let w = World::create(&gw, "ip").await;
    let a = gw.ws_ready(&w.rex, None).await;
    let _b = gw.ws_ready(&w.brain, None).await;
    match gw.ws_try_full(WsAuth::Header(&w.scout)).await {
        Err((s, retry, body)) => {
            assert_error(s, &body, 429, "RATE_LIMITED");
            assert!(retry.is_some(), "per-IP 429 without Retry-After: {body}");
        }
        Ok(_) => panic!("a third connection from one address was admitted"),
    }
    // A held /updates counts too, and is refused the same way.
    let (s, body, headers) = gw.updates_full(&w.scout, None, Some("1")).await;
    assert_error(s, &body, 429, "RATE_LIMITED");
    assert!(headers.contains_key("retry-after"), "{headers:?}");
    a.close().await;
    let freed = eventually(Duration::from_secs(5), || async {
        gw.ws_try(WsAuth::Header(&w.scout)).await.is_ok()
    })
    .await;
    assert!(freed, "closing a connection must free its slot");
}

#[tokio::test]
async fn connections_beyond_the_node_cap_get_503_with_retry_after() {
    let gw =
        Gateway::spawn_with(Opts::default().env("SWITCHBOARD_LIMITS__MAX_CONNECTIONS", "1")).await;
    let w = World::create(&gw, "node").await;
    let _a = gw.ws_ready(&w.rex, None).await;
    let res = gw
        .http
        .get(gw.url("/api/agent-api/updates?wait=1"))
        .bearer_auth(&w.brain)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 503);
    assert!(res.headers().get("retry-after").is_some());
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["code"], "UNAVAILABLE");
}

#[tokio::test]
async fn a_consumer_too_slow_to_keep_up_is_disconnected_and_resumes_without_loss() {
    let gw = Gateway::spawn_with(
        Opts::default().env("SWITCHBOARD_LIMITS__MAX_OUTBOUND_QUEUE_BYTES", "262144"),
    )
    .await;
    let w = World::create(&gw, "slow").await;
    // The slow client reads ready and its first cursor, then stops reading.
    // Its receive buffer is pinned small so the kernel cannot absorb tens
    // of megabytes on loopback before the server notices.
    let mut slow = small_buffer_ws(&gw, &w.rex).await;
    let (_, cursor) = slow.read_batch().await;
    let before = rss_kib(gw.pid());
    let big = "x".repeat(30_000);
    let mut posted = Vec::new();
    let mut disconnected = false;
    for i in 0..600 {
        let (s, m) = gw.post_message(&w.ana, "dm", &format!("{i} {big}")).await;
        assert_eq!(s, 201, "{m}");
        posted.push(m["id"].as_str().unwrap().to_owned());
        if i % 50 == 49 && metric(&gw, "switchboard_slow_consumer_disconnects_total").await >= 1.0 {
            disconnected = true;
            break;
        }
    }
    if !disconnected {
        disconnected = eventually(Duration::from_secs(10), || async {
            metric(&gw, "switchboard_slow_consumer_disconnects_total").await >= 1.0
        })
        .await;
    }
    assert!(disconnected, "the stalled consumer was never disconnected");
    let after = rss_kib(gw.pid());
    println!(
        "slow consumer: {} messages of 30 KB posted before the disconnect; server RSS {before} KiB → {after} KiB",
        posted.len()
    );
    // Once the client reads again, what the socket held arrives, then the
    // SLOW_CONSUMER error frame and its close.
    let frames = slow
        .expect_server_close(WsClose::SlowConsumer, Duration::from_secs(10))
        .await;
    assert!(
        frames[..frames.len() - 1]
            .iter()
            .all(|f| f["t"] == "event" || f["t"] == "cursor"),
        "only what was queued comes before the close"
    );
    // Everything posted is still there for the client's last cursor.
    let mut got = Vec::new();
    let mut c = cursor;
    while got.len() < posted.len() {
        let (s, b) = gw.updates(&w.rex, Some(&c), "2").await;
        assert_eq!(s, 200, "{b}");
        let events = b["events"].as_array().unwrap();
        assert!(
            !events.is_empty(),
            "resume stalled after {} of {}",
            got.len(),
            posted.len()
        );
        got.extend(
            events
                .iter()
                .map(|e| e["message"]["id"].as_str().unwrap().to_owned()),
        );
        c = b["cursor"].as_str().unwrap().to_owned();
    }
    assert_eq!(got, posted);
}

#[tokio::test]
async fn a_client_that_stops_reading_is_dropped_within_the_write_timeout() {
    // Write timeout = ping interval × missed pongs = 1 s; the outbound
    // queue is large enough that the feed never gives up on the client, so
    // only the write timeout can end the connection.
    let gw = Gateway::spawn_with(
        Opts::default()
            .env("SWITCHBOARD_TIMING__PING_INTERVAL", "1s")
            .env("SWITCHBOARD_TIMING__MISSED_PONGS", "1")
            .env("SWITCHBOARD_LIMITS__MAX_OUTBOUND_QUEUE_BYTES", "100000000"),
    )
    .await;
    let w = World::create(&gw, "stall").await;
    let stalled = small_buffer_ws(&gw, &w.rex).await;
    let open = || async { gw.metric("switchboard_connections{").await };
    assert_eq!(open().await, 1.0);
    // Enough to fill the client's small receive buffer and the server's
    // send buffer: the server's write then waits on a client that never reads.
    let big = "x".repeat(30_000);
    for i in 0..200 {
        let (s, m) = gw.post_message(&w.ana, "dm", &format!("{i} {big}")).await;
        assert_eq!(s, 201, "{m}");
    }
    let dropped = eventually(Duration::from_secs(10), || async { open().await == 0.0 }).await;
    assert!(
        dropped,
        "a client that took nothing still holds its connection"
    );
    // The slot is free again: the token connects and resumes.
    let mut again = gw.ws(&w.rex).await;
    again.hello(None).await;
    assert_eq!(again.next_json().await["t"], "ready");
    drop(stalled);
}

#[tokio::test]
async fn a_stalled_client_over_the_queue_limit_frees_its_slot_before_the_write_timeout() {
    // The write timeout (2 min here) is far off: only the abandonment can
    // free the slot within the test's patience.
    let gw = Gateway::spawn_with(
        Opts::default()
            .env("SWITCHBOARD_LIMITS__MAX_OUTBOUND_QUEUE_BYTES", "262144")
            .env("SWITCHBOARD_TIMING__PING_INTERVAL", "60s")
            .env("SWITCHBOARD_TIMING__MISSED_PONGS", "2"),
    )
    .await;
    let w = World::create(&gw, "stalled").await;
    let stalled = small_buffer_ws(&gw, &w.rex).await;
    let open = || async { gw.metric("switchboard_connections{").await };
    assert_eq!(open().await, 1.0);
    let big = "x".repeat(30_000);
    for i in 0..600 {
        let (s, m) = gw.post_message(&w.ana, "dm", &format!("{i} {big}")).await;
        assert_eq!(s, 201, "{m}");
        if i % 50 == 49 && metric(&gw, "switchboard_slow_consumer_disconnects_total").await >= 1.0 {
            break;
        }
    }
    assert!(metric(&gw, "switchboard_slow_consumer_disconnects_total").await >= 1.0);
    let freed = eventually(Duration::from_secs(10), || async { open().await == 0.0 }).await;
    assert!(freed, "the abandoned session still holds its slot");
    drop(stalled);
}

#[tokio::test]
async fn a_small_event_behind_one_bigger_than_the_queue_limit_does_not_drop_the_reader() {
    // The limit is smaller than one message: each big event fills the
    // backlog alone.
    let gw = Gateway::spawn_with(
        Opts::default().env("SWITCHBOARD_LIMITS__MAX_OUTBOUND_QUEUE_BYTES", "4096"),
    )
    .await;
    let w = World::create(&gw, "bigsmall").await;
    let mut first = gw.ws_ready(&w.rex, None).await;
    let (_, cursor) = first.read_batch().await;
    first.close().await;
    // A replay larger than the socket buffers (32,000 four-byte
    // characters per message, about 5 MB): the session stays in its
    // replay, holding what the feed sends meanwhile, until the client reads.
    let huge = "\u{1F600}".repeat(32_000);
    let mut posted = Vec::new();
    for _ in 0..40 {
        let (s, m) = gw.post_message(&w.ana, "dm", &huge).await;
        assert_eq!(s, 201, "{m}");
        posted.push(m["id"].as_str().unwrap().to_owned());
    }
    let mut ws = small_buffer_socket(&gw, &w.rex).await;
    ws.hello(Some(&cursor)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A big live event, then a small one behind it, while the replay waits.
    for content in ["x".repeat(30_000), "small".to_owned()] {
        let (s, m) = gw.post_message(&w.ana, "dm", &content).await;
        assert_eq!(s, 201, "{m}");
        posted.push(m["id"].as_str().unwrap().to_owned());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The client reads now, and gets everything in order.
    let mut seen = Vec::new();
    while seen.len() < posted.len() {
        match ws.next_within(Duration::from_secs(10)).await {
            WsNext::Json(f) if f["t"] == "event" && f["event"]["type"] == "message" => {
                seen.push(f["event"]["message"]["id"].as_str().unwrap().to_owned());
            }
            WsNext::Json(_) => {}
            other => panic!("dropped after {} messages: {other:?}", seen.len()),
        }
    }
    assert_eq!(seen, posted);
    assert_eq!(
        metric(&gw, "switchboard_slow_consumer_disconnects_total").await,
        0.0
    );
}

async fn small_buffer_ws(gw: &Gateway, token: &str) -> Ws {
    let mut ws = small_buffer_socket(gw, token).await;
    ws.hello(None).await;
    assert_eq!(ws.next_json().await["t"], "ready");
    ws
}

/// A WebSocket with an 8 KiB receive buffer, before its `hello`.
async fn small_buffer_socket(gw: &Gateway, token: &str) -> Ws {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(8 * 1024).unwrap();
    let tcp = socket.connect(gw.addr.parse().unwrap()).await.unwrap();
    let mut req = format!("ws://{}/api/agent-api/ws", gw.addr)
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("Authorization", format!("Bearer {token}").parse().unwrap());
    let (stream, _) =
        tokio_tungstenite::client_async(req, tokio_tungstenite::MaybeTlsStream::Plain(tcp))
            .await
            .unwrap();
    Ws { stream }
}

#[tokio::test]
async fn metrics_move_after_traffic() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "m").await;
    let mut ws = gw.ws_ready(&w.rex, None).await;
    let _ = ws.read_batch().await;
    let (s, _) = gw.post_message(&w.ana, "dm", "hello").await;
    assert_eq!(s, 201);
    let (events, _) = ws.read_batch().await;
    assert_eq!(events.len(), 1);
    let expired = "switchboard_cursor_expirations_total{transport=\"updates\"}";
    assert_eq!(metric(&gw, expired).await, 0.0);
    let (s, first) = gw.updates(&w.brain, None, "1").await;
    assert_eq!(s, 200, "{first}");
    let (s, garbage) = gw.updates(&w.brain, Some("garbage"), "1").await;
    assert_error(s, &garbage, 409, "CURSOR_EXPIRED");
    assert_eq!(metric(&gw, expired).await, 1.0, "one 409, counted once");
    // A reset over the socket counts on its own transport.
    let mut reset = gw.ws(&w.scout).await;
    reset.hello(Some("garbage")).await;
    assert_eq!(reset.next_json().await["t"], "ready");
    assert_eq!(reset.next_json().await, serde_json::json!({"t": "reset"}));
    assert_eq!(
        metric(
            &gw,
            "switchboard_cursor_expirations_total{transport=\"ws\"}"
        )
        .await,
        1.0
    );
    let text = gw
        .http
        .get(gw.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for name in [
        "switchboard_messages_accepted_total",
        "switchboard_events_delivered_total{transport=\"ws\"}",
        "switchboard_delivery_latency_seconds_bucket",
        "switchboard_connections{transport=\"ws\"}",
        "switchboard_cursor_expirations_total{transport=\"updates\"}",
        "switchboard_store_operation_seconds_bucket",
        "switchboard_http_requests_total",
        "switchboard_actors{kind=\"feed\"}",
    ] {
        assert!(text.contains(name), "missing {name} in:\n{text}");
    }
    assert_eq!(
        metric(&gw, "switchboard_messages_accepted_total").await,
        1.0
    );
    assert_eq!(
        metric(&gw, "switchboard_events_delivered_total{transport=\"ws\"}").await,
        1.0
    );
}

/// A message at the content limit is accepted in every valid JSON
/// encoding: 32,000 emoji written ASCII-only (`\ud83d\ude00`, 12 bytes
/// each, the default of most JSON encoders) as well as raw UTF-8; one more
/// character is 400 `INVALID_CONTENT`, never 413.
#[tokio::test]
async fn content_at_the_limit_is_accepted_however_it_is_escaped() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "escaped").await;
    let send = |body: String| {
        let gw = &gw;
        let token = w.rex.clone();
        async move {
            let res = gw
                .http
                .post(gw.url("/api/agent-api/conversations/group/messages"))
                .bearer_auth(token)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            let status = res.status().as_u16();
            (status, res.json::<serde_json::Value>().await.unwrap())
        }
    };
    let escaped = |n: usize| format!("{{\"content\":\"{}\"}}", "\\ud83d\\ude00".repeat(n));
    let body = escaped(32_000);
    assert!(body.len() > 384_000, "{}", body.len());
    let (s, b) = send(body).await;
    assert_eq!(s, 201, "{b}");
    assert_eq!(b["content"].as_str().unwrap().chars().count(), 32_000);
    let (s, b) = send(escaped(32_001)).await;
    common::assert_error(s, &b, 400, "INVALID_CONTENT");
    assert!(
        b["message"]
            .as_str()
            .unwrap()
            .contains("unicode scalar values"),
        "{b}"
    );
    let raw = format!("{{\"content\":\"{}\"}}", "😀".repeat(32_000));
    let (s, b) = send(raw).await;
    assert_eq!(s, 201, "{b}");
}

/// Invented methods, random paths and random ids never add metric series:
/// every label value comes from a fixed set.
#[tokio::test]
async fn metrics_labels_stay_bounded_under_invented_methods_and_paths() {
    let gw = Gateway::spawn().await;
    let series = |text: &str| text.lines().filter(|l| !l.starts_with('#')).count();
    let scrape = || async {
        gw.http
            .get(gw.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    let hit = |i: usize| {
        let gw = &gw;
        async move {
            let method = reqwest::Method::from_bytes(format!("XM{i:04}").as_bytes()).unwrap();
            gw.http
                .request(method, gw.url("/api/agent-api/me"))
                .send()
                .await
                .unwrap();
            gw.http
                .get(gw.url(&format!("/random/{i}")))
                .send()
                .await
                .unwrap();
            gw.http
                .get(gw.url(&format!("/api/agent-api/conversations/c{i}/context")))
                .send()
                .await
                .unwrap();
        }
    };
    for i in 0..20 {
        hit(i).await;
    }
    // The first scrape adds the series of the `/metrics` route itself.
    scrape().await;
    let before = series(&scrape().await);
    for i in 20..200 {
        hit(i).await;
    }
    let text = scrape().await;
    assert_eq!(series(&text), before, "new series appeared");
    assert!(!text.contains("XM0"), "an invented method became a label");
    assert!(!text.contains("/random/"), "a raw path became a label");
    assert!(text.contains("method=\"other\""), "{text}");
    assert!(text.contains("route=\"unmatched\""), "{text}");
    assert!(
        text.contains("route=\"/api/agent-api/conversations/{id}/context\""),
        "the matched pattern is the label"
    );
}

/// A body must be a JSON object on every route that takes one: serde would
/// otherwise fill a struct from an array by position.
#[tokio::test]
async fn json_arrays_are_refused_as_bodies() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "arrays").await;
    let agent_routes = [
        "/conversations/group/messages",
        "/polls",
        "/webhook",
        "/conversations/group/read",
    ];
    for path in agent_routes {
        let (s, b) = gw
            .post_json(&w.rex, path, serde_json::json!(["array send", null, null]))
            .await;
        assert_error(s, &b, 400, "INVALID_JSON");
    }
    let (s, b) = gw
        .admin(
            reqwest::Method::POST,
            "/bays",
            Some(serde_json::json!(["x", "y"])),
        )
        .await;
    assert_error(s, &b, 400, "INVALID_JSON");
    let (_, page) = gw.get(&w.ana, "/conversations/group/messages").await;
    assert_eq!(page["messages"], serde_json::json!([]), "nothing stored");
}

/// A client that closes while a long replay page is being written gets
/// the close echo before the rest of the page: the server stops at the
/// next frame boundary and drops what is left, instead of making the
/// client read it all first (its close would time out and end as 1006).
#[tokio::test]
async fn a_close_mid_replay_is_answered_before_the_rest_of_the_page() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
    use tokio_tungstenite::tungstenite::protocol::CloseFrame;
    use tokio_tungstenite::tungstenite::Message as WsMessage;
    // One page of up to 16 MiB holding the whole replay (about 12 MB):
    // far more than loopback socket buffers take in at once (4 MiB on
    // Linux by default), so the server is still writing it at the close.
    let gw = Gateway::spawn_with(
        Opts::default().env("SWITCHBOARD_LIMITS__MAX_OUTBOUND_QUEUE_BYTES", "16777216"),
    )
    .await;
    let w = World::create(&gw, "midclose").await;
    let mut first = gw.ws_ready(&w.rex, None).await;
    let (_, cursor) = first.read_batch().await;
    first.close().await;
    let big = "x".repeat(30_000);
    let posted = 400;
    for i in 0..posted {
        let (s, m) = gw.post_message(&w.ana, "dm", &format!("{i} {big}")).await;
        assert_eq!(s, 201, "{m}");
    }
    let mut ws = small_buffer_socket(&gw, &w.rex).await;
    ws.hello(Some(&cursor)).await;
    assert_eq!(ws.next_json().await["t"], "ready");
    ws.stream
        .send(WsMessage::Close(Some(CloseFrame {
            code: CloseCode::Normal,
            reason: "bye".into(),
        })))
        .await
        .unwrap();
    let mut events = 0;
    let echo = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match ws.stream.next().await {
                Some(Ok(WsMessage::Text(t))) => {
                    let frame: Value = serde_json::from_str(&t).unwrap();
                    if frame["t"] == "event" {
                        events += 1;
                    }
                }
                Some(Ok(WsMessage::Close(frame))) => return frame,
                Some(Ok(_)) => {}
                other => panic!("no close echo: {other:?}"),
            }
        }
    })
    .await
    .expect("the close echo arrives");
    assert_eq!(echo.map(|f| f.code), Some(CloseCode::Normal));
    assert!(
        events < posted,
        "all {events} events of the page came before the close echo"
    );
}
