//! Fixtures for end-to-end tests: a real `switchboard` process on a free
//! port, real HTTP (reqwest) and WebSocket (tokio-tungstenite) clients.
//! Nothing here mocks the server or the network.
#![allow(dead_code)]

pub mod nginx;
pub mod rooms;
pub mod sse;
pub mod stall;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub const ADMIN_TOKEN: &str = "test-admin-token-0123456789";

/// A running gateway process. Killed when dropped.
pub struct Gateway {
    pub addr: String,
    child: Child,
    /// Every line the process wrote to stdout/stderr so far.
    pub output: Arc<Mutex<Vec<String>>>,
    pub http: reqwest::Client,
    /// The gateway's own Redis under `SWITCHBOARD_TEST_STORE=redis`
    /// (dropped, so killed, after the process).
    redis: Option<RedisServer>,
    /// The attachment directory [`serve_command`] made up for it, removed
    /// when the gateway is dropped.
    files_dir: Option<std::path::PathBuf>,
}

/// Settings for [`Gateway::spawn_with`]: extra environment variables over
/// test-friendly defaults (high rate limits, fast watermarks).
#[derive(Default, Clone)]
pub struct Opts {
    pub env: Vec<(String, String)>,
    pub args: Vec<String>,
}

impl Opts {
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }
    pub fn arg(mut self, a: &str) -> Self {
        self.args.push(a.to_owned());
        self
    }
}

impl Gateway {
    pub async fn spawn() -> Gateway {
        Self::spawn_with(Opts::default()).await
    }

    pub async fn spawn_with(opts: Opts) -> Gateway {
        let (opts, redis) = opts.with_test_store();
        let mut gw = Self::spawn_command(serve_command(&opts)).await;
        gw.redis = redis;
        gw
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM and waits for the process to exit (up to `patience`).
    pub fn terminate(&mut self, patience: Duration) -> Option<std::process::ExitStatus> {
        unsafe_kill(self.child.id(), "-TERM");
        let deadline = std::time::Instant::now() + patience;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    pub fn logs(&self) -> String {
        self.output.lock().unwrap().join("\n")
    }

    // ---- admin API ----

    pub async fn admin(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .request(method, self.url(&format!("/api/admin{path}")))
            .bearer_auth(ADMIN_TOKEN);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        let text = res.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    pub async fn create_bay(&self, id: &str) {
        let (s, b) = self
            .admin(
                reqwest::Method::POST,
                "/bays",
                Some(json!({"id": id, "name": id})),
            )
            .await;
        assert_eq!(s, 201, "create bay: {b}");
    }

    /// Creates a participant and returns its token.
    pub async fn create_participant(&self, bay: &str, id: &str, kind: &str, name: &str) -> String {
        let (s, b) = self
            .admin(
                reqwest::Method::POST,
                &format!("/bays/{bay}/participants"),
                Some(json!({"id": id, "kind": kind, "name": name})),
            )
            .await;
        assert_eq!(s, 201, "create participant: {b}");
        b["token"].as_str().unwrap().to_owned()
    }

    pub async fn create_conversation(&self, bay: &str, id: &str, kind: &str, members: &[&str]) {
        let (s, b) = self
            .admin(
                reqwest::Method::POST,
                &format!("/bays/{bay}/conversations"),
                Some(json!({"id": id, "type": kind, "title": id, "members": members})),
            )
            .await;
        assert_eq!(s, 201, "create conversation: {b}");
    }

    // ---- agent API ----

    pub async fn get(&self, token: &str, path: &str) -> (u16, Value) {
        let res = self
            .http
            .get(self.url(&format!("/api/agent-api{path}")))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    /// Posts a message; returns (status, body).
    pub async fn post_message(
        &self,
        token: &str,
        conversation: &str,
        content: &str,
    ) -> (u16, Value) {
        self.post_json(
            token,
            &format!("/conversations/{conversation}/messages"),
            json!({ "content": content }),
        )
        .await
    }

    pub async fn post_json(&self, token: &str, path: &str, body: Value) -> (u16, Value) {
        let res = self
            .http
            .post(self.url(&format!("/api/agent-api{path}")))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    /// One `/updates` call. Returns (status, body, Retry-After header).
    pub async fn updates(&self, token: &str, cursor: Option<&str>, wait: &str) -> (u16, Value) {
        let mut url = format!("{}?wait={wait}", self.url("/api/agent-api/updates"));
        if let Some(c) = cursor {
            url.push_str(&format!("&cursor={c}"));
        }
        let res = self.http.get(url).bearer_auth(token).send().await.unwrap();
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    /// Opens a WebSocket with the bearer header (no hello sent yet).
    pub async fn ws(&self, token: &str) -> Ws {
        let mut req = format!("ws://{}/api/agent-api/ws", self.addr)
            .into_client_request()
            .unwrap();
        req.headers_mut()
            .insert("Authorization", format!("Bearer {token}").parse().unwrap());
        let (stream, _) = tokio_tungstenite::connect_async(req)
            .await
            .expect("ws connect");
        Ws { stream }
    }

    /// Opens a WebSocket, sends hello with `resume`, and reads `ready`.
    pub async fn ws_ready(&self, token: &str, resume: Option<&str>) -> Ws {
        let mut ws = self.ws(token).await;
        ws.hello(resume).await;
        let ready = ws.next_json().await;
        assert_eq!(ready["t"], "ready", "{ready}");
        ws
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(dir) = &self.files_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn unsafe_kill(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .arg(signal)
        .arg(pid.to_string())
        .status();
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// What the WebSocket yielded next.
#[derive(Debug)]
pub enum WsNext {
    Json(Value),
    Closed(Option<u16>),
    Timeout,
}

/// A real WebSocket client.
pub struct Ws {
    pub stream: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

impl Ws {
    pub async fn hello(&mut self, resume: Option<&str>) {
        self.send_text(&json!({"t": "hello", "resume": resume}).to_string())
            .await;
    }

    pub async fn send_text(&mut self, text: &str) {
        self.stream
            .send(WsMessage::text(text.to_owned()))
            .await
            .unwrap();
    }

    /// The next JSON frame or close, skipping pings, within `patience`.
    pub async fn next_within(&mut self, patience: Duration) -> WsNext {
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            match tokio::time::timeout_at(deadline, self.stream.next()).await {
                Err(_) => return WsNext::Timeout,
                Ok(None) => return WsNext::Closed(None),
                Ok(Some(Err(_))) => return WsNext::Closed(None),
                Ok(Some(Ok(WsMessage::Text(t)))) => {
                    return WsNext::Json(serde_json::from_str(&t).unwrap())
                }
                Ok(Some(Ok(WsMessage::Close(frame)))) => {
                    return WsNext::Closed(frame.map(|f| u16::from(f.code)))
                }
                Ok(Some(Ok(_))) => continue,
            }
        }
    }

    /// The next JSON frame; panics on close or after 10 s.
    pub async fn next_json(&mut self) -> Value {
        match self.next_within(Duration::from_secs(10)).await {
            WsNext::Json(v) => v,
            other => panic!("expected a frame, got {other:?}"),
        }
    }

    /// Reads until the socket closes; returns the close code and the frames seen before.
    pub async fn expect_close(&mut self, patience: Duration) -> (Option<u16>, Vec<Value>) {
        let mut frames = Vec::new();
        loop {
            match self.next_within(patience).await {
                WsNext::Json(v) => frames.push(v),
                WsNext::Closed(code) => return (code, frames),
                WsNext::Timeout => panic!("socket did not close; frames: {frames:?}"),
            }
        }
    }

    /// Collects event frames until a `cursor` frame; returns (events, cursor).
    pub async fn read_batch(&mut self) -> (Vec<Value>, String) {
        let mut events = Vec::new();
        loop {
            let f = self.next_json().await;
            match f["t"].as_str() {
                Some("event") => events.push(f["event"].clone()),
                Some("cursor") => return (events, f["cursor"].as_str().unwrap().to_owned()),
                _ => panic!("unexpected frame {f}"),
            }
        }
    }

    pub async fn close(mut self) {
        let _ = self.stream.close(None).await;
    }
}

/// Close code as u16 (for comparisons with protocol constants).
pub fn code(c: CloseCode) -> u16 {
    u16::from(c)
}

/// Polls `check` until it returns true or `patience` runs out.
pub async fn eventually<F, Fut>(patience: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + patience;
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// A Bay with two humans, three agents, a GROUP with all of them and a DM.
pub struct World {
    pub ana: String,
    pub ben: String,
    pub rex: String,
    pub brain: String,
    pub scout: String,
}

impl World {
    pub async fn create(gw: &Gateway, bay: &str) -> World {
        gw.create_bay(bay).await;
        let ana = gw.create_participant(bay, "ana", "user", "Ana").await;
        let ben = gw.create_participant(bay, "ben", "user", "Ben").await;
        let rex = gw.create_participant(bay, "rex", "agent", "Rex").await;
        let brain = gw
            .create_participant(bay, "brain", "agent", "Bay Brain")
            .await;
        let scout = gw.create_participant(bay, "scout", "agent", "Scout").await;
        gw.create_conversation(
            bay,
            "group",
            "GROUP",
            &["ana", "ben", "rex", "brain", "scout"],
        )
        .await;
        gw.create_conversation(bay, "dm", "DM", &["ana", "rex"])
            .await;
        World {
            ana,
            ben,
            rex,
            brain,
            scout,
        }
    }
}

// ---- realtime helpers (added for tests/ws.rs, tests/updates.rs, tests/resume.rs) ----

/// How a WebSocket upgrade presents its credential.
#[derive(Debug, Clone, Copy)]
pub enum WsAuth<'a> {
    /// No credential at all.
    None,
    /// `Authorization: Bearer <token>`.
    Header(&'a str),
    /// `?token=<token>` in the URL.
    Query(&'a str),
}

impl Gateway {
    /// Attempts a WebSocket upgrade. `Err((status, json body))` when the
    /// server refused it with an HTTP answer instead of a 101.
    pub async fn ws_try(&self, auth: WsAuth<'_>) -> Result<Ws, (u16, Value)> {
        self.ws_try_full(auth)
            .await
            .map_err(|(status, _, body)| (status, body))
    }

    /// Like [`Gateway::ws_try`], with the refusal's `Retry-After` header.
    pub async fn ws_try_full(&self, auth: WsAuth<'_>) -> Result<Ws, (u16, Option<String>, Value)> {
        let url = match auth {
            WsAuth::Query(t) => format!("ws://{}/api/agent-api/ws?token={t}", self.addr),
            _ => format!("ws://{}/api/agent-api/ws", self.addr),
        };
        let mut req = url.into_client_request().unwrap();
        if let WsAuth::Header(t) = auth {
            req.headers_mut()
                .insert("Authorization", format!("Bearer {t}").parse().unwrap());
        }
        match tokio_tungstenite::connect_async(req).await {
            Ok((stream, _)) => Ok(Ws { stream }),
            Err(tokio_tungstenite::tungstenite::Error::Http(res)) => {
                let status = res.status().as_u16();
                let body = res
                    .body()
                    .as_deref()
                    .and_then(|b| serde_json::from_slice(b).ok())
                    .unwrap_or(Value::Null);
                let retry_after = res
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                Err((status, retry_after, body))
            }
            Err(e) => panic!("ws connect failed below HTTP: {e}"),
        }
    }

    /// One `/updates` call with the raw `wait` and `cursor` strings; returns
    /// (status, body, headers).
    pub async fn updates_full(
        &self,
        token: &str,
        cursor: Option<&str>,
        wait: Option<&str>,
    ) -> (u16, Value, reqwest::header::HeaderMap) {
        let mut query: Vec<(&str, &str)> = Vec::new();
        if let Some(w) = wait {
            query.push(("wait", w));
        }
        if let Some(c) = cursor {
            query.push(("cursor", c));
        }
        let res = self
            .http
            .get(self.url("/api/agent-api/updates"))
            .query(&query)
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        (status, res.json().await.unwrap_or(Value::Null), headers)
    }

    /// Adds `participant` to conversation `cid` of `bay` (admin API).
    pub async fn add_member(&self, bay: &str, cid: &str, participant: &str) {
        let (s, b) = self
            .admin(
                reqwest::Method::POST,
                &format!("/bays/{bay}/conversations/{cid}/members"),
                Some(json!({ "participantId": participant })),
            )
            .await;
        assert_eq!(s, 200, "add member: {b}");
    }

    /// Removes `participant` from conversation `cid` of `bay` (admin API).
    pub async fn remove_member(&self, bay: &str, cid: &str, participant: &str) {
        let (s, b) = self
            .admin(
                reqwest::Method::DELETE,
                &format!("/bays/{bay}/conversations/{cid}/members/{participant}"),
                None,
            )
            .await;
        assert_eq!(s, 204, "remove member: {b}");
    }

    /// Rotates a participant's token (admin API); returns the new token.
    pub async fn rotate_token(&self, bay: &str, participant: &str) -> String {
        let (s, b) = self
            .admin(
                reqwest::Method::POST,
                &format!("/bays/{bay}/participants/{participant}/token"),
                None,
            )
            .await;
        assert_eq!(s, 201, "rotate token: {b}");
        b["token"].as_str().unwrap().to_owned()
    }

    /// Revokes a participant's token (admin API).
    pub async fn revoke_token(&self, bay: &str, participant: &str) {
        let (s, b) = self
            .admin(
                reqwest::Method::DELETE,
                &format!("/bays/{bay}/participants/{participant}/token"),
                None,
            )
            .await;
        assert_eq!(s, 204, "revoke token: {b}");
    }
}

impl Ws {
    /// Reads frames until one with `t == kind` arrives (within `patience`);
    /// returns it and every frame seen before it.
    pub async fn until_frame(&mut self, kind: &str, patience: Duration) -> (Value, Vec<Value>) {
        let deadline = tokio::time::Instant::now() + patience;
        let mut before = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next_within(left).await {
                WsNext::Json(v) if v["t"] == kind => return (v, before),
                WsNext::Json(v) => before.push(v),
                other => panic!("waiting for a {kind} frame, got {other:?} after {before:?}"),
            }
        }
    }
}

// ---- additions for agent_api / admin_api / operations tests ----

/// The `switchboard serve` command that [`Gateway::spawn_with`] runs (same
/// environment and flags), for callers that need to adjust it further —
/// e.g. remove a variable — before [`Gateway::spawn_command`].
pub fn serve_command(opts: &Opts) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_switchboard"));
    cmd.arg("serve")
        .arg("--bind")
        .arg("127.0.0.1:0")
        .args(&opts.args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("RUST_LOG", "info")
        .env("SWITCHBOARD_ADMIN_TOKEN", ADMIN_TOKEN)
        .env("SWITCHBOARD_LIMITS__UPDATES_PER_MINUTE", "100000")
        .env("SWITCHBOARD_LIMITS__AGENT_REQUESTS_PER_MINUTE", "1000000")
        .env("SWITCHBOARD_TIMING__WATERMARK_INTERVAL", "100ms")
        // No presence.updated events: the other suites assert exact event
        // sequences; tests/presence.rs turns them on (and /agents shows
        // presence either way).
        .env("SWITCHBOARD_TIMING__PRESENCE_TICK", "0s")
        .env("NO_COLOR", "1")
        // Attachment bytes in a directory of this gateway's own, not the
        // working directory.
        .env(
            "SWITCHBOARD_FILES__DIR",
            std::env::temp_dir().join(format!(
                "{FILES_DIR_PREFIX}{}-{}",
                std::process::id(),
                rand::random::<u64>()
            )),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in &opts.env {
        cmd.env(k, v);
    }
    cmd
}

/// How [`serve_command`] names a gateway's own attachment directory.
const FILES_DIR_PREFIX: &str = "sb-files-";

impl Gateway {
    /// Like [`Gateway::spawn_with`], but with `SWITCHBOARD_ADMIN_TOKEN`
    /// removed from the environment: the admin API is disabled.
    pub async fn spawn_without_admin_token(opts: Opts) -> Gateway {
        let mut cmd = serve_command(&opts);
        cmd.env_remove("SWITCHBOARD_ADMIN_TOKEN");
        Self::spawn_command(cmd).await
    }

    /// Starts `cmd` (a `switchboard serve` with piped stdout/stderr), captures
    /// its output and waits for the "listening on" line.
    pub async fn spawn_command(mut cmd: Command) -> Gateway {
        // The attachment directory made up for this gateway alone (a test
        // that names its own keeps it).
        let files_dir = cmd
            .get_envs()
            .find(|(k, _)| *k == "SWITCHBOARD_FILES__DIR")
            .and_then(|(_, v)| v)
            .map(std::path::PathBuf::from)
            .filter(|dir| {
                dir.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(FILES_DIR_PREFIX))
            });
        let mut child = cmd.spawn().expect("start switchboard");
        let output = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        for stream in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let out = output.clone();
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let clean = strip_ansi(&line);
                    out.lock().unwrap().push(clean.clone());
                    let _ = tx.send(clean);
                }
            });
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let addr = loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = rx.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "gateway did not report its address: {:?}",
                    output.lock().unwrap()
                )
            });
            if let Some(rest) = line.split("listening on ").nth(1) {
                break rest
                    .split_whitespace()
                    .next()
                    .unwrap()
                    .trim_matches('"')
                    .to_owned();
            }
        };
        Gateway {
            addr,
            child,
            output,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .unwrap(),
            redis: None,
            files_dir,
        }
    }

    /// Sends `signal` (e.g. "-TERM") to the process without waiting.
    pub fn send_signal(&self, signal: &str) {
        unsafe_kill(self.child.id(), signal);
    }

    /// Waits up to `patience` for the process to exit on its own.
    pub fn wait_for_exit(&mut self, patience: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + patience;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if std::time::Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Any request; returns (status, headers, body as JSON or `Null`).
    pub async fn send_raw(
        &self,
        req: reqwest::RequestBuilder,
    ) -> (u16, reqwest::header::HeaderMap, Value) {
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        let text = res.text().await.unwrap();
        (
            status,
            headers,
            serde_json::from_str(&text).unwrap_or(Value::Null),
        )
    }
}

/// Asserts `body` is the JSON error body `{error, code, message}` with
/// `code`, and `status` is `expected`.
#[track_caller]
pub fn assert_error(status: u16, body: &Value, expected: u16, code: &str) {
    assert_eq!(status, expected, "status for {code}: {body}");
    let obj = body
        .as_object()
        .unwrap_or_else(|| panic!("error body is not a JSON object: {body}"));
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    // Draft append refusals say where to resume (`length`); nothing else
    // adds to the three keys.
    let resumable = ["APPEND_GAP", "APPEND_CONFLICT", "INVALID_CONTENT"].contains(&code);
    keys.retain(|k| !(resumable && *k == "length"));
    assert_eq!(keys, ["code", "error", "message"], "{body}");
    assert_eq!(body["code"], code, "{body}");
    assert_eq!(body["error"], code.to_ascii_lowercase(), "{body}");
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
}

// ---- multi-node fixtures (tests/cluster.rs, tests/loadbalancer.rs, and the
// ---- `SWITCHBOARD_TEST_STORE=redis` run of the end-to-end suite) ----

/// A real `redis-server` for a test: its own free port and temporary
/// directory, `maxmemory-policy noeviction`, optionally with AOF
/// (`appendonly yes`, `appendfsync always`). Killed on drop.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    aof: bool,
    dir: tempfile::TempDir,
}

impl RedisServer {
    /// Starts a server; with `aof` every acknowledged write is fsynced to
    /// the append-only file before the reply, so a restart keeps it.
    pub fn start(aof: bool) -> RedisServer {
        let mut last_err = String::new();
        // A port found free may be taken before the server binds it; retry.
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .expect("a free port");
            let mut server = RedisServer {
                child: None,
                port,
                aof,
                dir: tempfile::tempdir().expect("temp dir for redis-server"),
            };
            match server.launch() {
                Ok(()) => return server,
                Err(e) => last_err = e,
            }
        }
        panic!("redis-server did not start: {last_err}");
    }

    fn launch(&mut self) -> Result<(), String> {
        let log_path = self.dir.path().join("redis.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .expect("redis log file");
        let persistence: &[&str] = if self.aof {
            &["--appendonly", "yes", "--appendfsync", "always"]
        } else {
            &["--appendonly", "no"]
        };
        let child = Command::new("redis-server")
            .arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1", "--daemonize", "no", "--save", ""])
            .args(["--maxmemory-policy", "noeviction"])
            .arg("--dir")
            .arg(self.dir.path())
            .args(persistence)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("redis log file"))
            .stderr(log)
            .spawn()
            .expect("cannot run redis-server: install it (apt-get install redis-server)");
        self.child = Some(child);
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        while std::time::Instant::now() < deadline {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                self.child = None;
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                return Err(format!("exited with {status}: {log}"));
            }
            // PING answers +PONG only once the data set is loaded.
            if self.try_cmd(&["PING"]).is_ok_and(|r| r == "PONG") {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err("not answering PING after 15 s".into())
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Stops the server at once (SIGKILL: no shutdown save).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Kills the server (if running) and starts it again on the same port
    /// and directory: with AOF it reloads every acknowledged write.
    pub fn restart(&mut self) {
        self.kill();
        self.launch().expect("restart redis-server");
    }

    /// Kills the server and starts an empty one on the same port (a Redis
    /// that lost its data).
    pub fn restart_empty(&mut self) {
        self.kill();
        for entry in std::fs::read_dir(self.dir.path()).expect("redis dir") {
            let path = entry.expect("redis dir entry").path();
            if path.file_name().is_some_and(|n| n != "redis.log") {
                if path.is_dir() {
                    let _ = std::fs::remove_dir_all(&path);
                } else {
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
        self.launch().expect("restart redis-server");
    }

    /// Runs one command; panics on a connection failure. The reply is
    /// flattened to text (arrays joined with newlines, errors as `-ERR …`).
    pub fn cmd(&self, args: &[&str]) -> String {
        self.try_cmd(args)
            .unwrap_or_else(|e| panic!("redis {args:?}: {e}"))
    }

    /// Runs one command on a fresh connection (plain RESP, no client library).
    pub fn try_cmd(&self, args: &[&str]) -> std::io::Result<String> {
        use std::io::Write;
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", self.port))?;
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut req = format!("*{}\r\n", args.len());
        for a in args {
            req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        stream.write_all(req.as_bytes())?;
        read_resp(&mut BufReader::new(stream))
    }
}

fn read_resp(r: &mut impl BufRead) -> std::io::Result<String> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    let line = line.trim_end_matches("\r\n");
    let (kind, rest) = line.split_at(1.min(line.len()));
    match kind {
        "+" | ":" => Ok(rest.to_owned()),
        "-" => Ok(line.to_owned()),
        "$" => {
            let n: i64 = rest.parse().unwrap_or(-1);
            if n < 0 {
                return Ok("(nil)".to_owned());
            }
            let mut buf = vec![0u8; n as usize + 2];
            r.read_exact(&mut buf)?;
            buf.truncate(n as usize);
            Ok(String::from_utf8_lossy(&buf).into_owned())
        }
        "*" => {
            let n: i64 = rest.parse().unwrap_or(-1);
            let mut items = Vec::new();
            for _ in 0..n.max(0) {
                items.push(read_resp(r)?);
            }
            Ok(items.join("\n"))
        }
        _ => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("unexpected reply {line:?}"),
        )),
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

impl Opts {
    /// `--store redis --redis-url <url>`: the node uses that Redis.
    pub fn redis(self, url: &str) -> Self {
        self.arg("--store").arg("redis").arg("--redis-url").arg(url)
    }

    /// With `SWITCHBOARD_TEST_STORE=redis` in the test's environment, and
    /// no store chosen by the test itself: a redis-server of the gateway's
    /// own (no persistence, like the memory engine) and `--store redis`.
    fn with_test_store(self) -> (Opts, Option<RedisServer>) {
        let chosen = self
            .args
            .iter()
            .any(|a| a == "--store" || a.starts_with("--store="))
            || self.env.iter().any(|(k, _)| k == "SWITCHBOARD_STORE");
        if chosen || std::env::var("SWITCHBOARD_TEST_STORE").as_deref() != Ok("redis") {
            return (self, None);
        }
        let server = RedisServer::start(false);
        (self.redis(&server.url()), Some(server))
    }
}

impl Gateway {
    /// Kills the process at once (SIGKILL: no drain, no final frames).
    pub fn kill_now(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// `GET /readyz` status.
    pub async fn readyz(&self) -> u16 {
        match self.http.get(self.url("/readyz")).send().await {
            Ok(res) => res.status().as_u16(),
            Err(_) => 0,
        }
    }

    /// The store this gateway runs on: `"redis"` when it has a Redis of
    /// its own from `SWITCHBOARD_TEST_STORE=redis`, else `"memory"` unless
    /// the test chose one itself.
    pub fn test_store(&self) -> &'static str {
        if self.redis.is_some() {
            "redis"
        } else {
            "memory"
        }
    }
}

// ---- clients that talk to an address (a node or a load balancer) and
// ---- fail over between addresses, for tests/cluster.rs and tests/loadbalancer.rs ----

/// The `id` field of a message (or a send's 201 body).
pub fn id_of(v: &Value) -> String {
    v["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id: {v}"))
        .to_owned()
}

/// An HTTP client with a timeout above the longest `/updates` wait.
pub fn test_http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(40))
        .build()
        .unwrap()
}

/// One `/updates` call at `addr` (host:port). `Err` when no HTTP answer came.
pub async fn poll_at(
    http: &reqwest::Client,
    addr: &str,
    token: &str,
    cursor: Option<&str>,
    wait: &str,
) -> Result<(u16, Value, reqwest::header::HeaderMap), String> {
    let mut query = vec![("wait", wait)];
    if let Some(c) = cursor {
        query.push(("cursor", c));
    }
    let res = http
        .get(format!("http://{addr}/api/agent-api/updates"))
        .query(&query)
        .bearer_auth(token)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    let body = res.json().await.unwrap_or(Value::Null);
    Ok((status, body, headers))
}

/// A held `/updates` at `addr` in the background; yields (status, body,
/// how long it held).
pub fn spawn_poll(
    addr: &str,
    token: &str,
    cursor: Option<&str>,
    wait: &str,
) -> tokio::task::JoinHandle<(u16, Value, Duration)> {
    let (addr, token) = (addr.to_owned(), token.to_owned());
    let (cursor, wait) = (cursor.map(str::to_owned), wait.to_owned());
    tokio::spawn(async move {
        let started = std::time::Instant::now();
        let (s, b, _) = poll_at(&test_http(), &addr, &token, cursor.as_deref(), &wait)
            .await
            .expect("poll reached the server");
        (s, b, started.elapsed())
    })
}

/// A WebSocket at `addr` (host:port) with the bearer header, or why not.
pub async fn ws_at(addr: &str, token: &str) -> Result<Ws, String> {
    let mut req = format!("ws://{addr}/api/agent-api/ws")
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("Authorization", format!("Bearer {token}").parse().unwrap());
    let connect = tokio_tungstenite::connect_async(req);
    match tokio::time::timeout(Duration::from_secs(5), connect).await {
        Ok(Ok((stream, _))) => Ok(Ws { stream }),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("connect timed out".into()),
    }
}

/// What a failover reader ([`ws_reader`], [`poll_reader`]) saw.
#[derive(Default)]
pub struct Reader {
    pub ids: Mutex<std::collections::HashSet<String>>,
    /// WebSocket connections opened, or `/updates` answered 200, so far.
    pub sessions: std::sync::atomic::AtomicUsize,
    /// Whether it holds a cursor (is streaming).
    pub ready: std::sync::atomic::AtomicBool,
    /// Answers that must never happen here: 409 / `reset`, unknown frames,
    /// a 503 without `Retry-After` or with another code.
    pub violations: Mutex<Vec<String>>,
    /// Statuses (polls) or close codes (sockets) that ended a call and were retried.
    pub retried: Mutex<Vec<u16>>,
}

impl Reader {
    pub fn is_ready(&self) -> bool {
        self.ready.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn sessions(&self) -> usize {
        self.sessions.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn has_all(&self, ids: &[String]) -> bool {
        let seen = self.ids.lock().unwrap();
        ids.iter().all(|id| seen.contains(id))
    }

    pub fn missing(&self, ids: &[String]) -> Vec<String> {
        let seen = self.ids.lock().unwrap();
        ids.iter()
            .filter(|id| !seen.contains(*id))
            .cloned()
            .collect()
    }

    pub fn violations(&self) -> Vec<String> {
        self.violations.lock().unwrap().clone()
    }
}

/// A WebSocket client that, whenever its connection ends, reconnects to
/// the next address of `addrs` (round robin) with the last `cursor` frame
/// it got, until `stop`.
pub fn ws_reader(
    addrs: Vec<String>,
    token: String,
    reader: Arc<Reader>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    use std::sync::atomic::Ordering;
    tokio::spawn(async move {
        let mut cursor: Option<String> = None;
        let mut at = 0usize;
        while !stop.load(Ordering::Relaxed) {
            let addr = &addrs[at % addrs.len()];
            let mut ws = match ws_at(addr, &token).await {
                Ok(ws) => ws,
                Err(_) => {
                    at += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            ws.hello(cursor.as_deref()).await;
            reader.sessions.fetch_add(1, Ordering::Relaxed);
            loop {
                if stop.load(Ordering::Relaxed) {
                    ws.close().await;
                    return;
                }
                match ws.next_within(Duration::from_millis(300)).await {
                    WsNext::Json(f) => match f["t"].as_str() {
                        Some("event") => {
                            let id = id_of(&f["event"]["message"]);
                            reader.ids.lock().unwrap().insert(id);
                        }
                        Some("cursor") => {
                            cursor = f["cursor"].as_str().map(str::to_owned);
                            reader.ready.store(true, Ordering::Relaxed);
                        }
                        Some("ready") => {}
                        _ => reader.violations.lock().unwrap().push(f.to_string()),
                    },
                    WsNext::Closed(code) => {
                        reader.retried.lock().unwrap().push(code.unwrap_or(0));
                        break;
                    }
                    WsNext::Timeout => {}
                }
            }
            at += 1;
        }
    })
}

/// A long-poll client (`wait=1`) that moves to the next address of `addrs`
/// when no HTTP answer comes, keeping its cursor; other answers than 200
/// are recorded and retried after a pause.
pub fn poll_reader(
    addrs: Vec<String>,
    token: String,
    reader: Arc<Reader>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    use std::sync::atomic::Ordering;
    tokio::spawn(async move {
        let http = test_http();
        let mut cursor: Option<String> = None;
        let mut at = 0usize;
        while !stop.load(Ordering::Relaxed) {
            let addr = &addrs[at % addrs.len()];
            match poll_at(&http, addr, &token, cursor.as_deref(), "1").await {
                Ok((200, body, _)) => {
                    {
                        let mut seen = reader.ids.lock().unwrap();
                        for e in body["events"].as_array().unwrap() {
                            seen.insert(id_of(&e["message"]));
                        }
                    }
                    cursor = Some(body["cursor"].as_str().unwrap().to_owned());
                    reader.sessions.fetch_add(1, Ordering::Relaxed);
                    reader.ready.store(true, Ordering::Relaxed);
                }
                Ok((409, body, _)) => {
                    reader.violations.lock().unwrap().push(body.to_string());
                    cursor = None;
                }
                Ok((status, body, headers)) => {
                    let sane_503 = matches!(
                        body["code"].as_str(),
                        Some("STORE_UNAVAILABLE" | "UNAVAILABLE")
                    ) && headers.contains_key("retry-after");
                    if status == 503 && !sane_503 {
                        reader
                            .violations
                            .lock()
                            .unwrap()
                            .push(format!("503 {body} {headers:?}"));
                    }
                    reader.retried.lock().unwrap().push(status);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(_) => {
                    at += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    })
}

/// Waits (up to 30 s) until both failover readers hold every accepted id,
/// stops them, and asserts that nothing was lost and neither saw a
/// violation. `context()` is added to the failure message (e.g. nginx's log).
pub async fn assert_both_readers_got_everything(
    accepted: &[String],
    by_ws: &Reader,
    by_poll: &Reader,
    stop: &std::sync::atomic::AtomicBool,
    tasks: impl IntoIterator<Item = tokio::task::JoinHandle<()>>,
    context: impl Fn() -> String,
) {
    let all = eventually(Duration::from_secs(30), || async {
        by_ws.has_all(accepted) && by_poll.has_all(accepted)
    })
    .await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    assert!(
        all,
        "lost over WS: {:?}; lost over /updates: {:?}; {}",
        by_ws.missing(accepted),
        by_poll.missing(accepted),
        context()
    );
    assert!(by_ws.violations().is_empty(), "{:?}", by_ws.violations());
    assert!(
        by_poll.violations().is_empty(),
        "{:?}",
        by_poll.violations()
    );
}

// ---- observable signals and exact close codes ----

impl Gateway {
    /// The node's whole `/metrics` exposition.
    pub async fn metrics_text(&self) -> String {
        self.http
            .get(self.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// The sum of every `/metrics` sample whose line starts with `name`
    /// (0 when the series does not exist yet).
    pub async fn metric(&self, name: &str) -> f64 {
        self.metrics_text()
            .await
            .lines()
            .filter(|l| l.starts_with(name))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    /// Waits until exactly `n` `/updates` calls are held on this node
    /// (attached and replayed, waiting for an event): the signal that a
    /// background poll reached the held path.
    pub async fn until_held(&self, n: usize) {
        let held = eventually(Duration::from_secs(20), || async {
            self.metric("switchboard_held_polls").await == n as f64
        })
        .await;
        assert!(
            held,
            "{} held polls, expected {n}",
            self.metric("switchboard_held_polls").await
        );
    }
}

impl Ws {
    /// Reads until the socket closes and asserts the close: the close code
    /// and the `code` of the `error` frame right before it are `close`'s.
    /// Returns the frames before the close, the error frame last.
    pub async fn expect_server_close(
        &mut self,
        close: switchboard_protocol::error::WsClose,
        patience: Duration,
    ) -> Vec<Value> {
        let (got, frames) = self.expect_close(patience).await;
        assert_eq!(
            got,
            Some(close.close_code()),
            "close code for {close:?}; frames before: {frames:?}"
        );
        let last = frames
            .last()
            .unwrap_or_else(|| panic!("no error frame before the {close:?} close"));
        assert_eq!(last["t"], "error", "{last}");
        assert_eq!(last["code"], close.as_str(), "{last}");
        assert!(
            last["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{last}"
        );
        frames
    }
}
