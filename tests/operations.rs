//! Operating the gateway: bootstrap files, `config check`, health checks,
//! secrets in logs, and the graceful drain on SIGTERM — all against the
//! real binary.

mod common;

use common::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use switchboard_protocol::error::WsClose;

const BIN: &str = env!("CARGO_BIN_EXE_switchboard");

fn demo_file() -> String {
    format!("{}/config/demo.toml", env!("CARGO_MANIFEST_DIR"))
}

/// Runs the binary with a clean environment plus `env`; kills it after `patience`.
fn run(args: &[&str], env: &[(&str, &str)], patience: Duration) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("start switchboard");
    let deadline = Instant::now() + patience;
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "`switchboard {}` did not exit within {patience:?}; stderr: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

// ---------------------------------------------------------------- start-up

/// A busy port is one clear error line and exit code 1: no panic, nothing
/// started or printed before it (not even the demo credentials).
#[test]
fn serve_on_a_busy_port_exits_1_with_one_clear_error() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    let demo = demo_file();
    let out = run(
        &["serve", "--bind", &addr, "--bootstrap", &demo],
        &[],
        Duration::from_secs(20),
    );
    let stderr = text(&out.stderr);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("error: cannot bind {addr}")),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stdout.contains("Demo credentials"), "{stdout}");
}

// ---------------------------------------------------------------- bootstrap

/// The `token = "…"` values of the demo file, by participant id.
fn demo_tokens() -> BTreeMap<String, String> {
    let file = std::fs::read_to_string(demo_file()).unwrap();
    let mut out = BTreeMap::new();
    let mut id = None;
    for line in file.lines() {
        let line = line.trim();
        if let Some(v) = line.strip_prefix("id = ") {
            id = Some(v.trim_matches('"').to_owned());
        }
        if let Some(v) = line.strip_prefix("token = ") {
            out.insert(id.clone().unwrap(), v.trim_matches('"').to_owned());
        }
    }
    out
}

#[tokio::test]
async fn the_demo_bootstrap_loads_and_prints_its_fixed_tokens() {
    let file = demo_file();
    let gw = Gateway::spawn_with(Opts::default().arg("--bootstrap").arg(&file)).await;
    let expected = demo_tokens();
    assert_eq!(expected.len(), 5, "{expected:?}");

    // Start-up prints each fixed token next to its participant.
    let logs = gw.logs();
    assert!(logs.contains("Demo credentials"), "{logs}");
    let mut printed = BTreeMap::new();
    for line in logs.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if let (Some(first), Some(last)) = (words.first(), words.last()) {
            if *first == "demo" && last.starts_with("bay_") {
                printed.insert(words[1].to_owned(), (*last).to_owned());
            }
        }
    }
    assert_eq!(printed, expected, "printed credentials:\n{logs}");

    // The printed tokens work, and the demo world is as the file describes.
    let rex = &printed["rex"];
    let ana = &printed["ana"];
    let (s, me) = gw.get(rex, "/me").await;
    assert_eq!(s, 200, "{me}");
    assert_eq!(me["id"], "rex");
    assert_eq!(me["kind"], "agent");
    let (s, me) = gw.get(ana, "/me").await;
    assert_eq!((s, me["kind"].as_str()), (200, Some("user")));

    let (_, list) = gw.get(rex, "/conversations").await;
    let mut ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, ["ana-rex", "launch"]);

    let (s, ctx) = gw.get(rex, "/conversations/launch/context").await;
    assert_eq!(s, 200, "{ctx}");
    assert_eq!(ctx["conversation"]["title"], "Launch room");
    assert_eq!(ctx["participants"].as_array().unwrap().len(), 5);
    assert_eq!(ctx["participants"][0]["role"], "admin");
    assert_eq!(
        ctx["participants"][2]["description"],
        "Reviews code and pull requests"
    );
    assert!(ctx["instructions"]
        .as_str()
        .unwrap()
        .contains("Keep answers under five sentences."));

    let (s, m) = gw.post_message(ana, "launch", "@Rex can you review?").await;
    assert_eq!(s, 201, "{m}");
    let (_, got) = gw.get(rex, "/conversations/launch/messages").await;
    assert_eq!(got["messages"][0]["shouldRespond"], true);
    let (_, dm) = gw.get(rex, "/conversations/ana-rex/context").await;
    assert_eq!(dm["policy"]["policyApplies"], false);
    // The admin API still works next to bootstrapped data.
    let (s, _) = gw
        .admin(
            reqwest::Method::POST,
            "/bays",
            Some(json!({"id": "demo", "name": "x"})),
        )
        .await;
    assert_eq!(s, 409, "the demo Bay exists");
}

#[test]
fn a_broken_bootstrap_file_stops_start_up_with_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, body: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, body).unwrap();
        p.to_str().unwrap().to_owned()
    };
    let cases = [
        write("syntax.toml", "[[bays]]\nid = \"x\"\nname =\n"),
        write("syntax.json", "{\"bays\": [ {\"id\": \"x\", "),
        write(
            "unknown-field.toml",
            "[[bays]]\nid = \"x\"\nname = \"X\"\ncolour = \"red\"\n",
        ),
        write(
            "ghost-member.toml",
            "[[bays]]\nid = \"x\"\nname = \"X\"\n[[bays.conversations]]\nid = \"c\"\ntype = \"GROUP\"\nmembers = [\"ghost\"]\n",
        ),
        write(
            "bad-token.toml",
            "[[bays]]\nid = \"x\"\nname = \"X\"\n[[bays.participants]]\nid = \"p\"\nkind = \"agent\"\nname = \"P\"\ntoken = \"short\"\n",
        ),
        write(
            "bad-rounds.toml",
            "[[bays]]\nid = \"x\"\nname = \"X\"\n[[bays.participants]]\nid = \"a\"\nkind = \"agent\"\nname = \"A\"\n[[bays.conversations]]\nid = \"c\"\ntype = \"GROUP\"\nmembers = [\"a\"]\npolicy = { maxAgentRounds = 9 }\n",
        ),
        write(
            "duplicate-token.toml",
            "[[bays]]\nid = \"x\"\nname = \"X\"\n\
             [[bays.participants]]\nid = \"a\"\nkind = \"agent\"\nname = \"A\"\ntoken = \"bay_same_fixed_token_00000000\"\n\
             [[bays.participants]]\nid = \"b\"\nkind = \"agent\"\nname = \"B\"\ntoken = \"bay_same_fixed_token_00000000\"\n",
        ),
        write(
            "duplicate-id.toml",
            "[[bays]]\nid = \"x\"\nname = \"X\"\n\
             [[bays.participants]]\nid = \"a\"\nkind = \"agent\"\nname = \"A\"\n\
             [[bays.participants]]\nid = \"a\"\nkind = \"user\"\nname = \"Also A\"\n",
        ),
        write(
            "agent-with-user-token.toml",
            "[[bays]]\nid = \"x\"\nname = \"X\"\n\
             [[bays.participants]]\nid = \"a\"\nkind = \"agent\"\nname = \"A\"\ntoken = \"bay_u_looks_like_a_person_0000\"\n",
        ),
        write(
            "user-with-agent-token.toml",
            "[[bays]]\nid = \"x\"\nname = \"X\"\n\
             [[bays.participants]]\nid = \"p\"\nkind = \"user\"\nname = \"P\"\ntoken = \"bay_looks_like_an_agent_0000\"\n",
        ),
        write(
            "stray-admin.toml",
            "[[bays]]\nid = \"x\"\nname = \"X\"\n\
             [[bays.participants]]\nid = \"a\"\nkind = \"user\"\nname = \"A\"\n\
             [[bays.conversations]]\nid = \"c\"\ntype = \"GROUP\"\nmembers = []\nadmins = [\"a\"]\n",
        ),
        dir.path()
            .join("missing.toml")
            .to_str()
            .unwrap()
            .to_owned(),
    ];
    for path in &cases {
        let out = run(
            &["serve", "--bind", "127.0.0.1:0", "--bootstrap", path],
            &[("RUST_LOG", "info")],
            Duration::from_secs(20),
        );
        let stderr = text(&out.stderr);
        let stdout = text(&out.stdout);
        assert!(!out.status.success(), "{path}: exited 0\n{stderr}");
        assert!(
            stderr.contains(path.as_str()),
            "{path}: the error must name the file:\n{stderr}"
        );
        assert!(
            stderr.to_lowercase().contains("error"),
            "{path}: no error line:\n{stderr}"
        );
        assert!(
            !stdout.contains("listening on") && !stderr.contains("listening on"),
            "{path}: the server must not start serving"
        );
    }
    // The error says what is wrong, not only where.
    let out = run(
        &["serve", "--bind", "127.0.0.1:0", "--bootstrap", &cases[3]],
        &[],
        Duration::from_secs(20),
    );
    let stderr = text(&out.stderr);
    assert!(stderr.contains("ghost"), "{stderr}");
    assert!(
        stderr.contains("conversation \"c\"") || stderr.contains("conversation c"),
        "the failing object is named plainly: {stderr}"
    );
}

// ------------------------------------------------------------ config check

#[test]
fn config_check_prints_the_effective_settings_with_the_admin_token_masked() {
    let secret = "s3cret-admin-token-do-not-print";
    let out = run(
        &["config", "check"],
        &[
            ("SWITCHBOARD_ADMIN_TOKEN", secret),
            ("SWITCHBOARD_LIMITS__UPDATES_PER_MINUTE", "33"),
        ],
        Duration::from_secs(20),
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status);
    assert!(
        !stdout.contains(secret) && !stderr.contains(secret),
        "{stdout}"
    );
    assert!(stdout.contains("admin_token = \"********\""), "{stdout}");
    assert!(
        stdout.contains("updates_per_minute = 33"),
        "env layer applied: {stdout}"
    );
    assert!(
        stdout.contains("agent_requests_per_minute = 60"),
        "defaults shown: {stdout}"
    );
    assert!(
        stdout.contains("[timing]") && stdout.contains("drain_timeout"),
        "{stdout}"
    );

    // A --config file and flags are layered in too.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sb.toml");
    std::fs::write(
        &file,
        "admin_token = \"file-secret-zzz\"\n[timing]\ndrain_timeout = \"3s\"\n",
    )
    .unwrap();
    let out = run(
        &[
            "config",
            "check",
            "--config",
            file.to_str().unwrap(),
            "--bind",
            "0.0.0.0:9999",
        ],
        &[],
        Duration::from_secs(20),
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!stdout.contains("file-secret-zzz"), "{stdout}");
    assert!(stdout.contains("admin_token = \"********\""), "{stdout}");
    assert!(stdout.contains("drain_timeout = \"3s\""), "{stdout}");
    assert!(stdout.contains("bind = \"0.0.0.0:9999\""), "{stdout}");
}

#[test]
fn config_check_warns_of_a_switchboard_variable_that_sets_nothing() {
    let out = run(
        &["config", "check"],
        &[
            ("SWITCHBOARD_ACTOR_THRADS", "2"),
            ("SWITCHBOARD_ACTOR_THREADS", "3"),
        ],
        Duration::from_secs(20),
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status);
    assert!(
        stderr.contains("SWITCHBOARD_ACTOR_THRADS is not a setting"),
        "{stderr}"
    );
    assert!(!stderr.contains("SWITCHBOARD_ACTOR_THREADS "), "{stderr}");
    assert!(stdout.contains("actor_threads = 3"), "{stdout}");
}

#[test]
fn config_check_rejects_an_unknown_key_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    for (name, body, key) in [
        (
            "nested.toml",
            "[timing]\nhelo_timeout = \"5s\"\n",
            "helo_timeout",
        ),
        ("top.toml", "colour = \"blue\"\n", "colour"),
        (
            "json.json",
            "{\"limits\": {\"max_bodyy_bytes\": 5}}",
            "max_bodyy_bytes",
        ),
    ] {
        let file = dir.path().join(name);
        std::fs::write(&file, body).unwrap();
        let path = file.to_str().unwrap();
        for args in [
            vec!["config", "check", "--config", path],
            vec!["serve", "--bind", "127.0.0.1:0", "--config", path],
        ] {
            let out = run(&args, &[], Duration::from_secs(20));
            let stderr = text(&out.stderr);
            assert!(!out.status.success(), "{args:?} exited 0");
            assert!(
                stderr.contains(key),
                "{args:?}: must name `{key}`:\n{stderr}"
            );
            assert!(
                !text(&out.stdout).contains("listening on"),
                "{args:?} must not serve"
            );
        }
    }
    // An unknown variable meant for the settings is refused the same way.
    let out = run(
        &["config", "check"],
        &[("SWITCHBOARD_TIMING__HELO_TIMEOUT", "5s")],
        Duration::from_secs(20),
    );
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("SWITCHBOARD_TIMING__HELO_TIMEOUT"));
}

// ------------------------------------------------------------------ health

#[tokio::test]
async fn healthz_and_readyz_answer_200_without_credentials() {
    let gw = Gateway::spawn().await;
    for (path, status) in [("/healthz", "ok"), ("/readyz", "ready")] {
        let (s, _, b) = gw.send_raw(gw.http.get(gw.url(path))).await;
        assert_eq!(s, 200, "{path}: {b}");
        assert_eq!(b["status"], status, "{path}: {b}");
        // HEAD, as load balancers' checks send it: the status, no body.
        let res = gw.http.head(gw.url(path)).send().await.unwrap();
        assert_eq!(res.status(), 200, "HEAD {path}");
        assert!(
            res.bytes().await.unwrap().is_empty(),
            "HEAD {path} has no body"
        );
    }
}

// ------------------------------------------------------------- secrets

#[tokio::test]
async fn tokens_never_appear_in_the_process_output() {
    let mut gw = Gateway::spawn_with(Opts::default().env("RUST_LOG", "debug")).await;
    let w = World::create(&gw, "b1").await;
    let unknown = "bay_NeverIssuedButWellFormed0123456789";
    let unknown_user = "bay_u_NeverIssuedButWellFormed01234567";
    let wrong_admin = "wrong-admin-secret-0123456789";
    let mut secrets: Vec<String> = vec![
        ADMIN_TOKEN.into(),
        unknown.into(),
        unknown_user.into(),
        wrong_admin.into(),
        w.ana.clone(),
        w.ben.clone(),
        w.rex.clone(),
        w.brain.clone(),
        w.scout.clone(),
    ];

    // Ordinary traffic with bearer headers.
    for t in [&w.ana, &w.ben, &w.rex, &w.brain, &w.scout] {
        gw.get(t, "/me").await;
        gw.get(t, "/conversations").await;
        gw.get(t, "/conversations/group/context").await;
        gw.get(t, "/conversations/group/messages?limit=5").await;
        gw.post_message(t, "group", "hello @Rex").await;
        gw.post_json(t, "/conversations/group/typing", json!({}))
            .await;
        gw.get(t, "/conversations/dm/messages").await; // 403 for most
    }
    let (s, _) = gw.updates(&w.rex, None, "1").await;
    assert_eq!(s, 200);

    // WebSockets: bearer header and ?token=.
    let mut ws = gw.ws_ready(&w.brain, None).await;
    ws.read_batch().await;
    ws.close().await;
    let mut ws = gw
        .ws_try(WsAuth::Query(&w.scout))
        .await
        .expect("ws ?token=");
    ws.hello(None).await;
    assert_eq!(ws.next_json().await["t"], "ready");
    ws.close().await;

    // Failed authentications, every way a token can arrive.
    for t in [unknown, unknown_user] {
        let (s, _) = gw.get(t, "/me").await;
        assert_eq!(s, 401);
        let (s, _) = gw.updates(t, None, "1").await;
        assert_eq!(s, 401);
        let err = gw.ws_try(WsAuth::Query(t)).await.err().expect("refused");
        assert_eq!(err.0, 401);
        let err = gw.ws_try(WsAuth::Header(t)).await.err().expect("refused");
        assert_eq!(err.0, 401);
    }
    let (s, _, _) = gw
        .send_raw(
            gw.http
                .get(gw.url(&format!("/api/agent-api/me?token={unknown}")))
                .bearer_auth(&w.rex),
        )
        .await;
    assert_eq!(s, 200, "a stray ?token= on REST is ignored");
    let (s, _, _) = gw
        .send_raw(
            gw.http
                .post(gw.url("/api/admin/bays"))
                .bearer_auth(wrong_admin)
                .json(&json!({"name": "x"})),
        )
        .await;
    assert_eq!(s, 401);

    // Rotation and revocation, then the retired tokens are tried again.
    let rotated = gw.rotate_token("b1", "rex").await;
    secrets.push(rotated.clone());
    gw.get(&w.rex, "/me").await;
    gw.get(&rotated, "/me").await;
    // The node's token cache learns of the rotation from the Bay's log, a
    // moment after the admin answer on a loaded machine; the old token is
    // tried until it is refused (this test is about what gets logged).
    let mut refused = None;
    for _ in 0..40 {
        match gw.ws_try(WsAuth::Query(&w.rex)).await {
            Err(err) => {
                refused = Some(err.0);
                break;
            }
            Ok(ws) => {
                ws.close().await;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    assert_eq!(refused, Some(401), "the rotated token still upgrades");
    gw.revoke_token("b1", "ben").await;
    gw.get(&w.ben, "/me").await;
    // A participant created with its token shown once in the admin answer.
    let fresh = gw.create_participant("b1", "fresh", "agent", "Fresh").await;
    secrets.push(fresh.clone());
    gw.get(&fresh, "/me").await;

    // Stop the process so every line it wrote has been read.
    let status = gw.terminate(Duration::from_secs(15));
    assert!(status.is_some(), "gateway did not stop");
    assert!(
        eventually(Duration::from_secs(5), || {
            let done = gw.logs().contains("stopped");
            async move { done }
        })
        .await,
        "no final log line"
    );
    let logs = gw.logs();
    assert!(
        logs.lines().count() > 5,
        "suspiciously little output:\n{logs}"
    );
    for secret in &secrets {
        // The whole token, and its random part on its own.
        let random_part = secret
            .strip_prefix("bay_u_")
            .or_else(|| secret.strip_prefix("bay_"))
            .unwrap_or(secret);
        for needle in [secret.as_str(), random_part] {
            let hits: Vec<&str> = logs.lines().filter(|l| l.contains(needle)).collect();
            assert!(
                hits.is_empty(),
                "token {needle} appears in output: {hits:#?}"
            );
        }
    }
}

// ---------------------------------------------------------------- drain

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_sessions_refuses_new_ones_then_exits() {
    drains_on("-TERM").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_drains_sessions_refuses_new_ones_then_exits() {
    drains_on("-INT").await;
}

/// The drain of docs/operations.md, on `signal`: `/readyz` turns 503; new
/// WebSockets and `/updates` calls get 503 `UNAVAILABLE` with `Retry-After`;
/// the live socket gets a final `cursor` frame and the GOING_AWAY close;
/// the held `/updates` answers 200 with its cursor (not cut off by the
/// shutdown); the process exits cleanly. The new requests go over
/// connections opened before the signal, so they reach the node however
/// soon its listener stops.
async fn drains_on(signal: &str) {
    let drain = Duration::from_secs(4);
    let mut gw =
        Gateway::spawn_with(Opts::default().env("SWITCHBOARD_TIMING__DRAIN_TIMEOUT", "4s")).await;
    let w = World::create(&gw, "b1").await;

    // A live WebSocket that has seen an event.
    let mut ws = gw.ws_ready(&w.rex, None).await;
    ws.read_batch().await;
    let (s, posted) = gw.post_message(&w.ana, "group", "@Rex ping").await;
    assert_eq!(s, 201);
    let (events, _) = ws.read_batch().await;
    assert_eq!(events[0]["message"]["id"], posted["id"]);

    // A held /updates on its own connection.
    let (s, first) = gw.updates(&w.brain, None, "1").await;
    assert_eq!(s, 200, "{first}");
    let cursor = first["cursor"].as_str().unwrap().to_owned();
    let held_url = format!(
        "{}?wait=30&cursor={cursor}",
        gw.url("/api/agent-api/updates")
    );
    let brain = w.brain.clone();
    let held = tokio::spawn(async move {
        let res = reqwest::Client::new()
            .get(held_url)
            .bearer_auth(brain)
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let body: Value = res.json().await.unwrap_or(Value::Null);
        (status, body)
    });
    gw.until_held(1).await;

    // Made before the signal: a load balancer's keep-alive connection to
    // /readyz, and a new /updates call and a new WebSocket upgrade whose
    // requests are sent but for their final empty line, so the node is
    // still serving them however soon its listener stops.
    let probe = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let readyz = gw.url("/readyz");
    let r = probe.get(&readyz).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let new_poll = RawRequest::start(
        &gw.addr,
        &format!(
            "GET /api/agent-api/updates?wait=1 HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n",
            gw.addr, w.scout
        ),
    )
    .await;
    let new_ws = RawRequest::start(
        &gw.addr,
        &format!(
            "GET /api/agent-api/ws HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
             Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
            gw.addr, w.ben
        ),
    )
    .await;

    let signalled = Instant::now();
    gw.send_signal(signal);

    // /readyz turns 503 (before the listener goes away).
    let mut answers = Vec::new();
    let mut saw_503 = None;
    while signalled.elapsed() < Duration::from_secs(10) {
        match probe.get(&readyz).send().await {
            Ok(r) => {
                let s = r.status().as_u16();
                let b: Value = r.json().await.unwrap_or(Value::Null);
                answers.push(s);
                if s == 503 {
                    saw_503 = Some(b);
                    break;
                }
                assert_eq!(s, 200, "{b}");
            }
            Err(e) => panic!("readyz probe failed after {answers:?}: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let body = saw_503.unwrap_or_else(|| panic!("/readyz never answered 503: {answers:?}"));
    assert_eq!(body["status"], "not_ready", "{body}");
    assert_eq!(body["reason"], "draining", "{body}");

    // New sessions are refused with 503 UNAVAILABLE and Retry-After. (The
    // node keeps serving these connections only until its listener stops,
    // 200 ms after the signal: both requests are completed at once.)
    let (poll_answer, ws_answer) = tokio::join!(new_poll.finish(), new_ws.finish());
    for (what, (status, head, body)) in [("/updates", poll_answer), ("/ws upgrade", ws_answer)] {
        assert_error(status, &body, 503, "UNAVAILABLE");
        assert!(
            head.to_ascii_lowercase().contains("\r\nretry-after: "),
            "{what}: 503 without Retry-After: {head}"
        );
    }

    // The live socket gets a final cursor frame, then the GOING_AWAY close.
    let frames = ws
        .expect_server_close(WsClose::GoingAway, Duration::from_secs(10))
        .await;
    let before_error = &frames[frames.len().saturating_sub(2)];
    assert_eq!(before_error["t"], "cursor", "{frames:?}");
    assert!(before_error["cursor"]
        .as_str()
        .is_some_and(|c| !c.is_empty()));

    // The held /updates was answered by the drain: 200 with a cursor and no
    // events (a poll cut off by the shutdown would get no answer at all).
    let (status, body) = tokio::time::timeout(Duration::from_secs(20), held)
        .await
        .expect("the held /updates was not answered")
        .unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["events"], json!([]), "{body}");
    assert!(
        body["cursor"].as_str().is_some_and(|c| !c.is_empty()),
        "{body}"
    );

    // The process exits on its own, successfully, once the drain is over.
    drop(probe);
    let status = gw.wait_for_exit(drain + Duration::from_secs(10));
    let took = signalled.elapsed();
    let status = status.unwrap_or_else(|| panic!("still running {took:?} after {signal}"));
    assert!(status.success(), "exit status {status:?}\n{}", gw.logs());
}

#[tokio::test]
async fn a_percent_encoded_token_parameter_is_not_logged_either() {
    let mut gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    // The server decodes the parameter name, so this is a working credential…
    let url = format!("ws://{}/api/agent-api/ws?%74oken={}", gw.addr, w.scout);
    let (mut ws, _) = tokio_tungstenite::connect_async(url)
        .await
        .map(|(s, r)| (Ws { stream: s }, r))
        .expect("the decoded ?token= is accepted");
    ws.hello(None).await;
    assert_eq!(ws.next_json().await["t"], "ready");
    ws.close().await;
    // …and must be kept out of the logs like any other.
    assert!(gw.terminate(Duration::from_secs(15)).is_some());
    assert!(
        eventually(Duration::from_secs(5), || {
            let done = gw.logs().contains("stopped");
            async move { done }
        })
        .await
    );
    let logs = gw.logs();
    let random_part = w.scout.strip_prefix("bay_").unwrap();
    let hits: Vec<&str> = logs.lines().filter(|l| l.contains(random_part)).collect();
    assert!(hits.is_empty(), "token appears in output: {hits:#?}");
}

#[test]
fn a_bootstrap_entry_without_an_id_is_refused_so_restarts_stay_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("noid.toml");
    std::fs::write(
        &path,
        "[[bays]]\nid = \"b\"\nname = \"B\"\n[[bays.participants]]\nkind = \"user\"\nname = \"Ana\"\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["serve", "--bind", "127.0.0.1:0", "--bootstrap"])
        .arg(&path)
        .env_clear()
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("noid.toml") && err.contains("an id is required"),
        "{err}"
    );
}

#[test]
fn config_check_also_checks_the_bootstrap_file() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["config", "check", "--bootstrap", "/nonexistent/boot.toml"])
        .env_clear()
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/boot.toml"));
    let ok = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["config", "check", "--bootstrap", "config/demo.toml"])
        .env_clear()
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
}

/// An HTTP/1.1 request written over a raw TCP connection in two steps.
struct RawRequest {
    tcp: tokio::net::TcpStream,
}

impl RawRequest {
    /// Connects and writes `head` (request line and headers, each ending
    /// in CRLF) without the empty line that ends it.
    async fn start(addr: &str, head: &str) -> RawRequest {
        use tokio::io::AsyncWriteExt;
        let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        tcp.write_all(head.as_bytes()).await.unwrap();
        RawRequest { tcp }
    }

    /// Ends the request and reads the answer: (status, head, JSON body).
    async fn finish(mut self) -> (u16, String, Value) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        self.tcp
            .write_all(b"Connection: close\r\n\r\n")
            .await
            .unwrap();
        let mut raw = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), self.tcp.read_to_end(&mut raw))
            .await
            .expect("no answer within 10 s")
            .expect("the answer was cut");
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("not an HTTP answer: {text:?}"));
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status: {head}"));
        let body = serde_json::from_str(body.trim()).unwrap_or(Value::Null);
        (status, head.to_owned(), body)
    }
}

/// A node started with `--bootstrap` on Redis applies the file again once
/// the store is emptied under it (`FLUSHALL`, as after a Redis restart
/// without persistence): the fixed tokens and the conversations work
/// again within seconds, and the node says so at WARN.
#[tokio::test]
async fn a_flushed_redis_is_seeded_again_from_the_bootstrap_file() {
    const FILE: &str = r#"
[[bays]]
id = "reseed"
name = "Reseed"
[[bays.participants]]
id = "ana"
kind = "user"
name = "Ana"
token = "bay_u_reseed_ana_00000000000000000"
[[bays.participants]]
id = "rex"
kind = "agent"
name = "Rex"
token = "bay_reseed_rex_0000000000000000000000"
[[bays.conversations]]
id = "room"
type = "GROUP"
title = "Room"
members = ["ana", "rex"]
"#;
    const ANA: &str = "bay_u_reseed_ana_00000000000000000";
    const REX: &str = "bay_reseed_rex_0000000000000000000000";
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bootstrap.toml");
    std::fs::write(&file, FILE).unwrap();
    let redis = RedisServer::start(false);
    let gw = Gateway::spawn_with(
        Opts::default()
            .redis(&redis.url())
            .arg("--bootstrap")
            .arg(file.to_str().unwrap()),
    )
    .await;
    let (s, me) = gw.get(REX, "/me").await;
    assert_eq!(s, 200, "{me}");
    let (s, m) = gw.post_message(ANA, "room", "@Rex before").await;
    assert_eq!(s, 201, "{m}");

    assert_eq!(redis.cmd(&["FLUSHALL"]), "OK");
    let flushed = Instant::now();
    let seeded = eventually(Duration::from_secs(10), || async {
        let (me, _) = gw.get(REX, "/me").await;
        let (posted, _) = gw.post_message(ANA, "room", "@Rex after").await;
        me == 200 && posted == 201
    })
    .await;
    assert!(seeded, "not seeded again: {}", gw.logs());
    println!("seeded again {:?} after FLUSHALL", flushed.elapsed());
    let (s, got) = gw.get(REX, "/conversations/room/messages").await;
    assert_eq!(s, 200, "{got}");
    let logs = gw.logs();
    assert!(
        logs.lines()
            .any(|l| l.contains("WARN") && l.contains("applying the bootstrap file again")),
        "{logs}"
    );
}
