//! Gateways on a Redis Cluster (`--store redis --redis-cluster`, the seeds
//! in `--redis-url`) and on a TLS Redis (`rediss://`): real `switchboard`
//! processes, a real three-master cluster, real clients.

mod common;

#[allow(dead_code)]
#[path = "../actors/tests/common/redis.rs"]
mod redis_fixture;

use common::*;
use redis_fixture::RedisCluster;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BAY: &str = "b1";

/// `--store redis --redis-cluster --redis-url <every seed>`.
fn on_cluster(cluster: &RedisCluster) -> Opts {
    Opts::default().redis(&cluster.url()).arg("--redis-cluster")
}

fn event_ids(events: &[serde_json::Value]) -> Vec<String> {
    events.iter().map(|e| id_of(&e["message"])).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_posted_on_one_node_reaches_the_other_through_a_redis_cluster() {
    let cluster = RedisCluster::start();
    let n1 = Gateway::spawn_with(on_cluster(&cluster)).await;
    let n2 = Gateway::spawn_with(on_cluster(&cluster)).await;
    let w = World::create(&n1, BAY).await;

    // Rex over WS and Bay Brain over /updates, both on node 2.
    let mut ws = n2.ws_ready(&w.rex, None).await;
    let (_, _) = ws.read_batch().await;
    let (s, first) = n2.updates(&w.brain, None, "1").await;
    assert_eq!(s, 200, "{first}");
    let held = spawn_poll(&n2.addr, &w.brain, first["cursor"].as_str(), "20");
    n2.until_held(1).await;

    let (s, posted) = n1
        .post_message(&w.ana, "group", "hello across the cluster, @Rex")
        .await;
    assert_eq!(s, 201, "{posted}");
    let (events, cursor) = ws.read_batch().await;
    assert_eq!(event_ids(&events), vec![id_of(&posted)]);
    assert_eq!(events[0]["message"]["shouldRespond"], true);
    let (s, body, held_for) = held.await.unwrap();
    assert_eq!(s, 200, "{body}");
    assert_eq!(
        event_ids(body["events"].as_array().unwrap()),
        vec![id_of(&posted)]
    );
    assert!(held_for < Duration::from_secs(10), "{held_for:?}");

    // The other way round, and a cursor from one node resumes on the other.
    let (s, reply) = n2.post_message(&w.rex, "group", "on it").await;
    assert_eq!(s, 201, "{reply}");
    ws.close().await;
    let (s, body) = n1.updates(&w.rex, Some(&cursor), "5").await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(
        event_ids(body["events"].as_array().unwrap()),
        vec![id_of(&reply)]
    );

    // The Bay's keys all sit in one slot of one master.
    let slot = cluster.keyslot(&format!("sb:{{{BAY}}}:log"));
    let owner = cluster.owner_of(slot);
    let keys = cluster.nodes[owner].text(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]);
    assert!(
        keys.parse::<u32>().unwrap() >= 5,
        "{keys} keys in the Bay's slot"
    );
    assert!(n1.readyz().await == 200 && n2.readyz().await == 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_hold_across_nodes_on_a_redis_cluster() {
    let cluster = RedisCluster::start();
    let opts = on_cluster(&cluster).env("SWITCHBOARD_LIMITS__AGENT_REQUESTS_PER_MINUTE", "4");
    let n1 = Gateway::spawn_with(opts.clone()).await;
    let n2 = Gateway::spawn_with(opts).await;
    let w = World::create(&n1, BAY).await;
    for i in 0..4 {
        let node = if i % 2 == 0 { &n1 } else { &n2 };
        let (s, b) = node.get(&w.rex, "/me").await;
        assert_eq!(s, 200, "call {i}: {b}");
    }
    for node in [&n1, &n2] {
        let (s, b) = node.get(&w.rex, "/me").await;
        assert_error(s, &b, 429, "RATE_LIMITED");
    }
    let (s, b) = n2.get(&w.brain, "/me").await;
    assert_eq!(s, 200, "other tokens have their own bucket: {b}");
    let logs = n1.logs() + &n2.logs();
    assert!(
        !logs.contains("failing open"),
        "the limiter reached Redis: {logs}"
    );
}

// ---------------------------------------------------------------- TLS

/// A CA and a server certificate for 127.0.0.1 signed by it, made with
/// `openssl` in `dir`: `ca.pem`, `server.pem`, `server.key`; and an
/// unrelated CA, `other-ca.pem`.
fn make_certs(dir: &Path) {
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .output()
            .expect("cannot run openssl: install it (apt-get install openssl)");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
    let mut ca = vec!["req", "-x509", "-nodes", "-days", "2"];
    ca.extend(ec);
    ca.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-subj",
        "/CN=Switchboard test CA",
    ]);
    run(&ca);
    let mut other = vec!["req", "-x509", "-nodes", "-days", "2"];
    other.extend(ec);
    other.extend([
        "-keyout",
        "other-ca.key",
        "-out",
        "other-ca.pem",
        "-subj",
        "/CN=Other CA",
    ]);
    run(&other);
    let mut csr = vec!["req", "-new", "-nodes"];
    csr.extend(ec);
    csr.extend([
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    run(&csr);
    std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "san.ext",
        "-out",
        "server.pem",
    ]);
}

/// A redis-server that only speaks TLS, on a free port. Killed on drop.
struct TlsRedis {
    child: Child,
    port: u16,
}

impl TlsRedis {
    fn start(dir: &Path) -> TlsRedis {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let p = |f: &str| dir.join(f).display().to_string();
        let log = std::fs::File::create(dir.join("redis.log")).unwrap();
        let child = Command::new("redis-server")
            .args(["--port", "0", "--tls-port", &port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--dir", &p("")])
            .args([
                "--tls-cert-file",
                &p("server.pem"),
                "--tls-key-file",
                &p("server.key"),
            ])
            .args([
                "--tls-ca-cert-file",
                &p("ca.pem"),
                "--tls-auth-clients",
                "no",
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("cannot run redis-server");
        let server = TlsRedis { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let pong = Command::new("redis-cli")
                .args(["--tls", "--cacert", &p("ca.pem"), "-h", "127.0.0.1"])
                .args(["-p", &port.to_string(), "PING"])
                .stdin(Stdio::null())
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).contains("PONG"))
                .unwrap_or(false);
            if pong {
                return server;
            }
            assert!(
                Instant::now() < deadline,
                "TLS redis-server did not start: {}",
                std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rediss_urls_connect_over_tls_and_check_the_certificate() {
    let dir = tempfile::tempdir().unwrap();
    make_certs(dir.path());
    let redis = TlsRedis::start(dir.path());
    let url = format!("rediss://127.0.0.1:{}", redis.port);
    let ca = dir.path().join("ca.pem").display().to_string();

    // Trusting the test CA (SSL_CERT_FILE, as for any private CA): it works.
    let gw = Gateway::spawn_with(Opts::default().redis(&url).env("SSL_CERT_FILE", &ca)).await;
    let w = World::create(&gw, BAY).await;
    let (s, posted) = gw.post_message(&w.ana, "group", "over TLS").await;
    assert_eq!(s, 201, "{posted}");
    let (s, body) = gw.get(&w.rex, "/conversations/group/messages").await;
    assert_eq!(s, 200, "{body}");
    assert!(body.to_string().contains("over TLS"), "{body}");

    // Trusting another CA only: the node refuses to start (the server's
    // certificate is checked).
    let out = serve_command(&Opts::default().redis(&url))
        .env("SSL_CERT_FILE", dir.path().join("other-ca.pem"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot open the store"), "{err}");
    assert!(err.to_lowercase().contains("certificate"), "{err}");
}
