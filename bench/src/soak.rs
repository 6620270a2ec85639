//! The soak scenario: one gateway node on Redis (AOF, `appendfsync
//! always`) held under steady load for `minutes`, with the node restarted
//! (SIGTERM, drain, start again on the same port) a third of the way in and
//! Redis restarted (SIGTERM, which writes its AOF, then start again) two
//! thirds of the way in.
//!
//! Load: `conns` agents in one Bay, in GROUPs of `room_size` with one
//! human who posts `rate` messages per second round-robin over the rooms
//! (through at most 32 requests in flight). `ws_share` of the agents hold a
//! WebSocket, the rest run an `/updates?wait=25` loop; both reconnect with
//! their last cursor after any failure (1–3 s later), and start over
//! (cursor `null`) after a `reset` / 409, which counts.
//!
//! Losses, under the at-least-once contract: a message counts as sent when
//! its post answered 201; every agent of its room must have received it
//! (by `message.id`, duplicates counted apart) once posting stopped and the
//! clients drained (up to `drain_secs`). Posts refused while a process
//! restarts (503, refused connections) are not sent and are counted apart.
//!
//! Memory: the node's RSS and fds every 10 s. RSS growth is reported per
//! incarnation of the node, from the end of its warm-up (`warmup_secs`
//! after it started) to its last sample, so the restart does not hide or
//! fake growth.

use crate::admin::{open_fds, snapshot, Node, ADMIN_TOKEN};
use crate::procstat;
use crate::target::anyhow_lite::{bail, Context, Result};
use crate::target::source_addr;
use futures_util::{SinkExt, StreamExt};
use parking_lot_lite::Mutex;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpSocket;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

/// `std::sync::Mutex` that shrugs off poisoning (a panicking client task
/// must not stop the others from recording).
mod parking_lot_lite {
    /// See the module docs.
    #[derive(Default)]
    pub struct Mutex<T>(std::sync::Mutex<T>);

    impl<T> Mutex<T> {
        /// A new mutex holding `v`.
        pub fn new(v: T) -> Self {
            Mutex(std::sync::Mutex::new(v))
        }
        /// Locks, ignoring poisoning.
        pub fn lock(&self) -> std::sync::MutexGuard<'_, T> {
            self.0.lock().unwrap_or_else(|e| e.into_inner())
        }
    }
}

/// Settings of one soak run.
#[derive(Clone, Debug)]
pub struct SoakSettings {
    /// Length of the loaded part, minutes.
    pub minutes: f64,
    /// Agents, each holding one connection.
    pub conns: usize,
    /// Share of them on WebSockets (the rest long-poll).
    pub ws_share: f64,
    /// Agents per room.
    pub room_size: usize,
    /// Messages posted per second, over all rooms.
    pub rate: f64,
    /// Seconds after each start of the node before RSS counts.
    pub warmup_secs: f64,
    /// Longest wait for the clients to catch up after posting stopped.
    pub drain_secs: f64,
    /// The gateway binary.
    pub bin: PathBuf,
    /// `redis-server`.
    pub redis_bin: String,
    /// Where process logs and the Redis AOF go.
    pub dir: PathBuf,
    /// Loopback source addresses for client sockets.
    pub src_addrs: usize,
}

/// One process of the run (the node or Redis), restartable on its port.
struct Proc {
    name: &'static str,
    cmd: Vec<String>,
    env: Vec<(String, String)>,
    log: PathBuf,
    child: Option<Child>,
    starts: usize,
}

impl Proc {
    fn start(&mut self) -> Result<u32> {
        self.starts += 1;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .context("log file")?;
        let mut c = Command::new(&self.cmd[0]);
        c.args(&self.cmd[1..])
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(log.try_clone().context("log")?)
            .stderr(log);
        // SAFETY: prctl is async-signal-safe; nothing else runs in pre_exec.
        unsafe {
            c.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let child = c.spawn().context(format!("spawn {}", self.name))?;
        let pid = child.id();
        self.child = Some(child);
        Ok(pid)
    }

    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGTERM, then waits up to `patience` (SIGKILL after).
    fn stop(&mut self, patience: Duration) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        let t0 = Instant::now();
        while t0.elapsed() < patience {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(5));
    }
}

/// Waits until `addr` accepts TCP connections (up to 30 s).
async fn listening(addr: &str) -> Result<()> {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(30) {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("{addr} did not listen within 30 s")
}

/// What one agent received.
#[derive(Default)]
struct Inbox {
    ids: HashSet<Box<str>>,
    duplicates: u64,
}

/// What the run counts.
#[derive(Default)]
struct Counters {
    connects: AtomicU64,
    connect_failures: AtomicU64,
    resets: AtomicU64,
    closes: AtomicU64,
    posts_ok: AtomicU64,
    posts_refused: AtomicU64,
}

/// State shared by the clients.
struct Shared {
    addr: String,
    src_addrs: usize,
    counters: Counters,
    inboxes: Vec<Mutex<Inbox>>,
    /// Per room, the ids of messages whose post answered 201.
    sent: Vec<Mutex<Vec<Box<str>>>>,
    room_size: usize,
    stop: AtomicBool,
}

impl Shared {
    fn record(&self, agent: usize, event: &Value) {
        if event["type"] != "message" {
            return;
        }
        let Some(id) = event["message"]["id"].as_str() else {
            return;
        };
        let mut inbox = self.inboxes[agent].lock();
        if !inbox.ids.insert(id.into()) {
            inbox.duplicates += 1;
        }
    }
}

/// Silence after which a WebSocket client gives its connection up and
/// reconnects: three of the server's 20 s ping intervals.
const SILENCE: Duration = Duration::from_secs(60);

/// A random pause of 1–3 s before reconnecting.
fn backoff(agent: usize, attempt: u64) -> Duration {
    let spread = (agent as u64)
        .wrapping_mul(2_654_435_761)
        .wrapping_add(attempt * 7919)
        % 2000;
    Duration::from_millis(1000 + spread)
}

/// One WebSocket client, reconnecting with its last cursor until stopped.
async fn ws_client(shared: Arc<Shared>, agent: usize, token: String) {
    let mut cursor: Option<String> = None;
    let mut attempt = 0u64;
    while !shared.stop.load(Relaxed) {
        attempt += 1;
        let session = ws_session(&shared, agent, &token, &mut cursor).await;
        shared.counters.closes.fetch_add(1, Relaxed);
        if session.is_err() {
            shared.counters.connect_failures.fetch_add(1, Relaxed);
        }
        tokio::time::sleep(backoff(agent, attempt)).await;
    }
}

/// One WebSocket session: `Ok` when it was up and then closed.
async fn ws_session(
    shared: &Shared,
    agent: usize,
    token: &str,
    cursor: &mut Option<String>,
) -> Result<()> {
    let addr: std::net::SocketAddr = shared.addr.parse().context("addr")?;
    let sock = TcpSocket::new_v4().context("socket")?;
    sock.bind((source_addr(agent, shared.src_addrs), 0).into())
        .context("bind")?;
    let tcp = tokio::time::timeout(SILENCE, sock.connect(addr))
        .await
        .context("connect timed out")?
        .context("connect")?;
    let mut req = format!("ws://{}/api/agent-api/ws", shared.addr)
        .into_client_request()
        .context("request")?;
    req.headers_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().context("header")?,
    );
    let (mut ws, _) = tokio::time::timeout(SILENCE, tokio_tungstenite::client_async(req, tcp))
        .await
        .context("handshake timed out")?
        .context("handshake")?;
    ws.send(Message::text(
        json!({"t": "hello", "resume": cursor}).to_string(),
    ))
    .await
    .context("hello")?;
    shared.counters.connects.fetch_add(1, Relaxed);
    // The server pings every 20 s: silence this long is a dead connection.
    while let Ok(Some(frame)) = tokio::time::timeout(SILENCE, ws.next()).await {
        if shared.stop.load(Relaxed) {
            break;
        }
        let Ok(Message::Text(text)) = frame else {
            if frame.is_err() {
                break;
            }
            continue;
        };
        let Ok(v) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        match v["t"].as_str() {
            Some("event") => shared.record(agent, &v["event"]),
            Some("cursor") => *cursor = v["cursor"].as_str().map(str::to_owned),
            Some("reset") => {
                shared.counters.resets.fetch_add(1, Relaxed);
                *cursor = None;
            }
            _ => {}
        }
    }
    Ok(())
}

/// One `/updates` loop until stopped.
async fn poll_client(shared: Arc<Shared>, http: reqwest::Client, agent: usize, token: String) {
    let mut cursor: Option<String> = None;
    let mut attempt = 0u64;
    let mut connected = false;
    while !shared.stop.load(Relaxed) {
        let mut url = format!("http://{}/api/agent-api/updates?wait=25", shared.addr);
        if let Some(c) = &cursor {
            url.push_str("&cursor=");
            url.push_str(c);
        }
        let res = http.get(&url).bearer_auth(&token).send().await;
        let status = res.as_ref().map(|r| r.status().as_u16()).unwrap_or(0);
        match (status, res) {
            (200, Ok(r)) => {
                if !connected {
                    connected = true;
                    shared.counters.connects.fetch_add(1, Relaxed);
                }
                let Ok(v) = r.json::<Value>().await else {
                    continue;
                };
                for e in v["events"].as_array().into_iter().flatten() {
                    shared.record(agent, e);
                }
                if let Some(c) = v["cursor"].as_str() {
                    cursor = Some(c.to_owned());
                }
            }
            (409, _) => {
                shared.counters.resets.fetch_add(1, Relaxed);
                cursor = None;
            }
            _ => {
                if connected {
                    shared.counters.closes.fetch_add(1, Relaxed);
                    connected = false;
                }
                shared.counters.connect_failures.fetch_add(1, Relaxed);
                attempt += 1;
                tokio::time::sleep(backoff(agent, attempt)).await;
            }
        }
    }
}

/// Posts `rate` messages per second round-robin over the rooms until
/// stopped.
async fn poster(shared: Arc<Shared>, node: Node, token: String, rooms: usize, rate: f64) {
    let gate = Arc::new(tokio::sync::Semaphore::new(32));
    let period = Duration::from_secs_f64(1.0 / rate.max(0.01));
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut seq = 0usize;
    while !shared.stop.load(Relaxed) {
        tick.tick().await;
        let Ok(permit) = gate.clone().acquire_owned().await else {
            return;
        };
        let room = seq % rooms;
        seq += 1;
        let (shared, node, token) = (shared.clone(), node.clone(), token.clone());
        tokio::spawn(async move {
            let _permit = permit;
            match node
                .post_message(&token, &format!("r{room}"), &format!("soak {seq}"))
                .await
            {
                Ok(id) => {
                    shared.sent[room].lock().push(id.into());
                    shared.counters.posts_ok.fetch_add(1, Relaxed);
                }
                Err(_) => {
                    shared.counters.posts_refused.fetch_add(1, Relaxed);
                }
            }
        });
    }
}

/// Messages sent to `agent`'s room that it did not receive.
fn missing(shared: &Shared, agent: usize) -> usize {
    let room = agent / shared.room_size;
    let sent = shared.sent[room].lock();
    let inbox = shared.inboxes[agent].lock();
    sent.iter().filter(|id| !inbox.ids.contains(*id)).count()
}

/// Runs the scenario (see the module docs).
///
/// # Errors
/// When a process does not start or provisioning fails.
pub async fn soak(s: SoakSettings) -> Result<Value> {
    std::fs::create_dir_all(&s.dir).context("run dir")?;
    let (redis_port, node_port) = (crate::server::free_port(), crate::server::free_port());
    let redis_addr = format!("127.0.0.1:{redis_port}");
    let addr = format!("127.0.0.1:{node_port}");
    let mut redis = Proc {
        name: "redis",
        cmd: [
            s.redis_bin.as_str(),
            "--port",
            &redis_port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--dir",
            &s.dir.display().to_string(),
            "--maxclients",
            "20000",
        ]
        .map(str::to_owned)
        .to_vec(),
        env: Vec::new(),
        log: s.dir.join("redis.log"),
        child: None,
        starts: 0,
    };
    let env = [
        ("SWITCHBOARD_ADMIN_TOKEN", ADMIN_TOKEN),
        ("SWITCHBOARD_LIMITS__UPDATES_PER_MINUTE", "1000000000"),
        (
            "SWITCHBOARD_LIMITS__AGENT_REQUESTS_PER_MINUTE",
            "1000000000",
        ),
        ("SWITCHBOARD_LIMITS__MAX_CONNECTIONS_PER_IP", "0"),
        ("RUST_LOG", "warn"),
    ];
    let mut gateway = Proc {
        name: "gateway",
        cmd: vec![
            s.bin.display().to_string(),
            "serve".into(),
            "--bind".into(),
            addr.clone(),
            "--store".into(),
            "redis".into(),
            "--redis-url".into(),
            format!("redis://{redis_addr}"),
        ],
        env: env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        log: s.dir.join("gateway.log"),
        child: None,
        starts: 0,
    };
    redis.start()?;
    listening(&redis_addr).await?;
    gateway.start()?;
    listening(&addr).await?;
    let node = Node::new(&addr, 64)?;

    // Provisioning.
    let t_setup = Instant::now();
    node.create_bay("soak").await?;
    let poster_token = node.create_participant("soak", "poster", "user").await?;
    let tokens: Vec<String> = futures_util::stream::iter(0..s.conns)
        .map(|i| {
            let node = node.clone();
            async move {
                node.create_participant("soak", &format!("a{i}"), "agent")
                    .await
            }
        })
        .buffered(64)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_>>()?;
    let rooms = s.conns.div_ceil(s.room_size);
    for r in 0..rooms {
        let members: Vec<String> = std::iter::once("poster".to_owned())
            .chain((r * s.room_size..((r + 1) * s.room_size).min(s.conns)).map(|i| format!("a{i}")))
            .collect();
        let members: Vec<&str> = members.iter().map(String::as_str).collect();
        node.create_conversation("soak", &format!("r{r}"), "GROUP", &members)
            .await?;
    }
    eprintln!(
        "soak: {} agents in {rooms} rooms provisioned in {:.0} s",
        s.conns,
        t_setup.elapsed().as_secs_f64()
    );

    let shared = Arc::new(Shared {
        addr: addr.clone(),
        src_addrs: s.src_addrs,
        counters: Counters::default(),
        inboxes: (0..s.conns).map(|_| Mutex::new(Inbox::default())).collect(),
        sent: (0..rooms).map(|_| Mutex::new(Vec::new())).collect(),
        room_size: s.room_size,
        stop: AtomicBool::new(false),
    });
    let ws_count = ((s.conns as f64) * s.ws_share).round() as usize;
    let poll_http = reqwest::Client::builder()
        .pool_max_idle_per_host(s.conns)
        .pool_idle_timeout(Duration::from_secs(3))
        .timeout(Duration::from_secs(40))
        .build()
        .context("http client")?;
    let mut tasks = Vec::new();
    for (i, token) in tokens.into_iter().enumerate() {
        let shared = shared.clone();
        if i < ws_count {
            tasks.push(tokio::spawn(ws_client(shared, i, token)));
        } else {
            tasks.push(tokio::spawn(poll_client(
                shared,
                poll_http.clone(),
                i,
                token,
            )));
        }
        // A gentle ramp: about 1,000 new connections per second.
        if i % 100 == 99 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    tasks.push(tokio::spawn(poster(
        shared.clone(),
        node.clone(),
        poster_token,
        rooms,
        s.rate,
    )));

    // The loaded part, sampling every 10 s.
    let total = Duration::from_secs_f64(s.minutes * 60.0);
    let node_restart_at = total / 3;
    let redis_restart_at = total * 2 / 3;
    let (mut node_restarted, mut redis_restarted) = (false, false);
    let t0 = Instant::now();
    let mut node_started_at = t0;
    let mut samples: Vec<Value> = Vec::new();
    let mut events: Vec<Value> = Vec::new();
    while t0.elapsed() < total {
        tokio::time::sleep(Duration::from_secs(10)).await;
        let mut v = snapshot(&node, gateway.pid()).await;
        v["t_s"] = json!(t0.elapsed().as_secs());
        v["node_start"] = json!(gateway.starts);
        v["after_warmup"] = json!(node_started_at.elapsed().as_secs_f64() >= s.warmup_secs);
        v["redis_rss_kib"] = json!(redis.pid().and_then(|p| procstat::status_kib(p, "VmRSS")));
        v["client_rss_kib"] = json!(procstat::status_kib(std::process::id(), "VmRSS"));
        v["client_fds"] = json!(open_fds(std::process::id()));
        v["posts_ok"] = json!(shared.counters.posts_ok.load(Relaxed));
        eprintln!("soak {:>5} s: {v}", t0.elapsed().as_secs());
        samples.push(v);
        if !node_restarted && t0.elapsed() >= node_restart_at {
            node_restarted = true;
            eprintln!("soak: restarting the node (SIGTERM, drain)");
            let t = Instant::now();
            gateway.stop(Duration::from_secs(30));
            gateway.start()?;
            listening(&addr).await?;
            node_started_at = Instant::now();
            events.push(json!({"event": "node restart", "t_s": t0.elapsed().as_secs(), "down_s": t.elapsed().as_secs_f64()}));
        }
        if !redis_restarted && t0.elapsed() >= redis_restart_at {
            redis_restarted = true;
            eprintln!("soak: restarting Redis (SIGTERM, AOF)");
            let t = Instant::now();
            redis.stop(Duration::from_secs(30));
            redis.start()?;
            listening(&redis_addr).await?;
            events.push(json!({"event": "redis restart", "t_s": t0.elapsed().as_secs(), "down_s": t.elapsed().as_secs_f64()}));
        }
    }

    // Stop posting (in-flight posts finish), then let the clients drain.
    let posting_stopped = Instant::now();
    if let Some(p) = tasks.pop() {
        p.abort();
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut lost = usize::MAX;
    while posting_stopped.elapsed() < Duration::from_secs_f64(s.drain_secs) {
        lost = (0..s.conns).map(|a| missing(&shared, a)).sum();
        if lost == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let final_sample = snapshot(&node, gateway.pid()).await;
    shared.stop.store(true, Relaxed);
    for t in &tasks {
        t.abort();
    }
    let sent_total: usize = shared.sent.iter().map(|s| s.lock().len()).sum();
    let expected: usize = (0..s.conns)
        .map(|a| shared.sent[a / s.room_size].lock().len())
        .sum();
    let duplicates: u64 = shared.inboxes.iter().map(|i| i.lock().duplicates).sum();
    let agents_missing = (0..s.conns).filter(|&a| missing(&shared, a) > 0).count();
    let growth = |start: usize| -> Value {
        let seg: Vec<&Value> = samples
            .iter()
            .filter(|v| v["node_start"] == start && v["after_warmup"] == true)
            .collect();
        let (Some(first), Some(last)) = (seg.first(), seg.last()) else {
            return Value::Null;
        };
        let (a, b) = (
            first["rss_kib"].as_f64().unwrap_or(0.0),
            last["rss_kib"].as_f64().unwrap_or(0.0),
        );
        let peak = seg
            .iter()
            .filter_map(|v| v["rss_kib"].as_f64())
            .fold(0.0, f64::max);
        json!({
            "from_t_s": first["t_s"], "to_t_s": last["t_s"],
            "rss_kib_start": a, "rss_kib_end": b, "rss_kib_peak": peak,
            "growth_pct": if a > 0.0 { (b - a) / a * 100.0 } else { 0.0 },
            "fds_start": first["fds"], "fds_end": last["fds"],
        })
    };
    let c = &shared.counters;
    gateway.stop(Duration::from_secs(30));
    redis.stop(Duration::from_secs(30));
    Ok(json!({
        "scenario": "soak",
        "minutes": s.minutes,
        "connections": s.conns,
        "ws": ws_count,
        "updates": s.conns - ws_count,
        "room_size": s.room_size,
        "rooms": rooms,
        "rate_msgs_per_s": s.rate,
        "warmup_secs": s.warmup_secs,
        "events": events,
        "messages_sent": sent_total,
        "deliveries_expected": expected,
        "deliveries_missing": lost,
        "agents_missing_something": agents_missing,
        "duplicate_deliveries": duplicates,
        "posts_refused": c.posts_refused.load(Relaxed),
        "sessions_opened": c.connects.load(Relaxed),
        "connect_failures": c.connect_failures.load(Relaxed),
        "resets": c.resets.load(Relaxed),
        "drain_s": posting_stopped.elapsed().as_secs_f64(),
        "rss_first_node": growth(1),
        "rss_second_node": growth(2),
        "final": final_sample,
        "samples": samples,
    }))
}
