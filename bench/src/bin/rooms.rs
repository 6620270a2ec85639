//! Room FOLLOWs under steady posts, beside the same load over `/updates`
//! (BENCHMARKS.md, "Rooms by link").
//!
//! `rooms` rooms with `followers` FOLLOW loops each (READ, then FOLLOW
//! with `wait=25` again and again, as the protocol text says), and one
//! poster per room sending `rate` posts per second for `secs` seconds.
//! Then the same shape over the agent API: `rooms` GROUPs in one Bay, each
//! with one user posting and `followers` agents long-polling `/updates`.
//!
//! Measured per mode: the latency from a post's send to each FOLLOW (or
//! `/updates`) answer carrying it (p50, p99, max), deliveries, and the
//! gateway's CPU seconds (from /proc, the `--pid` process) per delivery.
//!
//! Usage: `switchboard-bench-rooms --node 127.0.0.1:8080 --pid PID
//! --admin-token T [--rooms 100] [--followers 10] [--rate 1] [--secs 20]`.
//! The gateway needs the room and agent limits raised (BENCHMARKS.md gives
//! the command). Prints one JSON object per mode.

use clap::Parser;
use hdrhistogram::Histogram;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Parser)]
struct Args {
    #[arg(long)]
    node: String,
    /// The gateway's pid, for its CPU time.
    #[arg(long)]
    pid: u32,
    #[arg(long)]
    admin_token: String,
    #[arg(long, default_value_t = 100)]
    rooms: usize,
    #[arg(long, default_value_t = 10)]
    followers: usize,
    /// Posts per second per room.
    #[arg(long, default_value_t = 1.0)]
    rate: f64,
    #[arg(long, default_value_t = 20.0)]
    secs: f64,
}

struct Seen {
    latency: Histogram<u64>,
    deliveries: u64,
}

type Shared = Arc<Mutex<Seen>>;

/// The process's user + system CPU seconds.
fn cpu(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    ticks / 100.0
}

/// `at=<µs since start>` in a body, as sent.
fn stamp(start: Instant) -> String {
    format!("at={}", start.elapsed().as_micros())
}

fn record(seen: &Shared, start: Instant, body: &str) {
    let Some(at) = body.strip_prefix("at=").and_then(|v| v.parse::<u64>().ok()) else {
        return;
    };
    let now = start.elapsed().as_micros() as u64;
    let mut s = seen.lock().unwrap();
    s.latency.record(now.saturating_sub(at).max(1)).ok();
    s.deliveries += 1;
}

async fn post(http: &reqwest::Client, url: &str, token: Option<&str>, body: Value) -> Value {
    let mut req = http.post(url).json(&body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    req.send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap_or(Value::Null)
}

/// One FOLLOW loop until `until`.
async fn follower(
    http: reqwest::Client,
    link: String,
    start: Instant,
    until: Instant,
    seen: Shared,
) {
    let r: Value = http
        .get(format!("{link}?format=json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut cursor = r["cursor"].as_str().unwrap().to_owned();
    while Instant::now() < until {
        let Ok(res) = http
            .get(format!("{link}?cursor={cursor}&wait=25&limit=100"))
            .send()
            .await
        else {
            continue;
        };
        let Ok(f) = res.json::<Value>().await else {
            continue;
        };
        for m in f["upserts"].as_array().into_iter().flatten() {
            record(&seen, start, m["body"].as_str().unwrap_or(""));
        }
        if let Some(c) = f["cursor"].as_str() {
            cursor = c.to_owned();
        }
    }
}

/// One `/updates` loop until `until`.
async fn poller(
    http: reqwest::Client,
    base: String,
    token: String,
    start: Instant,
    until: Instant,
    seen: Shared,
) {
    let mut cursor: Option<String> = None;
    while Instant::now() < until {
        let mut url = format!("http://{base}/api/agent-api/updates?wait=25");
        if let Some(c) = &cursor {
            url.push_str(&format!("&cursor={c}"));
        }
        let Ok(res) = http.get(url).bearer_auth(&token).send().await else {
            continue;
        };
        let Ok(b) = res.json::<Value>().await else {
            continue;
        };
        for e in b["events"].as_array().into_iter().flatten() {
            record(&seen, start, e["message"]["content"].as_str().unwrap_or(""));
        }
        if let Some(c) = b["cursor"].as_str() {
            cursor = Some(c.to_owned());
        }
    }
}

/// Posts every `1/rate` s until `until`, through `send`.
async fn poster<F, Fut>(rate: f64, until: Instant, mut send: F)
where
    F: FnMut(u64) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    let mut n = 0;
    while Instant::now() < until {
        tick.tick().await;
        send(n).await;
        n += 1;
    }
}

fn report(mode: &str, seen: &Shared, cpu_s: f64, args: &Args) {
    let s = seen.lock().unwrap();
    let ms = |q: f64| s.latency.value_at_quantile(q) as f64 / 1000.0;
    println!(
        "{}",
        json!({
            "mode": mode, "rooms": args.rooms, "followers": args.rooms * args.followers,
            "posts_per_s": args.rate * args.rooms as f64, "deliveries": s.deliveries,
            "p50_ms": ms(0.5), "p99_ms": ms(0.99), "max_ms": s.latency.max() as f64 / 1000.0,
            "cpu_s": cpu_s, "cpu_us_per_delivery": cpu_s * 1e6 / s.deliveries.max(1) as f64,
        })
    );
}

fn new_seen() -> Shared {
    Arc::new(Mutex::new(Seen {
        latency: Histogram::new_with_bounds(1, 120_000_000, 3).unwrap(),
        deliveries: 0,
    }))
}

async fn rooms_mode(args: &Args, http: &reqwest::Client) {
    let base = format!("http://{}", args.node);
    let mut links = Vec::new();
    for i in 0..args.rooms {
        let b = post(
            http,
            &format!("{base}/rooms"),
            Some(&args.admin_token),
            json!({"name": format!("r{i}")}),
        )
        .await;
        let guest = b["links"]["guest"]
            .as_str()
            .unwrap()
            .rsplit('/')
            .next()
            .unwrap()
            .to_owned();
        links.push(format!("{base}/r/{guest}"));
    }
    let seen = new_seen();
    let start = Instant::now();
    let warm = start + Duration::from_secs(3);
    let until = warm + Duration::from_secs_f64(args.secs);
    let mut tasks = Vec::new();
    for link in &links {
        for _ in 0..args.followers {
            tasks.push(tokio::spawn(follower(
                http.clone(),
                link.clone(),
                start,
                until + Duration::from_secs(2),
                seen.clone(),
            )));
        }
    }
    tokio::time::sleep_until(warm.into()).await;
    let cpu0 = cpu(args.pid);
    let mut posters = Vec::new();
    for link in links {
        let (http, rate) = (http.clone(), args.rate);
        posters.push(tokio::spawn(async move {
            poster(rate, until, |n| {
                let (http, link) = (http.clone(), link.clone());
                async move {
                    post(
                        &http,
                        &link,
                        None,
                        json!({"author": "p", "body": stamp(start), "client_id": format!("c{n}")}),
                    )
                    .await;
                }
            })
            .await
        }));
    }
    for p in posters {
        p.await.unwrap();
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let cpu_s = cpu(args.pid) - cpu0;
    report("rooms_follow", &seen, cpu_s, args);
    for t in tasks {
        t.abort();
    }
}

async fn updates_mode(args: &Args, http: &reqwest::Client) {
    let admin = |path: String, body: Value| {
        let (http, url, t) = (
            http.clone(),
            format!("http://{}/api/admin{path}", args.node),
            args.admin_token.clone(),
        );
        async move { post(&http, &url, Some(&t), body).await }
    };
    let bay = format!("bench_{}", std::process::id());
    admin("/bays".into(), json!({"id": bay, "name": "bench"})).await;
    let mut posters = Vec::new();
    let mut agents = Vec::new();
    for i in 0..args.rooms {
        let user = admin(
            format!("/bays/{bay}/participants"),
            json!({"id": format!("u{i}"), "kind": "user", "name": format!("U{i}")}),
        )
        .await;
        let mut members = vec![format!("u{i}")];
        for j in 0..args.followers {
            let id = format!("a{i}_{j}");
            let a = admin(
                format!("/bays/{bay}/participants"),
                json!({"id": id, "kind": "agent", "name": id}),
            )
            .await;
            agents.push(a["token"].as_str().unwrap().to_owned());
            members.push(id);
        }
        admin(
            format!("/bays/{bay}/conversations"),
            json!({"id": format!("g{i}"), "type": "GROUP", "members": members}),
        )
        .await;
        posters.push((format!("g{i}"), user["token"].as_str().unwrap().to_owned()));
    }
    let seen = new_seen();
    let start = Instant::now();
    let warm = start + Duration::from_secs(3);
    let until = warm + Duration::from_secs_f64(args.secs);
    let tasks: Vec<_> = agents
        .into_iter()
        .map(|t| {
            tokio::spawn(poller(
                http.clone(),
                args.node.clone(),
                t,
                start,
                until + Duration::from_secs(2),
                seen.clone(),
            ))
        })
        .collect();
    tokio::time::sleep_until(warm.into()).await;
    let cpu0 = cpu(args.pid);
    let mut running = Vec::new();
    for (conv, token) in posters {
        let (http, rate, node) = (http.clone(), args.rate, args.node.clone());
        running.push(tokio::spawn(async move {
            poster(rate, until, |_| {
                let (http, url, token) = (
                    http.clone(),
                    format!("http://{node}/api/agent-api/conversations/{conv}/messages"),
                    token.clone(),
                );
                async move {
                    post(&http, &url, Some(&token), json!({"content": stamp(start)})).await;
                }
            })
            .await
        }));
    }
    for p in running {
        p.await.unwrap();
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let cpu_s = cpu(args.pid) - cpu0;
    report("updates", &seen, cpu_s, args);
    for t in tasks {
        t.abort();
    }
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(4096)
        .timeout(Duration::from_secs(40))
        .build()
        .unwrap();
    rooms_mode(&args, &http).await;
    updates_mode(&args, &http).await;
}
