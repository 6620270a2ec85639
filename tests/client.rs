//! The reference client (`switchboard-client`) against real gateway
//! processes: two nodes on one Redis behind a real nginx (the shipped
//! config), and single nodes for the reset path. Whatever happens to the
//! node, the proxy or the token, the caller sees every accepted message
//! once, in order per conversation, or a clear stop.

mod common;

use common::nginx::*;
use common::*;
use futures_util::StreamExt;
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchboard_client::{
    Checkpoint, Client, CursorStore, Listener, ListenerConfig, MemoryCursorStore, Transport,
    TransportChoice, Update,
};

const BAY: &str = "b1";

/// What a listener handed its caller so far.
#[derive(Default)]
struct Seen {
    /// Event objects (live, recovered and unknown kinds), in order.
    events: Vec<Value>,
    /// Recovered (REST catch-up) message ids.
    recovered: Vec<String>,
    /// Each transport the listener announced, in order.
    transports: Vec<Transport>,
    /// The error the listener stopped with.
    stopped: Option<String>,
    /// Reasons of the failed attempts it reported.
    retries: Vec<String>,
}

impl Seen {
    fn message_ids(&self, conversation: &str) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| e["type"] == "message" && e["conversationId"] == conversation)
            .map(|e| e["message"]["id"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    fn on(&self) -> Option<Transport> {
        self.transports.last().copied()
    }
}

/// A listener running in the background, recording what it yields.
struct Running {
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    fn start(
        base: &str,
        token: &str,
        store: Arc<dyn CursorStore>,
        config: ListenerConfig,
    ) -> Running {
        let client = Client::new(base, token).expect("client");
        let mut listener = Listener::start(client, store, config).expect("listener");
        let seen = Arc::new(Mutex::new(Seen::default()));
        let s = seen.clone();
        let task = tokio::spawn(async move {
            while let Some(update) = listener.next().await {
                let mut seen = s.lock().unwrap();
                match update {
                    Ok(Update::TransportChanged(t)) => seen.transports.push(t),
                    Ok(Update::Retrying { reason, .. }) => seen.retries.push(reason),
                    Ok(Update::CatchUp { .. }) => {}
                    Ok(Update::Recovered { raw, .. }) => {
                        seen.recovered
                            .push(raw["message"]["id"].as_str().unwrap_or_default().to_owned());
                        seen.events.push(raw);
                    }
                    Ok(other) => seen
                        .events
                        .push(other.raw().cloned().unwrap_or(Value::Null)),
                    Err(e) => {
                        seen.stopped = Some(format!("{e:?}"));
                        return;
                    }
                }
            }
        });
        Running { seen, task }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap()
    }

    async fn until(&self, what: &str, check: impl Fn(&Seen) -> bool) {
        let ok = eventually(Duration::from_secs(60), || async { check(&self.seen()) }).await;
        let seen = self.seen();
        assert!(
            ok,
            "{what}: transports {:?}, stopped {:?}, {} events, retries {:?}",
            seen.transports,
            seen.stopped,
            seen.events.len(),
            seen.retries
        );
    }

    /// Asserts that `accepted` arrived exactly once each, in order, among
    /// `conversation`'s messages (a send that failed at the proxy may have
    /// been stored too, so other ids may be interleaved).
    async fn has_exactly_once_in_order(&self, conversation: &str, accepted: &[String]) {
        self.until("every accepted message arrived", |s| {
            let got = s.message_ids(conversation);
            accepted.iter().all(|id| got.contains(id))
        })
        .await;
        let got = self.seen().message_ids(conversation);
        let mut sorted = got.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(
            sorted.len(),
            got.len(),
            "duplicates handed to the caller: {got:?}"
        );
        let order: Vec<&String> = got.iter().filter(|id| accepted.contains(id)).collect();
        let expected: Vec<&String> = accepted.iter().collect();
        assert_eq!(order, expected, "order per conversation");
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Short delays and a short probe interval: tests assert behaviour, and
/// these only make it arrive sooner.
fn fast(transport: TransportChoice) -> ListenerConfig {
    ListenerConfig {
        transport,
        backoff_initial: Duration::from_millis(50),
        backoff_max: Duration::from_millis(500),
        probe_interval: Duration::from_secs(2),
        updates_wait: 5,
        read_timeout: Duration::from_secs(30),
        ..ListenerConfig::default()
    }
}

/// `switchboard_connections{transport}` of each node.
async fn holder(d: &Deployment, transport: &str) -> Option<usize> {
    for (i, node) in d.nodes.iter().enumerate() {
        let res = node.http.get(node.url("/metrics")).send().await.ok()?;
        let text = res.text().await.ok()?;
        let needle = format!("switchboard_connections{{transport=\"{transport}\"}}");
        let n = text
            .lines()
            .find(|l| l.starts_with(&needle))
            .and_then(|l| l.split_whitespace().last())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0);
        if n >= 1.0 {
            return Some(i);
        }
    }
    None
}

/// Sends `n` messages as `token` through the proxy, one after another;
/// returns the ids of those accepted (201). A send in flight to a node
/// being killed fails (and is not retried: it may have been stored).
async fn send_through(
    d: &Deployment,
    token: &str,
    conversation: &str,
    n: usize,
    label: &str,
) -> Vec<String> {
    let client = Client::new(&d.lb.url(""), token).unwrap();
    let mut accepted = Vec::new();
    for i in 0..n {
        if let Ok(m) = client
            .send(conversation, &format!("{label} {i}"), &Default::default())
            .await
        {
            accepted.push(id_of(&m));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    accepted
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_node_that_holds_the_socket_loses_nothing() {
    let mut d = Deployment::start().await;
    let w = World::create(&d.nodes[0], BAY).await;
    let l = Running::start(
        &d.lb.url(""),
        &w.rex,
        Arc::new(MemoryCursorStore::new()),
        fast(TransportChoice::Auto),
    );
    l.until("on the websocket", |s| s.on() == Some(Transport::WebSocket))
        .await;
    let mut accepted = send_through(&d, &w.ana, "group", 20, "before").await;
    let victim = holder(&d, "ws").await.expect("a node holds the socket");
    d.nodes[victim].kill_now();
    accepted.extend(send_through(&d, &w.ana, "group", 30, "after").await);
    l.has_exactly_once_in_order("group", &accepted).await;
    assert!(l.seen().stopped.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_that_refuses_upgrades_moves_the_client_to_long_polls_and_back() {
    let mut d = Deployment::start().await;
    let w = World::create(&d.nodes[0], BAY).await;
    let l = Running::start(
        &d.lb.url(""),
        &w.rex,
        Arc::new(MemoryCursorStore::new()),
        fast(TransportChoice::Auto),
    );
    l.until("on the websocket", |s| s.on() == Some(Transport::WebSocket))
        .await;
    let mut accepted = send_through(&d, &w.ana, "group", 10, "ws").await;

    // The proxy stops passing upgrades; the socket it holds goes with its node.
    d.lb.reload(&refusing_upgrades(&d.lb.shipped_site()));
    let victim = holder(&d, "ws").await.expect("a node holds the socket");
    d.nodes[victim].kill_now();
    accepted.extend(send_through(&d, &w.ana, "group", 10, "during").await);
    l.until("fell back to /updates", |s| {
        s.on() == Some(Transport::Updates)
    })
    .await;
    accepted.extend(send_through(&d, &w.ana, "group", 10, "polling").await);
    l.has_exactly_once_in_order("group", &accepted).await;

    // Upgrades pass again: the next probe returns the client to /ws.
    d.lb.reload(&d.lb.shipped_site());
    l.until("back on the websocket", |s| {
        s.transports
            .ends_with(&[Transport::Updates, Transport::WebSocket])
    })
    .await;
    accepted.extend(send_through(&d, &w.ana, "group", 10, "ws again").await);
    l.has_exactly_once_in_order("group", &accepted).await;
    assert!(l.seen().stopped.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sockets_that_keep_breaking_move_the_client_to_long_polls() {
    let d = Deployment::start().await;
    let w = World::create(&d.nodes[0], BAY).await;
    // The proxy cuts every socket after a second of silence; the server
    // only pings every 20 s.
    d.lb.reload(&cutting_sockets(&d.lb.shipped_site(), 1));
    let l = Running::start(
        &d.lb.url(""),
        &w.rex,
        Arc::new(MemoryCursorStore::new()),
        ListenerConfig {
            probe_interval: Duration::from_secs(600),
            ..fast(TransportChoice::Auto)
        },
    );
    let mut accepted = send_through(&d, &w.ana, "group", 5, "early").await;
    l.until("fell back to /updates", |s| {
        s.on() == Some(Transport::Updates)
    })
    .await;
    accepted.extend(send_through(&d, &w.ana, "group", 10, "polling").await);
    l.has_exactly_once_in_order("group", &accepted).await;
    assert!(l.seen().stopped.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draining_the_node_moves_the_client_to_the_other_with_its_cursor() {
    let mut d = Deployment::start().await;
    let w = World::create(&d.nodes[0], BAY).await;
    let l = Running::start(
        &d.lb.url(""),
        &w.rex,
        Arc::new(MemoryCursorStore::new()),
        fast(TransportChoice::Auto),
    );
    l.until("on the websocket", |s| s.on() == Some(Transport::WebSocket))
        .await;
    let mut accepted = send_through(&d, &w.ana, "dm", 10, "before").await;
    let victim = holder(&d, "ws").await.expect("a node holds the socket");
    d.nodes[victim].send_signal("-TERM");
    accepted.extend(send_through(&d, &w.ana, "dm", 20, "after").await);
    l.has_exactly_once_in_order("dm", &accepted).await;
    let other = 1 - victim;
    assert!(
        eventually(Duration::from_secs(20), || async {
            holder(&d, "ws").await == Some(other)
        })
        .await,
        "the socket moved to the surviving node"
    );
    assert!(d.nodes[victim]
        .wait_for_exit(Duration::from_secs(20))
        .is_some());
    assert!(l.seen().stopped.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotating_the_token_stops_the_client_with_an_auth_error() {
    for transport in [
        TransportChoice::Auto,
        TransportChoice::Updates,
        TransportChoice::Sse,
    ] {
        let d = Deployment::start().await;
        let w = World::create(&d.nodes[0], BAY).await;
        let l = Running::start(
            &d.lb.url(""),
            &w.rex,
            Arc::new(MemoryCursorStore::new()),
            fast(transport),
        );
        l.until("connected", |s| s.on().is_some()).await;
        d.nodes[0].rotate_token(BAY, "rex").await;
        l.until("stopped", |s| s.stopped.is_some()).await;
        let stopped = l.seen().stopped.clone().unwrap();
        assert!(
            stopped.starts_with("Unauthorized"),
            "{transport:?}: {stopped}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_sse_killing_the_node_loses_nothing() {
    let mut d = Deployment::start().await;
    let w = World::create(&d.nodes[0], BAY).await;
    let l = Running::start(
        &d.lb.url(""),
        &w.rex,
        Arc::new(MemoryCursorStore::new()),
        fast(TransportChoice::Sse),
    );
    l.until("on sse", |s| s.on() == Some(Transport::Sse)).await;
    let mut accepted = send_through(&d, &w.ana, "group", 15, "before").await;
    let victim = holder(&d, "sse").await.expect("a node holds the stream");
    d.nodes[victim].kill_now();
    accepted.extend(send_through(&d, &w.ana, "group", 15, "after").await);
    l.has_exactly_once_in_order("group", &accepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_listener_on_the_token_displaces_the_first_which_stops() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    let base = format!("http://{}", gw.addr);
    let first = Running::start(
        &base,
        &w.rex,
        Arc::new(MemoryCursorStore::new()),
        fast(TransportChoice::Ws),
    );
    first.until("connected", |s| s.on().is_some()).await;
    let second = Running::start(
        &base,
        &w.rex,
        Arc::new(MemoryCursorStore::new()),
        fast(TransportChoice::Sse),
    );
    first.until("stopped", |s| s.stopped.is_some()).await;
    assert_eq!(first.seen().stopped.as_deref(), Some("Displaced"));
    second.until("connected", |s| s.on().is_some()).await;
    let (s, m) = gw.post_message(&w.ana, "dm", "to the second").await;
    assert_eq!(s, 201, "{m}");
    second.has_exactly_once_in_order("dm", &[id_of(&m)]).await;
}

/// An older `/updates` loop whose held poll a newer WebSocket listener
/// displaced stops with `Displaced` (the answer says so in its header),
/// instead of polling again and displacing the newer one in turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_websocket_listener_stays_and_the_older_updates_listener_stops() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    let base = format!("http://{}", gw.addr);
    let older = Running::start(
        &base,
        &w.rex,
        Arc::new(MemoryCursorStore::new()),
        fast(TransportChoice::Updates),
    );
    older.until("connected", |s| s.on().is_some()).await;
    gw.until_held(1).await;
    let newer = Running::start(
        &base,
        &w.rex,
        Arc::new(MemoryCursorStore::new()),
        fast(TransportChoice::Ws),
    );
    newer.until("connected", |s| s.on().is_some()).await;
    older.until("stopped", |s| s.stopped.is_some()).await;
    assert_eq!(older.seen().stopped.as_deref(), Some("Displaced"));
    // Longer than a poll's wait: the older loop would have polled again.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let (s, m) = gw.post_message(&w.ana, "dm", "to the newer").await;
    assert_eq!(s, 201, "{m}");
    newer.has_exactly_once_in_order("dm", &[id_of(&m)]).await;
    assert!(newer.seen().stopped.is_none(), "{:?}", newer.seen().stopped);
    assert!(older.seen().events.is_empty());
}

/// The stored cursor fell out of the replay buffer (the log keeps only a
/// few entries here): the client gets `reset` / 409, catches up over REST
/// and carries on without a cursor, on every transport.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_cursor_is_recovered_over_rest_on_every_transport() {
    let gw = Gateway::spawn_with(Opts::default().env("SWITCHBOARD_REPLAY_MAX_ENTRIES", "3")).await;
    let w = World::create(&gw, BAY).await;
    let base = format!("http://{}", gw.addr);
    for transport in [
        TransportChoice::Ws,
        TransportChoice::Updates,
        TransportChoice::Sse,
    ] {
        // Before the first run: never the listener's to recover.
        let (s, before) = gw.post_message(&w.ana, "dm", "before the first run").await;
        assert_eq!(s, 201, "{before}");
        let store = Arc::new(MemoryCursorStore::new());
        let first = Running::start(&base, &w.rex, store.clone(), fast(transport));
        first.until("connected", |s| s.on().is_some()).await;
        let (s, m) = gw.post_message(&w.ana, "dm", "seen live").await;
        assert_eq!(s, 201, "{m}");
        first.has_exactly_once_in_order("dm", &[id_of(&m)]).await;
        let live = id_of(&m);
        // Saved with the checkpoint: the conversation's last message taken.
        assert!(
            eventually(Duration::from_secs(10), || async {
                store
                    .load()
                    .unwrap()
                    .and_then(|c| c.delivered.get("dm").cloned())
                    .is_some_and(|d| d.ids == [live.clone()])
            })
            .await,
            "{transport:?}: {:?}",
            store.load()
        );
        assert!(
            eventually(Duration::from_secs(10), || async {
                store.load().unwrap().is_some()
            })
            .await
        );
        drop(first);

        // Away: more messages than the log keeps.
        let mut missed = Vec::new();
        for i in 0..8 {
            let (s, m) = gw.post_message(&w.ana, "dm", &format!("missed {i}")).await;
            assert_eq!(s, 201, "{m}");
            missed.push(id_of(&m));
        }
        let second = Running::start(&base, &w.rex, store.clone(), fast(transport));
        second.has_exactly_once_in_order("dm", &missed).await;
        // A new process: no memory of the first run but the checkpoint, which
        // is enough to hand over neither what it took nor what preceded it.
        let got = second.seen().message_ids("dm");
        assert_eq!(
            got, missed,
            "{transport:?}: only what the first run did not take"
        );
        assert!(
            !second.seen().recovered.is_empty(),
            "{transport:?}: recovered over REST"
        );
        let (s, m) = gw.post_message(&w.ana, "dm", "live again").await;
        assert_eq!(s, 201, "{m}");
        let mut all = missed.clone();
        all.push(id_of(&m));
        second.has_exactly_once_in_order("dm", &all).await;
        // The cursor kept after the reset is a fresh one.
        let saved: Checkpoint = store.load().unwrap().unwrap();
        assert!(!saved.cursor.is_empty());
        drop(second);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspension_stops_the_client_on_every_transport_instead_of_retrying() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    for transport in [
        TransportChoice::Auto,
        TransportChoice::Ws,
        TransportChoice::Updates,
        TransportChoice::Sse,
    ] {
        // Suspended while connected: the session's end stops it.
        let l = Running::start(
            &gw.url(""),
            &w.rex,
            Arc::new(MemoryCursorStore::new()),
            fast(transport),
        );
        l.until("connected", |s| s.on().is_some()).await;
        let (s, b) = gw
            .admin(
                reqwest::Method::POST,
                "/bays/b1/participants/rex/suspend",
                None,
            )
            .await;
        assert_eq!(s, 200, "{b}");
        l.until("stopped", |s| s.stopped.is_some()).await;
        let stopped = l.seen().stopped.clone().unwrap();
        assert!(
            stopped.starts_with("Suspended") && stopped.contains("ACCOUNT_SUSPENDED"),
            "{transport:?}: {stopped}"
        );

        // Started while the Bay is suspended: the refusal stops it too.
        let (s, b) = gw
            .admin(reqwest::Method::POST, "/bays/b1/suspend", None)
            .await;
        assert_eq!(s, 200, "{b}");
        let l = Running::start(
            &gw.url(""),
            &w.brain,
            Arc::new(MemoryCursorStore::new()),
            fast(transport),
        );
        l.until("stopped", |s| s.stopped.is_some()).await;
        let stopped = l.seen().stopped.clone().unwrap();
        assert!(
            stopped.starts_with("Suspended") && stopped.contains("BAY_SUSPENDED"),
            "{transport:?}: {stopped}"
        );
        for path in ["/bays/b1/reinstate", "/bays/b1/participants/rex/reinstate"] {
            let (s, b) = gw.admin(reqwest::Method::POST, path, None).await;
            assert_eq!(s, 200, "{b}");
        }
    }
}
