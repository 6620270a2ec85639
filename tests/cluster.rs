//! Several nodes on one Redis (`--store redis`): real `switchboard`
//! processes, a real `redis-server`, real clients.
//!
//! Fan-out and cursors across nodes, displacement and revocation across
//! nodes, cluster-wide rate limits, a node killed mid-stream, Redis
//! restarted with and without persistence, and replay-window trimming.

mod common;

use common::*;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchboard_protocol::cursor::{EntryId, LogPosition};
use switchboard_protocol::error::WsClose;

const BAY: &str = "b1";

/// One Redis and `n` gateways on it.
struct Cluster {
    redis: RedisServer,
    nodes: Vec<Gateway>,
}

impl Cluster {
    async fn start(aof: bool, n: usize, opts: Opts) -> Cluster {
        let redis = RedisServer::start(aof);
        let mut nodes = Vec::new();
        for _ in 0..n {
            nodes.push(Gateway::spawn_with(opts.clone().redis(&redis.url())).await);
        }
        Cluster { redis, nodes }
    }

    fn addrs(&self) -> Vec<String> {
        self.nodes.iter().map(|g| g.addr.clone()).collect()
    }
}

fn event_ids(events: &[Value]) -> Vec<String> {
    events.iter().map(|e| id_of(&e["message"])).collect()
}

fn entry_of(cursor: &str) -> EntryId {
    LogPosition::decode(cursor)
        .unwrap_or_else(|e| panic!("cursor {cursor:?} does not decode: {e}"))
        .entry
}

// ---------------------------------------------------------------- fan-out and cursors

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_posted_on_one_node_reaches_the_others_and_cursors_work_on_every_node() {
    let c = Cluster::start(false, 3, Opts::default()).await;
    let [n1, n2, n3] = [&c.nodes[0], &c.nodes[1], &c.nodes[2]];
    let w = World::create(n1, BAY).await;

    // Rex over WS on node 2, Bay Brain over /updates on node 3.
    let mut ws = n2.ws_ready(&w.rex, None).await;
    let (_, _) = ws.read_batch().await;
    let (s, first) = n3.updates(&w.brain, None, "1").await;
    assert_eq!(s, 200, "{first}");
    let held = spawn_poll(&n3.addr, &w.brain, first["cursor"].as_str(), "20");
    n3.until_held(1).await;

    let (s, posted) = n1
        .post_message(&w.ana, "group", "hello from node 1, @Rex")
        .await;
    assert_eq!(s, 201, "{posted}");
    let (events, _) = ws.read_batch().await;
    assert_eq!(event_ids(&events), vec![id_of(&posted)]);
    assert_eq!(events[0]["message"]["shouldRespond"], true);
    let (s, body, held_for) = held.await.unwrap();
    assert_eq!(s, 200, "{body}");
    assert_eq!(
        event_ids(body["events"].as_array().unwrap()),
        vec![id_of(&posted)]
    );
    assert!(held_for < Duration::from_secs(10), "{held_for:?}");
    ws.close().await;

    // Cursors issued by node 1 (a poll's and a socket's) resume on node 3.
    let (s, b) = n1.updates(&w.scout, None, "1").await;
    assert_eq!(s, 200, "{b}");
    let poll_cursor = b["cursor"].as_str().unwrap().to_owned();
    let mut ben = n1.ws_ready(&w.ben, None).await;
    let (_, ws_cursor) = ben.read_batch().await;
    ben.close().await;
    let mut sent = Vec::new();
    for i in 0..3 {
        let (s, m) = n2
            .post_message(&w.ana, "group", &format!("while away {i}"))
            .await;
        assert_eq!(s, 201, "{m}");
        sent.push(id_of(&m));
    }
    let (s, b) = n3.updates(&w.scout, Some(&poll_cursor), "1").await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(event_ids(b["events"].as_array().unwrap()), sent);
    let mut ben = n3.ws_ready(&w.ben, Some(&ws_cursor)).await;
    let (events, _) = ben.read_batch().await;
    assert_eq!(event_ids(&events), sent);
    // …and a WS cursor works as an /updates cursor on yet another node.
    let (s, b) = n2.updates(&w.rex, Some(&ws_cursor), "1").await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(event_ids(b["events"].as_array().unwrap()), sent);
}

// ---------------------------------------------------------------- displacement

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_connection_on_another_node_displaces_the_older_one() {
    let c = Cluster::start(false, 3, Opts::default()).await;
    let [n1, n2, n3] = [&c.nodes[0], &c.nodes[1], &c.nodes[2]];
    let w = World::create(n1, BAY).await;

    // WS on node 1, then WS of the same token on node 2: node 1 closes 4000.
    let mut old = n1.ws_ready(&w.rex, None).await;
    let (_, _) = old.read_batch().await;
    let mut new = n2.ws_ready(&w.rex, None).await;
    let (_, _) = new.read_batch().await;
    old.expect_server_close(WsClose::Displaced, Duration::from_secs(10))
        .await;
    // The newer one streams on.
    let (s, m) = n3.post_message(&w.ana, "group", "still there?").await;
    assert_eq!(s, 201, "{m}");
    let (events, _) = new.read_batch().await;
    assert_eq!(event_ids(&events), vec![id_of(&m)]);

    // A held /updates on node 1, a new /updates of the same token on node 2:
    // node 1 answers at once, empty.
    let (s, b) = n1.updates(&w.brain, None, "1").await;
    assert_eq!(s, 200, "{b}");
    let cursor = b["cursor"].as_str().unwrap().to_owned();
    let held = spawn_poll(&n1.addr, &w.brain, Some(&cursor), "25");
    n1.until_held(1).await;
    let newer = spawn_poll(&n2.addr, &w.brain, Some(&cursor), "3");
    let (s, b, held_for) = held.await.unwrap();
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["events"], json!([]), "{b}");
    assert!(
        held_for < Duration::from_secs(10),
        "not displaced: {held_for:?}"
    );
    let (s, b, _) = newer.await.unwrap();
    assert_eq!(s, 200, "{b}");

    // A /updates on node 3 displaces the socket on node 2 as well.
    let (s, b) = n3.updates(&w.rex, None, "1").await;
    assert_eq!(s, 200, "{b}");
    new.expect_server_close(WsClose::Displaced, Duration::from_secs(10))
        .await;
}

// ---------------------------------------------------------------- revocation

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotating_a_token_on_one_node_ends_its_connections_on_the_others() {
    let c = Cluster::start(false, 3, Opts::default()).await;
    let [n1, n2, n3] = [&c.nodes[0], &c.nodes[1], &c.nodes[2]];
    let w = World::create(n1, BAY).await;

    let mut ws = n2.ws_ready(&w.rex, None).await;
    let (_, _) = ws.read_batch().await;
    let new_rex = n1.rotate_token(BAY, "rex").await;
    ws.expect_server_close(WsClose::CredentialRevoked, Duration::from_secs(10))
        .await;
    for node in &c.nodes {
        let (s, b) = node.get(&w.rex, "/me").await;
        assert_error(s, &b, 401, "UNAUTHORIZED");
        let (s, b) = node.get(&new_rex, "/me").await;
        assert_eq!(s, 200, "{b}");
    }

    let (s, b) = n3.updates(&w.brain, None, "1").await;
    assert_eq!(s, 200, "{b}");
    let held = spawn_poll(&n3.addr, &w.brain, b["cursor"].as_str(), "25");
    n3.until_held(1).await;
    let new_brain = n1.rotate_token(BAY, "brain").await;
    let (s, b, held_for) = held.await.unwrap();
    assert_error(s, &b, 401, "UNAUTHORIZED");
    assert!(held_for < Duration::from_secs(10), "{held_for:?}");
    let (s, b) = n2.updates(&new_brain, None, "1").await;
    assert_eq!(s, 200, "{b}");
}

// ---------------------------------------------------------------- rate limits

/// Every node answers requests from its token cache once it has seen a
/// token; a rotation or revocation made through another node must still
/// reach it (through the Bay's log) within a second, on every route.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_cached_on_every_node_stops_working_everywhere_within_a_second() {
    let c = Cluster::start(false, 3, Opts::default()).await;
    let n1 = &c.nodes[0];
    let w = World::create(n1, BAY).await;
    // Warm every node's cache (and its Bay feed) with both tokens.
    for node in &c.nodes {
        assert!(
            eventually(Duration::from_secs(5), || async {
                node.get(&w.rex, "/me").await.0 == 200 && node.get(&w.brain, "/me").await.0 == 200
            })
            .await
        );
    }
    let new_rex = n1.rotate_token(BAY, "rex").await;
    n1.revoke_token(BAY, "brain").await;
    let rotated = std::time::Instant::now();
    for node in &c.nodes {
        for (token, what) in [(&w.rex, "rotated"), (&w.brain, "revoked")] {
            let refused = eventually(Duration::from_secs(1), || async {
                node.get(token, "/me").await.0 == 401
            })
            .await;
            assert!(
                refused,
                "a {what} token still works on {} after 1 s",
                node.addr
            );
            let (s, b) = node.post_message(token, "group", "from a dead token").await;
            assert_error(s, &b, 401, "UNAUTHORIZED");
        }
        let (s, b) = node.get(&new_rex, "/me").await;
        assert_eq!(s, 200, "{b}");
    }
    eprintln!(
        "all nodes refused the old tokens {:?} after the change",
        rotated.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_are_counted_across_every_node() {
    let c = Cluster::start(
        false,
        3,
        Opts::default()
            .env("SWITCHBOARD_LIMITS__UPDATES_PER_MINUTE", "4")
            .env("SWITCHBOARD_LIMITS__AGENT_REQUESTS_PER_MINUTE", "6"),
    )
    .await;
    let n = &c.nodes;
    let w = World::create(&n[0], BAY).await;

    // /updates bucket (4/min): three polls and one WebSocket connect spread
    // over the nodes use it up; the fifth call, on any node, is refused.
    for (i, node) in [&n[0], &n[1], &n[2]].into_iter().enumerate() {
        let (s, b) = node.updates(&w.rex, None, "1").await;
        assert_eq!(s, 200, "poll {i} on node {}: {b}", i + 1);
    }
    let ws = n[0]
        .ws_try(WsAuth::Header(&w.rex))
        .await
        .unwrap_or_else(|e| panic!("fourth call refused: {e:?}"));
    ws.close().await;
    for node in n {
        let (s, b, headers) = node.updates_full(&w.rex, None, Some("1")).await;
        assert_error(s, &b, 429, "UPDATES_RATE_LIMITED");
        let retry: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
        assert!((1..=15).contains(&retry), "Retry-After {retry}");
    }
    match n[1].ws_try(WsAuth::Header(&w.rex)).await {
        Err((429, b)) => assert_eq!(b["code"], "UPDATES_RATE_LIMITED", "{b}"),
        Err(other) => panic!("{other:?}"),
        Ok(_) => panic!("a WebSocket connect beyond the bucket was accepted"),
    }

    // Agent budget (6/min), separate from the /updates bucket.
    for i in 0..6 {
        let (s, b) = n[i % 3].get(&w.rex, "/me").await;
        assert_eq!(s, 200, "call {i}: {b}");
    }
    for node in n {
        let res = node
            .http
            .get(node.url("/api/agent-api/me"))
            .bearer_auth(&w.rex)
            .send()
            .await
            .unwrap();
        let retry = res.headers().get("retry-after").cloned();
        let s = res.status().as_u16();
        let b: Value = res.json().await.unwrap();
        assert_error(s, &b, 429, "RATE_LIMITED");
        let retry: u64 = retry.unwrap().to_str().unwrap().parse().unwrap();
        assert!((1..=10).contains(&retry), "Retry-After {retry}");
    }
    // Other tokens have their own buckets.
    let (s, b) = n[2].get(&w.brain, "/me").await;
    assert_eq!(s, 200, "{b}");
    let (s, b) = n[2].updates(&w.brain, None, "1").await;
    assert_eq!(s, 200, "{b}");
}

// ---------------------------------------------------------------- a node dies

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_node_mid_stream_loses_no_message() {
    let mut c = Cluster::start(false, 3, Opts::default()).await;
    let w = World::create(&c.nodes[0], BAY).await;
    let a = c.addrs();
    let stop = Arc::new(AtomicBool::new(false));
    // Both readers start on node 3 and fail over to the others.
    let by_ws = Arc::new(Reader::default());
    let by_poll = Arc::new(Reader::default());
    let tasks = [
        ws_reader(
            vec![a[2].clone(), a[0].clone(), a[1].clone()],
            w.rex.clone(),
            by_ws.clone(),
            stop.clone(),
        ),
        poll_reader(
            vec![a[2].clone(), a[1].clone(), a[0].clone()],
            w.brain.clone(),
            by_poll.clone(),
            stop.clone(),
        ),
    ];
    assert!(
        eventually(Duration::from_secs(10), || async {
            by_ws.is_ready() && by_poll.is_ready()
        })
        .await,
        "readers did not start"
    );

    let mut accepted = Vec::new();
    let mut killed = false;
    for i in 0..150 {
        if i == 50 {
            c.nodes[2].kill_now();
            killed = true;
        }
        let node = if killed {
            &c.nodes[i % 2]
        } else {
            &c.nodes[i % 3]
        };
        let res = node
            .http
            .post(node.url("/api/agent-api/conversations/group/messages"))
            .bearer_auth(&w.ana)
            .json(&json!({ "content": format!("steady {i}") }))
            .send()
            .await;
        if let Ok(res) = res {
            let status = res.status().as_u16();
            let body: Value = res.json().await.unwrap_or(Value::Null);
            assert_eq!(status, 201, "{body}");
            accepted.push(id_of(&body));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(accepted.len() >= 140, "{} accepted", accepted.len());
    assert_both_readers_got_everything(&accepted, &by_ws, &by_poll, &stop, tasks, String::new)
        .await;
    // The socket did move: one session on node 3, at least one after.
    assert!(by_ws.sessions() >= 2);
}

// ---------------------------------------------------------------- Redis restarts

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_with_aof_loses_no_accepted_message() {
    let mut c = Cluster::start(true, 3, Opts::default()).await;
    let w = World::create(&c.nodes[0], BAY).await;
    let a = c.addrs();
    let stop = Arc::new(AtomicBool::new(false));
    // The socket is on node 2 only: it must stay open through the outage.
    let by_ws = Arc::new(Reader::default());
    let by_poll = Arc::new(Reader::default());
    let tasks = [
        ws_reader(
            vec![a[1].clone()],
            w.rex.clone(),
            by_ws.clone(),
            stop.clone(),
        ),
        poll_reader(
            vec![a[2].clone()],
            w.brain.clone(),
            by_poll.clone(),
            stop.clone(),
        ),
    ];
    assert!(
        eventually(Duration::from_secs(10), || async {
            by_ws.is_ready() && by_poll.is_ready()
        })
        .await,
        "readers did not start"
    );

    let mut accepted = Vec::new();
    let mut unavailable = 0;
    // Contents of the posts answered 503: the only messages that may exist
    // without having been accepted (the write may land as Redis goes away).
    let mut refused: HashSet<String> = HashSet::new();
    let post = |i: usize| {
        let node = &c.nodes[i % 3];
        let req = node
            .http
            .post(node.url("/api/agent-api/conversations/group/messages"))
            .bearer_auth(&w.ana)
            .json(&json!({ "content": format!("through the outage {i}") }));
        async move {
            let res = req.send().await.expect("the node answers");
            let status = res.status().as_u16();
            let retry = res.headers().contains_key("retry-after");
            let body: Value = res.json().await.unwrap_or(Value::Null);
            (status, retry, body)
        }
    };
    let mut record = |i: usize, (status, retry, body): (u16, bool, Value)| match status {
        201 => accepted.push(id_of(&body)),
        _ => {
            assert_error(status, &body, 503, "STORE_UNAVAILABLE");
            assert!(retry, "503 without Retry-After: {body}");
            unavailable += 1;
            refused.insert(format!("through the outage {i}"));
        }
    };
    for i in 0..30 {
        record(i, post(i).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    c.redis.kill();
    for node in &c.nodes {
        assert_eq!(node.readyz().await, 503, "readyz with Redis down");
    }
    for i in 30..60 {
        record(i, post(i).await);
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    c.redis.restart();
    for node in &c.nodes {
        assert!(
            eventually(Duration::from_secs(10), || async {
                node.readyz().await == 200
            })
            .await,
            "readyz did not recover"
        );
    }
    for i in 60..100 {
        record(i, post(i).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        unavailable >= 25,
        "{unavailable} sends got 503 during the outage"
    );
    assert!(accepted.len() >= 65, "{} accepted", accepted.len());

    assert_both_readers_got_everything(&accepted, &by_ws, &by_poll, &stop, tasks, String::new)
        .await;
    // The socket was never closed: one connection from start to end.
    assert_eq!(by_ws.sessions(), 1);
    // Polls made during the outage were refused with 503 and retried.
    assert!(by_poll.retried.lock().unwrap().contains(&503));
    // No ghost: everything the clients received is in the conversation's
    // history, and whatever there was not accepted is one of the posts
    // that were answered 503.
    let (s, page) = c.nodes[0]
        .get(
            &w.ana,
            "/conversations/group/messages?since=1970-01-01T00:00:00Z&limit=200",
        )
        .await;
    assert_eq!(s, 200, "{page}");
    let history: std::collections::HashMap<String, String> = page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (id_of(m), m["content"].as_str().unwrap().to_owned()))
        .collect();
    let accepted_set: HashSet<&String> = accepted.iter().collect();
    for (who, reader) in [("ws", &by_ws), ("poll", &by_poll)] {
        for id in reader.ids.lock().unwrap().iter() {
            let content = history
                .get(id)
                .unwrap_or_else(|| panic!("{who} got {id}, which is in no history"));
            assert!(
                accepted_set.contains(id) || refused.contains(content),
                "{who} got {id} ({content:?}): neither accepted nor answered 503"
            );
        }
    }
    for (id, content) in &history {
        assert!(
            accepted_set.contains(id) || refused.contains(content),
            "history holds {id} ({content:?}): neither accepted nor answered 503"
        );
    }
}

const RESTART_BOOTSTRAP: &str = r#"
[[bays]]
id = "b1"
name = "Bay One"

[[bays.participants]]
id = "ana"
kind = "user"
name = "Ana"
token = "bay_u_cluster_ana_00000000000000000000"

[[bays.participants]]
id = "rex"
kind = "agent"
name = "Rex"
token = "bay_cluster_rex_0000000000000000000000"

[[bays.participants]]
id = "brain"
kind = "agent"
name = "Bay Brain"
token = "bay_cluster_brain_000000000000000000000"

[[bays.conversations]]
id = "group"
type = "GROUP"
title = "Group"
members = ["ana", "rex", "brain"]
"#;

const ANA: &str = "bay_u_cluster_ana_00000000000000000000";
const REX: &str = "bay_cluster_rex_0000000000000000000000";
const BRAIN: &str = "bay_cluster_brain_000000000000000000000";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_without_persistence_expires_every_old_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bootstrap.toml");
    std::fs::write(&file, RESTART_BOOTSTRAP).unwrap();
    let opts = Opts::default()
        .arg("--bootstrap")
        .arg(file.to_str().unwrap());
    let mut c = Cluster::start(false, 3, opts.clone()).await;
    let [n1, n2, n3] = [&c.nodes[0], &c.nodes[1], &c.nodes[2]];

    // Old cursors from every node and both transports, some with events after them.
    let mut old = Vec::new();
    for node in [n1, n2, n3] {
        let (s, b) = node.updates(REX, None, "1").await;
        assert_eq!(s, 200, "{b}");
        old.push(b["cursor"].as_str().unwrap().to_owned());
        let (s, m) = node.post_message(ANA, "group", "before the loss").await;
        assert_eq!(s, 201, "{m}");
    }
    let mut ws = n2.ws_ready(REX, None).await;
    let (_, ws_cursor) = ws.read_batch().await;
    old.push(ws_cursor);
    // Live sessions during the loss: a socket on node 2, a held poll on node 3.
    let (s, b) = n3.updates(BRAIN, None, "1").await;
    assert_eq!(s, 200, "{b}");
    let held = spawn_poll(&n3.addr, BRAIN, b["cursor"].as_str(), "25");
    old.push(b["cursor"].as_str().unwrap().to_owned());
    n3.until_held(1).await;

    c.redis.restart_empty();
    // Everything is gone, tokens included.
    let (s, b) = n1.get(REX, "/me").await;
    assert_error(s, &b, 401, "UNAUTHORIZED");
    // The live sessions are told their position is gone: `reset`, then
    // the LOG_RESET close.
    let frames = ws
        .expect_server_close(WsClose::LogReset, Duration::from_secs(15))
        .await;
    assert_eq!(
        frames[frames.len() - 2],
        json!({"t": "reset"}),
        "{frames:?}"
    );
    let (s, b, _) = held.await.unwrap();
    assert_error(s, &b, 409, "CURSOR_EXPIRED");

    // A new node re-seeds the same Bay and tokens; the log is new.
    let seeder = Gateway::spawn_with(opts.redis(&c.redis.url())).await;
    for i in 0..3 {
        let (s, m) = seeder
            .post_message(ANA, "group", &format!("after {i}"))
            .await;
        assert_eq!(s, 201, "{m}");
    }
    let [n1, n2, n3] = [&c.nodes[0], &c.nodes[1], &c.nodes[2]];
    for (i, cursor) in old.iter().enumerate() {
        for node in [n1, n2, n3, &seeder] {
            let (s, b) = node.updates(REX, Some(cursor), "1").await;
            assert_error(s, &b, 409, "CURSOR_EXPIRED");
            // Same cursor over a socket: ready, then reset, never the new log's events.
            let mut ws = node.ws_ready(REX, Some(cursor)).await;
            let f = ws.next_json().await;
            assert_eq!(f, json!({"t": "reset"}), "cursor {i} on {}", node.addr);
            let (events, _) = ws.read_batch().await;
            assert!(events.is_empty(), "{events:?}");
            ws.close().await;
        }
    }
    // Starting over works on every node.
    for node in [n1, n2, n3] {
        let (s, b) = node.updates(REX, None, "1").await;
        assert_eq!(s, 200, "{b}");
    }
}

/// Nodes cache each conversation's roster for their write path. After Redis
/// lost everything and the Bay was re-provisioned with the same ids but
/// other members, no node may route by the roster it cached before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_reprovisioned_after_a_data_loss_is_routed_by_its_new_roster() {
    let mut c = Cluster::start(false, 2, Opts::default()).await;
    let provision = |members: [&'static str; 2]| {
        let node = &c.nodes[0];
        async move {
            node.create_bay(BAY).await;
            let mut tokens = Vec::new();
            for (id, kind, name) in [
                ("ana", "user", "Ana"),
                ("ben", "user", "Ben"),
                ("rex", "agent", "Rex"),
            ] {
                tokens.push(node.create_participant(BAY, id, kind, name).await);
            }
            node.create_conversation(BAY, "g2", "GROUP", &members).await;
            tokens
        }
    };
    let before = provision(["ana", "rex"]).await;
    // Every node caches g2 = {ana, rex}.
    for node in &c.nodes {
        let (s, b) = node.post_message(&before[2], "g2", "rex, before").await;
        assert_eq!(s, 201, "{b}");
    }
    c.redis.restart_empty();
    for node in &c.nodes {
        assert!(
            eventually(Duration::from_secs(10), || async {
                node.readyz().await == 200
            })
            .await,
            "readyz did not recover"
        );
    }
    let after = provision(["ana", "ben"]).await;
    for node in &c.nodes {
        let (s, b) = node
            .post_message(&after[2], "g2", "rex, no longer a member")
            .await;
        assert_error(s, &b, 404, "NOT_FOUND");
        let (s, b) = node
            .post_message(&after[1], "g2", "ben, a member now")
            .await;
        assert_eq!(s, 201, "{b}");
    }
}

/// Redis `MONITOR` from a test: every command Redis runs, as its log lines.
struct Monitor {
    lines: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Monitor {
    fn start(redis: &RedisServer) -> Monitor {
        use std::io::{BufRead, BufReader, Write};
        let mut conn = std::net::TcpStream::connect(("127.0.0.1", redis.port())).unwrap();
        conn.write_all(b"MONITOR\r\n").unwrap();
        let lines = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(conn).lines() {
                let Ok(line) = line else { return };
                sink.lock().unwrap().push(line);
            }
        });
        Monitor { lines }
    }

    /// Every command Redis ran between the `ECHO <from>` and `ECHO <to>`
    /// markers, those scripts ran included.
    fn all_commands_between(&self, from: &str, to: &str) -> Vec<String> {
        self.between(from, to, true)
    }

    /// The commands clients sent (not those scripts ran) between the
    /// `ECHO <from>` and `ECHO <to>` markers.
    fn client_commands_between(&self, from: &str, to: &str) -> Vec<String> {
        self.between(from, to, false)
    }

    fn between(&self, from: &str, to: &str, with_scripts: bool) -> Vec<String> {
        let lines = self.lines.lock().unwrap();
        let at = |m: &str| {
            lines
                .iter()
                .position(|l| l.contains("\"ECHO\"") && l.contains(m))
                .unwrap_or_else(|| panic!("marker {m} not seen by MONITOR"))
        };
        let (a, b) = (at(from), at(to));
        lines[a + 1..b]
            .iter()
            .filter(|l| with_scripts || !l.contains(" lua]"))
            .cloned()
            .collect()
    }
}

/// The write path's budget (docs/redis.md, "The write path"): once warm, a
/// post costs Redis one command (the append script, which takes the agent
/// budget too) plus a fraction of each node's tail read; nothing else is
/// read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_post_costs_redis_at_most_two_commands() {
    let c = Cluster::start(false, 1, Opts::default()).await;
    let node = &c.nodes[0];
    let w = World::create(node, BAY).await;
    // Warm: the token cache, the conversation's routing cache, the feed.
    for i in 0..3 {
        let (s, b) = node
            .post_message(&w.ana, "group", &format!("warm {i}"))
            .await;
        assert_eq!(s, 201, "{b}");
    }
    let monitor = Monitor::start(&c.redis);
    tokio::time::sleep(Duration::from_millis(200)).await;
    c.redis.cmd(&["ECHO", "sb-budget-start"]);
    const POSTS: usize = 30;
    for i in 0..POSTS {
        let (s, b) = node
            .post_message(&w.ana, "group", &format!("steady {i}"))
            .await;
        assert_eq!(s, 201, "{b}");
    }
    // Let the feed read the last entries.
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.redis.cmd(&["ECHO", "sb-budget-end"]);
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The webhook supervisor's scan of webhook owners runs on a timer, not
    // per post: on a slow machine the window can hold one.
    let commands: Vec<String> = monitor
        .client_commands_between("sb-budget-start", "sb-budget-end")
        .into_iter()
        .filter(|l| !l.contains("\"sb:webhook-owners\""))
        .collect();
    let evalsha = commands
        .iter()
        .filter(|l| l.contains("\"EVALSHA\"") || l.contains("\"evalsha\""))
        .count();
    let per_post = commands.len() as f64 / POSTS as f64;
    eprintln!(
        "{} commands for {POSTS} posts ({per_post:.2} per post)",
        commands.len()
    );
    // Slack of two for the feed's idle reads: its openings tail times out
    // every few seconds (an XREAD), and a log tail that times out re-checks
    // with one full read (a script).
    assert!(
        commands.len() <= 2 * POSTS + 2,
        "{per_post:.2} commands per post ({} in all):\n{}",
        commands.len(),
        commands.join("\n")
    );
    // Nothing scans: no XINFO, and no range read of a conversation's
    // history (the append keeps its counters in a hash).
    let all = monitor.all_commands_between("sb-budget-start", "sb-budget-end");
    let scans: Vec<&String> = all
        .iter()
        .filter(|l| {
            let l = l.to_ascii_uppercase();
            l.contains("\"XINFO\"") || (l.contains("\"XREVRANGE\"") && l.contains(":MSGS\""))
        })
        .collect();
    assert!(scans.is_empty(), "{scans:#?}");
    // Positive control: MONITOR does show what scripts run.
    let appends = all
        .iter()
        .filter(|l| l.contains(" lua]") && l.to_ascii_uppercase().contains("\"XADD\""))
        .count();
    assert!(
        appends >= 2 * POSTS,
        "{appends} script XADDs for {POSTS} posts"
    );
    // The budget is taken inside the append: one bucket write per post,
    // in the Bay's slot.
    let takes = all
        .iter()
        .filter(|l| l.contains(" lua]") && l.contains("\"SET\"") && l.contains(":rl:"))
        .count();
    assert_eq!(takes, POSTS, "budget takes inside the append");
    // The one script of every post really ran: the count is not low by
    // accident (and the budget is not a script of its own any more).
    assert!(
        (POSTS..=POSTS + 1).contains(&evalsha),
        "{evalsha} scripts for {POSTS} posts:\n{}",
        commands.join("\n")
    );
}

// ---------------------------------------------------------------- trimming

/// The last id in the Bay's log stream and its `max-deleted-entry-id`.
fn stream_edges(redis: &RedisServer) -> (String, String) {
    let info = redis.cmd(&["XINFO", "STREAM", &format!("sb:{{{BAY}}}:log")]);
    let lines: Vec<&str> = info.lines().collect();
    let field = |name: &str| {
        let at = lines
            .iter()
            .position(|l| *l == name)
            .unwrap_or_else(|| panic!("no {name} in {info}"));
        lines[at + 1].to_owned()
    };
    (field("last-generated-id"), field("max-deleted-entry-id"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trimming_expires_exactly_the_cursors_that_missed_something() {
    let window = Duration::from_secs(3);
    let c = Cluster::start(
        false,
        3,
        Opts::default().env("SWITCHBOARD_REPLAY_WINDOW", "3s"),
    )
    .await;
    let [n1, n2, n3] = [&c.nodes[0], &c.nodes[1], &c.nodes[2]];
    let w = World::create(n1, BAY).await;

    // An event inside the window is replayed, even from another node.
    let (s, b) = n1.updates(&w.rex, None, "1").await;
    assert_eq!(s, 200, "{b}");
    let c0 = b["cursor"].as_str().unwrap().to_owned();
    let (s, e1) = n2.post_message(&w.ana, "dm", "at the edge").await;
    assert_eq!(s, 201, "{e1}");
    tokio::time::sleep(window / 2).await;
    let (s, b) = n3.updates(&w.rex, Some(&c0), "1").await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(event_ids(b["events"].as_array().unwrap()), vec![id_of(&e1)]);
    // Its answer's cursor is the log's last entry (e1's: session openings
    // travel apart from the log).
    let c1 = b["cursor"].as_str().unwrap().to_owned();
    let (last, _) = stream_edges(&c.redis);
    assert_eq!(entry_of(&c1).to_string(), last);

    // Nothing happens for longer than the window. The next append (e2)
    // trims everything before it, c1's entry included: c1 is then exactly
    // the newest trimmed entry. It missed nothing, so it resumes, on any node.
    tokio::time::sleep(window + Duration::from_millis(500)).await;
    let (s, e2) = n1.post_message(&w.ana, "dm", "after the window").await;
    assert_eq!(s, 201, "{e2}");
    let (s, b) = n2.updates(&w.rex, Some(&c1), "1").await;
    assert_eq!(s, 200, "a cursor at the edge was refused: {b}");
    assert_eq!(event_ids(b["events"].as_array().unwrap()), vec![id_of(&e2)]);
    let (_, max_deleted) = stream_edges(&c.redis);
    assert_eq!(
        max_deleted,
        entry_of(&c1).to_string(),
        "the test did not hit the edge"
    );
    // c0 is one step before the edge (e1 was trimmed after it): 409, on every node.
    for node in [n1, n2, n3] {
        let (s, b) = node.updates(&w.rex, Some(&c0), "1").await;
        assert_error(s, &b, 409, "CURSOR_EXPIRED");
    }
    let mut ws = n3.ws_ready(&w.rex, Some(&c0)).await;
    assert_eq!(ws.next_json().await, json!({"t": "reset"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_regular_poller_idle_in_a_busy_bay_never_expires_on_any_node() {
    let c = Cluster::start(
        false,
        3,
        Opts::default().env("SWITCHBOARD_REPLAY_WINDOW", "2s"),
    )
    .await;
    let w = World::create(&c.nodes[0], BAY).await;
    // Busy: Ana and Rex talk in their DM (Scout is not in it) through node 1.
    let stop = Arc::new(AtomicBool::new(false));
    let busy = {
        let (addr, ana, stop) = (c.nodes[0].addr.clone(), w.ana.clone(), stop.clone());
        tokio::spawn(async move {
            let http = test_http();
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let res = http
                    .post(format!(
                        "http://{addr}/api/agent-api/conversations/dm/messages"
                    ))
                    .bearer_auth(&ana)
                    .json(&json!({ "content": format!("busy {n}") }))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(res.status().as_u16(), 201);
                n += 1;
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
            n
        })
    };
    // Scout polls regularly, node after node, for three windows.
    let mut cursor: Option<String> = None;
    let started = Instant::now();
    let mut polls = 0;
    while started.elapsed() < Duration::from_secs(6) {
        let node = &c.nodes[polls % 3];
        let (s, b) = node.updates(&w.scout, cursor.as_deref(), "1").await;
        assert_eq!(s, 200, "poll {polls} on {}: {b}", node.addr);
        assert_eq!(b["events"], json!([]), "{b}");
        cursor = Some(b["cursor"].as_str().unwrap().to_owned());
        polls += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let posted = busy.await.unwrap();
    assert!(posted > 50, "the Bay was not busy: {posted} posts");
    // The Bay's log really was trimmed under the poller.
    let (_, max_deleted) = stream_edges(&c.redis);
    assert_ne!(max_deleted, "0-0");
    // A cursor that stops polling for longer than the window does expire.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let (s, _) = c.nodes[0].post_message(&w.ana, "dm", "one more").await;
    assert_eq!(s, 201);
    let (s, b) = c.nodes[1].updates(&w.scout, cursor.as_deref(), "1").await;
    assert_error(s, &b, 409, "CURSOR_EXPIRED");
}

#[tokio::test]
async fn draining_a_node_moves_its_clients_to_another_with_nothing_lost() {
    let mut c = Cluster::start(
        false,
        2,
        Opts::default().env("SWITCHBOARD_TIMING__DRAIN_TIMEOUT", "2s"),
    )
    .await;
    let w = World::create(&c.nodes[0], BAY).await;
    let mut ws = c.nodes[0].ws_ready(&w.rex, None).await;
    let (_, mut cursor) = ws.read_batch().await;
    let mut posted = Vec::new();
    for i in 0..5 {
        let (s, m) = c.nodes[1]
            .post_message(&w.ana, "dm", &format!("before {i}"))
            .await;
        assert_eq!(s, 201);
        posted.push(m["id"].as_str().unwrap().to_owned());
    }
    let mut got: Vec<String> = Vec::new();
    while got.len() < posted.len() {
        let (events, c2) = ws.read_batch().await;
        got.extend(event_ids(&events));
        cursor = c2;
    }
    // Drain node 0: the socket gets a final cursor frame, then 4003.
    c.nodes[0].send_signal("-TERM");
    let frames = ws
        .expect_server_close(WsClose::GoingAway, Duration::from_secs(10))
        .await;
    for f in &frames {
        if f["t"] == "cursor" {
            cursor = f["cursor"].as_str().unwrap().to_owned();
        }
        if f["t"] == "event" {
            got.push(f["event"]["message"]["id"].as_str().unwrap().to_owned());
        }
    }
    assert!(
        frames.iter().any(|f| f["t"] == "cursor"),
        "a final cursor frame: {frames:?}"
    );
    // Messages keep arriving on node 1 while the client moves.
    for i in 0..5 {
        let (s, m) = c.nodes[1]
            .post_message(&w.ana, "dm", &format!("after {i}"))
            .await;
        assert_eq!(s, 201);
        posted.push(m["id"].as_str().unwrap().to_owned());
    }
    let mut ws = c.nodes[1].ws_ready(&w.rex, Some(&cursor)).await;
    while posted.iter().any(|p| !got.contains(p)) {
        let (events, _) = ws.read_batch().await;
        got.extend(event_ids(&events));
    }
    let unique: HashSet<&String> = got.iter().collect();
    assert_eq!(unique.len(), posted.len(), "nothing lost, nothing foreign");
    assert!(
        c.nodes[0].wait_for_exit(Duration::from_secs(5)).is_some(),
        "drained node exits"
    );
}

#[tokio::test]
async fn the_round_cap_counts_exactly_when_two_nodes_accept_posts_at_once() {
    let c = Cluster::start(false, 2, Opts::default()).await;
    let w = World::create(&c.nodes[0], BAY).await;
    let (s, b) = c.nodes[0]
        .admin(
            reqwest::Method::PATCH,
            &format!("/bays/{BAY}/conversations/group"),
            Some(json!({"policy": {"agentReplyPolicy": "MENTIONS", "maxAgentRounds": 5}})),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    let (s, _) = c.nodes[0].post_message(&w.ana, "group", "go").await;
    assert_eq!(s, 201);
    tokio::join!(burst(&c.nodes[0], &w.rex), burst(&c.nodes[1], &w.brain));
    let (s, page) = c.nodes[1]
        .get(&w.scout, "/conversations/group/messages?limit=50")
        .await;
    assert_eq!(s, 200);
    let verdicts: Vec<bool> = page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["senderType"] == "AGENT")
        .map(|m| m["shouldRespond"].as_bool().unwrap())
        .collect();
    assert_eq!(verdicts.len(), 20);
    // Counts 1..4 trigger; from the 5th consecutive agent message on, none.
    assert_eq!(verdicts, [vec![true; 4], vec![false; 16]].concat());
}

/// Ten agent @mentions of Scout from `token` through `node`.
async fn burst(node: &Gateway, token: &str) {
    for _ in 0..10 {
        let (s, b) = node
            .post_message(token, "group", "@Scout over to you")
            .await;
        assert_eq!(s, 201, "{b}");
    }
}

// ---------------------------------------------------------------- membership replays on a fresh node

/// Ana, Scout and Rex in one Bay on nodes A and B, with GROUP `g` =
/// {Ana, Scout}, and a cursor of Rex and of Scout taken on node A
/// (`/updates` without a cursor) before anything else happened.
struct RosterScene {
    cluster: Cluster,
    ana: String,
    rex: String,
    scout: String,
    rex_cursor: String,
    scout_cursor: String,
}

impl RosterScene {
    async fn start() -> RosterScene {
        let cluster = Cluster::start(false, 2, Opts::default()).await;
        let a = &cluster.nodes[0];
        a.create_bay(BAY).await;
        let ana = a.create_participant(BAY, "ana", "user", "Ana").await;
        let scout = a.create_participant(BAY, "scout", "agent", "Scout").await;
        let rex = a.create_participant(BAY, "rex", "agent", "Rex").await;
        a.create_conversation(BAY, "g", "GROUP", &["ana", "scout"])
            .await;
        let cursor_of = |token: String| async move {
            let (s, b) = a.updates(&token, None, "1").await;
            assert_eq!(s, 200, "{b}");
            assert_eq!(b["events"], json!([]), "{b}");
            b["cursor"].as_str().unwrap().to_owned()
        };
        let rex_cursor = cursor_of(rex.clone()).await;
        let scout_cursor = cursor_of(scout.clone()).await;
        RosterScene {
            cluster,
            ana,
            rex,
            scout,
            rex_cursor,
            scout_cursor,
        }
    }

    fn a(&self) -> &Gateway {
        &self.cluster.nodes[0]
    }

    fn b(&self) -> &Gateway {
        &self.cluster.nodes[1]
    }

    /// Ana posts `content` in `conversation` through node B; the id.
    async fn ana_posts(&self, conversation: &str, content: &str) -> String {
        let (s, m) = self
            .b()
            .post_message(&self.ana, conversation, content)
            .await;
        assert_eq!(s, 201, "{m}");
        id_of(&m)
    }

    /// A third node on the same Redis, started now: its feed has seen
    /// nothing that happened before.
    async fn fresh_node(&self) -> Gateway {
        Gateway::spawn_with(Opts::default().redis(&self.cluster.redis.url())).await
    }
}

/// Every message id `/updates` on `node` hands `token` from `cursor` on,
/// in order: polls (`wait=1`) with each answer's cursor until an answer
/// has no events.
async fn replay_by_updates(node: &Gateway, token: &str, cursor: &str) -> Vec<String> {
    let mut cursor = cursor.to_owned();
    let mut ids = Vec::new();
    for _ in 0..20 {
        let (s, b) = node.updates(token, Some(&cursor), "1").await;
        assert_eq!(s, 200, "/updates on {}: {b}", node.addr);
        let events = b["events"].as_array().unwrap();
        if events.is_empty() {
            return ids;
        }
        ids.extend(event_ids(events));
        cursor = b["cursor"].as_str().unwrap().to_owned();
    }
    panic!("/updates on {} did not run dry: {ids:?}", node.addr);
}

/// Every message id a WebSocket on `node` resuming from `cursor` gets
/// before its first `cursor` frame (the replay), in order.
async fn replay_by_ws(node: &Gateway, token: &str, cursor: &str) -> Vec<String> {
    let mut ws = node.ws_ready(token, Some(cursor)).await;
    let (_, before) = ws.until_frame("cursor", Duration::from_secs(10)).await;
    ws.close().await;
    before
        .iter()
        .map(|f| {
            assert_eq!(f["t"], "event", "unexpected frame before the cursor: {f}");
            id_of(&f["event"]["message"])
        })
        .collect()
}

/// Names the ids of `names` in `ids` (for readable failures).
fn named(ids: &[String], names: &[(&str, &String)]) -> Vec<String> {
    ids.iter()
        .map(|id| {
            names
                .iter()
                .find(|(_, n)| *n == id)
                .map_or_else(|| id.clone(), |(name, _)| (*name).to_owned())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_started_after_roster_changes_replays_each_message_by_the_membership_of_its_time() {
    let scene = RosterScene::start().await;
    // g = {Ana, Scout}: M0. Rex joins: M1. Scout leaves: M2.
    let m0 = scene.ana_posts("g", "M0: Ana and Scout").await;
    scene.b().add_member(BAY, "g", "rex").await;
    let m1 = scene.ana_posts("g", "M1: Ana, Scout and Rex").await;
    scene.b().remove_member(BAY, "g", "scout").await;
    let m2 = scene.ana_posts("g", "M2: Ana and Rex").await;
    let names = [("M0", &m0), ("M1", &m1), ("M2", &m2)];
    let rex_wants = vec![m1.clone(), m2.clone()];
    let scout_wants = vec![m0.clone(), m1.clone()];

    Expected {
        names: &names,
        rex: &rex_wants,
        scout: &scout_wants,
    }
    .on_node_a_and_on_a_fresh_node(&scene)
    .await;
}

/// What Rex's and Scout's replays from their cursors must hold, exactly.
struct Expected<'a> {
    names: &'a [(&'a str, &'a String)],
    rex: &'a [String],
    scout: &'a [String],
}

impl Expected<'_> {
    /// Node A's feed saw every change (the control); node C starts only
    /// now, on the same Redis, and must answer exactly the same.
    async fn on_node_a_and_on_a_fresh_node(&self, scene: &RosterScene) {
        self.replays_on(scene.a(), scene, "node A", false).await;
        let c = scene.fresh_node().await;
        self.replays_on(&c, scene, "node C", true).await;
    }

    /// Replays both cursors on `node` over `/updates` (and Rex's over `/ws`
    /// when `ws`), printing what came by name, and asserts each exactly.
    async fn replays_on(&self, node: &Gateway, scene: &RosterScene, label: &str, ws: bool) {
        let rex = replay_by_updates(node, &scene.rex, &scene.rex_cursor).await;
        let scout = replay_by_updates(node, &scene.scout, &scene.scout_cursor).await;
        eprintln!(
            "{label} /updates: rex {:?}, scout {:?}",
            named(&rex, self.names),
            named(&scout, self.names)
        );
        assert_eq!(
            rex,
            self.rex,
            "{label} /updates, Rex: {:?}",
            named(&rex, self.names)
        );
        assert_eq!(
            scout,
            self.scout,
            "{label} /updates, Scout: {:?}",
            named(&scout, self.names)
        );
        if ws {
            let rex_ws = replay_by_ws(node, &scene.rex, &scene.rex_cursor).await;
            assert_eq!(
                rex_ws,
                self.rex,
                "{label} /ws, Rex: {:?}",
                named(&rex_ws, self.names)
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_started_after_a_conversation_was_created_replays_it_only_to_its_members() {
    let scene = RosterScene::start().await;
    // After the cursors: h = {Ana, Rex} is created and gets H0; g gets G0.
    scene
        .b()
        .create_conversation(BAY, "h", "GROUP", &["ana", "rex"])
        .await;
    let h0 = scene.ana_posts("h", "H0: Ana and Rex").await;
    let g0 = scene.ana_posts("g", "G0: Ana and Scout").await;
    let names = [("H0", &h0), ("G0", &g0)];
    let rex_wants = vec![h0.clone()];
    let scout_wants = vec![g0.clone()];

    Expected {
        names: &names,
        rex: &rex_wants,
        scout: &scout_wants,
    }
    .on_node_a_and_on_a_fresh_node(&scene)
    .await;
}
