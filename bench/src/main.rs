//! `switchboard-bench`: runs one benchmark scenario against one system,
//! prints the result as JSON and appends it to the results files.

use clap::{Parser, Subcommand};
use serde_json::Value;
use std::io::Write;
use std::path::PathBuf;
use switchboard_bench::scenario::{self, Common};
use switchboard_bench::target::System;
use switchboard_bench::{churn, procstat, soak, stamp, webhooks};

#[derive(Parser)]
#[command(
    name = "switchboard-bench",
    about = "Benchmarks Switchboard and its peers"
)]
struct Cli {
    /// System under test (selects the protocol adapter).
    #[arg(long, value_enum, default_value = "switchboard")]
    system: System,
    /// Label in the tables (default: the system's name).
    #[arg(long)]
    label: Option<String>,
    /// Command that starts the server; `{port}` is replaced by a free port.
    /// Repeat for several nodes. Run as `taskset -c SERVER_CPUS sh -c 'exec CMD'`.
    #[arg(long = "server")]
    servers: Vec<String>,
    /// Helper started before the servers and measured with them (a Redis);
    /// `{port}` = its free port, which server commands get as `{aux_port}`.
    #[arg(long = "aux")]
    aux: Vec<String>,
    /// Address of an already running server (instead of --server); repeatable.
    #[arg(long = "addr")]
    addrs: Vec<String>,
    /// Pid of an already running server, for CPU and memory; repeatable.
    #[arg(long = "pid")]
    pids: Vec<u32>,
    /// CPUs the server runs on (taskset list; empty = not pinned).
    #[arg(long, default_value = "0")]
    server_cpus: String,
    /// CPUs the load generator pins itself to (empty = not pinned).
    #[arg(long, default_value = "1")]
    client_cpus: String,
    /// Concurrent WebSocket handshakes while connecting.
    #[arg(long, default_value_t = 128)]
    concurrency: usize,
    /// Concurrent publish requests.
    #[arg(long, default_value_t = 64)]
    inflight: usize,
    /// Loopback source addresses for client sockets (127.0.0.1 … .N).
    #[arg(long, default_value_t = 8)]
    src_addrs: usize,
    /// Padding bytes appended to each message body.
    #[arg(long, default_value_t = 0)]
    pad: usize,
    /// Switchboard: spread the rooms over this many Bays (room r in Bay
    /// r % bays; on Redis Cluster, Bays are what spread over the masters).
    #[arg(long, default_value_t = 1)]
    bays: usize,
    /// Where server logs go.
    #[arg(long, default_value = "bench/results/logs")]
    log_dir: PathBuf,
    /// Append the JSON result (one line) to this file.
    #[arg(long, default_value = "bench/results/results.jsonl")]
    out: PathBuf,
    /// Append a Markdown row to this file.
    #[arg(long, default_value = "bench/results/results.md")]
    md: PathBuf,
    /// S1: write the latency distribution (for the plot) to this file.
    #[arg(long)]
    dist: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// S1 fan-out at a fixed rate: one room, N subscribers, one publisher.
    S1 {
        #[arg(long, default_value_t = 1000)]
        agents: usize,
        #[arg(long, default_value_t = 100.0)]
        rate: f64,
        #[arg(long, default_value_t = 3.0)]
        warmup: f64,
        #[arg(long, default_value_t = 20.0)]
        duration: f64,
    },
    /// S1 find-the-maximum: highest rate with p99 < SLO and zero loss.
    S1max {
        #[arg(long, default_value_t = 1000)]
        agents: usize,
        #[arg(long, default_value_t = 25.0)]
        start_rate: f64,
        #[arg(long, default_value_t = 20000.0)]
        max_rate: f64,
        #[arg(long, default_value_t = 5.0)]
        step_secs: f64,
        #[arg(long, default_value_t = 3)]
        bisect: usize,
        #[arg(long, default_value_t = 50.0)]
        slo_ms: f64,
    },
    /// S2 many small rooms: every member posts at a fixed rate.
    S2 {
        #[arg(long, default_value_t = 10000)]
        conns: usize,
        #[arg(long, default_value_t = 4)]
        room_size: usize,
        #[arg(long, default_value_t = 1.0)]
        per_conn_rate: f64,
        #[arg(long, default_value_t = 5.0)]
        warmup: f64,
        #[arg(long, default_value_t = 20.0)]
        duration: f64,
    },
    /// S3 capacity: idle WebSockets (ws) or held long-polls (longpoll).
    S3 {
        #[arg(long, default_value_t = 10000)]
        conns: usize,
        #[arg(long, default_value = "ws")]
        mode: String,
    },
    /// S4 resume storm: K clients drop, M messages, all resume at once.
    S4 {
        #[arg(long, default_value_t = 2000)]
        clients: usize,
        #[arg(long, default_value_t = 200)]
        messages: u64,
        /// Concurrent reconnect handshakes during the storm.
        #[arg(long, default_value_t = 1024)]
        storm_concurrency: usize,
    },
    /// Webhook fan-out: N agents with a webhook each (to a receiver in this
    /// process), one GROUP, M messages posted by a human at a fixed rate
    /// (`--rate 0`: as fast as the gateway takes them).
    Webhooks {
        #[arg(long, default_value_t = 100)]
        agents: usize,
        #[arg(long, default_value_t = 10.0)]
        rate: f64,
        #[arg(long, default_value_t = 200)]
        messages: u64,
        /// How webhooks are set: `agent` (POST /webhook with the agent's
        /// token) or `admin` (PUT /api/admin/…/webhook).
        #[arg(long, default_value = "agent")]
        via: String,
        /// Seconds of idle measurement (webhooks set, nothing posted) first.
        #[arg(long, default_value_t = 5.0)]
        idle_secs: f64,
        /// Longest wait for the deliveries, from the first post (measured).
        #[arg(long, default_value_t = 60.0)]
        max_secs: f64,
        /// Further (unmeasured) wait for deliveries missing at the cut-off,
        /// to tell late from lost.
        #[arg(long, default_value_t = 60.0)]
        grace_secs: f64,
    },
    /// Churn: Bays touched once, many conversations, WebSockets cut
    /// mid-replay and aborted long-polls; what the node holds before, at
    /// the peak and after it settled (`--server` with an `--aux` Redis).
    Churn {
        #[arg(long, default_value_t = 5000)]
        bays: usize,
        #[arg(long, default_value_t = 20000)]
        conversations: usize,
        #[arg(long, default_value_t = 2000)]
        ws_cuts: usize,
        #[arg(long, default_value_t = 2000)]
        poll_aborts: usize,
        /// Rounds, each on new Bays.
        #[arg(long, default_value_t = 2)]
        rounds: usize,
        /// Quiet seconds after each round (more than the node's
        /// `timing.actor_idle_timeout` plus its 60 s housekeeping).
        #[arg(long, default_value_t = 90)]
        settle_secs: u64,
    },
    /// Soak: N minutes of WebSockets, long-polls and steady posts on one
    /// node and Redis (started by the harness), with a node restart and a
    /// Redis restart in the middle.
    Soak {
        #[arg(long, default_value_t = 30.0)]
        minutes: f64,
        #[arg(long, default_value_t = 10000)]
        conns: usize,
        #[arg(long, default_value_t = 0.7)]
        ws_share: f64,
        #[arg(long, default_value_t = 50)]
        room_size: usize,
        #[arg(long, default_value_t = 10.0)]
        rate: f64,
        #[arg(long, default_value_t = 180.0)]
        warmup_secs: f64,
        #[arg(long, default_value_t = 120.0)]
        drain_secs: f64,
        /// The gateway binary.
        #[arg(long, default_value = "target/release/switchboard")]
        bin: PathBuf,
        #[arg(long, default_value = "redis-server")]
        redis_bin: String,
        /// Logs and the Redis AOF.
        #[arg(long, default_value = "bench/results/soak-run")]
        dir: PathBuf,
    },
    /// Correctness smoke (CI): a few subscribers, a few messages, zero loss.
    Smoke {
        #[arg(long, default_value_t = 3)]
        conns: usize,
        #[arg(long, default_value_t = 5)]
        messages: u64,
    },
}

fn f(v: &Value, path: &str) -> String {
    let mut cur = v;
    for k in path.split('.') {
        cur = &cur[k];
    }
    match cur {
        Value::Null => "–".into(),
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(0.0);
            if x.fract() == 0.0 {
                format!("{x:.0}")
            } else {
                format!("{x:.2}")
            }
        }
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn mib(v: &Value, path: &str) -> String {
    let mut cur = v;
    for k in path.split('.') {
        cur = &cur[k];
    }
    format!("{:.1}", cur.as_f64().unwrap_or(0.0) / 1024.0)
}

fn md_row(v: &Value) -> String {
    let s = v["scenario"].as_str().unwrap_or("");
    let who = f(v, "label");
    match s {
        "s1" | "s2" | "smoke" => format!(
            "| {s} | {who} | {} conns, {} msg/s | {} | {} | {} | {} | {} | {} | {} | {} | {} MiB |",
            f(v, if s == "s1" { "agents" } else { "connections" }),
            f(v, "rate_msgs_per_s"),
            f(v, "latency.p50_ms"),
            f(v, "latency.p90_ms"),
            f(v, "latency.p99_ms"),
            f(v, "latency.p999_ms"),
            f(v, "latency.max_ms"),
            f(v, "deliveries_per_s"),
            f(v, "lost"),
            f(v, "server_cpu_s_per_million"),
            mib(v, "server_peak_rss_kib"),
        ),
        "s1max" => format!(
            "| s1max | {who} | {} conns | max {} msg/s = {} deliveries/s | p99 at max {} ms | {} MiB |",
            f(v, "agents"),
            f(v, "max_rate_msgs_per_s"),
            f(v, "max_deliveries_per_s"),
            f(v, "at_max.latency.p99_ms"),
            mib(v, "server_peak_rss_kib"),
        ),
        "s3" => format!(
            "| s3 | {who} | {} × {} | {} KiB/conn | {} conn/s | {} MiB peak |",
            f(v, "connections"),
            f(v, "mode"),
            f(v, "kib_per_connection"),
            f(v, "connect.per_s"),
            mib(v, "server_peak_rss_kib"),
        ),
        "s4" => format!(
            "| s4 | {who} | {} clients × {} msgs | all caught up in {} s | p50 {} ms, p99 {} ms | lost {} | resets {} | {} MiB |",
            f(v, "clients"),
            f(v, "messages"),
            f(v, "catch_up_all_s"),
            f(v, "catch_up_per_client.p50_ms"),
            f(v, "catch_up_per_client.p99_ms"),
            f(v, "lost"),
            f(v, "resets"),
            mib(v, "server_peak_rss_kib"),
        ),
        "webhooks" => format!(
            "| webhooks | {who} | {} agents × {} msgs at {} msg/s | {} deliveries/s (steady {}) | created→receipt p50 {} ms, p99 {} ms | lost {} | dup ids {} | gateway {} CPU-s/1000 | {} MiB |",
            f(v, "agents"),
            f(v, "messages"),
            f(v, "rate_msgs_per_s"),
            f(v, "deliveries_per_s"),
            f(v, "deliveries_per_s_steady"),
            f(v, "latency_created.p50_ms"),
            f(v, "latency_created.p99_ms"),
            f(v, "lost"),
            f(v, "duplicates_by_webhook_id"),
            f(v, "gateway_cpu_s_per_1000"),
            mib(v, "server_peak_rss_kib"),
        ),
        _ => String::new(),
    }
}

fn append(path: &PathBuf, line: &str) {
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(file, "{line}");
    }
}

fn main() {
    let cli = Cli::parse();
    stamp::start();
    let (soft, hard) = procstat::raise_nofile();
    if !cli.client_cpus.is_empty() && !procstat::pin_self(&cli.client_cpus) {
        eprintln!(
            "warning: could not pin the load generator to CPUs {}",
            cli.client_cpus
        );
    }
    eprintln!(
        "fd limit {soft}/{hard}; load generator on CPUs {:?}, server on {:?}",
        cli.client_cpus, cli.server_cpus
    );
    let common = Common {
        system: cli.system,
        label: cli
            .label
            .clone()
            .unwrap_or_else(|| cli.system.name().into()),
        servers: cli.servers.clone(),
        aux: cli.aux.clone(),
        addrs: cli.addrs.clone(),
        pids: cli.pids.clone(),
        server_cpus: cli.server_cpus.clone(),
        client_cpus: cli.client_cpus.clone(),
        concurrency: cli.concurrency,
        inflight: cli.inflight,
        src_addrs: cli.src_addrs,
        pad: cli.pad,
        bays: cli.bays,
        log_dir: cli.log_dir.clone(),
        dist_file: cli.dist.clone(),
    };
    // One core for the load generator: a single-threaded runtime.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let res = rt.block_on(async {
        match cli.cmd {
            Cmd::S1 {
                agents,
                rate,
                warmup,
                duration,
            } => scenario::s1(&common, agents, rate, warmup, duration).await,
            Cmd::S1max {
                agents,
                start_rate,
                max_rate,
                step_secs,
                bisect,
                slo_ms,
            } => {
                scenario::s1_max(
                    &common, agents, start_rate, max_rate, step_secs, bisect, slo_ms,
                )
                .await
            }
            Cmd::S2 {
                conns,
                room_size,
                per_conn_rate,
                warmup,
                duration,
            } => scenario::s2(&common, conns, room_size, per_conn_rate, warmup, duration).await,
            Cmd::S3 { conns, mode } => scenario::s3(&common, conns, &mode).await,
            Cmd::S4 {
                clients,
                messages,
                storm_concurrency,
            } => scenario::s4(&common, clients, messages, storm_concurrency).await,
            Cmd::Webhooks {
                agents,
                rate,
                messages,
                via,
                idle_secs,
                max_secs,
                grace_secs,
            } => {
                webhooks::webhooks(
                    &common, agents, rate, messages, &via, idle_secs, max_secs, grace_secs,
                )
                .await
            }
            Cmd::Churn {
                bays,
                conversations,
                ws_cuts,
                poll_aborts,
                rounds,
                settle_secs,
            } => {
                churn::churn(
                    &common,
                    churn::ChurnSizes {
                        bays,
                        conversations,
                        ws_cuts,
                        poll_aborts,
                        rounds,
                        settle_secs,
                    },
                )
                .await
            }
            Cmd::Soak {
                minutes,
                conns,
                ws_share,
                room_size,
                rate,
                warmup_secs,
                drain_secs,
                bin,
                redis_bin,
                dir,
            } => {
                soak::soak(soak::SoakSettings {
                    minutes,
                    conns,
                    ws_share,
                    room_size: room_size.max(1),
                    rate,
                    warmup_secs,
                    drain_secs,
                    bin,
                    redis_bin,
                    dir,
                    src_addrs: cli.src_addrs,
                })
                .await
            }
            Cmd::Smoke { conns, messages } => scenario::smoke(&common, conns, messages).await,
        }
    });
    match res {
        Ok(v) => {
            let line = v.to_string();
            println!(
                "{}",
                serde_json::to_string_pretty(&v).unwrap_or(line.clone())
            );
            append(&cli.out, &line);
            let row = md_row(&v);
            if !row.is_empty() {
                append(&cli.md, &row);
            }
            if v["scenario"] == "smoke" && v["lost"].as_u64() != Some(0) {
                eprintln!("smoke: messages were lost");
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
    // Do not wait for lingering tasks (open sockets) to finish.
    rt.shutdown_background();
}
