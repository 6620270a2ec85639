//! A held `GET /updates` is served off the HTTP dispatcher
//! (docs/architecture.md, "Backpressure and fan-out cost"). These tests
//! check, over raw TCP, that the connection behaves as any HTTP/1.1
//! connection would: keep-alive across polls, a later request of another
//! kind on the same connection, pipelining, a head that arrives in pieces,
//! requests the small path leaves to the dispatcher, a client that leaves
//! a held poll, and the log and metrics.

mod common;

use common::*;
use serde_json::Value;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const PATIENCE: Duration = Duration::from_secs(10);

/// One parsed answer: status, lower-cased head, body.
struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    /// Asserts a poll's 200 `{cursor, events}`; returns the body.
    #[track_caller]
    fn polled(&self) -> Value {
        assert_eq!(self.status, 200, "{}", self.body);
        let body = self.json();
        assert!(
            body["cursor"].is_string() && body["events"].is_array(),
            "{body}"
        );
        body
    }
}

/// A raw HTTP/1.1 connection that reads answers one at a time.
struct Conn {
    tcp: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    async fn open(gw: &Gateway) -> Conn {
        Conn {
            tcp: TcpStream::connect(&gw.addr).await.unwrap(),
            buf: Vec::new(),
        }
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.tcp.write_all(bytes).await.unwrap();
    }

    /// Reads one whole answer (content-length framed).
    async fn answer(&mut self) -> Answer {
        tokio::time::timeout(PATIENCE, async {
            loop {
                if let Some(a) = self.take() {
                    return a;
                }
                let mut chunk = [0u8; 4096];
                let n = self.tcp.read(&mut chunk).await.unwrap();
                assert!(
                    n > 0,
                    "closed mid-answer: {:?}",
                    String::from_utf8_lossy(&self.buf)
                );
                self.buf.extend_from_slice(&chunk[..n]);
            }
        })
        .await
        .expect("an answer in time")
    }

    fn take(&mut self) -> Option<Answer> {
        let text = String::from_utf8_lossy(&self.buf).into_owned();
        let (head, rest) = text.split_once("\r\n\r\n")?;
        let head = head.to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map_or(0, |v| v.trim().parse().unwrap());
        if rest.len() < len {
            return None;
        }
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        let answer = Answer {
            status,
            body: rest[..len].to_owned(),
            head: head.clone(),
        };
        let used = head.len() + 4 + len;
        self.buf.drain(..used);
        Some(answer)
    }

    /// Whether the server closes the connection within `patience`.
    async fn closed_within(&mut self, patience: Duration) -> bool {
        let mut chunk = [0u8; 64];
        matches!(
            tokio::time::timeout(patience, self.tcp.read(&mut chunk)).await,
            Ok(Ok(0)) | Ok(Err(_))
        )
    }
}

fn poll(token: &str, query: &str) -> String {
    format!("GET /api/agent-api/updates?{query} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n")
}

fn me(token: &str) -> String {
    format!("GET /api/agent-api/me HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n")
}

#[tokio::test]
async fn polls_and_other_requests_share_one_keep_alive_connection() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "kc").await;
    let mut c = Conn::open(&gw).await;
    c.send(poll(&w.rex, "wait=1").as_bytes()).await;
    let first = c.answer().await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert!(
        first.head.contains("cache-control: no-store"),
        "{}",
        first.head
    );
    assert!(
        first.head.contains("content-type: application/json"),
        "{}",
        first.head
    );
    assert!(first.head.contains("x-request-id: "), "{}", first.head);
    let cursor = first.json()["cursor"].as_str().unwrap().to_owned();

    // A second poll on the same connection, from the first's cursor; a
    // message posted meanwhile answers it.
    c.send(poll(&w.rex, &format!("wait=5&cursor={cursor}")).as_bytes())
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (s, sent) = gw.post_message(&w.ana, "group", "over keep-alive").await;
    assert_eq!(s, 201, "{sent}");
    let second = c.answer().await;
    assert_eq!(second.status, 200, "{}", second.body);
    let events = second.json()["events"].clone();
    assert_eq!(events[0]["message"]["id"], sent["id"], "{events}");

    // Then a request of another kind, and another poll, still on it.
    c.send(me(&w.rex).as_bytes()).await;
    let who = c.answer().await;
    assert_eq!((who.status, who.json()["id"].clone()), (200, "rex".into()));
    c.send(poll(&w.rex, "wait=1").as_bytes()).await;
    assert_eq!(c.answer().await.status, 200);
    let mut last = poll(&w.rex, "wait=1");
    last.insert_str(last.len() - 2, "Connection: close\r\n");
    c.send(last.as_bytes()).await;
    let closing = c.answer().await;
    assert_eq!(closing.status, 200, "{}", closing.body);
    assert!(c.closed_within(Duration::from_secs(3)).await);
}

#[tokio::test]
async fn a_request_pipelined_behind_a_held_poll_is_answered_after_it() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "pl").await;
    let mut c = Conn::open(&gw).await;
    let both = format!("{}{}", poll(&w.rex, "wait=2"), me(&w.rex));
    c.send(both.as_bytes()).await;
    c.answer().await.polled();
    let second = c.answer().await;
    assert_eq!(second.status, 200, "{}", second.body);
    assert_eq!(second.json()["id"], "rex", "{}", second.body);

    // Two polls in one write: both answered, in order.
    let two = format!("{}{}", poll(&w.rex, "wait=1"), poll(&w.rex, "wait=1"));
    c.send(two.as_bytes()).await;
    for _ in 0..2 {
        c.answer().await.polled();
    }
}

#[tokio::test]
async fn a_head_that_arrives_in_pieces_is_served() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "sp").await;
    let request = poll(&w.rex, "wait=1");
    let mut c = Conn::open(&gw).await;
    for piece in [&request[..10], &request[10..40], &request[40..]] {
        c.send(piece.as_bytes()).await;
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    c.answer().await.polled();
}

#[tokio::test]
async fn requests_near_the_poll_route_get_the_apps_answers() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "nr").await;
    let cases = [
        // Another path that starts the same way: the app's 404.
        (format!("GET /api/agent-api/updatesX HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\r\n", w.rex), 404),
        // HTTP/1.0 and a body: left to the dispatcher, which serves them.
        (format!("GET /api/agent-api/updates?wait=1 HTTP/1.0\r\nAuthorization: Bearer {}\r\n\r\n", w.rex), 200),
        (format!("GET /api/agent-api/updates?wait=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Length: 2\r\n\r\n{{}}", w.rex), 200),
        // Refusals: the same JSON error bodies as the app's.
        ("GET /api/agent-api/updates?wait=1 HTTP/1.1\r\nHost: x\r\n\r\n".to_owned(), 401),
        (format!("GET /api/agent-api/updates?wait=1&wait=2 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\r\n", w.rex), 400),
        (format!("GET /api/agent-api/updates?cursor=nope HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\r\n", w.rex), 409),
    ];
    for (request, status) in cases {
        let mut c = Conn::open(&gw).await;
        c.send(request.as_bytes()).await;
        let a = c.answer().await;
        let first_line = request.lines().next().unwrap().to_owned();
        assert_eq!(a.status, status, "{first_line}: {}", a.body);
        if status >= 400 {
            let body = a.json();
            assert!(body["code"].is_string(), "{first_line}: {body}");
        }
    }
    // A 401 names the scheme (RFC 6750 §3), here and on the app's routes.
    for path in ["/api/agent-api/updates?wait=1", "/api/agent-api/me"] {
        let mut c = Conn::open(&gw).await;
        c.send(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .await;
        let a = c.answer().await;
        assert_eq!(a.status, 401, "{path}");
        assert!(
            a.head.contains("www-authenticate: bearer"),
            "{path}: {}",
            a.head
        );
    }
    let mut c = Conn::open(&gw).await;
    c.send(b"GET /api/agent-api/updates?wait=1 HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n")
        .await;
    let bad = c.answer().await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json()["code"], "MALFORMED_REQUEST", "{}", bad.body);
}

#[tokio::test]
async fn a_client_that_leaves_a_held_poll_frees_it_and_its_log_and_metrics_are_the_routes() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "lv").await;
    // The poll the client leaves ends, frees its slot and is logged, with
    // its id, as abandoned.
    let mut c = Conn::open(&gw).await;
    let mut request = poll(&w.rex, "wait=30");
    request.insert_str(request.len() - 2, "x-request-id: poll-left-1\r\n");
    c.send(request.as_bytes()).await;
    gw.until_held(1).await;
    drop(c);
    gw.until_held(0).await;
    assert!(
        eventually(PATIENCE, || async {
            gw.metric("switchboard_connections{transport=\"updates\"}")
                .await
                == 0.0
        })
        .await,
        "its connection slot is free"
    );
    assert!(
        eventually(PATIENCE, || async {
            gw.logs()
                .lines()
                .any(|l| l.contains("poll-left-1") && l.contains("request abandoned"))
        })
        .await,
        "no line for the abandoned poll"
    );

    // An answered poll is logged and counted under the route's pattern.
    let mut c = Conn::open(&gw).await;
    let mut request = poll(&w.rex, "wait=1");
    request.insert_str(request.len() - 2, "x-request-id: poll-trace-1\r\n");
    c.send(request.as_bytes()).await;
    let a = c.answer().await;
    assert!(a.head.contains("x-request-id: poll-trace-1"), "{}", a.head);
    let text = gw.metrics_text().await;
    assert!(
        text.lines()
            .any(|l| l.starts_with("switchboard_http_requests_total")
                && l.contains("route=\"/api/agent-api/updates\"")
                && l.contains("status=\"200\"")),
        "no counted poll in /metrics"
    );
    assert!(
        eventually(PATIENCE, || async {
            gw.logs().contains("request_id=poll-trace-1")
        })
        .await,
        "the poll's log line"
    );
}

#[tokio::test]
async fn an_idle_connection_closes_after_the_keep_alive() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "ka").await;
    let mut c = Conn::open(&gw).await;
    c.send(poll(&w.rex, "wait=1").as_bytes()).await;
    assert_eq!(c.answer().await.status, 200);
    // actix-http's 5 s keep-alive, on both paths.
    assert!(
        !c.closed_within(Duration::from_secs(3)).await,
        "closed early"
    );
    assert!(c.closed_within(Duration::from_secs(5)).await, "still open");
}

/// A head that stops halfway gets the JSON 408 after the first-head
/// timeout (5 s), on the poll's path and on the dispatcher's.
#[tokio::test]
async fn a_head_that_stops_halfway_gets_a_json_408() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "sh").await;
    let poll_half = poll(&w.rex, "wait=1");
    let cases = [
        ("a poll", poll_half[..40].to_owned()),
        ("another request", "GET /healthz HTTP/1.1\r\nHo".to_owned()),
    ];
    for (what, half) in cases {
        let mut c = Conn::open(&gw).await;
        c.send(half.as_bytes()).await;
        let a = c.answer().await;
        assert_eq!(a.status, 408, "{what}: {}", a.head);
        assert_eq!(a.json()["code"], "REQUEST_TIMEOUT", "{what}: {}", a.body);
        assert!(
            c.closed_within(Duration::from_secs(3)).await,
            "{what}: still open"
        );
    }
}
