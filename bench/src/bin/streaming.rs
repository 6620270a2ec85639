//! Streaming replies under load (BENCHMARKS.md, "Streaming replies").
//!
//! `D` GROUP rooms, each with one author agent and `S` subscribers on
//! WebSockets (spread over the nodes given). Every author opens a draft
//! and appends one 5-character token every `1/rate` seconds for `secs`
//! seconds (HTTP, through the nodes in turn), then completes it; the
//! subscribers rebuild the text from `message.streaming` / `message.delta`
//! and check it against the final message.
//!
//! Measured:
//! - **token latency**: an append's send time → the delta carrying its
//!   token arriving at a subscriber (every subscriber, every token). The
//!   flush window is part of it; the report gives it and what lies above;
//! - **live bytes**: the text bytes of the deltas a subscriber received ÷
//!   the final text's bytes, and the delta frames' size with envelope;
//! - **store writes per draft per second**: deltas per draft per second
//!   (each delta is one store write);
//! - **cancel**: a second round opens one draft per room and a subscriber on
//!   another node cancels it; cancel POST sent → the author's socket
//!   receives `message.cancel_requested`.
//!
//! Usage: `switchboard-bench-streaming --nodes 127.0.0.1:8080[,127.0.0.1:8081]
//! --admin-token T [--drafts 100] [--subscribers 10] [--rate 50] [--secs 10]`.
//! Prints one JSON object.

use clap::Parser;
use futures_util::{SinkExt, StreamExt};
use hdrhistogram::Histogram;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

#[derive(Parser)]
struct Args {
    /// Gateway nodes (host:port), comma-separated.
    #[arg(long, value_delimiter = ',')]
    nodes: Vec<String>,
    #[arg(long)]
    admin_token: String,
    #[arg(long, default_value_t = 100)]
    drafts: usize,
    #[arg(long, default_value_t = 10)]
    subscribers: usize,
    /// Tokens per second per draft.
    #[arg(long, default_value_t = 50.0)]
    rate: f64,
    #[arg(long, default_value_t = 10.0)]
    secs: f64,
    /// The gateway's `timing.draft_flush_interval`, ms (for the report).
    #[arg(long, default_value_t = 40.0)]
    flush_ms: f64,
}

const TOKEN_CHARS: usize = 5;

/// When each token of each draft was sent: draft id → send instants.
type Sent = Arc<Mutex<HashMap<String, Vec<Instant>>>>;

#[derive(Default)]
struct Seen {
    latency: Option<Histogram<u64>>,
    delta_text_bytes: u64,
    delta_frame_bytes: u64,
    deltas: u64,
    texts: HashMap<String, String>,
    cancel_rx: HashMap<String, Instant>,
    broken: Vec<String>,
}

fn token(i: usize) -> String {
    format!("t{:03} ", i % 1000)
}

async fn admin(http: &reqwest::Client, base: &str, token: &str, path: &str, body: Value) -> Value {
    let res = http
        .post(format!("http://{base}/api/admin{path}"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .expect("admin request");
    let status = res.status();
    let v: Value = res.json().await.unwrap_or(Value::Null);
    assert!(status.is_success(), "admin {path}: {status} {v}");
    v
}

async fn agent_post(
    http: &reqwest::Client,
    node: &str,
    token: &str,
    path: &str,
    body: Value,
) -> Value {
    let res = http
        .post(format!("http://{node}/api/agent-api{path}"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .expect("agent request");
    let status = res.status();
    let v: Value = res.json().await.unwrap_or(Value::Null);
    assert!(status.is_success(), "{path}: {status} {v}");
    v
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(4096)
        .build()
        .unwrap();
    let n0 = args.nodes[0].clone();
    let bay = format!("stream{}", std::process::id());
    admin(
        &http,
        &n0,
        &args.admin_token,
        "/bays",
        json!({"id": bay, "name": "Streaming bench"}),
    )
    .await;
    let mut rooms = Vec::new();
    for d in 0..args.drafts {
        let mk = |id: String, kind: &str| json!({"id": id, "kind": kind, "name": id});
        let author = admin(
            &http,
            &n0,
            &args.admin_token,
            &format!("/bays/{bay}/participants"),
            mk(format!("a{d}"), "agent"),
        )
        .await;
        let mut subs = Vec::new();
        let mut ids = vec![format!("a{d}")];
        for s in 0..args.subscribers {
            let id = format!("s{d}x{s}");
            let v = admin(
                &http,
                &n0,
                &args.admin_token,
                &format!("/bays/{bay}/participants"),
                mk(id.clone(), "user"),
            )
            .await;
            subs.push(v["token"].as_str().unwrap().to_owned());
            ids.push(id);
        }
        admin(
            &http,
            &n0,
            &args.admin_token,
            &format!("/bays/{bay}/conversations"),
            json!({"id": format!("r{d}"), "type": "GROUP", "members": ids}),
        )
        .await;
        rooms.push((author["token"].as_str().unwrap().to_owned(), subs));
    }

    let sent: Sent = Arc::default();
    let seen = Arc::new(Mutex::new(Seen {
        latency: Some(Histogram::new_with_bounds(1, 60_000_000, 3).unwrap()),
        ..Seen::default()
    }));
    // Subscribers and authors on WebSockets, spread over the nodes.
    let mut conns = 0usize;
    let mut readers = Vec::new();
    for (d, (author, subs)) in rooms.iter().enumerate() {
        for (s, tok) in subs.iter().enumerate() {
            let node = &args.nodes[(d + s) % args.nodes.len()];
            readers.push(spawn_reader(node, tok, sent.clone(), seen.clone(), false).await);
            conns += 1;
        }
        let node = &args.nodes[d % args.nodes.len()];
        readers.push(spawn_reader(node, author, sent.clone(), seen.clone(), true).await);
    }
    eprintln!("{conns} subscribers connected");
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Round 1: stream, complete.
    let tokens = (args.rate * args.secs) as usize;
    let gap = Duration::from_secs_f64(1.0 / args.rate);
    let started = Instant::now();
    let mut authors = Vec::new();
    for (d, (author, _)) in rooms.iter().enumerate() {
        let (http, sent) = (http.clone(), sent.clone());
        let nodes = args.nodes.clone();
        let author = author.clone();
        authors.push(tokio::spawn(async move {
            let room = format!("/conversations/r{d}/messages");
            let node = |i: usize| nodes[(d + i) % nodes.len()].clone();
            let draft = agent_post(&http, &node(0), &author, &room, json!({"stream": true})).await;
            let id = draft["id"].as_str().unwrap().to_owned();
            sent.lock().unwrap().insert(id.clone(), Vec::new());
            // Tokens are produced on schedule; one append is in flight at
            // a time and carries every token produced meanwhile, as an
            // agent streaming a model's output would (appends sent without
            // waiting may arrive out of order across flush windows and be
            // refused as gaps).
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<usize>();
            let producer = {
                let (sent, id) = (sent.clone(), id.clone());
                tokio::spawn(async move {
                    let t0 =
                        tokio::time::Instant::now() + Duration::from_millis((d as u64 * 7) % 20);
                    for i in 0..tokens {
                        tokio::time::sleep_until(t0 + gap * i as u32).await;
                        sent.lock()
                            .unwrap()
                            .get_mut(&id)
                            .unwrap()
                            .push(Instant::now());
                        let _ = tx.send(i);
                    }
                })
            };
            let path = format!("{room}/{id}/append");
            let mut next = 0usize;
            let mut calls = 0usize;
            while next < tokens {
                let Some(first) = rx.recv().await else { break };
                let mut last = first;
                while let Ok(i) = rx.try_recv() {
                    last = i;
                }
                let text: String = (next..=last).map(token).collect();
                agent_post(
                    &http,
                    &node(calls),
                    &author,
                    &path,
                    json!({"offset": next * TOKEN_CHARS, "text": text}),
                )
                .await;
                next = last + 1;
                calls += 1;
            }
            producer.await.unwrap();
            agent_post(
                &http,
                &node(1),
                &author,
                &format!("{room}/{id}/complete"),
                json!({}),
            )
            .await;
            id
        }));
    }
    let mut drafts = Vec::new();
    for a in authors {
        drafts.push(a.await.unwrap());
    }
    let streamed_secs = started.elapsed().as_secs_f64();
    // Let the last deltas and completions arrive.
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Round 2: cancel, from a subscriber on another node than the author's.
    let mut cancels = Vec::new();
    let cancel_sent: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    for (d, (author, subs)) in rooms.iter().enumerate() {
        let room = format!("/conversations/r{d}/messages");
        let author_node = &args.nodes[d % args.nodes.len()];
        let other = &args.nodes[(d + 1) % args.nodes.len()];
        let draft = agent_post(
            &http,
            author_node,
            author,
            &room,
            json!({"stream": true, "content": "thinking"}),
        )
        .await;
        let id = draft["id"].as_str().unwrap().to_owned();
        let (http, sub, other, cancel_sent) = (
            http.clone(),
            subs[0].clone(),
            other.clone(),
            cancel_sent.clone(),
        );
        cancels.push(tokio::spawn(async move {
            cancel_sent
                .lock()
                .unwrap()
                .insert(id.clone(), Instant::now());
            agent_post(
                &http,
                &other,
                &sub,
                &format!("{room}/{id}/cancel"),
                json!({}),
            )
            .await;
        }));
    }
    for c in cancels {
        c.await.unwrap();
    }
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Report.
    let final_bytes = tokens * TOKEN_CHARS;
    let mut guard = seen.lock().unwrap();
    let s = &mut *guard;
    let mut text_ok = 0;
    let want: String = (0..tokens).map(token).collect();
    for id in &drafts {
        for (key, text) in s.texts.iter() {
            if key.ends_with(id.as_str()) {
                if *text == want {
                    text_ok += 1;
                } else {
                    s.broken
                        .push(format!("{key}: {} of {} chars", text.len(), want.len()));
                }
            }
        }
    }
    let mut cancel = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
    let sent_at = cancel_sent.lock().unwrap();
    for (id, at) in sent_at.iter() {
        if let Some(rx) = s.cancel_rx.get(id) {
            cancel
                .record(rx.saturating_duration_since(*at).as_micros() as u64)
                .ok();
        }
    }
    let lat = s.latency.take().unwrap();
    let ms = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    let out = json!({
        "scenario": "streaming",
        "nodes": args.nodes.len(),
        "drafts": args.drafts,
        "subscribers_per_draft": args.subscribers,
        "tokens_per_s": args.rate,
        "tokens_per_draft": tokens,
        "flush_ms": args.flush_ms,
        "streamed_secs": streamed_secs,
        "token_latency_ms": {"p50": ms(&lat, 0.5), "p99": ms(&lat, 0.99), "p999": ms(&lat, 0.999), "max": lat.max() as f64 / 1000.0, "samples": lat.len()},
        "p99_above_flush_ms": ms(&lat, 0.99) - args.flush_ms,
        "texts_rebuilt_ok": text_ok,
        "texts_expected": args.drafts * args.subscribers,
        "broken": s.broken.iter().take(5).collect::<Vec<_>>(),
        "deltas_per_draft_per_s": s.deltas as f64 / (args.drafts * args.subscribers) as f64 / streamed_secs,
        "live_text_bytes_ratio": s.delta_text_bytes as f64 / (final_bytes * args.drafts * args.subscribers) as f64,
        "mean_delta_frame_bytes": s.delta_frame_bytes as f64 / s.deltas.max(1) as f64,
        "cancel_ms": {"p50": ms(&cancel, 0.5), "p99": ms(&cancel, 0.99), "max": cancel.max() as f64 / 1000.0, "samples": cancel.len(), "expected": args.drafts},
    });
    println!("{out}");
}

/// Opens a WebSocket for `token` on `node` and spawns its reader.
async fn spawn_reader(
    node: &str,
    token: &str,
    sent: Sent,
    seen: Arc<Mutex<Seen>>,
    author: bool,
) -> tokio::task::JoinHandle<()> {
    let mut req = format!("ws://{node}/api/agent-api/ws")
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("Authorization", format!("Bearer {token}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req)
        .await
        .expect("ws connect");
    ws.send(Message::text(r#"{"t":"hello","resume":null}"#))
        .await
        .unwrap();
    let me = token[token.len() - 8..].to_owned();
    tokio::spawn(async move {
        while let Some(Ok(msg)) = ws.next().await {
            let Message::Text(t) = msg else { continue };
            let now = Instant::now();
            let f: Value = match serde_json::from_str(&t) {
                Ok(v) => v,
                Err(_) => continue,
            };
            if f["t"] != "event" {
                continue;
            }
            let e = &f["event"];
            let mut guard = seen.lock().unwrap();
            let s = &mut *guard;
            match e["type"].as_str() {
                Some("message.cancel_requested") if author => {
                    s.cancel_rx
                        .insert(e["messageId"].as_str().unwrap().to_owned(), now);
                }
                Some("message.streaming") if !author => {
                    let id = e["message"]["id"].as_str().unwrap();
                    s.texts.insert(
                        format!("{me}/{id}"),
                        e["message"]["content"].as_str().unwrap().to_owned(),
                    );
                }
                Some("message.delta") if !author => {
                    let id = e["messageId"].as_str().unwrap().to_owned();
                    let text = e["text"].as_str().unwrap();
                    let offset = e["offset"].as_u64().unwrap() as usize;
                    s.deltas += 1;
                    s.delta_text_bytes += text.len() as u64;
                    s.delta_frame_bytes += t.len() as u64;
                    let key = format!("{me}/{id}");
                    let have = s.texts.entry(key.clone()).or_default();
                    if have.chars().count() != offset {
                        s.broken.push(format!(
                            "{key}: delta at {offset}, text {}",
                            have.chars().count()
                        ));
                    }
                    have.push_str(text);
                    let first = offset / TOKEN_CHARS;
                    let last = (offset + text.chars().count()) / TOKEN_CHARS;
                    if let Some(times) = sent.lock().unwrap().get(&id) {
                        for i in first..last {
                            if let Some(at) = times.get(i) {
                                let us = now.saturating_duration_since(*at).as_micros() as u64;
                                if let Some(h) = s.latency.as_mut() {
                                    h.record(us.max(1)).ok();
                                }
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    })
}
