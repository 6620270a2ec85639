//! End-to-end tests of `GET /api/agent-api/ws` (protocol §11): the upgrade,
//! the frame grammar, close codes, displacement, revocation and limits.
//! Every test starts its own `switchboard` process and talks to it over a
//! real socket.

mod common;

use common::*;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use switchboard_protocol::cursor::LogPosition;
use switchboard_protocol::error::WsClose;
use tokio_tungstenite::tungstenite::Message as WsMessage;

const BAY: &str = "b1";

/// A few seconds: the patience of every "eventually" in this file.
const PATIENCE: Duration = Duration::from_secs(5);

async fn world() -> (Gateway, World) {
    world_with(Opts::default()).await
}

async fn world_with(opts: Opts) -> (Gateway, World) {
    let gw = Gateway::spawn_with(opts).await;
    let w = World::create(&gw, BAY).await;
    (gw, w)
}

/// The socket closes as `close` says (close code and the `error` frame's
/// code). Returns the frames before the close, the error frame last.
async fn expect_error_then_close(ws: &mut Ws, close: WsClose) -> Vec<Value> {
    ws.expect_server_close(close, PATIENCE).await
}

fn entry_of(cursor: &str) -> switchboard_protocol::cursor::EntryId {
    LogPosition::decode(cursor)
        .unwrap_or_else(|e| panic!("cursor {cursor:?} does not decode: {e}"))
        .entry
}

// ---------------------------------------------------------------- upgrade

#[tokio::test]
async fn upgrade_without_credential_is_refused_with_401_json() {
    let (gw, _w) = world().await;
    let (status, body) = match gw.ws_try(WsAuth::None).await {
        Ok(_) => panic!("upgraded without a credential"),
        Err(e) => e,
    };
    assert_eq!(status, 401);
    assert_eq!(body["code"], "UNAUTHORIZED", "{body}");
    assert!(body["error"].is_string(), "{body}");
}

#[tokio::test]
async fn upgrade_with_bad_token_is_refused_with_401_json_in_header_and_query() {
    let (gw, _w) = world().await;
    let unknown = "bay_this_token_was_never_issued_000000";
    for auth in [
        WsAuth::Header(unknown),
        WsAuth::Query(unknown),
        WsAuth::Header("not-a-token"),
        WsAuth::Query("not-a-token"),
    ] {
        match gw.ws_try(auth).await {
            Ok(_) => panic!("{auth:?} upgraded"),
            Err((status, body)) => {
                assert_eq!(status, 401, "{auth:?}");
                assert_eq!(body["code"], "UNAUTHORIZED", "{auth:?}: {body}");
            }
        }
    }
}

#[tokio::test]
async fn token_in_query_string_authenticates_the_upgrade() {
    let (gw, w) = world().await;
    let mut ws = gw
        .ws_try(WsAuth::Query(&w.rex))
        .await
        .unwrap_or_else(|e| panic!("?token= refused: {e:?}"));
    ws.hello(None).await;
    let ready = ws.next_json().await;
    assert_eq!(ready, json!({"t": "ready", "cursor": null}));
    ws.read_batch().await;
    let (_, posted) = gw.post_message(&w.ana, "dm", "via query token").await;
    let (events, _) = ws.read_batch().await;
    assert_eq!(events[0]["message"]["id"], posted["id"]);
}

/// A client may send its first frame right behind the handshake, before
/// the 101 arrives: the bytes the server read with the request are the
/// socket's first frame, not lost with the HTTP layer's buffer.
#[tokio::test]
async fn a_hello_sent_in_the_same_write_as_the_handshake_is_answered() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (gw, w) = world().await;
    let mut tcp = tokio::net::TcpStream::connect(&gw.addr).await.unwrap();
    let mut bytes = format!(
        "GET /api/agent-api/ws HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
         Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
        gw.addr, w.rex
    )
    .into_bytes();
    bytes.extend(client_frame(true, 0x1, br#"{"t":"hello","resume":null}"#));
    tcp.write_all(&bytes).await.unwrap();
    let mut got = Vec::new();
    let ready = br#"{"t":"ready","cursor":null}"#;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !got.windows(ready.len()).any(|w| w == ready) {
        let mut buf = [0u8; 4096];
        let n = tokio::time::timeout_at(deadline.into(), tcp.read(&mut buf))
            .await
            .expect("no ready frame within 10 s")
            .unwrap();
        assert!(
            n > 0,
            "closed before ready: {}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
    assert!(
        got.starts_with(b"HTTP/1.1 101"),
        "{}",
        String::from_utf8_lossy(&got)
    );
}

/// Sends `request` on a new connection and reads the answer to the end
/// (refusals close the connection).
async fn raw_exchange(addr: &str, request: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut out))
        .await
        .expect("the refusal did not end the connection")
        .unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

/// The JSON body at the end of a raw answer.
fn body_of(answer: &str) -> Value {
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or("");
    serde_json::from_str(body).unwrap_or_else(|_| panic!("not a JSON body: {answer}"))
}

/// A request that is not a valid handshake gets the agent API's JSON error
/// with the status RFC 6455 gives it, and costs none of the connect bucket.
#[tokio::test]
async fn invalid_handshakes_get_json_errors_and_cost_no_connect_allowance() {
    let (gw, w) =
        world_with(Opts::default().env("SWITCHBOARD_LIMITS__UPDATES_PER_MINUTE", "2")).await;
    let upgrade = |version: &str, key: &str| {
        format!(
            "GET /api/agent-api/ws HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
             Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: {version}\r\n\
             {key}\r\n",
            w.rex
        )
    };
    let old_version = raw_exchange(
        &gw.addr,
        &upgrade("8", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"),
    )
    .await;
    assert!(old_version.starts_with("HTTP/1.1 426"), "{old_version}");
    assert!(
        old_version
            .to_ascii_lowercase()
            .contains("sec-websocket-version: 13"),
        "{old_version}"
    );
    assert_eq!(body_of(&old_version)["code"], "INVALID_REQUEST");
    let key = "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
    let http10 = raw_exchange(
        &gw.addr,
        &upgrade("13", key).replacen("HTTP/1.1", "HTTP/1.0", 1),
    )
    .await;
    assert!(http10.starts_with("HTTP/1.0 400"), "{http10}");
    assert_eq!(body_of(&http10)["code"], "INVALID_REQUEST");
    let no_key = raw_exchange(&gw.addr, &upgrade("13", "")).await;
    assert!(no_key.starts_with("HTTP/1.1 400"), "{no_key}");
    assert_eq!(body_of(&no_key)["code"], "INVALID_REQUEST");
    // A body would be read as the client's first frames.
    let with_body = raw_exchange(
        &gw.addr,
        &format!(
            "{}hello",
            upgrade("13", key).replacen("\r\n\r\n", "\r\nContent-Length: 5\r\n\r\n", 1)
        ),
    )
    .await;
    assert!(with_body.starts_with("HTTP/1.1 400"), "{with_body}");
    assert_eq!(body_of(&with_body)["code"], "INVALID_REQUEST");
    for _ in 0..3 {
        let res = gw
            .http
            .get(gw.url("/api/agent-api/ws"))
            .bearer_auth(&w.rex)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), 400);
        let body: Value = res.json().await.unwrap();
        assert_error(400, &body, 400, "INVALID_REQUEST");
    }
    // Five refused handshakes later, the bucket of two still admits.
    gw.ws_ready(&w.rex, None).await;
}

/// A close reason longer than a control frame carries (a parser error
/// quoting the client's text) is cut to fit: strict clients still read the
/// close code, and the `error` frame before it has the whole message.
#[tokio::test]
async fn a_long_refusal_still_closes_with_a_valid_close_frame() {
    let (gw, w) = world().await;
    let mut ws = gw.ws(&w.rex).await;
    ws.send_text(&format!("{{\"t\":\"{}\"}}", "x".repeat(300)))
        .await;
    let frames = expect_error_then_close(&mut ws, WsClose::FramingViolation).await;
    let message = frames.last().unwrap()["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.len() > 125,
        "the error frame has the whole text: {message}"
    );
}

/// Upgrades are served outside the app but counted, logged and given a
/// request id like every other request: the 101s and the refusals.
#[tokio::test]
async fn upgrades_and_refusals_are_counted_with_their_status() {
    let (gw, w) = world().await;
    let ws = |status: &str| {
        format!(
            "switchboard_http_requests_total{{method=\"GET\",route=\"/api/agent-api/ws\",status=\"{status}\"}}"
        )
    };
    let _a = gw.ws_ready(&w.rex, None).await;
    let _b = gw.ws_ready(&w.brain, None).await;
    assert!(gw.ws_try(WsAuth::None).await.is_err());
    assert_eq!(gw.metric(&ws("101")).await, 2.0);
    assert_eq!(gw.metric(&ws("401")).await, 1.0);
    let url = format!("ws://{}/api/agent-api/ws", gw.addr);
    let mut req =
        tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(url)
            .unwrap();
    req.headers_mut().insert(
        "authorization",
        format!("Bearer {}", w.scout).parse().unwrap(),
    );
    req.headers_mut()
        .insert("x-request-id", "trace-me-42".parse().unwrap());
    let (_c, res) = tokio_tungstenite::connect_async(req).await.unwrap();
    assert_eq!(res.headers()["x-request-id"], "trace-me-42");
}

/// Upgrades are served at `/ws` only; one aimed elsewhere gets the JSON
/// 404 and the server keeps serving.
#[tokio::test]
async fn a_websocket_upgrade_to_another_path_gets_404_json() {
    let (gw, w) = world().await;
    let url = format!("ws://{}/api/agent-api/updates", gw.addr);
    match tokio_tungstenite::connect_async(url).await {
        Ok(_) => panic!("upgraded at /updates"),
        Err(tokio_tungstenite::tungstenite::Error::Http(res)) => {
            assert_eq!(res.status().as_u16(), 404);
            let body: Value = serde_json::from_slice(res.body().as_deref().unwrap_or(b"")).unwrap();
            assert_error(404, &body, 404, "NOT_FOUND");
        }
        Err(e) => panic!("expected an HTTP refusal, got {e}"),
    }
    let mut ws = gw.ws_ready(&w.rex, None).await;
    let _ = ws.read_batch().await;
    let (_, posted) = gw.post_message(&w.ana, "dm", "still served").await;
    let (events, _) = ws.read_batch().await;
    assert_eq!(events[0]["message"]["id"], posted["id"]);
}

// ---------------------------------------------------------------- hello

#[tokio::test]
async fn server_sends_nothing_before_hello() {
    let (gw, w) = world().await;
    let mut ws = gw.ws(&w.rex).await;
    // Traffic that would produce frames for a live session.
    gw.post_message(&w.ana, "dm", "before hello").await;
    match ws.next_within(Duration::from_millis(800)).await {
        WsNext::Timeout => {}
        other => panic!("the server spoke before hello: {other:?}"),
    }
    ws.hello(None).await;
    let ready = ws.next_json().await;
    assert_eq!(ready["t"], "ready", "the first frame after hello is ready");
}

#[tokio::test]
async fn missing_hello_gets_error_frame_then_close() {
    let hello_timeout = Duration::from_secs(1);
    let (gw, w) = world_with(Opts::default().env("SWITCHBOARD_TIMING__HELLO_TIMEOUT", "1s")).await;
    // Timed from before the connect: the server's timer starts after it,
    // so the close can never come sooner than the timeout on any machine.
    let started = Instant::now();
    let mut ws = gw.ws(&w.rex).await;
    let frames = ws
        .expect_server_close(WsClose::HelloTimeout, Duration::from_secs(20))
        .await;
    assert!(
        started.elapsed() >= hello_timeout,
        "closed {:?} after connecting, before the hello timeout",
        started.elapsed()
    );
    assert_eq!(frames.len(), 1, "exactly one error frame: {frames:?}");
}

#[tokio::test]
async fn ready_echoes_the_resume_cursor_or_null() {
    let (gw, w) = world().await;
    let mut ws = gw.ws(&w.rex).await;
    ws.hello(None).await;
    assert_eq!(ws.next_json().await, json!({"t": "ready", "cursor": null}));
    let (events, cursor) = ws.read_batch().await;
    assert!(events.is_empty());
    ws.close().await;

    let mut ws = gw.ws(&w.rex).await;
    ws.hello(Some(&cursor)).await;
    assert_eq!(
        ws.next_json().await,
        json!({"t": "ready", "cursor": cursor})
    );
    // `resume` may also be left out entirely: same as null.
    ws.close().await;
    let mut ws = gw.ws(&w.rex).await;
    ws.send_text(r#"{"t":"hello"}"#).await;
    assert_eq!(ws.next_json().await, json!({"t": "ready", "cursor": null}));
}

// ---------------------------------------------------------------- events and cursors

#[tokio::test]
async fn event_frames_equal_updates_events_for_the_same_message_and_recipient() {
    let (gw, w) = world().await;
    let (s, first) = gw.updates(&w.rex, None, "1").await;
    assert_eq!(s, 200, "{first}");
    let c0 = first["cursor"].as_str().unwrap().to_owned();

    let mut ws = gw.ws_ready(&w.rex, Some(&c0)).await;
    let (events, _) = ws.read_batch().await;
    assert!(events.is_empty(), "{events:?}");
    // A rich message: mention, metadata, then a reply quoting it.
    let (s, q) = gw
        .post_json(
            &w.ana,
            "/conversations/group/messages",
            json!({"content": "question for @Rex", "metadata": {"source": "test"}}),
        )
        .await;
    assert_eq!(s, 201, "{q}");
    let (s, r) = gw
        .post_json(
            &w.ben,
            "/conversations/group/messages",
            json!({"content": "same here", "replyToMessageId": q["id"]}),
        )
        .await;
    assert_eq!(s, 201, "{r}");
    let mut over_ws = Vec::new();
    while over_ws.len() < 2 {
        let (events, _) = ws.read_batch().await;
        over_ws.extend(events);
    }
    ws.close().await;

    let (s, polled) = gw.updates(&w.rex, Some(&c0), "1").await;
    assert_eq!(s, 200, "{polled}");
    let over_poll = polled["events"].as_array().unwrap();
    assert_eq!(over_poll.len(), 2, "{polled}");
    assert_eq!(over_ws[0]["message"]["id"], q["id"]);
    assert_eq!(over_ws[1]["message"]["id"], r["id"]);
    assert_eq!(&over_ws[0], &over_poll[0]);
    assert_eq!(&over_ws[1], &over_poll[1]);
    // Sanity: the compared events are not trivially empty.
    assert_eq!(over_ws[0]["message"]["metadata"], json!({"source": "test"}));
    assert_eq!(over_ws[1]["message"]["replyTo"]["id"], q["id"]);
    assert_eq!(over_ws[0]["message"]["mentions"], json!(["rex"]));
}

#[tokio::test]
async fn a_cursor_frame_follows_every_batch_and_advances() {
    let (gw, w) = world().await;
    let mut ws = gw.ws_ready(&w.rex, None).await;
    let (_, mut last) = ws.read_batch().await;
    for i in 0..3 {
        let (_, posted) = gw.post_message(&w.ana, "dm", &format!("m{i}")).await;
        let f = ws.next_json().await;
        assert_eq!(f["t"], "event", "{f}");
        assert_eq!(f["event"]["message"]["id"], posted["id"]);
        assert!(f.get("cursor").is_none() && f["event"].get("cursor").is_none());
        let f = ws.next_json().await;
        assert_eq!(
            f["t"], "cursor",
            "a cursor frame must follow the batch: {f}"
        );
        let cursor = f["cursor"].as_str().unwrap().to_owned();
        assert!(
            entry_of(&cursor) > entry_of(&last),
            "cursor did not advance"
        );
        last = cursor;
    }
    ws.close().await;
    // The last cursor frame covers everything sent: nothing is replayed.
    let (s, body) = gw.updates(&w.rex, Some(&last), "1").await;
    assert_eq!(s, 200);
    assert_eq!(body["events"], json!([]), "{body}");
}

/// Events written together may share one `cursor` frame, but every
/// `cursor` frame covers exactly what was sent before it: resuming from it
/// replays only the events sent after it. And no event is left without a
/// `cursor` frame after it.
#[tokio::test]
async fn each_cursor_frame_covers_exactly_the_events_before_it() {
    let (gw, w) = world().await;
    let mut ws = gw.ws_ready(&w.rex, None).await;
    let _ = ws.read_batch().await;
    let mut posted = Vec::new();
    for i in 0..6 {
        let (s, m) = gw.post_message(&w.ana, "dm", &format!("burst {i}")).await;
        assert_eq!(s, 201, "{m}");
        posted.push(m["id"].clone());
    }
    // (event ids sent before it, cursor) for every cursor frame.
    let mut seen = Vec::new();
    let mut cursors: Vec<(usize, String)> = Vec::new();
    while cursors.last().is_none_or(|(n, _)| *n < posted.len()) {
        let f = ws.next_json().await;
        match f["t"].as_str() {
            Some("event") => seen.push(f["event"]["message"]["id"].clone()),
            Some("cursor") => cursors.push((seen.len(), f["cursor"].as_str().unwrap().to_owned())),
            _ => panic!("unexpected frame {f}"),
        }
    }
    ws.close().await;
    assert_eq!(seen, posted, "every event once, in order");
    assert!(
        cursors.len() <= posted.len(),
        "at most one cursor per event: {cursors:?}"
    );
    for (sent_before, cursor) in &cursors {
        let (s, body) = gw.updates(&w.rex, Some(cursor), "0").await;
        assert_eq!(s, 200, "{body}");
        let replayed: Vec<_> = body["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["message"]["id"].clone())
            .collect();
        assert_eq!(
            replayed,
            posted[*sent_before..].to_vec(),
            "a cursor frame after {sent_before} events covers exactly those"
        );
    }
}

#[tokio::test]
async fn idle_socket_gets_advancing_cursor_frames() {
    let (gw, w) =
        world_with(Opts::default().env("SWITCHBOARD_TIMING__IDLE_CURSOR_INTERVAL", "300ms")).await;
    // Scout is not in the DM: the DM's traffic is someone else's.
    let mut ws = gw.ws_ready(&w.scout, None).await;
    let (_, c0) = ws.read_batch().await;
    gw.post_message(&w.ana, "dm", "not for scout").await;
    let mut idle_frames: Vec<String> = Vec::new();
    let deadline = Instant::now() + PATIENCE;
    while idle_frames.len() < 2 || entry_of(idle_frames.last().unwrap()) == entry_of(&c0) {
        assert!(
            Instant::now() < deadline,
            "idle cursor frames: {idle_frames:?}"
        );
        let f = ws.next_json().await;
        assert_eq!(
            f["t"], "cursor",
            "an idle socket gets only cursor frames: {f}"
        );
        idle_frames.push(f["cursor"].as_str().unwrap().to_owned());
    }
    assert!(entry_of(idle_frames.last().unwrap()) > entry_of(&c0));
}

#[tokio::test]
async fn expired_resume_cursor_gets_reset_and_the_stream_continues() {
    let (gw, w) = world_with(Opts::default().env("SWITCHBOARD_REPLAY_WINDOW", "2s")).await;
    let mut ws = gw.ws_ready(&w.rex, None).await;
    let (_, old) = ws.read_batch().await;
    ws.close().await;
    gw.post_message(&w.ana, "dm", "will be trimmed").await;
    tokio::time::sleep(Duration::from_millis(2300)).await;
    // Appending trims everything older than the window.
    let (_, after_window) = gw.post_message(&w.ana, "dm", "after the window").await;

    let mut ws = gw.ws(&w.rex).await;
    ws.hello(Some(&old)).await;
    assert_eq!(ws.next_json().await, json!({"t": "ready", "cursor": old}));
    assert_eq!(ws.next_json().await, json!({"t": "reset"}));
    let (events, _) = ws.read_batch().await;
    assert!(
        events.is_empty(),
        "nothing is replayed after a reset: {events:?}"
    );
    let (_, posted) = gw.post_message(&w.ana, "dm", "live again").await;
    // The stream continues from the node's head when the socket attached.
    // A message accepted just before may not have reached the node's feed
    // by then (on a loaded machine); it then arrives live, before the new
    // one. Nothing else may.
    let mut got = Vec::new();
    while !got.contains(&posted["id"]) {
        let (events, _) = ws.read_batch().await;
        got.extend(events.iter().map(|e| e["message"]["id"].clone()));
    }
    assert!(
        got == [posted["id"].clone()] || got == [after_window["id"].clone(), posted["id"].clone()],
        "after the reset: {got:?}"
    );
}

#[tokio::test]
async fn garbage_resume_cursor_gets_reset() {
    let (gw, w) = world().await;
    for garbage in ["garbage!", "u1f", "MS5hYmMuMTIz"] {
        let mut ws = gw.ws(&w.rex).await;
        ws.hello(Some(garbage)).await;
        assert_eq!(
            ws.next_json().await,
            json!({"t": "ready", "cursor": garbage})
        );
        assert_eq!(ws.next_json().await, json!({"t": "reset"}), "{garbage}");
        let (events, cursor) = ws.read_batch().await;
        assert!(events.is_empty());
        LogPosition::decode(&cursor).expect("a fresh, valid cursor follows the reset");
        ws.close().await;
    }
}

// ---------------------------------------------------------------- one connection per token

#[tokio::test]
async fn second_socket_displaces_the_first_with_4000() {
    let (gw, w) = world().await;
    let mut first = gw.ws_ready(&w.rex, None).await;
    first.read_batch().await;
    let mut second = gw.ws_ready(&w.rex, None).await;
    second.read_batch().await;
    expect_error_then_close(&mut first, WsClose::Displaced).await;
    let (_, posted) = gw.post_message(&w.ana, "dm", "to the newer socket").await;
    let (events, _) = second.read_batch().await;
    assert_eq!(events[0]["message"]["id"], posted["id"]);
}

#[tokio::test]
async fn updates_call_displaces_a_socket_with_4000() {
    let (gw, w) = world().await;
    let mut ws = gw.ws_ready(&w.rex, None).await;
    ws.read_batch().await;
    let (s, body) = gw.updates(&w.rex, None, "1").await;
    assert_eq!(s, 200, "{body}");
    expect_error_then_close(&mut ws, WsClose::Displaced).await;
}

#[tokio::test]
async fn socket_displaces_a_held_updates_call_which_returns_at_once_empty() {
    let (gw, w) = world().await;
    let (_, first) = gw.updates(&w.rex, None, "1").await;
    let cursor = first["cursor"].as_str().unwrap().to_owned();
    let held = {
        let (http, url, token) = (
            gw.http.clone(),
            gw.url("/api/agent-api/updates"),
            w.rex.clone(),
        );
        tokio::spawn(async move {
            let res = http
                .get(url)
                .query(&[("wait", "25"), ("cursor", cursor.as_str())])
                .bearer_auth(token)
                .send()
                .await
                .unwrap();
            let status = res.status().as_u16();
            (status, res.json::<Value>().await.unwrap(), Instant::now())
        })
    };
    // The poll is held (attached and replayed) before the socket opens.
    gw.until_held(1).await;
    let opened = Instant::now();
    let mut ws = gw.ws_ready(&w.rex, None).await;
    ws.read_batch().await;
    let (status, body, answered) = tokio::time::timeout(PATIENCE, held)
        .await
        .expect("the displaced poll must return at once")
        .unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["events"], json!([]));
    assert!(body["cursor"].is_string(), "{body}");
    assert!(answered.duration_since(opened) < Duration::from_secs(3));
    // The socket is the survivor.
    let (_, posted) = gw.post_message(&w.ana, "dm", "socket wins").await;
    let (events, _) = ws.read_batch().await;
    assert_eq!(events[0]["message"]["id"], posted["id"]);
}

// ---------------------------------------------------------------- credentials

#[tokio::test]
async fn token_rotation_closes_the_socket_with_4001() {
    let (gw, w) = world().await;
    let mut ws = gw.ws_ready(&w.rex, None).await;
    ws.read_batch().await;
    let fresh = gw.rotate_token(BAY, "rex").await;
    expect_error_then_close(&mut ws, WsClose::CredentialRevoked).await;
    assert_eq!(
        gw.ws_try(WsAuth::Header(&w.rex)).await.err().map(|e| e.0),
        Some(401)
    );
    let mut ws = gw.ws_ready(&fresh, None).await;
    ws.read_batch().await;
}

#[tokio::test]
async fn token_revocation_closes_the_socket_with_4001() {
    let (gw, w) = world().await;
    let mut ws = gw.ws_ready(&w.rex, None).await;
    ws.read_batch().await;
    gw.revoke_token(BAY, "rex").await;
    expect_error_then_close(&mut ws, WsClose::CredentialRevoked).await;
    assert_eq!(
        gw.ws_try(WsAuth::Query(&w.rex)).await.err().map(|e| e.0),
        Some(401)
    );
}

// ---------------------------------------------------------------- framing contract

#[tokio::test]
async fn framing_violations_close_with_4002_after_an_error_frame() {
    let (gw, w) = world().await;
    let binary = || WsMessage::Binary(vec![0x7b, 0x7d].into());
    let text = |s: &str| WsMessage::text(s.to_owned());
    // (what, send hello first?, offending frame)
    let cases: Vec<(&str, bool, WsMessage)> = vec![
        ("non-JSON text before hello", false, text("hello there")),
        ("non-JSON text", true, text("{not json")),
        ("binary frame before hello", false, binary()),
        ("binary frame", true, binary()),
        ("frame without t", false, text(r#"{"resume":null}"#)),
        ("frame without t after hello", true, text(r#"{"x":1}"#)),
        ("unknown t", true, text(r#"{"t":"subscribe","to":"group"}"#)),
        ("unknown t before hello", false, text(r#"{"t":"hi"}"#)),
        (
            "hello with unknown fields",
            false,
            text(r#"{"t":"hello","resume":null,"extra":1}"#),
        ),
        ("second hello", true, text(r#"{"t":"hello","resume":null}"#)),
    ];
    for (what, hello_first, frame) in cases {
        let mut ws = if hello_first {
            let mut ws = gw.ws_ready(&w.rex, None).await;
            ws.read_batch().await;
            ws
        } else {
            gw.ws(&w.rex).await
        };
        ws.stream.send(frame).await.unwrap();
        eprintln!("case: {what}");
        expect_error_then_close(&mut ws, WsClose::FramingViolation).await;
    }
}

#[tokio::test]
async fn hello_sent_as_a_json_array_closes_with_4002_and_no_ready() {
    let (gw, w) = world().await;
    let (_, cursor) = {
        let mut ws = gw.ws_ready(&w.rex, None).await;
        let batch = ws.read_batch().await;
        ws.close().await;
        batch
    };
    for array in [
        r#"["hello"]"#.to_owned(),
        r#"["hello",null]"#.to_owned(),
        format!(r#"["hello",{}]"#, json!(cursor)),
    ] {
        let mut ws = gw.ws(&w.rex).await;
        ws.send_text(&array).await;
        let frames = expect_error_then_close(&mut ws, WsClose::FramingViolation).await;
        assert_eq!(
            frames.len(),
            1,
            "{array}: only the error frame, no ready: {frames:?}"
        );
    }
}

/// Writes raw bytes on the socket's TCP stream, under the client library.
async fn write_raw(ws: &mut Ws, bytes: &[u8]) {
    use tokio::io::AsyncWriteExt;
    match ws.stream.get_mut() {
        tokio_tungstenite::MaybeTlsStream::Plain(tcp) => tcp.write_all(bytes).await.unwrap(),
        _ => unreachable!("plain ws"),
    }
}

/// One masked client frame (payload up to 65535 bytes), `fin` and `opcode` as given.
fn client_frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [0x12u8, 0x34, 0x56, 0x78];
    let mut out = vec![(u8::from(fin) << 7) | opcode];
    match u16::try_from(payload.len()) {
        Ok(n) if n < 126 => out.push(0x80 | n as u8),
        Ok(n) => {
            out.push(0x80 | 126);
            out.extend_from_slice(&n.to_be_bytes());
        }
        Err(_) => panic!("payload too long for this helper"),
    }
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    out
}

/// A close frame's payload: the code, then the reason's bytes.
fn close_payload(code: u16, reason: &[u8]) -> Vec<u8> {
    let mut payload = code.to_be_bytes().to_vec();
    payload.extend_from_slice(reason);
    payload
}

/// A text message split into fragments is put back together (RFC 6455
/// §5.4: a server must accept fragmented messages): a `hello` in three
/// fragments, a ping between two of them and a character cut across two,
/// is answered with `ready`.
#[tokio::test]
async fn a_fragmented_hello_is_put_back_together_and_answered() {
    let (gw, w) = world().await;
    let mut ws = gw.ws(&w.rex).await;
    let hello = r#"{"t":"hello","resume":"é"}"#.as_bytes();
    let cut = hello.iter().position(|&b| b == 0xc3).unwrap() + 1;
    let mut bytes = client_frame(false, 0x1, &hello[..5]);
    bytes.extend(client_frame(true, 0x9, b"mid-message ping"));
    bytes.extend(client_frame(false, 0x0, &hello[5..cut]));
    bytes.extend(client_frame(true, 0x0, &hello[cut..]));
    write_raw(&mut ws, &bytes).await;
    assert_eq!(ws.next_json().await, json!({"t": "ready", "cursor": "é"}));
    // A cursor that is not one: reset, then the stream runs.
    assert_eq!(ws.next_json().await, json!({"t": "reset"}));
    let (_, posted) = gw
        .post_message(&w.ana, "dm", "after a fragmented hello")
        .await;
    let mut got = Vec::new();
    while !got.contains(&posted["id"]) {
        let (events, _) = ws.read_batch().await;
        got.extend(events.iter().map(|e| e["message"]["id"].clone()));
    }
}

/// A fragmented message is still one frame for the framing contract: a
/// fragmented second `hello` and a fragmented binary message close 4002.
#[tokio::test]
async fn fragmented_messages_keep_the_framing_contract() {
    let (gw, w) = world().await;
    let mut second_hello = client_frame(false, 0x1, br#"{"t":"hel"#);
    second_hello.extend(client_frame(true, 0x0, br#"lo","resume":null}"#));
    let mut binary = client_frame(false, 0x2, b"{");
    binary.extend(client_frame(true, 0x0, b"}"));
    for (what, bytes) in [("second hello", second_hello), ("binary", binary)] {
        let mut ws = gw.ws_ready(&w.rex, None).await;
        ws.read_batch().await;
        write_raw(&mut ws, &bytes).await;
        eprintln!("case: {what}");
        expect_error_then_close(&mut ws, WsClose::FramingViolation).await;
    }
}

/// Frames the WebSocket decoder refuses get an `error` frame and the close
/// code RFC 6455 names, never a bare TCP close: text that is not UTF-8
/// (whole, across fragments, or a close frame's reason) closes 1007
/// (§8.1, §7.4.1); reserved bits, a fragmented or oversized control frame,
/// a continuation with nothing to continue, a new message inside a
/// fragmented one, a 64-bit length with its top bit set and close codes
/// §7.4 does not allow close 1002; a message whose fragments add up to more than the limit closes 1009.
#[tokio::test]
async fn frames_the_decoder_refuses_get_an_error_frame_and_the_rfc_close_code() {
    let (gw, w) =
        world_with(Opts::default().env("SWITCHBOARD_LIMITS__MAX_WS_FRAME_BYTES", "1024")).await;
    let joined = |frames: &[Vec<u8>]| frames.concat();
    let mut rsv = client_frame(true, 0x1, br#"{"t":"hello","resume":null}"#);
    rsv[0] |= 0x40;
    let cases: Vec<(&str, Vec<u8>, WsClose)> = vec![
        (
            "invalid UTF-8",
            client_frame(true, 0x1, b"\xff\xfe\xfd"),
            WsClose::InvalidPayload,
        ),
        (
            "a character cut short at the end of a message",
            client_frame(true, 0x1, b"{\"t\":\"\xc3\"}"[..7].as_ref()),
            WsClose::InvalidPayload,
        ),
        (
            "invalid UTF-8 in a later fragment",
            joined(&[
                client_frame(false, 0x1, br#"{"t":"#),
                client_frame(false, 0x0, b"\"\xc3\x28\""),
            ]),
            WsClose::InvalidPayload,
        ),
        (
            "a last fragment ending inside a character",
            joined(&[
                client_frame(false, 0x1, br#"{"t":""#),
                client_frame(true, 0x0, b"\xe2\x82"),
            ]),
            WsClose::InvalidPayload,
        ),
        (
            "a close reason that is not UTF-8",
            client_frame(true, 0x8, &close_payload(1000, b"bye \xff")),
            WsClose::InvalidPayload,
        ),
        (
            "stray continuation",
            client_frame(true, 0x0, b"{}"),
            WsClose::ProtocolError,
        ),
        (
            "a new message inside a fragmented one",
            joined(&[
                client_frame(false, 0x1, br#"{"t":"#),
                client_frame(true, 0x1, br#"{"t":"hello"}"#),
            ]),
            WsClose::ProtocolError,
        ),
        ("reserved bit", rsv, WsClose::ProtocolError),
        (
            "a 64-bit length with its top bit set (RFC 6455 §5.2)",
            {
                let mut f = vec![0x81, 0x80 | 127];
                f.extend_from_slice(&(1u64 << 63 | 5).to_be_bytes());
                f.extend_from_slice(&[0x12, 0x34, 0x56, 0x78]);
                f
            },
            WsClose::ProtocolError,
        ),
        (
            "fragmented ping",
            client_frame(false, 0x9, b"p"),
            WsClose::ProtocolError,
        ),
        (
            "ping above 125 bytes",
            client_frame(true, 0x9, &[b'p'; 126]),
            WsClose::ProtocolError,
        ),
        (
            "close frame above 125 bytes",
            client_frame(true, 0x8, &close_payload(1000, &[b'r'; 124])),
            WsClose::ProtocolError,
        ),
        (
            "reserved opcode 0x3",
            client_frame(true, 0x3, b"x"),
            WsClose::ProtocolError,
        ),
        (
            "reserved control opcode 0xB",
            client_frame(true, 0xB, b""),
            WsClose::ProtocolError,
        ),
        (
            "close code 1005 (never sent on the wire)",
            client_frame(true, 0x8, &close_payload(1005, b"")),
            WsClose::ProtocolError,
        ),
        (
            "close code 999",
            client_frame(true, 0x8, &close_payload(999, b"")),
            WsClose::ProtocolError,
        ),
        (
            "close code 2999 (reserved)",
            client_frame(true, 0x8, &close_payload(2999, b"")),
            WsClose::ProtocolError,
        ),
        (
            "close payload of one byte",
            client_frame(true, 0x8, &[0x03]),
            WsClose::ProtocolError,
        ),
        (
            "fragments adding up to more than the limit",
            joined(&[
                client_frame(false, 0x1, &[b' '; 600]),
                client_frame(true, 0x0, &[b' '; 600]),
            ]),
            WsClose::MessageTooBig,
        ),
    ];
    for (what, bytes, close) in cases {
        eprintln!("case: {what}");
        let mut ws = gw.ws_ready(&w.rex, None).await;
        ws.read_batch().await;
        write_raw(&mut ws, &bytes).await;
        let frames = expect_error_then_close(&mut ws, close).await;
        assert!(
            frames.iter().any(|f| f["t"] == "error"),
            "{what}: no error frame: {frames:?}"
        );
        if what.starts_with("close code") {
            // The message names what was wrong, not actix's "Bad opcode".
            assert!(
                frames.iter().any(|f| f["t"] == "error"
                    && f["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("close code"))),
                "{what}: {frames:?}"
            );
        }
    }
    // A client's protocol error is not the server's: nothing at ERROR.
    // (A last socket first, so the log lines of the cases are in.)
    gw.ws_ready(&w.rex, None).await.read_batch().await;
    let logs = gw.logs();
    assert!(
        !logs.lines().any(|l| l.contains("ERROR")),
        "client errors logged at ERROR:\n{logs}"
    );
}

/// A close frame with an allowed code and a UTF-8 reason is echoed.
#[tokio::test]
async fn a_valid_client_close_is_echoed() {
    let (gw, w) = world().await;
    for code in [1000u16, 1001, 3000, 4999] {
        let mut ws = gw.ws_ready(&w.rex, None).await;
        ws.read_batch().await;
        write_raw(
            &mut ws,
            &client_frame(true, 0x8, &close_payload(code, "ciao é".as_bytes())),
        )
        .await;
        let (got, frames) = ws.expect_close(PATIENCE).await;
        assert_eq!(got, Some(code), "frames: {frames:?}");
        assert!(frames.iter().all(|f| f["t"] != "error"), "{frames:?}");
    }
}

#[tokio::test]
async fn client_ping_gets_a_pong() {
    let (gw, w) = world().await;
    let mut ws = gw.ws_ready(&w.rex, None).await;
    ws.read_batch().await;
    ws.stream
        .send(WsMessage::Ping("are-you-there".into()))
        .await
        .unwrap();
    let pong = tokio::time::timeout(PATIENCE, async {
        loop {
            match ws.stream.next().await {
                Some(Ok(WsMessage::Pong(p))) => return p,
                Some(Ok(_)) => continue,
                other => panic!("socket ended waiting for pong: {other:?}"),
            }
        }
    })
    .await
    .expect("no pong");
    assert_eq!(&pong[..], b"are-you-there");
    // Still open and live.
    let (_, posted) = gw.post_message(&w.ana, "dm", "after ping").await;
    let (events, _) = ws.read_batch().await;
    assert_eq!(events[0]["message"]["id"], posted["id"]);
}

#[tokio::test]
async fn oversized_frame_closes_with_1009() {
    let (gw, w) =
        world_with(Opts::default().env("SWITCHBOARD_LIMITS__MAX_WS_FRAME_BYTES", "1024")).await;
    let mut ws = gw.ws_ready(&w.rex, None).await;
    ws.read_batch().await;
    let big = json!({"t": "hello", "resume": "x".repeat(4096)}).to_string();
    ws.stream.send(WsMessage::text(big)).await.unwrap();
    expect_error_then_close(&mut ws, WsClose::MessageTooBig).await;
}

#[tokio::test]
async fn one_clients_violation_leaves_other_clients_untouched() {
    let (gw, w) = world().await;
    let mut brain = gw.ws_ready(&w.brain, None).await;
    brain.read_batch().await;
    let mut scout = gw.ws_ready(&w.scout, None).await;
    scout.read_batch().await;
    let mut rex = gw.ws_ready(&w.rex, None).await;
    rex.read_batch().await;
    rex.stream
        .send(WsMessage::Binary(vec![1, 2, 3].into()))
        .await
        .unwrap();
    expect_error_then_close(&mut rex, WsClose::FramingViolation).await;
    let (_, posted) = gw.post_message(&w.ana, "group", "still there?").await;
    for ws in [&mut brain, &mut scout] {
        let (events, _) = ws.read_batch().await;
        assert_eq!(events[0]["message"]["id"], posted["id"]);
    }
}

// ---------------------------------------------------------------- protocol defaults

/// No timing overrides: the fixture's test-friendly limits and watermark
/// interval are put back to the shipped defaults (config/default.toml), and
/// the protocol's own intervals are observed (§11): the 10 s hello timeout,
/// the 20 s ping, the ~25 s idle `cursor` frame and the 25 s default
/// `/updates` wait. Each is timed from before the client acted, so the
/// lower bounds hold on any machine; the upper bounds leave room for a
/// loaded one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn works_at_the_protocols_real_defaults() {
    let gw = Gateway::spawn_with(
        Opts::default()
            .env("SWITCHBOARD_LIMITS__UPDATES_PER_MINUTE", "20")
            .env("SWITCHBOARD_LIMITS__AGENT_REQUESTS_PER_MINUTE", "60")
            .env("SWITCHBOARD_TIMING__WATERMARK_INTERVAL", "1s"),
    )
    .await;
    let w = World::create(&gw, BAY).await;

    // No hello: closed with HELLO_TIMEOUT after 10 s, not before.
    let hello_timeout = {
        let started = Instant::now();
        let mut ws = gw.ws(&w.scout).await;
        tokio::spawn(async move {
            ws.expect_server_close(WsClose::HelloTimeout, Duration::from_secs(40))
                .await;
            started.elapsed()
        })
    };
    // No wait parameter: held 25 s, then answered empty.
    let (s, body) = gw.updates(&w.brain, None, "1").await;
    assert_eq!(s, 200, "{body}");
    let default_wait = {
        let (http, url, token) = (
            test_http(),
            gw.url("/api/agent-api/updates"),
            w.brain.clone(),
        );
        let cursor = body["cursor"].as_str().unwrap().to_owned();
        tokio::spawn(async move {
            let started = Instant::now();
            let res = http
                .get(url)
                .query(&[("cursor", cursor.as_str())])
                .bearer_auth(token)
                .send()
                .await
                .unwrap();
            let status = res.status().as_u16();
            let body: Value = res.json().await.unwrap();
            (status, body, started.elapsed())
        })
    };

    // A live socket: events flow, the server pings it, and it gets idle
    // cursor frames.
    let connected = Instant::now();
    let mut ws = gw.ws(&w.rex).await;
    ws.hello(None).await;
    assert_eq!(ws.next_json().await, json!({"t": "ready", "cursor": null}));
    ws.read_batch().await;
    // The last frame before the idle period is sent after this instant.
    let last_frame = Instant::now();
    let (s, posted) = gw.post_message(&w.ana, "dm", "hi @Rex").await;
    assert_eq!(s, 201, "{posted}");
    let (events, _) = ws.read_batch().await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["message"]["id"], posted["id"]);
    assert_eq!(events[0]["message"]["shouldRespond"], true);
    let (mut first_ping, mut idle_cursor) = (None, None);
    while first_ping.is_none() || idle_cursor.is_none() {
        let next = tokio::time::timeout(Duration::from_secs(45), ws.stream.next())
            .await
            .expect("no ping or idle cursor frame within 45 s");
        match next {
            Some(Ok(WsMessage::Ping(_))) if first_ping.is_none() => {
                first_ping = Some(connected.elapsed())
            }
            Some(Ok(WsMessage::Text(t))) => {
                let f: Value = serde_json::from_str(&t).unwrap();
                assert_eq!(
                    f["t"], "cursor",
                    "an idle socket gets only cursor frames: {f}"
                );
                idle_cursor.get_or_insert(last_frame.elapsed());
            }
            Some(Ok(_)) => {}
            other => panic!("the socket ended: {other:?}"),
        }
    }
    let (first_ping, idle_cursor) = (first_ping.unwrap(), idle_cursor.unwrap());
    assert!(
        first_ping >= Duration::from_secs(20) && first_ping < Duration::from_secs(35),
        "first ping {first_ping:?} after connecting (default 20 s)"
    );
    assert!(
        idle_cursor >= Duration::from_secs(25) && idle_cursor < Duration::from_secs(40),
        "idle cursor frame {idle_cursor:?} after the last frame (default ~25 s)"
    );
    // Answering pings keeps the socket: still live after the pings.
    let (_, posted) = gw.post_message(&w.ana, "dm", "still there").await;
    let (events, _) = ws.read_batch().await;
    assert_eq!(events[0]["message"]["id"], posted["id"]);

    let took = hello_timeout.await.unwrap();
    assert!(
        took >= Duration::from_secs(10) && took < Duration::from_secs(25),
        "closed {took:?} after connecting without hello (default 10 s)"
    );
    let (s, body, held) = default_wait.await.unwrap();
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["events"], json!([]), "{body}");
    assert!(
        held >= Duration::from_secs(25) && held < Duration::from_secs(40),
        "/updates without wait held {held:?} (default 25 s)"
    );
}

// ---------------------------------------------------------------- limits and liveness

#[tokio::test]
async fn reconnecting_too_fast_is_refused_with_429_before_upgrade() {
    let (gw, w) =
        world_with(Opts::default().env("SWITCHBOARD_LIMITS__UPDATES_PER_MINUTE", "3")).await;
    for _ in 0..3 {
        let mut ws = gw
            .ws_try(WsAuth::Header(&w.rex))
            .await
            .unwrap_or_else(|e| panic!("refused early: {e:?}"));
        ws.hello(None).await;
        assert_eq!(ws.next_json().await["t"], "ready");
        ws.close().await;
    }
    match gw.ws_try_full(WsAuth::Header(&w.rex)).await {
        Ok(_) => panic!("the fourth upgrade in a minute was accepted"),
        Err((status, retry_after, body)) => {
            assert_error(status, &body, 429, "UPDATES_RATE_LIMITED");
            // At 3 a minute the next token is at most 20 s away.
            let retry: u64 = retry_after
                .expect("Retry-After on the refused upgrade")
                .parse()
                .expect("Retry-After in whole seconds");
            assert!((1..=20).contains(&retry), "Retry-After {retry}");
        }
    }
    // Other tokens have their own bucket.
    gw.ws_ready(&w.brain, None).await;
}

/// The server drops a socket that misses two pongs and keeps one that
/// answers. The responsive client is read without pause the whole time (its
/// library answers each ping as it reads); the silent one is not read until
/// the node's connection gauge shows it gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_misses_pongs_is_dropped_and_a_responsive_one_is_kept() {
    let (gw, w) =
        world_with(Opts::default().env("SWITCHBOARD_TIMING__PING_INTERVAL", "500ms")).await;
    let mut silent = gw.ws_ready(&w.rex, None).await;
    silent.read_batch().await;
    let mut lively = gw.ws_ready(&w.brain, None).await;
    lively.read_batch().await;
    let gauge = "switchboard_connections{transport=\"ws\"}";
    assert_eq!(gw.metric(gauge).await, 2.0);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut events = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match lively.next_within(Duration::from_millis(100)).await {
                    WsNext::Json(f) if f["t"] == "event" => events.push(f["event"].clone()),
                    WsNext::Json(_) | WsNext::Timeout => {}
                    WsNext::Closed(code) => panic!("the responsive client was closed: {code:?}"),
                }
            }
            (lively, events)
        })
    };
    // Three ping intervals without a pong: the silent one goes.
    let dropped = eventually(Duration::from_secs(20), || async {
        gw.metric(gauge).await == 1.0
    })
    .await;
    assert!(dropped, "a client that missed two pongs must be dropped");
    let mut closed = false;
    for _ in 0..1000 {
        match silent.next_within(PATIENCE).await {
            WsNext::Closed(_) => {
                closed = true;
                break;
            }
            WsNext::Json(f) => assert_eq!(f["t"], "cursor", "{f}"),
            WsNext::Timeout => break,
        }
    }
    assert!(closed, "the silent client's socket did not end");
    // The responsive one lived through many more ping intervals: still live.
    let (_, posted) = gw.post_message(&w.ana, "group", "still alive?").await;
    let got = eventually(Duration::from_secs(10), || async {
        gw.metric("switchboard_events_delivered_total{transport=\"ws\"}")
            .await
            >= 1.0
    })
    .await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (mut lively, mut events) = reader.await.unwrap();
    assert!(got, "no delivery counted");
    if events.is_empty() {
        let (more, _) = lively.read_batch().await;
        events.extend(more);
    }
    assert_eq!(events[0]["message"]["id"], posted["id"]);
}

#[tokio::test]
async fn empty_resume_string_means_start_at_now_like_updates() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "er").await;
    let mut ws = gw.ws(&w.rex).await;
    ws.send_text(r#"{"t":"hello","resume":""}"#).await;
    let ready = ws.next_json().await;
    assert_eq!(ready["t"], "ready", "{ready}");
    let next = ws.next_json().await;
    assert_eq!(next["t"], "cursor", "no reset for an empty resume: {next}");
    let (s, _) = gw.post_message(&w.ana, "dm", "after").await;
    assert_eq!(s, 201);
    let (events, _) = ws.read_batch().await;
    assert_eq!(events.len(), 1);
}

#[tokio::test]
async fn a_frame_header_declaring_too_many_bytes_is_refused_before_its_payload() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "huge").await;
    let mut ws = gw.ws(&w.rex).await;
    // A masked text frame that declares 2^40 bytes, followed by only a few.
    let mut header = vec![0x81u8, 0x80 | 127];
    header.extend_from_slice(&(1u64 << 40).to_be_bytes());
    header.extend_from_slice(&[1, 2, 3, 4]);
    header.extend_from_slice(b"abcd");
    write_raw(&mut ws, &header).await;
    expect_error_then_close(&mut ws, WsClose::MessageTooBig).await;
}
