//! Presence of the Bay's participants as this node knows it: every
//! `presence_interval` the feed records what this node knows of the Bay's
//! participants
//! ([`PresenceStore::set_presence`](crate::store::PresenceStore::set_presence)
//! under [`node::id`](crate::node::id), living
//! [`PresenceSettings::record_ttl`](crate::presence::PresenceSettings::record_ttl)):
//! who holds a `/ws` or `/updates` session here, who lingers after its
//! last one (for `presence_linger`: an `/updates` client polls in a loop
//! with short gaps between requests, and must not flicker offline in
//! them), and the activity the node's REST handlers reported
//! ([`NoteActivity`]: sends, typing, an agent's 👀). A participant's first
//! session here, the end of its last one, a typing indicator, and a send
//! that may end one or an idle spell are written at once; the rest (a
//! send by an active participant only pushes its idle timer back) at the
//! interval. A failed write is logged and retried at the next tick; the
//! feed goes on. The feed also runs the Bay's presence publisher
//! ([`crate::presence::run_publisher`]; one node per Bay publishes at a
//! time) and delivers its `Presence` entries to the participants who
//! share a conversation with the one whose presence changed
//! (docs/architecture.md, "Presence").
//!
//! Separate from the fan-out because none of it touches the cursor: the
//! actor only tells it that sessions start and end, asks it who a
//! `Presence` entry reaches ([`BayFeed::peers_of`]), and asks whether
//! anyone is still shown here before it stops for idleness.

use super::BayFeed;
use crate::session::{SessionHandle, Transport};
use crate::store::{now_ms, ParticipantPresence};
use actix::prelude::*;
use std::collections::{HashMap, HashSet};
use std::time::Duration;
use switchboard_protocol::ids::ParticipantId;
use switchboard_protocol::presence::PresenceState;

/// Sessions that start within this long of each other are written to the
/// presence record together: each write carries the node's whole record
/// (every participant present here), so writing once per session made a
/// connect storm of N sessions cost N² entries.
const PRESENCE_GATHER: Duration = Duration::from_millis(50);

/// The feed's presence bookkeeping (see the module docs).
pub(super) struct Presence {
    /// Unix ms until which each participant whose last session on this
    /// node ended stays present (`presence_linger` after the end). Pruned
    /// at each write.
    linger_until: HashMap<ParticipantId, u64>,
    /// The transports of the sessions whose end started each linger (the
    /// record shows them while it lasts). Pruned with `linger_until`.
    lingering_via: HashMap<ParticipantId, Vec<Transport>>,
    /// Activity the node's handlers reported ([`NoteActivity`]). Pruned
    /// at each write once the typing indicator ended and the activity is
    /// older than `presence_idle_after` (it then changes nothing).
    activity: HashMap<ParticipantId, Activity>,
    /// What the last write issued (in flight or done) said, by
    /// participant; `None` after a failed one. Starts empty: node ids are
    /// new at every start, so the store holds nothing of this node yet,
    /// and a feed without sessions (one a webhook worker keeps) never
    /// writes.
    published: Option<HashMap<ParticipantId, ParticipantPresence>>,
    /// The Bay's published states as the log told this feed
    /// (`Presence` entries), seeded from the store when the feed starts:
    /// whether a participant starting its first session here is present
    /// through another node already (a reconnect within that node's
    /// linger, or a second session), which is no activity. Until the seed
    /// arrives `offline` is kept too, so the older seed cannot overwrite
    /// it; after, a participant absent is `offline`.
    announced: HashMap<ParticipantId, PresenceState>,
    /// The seed was merged into `announced` (or could not be read).
    seeded: bool,
    /// A write is in flight. Writes are serialized, so an older record
    /// never lands after a newer one.
    writing: bool,
    /// A change asks for a write at the end of the current handler.
    due: bool,
    /// Another write is due once the one in flight ends.
    again: bool,
    /// A write is scheduled within [`PRESENCE_GATHER`].
    gathering: bool,
    /// The last write failed (so the next failure logs at debug only).
    failing: bool,
}

/// One participant's activity as this node saw it (Unix ms; 0 = none).
#[derive(Clone, Copy, Debug, Default)]
struct Activity {
    /// Its typing indicator lives until then.
    thinking_until_ms: u64,
    /// When that typing indicator started.
    typed_ms: u64,
    /// Its last send.
    sent_ms: u64,
    /// Its last send, typing, 👀 or first session here.
    active_ms: u64,
}

impl Default for Presence {
    fn default() -> Self {
        Presence {
            linger_until: HashMap::new(),
            lingering_via: HashMap::new(),
            activity: HashMap::new(),
            published: Some(HashMap::new()),
            announced: HashMap::new(),
            seeded: false,
            writing: false,
            due: false,
            again: false,
            gathering: false,
            failing: false,
        }
    }
}

impl BayFeed {
    /// Starts the presence work of a starting feed: the record's write
    /// every `presence_interval`, and the Bay's publisher, which runs as
    /// long as the feed does. A zero interval or tick turns either off.
    pub(super) fn start_presence(&self, ctx: &mut Context<Self>) {
        let presence = self.settings.presence;
        if !presence.tick.is_zero() {
            let (store, bay) = (self.store.clone(), self.bay.clone());
            let seed = async move { store.published_presence(&bay).await };
            ctx.spawn(seed.into_actor(self).map(|res, act, _| {
                let p = &mut act.presence;
                match res {
                    Ok(states) => {
                        for (participant, state) in states {
                            p.announced.entry(participant).or_insert(state);
                        }
                    }
                    Err(err) => {
                        tracing::debug!(bay = %act.bay, error = %err, "could not read the published presence; reconnects through other nodes count as arrivals");
                    }
                }
                p.announced.retain(|_, s| *s != PresenceState::Offline);
                p.seeded = true;
            }));
        }
        if !presence.interval.is_zero() {
            ctx.run_interval(presence.interval, |act, ctx| {
                act.publish_presence(ctx);
            });
        }
        if !presence.tick.is_zero() {
            let feed = ctx.address().downgrade();
            actix_rt::spawn(crate::presence::run_publisher(
                self.bay.clone(),
                self.store.clone(),
                presence,
                move || feed.upgrade().is_some(),
            ));
        }
    }

    /// Whether this node's presence record still shows anyone (holding a
    /// session, lingering, typing), or a write of it is in flight: the feed
    /// then lives on so the record's end gets written. Past activity alone
    /// (a send, a typing that ended) keeps no feed alive: its record then
    /// expires on its own.
    pub(super) fn shows_anyone(&mut self) -> bool {
        if self.presence.writing {
            return true;
        }
        let now = now_ms();
        let holds = |p: &ParticipantPresence| {
            p.session || p.linger_until_ms > now || p.thinking_until_ms > now
        };
        self.record_here().values().any(holds)
            || self
                .presence
                .published
                .as_ref()
                .is_none_or(|published| published.values().any(holds))
    }

    /// Writes the presence record now, in place of a write the handler
    /// asked for at its end (this one covers it).
    pub(super) fn publish_presence_now(&mut self, ctx: &mut Context<Self>) {
        self.presence.due = false;
        self.publish_presence(ctx);
    }

    /// Notes that a session of `participant` ended: after its last one
    /// here it stays present for `presence_linger`, or the session's own
    /// linger (see the module docs), written at the handler's end
    /// ([`BayFeed::publish_if_due`]) so the linger starts now.
    pub(super) fn session_ended(&mut self, participant: &ParticipantId, handle: &SessionHandle) {
        if self.by_participant.contains_key(participant) {
            return;
        }
        if let Some(t) = handle.transport {
            self.presence
                .lingering_via
                .insert(participant.clone(), vec![t]);
        }
        let linger = handle.linger.unwrap_or(self.settings.presence.linger);
        let until = now_ms() + linger.as_millis() as u64;
        let entry = self
            .presence
            .linger_until
            .entry(participant.clone())
            .or_insert(until);
        *entry = (*entry).max(until);
        self.presence.due = true;
    }

    /// Writes the presence record if something asked for a write at once.
    pub(super) fn publish_if_due(&mut self, ctx: &mut Context<Self>) {
        if std::mem::take(&mut self.presence.due) {
            self.publish_presence(ctx);
        }
    }

    /// Notes a published state read from the log (a `Presence` entry).
    pub(super) fn announced(&mut self, participant: &ParticipantId, state: PresenceState) {
        let p = &mut self.presence;
        if state == PresenceState::Offline && p.seeded {
            p.announced.remove(participant);
        } else {
            p.announced.insert(participant.clone(), state);
        }
    }

    /// Notes that a session of `participant` started. Its first one here
    /// counts as activity, unless it is merely a reconnect: within its
    /// linger here, or while it is present through another node (a
    /// reconnect there within that node's linger, or a session there).
    pub(super) fn session_started(
        &mut self,
        participant: &ParticipantId,
        transport: Option<Transport>,
        ctx: &mut Context<Self>,
    ) {
        let now = now_ms();
        let lingering = self
            .presence
            .linger_until
            .remove(participant)
            .is_some_and(|until| until > now);
        let had_session = self
            .by_participant
            .get(participant)
            .is_some_and(|s| s.len() > 1);
        let elsewhere = self
            .presence
            .announced
            .get(participant)
            .is_some_and(|s| *s != PresenceState::Offline);
        if !lingering && !had_session && !elsewhere {
            self.presence
                .activity
                .entry(participant.clone())
                .or_default()
                .active_ms = now;
        }
        // A participant the last write did not show present here (holding
        // a session, or lingering after one) is written within
        // PRESENCE_GATHER, not at the interval. One still lingering (a
        // quick reconnect, an `/updates` poller's next call) changes no
        // state, so the interval's write is soon enough when the linger
        // outlasts it: a Bay's pollers start a session on every call.
        let next_write = now + self.settings.presence.interval.as_millis() as u64;
        let known = self
            .presence
            .published
            .as_ref()
            .and_then(|p| p.get(participant))
            .is_some_and(|e| {
                (e.session || e.linger_until_ms > next_write)
                    // A transport the record does not show yet is news too.
                    && transport.is_none_or(|t| e.transports.contains(&t))
            });
        if !known && !std::mem::replace(&mut self.presence.gathering, true) {
            ctx.run_later(PRESENCE_GATHER, |act, ctx| {
                act.presence.gathering = false;
                act.publish_presence(ctx);
            });
        }
    }

    /// This node's presence record now: an entry for every participant
    /// holding a session here, lingering after one, or with activity
    /// that still matters. Prunes what no longer does.
    fn record_here(&mut self) -> HashMap<ParticipantId, ParticipantPresence> {
        let now = now_ms();
        let idle_ms = self.settings.presence.idle_after.as_millis() as u64;
        self.presence.linger_until.retain(|_, until| *until > now);
        let lingering = &self.presence.linger_until;
        self.presence
            .lingering_via
            .retain(|p, _| lingering.contains_key(p));
        self.presence
            .activity
            .retain(|_, a| a.thinking_until_ms > now || a.active_ms + idle_ms > now);
        // Sized up front: a Bay of 10,000 sessions is rebuilt every
        // interval, and growing the map rehashes it a dozen times.
        let mut out: HashMap<ParticipantId, ParticipantPresence> = HashMap::with_capacity(
            self.by_participant
                .len()
                .max(self.presence.activity.len())
                .max(self.presence.linger_until.len()),
        );
        fn entry<'a>(
            out: &'a mut HashMap<ParticipantId, ParticipantPresence>,
            p: &ParticipantId,
        ) -> &'a mut ParticipantPresence {
            out.entry(p.clone())
                .or_insert_with(|| ParticipantPresence::new(p.clone()))
        }
        for (p, slots) in &self.by_participant {
            let e = entry(&mut out, p);
            e.session = true;
            e.transports = slots
                .iter()
                .filter_map(|&slot| self.sessions.at(slot)?.handle.transport)
                .collect();
            e.transports.sort();
            e.transports.dedup();
        }
        for (p, until) in &self.presence.linger_until {
            let e = entry(&mut out, p);
            e.linger_until_ms = *until;
            if !e.session {
                if let Some(via) = self.presence.lingering_via.get(p) {
                    e.transports.clone_from(via);
                }
            }
        }
        for (p, a) in &self.presence.activity {
            let e = entry(&mut out, p);
            e.thinking_until_ms = a.thinking_until_ms;
            e.typed_ms = a.typed_ms;
            e.sent_ms = a.sent_ms;
            e.active_ms = a.active_ms;
        }
        out
    }

    /// Writes this node's presence record to the store, unless it is
    /// empty and was empty. One write at a time: asked while one is in
    /// flight, it writes again (with the record as it is then) once that
    /// one ends.
    fn publish_presence(&mut self, ctx: &mut Context<Self>) {
        if self.settings.presence.interval.is_zero() {
            return;
        }
        if self.presence.writing {
            self.presence.again = true;
            return;
        }
        let record = self.record_here();
        if record.is_empty()
            && self
                .presence
                .published
                .as_ref()
                .is_some_and(HashMap::is_empty)
        {
            return;
        }
        let list: Vec<ParticipantPresence> = record.values().cloned().collect();
        self.presence.writing = true;
        self.presence.published = Some(record);
        let (store, bay, ttl) = (
            self.store.clone(),
            self.bay.clone(),
            self.settings.presence.record_ttl(),
        );
        let write = async move { store.set_presence(&bay, crate::node::id(), list, ttl).await };
        ctx.spawn(write.into_actor(self).map(|res, act, ctx| {
            act.presence.writing = false;
            match res {
                Ok(()) => act.presence.failing = false,
                Err(err) => {
                    // Retried at the next tick (or the next change).
                    act.presence.published = None;
                    if std::mem::replace(&mut act.presence.failing, true) {
                        tracing::debug!(bay = %act.bay, error = %err, "presence still cannot be recorded");
                    } else {
                        tracing::warn!(bay = %act.bay, error = %err, "could not record presence; retrying every interval");
                    }
                }
            }
            if std::mem::take(&mut act.presence.again) {
                act.publish_presence(ctx);
            }
        }));
    }

    /// The participants who share a conversation of at most
    /// `presence_max_members` members with `participant` as of the feed's
    /// position, itself excluded: who its `Presence` entries reach.
    pub(super) fn peers_of(&self, participant: &ParticipantId) -> HashSet<ParticipantId> {
        let max = self.settings.presence_max_members;
        self.members
            .values()
            .filter(|m| m.len() <= max && m.contains(participant))
            .flatten()
            .filter(|p| *p != participant)
            .cloned()
            .collect()
    }
}

/// Activity a REST handler of this node served for a participant of the
/// feed's Bay: it feeds presence (`thinking`, and `idle` once there has
/// been none for `presence_idle_after`). Written to the node's presence
/// record at once.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct NoteActivity {
    /// Who was active.
    pub participant: ParticipantId,
    /// What it did.
    pub activity: ActivityKind,
}

/// What a [`NoteActivity`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActivityKind {
    /// Sent a message: active now, and its typing indicator ends (as the
    /// conversation actor ends it).
    Sent,
    /// Started a typing indicator (`POST …/typing`, or an agent's 👀
    /// reaction), living `ttl` (protocol §11: 5 s).
    Typing {
        /// The indicator's lifetime (`timing.typing_ttl`).
        ttl: Duration,
    },
}

impl Handler<NoteActivity> for BayFeed {
    type Result = ();

    fn handle(&mut self, msg: NoteActivity, ctx: &mut Self::Context) {
        let now = now_ms();
        let idle_ms = self.settings.presence.idle_after.as_millis() as u64;
        let a = self.presence.activity.entry(msg.participant).or_default();
        let before = *a;
        a.active_ms = now;
        match msg.activity {
            ActivityKind::Sent => {
                a.sent_ms = now;
                a.thinking_until_ms = 0;
            }
            ActivityKind::Typing { ttl } => {
                a.typed_ms = now;
                a.thinking_until_ms = now + ttl.as_millis() as u64;
            }
        }
        // Written at once when it may change a state now: a typing
        // indicator starts or ends, or the participant may show idle. A
        // send by an active participant waits for the next interval (it
        // only pushes the idle timer back), so a steady stream of posts
        // costs the store no write each.
        let urgent = a.thinking_until_ms > now
            || before.thinking_until_ms > now
            || before.active_ms + idle_ms / 2 <= now;
        if urgent {
            self.publish_presence(ctx);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feed::tests::Fixture;
    use crate::feed::CloseAll;
    use crate::presence::PresenceSettings;
    use crate::session::CloseReason;

    #[test]
    fn a_new_participant_is_published_at_once_not_at_the_tick() {
        actix::System::new().block_on(async {
            // A tick far away: only the publish on attach can answer in time.
            let f = Fixture::start(Duration::from_secs(60)).await;
            assert!(f.online().await.is_empty());
            f.attach("s1", "p1").await;
            f.wait_online(&["p1"], Duration::from_secs(2)).await;
            f.attach("s2", "p2").await;
            f.wait_online(&["p1", "p2"], Duration::from_secs(2)).await;
        });
    }

    #[test]
    fn a_poller_stays_online_between_requests_and_drops_after_it_stops() {
        actix::System::new().block_on(async {
            let interval = Duration::from_millis(200);
            let f = Fixture::start(interval).await;
            // Requests of 30 ms with gaps of 50 ms, across several ticks:
            // between two requests it holds no session, yet stays online.
            for i in 0..25 {
                let session = format!("s{i}");
                f.attach(&session, "p1").await;
                tokio::time::sleep(Duration::from_millis(30)).await;
                f.detach(&session).await;
                let gap = tokio::time::Instant::now() + Duration::from_millis(50);
                while tokio::time::Instant::now() < gap {
                    assert_eq!(f.online().await, ["p1"], "in the gap after request {i}");
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            // Gone: off at the second tick after its last session ended.
            let started = std::time::Instant::now();
            f.wait_online(&[], interval * 4).await;
            assert!(
                started.elapsed() >= interval / 2,
                "dropped too soon: {:?}",
                started.elapsed()
            );
        });
    }

    /// The store's entries about `participant`, once they satisfy `ok`.
    async fn wait_entry(
        f: &Fixture,
        participant: &str,
        ok: impl Fn(&ParticipantPresence) -> bool,
    ) -> ParticipantPresence {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        loop {
            let found = f
                .store
                .presence_records(&f.bay)
                .await
                .unwrap()
                .into_iter()
                .find(|e| e.participant.0 == participant && ok(e));
            if let Some(e) = found {
                return e;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no entry of {participant} as expected"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[test]
    fn a_session_end_is_written_at_once_as_a_linger() {
        actix::System::new().block_on(async {
            // Ticks far away: only the writes at once can answer in time.
            let f = Fixture::start_with(PresenceSettings {
                interval: Duration::from_secs(60),
                linger: Duration::from_secs(30),
                tick: Duration::ZERO,
                idle_after: Duration::from_secs(300),
            })
            .await;
            f.attach("s1", "p1").await;
            let e = wait_entry(&f, "p1", |e| e.session).await;
            assert!(e.active_ms > 0, "connecting counts as activity: {e:?}");
            f.detach("s1").await;
            let e = wait_entry(&f, "p1", |e| !e.session).await;
            let left = e.linger_until_ms.saturating_sub(now_ms());
            assert!(
                (20_000..=30_000).contains(&left),
                "lingers for the setting: {e:?}"
            );
            assert_eq!(f.online().await, ["p1"]);
        });
    }

    #[test]
    fn a_reconnect_through_another_node_within_its_linger_is_no_activity() {
        use crate::store::PresenceChange;
        actix::System::new().block_on(async {
            let settings = PresenceSettings {
                interval: Duration::from_secs(60),
                linger: Duration::from_secs(30),
                tick: Duration::from_secs(60),
                idle_after: Duration::from_secs(300),
            };
            // Another node served p1, long idle, and lingers it after its
            // session there ended; the Bay shows it present.
            let f = Fixture::start_prepared(settings, async |store, bay| {
                let p1 = ParticipantId("p1".into());
                let lingering = ParticipantPresence {
                    linger_until_ms: now_ms() + 30_000,
                    active_ms: now_ms() - 200_000,
                    ..ParticipantPresence::new(p1.clone())
                };
                let ttl = Duration::from_secs(60);
                store
                    .set_presence(bay, "n_other", vec![lingering], ttl)
                    .await
                    .unwrap();
                let online = PresenceChange {
                    participant: p1,
                    from: PresenceState::Offline,
                    to: PresenceState::Online,
                    at: chrono::Utc::now(),
                };
                store.publish_presence(bay, &[online]).await.unwrap();
            })
            .await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            f.attach("s1", "p1").await;
            f.attach("s2", "p2").await;
            let here = |e: &ParticipantPresence| e.session && &*e.node == crate::node::id();
            let first = wait_entry(&f, "p2", here).await;
            assert!(
                first.active_ms > 0,
                "a first arrival is activity: {first:?}"
            );
            let back = wait_entry(&f, "p1", here).await;
            assert_eq!(back.active_ms, 0, "a reconnect is not: {back:?}");
        });
    }

    #[test]
    fn the_record_names_each_sessions_transport_and_keeps_it_while_lingering() {
        use crate::session::Transport;
        actix::System::new().block_on(async {
            // Ticks far away: only the writes at once can answer in time.
            let f = Fixture::start_with(PresenceSettings {
                interval: Duration::from_secs(60),
                linger: Duration::from_secs(30),
                tick: Duration::ZERO,
                idle_after: Duration::from_secs(300),
            })
            .await;
            f.attach_via("s1", "p1", Transport::Ws).await;
            let e = wait_entry(&f, "p1", |e| e.session).await;
            assert_eq!(e.transports, [Transport::Ws]);
            assert_eq!(&*e.node, crate::node::id(), "the record's node");
            // A second transport of a participant already written is
            // written at once too, not at the interval.
            f.attach_via("s2", "p1", Transport::Sse).await;
            wait_entry(&f, "p1", |e| {
                e.transports == [Transport::Ws, Transport::Sse]
            })
            .await;
            f.detach("s1").await;
            f.detach("s2").await;
            let e = wait_entry(&f, "p1", |e| !e.session).await;
            assert!(e.linger_until_ms > now_ms(), "{e:?}");
            assert_eq!(e.transports, [Transport::Sse], "the last session's");
        });
    }

    #[test]
    fn typing_is_written_at_once_and_a_send_ends_it() {
        actix::System::new().block_on(async {
            let f = Fixture::start(Duration::from_secs(60)).await;
            let note = |activity| NoteActivity {
                participant: ParticipantId("p1".into()),
                activity,
            };
            f.feed
                .send(note(ActivityKind::Typing {
                    ttl: Duration::from_secs(5),
                }))
                .await
                .unwrap();
            let e = wait_entry(&f, "p1", |e| e.thinking_until_ms > now_ms()).await;
            assert!(!e.session && e.active_ms > 0, "{e:?}");
            f.feed.send(note(ActivityKind::Sent)).await.unwrap();
            wait_entry(&f, "p1", |e| e.thinking_until_ms == 0).await;
            // Typing alone makes nobody present.
            assert!(f.online().await.is_empty());
        });
    }

    #[test]
    fn a_drain_publishes_that_nobody_holds_a_session_here_and_lets_them_linger() {
        actix::System::new().block_on(async {
            // A record refresh far away: only the write on drain counts.
            let f = Fixture::start_with(PresenceSettings {
                interval: Duration::from_secs(60),
                linger: Duration::from_millis(500),
                tick: Duration::ZERO,
                idle_after: Duration::from_secs(300),
            })
            .await;
            f.attach("s1", "p1").await;
            f.wait_online(&["p1"], Duration::from_secs(2)).await;
            f.feed
                .send(CloseAll {
                    reason: CloseReason::Draining,
                })
                .await
                .unwrap();
            let e = wait_entry(&f, "p1", |e| !e.session).await;
            assert!(e.linger_until_ms > 0, "{e:?}");
            f.wait_online(&[], Duration::from_secs(2)).await;
        });
    }
}
