//! What a session receives from its Bay feed, and the cursor bookkeeping
//! both transports (`/ws` and a held `/updates`) share.
//!
//! A session is one live connection of one token. It attaches to the feed
//! of its Bay (which from then on pushes every record addressed to it, in
//! log order, through one mailbox), then replays the store's log from the
//! client's cursor up to the head. Records the feed pushes that the replay
//! already covered are dropped, so each record reaches the client once per
//! connection.
//!
//! The cursor invariant (protocol §11; docs/architecture.md, "The cursor
//! invariant", rule 1): a cursor X may be handed out only after every event
//! with id ≤ X addressed to the session was sent. Because all records reach
//! a session through the single feed → session mailbox, the `through` of
//! the last batch received is such an X.

use crate::drafts::DraftVersions;
use crate::store::log::LogRecord;
use actix::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use switchboard_protocol::cursor::{EntryId, Epoch, LogPosition};

/// A batch of log records addressed to this session's participant, in log
/// order, followed by the position the feed is now past.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Deliver {
    /// Only delivered records (messages and changes) of conversations the
    /// participant is in. Shared: every session a batch gives the same
    /// records gets the same list.
    pub records: Arc<[Arc<LogRecord>]>,
    /// Every record ≤ `through` addressed to this session has been sent.
    pub through: EntryId,
    /// The estimated size the feed charged to the session's [`Backlog`];
    /// the session gives it back with [`Backlog::handled`].
    pub bytes: usize,
}

/// The feed moved past entries that did not concern this session: the
/// session's cursor may advance (keeps idle clients inside the replay buffer).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Watermark {
    /// The feed's position; nothing ≤ it addressed to the session is still
    /// unsent, so it is a valid cursor.
    pub through: EntryId,
}

/// Why the feed ends a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// A newer connection of the same token opened (WS 4000; `/updates`
    /// answers at once, empty).
    Displaced,
    /// The token was rotated or revoked (WS 4001; `/updates` 401).
    Revoked,
    /// An operator suspended the participant or its Bay (WS 4004;
    /// `/updates` 403 `ACCOUNT_SUSPENDED` / `BAY_SUSPENDED`).
    Suspended(crate::store::Suspension),
    /// The Bay's log was lost or the feed fell out of it: the session's
    /// position is no longer addressable (WS `reset`; `/updates` 409).
    LogReset,
    /// The node is draining (WS 4003 after a final `cursor` frame).
    Draining,
    /// The session fell more than its backlog limit behind: it was detached
    /// and its connection ends; the client resumes from its last cursor.
    TooSlow,
}

/// Tells a session to end.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Close {
    /// Decides what the transport sends: close code, `reset`, 401/409 or an
    /// empty answer.
    pub reason: CloseReason,
}

/// The three recipients a feed needs to reach one session. All three point
/// at the same actor, so everything a session receives arrives in the order
/// the feed sent it.
#[derive(Clone)]
pub struct SessionHandle {
    /// Receives the records addressed to the session.
    pub deliver: Recipient<Deliver>,
    /// Receives the feed's position when a batch did not concern the session.
    pub watermark: Recipient<Watermark>,
    /// Receives the order to end the session.
    pub close: Recipient<Close>,
    /// What the feed pushed and the session has not handled yet.
    pub backlog: Arc<Backlog>,
    /// How long its participant stays present after this session ends, when
    /// not the feed's `presence_linger`: an `/updates` call ends between
    /// every two polls, and the gap can hold a rate-limit wait.
    pub linger: Option<std::time::Duration>,
    /// The transport the session rides on, as the presence record shows
    /// it (`None`: not said, an internal session).
    pub transport: Option<Transport>,
}

/// The transport a session rides on, as an operator sees it in the
/// node's presence record (docs/console.md). JSON: `ws`, `updates`,
/// `sse`, `mcp`. Webhook delivery holds no session and is not one.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// `GET /ws`.
    Ws,
    /// A held `GET /updates`.
    Updates,
    /// `GET /events` (Server-Sent Events).
    Sse,
    /// A held MCP `wait_for_messages` call.
    Mcp,
}

impl Transport {
    /// The JSON name (`ws`, `updates`, `sse`, `mcp`).
    pub fn label(self) -> &'static str {
        match self {
            Transport::Ws => "ws",
            Transport::Updates => "updates",
            Transport::Sse => "sse",
            Transport::Mcp => "mcp",
        }
    }
}

impl SessionHandle {
    /// Builds the handle of actor `addr` with its backlog accounting.
    pub fn of<A>(addr: &Addr<A>, backlog: Arc<Backlog>) -> Self
    where
        A: Actor + Handler<Deliver> + Handler<Watermark> + Handler<Close>,
        A::Context: actix::dev::ToEnvelope<A, Deliver>
            + actix::dev::ToEnvelope<A, Watermark>
            + actix::dev::ToEnvelope<A, Close>,
    {
        SessionHandle {
            deliver: addr.clone().recipient(),
            watermark: addr.clone().recipient(),
            close: addr.clone().recipient(),
            backlog,
            linger: None,
            transport: None,
        }
    }

    /// The same handle, riding on `transport` (see [`SessionHandle::transport`]).
    pub fn via(mut self, transport: Transport) -> Self {
        self.transport = Some(transport);
        self
    }

    /// The same handle, its participant staying present `linger` after
    /// this session ends (see [`SessionHandle::linger`]).
    pub fn lingering(mut self, linger: std::time::Duration) -> Self {
        self.linger = Some(linger);
        self
    }
}

/// Bytes of live records the feed pushed to a session and the session has
/// not handled yet: its mailbox backlog.
///
/// A WebSocket actor only runs when its socket accepts more bytes, so a
/// client that stops reading stops its actor and every `Deliver` waits in
/// the mailbox. The feed charges each `Deliver` here; past the limit it
/// detaches the session ([`CloseReason::TooSlow`]) instead of queueing
/// without bound, and the transport ends the connection. Nothing is lost:
/// the client's last cursor still resumes.
///
/// The limit counts what waits *behind* the oldest delivery not yet
/// handled, the one the session is working through. So one delivery larger
/// than the limit never detaches a reader, nor does the small one that
/// follows it while the big one is still being written; a reader is too
/// slow only once more than the limit waits behind what it is handling.
/// What a session can hold is therefore bounded by the limit plus its
/// largest delivery.
#[derive(Debug)]
pub struct Backlog {
    /// Invariant: `queue` holds the still-unhandled bytes of every
    /// `Deliver` charged and not yet fully handled, oldest first, and
    /// `queued` their sum.
    inner: parking_lot::Mutex<Queue>,
    /// Bytes; `usize::MAX` for sessions that answer once (`/updates`).
    limit: usize,
    abandoned: AtomicBool,
    /// Wakes [`Backlog::abandoned`] waiters.
    on_abandon: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct Queue {
    queued: usize,
    deliveries: std::collections::VecDeque<usize>,
}

impl Backlog {
    /// A backlog that abandons the session past `limit` bytes.
    pub fn bounded(limit: usize) -> Arc<Self> {
        Arc::new(Backlog {
            inner: parking_lot::Mutex::new(Queue::default()),
            limit,
            abandoned: AtomicBool::new(false),
            on_abandon: tokio::sync::Notify::new(),
        })
    }

    /// A backlog that never abandons (a held `/updates` answers at its first batch).
    pub fn unbounded() -> Arc<Self> {
        Self::bounded(usize::MAX)
    }

    /// Charges one delivery of `bytes`. Returns false (and marks the
    /// session abandoned) when more than the limit would wait behind the
    /// oldest unhandled delivery (see the type's docs).
    pub fn charge(&self, bytes: usize) -> bool {
        let mut q = self.inner.lock();
        let front = q.deliveries.front().copied().unwrap_or(0);
        let behind = (q.queued - front).saturating_add(bytes);
        if !q.deliveries.is_empty() && behind > self.limit {
            drop(q);
            self.abandoned.store(true, Ordering::Release);
            self.on_abandon.notify_waiters();
            return false;
        }
        q.queued = q.queued.saturating_add(bytes);
        q.deliveries.push_back(bytes);
        true
    }

    /// Gives back `bytes` of what was charged, oldest delivery first (a
    /// delivery may be credited in parts).
    pub fn handled(&self, bytes: usize) {
        let mut q = self.inner.lock();
        let mut left = bytes.min(q.queued);
        q.queued -= left;
        while left > 0 {
            let Some(front) = q.deliveries.front_mut() else {
                break;
            };
            if *front > left {
                *front -= left;
                break;
            }
            left -= *front;
            q.deliveries.pop_front();
        }
        // Zero-byte deliveries at the front are done too.
        while q.deliveries.front() == Some(&0) {
            q.deliveries.pop_front();
        }
        if q.queued == 0 {
            q.deliveries.clear();
        }
    }

    /// Whether the feed gave up on this session.
    pub fn is_abandoned(&self) -> bool {
        self.abandoned.load(Ordering::Acquire)
    }

    /// Resolves once the feed gave up on this session: a transport blocked
    /// on a client that stopped reading lets go of the session (and its
    /// connection slot) then, not when its write times out.
    pub async fn abandoned(&self) {
        loop {
            let notified = self.on_abandon.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if self.is_abandoned() {
                return;
            }
            notified.await;
        }
    }

    /// Bytes currently charged.
    pub fn queued(&self) -> usize {
        self.inner.lock().queued
    }
}

/// Estimated bytes the session will write for `records`: content plus a
/// fixed allowance for the event's other fields.
pub fn estimate_bytes(records: &[Arc<LogRecord>]) -> usize {
    records.iter().map(|r| r.event.estimated_bytes()).sum()
}

#[cfg(test)]
mod backlog_tests {
    use super::Backlog;

    #[test]
    fn abandons_past_the_limit_and_credits_handled_bytes() {
        let b = Backlog::bounded(1000);
        assert!(b.charge(600));
        b.handled(600);
        assert!(b.charge(900));
        assert!(b.charge(900), "900 bytes wait behind the one being handled");
        assert!(!b.is_abandoned());
        assert!(!b.charge(200), "1100 bytes behind it is past the limit");
        assert!(b.is_abandoned());
        b.handled(5000);
        assert_eq!(b.queued(), 0);
    }

    #[tokio::test]
    async fn waiters_learn_of_the_abandonment() {
        let b = Backlog::bounded(10);
        let waiter = tokio::spawn({
            let b = b.clone();
            async move { b.abandoned().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        assert!(b.charge(10));
        assert!(b.charge(10));
        assert!(!b.charge(1));
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("woken")
            .unwrap();
        b.abandoned().await;
    }

    #[test]
    fn one_delivery_larger_than_the_limit_fits_an_empty_backlog() {
        let b = Backlog::bounded(1000);
        assert!(b.charge(5000), "nothing was queued before it");
        assert!(b.charge(100), "a small one behind it still fits");
        assert!(!b.is_abandoned());
        assert!(!b.charge(901), "but no more than the limit waits behind it");
        assert!(b.is_abandoned());
    }

    #[test]
    fn credits_in_parts_retire_deliveries_oldest_first() {
        let b = Backlog::bounded(1000);
        assert!(b.charge(5000));
        assert!(b.charge(800));
        b.handled(3000);
        b.handled(2000);
        // The big one is handled; the 800 is now the one being handled.
        assert!(b.charge(1000));
        assert!(!b.charge(1), "1001 bytes wait behind the 800");
        assert_eq!(b.queued(), 1800);
    }
}

/// A session's position bookkeeping.
#[derive(Debug, Clone)]
pub struct SessionCursor {
    epoch: Epoch,
    /// Records ≤ this were sent by the replay; live copies are duplicates.
    replayed_through: EntryId,
    /// Everything ≤ this addressed to the session was handed to the transport.
    position: EntryId,
    /// Drafts the session was sent a snapshot of (see [`crate::drafts`]).
    drafts: DraftVersions,
}

impl SessionCursor {
    /// Starts bookkeeping after a replay that covered everything ≤ `through`.
    pub fn after_replay(epoch: Epoch, through: EntryId) -> Self {
        SessionCursor {
            epoch,
            replayed_through: through,
            position: through,
            drafts: DraftVersions::default(),
        }
    }

    /// The same, for a replay that sent draft snapshots: live deltas they
    /// cover are dropped.
    pub fn with_drafts(mut self, drafts: DraftVersions) -> Self {
        self.drafts = drafts;
        self
    }

    /// The drafts the session was sent a snapshot of: a later replay page
    /// sends their deltas above it as they are, and snapshots others.
    pub fn drafts(&self) -> &DraftVersions {
        &self.drafts
    }

    /// The drafts the session holds snapshots of, to add more.
    pub fn drafts_mut(&mut self) -> &mut DraftVersions {
        &mut self.drafts
    }

    /// Whether a live record still needs sending (the replay did not cover it).
    pub fn is_new(&self, id: EntryId) -> bool {
        id > self.replayed_through
    }

    /// Whether a live record goes out: the replay did not cover it, and it
    /// is not a draft delta that a snapshot the session was sent already
    /// holds. Live text thus never repeats what a replay gave.
    pub fn admits(&mut self, record: &LogRecord) -> bool {
        self.is_new(record.id) && self.drafts.admits(record)
    }

    /// Records that a later replay page covered everything ≤ `through`:
    /// live copies of those records are duplicates from now on.
    pub fn replayed(&mut self, through: EntryId) {
        self.replayed_through = self.replayed_through.max(through);
        self.advance(through);
    }

    /// Records that the session is past `through` (never moves backwards).
    pub fn advance(&mut self, through: EntryId) {
        self.position = self.position.max(through);
    }

    /// The entry of the current position (its epoch never changes): no
    /// copy of the epoch, for per-delivery bookkeeping.
    pub fn entry(&self) -> EntryId {
        self.position
    }

    /// The current position.
    pub fn position(&self) -> LogPosition {
        LogPosition {
            epoch: self.epoch.clone(),
            entry: self.position,
        }
    }
}
