//! Reconnect delays: exponential with full jitter (a delay drawn uniformly
//! from `[100 ms, min(max, initial × 2^attempt)]`, as in the AWS architecture
//! blog's "Exponential Backoff and Jitter"), never shorter than a server's
//! `Retry-After`.

use rand::Rng;
use std::time::Duration;

/// The shortest delay (or the cap, when that is shorter).
const FLOOR: Duration = Duration::from_millis(100);

/// The delay before each reconnect attempt.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    attempt: u32,
}

impl Backoff {
    /// Delays capped at `initial × 2^attempt` and at `max`.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Backoff {
            initial,
            max: max.max(initial),
            attempt: 0,
        }
    }

    /// The next delay: full jitter over the current cap, at least
    /// `retry_after` when the server sent one. Raises the cap for next time.
    pub fn next_delay(&mut self, retry_after: Option<Duration>) -> Duration {
        let cap = self
            .initial
            .saturating_mul(1u32.checked_shl(self.attempt).unwrap_or(u32::MAX))
            .min(self.max);
        self.attempt = self.attempt.saturating_add(1).min(31);
        // Full jitter above a floor: a draw near zero would retry at once,
        // several times in a row.
        let floor = FLOOR.min(cap);
        let jitter = Duration::from_secs_f64(
            rand::rng().random_range(floor.as_secs_f64()..=cap.as_secs_f64()),
        );
        retry_after.map_or(jitter, |ra| ra.max(jitter))
    }

    /// Starts over after a connection that worked.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_stay_under_the_growing_cap_and_honour_retry_after() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        for cap_ms in [100, 200, 400, 800, 1000, 1000] {
            let d = b.next_delay(None);
            assert!(d <= Duration::from_millis(cap_ms));
            assert!(d >= Duration::from_millis(100), "never at once: {d:?}");
        }
        assert!(b.next_delay(Some(Duration::from_secs(5))) >= Duration::from_secs(5));
        b.reset();
        assert!(b.next_delay(None) <= Duration::from_millis(100));
    }
}
