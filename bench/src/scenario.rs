//! The scenarios (S1 fan-out fixed rate and find-the-maximum, S2 many small
//! rooms, S3 capacity, S4 resume storm, and the CI smoke run). Each returns
//! one JSON object; `main` prints it and appends it to the results files.

use crate::procstat;
use crate::runner::{publish, Pool, PublishReport};
use crate::server::Servers;
use crate::stamp;
use crate::stats::{self, new_hist, Latency};
use crate::target::anyhow_lite::{bail, Result};
use crate::target::{source_addr, System, Target};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What every scenario needs to know.
#[derive(Clone, Debug)]
pub struct Common {
    pub system: System,
    /// Free text shown in the tables ("switchboard memory", "nchan", …).
    pub label: String,
    /// Commands that start the server(s), `{port}` = a free port; one per node.
    pub servers: Vec<String>,
    /// Helper processes started first and measured with the servers (Redis).
    pub aux: Vec<String>,
    /// Or addresses of servers already running (with `pids` to measure).
    pub addrs: Vec<String>,
    pub pids: Vec<u32>,
    pub server_cpus: String,
    pub client_cpus: String,
    /// Concurrent handshakes while connecting.
    pub concurrency: usize,
    /// Concurrent publish requests.
    pub inflight: usize,
    /// Loopback source addresses to spread client sockets over.
    pub src_addrs: usize,
    /// Bytes of padding added to each message body.
    pub pad: usize,
    /// Switchboard: Bays the rooms are spread over (room `r` in Bay `r % bays`).
    pub bays: usize,
    pub log_dir: PathBuf,
    /// Write the S1 latency distribution here (for the plot).
    pub dist_file: Option<PathBuf>,
}

impl Common {
    fn start(&self) -> Result<Servers> {
        self.start_with_env(&[])
    }

    /// Starts the servers with extra environment variables (the webhook
    /// scenario's settings); `env` does not apply to `--addr` servers.
    pub(crate) fn start_with_env(&self, env: &[(&str, &str)]) -> Result<Servers> {
        if !self.servers.is_empty() {
            Servers::launch_with_env(
                &self.aux,
                &self.servers,
                &self.server_cpus,
                &self.log_dir,
                env,
            )
        } else if !self.addrs.is_empty() {
            Ok(Servers::external(self.addrs.clone(), self.pids.clone()))
        } else {
            bail!("give --server CMD (to launch) or --addr HOST:PORT")
        }
    }

    pub(crate) fn base(&self, scenario: &str, servers: &Servers) -> Value {
        json!({
            "scenario": scenario,
            "system": self.system.name(),
            "label": self.label,
            "nodes": servers.addrs.len(),
            "server_commands": servers.commands,
            "server_cpus": self.server_cpus,
            "client_cpus": self.client_cpus,
            "src_addrs": self.src_addrs,
            "pad_bytes": self.pad,
            "unix_time": std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        })
    }
}

pub(crate) fn merge(mut a: Value, b: Value) -> Value {
    if let (Some(a), Value::Object(b)) = (a.as_object_mut(), b) {
        a.extend(b);
    }
    a
}

/// CPU (server, client, whole machine) sampled at one instant.
#[derive(Clone, Copy)]
pub(crate) struct Cpu {
    pub(crate) server: f64,
    pub(crate) client: f64,
    pub(crate) machine: f64,
    pub(crate) at: Instant,
}

pub(crate) fn cpu(servers: &Servers) -> Cpu {
    Cpu {
        server: servers.cpu_seconds(),
        client: procstat::self_cpu_seconds(),
        machine: procstat::machine_busy_seconds(),
        at: Instant::now(),
    }
}

/// Cores' worth of CPU used by *other* processes between two samples (other
/// people's builds and tests on this shared machine): a run with more than
/// ~0.1 is disturbed and is re-run.
pub(crate) fn others(a: Cpu, b: Cpu) -> f64 {
    let secs = b.at.duration_since(a.at).as_secs_f64();
    if secs <= 0.0 {
        return 0.0;
    }
    let other = (b.machine - a.machine) - (b.server - a.server) - (b.client - a.client);
    ((other / secs).max(0.0) * 1000.0).round() / 1000.0
}

/// One measured publishing window on an already connected pool.
struct Window {
    publish: PublishReport,
    latency: Latency,
    latency_all: Latency,
    deliveries_per_s_all: f64,
    expected: u64,
    delivered: u64,
    lost: u64,
    delivered_measured: u64,
    deliveries_per_s: f64,
    server_cpu_s: f64,
    client_cpu_s: f64,
    measured_secs: f64,
    others_cores: f64,
}

impl Window {
    fn json(&self) -> Value {
        let per_m = |cpu: f64| {
            if self.delivered_measured > 0 {
                (cpu / (self.delivered_measured as f64 / 1e6) * 1000.0).round() / 1000.0
            } else {
                0.0
            }
        };
        json!({
            "latency": self.latency,
            "latency_incl_warmup": self.latency_all,
            "deliveries_per_s_incl_warmup": self.deliveries_per_s_all.round(),
            "publish_scheduled": self.publish.scheduled,
            "publish_attempted": self.publish.attempted,
            "published_ok": self.publish.ok,
            "publish_errors": self.publish.errors,
            "publish_first_error": self.publish.first_error,
            "publish_max_dispatch_lag_ms": self.publish.max_dispatch_lag_ms,
            "expected_deliveries": self.expected,
            "delivered": self.delivered,
            "lost": self.lost,
            "deliveries_per_s": self.deliveries_per_s.round(),
            "measured_secs": (self.measured_secs * 1000.0).round() / 1000.0,
            "server_cpu_s": (self.server_cpu_s * 1000.0).round() / 1000.0,
            "server_cpu_s_per_million": per_m(self.server_cpu_s),
            "client_cpu_s": (self.client_cpu_s * 1000.0).round() / 1000.0,
            "client_cpu_s_per_million": per_m(self.client_cpu_s),
            "others_cores": self.others_cores,
        })
    }
}

/// Publishes at `rate` for `warmup + secs` seconds; measures latency,
/// throughput and CPU over the part after the warm-up.
#[allow(clippy::too_many_arguments)]
async fn window(
    c: &Common,
    pool: &Pool,
    servers: &Servers,
    rate: f64,
    warmup: f64,
    secs: f64,
    pick: crate::runner::Picker<'_>,
    seqs: &mut [u64],
) -> Window {
    let shared = pool.shared.clone();
    let before = shared.delivered.load(Relaxed);
    let start_ns = stamp::now_ns() + 50_000_000;
    let measure_from = start_ns + (warmup * 1e9) as u64;
    shared.reset_window_at(start_ns, measure_from);
    let total = (rate * (warmup + secs)).round().max(1.0) as u64;
    // Sample CPU when the measured part starts.
    let (tx, rx) = tokio::sync::oneshot::channel();
    let pids_servers = servers.pids.clone();
    let sampler = tokio::spawn(async move {
        tokio::time::sleep_until(stamp::instant_at(measure_from).into()).await;
        let s = Servers::external(Vec::new(), pids_servers);
        let _ = tx.send(cpu(&s));
    });
    let report = publish(
        &pool.target,
        rate,
        total,
        start_ns,
        pick,
        seqs,
        c.inflight,
        c.pad,
    )
    .await;
    let expected = pool.expected(&report.ok_per_room);
    let last_ns = pool
        .drain(
            before + expected,
            Duration::from_secs(5),
            Duration::from_secs(120),
        )
        .await;
    let end = cpu(servers);
    let _ = sampler.await;
    let startc = rx.await.unwrap_or(end);
    let delivered = shared.delivered.load(Relaxed) - before;
    let measured = shared.delivered_measured.load(Relaxed);
    let measured_secs = (last_ns.saturating_sub(measure_from)) as f64 / 1e9;
    let all_secs = (last_ns.saturating_sub(start_ns)) as f64 / 1e9;
    Window {
        latency: shared.latency(),
        latency_all: shared.latency_all(),
        deliveries_per_s_all: if all_secs > 0.0 {
            delivered as f64 / all_secs
        } else {
            0.0
        },
        expected,
        delivered,
        lost: expected.saturating_sub(delivered),
        delivered_measured: measured,
        deliveries_per_s: if measured_secs > 0.0 {
            measured as f64 / measured_secs
        } else {
            0.0
        },
        server_cpu_s: end.server - startc.server,
        client_cpu_s: end.client - startc.client,
        measured_secs,
        others_cores: others(startc, end),
        publish: report,
    }
}

fn fail_connect(rep: &crate::runner::ConnectReport) -> Result<()> {
    if rep.failed > 0 {
        bail!(
            "{} of {} connections failed; first error: {}",
            rep.failed,
            rep.attempted,
            rep.first_error.clone().unwrap_or_default()
        );
    }
    Ok(())
}

async fn setup(
    c: &Common,
    servers: &Servers,
    rooms: usize,
    per_room: usize,
    human: bool,
    want_ids: bool,
) -> Result<Pool> {
    let mut t = Target::new(c.system, servers.addrs.clone(), c.inflight)?;
    t.want_ids = want_ids;
    t.bays = c.bays;
    let target = Arc::new(t);
    let layout = target.provision(rooms, per_room, human, 32).await?;
    Ok(Pool::new(target, layout, c.src_addrs))
}

/// S1, fixed rate: one room of `agents` subscribers, one publisher (for
/// Switchboard a human posting over REST) at `rate` messages/s.
pub async fn s1(c: &Common, agents: usize, rate: f64, warmup: f64, secs: f64) -> Result<Value> {
    let servers = c.start()?;
    let mut pool = setup(c, &servers, 1, agents, true, false).await?;
    let conn = pool.connect(false, c.concurrency, 0).await;
    fail_connect(&conn)?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let token = pool.layout.publishers[0].clone();
    let pick = move |_i: u64| (0usize, token.clone());
    let mut seqs = vec![0u64; 1];
    let w = window(c, &pool, &servers, rate, warmup, secs, &pick, &mut seqs).await;
    if let Some(f) = &c.dist_file {
        let _ = std::fs::write(f, stats::distribution(&pool.shared.hist.lock().unwrap()));
    }
    let out = merge(
        c.base("s1", &servers),
        json!({
            "agents": agents,
            "rate_msgs_per_s": rate,
            "warmup_s": warmup,
            "duration_s": secs,
            "connect": conn,
            "dropped_connections": pool.shared.dropped.load(Relaxed),
            "duplicates": pool.shared.dups.load(Relaxed),
            "server_peak_rss_kib": servers.peak_rss_kib(),
        }),
    );
    Ok(merge(out, w.json()))
}

/// S1, find the maximum: the highest publish rate at which p99 < `slo_ms`
/// with zero loss and no publish errors (doubling, then bisecting).
#[allow(clippy::too_many_arguments)]
pub async fn s1_max(
    c: &Common,
    agents: usize,
    start_rate: f64,
    max_rate: f64,
    step_secs: f64,
    bisect: usize,
    slo_ms: f64,
) -> Result<Value> {
    let servers = c.start()?;
    let mut pool = setup(c, &servers, 1, agents, true, false).await?;
    let conn = pool.connect(false, c.concurrency, 0).await;
    fail_connect(&conn)?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let token = pool.layout.publishers[0].clone();
    let pick = move |_i: u64| (0usize, token.clone());
    let mut seqs = vec![0u64; 1];
    let mut steps = Vec::new();
    let mut best: Option<(f64, Value)> = None;
    let mut lo = 0.0f64;
    let mut hi: Option<f64> = None;
    let mut rate = start_rate;
    let mut bisections = 0;
    loop {
        // Reconnect anything the last step lost, so every step starts whole.
        let re = pool.connect(false, c.concurrency, 0).await;
        let w = window(c, &pool, &servers, rate, 1.0, step_secs, &pick, &mut seqs).await;
        let pass = w.lost == 0
            && w.publish.errors == 0
            && w.publish.attempted == w.publish.scheduled
            && w.latency.p99_ms < slo_ms
            && re.failed == 0
            && pool.open_count() == pool.conns.len();
        let j = merge(json!({"rate_msgs_per_s": rate, "pass": pass}), w.json());
        eprintln!(
            "  s1max {rate:.0} msg/s: p99 {:.2} ms, lost {}, errors {}, {}",
            w.latency.p99_ms,
            w.lost,
            w.publish.errors,
            if pass { "pass" } else { "FAIL" }
        );
        steps.push(j.clone());
        if pass {
            lo = rate;
            best = Some((rate, j));
        } else {
            hi = Some(rate);
        }
        let next = match hi {
            None => rate * 2.0,
            Some(h) => {
                bisections += 1;
                (lo + h) / 2.0
            }
        };
        if next > max_rate || (hi.is_some() && bisections > bisect) {
            break;
        }
        rate = next.round();
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let (best_rate, best_step) = best.unwrap_or((0.0, Value::Null));
    Ok(merge(
        c.base("s1max", &servers),
        json!({
            "agents": agents,
            "slo_p99_ms": slo_ms,
            "step_secs": step_secs,
            "max_rate_msgs_per_s": best_rate,
            "max_deliveries_per_s": best_rate * agents as f64,
            "others_cores": steps.iter().filter_map(|s| s["others_cores"].as_f64()).fold(0.0, f64::max),
            "at_max": best_step,
            "first_failing_rate": hi,
            "steps": steps,
            "connect": conn,
            "server_peak_rss_kib": servers.peak_rss_kib(),
        }),
    ))
}

/// S2: `conns` subscribers in rooms of `room_size`; every member posts
/// `per_conn_rate` messages/s (Switchboard: with its own token).
pub async fn s2(
    c: &Common,
    conns: usize,
    room_size: usize,
    per_conn_rate: f64,
    warmup: f64,
    secs: f64,
) -> Result<Value> {
    let servers = c.start()?;
    let rooms = conns / room_size;
    let mut pool = setup(c, &servers, rooms, room_size, false, false).await?;
    let conn = pool.connect(false, c.concurrency, 0).await;
    fail_connect(&conn)?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let n = pool.layout.members.len();
    let members: Vec<(usize, String)> = pool
        .layout
        .members
        .iter()
        .map(|m| (m.room, m.token.clone()))
        .collect();
    // Interleave senders so consecutive messages go to different rooms.
    let pick = move |i: u64| members[(i as usize * 4099) % n].clone();
    let mut seqs = vec![0u64; rooms];
    let rate = per_conn_rate * n as f64;
    let w = window(c, &pool, &servers, rate, warmup, secs, &pick, &mut seqs).await;
    let out = merge(
        c.base("s2", &servers),
        json!({
            "connections": n,
            "rooms": rooms,
            "room_size": room_size,
            "per_conn_rate": per_conn_rate,
            "rate_msgs_per_s": rate,
            "warmup_s": warmup,
            "duration_s": secs,
            "connect": conn,
            "dropped_connections": pool.shared.dropped.load(Relaxed),
            "duplicates": pool.shared.dups.load(Relaxed),
            "server_peak_rss_kib": servers.peak_rss_kib(),
        }),
    );
    Ok(merge(out, w.json()))
}

/// S3: capacity. `mode` "ws": `conns` idle WebSockets (handshake done);
/// "longpoll": `conns` held long-polls. Server RSS per connection and the
/// connect rate.
pub async fn s3(c: &Common, conns: usize, mode: &str) -> Result<Value> {
    let mut servers = c.start()?;
    let mut pool = setup(c, &servers, 1, conns, false, false).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_before = servers.rss_kib();
    let mut held = Vec::new();
    let c0 = cpu(&servers);
    let conn = match mode {
        "ws" => {
            let r = pool.connect(false, c.concurrency, 0).await;
            fail_connect(&r)?;
            serde_json::to_value(&r).unwrap_or_default()
        }
        "longpoll" => {
            let t0 = Instant::now();
            for (i, m) in pool.layout.members.iter().enumerate() {
                held.push(
                    pool.target
                        .hold_poll(i, source_addr(i, c.src_addrs), m)
                        .await?,
                );
            }
            json!({"attempted": conns, "ok": held.len(), "secs": t0.elapsed().as_secs_f64()})
        }
        other => bail!("unknown S3 mode {other} (ws | longpoll)"),
    };
    let c1 = cpu(&servers);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss_after = servers.rss_kib();
    let still_open = if mode == "ws" {
        pool.open_count()
    } else {
        held.len()
    };
    let alive = servers.alive();
    let out = merge(
        c.base("s3", &servers),
        json!({
            "mode": mode,
            "connections": conns,
            "still_open": still_open,
            "server_alive": alive,
            "connect": conn,
            "rss_before_kib": rss_before,
            "rss_after_kib": rss_after,
            "others_cores": others(c0, c1),
            "kib_per_connection": ((rss_after as f64 - rss_before as f64) / conns as f64 * 100.0).round() / 100.0,
            "server_peak_rss_kib": servers.peak_rss_kib(),
        }),
    );
    pool.drop_all().await;
    drop(held);
    Ok(out)
}

/// S4: `clients` subscribers drop, `messages` are posted, all resume at
/// once (each to the *next* node when there are several). Time until every
/// client has every message; lost must be 0.
pub async fn s4(
    c: &Common,
    clients: usize,
    messages: u64,
    storm_concurrency: usize,
) -> Result<Value> {
    if !c.system.can_resume() {
        bail!("{} has no resume here", c.system.name());
    }
    let servers = c.start()?;
    let mut pool = setup(c, &servers, 1, clients, true, true).await?;
    let conn = pool.connect(false, c.concurrency, 0).await;
    fail_connect(&conn)?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let token = pool.layout.publishers[0].clone();
    let pick = move |_i: u64| (0usize, token.clone());
    let mut seqs = vec![0u64; 1];
    pool.shared.reset_window(u64::MAX);
    // One message everyone sees, so everyone holds a position after it.
    let first = publish(
        &pool.target,
        1.0,
        1,
        stamp::now_ns(),
        &pick,
        &mut seqs,
        1,
        c.pad,
    )
    .await;
    if first.ok != 1 {
        bail!("first publish failed: {:?}", first.first_error);
    }
    pool.drain(
        clients as u64,
        Duration::from_secs(10),
        Duration::from_secs(30),
    )
    .await;
    // Let the idle cursor/offset frames settle, then drop everyone.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let no_position = pool
        .conns
        .iter()
        .filter(|s| s.resume.lock().unwrap().cursor.is_none())
        .count();
    pool.drop_all().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let dropped_before = pool.shared.dropped.load(Relaxed);
    let burst = publish(
        &pool.target,
        1e6,
        messages,
        stamp::now_ns(),
        &pick,
        &mut seqs,
        16,
        c.pad,
    )
    .await;
    let want = 1 + burst.ok;
    for s in &pool.conns {
        s.target.store(want, Relaxed);
        s.caught_up_ns.store(0, Relaxed);
    }
    let cpu0 = cpu(&servers);
    let t0 = stamp::now_ns();
    let storm = pool.connect(true, storm_concurrency, 1).await;
    let deadline = Instant::now() + Duration::from_secs(120);
    // Like a real client, one the server closes during the storm (an error
    // frame, a close) reconnects with its last cursor; counted as retries.
    let mut retries = 0usize;
    let mut last_retry = Instant::now();
    loop {
        let done = pool
            .conns
            .iter()
            .filter(|s| s.unique.load(Relaxed) >= want)
            .count();
        if done == clients || Instant::now() > deadline {
            break;
        }
        if last_retry.elapsed() > Duration::from_millis(250) && pool.open_count() < clients {
            let r = pool.connect(true, storm_concurrency, 0).await;
            retries += r.attempted;
            last_retry = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let cpu1 = cpu(&servers);
    let mut h = new_hist();
    let mut last = 0u64;
    let mut lost = 0u64;
    let mut behind = 0usize;
    for s in &pool.conns {
        let u = s.unique.load(Relaxed);
        if u < want {
            lost += want - u;
            behind += 1;
            continue;
        }
        let at = s.caught_up_ns.load(Relaxed).max(t0);
        last = last.max(at);
        let _ = h.record(((at - t0) / 1000).max(1));
    }
    let replayed = clients as u64 * burst.ok;
    let all_secs = (last.saturating_sub(t0)) as f64 / 1e9;
    let out = merge(
        c.base("s4", &servers),
        json!({
            "clients": clients,
            "messages": messages,
            "published_ok": burst.ok,
            "publish_errors": burst.errors,
            "publish_first_error": burst.first_error,
            "clients_without_position": no_position,
            "storm_concurrency": storm_concurrency,
            "reconnect": storm,
            "catch_up_all_s": if behind == 0 { json!((all_secs * 1000.0).round() / 1000.0) } else { Value::Null },
            "catch_up_per_client": Latency::of(&h),
            "clients_behind": behind,
            "lost": lost,
            "duplicates": pool.shared.dups.load(Relaxed),
            "resets": pool.shared.resets.load(Relaxed),
            "dropped_after_storm": pool.shared.dropped.load(Relaxed) - dropped_before,
            "reconnect_retries": retries,
            "replayed_events": replayed,
            "replay_events_per_s": if all_secs > 0.0 { (replayed as f64 / all_secs).round() } else { 0.0 },
            "server_cpu_s": ((cpu1.server - cpu0.server) * 1000.0).round() / 1000.0,
            "server_cpu_s_per_million": if replayed > 0 { (((cpu1.server - cpu0.server) / (replayed as f64 / 1e6)) * 1000.0).round() / 1000.0 } else { 0.0 },
            "client_cpu_s": ((cpu1.client - cpu0.client) * 1000.0).round() / 1000.0,
            "others_cores": others(cpu0, cpu1),
            "server_peak_rss_kib": servers.peak_rss_kib(),
        }),
    );
    pool.drop_all().await;
    Ok(out)
}

/// The CI smoke run: `conns` subscribers, `messages` messages at 50/s,
/// every one must arrive at every subscriber. Correctness only.
pub async fn smoke(c: &Common, conns: usize, messages: u64) -> Result<Value> {
    let servers = c.start()?;
    let mut pool = setup(c, &servers, 1, conns, true, false).await?;
    let conn = pool.connect(false, c.concurrency, 0).await;
    fail_connect(&conn)?;
    let token = pool.layout.publishers[0].clone();
    let pick = move |_i: u64| (0usize, token.clone());
    let mut seqs = vec![0u64; 1];
    let rate = 50.0;
    let w = window(
        c,
        &pool,
        &servers,
        rate,
        0.0,
        messages as f64 / rate,
        &pick,
        &mut seqs,
    )
    .await;
    pool.drop_all().await;
    Ok(merge(
        c.base("smoke", &servers),
        json!({
            "connections": conns,
            "messages": messages,
            "published_ok": w.publish.ok,
            "publish_errors": w.publish.errors,
            "publish_first_error": w.publish.first_error,
            "expected_deliveries": w.expected,
            "delivered": w.delivered,
            "lost": w.lost,
        }),
    ))
}
