//! Redis faults between a gateway and a real redis-server: a TCP proxy in
//! the middle adds latency or cuts every connection. A send must either
//! succeed or answer 503 `STORE_UNAVAILABLE` within a bound, never hang,
//! and an open session must not be closed for the store's trouble.

mod common;

use common::{assert_error, Gateway, Opts, RedisServer, World};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The longest a send may take whatever Redis does: the store's 5 s
/// command bound, twice (a retried read of the write path's cache
/// included), plus margin for a loaded machine.
const SEND_BOUND: Duration = Duration::from_secs(15);

/// A TCP proxy to Redis that can delay every chunk or cut every connection.
struct FaultProxy {
    port: u16,
    delay_ms: Arc<AtomicU64>,
    cut: Arc<AtomicBool>,
    links: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl FaultProxy {
    async fn start(upstream: u16) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let delay_ms = Arc::new(AtomicU64::new(0));
        let cut = Arc::new(AtomicBool::new(false));
        let links: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>> = Arc::default();
        let (d, c, l) = (delay_ms.clone(), cut.clone(), links.clone());
        tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                if c.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await else {
                    continue;
                };
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                let mut links = l.lock().unwrap();
                links.push(tokio::spawn(pump(cr, sw, d.clone())));
                links.push(tokio::spawn(pump(sr, cw, d.clone())));
            }
        });
        FaultProxy {
            port,
            delay_ms,
            cut,
            links,
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn delay(&self, by: Duration) {
        self.delay_ms.store(by.as_millis() as u64, Ordering::SeqCst);
    }

    /// Drops every open connection and refuses new ones until `heal`.
    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for link in self.links.lock().unwrap().drain(..) {
            link.abort();
        }
    }

    fn heal(&self) {
        self.delay(Duration::ZERO);
        self.cut.store(false, Ordering::SeqCst);
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay_ms: Arc<AtomicU64>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let delay = delay_ms.load(Ordering::SeqCst);
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// Posts and returns (status, body, how long it took).
async fn timed_post(gw: &Gateway, token: &str, text: &str) -> (u16, serde_json::Value, Duration) {
    let started = Instant::now();
    let (s, b) = gw.post_message(token, "group", text).await;
    (s, b, started.elapsed())
}

// Multi-threaded: the proxy must keep running while the test blocks on
// the gateway's start-up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_succeed_or_answer_503_within_a_bound_and_sessions_stay_open() {
    let redis = RedisServer::start(false);
    let proxy = FaultProxy::start(redis.port()).await;
    let gw = Gateway::spawn_with(Opts::default().redis(&proxy.url())).await;
    let w = World::create(&gw, "faults").await;
    let (s, b, _) = timed_post(&gw, &w.ana, "before").await;
    assert_eq!(s, 201, "{b}");
    let mut rex = gw.ws_ready(&w.rex, None).await;
    let (events, _) = rex.read_batch().await;
    assert_eq!(events.len(), 0, "nothing yet: {events:?}");

    // Slow Redis (300 ms each way): sends are slow but succeed.
    proxy.delay(Duration::from_millis(300));
    let (s, b, took) = timed_post(&gw, &w.ana, "slow").await;
    assert_eq!(s, 201, "{b}");
    assert!(took < SEND_BOUND, "{took:?}");

    // Very slow Redis (past the 5 s command bound): 503, within the bound.
    proxy.delay(Duration::from_secs(8));
    let (s, b, took) = timed_post(&gw, &w.ana, "stalled").await;
    assert!(took < SEND_BOUND, "a send hung for {took:?}");
    if s != 201 {
        assert_error(s, &b, 503, "STORE_UNAVAILABLE");
    }

    // Redis unreachable: 503 within the bound, every time.
    proxy.cut();
    for i in 0..3 {
        let (s, b, took) = timed_post(&gw, &w.ana, &format!("cut {i}")).await;
        assert!(took < SEND_BOUND, "a send hung for {took:?}");
        assert_error(s, &b, 503, "STORE_UNAVAILABLE");
    }

    // Healed: sends work again, and the session that waited through it all
    // is still open and receives them.
    proxy.heal();
    let healed = common::eventually(Duration::from_secs(20), || async {
        gw.post_message(&w.ana, "group", "after").await.0 == 201
    })
    .await;
    assert!(healed, "sends did not recover");
    let mut got = Vec::new();
    while !got
        .iter()
        .any(|e: &serde_json::Value| e["message"]["content"] == "after")
    {
        match rex.next_within(Duration::from_secs(15)).await {
            common::WsNext::Json(f) if f["t"] == "event" => got.push(f["event"].clone()),
            common::WsNext::Json(_) => {}
            other => panic!("the session ended or went silent: {other:?}; got {got:?}"),
        }
    }
    rex.close().await;
}

/// A node must still stop on SIGTERM when its store is gone: draining
/// tells sessions to leave and waits at most `timing.drain_timeout`, and
/// nothing in it may wait on Redis forever. Both kinds of loss are tried:
/// Redis refusing connections, and Redis accepting bytes but never
/// answering (a black hole, the worse case for a client without bounds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_store_is_gone_still_stops_on_sigterm() {
    for blackhole in [false, true] {
        let redis = RedisServer::start(false);
        let proxy = FaultProxy::start(redis.port()).await;
        let mut gw = Gateway::spawn_with(
            Opts::default()
                .redis(&proxy.url())
                .env("SWITCHBOARD_TIMING__DRAIN_GRACE", "1s")
                .env("SWITCHBOARD_TIMING__DRAIN_TIMEOUT", "5s"),
        )
        .await;
        let w = World::create(&gw, if blackhole { "hole" } else { "gone" }).await;
        let mut ws = gw.ws_ready(&w.rex, None).await;
        // A held long-poll as well, so both kinds of session are draining.
        let poll = {
            let http = gw.http.clone();
            let url = gw.url("/api/agent-api/updates?wait=25");
            let token = w.brain.clone();
            tokio::spawn(async move { http.get(url).bearer_auth(token).send().await })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;

        if blackhole {
            proxy.delay(Duration::from_secs(3600));
        } else {
            proxy.cut();
        }
        // Something that touches the store while it is gone.
        let (s, _, _) = timed_post(&gw, &w.ana, "into the void").await;
        assert_ne!(s, 201, "the store is gone");

        let asked = Instant::now();
        gw.send_signal("-TERM");
        let (code, frames) = ws.expect_close(Duration::from_secs(15)).await;
        assert_eq!(code, Some(4003), "{frames:?}");
        // grace 1 s + drain 5 s + the store's 5 s command bound + margin.
        let exited = gw.wait_for_exit(Duration::from_secs(25));
        assert!(
            exited.is_some(),
            "blackhole={blackhole}: still running {:?} after SIGTERM",
            asked.elapsed()
        );
        let _ = poll.await;
    }
}

/// A client that gives up while its session is still opening (the store
/// is slow, as under a reconnect storm after a node restart) must free
/// its connection at once, not when the opening finishes: otherwise every
/// client that times out and comes back adds a socket and a queued replay,
/// and the storm never drains.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_mid_opening_frees_its_connection_at_once() {
    let redis = RedisServer::start(false);
    let proxy = FaultProxy::start(redis.port()).await;
    let gw = Gateway::spawn_with(Opts::default().redis(&proxy.url())).await;
    let w = World::create(&gw, "leavers").await;
    // Warm the token cache, so the upgrade itself does not wait on Redis.
    gw.ws_ready(&w.rex, None).await.close().await;
    for token in [&w.brain, &w.scout] {
        let (s, body) = gw.updates(token, None, "0").await;
        assert_eq!(s, 200, "{body}");
    }
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            gw.metric("switchboard_connections").await == 0.0
        })
        .await
    );

    // Every store round trip now takes ~3 s (1.5 s each way): an opening
    // (announce, roster changes, replay read) takes well over 5 s, though
    // no single command passes the store's 5 s bound.
    proxy.delay(Duration::from_millis(1500));
    let mut sockets = Vec::new();
    for _ in 0..5 {
        let mut ws = gw.ws(&w.rex).await;
        ws.hello(None).await;
        sockets.push(ws);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let opening = gw.metric("switchboard_connections").await;
    assert!(opening >= 1.0, "the sessions were not opening: {opening}");
    let left = Instant::now();
    for ws in sockets {
        ws.close().await;
    }

    // Far sooner than the opening would have taken.
    let freed = common::eventually(Duration::from_secs(3), || async {
        gw.metric("switchboard_connections").await == 0.0
    })
    .await;
    assert!(
        freed,
        "connections still held {:?} after their clients left",
        left.elapsed()
    );

    // The same for long-polls and an SSE stream (another token each: a
    // newer call of one token would displace the older), each on a
    // connection of its own.
    let mut polls = Vec::new();
    for (token, path) in [
        (&w.brain, "/api/agent-api/updates?wait=25"),
        (&w.scout, "/api/agent-api/updates?wait=25"),
        (&w.rex, "/api/agent-api/events"),
    ] {
        let http = reqwest::Client::new();
        let url = gw.url(path);
        let token = token.clone();
        polls.push(tokio::spawn(async move {
            http.get(url).bearer_auth(token).send().await
        }));
    }
    // Admitted once the rate limit answered (one slow round trip); the
    // opening after it takes several more.
    let admitted = common::eventually(Duration::from_secs(10), || async {
        gw.metric("switchboard_connections").await >= 3.0
    })
    .await;
    assert!(admitted, "the polls were not opening");
    let left = Instant::now();
    for poll in polls {
        poll.abort();
    }
    let freed = common::eventually(Duration::from_secs(3), || async {
        gw.metric("switchboard_connections").await == 0.0
    })
    .await;
    assert!(
        freed,
        "polls still held {:?} after their clients left",
        left.elapsed()
    );
    proxy.heal();
}

/// Posts of one conversation run one at a time. With Redis stuck, each
/// post is still answered within the deadline counted from its own
/// arrival, not after every post ahead of it has timed out in turn; and a
/// post that never reached Redis is never stored, though answered 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn posts_queued_in_a_conversation_are_answered_in_time_and_not_stored_late() {
    let redis = RedisServer::start(false);
    let gw = Gateway::spawn_with(Opts::default().redis(&redis.url())).await;
    let w = World::create(&gw, "queued").await;
    let (s, b, _) = timed_post(&gw, &w.ana, "warm").await;
    assert_eq!(s, 201, "{b}");
    redis.cmd(&["CLIENT", "PAUSE", "20000", "WRITE"]);
    let posts = (0..4).map(|i| {
        let (gw, ana) = (&gw, &w.ana);
        async move { timed_post(gw, ana, &format!("queued {i}")).await }
    });
    let answers = futures_util::future::join_all(posts).await;
    redis.cmd(&["CLIENT", "UNPAUSE"]);
    for (s, b, took) in &answers {
        // The 5 s deadline, with margin for a loaded machine; before, the
        // fourth post took four timeouts (20 s).
        assert!(*took < Duration::from_secs(9), "answered after {took:?}");
        assert_error(*s, b, 503, "STORE_UNAVAILABLE");
    }
    // Only the post whose append was in Redis when it stuck may be stored.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (s, history) = gw.get(&w.ana, "/conversations/group/messages").await;
    assert_eq!(s, 200, "{history}");
    let stored = history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["content"].as_str().unwrap().starts_with("queued"))
        .count();
    assert!(
        stored <= 1,
        "{stored} of the queued posts were stored: {history}"
    );
}
