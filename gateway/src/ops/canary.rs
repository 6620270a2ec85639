//! The readiness canary: proof that delivery flows, not only that the
//! store answers.
//!
//! A store can answer `PING` while the path every event takes is stuck: a
//! blocking read that never returns, a replica that stopped applying, a
//! proxy that froze one connection. Sessions then get nothing and a
//! ping-only `/readyz` stays green. So every `timing.canary_interval` the
//! node appends a [`LogEvent::Canary`] record to the log of a reserved
//! Bay ([`CANARY_BAY`], an id the admin API can never create) and waits
//! for its own feed of that Bay to read it back, through the same tail
//! every Bay feed reads with. A record that has not come back after
//! `timing.canary_timeout` turns `/readyz` to 503 `delivery_stalled` until
//! one does. The round trip is exported as
//! [`CANARY_SECONDS`](crate::metrics::CANARY_SECONDS).

use crate::metrics::CANARY_SECONDS;
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchboard_actors::feed::WatchHead;
use switchboard_actors::registry::Registry;
use switchboard_actors::store::log::LogEvent;
use switchboard_actors::store::now_ms;
use switchboard_actors::store::prelude::*;
use switchboard_protocol::cursor::EntryId;
use switchboard_protocol::ids::BayId;

/// The canary's Bay. `~` is outside the `[A-Za-z0-9_-]` of Bay ids the
/// admin API accepts, so no tenant can ever share this log.
pub const CANARY_BAY: &str = "~canary";

/// The canary's outcome so far; shared by the probe loop and `/readyz`.
#[derive(Debug)]
pub struct Canary {
    timeout: Duration,
    state: Mutex<Progress>,
}

#[derive(Debug, Default)]
struct Progress {
    /// Since when a record has been on its way without coming back;
    /// `None` when the last one came back.
    waiting_since: Option<Instant>,
    /// The last completed round trip.
    last: Option<Duration>,
}

impl Canary {
    /// A canary that calls delivery stalled after `timeout` without a
    /// record coming back.
    pub fn new(timeout: Duration) -> Arc<Self> {
        Arc::new(Canary {
            timeout,
            state: Mutex::new(Progress::default()),
        })
    }

    /// `Err` with the reason when a record has been on its way for longer
    /// than the timeout: delivery is stalled on this node.
    pub fn verdict(&self) -> Result<(), String> {
        match self.state.lock().waiting_since {
            Some(since) if since.elapsed() > self.timeout => Err(format!(
                "no canary record came back through the feed for {} ms",
                since.elapsed().as_millis()
            )),
            _ => Ok(()),
        }
    }

    /// The last completed round trip (store write to the feed's read).
    pub fn last_round_trip(&self) -> Option<Duration> {
        self.state.lock().last
    }

    /// A record is on its way (the clock keeps running from the oldest).
    fn sending(&self) {
        self.state
            .lock()
            .waiting_since
            .get_or_insert_with(Instant::now);
    }

    fn came_back(&self, round_trip: Duration) {
        let mut st = self.state.lock();
        st.waiting_since = None;
        st.last = Some(round_trip);
        metrics::histogram!(CANARY_SECONDS).record(round_trip.as_secs_f64());
    }
}

/// Runs the probe every `interval` (never when it is zero) until the
/// process ends. Must run inside an actix system.
pub fn spawn(canary: Arc<Canary>, store: Arc<dyn Store>, registry: Registry, interval: Duration) {
    if interval.is_zero() {
        return;
    }
    actix_rt::spawn(async move {
        let bay = BayId(CANARY_BAY.to_string());
        let mut head: Option<tokio::sync::watch::Receiver<EntryId>> = None;
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            canary.sending();
            // Subscribing keeps the feed running (a feed with a head
            // subscriber never stops for idleness); a stopped one is
            // replaced by a new subscription.
            if head.as_ref().is_none_or(|rx| rx.has_changed().is_err()) {
                head = registry.feed(&bay).send(WatchHead).await.ok();
            }
            let Some(rx) = head.as_mut() else { continue };
            if let Err(failed) = probe(&*store, &bay, rx, &canary).await {
                if failed {
                    head = None;
                }
            }
        }
    });
}

/// One round trip: append, then wait for the feed's head to pass the
/// record. `Err(true)` when the feed went away, `Err(false)` on a failed
/// write or a record that did not come back in time.
async fn probe(
    store: &dyn Store,
    bay: &BayId,
    head: &mut tokio::sync::watch::Receiver<EntryId>,
    canary: &Canary,
) -> Result<(), bool> {
    let started = Instant::now();
    let event = LogEvent::Canary {
        node: switchboard_actors::node::id().to_string(),
        sent_ms: now_ms(),
    };
    let id = match store.append_control(bay, event).await {
        Ok(id) => id,
        Err(err) => {
            tracing::warn!(error = %err, "readiness canary could not be written");
            return Err(false);
        }
    };
    match tokio::time::timeout(canary.timeout, head.wait_for(|h| *h >= id)).await {
        Ok(Ok(_)) => {
            canary.came_back(started.elapsed());
            Ok(())
        }
        Ok(Err(_)) => Err(true),
        Err(_) => {
            tracing::warn!(
                timeout_ms = canary.timeout.as_millis() as u64,
                "readiness canary did not come back through the feed"
            );
            Err(false)
        }
    }
}
