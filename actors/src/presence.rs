//! Activity presence: the state computation and the Bay's publisher.
//!
//! Every node's [`BayFeed`](crate::feed::BayFeed) keeps a presence record
//! per Bay in the store ([`PresenceStore::set_presence`](crate::store::PresenceStore::set_presence), living
//! [`PRESENCE_TTL_INTERVALS`] × `timing.presence_interval`): for each
//! participant it knows of, whether it holds a session there (or lingers
//! after one), until when its typing indicator lives and when it was last
//! active. [`compute`] merges every live record (and the store's draft
//! authors) into one state per participant.
//!
//! One node per Bay publishes: the one holding the lease
//! `presence:<bay>` ([`LeaseStore::lease`](crate::store::LeaseStore::lease), [`LEASE_TICKS`] ticks long,
//! renewed each tick). Every `timing.presence_tick`, and at the exact
//! moment the next linger, typing indicator or idle timer runs out, it
//! computes the states, compares them with the published ones kept in the
//! store, and logs one `Presence` entry per change in the same atomic step
//! that records the new published states ([`PresenceStore::publish_presence`](crate::store::PresenceStore::publish_presence)).
//! The published states live in the store, so a node taking the lease
//! over continues without announcing anything again; the step is a
//! compare-and-set on the states it computed against, so two nodes
//! overlapping during a hand-over never log one change twice.
//!
//! Timing at the defaults: `offline` follows a clean close after the
//! linger (2.5 s), and a killed node's participants within its record's
//! life (6 s) plus a tick; a killed publisher is replaced within 1.5
//! leases (3 s), within the record's life. While it holds the lease, the
//! publisher keeps the published states it wrote instead of reading them
//! each tick: a step costs the store the lease renewal and one read of
//! the records (plus the draft authors), and a write only on a change.

use crate::store::{now_ms, ParticipantPresence, PresenceChange, Published, Store, StoreError};
use chrono::{SubsecRound, Utc};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use switchboard_protocol::ids::{BayId, ParticipantId};
use switchboard_protocol::presence::PresenceState;

/// A presence record lives this many `presence_interval`s: a node that
/// stops refreshing (killed, partitioned) drops out within three
/// intervals, and one late or failed write is survived.
pub const PRESENCE_TTL_INTERVALS: u32 = 3;

/// The publisher's lease lives this many ticks; it is renewed every tick,
/// so a slow store call or two does not lose it, and a dead holder is
/// replaced within this many ticks.
pub const LEASE_TICKS: u32 = 4;

/// Presence tunables (all from `[timing]`).
#[derive(Clone, Copy, Debug)]
pub struct PresenceSettings {
    /// How often a node refreshes its record (`timing.presence_interval`);
    /// zero turns presence records off (tests of other things).
    pub interval: Duration,
    /// How long a participant stays present after its last session on a
    /// node ends (`timing.presence_linger`).
    pub linger: Duration,
    /// How often the publisher looks for changes (`timing.presence_tick`);
    /// zero turns the publisher (and `presence.updated` events) off.
    pub tick: Duration,
    /// Present with no activity for this long is `idle`
    /// (`timing.presence_idle_after`).
    pub idle_after: Duration,
}

impl PresenceSettings {
    /// How long one node record lives: [`PRESENCE_TTL_INTERVALS`] ×
    /// `interval`.
    pub fn record_ttl(&self) -> Duration {
        self.interval * PRESENCE_TTL_INTERVALS
    }

    /// How long the publisher's lease lives: [`LEASE_TICKS`] × `tick`.
    pub fn lease_ttl(&self) -> Duration {
        self.tick * LEASE_TICKS
    }
}

/// What [`compute`] found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct States {
    /// The state of every participant not `offline`.
    pub states: HashMap<ParticipantId, PresenceState>,
    /// The earliest Unix ms after `now` at which a state changes by
    /// itself (a linger, a typing indicator or an idle timer runs out),
    /// if any: the publisher wakes then instead of at its next tick.
    pub next_change_ms: Option<u64>,
}

impl States {
    /// `participant`'s state (`offline` when not listed).
    pub fn of(&self, participant: &ParticipantId) -> PresenceState {
        self.states
            .get(participant)
            .copied()
            .unwrap_or(PresenceState::Offline)
    }
}

/// Merges every live node record's `entries` and the Bay's `drafts`
/// authors into one state per participant at `now_ms` (Unix ms). In
/// priority order: `streaming` (an open draft), `thinking` (a live typing
/// indicator, on any node, unless any node saw a send after it started),
/// then, while present (a session on some node,
/// or within a linger), `idle` when the newest activity any node saw is
/// `idle_after` old or more, else `online`; otherwise `offline`. Streaming
/// and thinking need no session: an agent working through REST alone
/// (webhook delivery) shows them too.
///
/// Takes the entries by value: the publisher computes a Bay's states every
/// tick, and the ids move into the result instead of being copied.
pub fn compute(
    entries: Vec<ParticipantPresence>,
    drafts: &[ParticipantId],
    now_ms: u64,
    idle_after: Duration,
) -> States {
    #[derive(Default)]
    struct Merged {
        session: bool,
        linger_until: u64,
        sent: u64,
        active: u64,
        /// Each node's typing indicator: (started, lives until), Unix ms.
        typing: Vec<(u64, u64)>,
    }
    let mut merged: HashMap<ParticipantId, Merged> = HashMap::with_capacity(entries.len());
    for e in entries {
        let m = merged.entry(e.participant).or_default();
        m.session |= e.session;
        m.linger_until = m.linger_until.max(e.linger_until_ms);
        m.sent = m.sent.max(e.sent_ms);
        m.active = m.active.max(e.active_ms);
        if e.thinking_until_ms > 0 {
            m.typing.push((e.typed_ms, e.thinking_until_ms));
        }
    }
    let drafting: std::collections::HashSet<&ParticipantId> = drafts.iter().collect();
    for p in drafts {
        if !merged.contains_key(p) {
            merged.insert(p.clone(), Merged::default());
        }
    }
    let idle_ms = idle_after.as_millis() as u64;
    let mut out = States::default();
    let mut soonest = |at: u64| {
        if at > now_ms {
            out.next_change_ms = Some(out.next_change_ms.map_or(at, |n| n.min(at)));
        }
    };
    let mut states = HashMap::with_capacity(merged.len());
    for (p, m) in merged {
        let present = m.session || m.linger_until > now_ms;
        if !m.session {
            soonest(m.linger_until);
        }
        // A typing indicator counts unless a send after its start was
        // seen (on any node).
        let thinking_until = m
            .typing
            .iter()
            .filter(|(typed, _)| *typed >= m.sent)
            .map(|(_, until)| *until)
            .max()
            .unwrap_or(0);
        soonest(thinking_until);
        let idle_at = m.active.saturating_add(idle_ms);
        let state = if drafting.contains(&p) {
            PresenceState::Streaming
        } else if thinking_until > now_ms {
            PresenceState::Thinking
        } else if present {
            soonest(idle_at);
            if idle_at <= now_ms {
                PresenceState::Idle
            } else {
                PresenceState::Online
            }
        } else {
            continue;
        };
        states.insert(p, state);
    }
    out.states = states;
    out
}

/// The states of `bay` now, computed from the store's records: what
/// `GET /agents` shows (the same rule the publisher announces).
///
/// # Errors
/// The store's, when it cannot read the records or the draft authors.
pub async fn current(
    store: &dyn Store,
    bay: &BayId,
    idle_after: Duration,
) -> Result<States, StoreError> {
    let (entries, drafts) =
        futures_util::try_join!(store.presence_records(bay), store.draft_authors(bay))?;
    Ok(compute(entries, &drafts, now_ms(), idle_after))
}

/// The published states as the publisher last knew them; `None` when it
/// must read them from the store (it just took the lease, or its last
/// step failed or conflicted).
type Known = Option<HashMap<ParticipantId, PresenceState>>;

/// What the publisher's last step computed from: the records' version
/// (`PresenceStore::presence_version`), the open drafts' authors, and the
/// next moment a state changes by itself. While all three hold, the states
/// are what were computed then, and a step reads no records.
#[derive(Default)]
struct Computed {
    version: Option<u64>,
    drafts: Vec<ParticipantId>,
    next_change_ms: Option<u64>,
}

/// One publishing step: computes the states, logs the changes against
/// the published ones (`known`, read from the store when `None`, and kept
/// current). Returns the next moment a state changes by itself.
///
/// Skipped when nothing it computes from moved since the last step
/// (`last`) and the published states are known: for a Bay whose records
/// are rewritten every `presence_interval`, most ticks then cost a version
/// read instead of every record (a Bay of 10,000 participants held its
/// node's thread about 3 ms per tick to read and recompute them).
async fn publish_once(
    store: &dyn Store,
    bay: &BayId,
    settings: &PresenceSettings,
    known: &mut Known,
    last: &mut Computed,
) -> Result<Option<u64>, StoreError> {
    let (version, mut drafts) =
        futures_util::try_join!(store.presence_version(bay), store.draft_authors(bay))?;
    drafts.sort();
    let now = now_ms();
    if version.is_some()
        && version == last.version
        && drafts == last.drafts
        && last.next_change_ms.is_none_or(|at| now < at)
        && known.is_some()
    {
        return Ok(last.next_change_ms);
    }
    let entries = store.presence_records(bay).await?;
    let states = compute(entries, &drafts, now, settings.idle_after);
    *last = Computed {
        version,
        drafts,
        next_change_ms: states.next_change_ms,
    };
    let published = match known.take() {
        Some(published) => published,
        None => store.published_presence(bay).await?.into_iter().collect(),
    };
    let at = Utc::now().trunc_subsecs(3);
    let changes = changes_between(&published, &states.states, at);
    if changes.is_empty() {
        *known = Some(published);
        return Ok(states.next_change_ms);
    }
    match store.publish_presence(bay, &changes).await? {
        Published::Logged(_) => {
            tracing::debug!(bay = %bay, changes = changes.len(), "presence published");
            *known = Some(states.states);
            return Ok(states.next_change_ms);
        }
        Published::Conflict => {
            // Another publisher went first (a lease hand-over): read the
            // states again at the next step.
            tracing::debug!(bay = %bay, "presence changed under the publisher; retrying");
        }
    }
    Ok(states.next_change_ms)
}

/// What changed from the `published` states to the computed ones (`now`),
/// stamped `at`, ordered by participant id (the order they are logged
/// in). A participant missing from either map is `offline` there. Linear
/// in the two maps, with only the changes sorted: a Bay of 10,000
/// participants is diffed every tick, and a set of every id sorted each
/// time held its node's event loop for milliseconds.
fn changes_between(
    published: &HashMap<ParticipantId, PresenceState>,
    now: &HashMap<ParticipantId, PresenceState>,
    at: chrono::DateTime<Utc>,
) -> Vec<PresenceChange> {
    let change = |p: &ParticipantId, from, to| PresenceChange {
        participant: p.clone(),
        from,
        to,
        at,
    };
    let mut changes: Vec<PresenceChange> = now
        .iter()
        .filter_map(|(p, &to)| {
            let from = published.get(p).copied().unwrap_or(PresenceState::Offline);
            (from != to).then(|| change(p, from, to))
        })
        .collect();
    changes.extend(
        published
            .iter()
            .filter(|&(p, &from)| from != PresenceState::Offline && !now.contains_key(p))
            .map(|(p, &from)| change(p, from, PresenceState::Offline)),
    );
    changes.sort_unstable_by(|a, b| a.participant.cmp(&b.participant));
    changes
}

/// Runs `bay`'s presence publisher on this node for as long as `alive`
/// says so (the feed that started it is running). The holder of the lease
/// renews it and publishes every tick (or sooner, when a state changes by
/// itself); the other nodes try to take it every half lease, so a dead
/// holder is replaced within 1.5 leases (3 s at the defaults) at the cost
/// of one store call per second per node. Failures are logged and retried
/// at the next tick. Gives the lease up when it stops.
pub async fn run_publisher(
    bay: BayId,
    store: Arc<dyn Store>,
    settings: PresenceSettings,
    alive: impl Fn() -> bool,
) {
    if settings.tick.is_zero() {
        return;
    }
    let lease = format!("presence:{bay}");
    let node = crate::node::id();
    let mut failing = false;
    let mut known: Known = None;
    let mut last = Computed::default();
    // When this node last renewed the lease. Had it lapsed since (a step
    // slower than the lease), another node may have published meanwhile,
    // so the known states are read again.
    let mut renewed: Option<std::time::Instant> = None;
    while alive() {
        let mut wait = settings.tick;
        let step = async {
            let asked = std::time::Instant::now();
            if !store.lease(&lease, node, settings.lease_ttl()).await? {
                return Ok(Step::NotHolder);
            }
            if renewed.is_none_or(|at| at.elapsed() >= settings.lease_ttl()) {
                known = None;
            }
            renewed = Some(asked);
            publish_once(&*store, &bay, &settings, &mut known, &mut last)
                .await
                .map(Step::Published)
        };
        match step.await {
            Ok(Step::Published(next)) => {
                failing = false;
                if let Some(next) = next {
                    let until = Duration::from_millis(next.saturating_sub(now_ms()));
                    // 1 ms past the deadline, so the change is due when we look.
                    wait = wait.min(until + Duration::from_millis(1));
                }
            }
            Ok(Step::NotHolder) => {
                failing = false;
                known = None;
                renewed = None;
                wait = wait.max(settings.lease_ttl() / 2);
            }
            Err(err) => {
                known = None;
                if std::mem::replace(&mut failing, true) {
                    tracing::debug!(bay = %bay, error = %err, "presence still cannot be published");
                } else {
                    tracing::warn!(bay = %bay, error = %err, "could not publish presence; retrying every tick");
                }
            }
        }
        tokio::time::sleep(wait).await;
    }
    let _ = store.release_lease(&lease, node).await;
}

/// What one publisher step did.
enum Step {
    /// Another node holds the lease.
    NotHolder,
    /// This node holds it and published; the next self-made change, if any.
    Published(Option<u64>),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pid(s: &str) -> ParticipantId {
        ParticipantId(s.into())
    }

    const IDLE: Duration = Duration::from_secs(300);

    #[test]
    fn changes_are_what_differs_sorted_by_participant() {
        use PresenceState::*;
        let map = |pairs: &[(&str, PresenceState)]| -> HashMap<ParticipantId, PresenceState> {
            pairs.iter().map(|(p, s)| (pid(p), *s)).collect()
        };
        let published = map(&[
            ("dora", Online),
            ("ann", Idle),
            ("cy", Online),
            ("eve", Thinking),
        ]);
        let now = map(&[
            ("dora", Online),
            ("ann", Online),
            ("bob", Streaming),
            ("eve", Thinking),
        ]);
        let at = Utc::now();
        let got: Vec<(String, PresenceState, PresenceState)> =
            changes_between(&published, &now, at)
                .into_iter()
                .map(|c| (c.participant.0, c.from, c.to))
                .collect();
        assert_eq!(
            got,
            vec![
                ("ann".into(), Idle, Online),
                ("bob".into(), Offline, Streaming),
                ("cy".into(), Online, Offline),
            ]
        );
        assert!(changes_between(&now, &now, at).is_empty());
    }

    #[test]
    fn each_state_follows_its_rule() {
        let now = 1_000_000;
        let entry = |p: &str| ParticipantPresence::new(pid(p));
        let entries = vec![
            ParticipantPresence {
                session: true,
                active_ms: now - 1_000,
                ..entry("online")
            },
            ParticipantPresence {
                session: true,
                active_ms: now - 300_000,
                ..entry("idle")
            },
            ParticipantPresence {
                session: true,
                thinking_until_ms: now + 4_000,
                active_ms: now,
                ..entry("thinking")
            },
            // Typed through another node than the one holding the session.
            ParticipantPresence {
                thinking_until_ms: now + 2_000,
                ..entry("typed_elsewhere")
            },
            ParticipantPresence {
                session: true,
                active_ms: now,
                ..entry("typed_elsewhere")
            },
            ParticipantPresence {
                linger_until_ms: now + 500,
                active_ms: now,
                ..entry("lingering")
            },
            ParticipantPresence {
                linger_until_ms: now,
                active_ms: now,
                ..entry("gone")
            },
            ParticipantPresence {
                session: true,
                thinking_until_ms: now + 4_000,
                ..entry("drafting")
            },
        ];
        let s = compute(entries.clone(), &[pid("drafting")], now, IDLE);
        assert_eq!(s.of(&pid("online")), PresenceState::Online);
        assert_eq!(s.of(&pid("idle")), PresenceState::Idle);
        assert_eq!(s.of(&pid("thinking")), PresenceState::Thinking);
        assert_eq!(s.of(&pid("typed_elsewhere")), PresenceState::Thinking);
        assert_eq!(s.of(&pid("lingering")), PresenceState::Online);
        assert_eq!(s.of(&pid("gone")), PresenceState::Offline);
        assert_eq!(s.of(&pid("drafting")), PresenceState::Streaming);
        assert_eq!(s.of(&pid("nobody")), PresenceState::Offline);
        assert!(!s.states.contains_key(&pid("gone")));
        // The linger runs out first.
        assert_eq!(s.next_change_ms, Some(now + 500));
    }

    #[test]
    fn a_send_through_one_node_ends_typing_started_through_another() {
        let now = 2_000_000;
        let typed_on_a = ParticipantPresence {
            thinking_until_ms: now + 4_000,
            typed_ms: now - 1_000,
            active_ms: now - 1_000,
            ..ParticipantPresence::new(pid("rex"))
        };
        let session_on_b = ParticipantPresence {
            session: true,
            active_ms: now - 5_000,
            ..ParticipantPresence::new(pid("rex"))
        };
        let typing = [typed_on_a.clone(), session_on_b.clone()];
        let s = compute(typing.to_vec(), &[], now, IDLE);
        assert_eq!(s.of(&pid("rex")), PresenceState::Thinking);
        let sent_on_b = ParticipantPresence {
            sent_ms: now - 500,
            active_ms: now - 500,
            ..session_on_b.clone()
        };
        let s = compute(vec![typed_on_a.clone(), sent_on_b], &[], now, IDLE);
        assert_eq!(s.of(&pid("rex")), PresenceState::Online);
        // A send before the typing started does not end it.
        let sent_before = ParticipantPresence {
            sent_ms: now - 2_000,
            ..session_on_b
        };
        let s = compute(vec![typed_on_a, sent_before], &[], now, IDLE);
        assert_eq!(s.of(&pid("rex")), PresenceState::Thinking);
    }

    #[test]
    fn the_next_change_is_the_soonest_timer() {
        let now = 5_000_000;
        let entries = vec![ParticipantPresence {
            session: true,
            thinking_until_ms: now + 3_000,
            active_ms: now - 1_000,
            ..ParticipantPresence::new(pid("a"))
        }];
        let s = compute(entries.clone(), &[], now, Duration::from_secs(10));
        assert_eq!(s.of(&pid("a")), PresenceState::Thinking);
        assert_eq!(s.next_change_ms, Some(now + 3_000));
        let later = compute(entries.clone(), &[], now + 3_000, Duration::from_secs(10));
        assert_eq!(later.of(&pid("a")), PresenceState::Online);
        assert_eq!(later.next_change_ms, Some(now + 9_000));
        let idle = compute(entries.clone(), &[], now + 9_000, Duration::from_secs(10));
        assert_eq!(idle.of(&pid("a")), PresenceState::Idle);
        assert_eq!(idle.next_change_ms, None);
    }
}

#[cfg(test)]
mod publisher_tests {
    use super::*;
    use crate::model::Bay;
    use crate::store::log::LogEvent;
    use crate::store::memory::{MemoryLimits, MemoryStore};
    use crate::store::Replay;
    use std::sync::atomic::{AtomicBool, Ordering};

    async fn bay_store() -> (Arc<dyn Store>, BayId) {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new(MemoryLimits {
            replay_window: Duration::from_secs(900),
            max_entries: 10_000,
        }));
        let bay = BayId("b".into());
        store
            .create_bay(Bay {
                id: bay.clone(),
                name: "B".into(),
            })
            .await
            .unwrap();
        (store, bay)
    }

    /// Every `Presence` entry of the log, as (participant, state).
    async fn logged(store: &dyn Store, bay: &BayId) -> Vec<(String, PresenceState)> {
        let mut from = store.log_head(bay).await.unwrap();
        from.entry = switchboard_protocol::cursor::EntryId::ZERO;
        let Replay::Records { records, .. } = store.read_log(bay, &from, 1000, None).await.unwrap()
        else {
            panic!("the log is readable from the start");
        };
        records
            .iter()
            .filter_map(|r| match &r.event {
                LogEvent::Presence {
                    participant, state, ..
                } => Some((participant.0.clone(), *state)),
                _ => None,
            })
            .collect()
    }

    async fn eventually_logged(
        store: &dyn Store,
        bay: &BayId,
        want: &[(&str, PresenceState)],
    ) -> Vec<(String, PresenceState)> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let got = logged(store, bay).await;
            if got.len() >= want.len() {
                return got;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "logged {got:?}, waiting for {want:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn steps_with_nothing_new_change_nothing_yet_a_timer_still_fires() {
        use PresenceState::*;
        let (store, bay) = bay_store().await;
        let settings = PresenceSettings {
            interval: Duration::from_secs(1),
            linger: Duration::from_millis(300),
            tick: Duration::from_millis(20),
            idle_after: Duration::from_millis(300),
        };
        let rex = ParticipantPresence {
            session: true,
            active_ms: now_ms(),
            ..ParticipantPresence::new(ParticipantId("rex".into()))
        };
        store
            .set_presence(&bay, "n_a", vec![rex], Duration::from_secs(60))
            .await
            .unwrap();
        let (mut known, mut last) = (None, Computed::default());
        let next = publish_once(&*store, &bay, &settings, &mut known, &mut last)
            .await
            .unwrap();
        assert_eq!(logged(&*store, &bay).await, [("rex".to_owned(), Online)]);
        let idle_at = next.expect("an idle timer runs");
        // Nothing new: the step skips, and names the same timer.
        let again = publish_once(&*store, &bay, &settings, &mut known, &mut last)
            .await
            .unwrap();
        assert_eq!(again, Some(idle_at));
        assert_eq!(logged(&*store, &bay).await.len(), 1);
        // Past the timer, with no record written, the step recomputes.
        tokio::time::sleep(Duration::from_millis(idle_at.saturating_sub(now_ms()) + 20)).await;
        publish_once(&*store, &bay, &settings, &mut known, &mut last)
            .await
            .unwrap();
        assert_eq!(
            logged(&*store, &bay).await,
            [("rex".to_owned(), Online), ("rex".to_owned(), Idle)]
        );
    }

    #[tokio::test]
    async fn overlapping_publishers_log_each_change_exactly_once() {
        let (store, bay) = bay_store().await;
        let settings = PresenceSettings {
            interval: Duration::from_secs(1),
            linger: Duration::from_millis(300),
            tick: Duration::from_millis(20),
            idle_after: Duration::from_secs(300),
        };
        // Two publishers of the same node id: both hold the lease, as two
        // nodes may for a moment during a hand-over.
        let running = Arc::new(AtomicBool::new(true));
        let publishers: Vec<_> = (0..2)
            .map(|_| {
                let running = running.clone();
                tokio::spawn(run_publisher(
                    bay.clone(),
                    store.clone(),
                    settings,
                    move || running.load(Ordering::Relaxed),
                ))
            })
            .collect();
        let now = now_ms();
        let rex = ParticipantPresence {
            session: true,
            active_ms: now,
            ..ParticipantPresence::new(ParticipantId("rex".into()))
        };
        store
            .set_presence(&bay, "n_a", vec![rex.clone()], Duration::from_secs(60))
            .await
            .unwrap();
        let online = [("rex", PresenceState::Online)];
        eventually_logged(&*store, &bay, &online).await;
        // The session ends: a linger, then offline, logged by whichever
        // publisher wakes first at the linger's end.
        let ended = ParticipantPresence {
            session: false,
            linger_until_ms: now_ms() + 300,
            ..rex
        };
        store
            .set_presence(&bay, "n_a", vec![ended], Duration::from_secs(60))
            .await
            .unwrap();
        let both = [
            ("rex", PresenceState::Online),
            ("rex", PresenceState::Offline),
        ];
        eventually_logged(&*store, &bay, &both).await;
        // Many more ticks: nothing else is logged.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let got = logged(&*store, &bay).await;
        assert_eq!(
            got,
            both.iter()
                .map(|(p, s)| (p.to_string(), *s))
                .collect::<Vec<_>>()
        );
        running.store(false, Ordering::Relaxed);
        for p in publishers {
            p.await.unwrap();
        }
        assert!(store.published_presence(&bay).await.unwrap().is_empty());
    }
}
