//! Counting deliveries: per connection a bitmap of the sequence numbers it
//! has seen (so loss and duplicates are exact, also across a resume), and
//! one shared latency histogram.

use crate::stamp;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// Counters shared by every connection of a run.
pub struct Shared {
    /// Publish→deliver latency in microseconds, for stamps ≥ `measure_from_ns`.
    pub hist: Mutex<Histogram<u64>>,
    pub measure_from_ns: AtomicU64,
    /// Latency of every message stamped at or after `window_start_ns`,
    /// warm-up included (what an overloaded run reports).
    pub hist_all: Mutex<Histogram<u64>>,
    pub window_start_ns: AtomicU64,
    /// Unique deliveries, all of them.
    pub delivered: AtomicU64,
    /// Unique deliveries of messages stamped at or after `measure_from_ns`.
    pub delivered_measured: AtomicU64,
    pub dups: AtomicU64,
    pub resets: AtomicU64,
    /// Connections that closed or failed while they should have been open.
    pub dropped: AtomicU64,
}

impl Default for Shared {
    fn default() -> Self {
        Shared {
            hist: Mutex::new(new_hist()),
            measure_from_ns: AtomicU64::new(u64::MAX),
            hist_all: Mutex::new(new_hist()),
            window_start_ns: AtomicU64::new(u64::MAX),
            delivered: AtomicU64::new(0),
            delivered_measured: AtomicU64::new(0),
            dups: AtomicU64::new(0),
            resets: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }
}

pub fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid bounds")
}

impl Shared {
    pub fn bump_reset(&self) {
        self.resets.fetch_add(1, Relaxed);
    }

    /// Starts a fresh measurement window at `from_ns`.
    pub fn reset_window(&self, from_ns: u64) {
        self.reset_window_at(from_ns, from_ns);
    }

    /// A window whose messages start at `start_ns` and whose measured part
    /// (after the warm-up) starts at `from_ns`.
    pub fn reset_window_at(&self, start_ns: u64, from_ns: u64) {
        self.hist.lock().unwrap().reset();
        self.hist_all.lock().unwrap().reset();
        self.delivered_measured.store(0, Relaxed);
        self.measure_from_ns.store(from_ns, Relaxed);
        self.window_start_ns.store(start_ns, Relaxed);
    }

    pub fn latency_all(&self) -> Latency {
        Latency::of(&self.hist_all.lock().unwrap())
    }

    pub fn latency(&self) -> Latency {
        Latency::of(&self.hist.lock().unwrap())
    }
}

/// Where a connection resumes from: a Switchboard cursor, an nchan message
/// id, or a socket.io offset (`cursor`) plus its session id (`pid`).
#[derive(Default, Clone, Debug)]
pub struct ResumeState {
    pub cursor: Option<String>,
    pub pid: Option<String>,
}

/// One subscriber's counters (kept across reconnects).
#[derive(Default)]
pub struct ConnStats {
    pub unique: AtomicU64,
    pub seen: Mutex<Vec<u64>>,
    pub resume: Mutex<ResumeState>,
    /// Unique deliveries at which this connection counts as caught up (S4).
    pub target: AtomicU64,
    /// When it got there (ns since harness start; 0 = not yet).
    pub caught_up_ns: AtomicU64,
}

impl ConnStats {
    pub fn new() -> Self {
        ConnStats {
            target: AtomicU64::new(u64::MAX),
            ..Default::default()
        }
    }

    /// Records a frame that carries a stamp; frames without one are ignored.
    pub fn deliver(&self, frame: &[u8], shared: &Shared) {
        let Some((seq, stamp_ns)) = stamp::parse(frame) else {
            return;
        };
        let now = stamp::now_ns();
        {
            let mut seen = self.seen.lock().unwrap();
            let (w, b) = ((seq / 64) as usize, seq % 64);
            if seen.len() <= w {
                seen.resize(w + 1, 0);
            }
            if seen[w] & (1 << b) != 0 {
                shared.dups.fetch_add(1, Relaxed);
                return;
            }
            seen[w] |= 1 << b;
        }
        let n = self.unique.fetch_add(1, Relaxed) + 1;
        shared.delivered.fetch_add(1, Relaxed);
        let us = (now.saturating_sub(stamp_ns) / 1000).max(1);
        if stamp_ns >= shared.window_start_ns.load(Relaxed) {
            let _ = shared.hist_all.lock().unwrap().record(us);
        }
        if stamp_ns >= shared.measure_from_ns.load(Relaxed) {
            shared.delivered_measured.fetch_add(1, Relaxed);
            let _ = shared.hist.lock().unwrap().record(us);
        }
        if n == self.target.load(Relaxed) {
            self.caught_up_ns.store(now, Relaxed);
        }
    }
}

/// Latency summary in milliseconds.
#[derive(Serialize, Clone, Copy, Debug, Default)]
pub struct Latency {
    pub count: u64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    pub fn of(h: &Histogram<u64>) -> Self {
        let ms = |us: u64| (us as f64 / 1000.0 * 1000.0).round() / 1000.0;
        if h.is_empty() {
            return Latency::default();
        }
        Latency {
            count: h.len(),
            p50_ms: ms(h.value_at_quantile(0.5)),
            p90_ms: ms(h.value_at_quantile(0.9)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            p999_ms: ms(h.value_at_quantile(0.999)),
            max_ms: ms(h.max()),
        }
    }
}

/// Percentile distribution for plotting: lines of
/// `quantile latency_ms 1/(1-quantile)`.
pub fn distribution(h: &Histogram<u64>) -> String {
    let mut out = String::from("# quantile latency_ms inverse_tail\n");
    if h.is_empty() {
        return out;
    }
    for k in 0..=60 {
        let q = 1.0 - 10f64.powf(-(k as f64) / 10.0);
        let q = if k == 0 { 0.0 } else { q };
        let v = h.value_at_quantile(q) as f64 / 1000.0;
        out.push_str(&format!("{q:.6} {v:.3} {:.1}\n", 1.0 / (1.0 - q)));
        if (h.len() as f64) * (1.0 - q) < 1.0 {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_unique_and_duplicates() {
        let shared = Shared::default();
        shared.reset_window(0);
        let c = ConnStats::new();
        c.target.store(2, Relaxed);
        let f = |seq| stamp::payload(stamp::now_ns(), seq, 0);
        c.deliver(f(0).as_bytes(), &shared);
        c.deliver(f(0).as_bytes(), &shared);
        c.deliver(f(200).as_bytes(), &shared);
        c.deliver(b"no stamp", &shared);
        assert_eq!(c.unique.load(Relaxed), 2);
        assert_eq!(shared.dups.load(Relaxed), 1);
        assert_eq!(shared.delivered_measured.load(Relaxed), 2);
        assert!(c.caught_up_ns.load(Relaxed) > 0);
        assert_eq!(shared.latency().count, 2);
    }
}
