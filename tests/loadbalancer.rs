//! Two nodes on one Redis behind a real nginx running the shipped
//! `deploy/nginx/switchboard.conf` (only its `listen` and upstream
//! `server` lines are replaced by the test's addresses).
//!
//! WebSocket upgrades and held long-polls pass through; killing a node
//! moves its clients, with their cursors, to the other one.

mod common;

use common::nginx::*;
use common::*;
use serde_json::{json, Value};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

const BAY: &str = "b1";
async fn post_via(
    http: &reqwest::Client,
    lb: &Nginx,
    token: &str,
    conversation: &str,
    content: &str,
) -> Result<(u16, Value), String> {
    let res = http
        .post(lb.url(&format!(
            "/api/agent-api/conversations/{conversation}/messages"
        )))
        .bearer_auth(token)
        .json(&json!({ "content": content }))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = res.status().as_u16();
    Ok((status, res.json().await.unwrap_or(Value::Null)))
}

/// `switchboard_connections{transport="ws"}` of a node, from its /metrics.
async fn ws_connections(node: &Gateway) -> u64 {
    let text = node
        .http
        .get(node.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find(|l| l.starts_with("switchboard_connections{transport=\"ws\"}"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse::<f64>().ok())
        .map(|v| v as u64)
        .unwrap_or(0)
}

#[test]
fn the_shipped_config_is_valid_nginx() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    std::fs::write(
        dir.path().join("switchboard.conf"),
        site(&["127.0.0.1:1", "127.0.0.1:2"], 8),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("nginx.conf"),
        format!(
            "pid {d}/nginx.pid; error_log {d}/error.log; events {{}} \
             http {{ client_body_temp_path {d}/cb; proxy_temp_path {d}/p; \
             fastcgi_temp_path {d}/f; uwsgi_temp_path {d}/u; scgi_temp_path {d}/s; \
             include {d}/switchboard.conf; }}"
        ),
    )
    .unwrap();
    let out = Command::new(nginx_bin())
        .arg("-t")
        .arg("-p")
        .arg(dir.path())
        .arg("-e")
        .arg(dir.path().join("error.log"))
        .arg("-c")
        .arg(dir.path().join("nginx.conf"))
        .output()
        .expect("cannot run nginx: install it (apt-get install nginx)");
    assert!(
        out.status.success(),
        "nginx -t: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The settings the realtime routes depend on.
    for needle in [
        "proxy_http_version 1.1;",
        "proxy_set_header Upgrade $http_upgrade;",
        "proxy_set_header Connection $switchboard_connection;",
        "proxy_buffering off;",
        "proxy_read_timeout 45s;",
        "proxy_next_upstream error timeout",
    ] {
        assert!(SHIPPED.contains(needle), "missing {needle:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websockets_and_held_long_polls_pass_through_nginx() {
    let d = Deployment::start().await;
    let w = World::create(&d.nodes[0], BAY).await;
    let lb = d.lb.addr();
    let http = test_http();

    // Rex over a WebSocket through nginx.
    let mut ws = ws_at(&lb, &w.rex).await.expect("upgrade through nginx");
    ws.hello(None).await;
    assert_eq!(ws.next_json().await["t"], "ready");
    let (_, _) = ws.read_batch().await;
    let (s, m) = post_via(&http, &d.lb, &w.ana, "dm", "through the proxy")
        .await
        .unwrap();
    assert_eq!(s, 201, "{m}");
    let (events, _) = ws.read_batch().await;
    assert_eq!(events[0]["message"]["id"], m["id"]);

    // Bay Brain's held poll answers as soon as a message arrives (no buffering).
    let (s, b, _) = poll_at(&http, &lb, &w.brain, None, "1").await.unwrap();
    assert_eq!(s, 200, "{b}");
    let quick = spawn_poll(&lb, &w.brain, b["cursor"].as_str(), "25");
    d.until_held(1).await;
    let started = Instant::now();
    let (s, g) = post_via(&http, &d.lb, &w.ben, "group", "hello all")
        .await
        .unwrap();
    assert_eq!(s, 201, "{g}");
    let (s, b, _) = quick.await.unwrap();
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["events"][0]["message"]["id"], g["id"], "{b}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // (Rex is in the GROUP too.)
    let (events, _) = ws.read_batch().await;
    assert_eq!(events[0]["message"]["id"], g["id"]);

    // Scout holds a poll for the full 30 s maximum. Only DM traffic (which
    // Scout is not in) happens meanwhile, so the answer must come from the
    // node after 30 s, not from nginx earlier.
    let (s, b, _) = poll_at(&http, &lb, &w.scout, None, "1").await.unwrap();
    assert_eq!(s, 200, "{b}");
    let long_hold = spawn_poll(&lb, &w.scout, b["cursor"].as_str(), "30");
    d.until_held(1).await;
    let (s, m2) = post_via(&http, &d.lb, &w.ana, "dm", "one more")
        .await
        .unwrap();
    assert_eq!(s, 201, "{m2}");
    let (events, _) = ws.read_batch().await;
    assert_eq!(events[0]["message"]["id"], m2["id"]);
    let (s, b, held) = long_hold.await.unwrap();
    assert_eq!(s, 200, "a 30 s hold was cut by the proxy: {b}");
    assert_eq!(b["events"], json!([]));
    assert!(held >= Duration::from_secs(29), "{held:?}");

    // The socket, idle for most of those 30 s, is still open.
    let (s, m3) = post_via(&http, &d.lb, &w.ana, "dm", "still there?")
        .await
        .unwrap();
    assert_eq!(s, 201, "{m3}");
    // (Idle `cursor` frames came meanwhile; the event follows them.)
    let (event, _) = ws.until_frame("event", Duration::from_secs(10)).await;
    assert_eq!(event["event"]["message"]["id"], m3["id"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_node_behind_nginx_moves_its_clients_with_their_cursors() {
    let mut d = Deployment::start().await;
    let w = World::create(&d.nodes[0], BAY).await;
    let lb = d.lb.addr();
    let stop = Arc::new(AtomicBool::new(false));
    let by_ws = Arc::new(Reader::default());
    let by_poll = Arc::new(Reader::default());
    let tasks = [
        ws_reader(vec![lb.clone()], w.rex.clone(), by_ws.clone(), stop.clone()),
        poll_reader(
            vec![lb.clone()],
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
    // Kill the node that holds the WebSocket.
    let mut victim = None;
    for (i, node) in d.nodes.iter().enumerate() {
        if ws_connections(node).await == 1 {
            victim = Some(i);
        }
    }
    let victim = victim.expect("the socket is on one of the nodes");

    let http = test_http();
    let mut accepted = Vec::new();
    let mut failed = Vec::new();
    for i in 0..120 {
        if i == 40 {
            d.nodes[victim].kill_now();
        }
        match post_via(&http, &d.lb, &w.ana, "group", &format!("steady {i}")).await {
            Ok((201, body)) => accepted.push(id_of(&body)),
            // A send in flight to the node being killed gets 502; it is
            // never retried on the other node (it may have been stored).
            Ok((status, body)) => failed.push(format!("{status} {body}")),
            Err(e) => failed.push(e),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        failed.len() <= 2,
        "sends failed through the proxy: {failed:?}"
    );
    assert_both_readers_got_everything(&accepted, &by_ws, &by_poll, &stop, tasks, || {
        format!("nginx: {}", d.lb.error_log())
    })
    .await;
    // The socket reconnected (to the surviving node, the only one left).
    assert!(by_ws.sessions() >= 2);
    // Readiness through the proxy is the surviving node's.
    let res = http.get(d.lb.url("/readyz")).send().await.unwrap();
    assert_eq!(res.status().as_u16(), 200);
}

/// An HTTP client whose connections come from `ip` (any of 127/8 works on
/// loopback): a distinct client address behind the proxy.
fn client_from(ip: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(Some(ip.parse().unwrap()))
        .build()
        .unwrap()
}

/// A `/updates` held for 20 s from `http`, in the background.
fn hold_from(
    http: reqwest::Client,
    addr: String,
    token: String,
    xff: Option<&'static str>,
) -> tokio::task::JoinHandle<u16> {
    tokio::spawn(async move {
        let mut req = http
            .get(format!("http://{addr}/api/agent-api/updates?wait=20"))
            .bearer_auth(&token);
        if let Some(xff) = xff {
            req = req.header("X-Forwarded-For", xff);
        }
        req.send().await.map(|r| r.status().as_u16()).unwrap_or(0)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_behind_a_trusted_nginx_are_limited_apart_and_forged_headers_are_not() {
    let node = Gateway::spawn_with(
        Opts::default()
            .env("SWITCHBOARD_LIMITS__MAX_HELD_POLLS_PER_IP", "1")
            // nginx connects to the node from 127.0.0.1; the clients use
            // other loopback addresses.
            .env("SWITCHBOARD_PROXY__TRUSTED", "127.0.0.1"),
    )
    .await;
    let w = World::create(&node, BAY).await;
    let lb = Nginx::start(&[node.addr.as_str()]);
    let (a, b) = (client_from("127.0.0.2"), client_from("127.0.0.3"));

    // One held poll each for two clients behind the proxy: both admitted.
    let first = hold_from(a.clone(), lb.addr(), w.ana.clone(), None);
    let second = hold_from(b.clone(), lb.addr(), w.ben.clone(), None);
    let held = eventually(Duration::from_secs(20), || async {
        node.metric("switchboard_held_polls").await == 2.0
    })
    .await;
    assert!(held, "two clients behind nginx hold one poll each");
    // A second poll of client A (another token) is over its cap: JSON 429.
    let res = a
        .get(lb.url("/api/agent-api/updates?wait=1"))
        .bearer_auth(&w.rex)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 429);
    assert!(res.headers().contains_key("retry-after"));
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["code"], "RATE_LIMITED", "{body}");

    // Straight to the node from an untrusted peer (127.0.0.4): a forged
    // X-Forwarded-For is ignored, both polls count for 127.0.0.4.
    let c = client_from("127.0.0.4");
    let forged = hold_from(
        c.clone(),
        node.addr.clone(),
        w.brain.clone(),
        Some("10.9.9.9"),
    );
    let held = eventually(Duration::from_secs(20), || async {
        node.metric("switchboard_held_polls").await == 3.0
    })
    .await;
    assert!(held);
    let res = c
        .get(node.url("/api/agent-api/updates?wait=1"))
        .header("X-Forwarded-For", "10.8.8.8")
        .bearer_auth(&w.scout)
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.status().as_u16(),
        429,
        "the forged address was believed"
    );
    for h in [first, second, forged] {
        h.abort();
    }
}
