//! The load generator: a pool of subscriber connections (one reader task
//! each) and an open-loop publisher.

use crate::stamp;
use crate::stats::{ConnStats, Shared};
use crate::target::{source_addr, Layout, Target};
use futures_util::{SinkExt, StreamExt};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;

/// Subscribers of one run.
pub struct Pool {
    pub target: Arc<Target>,
    pub shared: Arc<Shared>,
    pub layout: Layout,
    pub conns: Vec<Arc<ConnStats>>,
    tasks: Vec<Option<JoinHandle<()>>>,
    stop: watch::Sender<bool>,
    /// How many loopback source addresses (127.0.0.1 …) to spread over.
    pub src_addrs: usize,
}

/// How a batch of connects went.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ConnectReport {
    pub attempted: usize,
    pub ok: usize,
    pub failed: usize,
    pub secs: f64,
    pub per_s: f64,
    pub first_error: Option<String>,
}

impl Pool {
    pub fn new(target: Arc<Target>, layout: Layout, src_addrs: usize) -> Pool {
        let n = layout.members.len();
        Pool {
            target,
            shared: Arc::new(Shared::default()),
            conns: (0..n).map(|_| Arc::new(ConnStats::new())).collect(),
            tasks: (0..n).map(|_| None).collect(),
            stop: watch::channel(false).0,
            layout,
            src_addrs,
        }
    }

    fn is_open(&self, i: usize) -> bool {
        self.tasks[i].as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Connects every subscriber that is not connected (all, the first
    /// time), `concurrency` handshakes at a time. Subscriber `i` goes to
    /// node `(i + node_shift) % nodes`; with `resume` it continues from its
    /// stored position.
    pub async fn connect(
        &mut self,
        resume: bool,
        concurrency: usize,
        node_shift: usize,
    ) -> ConnectReport {
        let todo: Vec<usize> = (0..self.conns.len())
            .filter(|&i| !self.is_open(i))
            .collect();
        let t0 = Instant::now();
        let first_error: Arc<Mutex<Option<String>>> = Arc::default();
        let stop_rx = self.stop.subscribe();
        let results: Vec<(usize, Option<JoinHandle<()>>)> =
            futures_util::stream::iter(todo.iter().copied().map(|i| {
                let target = self.target.clone();
                let shared = self.shared.clone();
                let st = self.conns[i].clone();
                let member = self.layout.members[i].clone();
                let src = source_addr(i, self.src_addrs);
                let first_error = first_error.clone();
                let stop_rx = stop_rx.clone();
                async move {
                    match target
                        .open(i + node_shift, src, &member, resume, &st, &shared)
                        .await
                    {
                        Ok(ws) => {
                            let h = tokio::spawn(read_loop(target, ws, st, shared, stop_rx));
                            (i, Some(h))
                        }
                        Err(e) => {
                            first_error.lock().unwrap().get_or_insert(e.to_string());
                            (i, None)
                        }
                    }
                }
            }))
            .buffer_unordered(concurrency.max(1))
            .collect()
            .await;
        let secs = t0.elapsed().as_secs_f64();
        let mut ok = 0;
        for (i, h) in results {
            if h.is_some() {
                ok += 1;
            }
            self.tasks[i] = h;
        }
        let err = first_error.lock().unwrap().clone();
        ConnectReport {
            attempted: todo.len(),
            ok,
            failed: todo.len() - ok,
            secs,
            per_s: if secs > 0.0 { ok as f64 / secs } else { 0.0 },
            first_error: err,
        }
    }

    /// Open connections right now.
    pub fn open_count(&self) -> usize {
        (0..self.tasks.len()).filter(|&i| self.is_open(i)).count()
    }

    /// Drops every connection without a close handshake (the TCP socket is
    /// closed, as when a client's network goes away) and waits for the
    /// reader tasks to end.
    pub async fn drop_all(&mut self) {
        let _ = self.stop.send(true);
        for t in self.tasks.iter_mut() {
            if let Some(h) = t.take() {
                let _ = h.await;
            }
        }
        self.stop = watch::channel(false).0;
    }

    /// Expected unique deliveries for `ok_per_room` accepted messages.
    pub fn expected(&self, ok_per_room: &[u64]) -> u64 {
        ok_per_room
            .iter()
            .enumerate()
            .map(|(r, &n)| n * self.layout.members_in(r) as u64)
            .sum()
    }

    /// Waits until `shared.delivered` reaches `want`, or nothing arrived
    /// for `idle`, or `max` passed. Returns the time (ns since harness
    /// start) the last delivery was seen.
    pub async fn drain(&self, want: u64, idle: Duration, max: Duration) -> u64 {
        let t0 = Instant::now();
        let mut last = self.shared.delivered.load(Relaxed);
        let mut last_change = Instant::now();
        let mut last_ns = stamp::now_ns();
        loop {
            let now = self.shared.delivered.load(Relaxed);
            if now != last {
                last = now;
                last_change = Instant::now();
                last_ns = stamp::now_ns();
            }
            if now >= want || last_change.elapsed() > idle || t0.elapsed() > max {
                return last_ns;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

async fn read_loop(
    target: Arc<Target>,
    mut ws: crate::target::Ws,
    st: Arc<ConnStats>,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            biased;
            _ = stop.changed() => return,
            m = ws.next() => match m {
                Some(Ok(Message::Text(t))) => {
                    if let Some(reply) = target.process(&t, &st, &shared) {
                        if ws.send(Message::text(reply)).await.is_err() {
                            shared.dropped.fetch_add(1, Relaxed);
                            return;
                        }
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => {
                    shared.dropped.fetch_add(1, Relaxed);
                    return;
                }
                Some(Ok(_)) => {}
            }
        }
    }
}

/// What the publisher did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PublishReport {
    /// Messages the schedule called for.
    pub scheduled: u64,
    /// Messages actually sent (fewer when the publisher gave up on an overloaded server).
    pub attempted: u64,
    pub ok: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    #[serde(skip)]
    pub ok_per_room: Vec<u64>,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Largest delay between a message's scheduled time and its dispatch
    /// (the publisher falling behind), ms.
    pub max_dispatch_lag_ms: f64,
}

/// Who sends message `i`: `(room, token)` (token only matters for Switchboard).
pub type Picker<'a> = &'a (dyn Fn(u64) -> (usize, String) + Sync);

/// Publishes `total` messages open-loop at `rate`/s starting at `start_ns`,
/// at most `inflight` HTTP requests at a time. Each message is stamped with
/// its *scheduled* time, so a publisher or server that falls behind shows up
/// as latency (no coordinated omission). `seqs` holds the next sequence
/// number per room.
#[allow(clippy::too_many_arguments)]
pub async fn publish(
    target: &Arc<Target>,
    rate: f64,
    total: u64,
    start_ns: u64,
    pick: Picker<'_>,
    seqs: &mut [u64],
    inflight: usize,
    pad: usize,
) -> PublishReport {
    let sem = Arc::new(Semaphore::new(inflight.max(1)));
    let ok_per_room: Arc<Vec<AtomicU64>> =
        Arc::new((0..seqs.len()).map(|_| AtomicU64::new(0)).collect());
    let errors = Arc::new(AtomicU64::new(0));
    let first_error: Arc<Mutex<Option<String>>> = Arc::default();
    let mut max_lag = 0u64;
    let interval = 1e9 / rate.max(1e-9);
    let nodes = target.nodes.len().max(1);
    // An overloaded server makes the open loop block on the in-flight
    // limit; stop dispatching 5 s after the schedule should have ended and
    // report how many were sent instead of running on for minutes.
    let deadline = start_ns + (total as f64 * interval) as u64 + 5_000_000_000;
    let mut attempted = 0;
    for i in 0..total {
        let at = start_ns + (i as f64 * interval) as u64;
        let now = stamp::now_ns();
        if at > now {
            tokio::time::sleep_until(stamp::instant_at(at).into()).await;
        }
        let permit = tokio::select! {
            p = sem.clone().acquire_owned() => p.expect("open semaphore"),
            _ = tokio::time::sleep_until(stamp::instant_at(deadline).into()) => break,
        };
        attempted += 1;
        max_lag = max_lag.max(stamp::now_ns().saturating_sub(at));
        let (room, token) = pick(i);
        let seq = seqs[room];
        seqs[room] += 1;
        let body = stamp::payload(at, seq, pad);
        let target = target.clone();
        let ok_per_room = ok_per_room.clone();
        let errors = errors.clone();
        let first_error = first_error.clone();
        tokio::spawn(async move {
            match target.publish(room % nodes, room, &token, &body).await {
                Ok(()) => {
                    ok_per_room[room].fetch_add(1, Relaxed);
                }
                Err(e) => {
                    errors.fetch_add(1, Relaxed);
                    first_error.lock().unwrap().get_or_insert(e.to_string());
                }
            }
            drop(permit);
        });
    }
    let _ = sem.acquire_many(inflight.max(1) as u32).await;
    let ok_per_room: Vec<u64> = ok_per_room.iter().map(|a| a.load(Relaxed)).collect();
    let err = first_error.lock().unwrap().clone();
    PublishReport {
        scheduled: total,
        attempted,
        ok: ok_per_room.iter().sum(),
        errors: errors.load(Relaxed),
        first_error: err,
        ok_per_room,
        start_ns,
        end_ns: stamp::now_ns(),
        max_dispatch_lag_ms: max_lag as f64 / 1e6,
    }
}
