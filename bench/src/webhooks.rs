//! The webhook fan-out scenario: one GROUP of N agents and a human; every
//! agent has a webhook pointing at a receiver inside the load generator;
//! the human posts M messages (at a fixed rate, or as fast as the gateway
//! takes them) and every agent must get every message exactly once.
//!
//! The receiver is an axum server on the load generator's runtime (and CPU):
//! it answers every POST `204`, dedupes on the `webhook-id` header, and per
//! agent (`/hook/{index}`) keeps a bitmap of the message sequence numbers it
//! got, so loss, duplicates (a `webhook-id` seen twice: an at-least-once
//! redelivery) and order are exact. Latency is measured twice:
//!
//! - `latency_created`: the message's `createdAt` (server wall clock when
//!   the post was accepted, millisecond precision) → receipt (wall clock,
//!   same machine): what webhook delivery itself takes;
//! - `latency_scheduled`: the message's scheduled publish time (the stamp
//!   in its body, as in S1) → receipt: includes the post itself and any lag
//!   of the publisher, so an overloaded gateway shows up as latency.
//!
//! The stamp is found in the body's `message` object (the last field of a
//! v2 body), not in `history`, which carries earlier stamps.

use crate::procstat;
use crate::runner::publish;
use crate::scenario::{cpu, merge, others, Common};
use crate::stamp;
use crate::stats::{new_hist, Latency};
use crate::target::anyhow_lite::{bail, Context, Result};
use crate::target::{System, Target};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use base64::Engine as _;
use futures_util::StreamExt;
use hdrhistogram::Histogram;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Environment the gateway is started with: deliveries to
/// `http://127.0.0.1:…` must be allowed.
pub const ENV: [(&str, &str); 2] = [
    ("SWITCHBOARD_WEBHOOKS__ALLOW_HTTP", "true"),
    ("SWITCHBOARD_WEBHOOKS__ALLOW_PRIVATE_DESTINATIONS", "true"),
];

/// One agent's deliveries.
#[derive(Default)]
struct AgentRx {
    /// `webhook-id`s seen.
    ids: Mutex<HashSet<Box<str>>>,
    /// Bitmap of message sequence numbers seen, and the highest one.
    seen: Mutex<(Vec<u64>, Option<u64>)>,
    /// Unique messages of the measured part.
    measured: AtomicU64,
    /// When the last measured message arrived (ns since harness start).
    last_ns: AtomicU64,
    /// Measured messages in the order they arrived (sequence numbers).
    order: Mutex<Vec<u32>>,
    /// Signing secret (decoded), to verify the warm-up delivery.
    key: Mutex<Option<Vec<u8>>>,
}

/// What the receiver counts.
struct Rx {
    agents: Vec<AgentRx>,
    /// Every POST.
    posts: AtomicU64,
    bytes: AtomicU64,
    /// POSTs to an unknown path or without `webhook-id`.
    bad: AtomicU64,
    /// A `webhook-id` seen before (a redelivery).
    dup_ids: AtomicU64,
    /// A new `webhook-id` for a message the agent already had.
    dup_messages: AtomicU64,
    /// A message with a lower sequence number than one the agent already
    /// had: posts are concurrent (up to `inflight`), so the log's order can
    /// differ from the sequence numbers; the order check is `order_differs`.
    out_of_order: AtomicU64,
    /// Deliveries that are not a stamped `message.created`.
    other_events: AtomicU64,
    /// Unique (agent, message) deliveries, all.
    unique: AtomicU64,
    /// Sequence numbers from here on are measured.
    measure_from_seq: AtomicU64,
    measured: AtomicU64,
    hist_created: Mutex<Histogram<u64>>,
    hist_sched: Mutex<Histogram<u64>>,
    /// Receipt times (ns since harness start) of measured deliveries.
    receipts: Mutex<Vec<u64>>,
    sig_ok: AtomicU64,
    sig_bad: AtomicU64,
    /// First bad signature (for the report).
    sig_first_bad: Mutex<Option<String>>,
}

impl Rx {
    fn new(agents: usize) -> Self {
        Rx {
            agents: (0..agents).map(|_| AgentRx::default()).collect(),
            posts: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            bad: AtomicU64::new(0),
            dup_ids: AtomicU64::new(0),
            dup_messages: AtomicU64::new(0),
            out_of_order: AtomicU64::new(0),
            other_events: AtomicU64::new(0),
            unique: AtomicU64::new(0),
            measure_from_seq: AtomicU64::new(u64::MAX),
            measured: AtomicU64::new(0),
            hist_created: Mutex::new(new_hist()),
            hist_sched: Mutex::new(new_hist()),
            receipts: Mutex::new(Vec::new()),
            sig_ok: AtomicU64::new(0),
            sig_bad: AtomicU64::new(0),
            sig_first_bad: Mutex::new(None),
        }
    }

    fn record(&self, i: usize, headers: &HeaderMap, body: &[u8]) {
        let now_ns = stamp::now_ns();
        let now_us = unix_us();
        self.posts.fetch_add(1, Relaxed);
        self.bytes.fetch_add(body.len() as u64, Relaxed);
        let header = |k: &str| headers.get(k).and_then(|v| v.to_str().ok());
        let (Some(agent), Some(id)) = (self.agents.get(i), header("webhook-id")) else {
            self.bad.fetch_add(1, Relaxed);
            return;
        };
        if !agent.ids.lock().unwrap().insert(id.into()) {
            self.dup_ids.fetch_add(1, Relaxed);
            return;
        }
        // The v2 body's last field is `message`; `history` before it holds
        // earlier stamps.
        let Some(msg) = rfind(body, br#""message":{"#).map(|at| &body[at..]) else {
            self.other_events.fetch_add(1, Relaxed);
            return;
        };
        let Some((seq, sched_ns)) = stamp::parse(msg) else {
            self.other_events.fetch_add(1, Relaxed);
            return;
        };
        {
            let mut seen = agent.seen.lock().unwrap();
            let (bits, max) = &mut *seen;
            let (w, b) = ((seq / 64) as usize, seq % 64);
            if bits.len() <= w {
                bits.resize(w + 1, 0);
            }
            if bits[w] & (1 << b) != 0 {
                self.dup_messages.fetch_add(1, Relaxed);
                return;
            }
            bits[w] |= 1 << b;
            if max.is_some_and(|m| seq < m) {
                self.out_of_order.fetch_add(1, Relaxed);
            }
            *max = Some(max.map_or(seq, |m| m.max(seq)));
        }
        self.unique.fetch_add(1, Relaxed);
        if seq == 0 {
            self.verify(agent, headers, id, body);
        }
        if seq >= self.measure_from_seq.load(Relaxed) {
            self.measured.fetch_add(1, Relaxed);
            agent.measured.fetch_add(1, Relaxed);
            agent.last_ns.fetch_max(now_ns, Relaxed);
            agent.order.lock().unwrap().push(seq as u32);
            let _ = self
                .hist_sched
                .lock()
                .unwrap()
                .record((now_ns.saturating_sub(sched_ns) / 1000).max(1));
            if let Some(created_us) = created_at_us(msg) {
                let _ = self
                    .hist_created
                    .lock()
                    .unwrap()
                    .record(now_us.saturating_sub(created_us).max(1));
            }
            self.receipts.lock().unwrap().push(now_ns);
        }
    }

    /// Checks a Standard Webhooks signature (done for the warm-up message
    /// only: HMAC over a large body costs the receiver's CPU).
    fn verify(&self, agent: &AgentRx, headers: &HeaderMap, id: &str, body: &[u8]) {
        let Some(key) = agent.key.lock().unwrap().clone() else {
            return;
        };
        let header = |k: &str| headers.get(k).and_then(|v| v.to_str().ok()).unwrap_or("");
        let ts = header("webhook-timestamp");
        let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("any key");
        mac.update(format!("{id}.{ts}.").as_bytes());
        mac.update(body);
        let want = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
        let sig = header("webhook-signature");
        if sig
            .split(' ')
            .any(|s| s.strip_prefix("v1,") == Some(want.as_str()))
        {
            self.sig_ok.fetch_add(1, Relaxed);
        } else {
            self.sig_bad.fetch_add(1, Relaxed);
            self.sig_first_bad
                .lock()
                .unwrap()
                .get_or_insert_with(|| format!("id {id}, ts {ts}, signature {sig}"));
        }
    }
}

fn rfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).rposition(|w| w == needle)
}

fn unix_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// `"createdAt":"YYYY-MM-DDTHH:MM:SS.mmmZ"` in `msg` as Unix µs.
fn created_at_us(msg: &[u8]) -> Option<u64> {
    let key = br#""createdAt":""#;
    let at = msg.windows(key.len()).position(|w| w == key)? + key.len();
    let s = std::str::from_utf8(msg.get(at..at + 24)?).ok()?;
    parse_rfc3339_ms(s)
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` → Unix µs (UTC only, as the gateway writes it).
fn parse_rfc3339_ms(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() < 24 || b[4] != b'-' || b[10] != b'T' || b[19] != b'.' || b[23] != b'Z' {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (n(0..4)?, n(5..7)?, n(8..10)?);
    let (h, mi, se, ms) = (n(11..13)?, n(14..16)?, n(17..19)?, n(20..23)?);
    // Days from 1970-01-01 (Howard Hinnant's days_from_civil).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + se;
    u64::try_from(secs * 1_000_000 + ms * 1000).ok()
}

async fn receive(
    State(rx): State<Arc<Rx>>,
    Path(i): Path<usize>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    rx.record(i, &headers, &body);
    StatusCode::NO_CONTENT
}

/// Starts the receiver on 127.0.0.1; returns its base URL (`http://…/hook`).
async fn start_receiver(rx: Arc<Rx>) -> Result<String> {
    let app = axum::Router::new()
        .route("/hook/{i}", axum::routing::post(receive))
        .with_state(rx);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("receiver bind")?;
    let url = format!(
        "http://{}/hook",
        listener.local_addr().context("receiver address")?
    );
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            eprintln!("webhook receiver stopped: {e}");
        }
    });
    Ok(url)
}

/// Sets agent `i`'s webhook to `{base}/{i}`, through the agent's own
/// `POST /webhook` or the admin `PUT …/webhook`. Returns the secret.
async fn set_webhook(
    target: &Target,
    via: &str,
    i: usize,
    token: &str,
    base: &str,
) -> Result<String> {
    let node = &target.nodes[i % target.nodes.len()];
    let body = json!({ "url": format!("{base}/{i}") });
    let req = match via {
        "admin" => target
            .http
            .put(format!(
                "http://{node}/api/admin/bays/bench/participants/a{i}/webhook"
            ))
            .bearer_auth(crate::target::ADMIN_TOKEN),
        _ => target
            .http
            .post(format!("http://{node}/api/agent-api/webhook"))
            .bearer_auth(token),
    };
    let resp = req.json(&body).send().await.context("set webhook")?;
    let status = resp.status();
    let v: Value = resp.json().await.unwrap_or_default();
    if !status.is_success() {
        bail!("set webhook of a{i}: {status}: {v}");
    }
    v["secret"]
        .as_str()
        .map(str::to_string)
        .context("no secret in answer")
}

fn decode_secret(secret: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(secret.strip_prefix("whsec_")?)
        .ok()
}

/// CPU seconds of a set of root pids and their descendants.
fn cpu_of(pids: &[u32]) -> f64 {
    let mut all: Vec<u32> = pids.iter().flat_map(|&p| procstat::tree(p)).collect();
    all.sort_unstable();
    all.dedup();
    procstat::cpu_seconds(&all)
}

/// Redis `INFO` fields (from the first aux process, when it is a Redis).
async fn redis_info(addr: &str) -> Option<std::collections::HashMap<String, f64>> {
    let mut s = tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(addr))
        .await
        .ok()?
        .ok()?;
    s.write_all(b"INFO all\r\n").await.ok()?;
    let mut buf = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut chunk = [0u8; 16384];
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        let n = tokio::time::timeout(left, s.read(&mut chunk))
            .await
            .ok()?
            .ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        // "$<len>\r\n<data>\r\n"
        if let Some(nl) = buf.iter().position(|&c| c == b'\n') {
            let len: usize = std::str::from_utf8(&buf[1..nl]).ok()?.trim().parse().ok()?;
            if buf.len() >= nl + 1 + len {
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&buf);
    // `name:number` fields, and `cmdstat_NAME:calls=N,…` as `cmdstat_NAME` = N.
    Some(
        text.lines()
            .filter_map(|l| l.split_once(':'))
            .filter_map(|(k, v)| {
                let v = match k.starts_with("cmdstat_") {
                    true => v.strip_prefix("calls=")?.split(',').next()?,
                    false => v.trim(),
                };
                Some((k.to_string(), v.parse::<f64>().ok()?))
            })
            .collect(),
    )
}

/// The gateway's `switchboard_webhook_*` metrics (no histogram buckets).
async fn webhook_metrics(target: &Target) -> Vec<String> {
    let mut out = Vec::new();
    for node in &target.nodes {
        let Ok(resp) = target
            .http
            .get(format!("http://{node}/metrics"))
            .send()
            .await
        else {
            continue;
        };
        let text = resp.text().await.unwrap_or_default();
        out.extend(
            text.lines()
                .filter(|l| l.starts_with("switchboard_webhook_") && !l.contains("_bucket"))
                .map(|l| format!("{node} {l}")),
        );
    }
    out
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The webhook fan-out scenario. `rate` 0 = as fast as the gateway takes
/// posts (`inflight` at a time); `max_secs` bounds the measured wait for
/// deliveries; what has not arrived by then gets `grace_secs` more (not
/// measured), so a slow gateway's late deliveries are told from lost ones.
#[allow(clippy::too_many_arguments)]
pub async fn webhooks(
    c: &Common,
    agents: usize,
    rate: f64,
    messages: u64,
    via: &str,
    idle_secs: f64,
    max_secs: f64,
    grace_secs: f64,
) -> Result<Value> {
    if c.system != System::Switchboard {
        bail!("webhooks: Switchboard only");
    }
    let rx = Arc::new(Rx::new(agents));
    let base = start_receiver(rx.clone()).await?;
    let servers = c.start_with_env(&ENV)?;
    let n_aux = c.aux.len().min(servers.pids.len());
    let (aux_pids, gw_pids) = servers.pids.split_at(n_aux);
    let (aux_pids, gw_pids) = (aux_pids.to_vec(), gw_pids.to_vec());
    let target = Arc::new(Target::new(c.system, servers.addrs.clone(), c.inflight)?);
    let layout = target.provision(1, agents, true, 32).await?;

    // Webhooks: one per agent, pointing at the receiver.
    let t0 = Instant::now();
    let secrets: Vec<Result<String>> = futures_util::stream::iter(
        layout
            .members
            .iter()
            .enumerate()
            .map(|(i, m)| set_webhook(&target, via, i, &m.token, &base)),
    )
    .buffered(32)
    .collect()
    .await;
    for (i, s) in secrets.into_iter().enumerate() {
        *rx.agents[i].key.lock().unwrap() = decode_secret(&s?);
    }
    let set_secs = t0.elapsed().as_secs_f64();

    let token = layout.publishers[0].clone();
    let pick = move |_i: u64| (0usize, token.clone());
    let mut seqs = vec![0u64; 1];

    // Warm-up: one message every agent must get (workers started, one
    // connection per agent to the receiver open, signatures checked).
    let t0 = Instant::now();
    let first = publish(&target, 1.0, 1, stamp::now_ns(), &pick, &mut seqs, 1, c.pad).await;
    if first.ok != 1 {
        bail!("warm-up publish failed: {:?}", first.first_error);
    }
    let warm_deadline = Instant::now() + Duration::from_secs(60);
    while rx.unique.load(Relaxed) < agents as u64 && Instant::now() < warm_deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let warm_secs = t0.elapsed().as_secs_f64();
    let warm_got = rx.unique.load(Relaxed);
    if warm_got < agents as u64 {
        bail!(
            "warm-up: {warm_got} of {agents} agents got the first message within 60 s \
             (receiver saw {} POSTs)",
            rx.posts.load(Relaxed)
        );
    }

    // Idle cost: N webhook workers waiting for the log.
    let redis_addr = servers.aux_addrs.first().cloned();
    let idle = if idle_secs > 0.0 {
        let (g0, a0, t) = (cpu_of(&gw_pids), cpu_of(&aux_pids), Instant::now());
        let r0 = match &redis_addr {
            Some(a) => redis_info(a).await,
            None => None,
        };
        tokio::time::sleep(Duration::from_secs_f64(idle_secs)).await;
        let r1 = match &redis_addr {
            Some(a) => redis_info(a).await,
            None => None,
        };
        let secs = t.elapsed().as_secs_f64();
        let per_s = |k: &str| {
            let (a, b) = (r0.as_ref()?.get(k)?, r1.as_ref()?.get(k)?);
            Some(((b - a) / secs).round())
        };
        json!({
            "secs": round3(secs),
            "gateway_cpu_cores": round3((cpu_of(&gw_pids) - g0) / secs),
            "aux_cpu_cores": round3((cpu_of(&aux_pids) - a0) / secs),
            "redis_commands_per_s": per_s("total_commands_processed"),
            "redis_connections_per_s": per_s("total_connections_received"),
            "redis_connected_clients": r1.as_ref().and_then(|r| r.get("connected_clients").copied()),
        })
    } else {
        Value::Null
    };

    // Measured: `messages` posts at `rate` (0: as fast as accepted).
    rx.measure_from_seq.store(seqs[0], Relaxed);
    let unique_before = rx.unique.load(Relaxed);
    let posts_before = rx.posts.load(Relaxed);
    let publish_rate = if rate > 0.0 { rate } else { 1e9 };
    let start_ns = stamp::now_ns() + 20_000_000;
    let r0 = match &redis_addr {
        Some(a) => redis_info(a).await,
        None => None,
    };
    let cpu0 = cpu(&servers);
    let (g0, a0) = (cpu_of(&gw_pids), cpu_of(&aux_pids));
    // Progress every 500 ms, for stalls.
    let progress: Arc<Mutex<Vec<(f64, u64)>>> = Arc::default();
    let sampler = {
        let (rx, progress) = (rx.clone(), progress.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                let t = (stamp::now_ns().saturating_sub(start_ns)) as f64 / 1e9;
                progress
                    .lock()
                    .unwrap()
                    .push((round3(t), rx.measured.load(Relaxed)));
            }
        })
    };
    let report = publish(
        &target,
        publish_rate,
        messages,
        start_ns,
        &pick,
        &mut seqs,
        c.inflight,
        c.pad,
    )
    .await;
    let publish_secs = (report.end_ns.saturating_sub(start_ns)) as f64 / 1e9;
    let expected = report.ok * agents as u64;
    // Wait for every delivery; give up after `max_secs` from the start, or
    // 15 s without progress (retries back off from 1 s).
    let deadline = stamp::instant_at(start_ns) + Duration::from_secs_f64(max_secs);
    let mut last = rx.measured.load(Relaxed);
    let mut last_change = Instant::now();
    let mut end_reason = "all delivered";
    loop {
        let now = rx.measured.load(Relaxed);
        if now >= expected {
            break;
        }
        if now != last {
            last = now;
            last_change = Instant::now();
        }
        if last_change.elapsed() > Duration::from_secs(15) {
            end_reason = "no progress for 15 s";
            break;
        }
        if Instant::now() > deadline {
            end_reason = "max_secs reached";
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let cpu1 = cpu(&servers);
    let (g1, a1) = (cpu_of(&gw_pids), cpu_of(&aux_pids));
    let r1 = match &redis_addr {
        Some(a) => redis_info(a).await,
        None => None,
    };
    sampler.abort();

    let delivered = rx.measured.load(Relaxed);
    let mut receipts = rx.receipts.lock().unwrap().clone();
    receipts.sort_unstable();
    let last_ns = receipts.last().copied().unwrap_or(start_ns);
    let span = (last_ns.saturating_sub(start_ns)) as f64 / 1e9;
    // Sustained rate: between the 10th and the 90th percentile delivery.
    let steady = if receipts.len() >= 10 {
        let (a, b) = (receipts.len() / 10, receipts.len() * 9 / 10);
        let secs = (receipts[b] - receipts[a]) as f64 / 1e9;
        if secs > 0.0 {
            ((b - a) as f64 / secs).round()
        } else {
            0.0
        }
    } else {
        0.0
    };
    let max_gap_ms = receipts.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0) as f64 / 1e6;
    let mut done: Vec<f64> = rx
        .agents
        .iter()
        .map(|a| (a.last_ns.load(Relaxed).saturating_sub(start_ns)) as f64 / 1e6)
        .collect();
    done.sort_by(f64::total_cmp);
    let incomplete = rx
        .agents
        .iter()
        .filter(|a| a.measured.load(Relaxed) < report.ok)
        .count();
    // Order: every agent must get the messages in the same (log) order;
    // compared with the first agent's, over the messages both got.
    let reference = rx.agents[0].order.lock().unwrap().clone();
    let order_differs = rx.agents[1..]
        .iter()
        .filter(|a| {
            let got = a.order.lock().unwrap();
            let (mine, theirs): (HashSet<u32>, HashSet<u32>) = (
                reference.iter().copied().collect(),
                got.iter().copied().collect(),
            );
            let r: Vec<u32> = reference
                .iter()
                .copied()
                .filter(|s| theirs.contains(s))
                .collect();
            let g: Vec<u32> = got.iter().copied().filter(|s| mine.contains(s)).collect();
            r != g
        })
        .count();
    let min_got = rx
        .agents
        .iter()
        .map(|a| a.measured.load(Relaxed))
        .min()
        .unwrap_or(0);
    let per_k = |cpu: f64| {
        if delivered > 0 {
            round3(cpu / (delivered as f64 / 1000.0))
        } else {
            0.0
        }
    };
    let (gw_cpu, aux_cpu, client_cpu) = (g1 - g0, a1 - a0, cpu1.client - cpu0.client);
    let redis = match (&r0, &r1) {
        (Some(a), Some(b)) => {
            let d = |k: &str| b.get(k).zip(a.get(k)).map(|(x, y)| x - y);
            // Calls per delivery by command (commands inside scripts are
            // counted under their own names too).
            let mut by_cmd: Vec<(String, f64)> = b
                .iter()
                .filter_map(|(k, v)| {
                    let name = k.strip_prefix("cmdstat_")?;
                    let calls = v - a.get(k).copied().unwrap_or(0.0);
                    (calls > 0.0)
                        .then(|| (name.to_string(), round3(calls / delivered.max(1) as f64)))
                })
                .collect();
            by_cmd.sort_by(|x, y| y.1.total_cmp(&x.1));
            json!({
                "calls_per_delivery_by_command": by_cmd.into_iter().map(|(k, v)| json!([k, v])).collect::<Vec<Value>>(),
                "commands": d("total_commands_processed"),
                "commands_per_delivery": d("total_commands_processed").map(|x| round3(x / delivered.max(1) as f64)),
                "connections_opened": d("total_connections_received"),
                "connected_clients_end": b.get("connected_clients"),
            })
        }
        _ => Value::Null,
    };
    // Not all there at the cut-off: late, or lost? Wait (unmeasured) for
    // up to `grace_secs`, stopping after 15 s without progress.
    let grace_deadline = Instant::now() + Duration::from_secs_f64(grace_secs);
    let mut last = rx.measured.load(Relaxed);
    let mut last_change = Instant::now();
    while rx.measured.load(Relaxed) < expected
        && Instant::now() < grace_deadline
        && last_change.elapsed() < Duration::from_secs(15)
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = rx.measured.load(Relaxed);
        if now != last {
            (last, last_change) = (now, Instant::now());
        }
    }
    let delivered_final = rx.measured.load(Relaxed);
    let posts = rx.posts.load(Relaxed) - posts_before;
    let metrics = webhook_metrics(&target).await;
    let out = merge(
        c.base("webhooks", &servers),
        json!({
            "agents": agents,
            "rate_msgs_per_s": if rate > 0.0 { json!(rate) } else { json!("max") },
            "messages": messages,
            "via": via,
            "server_env": ENV.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
            "webhooks_set_secs": round3(set_secs),
            "warmup_all_delivered_secs": round3(warm_secs),
            "signatures": {
                "checked_ok": rx.sig_ok.load(Relaxed),
                "bad": rx.sig_bad.load(Relaxed),
                "first_bad": rx.sig_first_bad.lock().unwrap().clone(),
            },
            "idle": idle,
            "publish_attempted": report.attempted,
            "published_ok": report.ok,
            "publish_errors": report.errors,
            "publish_first_error": report.first_error,
            "publish_secs": round3(publish_secs),
            "publish_max_dispatch_lag_ms": report.max_dispatch_lag_ms,
        }),
    );
    let out = merge(
        out,
        json!({
            "expected_deliveries": expected,
            "delivered": delivered,
            "undelivered_at_cutoff": expected.saturating_sub(delivered),
            "delivered_after_cutoff": delivered_final - delivered,
            "lost": expected.saturating_sub(delivered_final),
            "agents_incomplete": incomplete,
            "fewest_messages_one_agent_got": min_got,
            "end": end_reason,
            "duplicates_by_webhook_id": rx.dup_ids.load(Relaxed),
            "duplicate_messages_new_id": rx.dup_messages.load(Relaxed),
            "out_of_order_vs_seq": rx.out_of_order.load(Relaxed),
            "agents_order_differs": order_differs,
            "other_events": rx.other_events.load(Relaxed),
            "bad_requests": rx.bad.load(Relaxed),
            "posts_received": posts,
            "unique_before_measured": unique_before,
            "body_bytes_mean": if rx.posts.load(Relaxed) > 0 {
                (rx.bytes.load(Relaxed) / rx.posts.load(Relaxed)) as f64
            } else { 0.0 },
            "measured_secs": round3(span),
            "deliveries_per_s": if span > 0.0 { (delivered as f64 / span).round() } else { 0.0 },
            "deliveries_per_s_steady": steady,
            "latency_created": Latency::of(&rx.hist_created.lock().unwrap()),
            "latency_scheduled": Latency::of(&rx.hist_sched.lock().unwrap()),
            "max_gap_between_deliveries_ms": round3(max_gap_ms),
        }),
    );
    let out = merge(
        out,
        json!({
            "agent_done_ms": {
                "min": done.first().copied().map(round3),
                "p50": done.get(done.len() / 2).copied().map(round3),
                "max": done.last().copied().map(round3),
            },
            "gateway_cpu_s": round3(gw_cpu),
            "gateway_cpu_s_per_1000": per_k(gw_cpu),
            "aux_cpu_s": round3(aux_cpu),
            "aux_cpu_s_per_1000": per_k(aux_cpu),
            "server_cpu_s_per_million": per_k(gw_cpu + aux_cpu) * 1000.0,
            "client_cpu_s": round3(client_cpu),
            "client_cpu_s_per_1000": per_k(client_cpu),
            "others_cores": others(cpu0, cpu1),
            "redis": redis,
            "gateway_metrics": metrics,
            "progress": progress.lock().unwrap().clone(),
            "server_peak_rss_kib": servers.peak_rss_kib(),
        }),
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_created_at() {
        // 2026-12-01T01:49:18.123Z
        assert_eq!(
            parse_rfc3339_ms("2026-12-01T01:49:18.123Z"),
            Some(1_796_089_758_123_000)
        );
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(parse_rfc3339_ms("2026-12-01 01:49:18"), None);
    }

    #[test]
    fn finds_the_message_stamp_not_history() {
        let old = stamp::payload(5, 1, 0);
        let new = stamp::payload(9, 2, 0);
        let body = format!(
            r#"{{"event":"message.created","history":[{{"content":"{old}","createdAt":"2026-12-01T01:49:18.000Z"}}],"message":{{"id":"m","content":"{new}","metadata":null,"createdAt":"2026-12-01T01:49:18.123Z"}}}}"#
        );
        let msg = &body.as_bytes()[rfind(body.as_bytes(), br#""message":{"#).unwrap()..];
        assert_eq!(stamp::parse(msg), Some((2, 9)));
        assert_eq!(created_at_us(msg), Some(1_796_089_758_123_000));
    }
}
