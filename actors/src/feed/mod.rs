//! `BayFeed`: one per Bay with local sessions, per node.
//!
//! The feed tails the Bay's event log in order (a task blocked in
//! [`LogStore::read_log`](crate::store::LogStore::read_log)) and, for each
//! batch, sends every local session one [`Deliver`] holding the records
//! addressed to it, stamped with the batch's `through`. Because a session
//! receives everything through this single mailbox, the `through` it last
//! received is a valid cursor (protocol §11; docs/architecture.md, "The
//! cursor invariant", rule 1). Sessions sent nothing for a whole
//! `watermark_interval` get a [`Watermark`], so idle clients advance too
//! (rule 3); the others advance with their next delivery.
//!
//! Fan-out goes out in chunks of [`FAN_OUT_CHUNK`] sessions, the feed
//! yielding its thread between chunks. Sessions a round has not reached yet
//! keep their records pending, and a later batch adds to them: once posts
//! arrive faster than a round takes, the sessions at the back of a round
//! get several records in one `Deliver` (one write for all of them), so
//! the cost per delivery falls as the load rises instead of a queue
//! building. Between chunks the rest of the node (the next post's request,
//! its conversation actor, the log tail) gets the thread; without the yield
//! a round of N sessions would run to its end before any of them.
//!
//! The feed also keeps the Bay's membership index (conversation → member
//! ids), loaded from the store at start and then kept current by the `Roster`
//! entries of the log itself, so a participant added to a conversation
//! receives exactly the messages logged after the change. (Replays from
//! older cursors rebuild the memberships of their own time from the store's
//! roster changes, see [`crate::replay`], so they need no history here.)
//! Control entries close sessions:
//! `CredentialRevoked` (4001) and `Suspension` (4004), whichever node wrote
//! them; and a second
//! tail reads the Bay's displacement channel (see
//! [`Opening`](crate::store::Opening)): a newer connection of a token, on
//! any node, displaces the older ones (4000).
//!
//! Presence: the feed keeps this node's presence record of the Bay (who
//! holds a session here, who lingers after its last one, the activity
//! reported with [`NoteActivity`]), runs the Bay's presence publisher
//! ([`crate::presence::run_publisher`]) and delivers its `Presence` entries
//! to the participants who share a conversation with the one whose
//! presence changed.
//!
//! This file holds the actor, its log tail, [`Attach`] and the fan-out:
//! everything the cursor rule rests on. The rest is one concern per file:
//! `sessions` (the slot table of attached sessions), `presence`,
//! `control` (roster, revocation and suspension entries), `displacement`
//! (the openings channel), `waiters` ([`WaitForMessage`]), `answers`
//! ([`WaitForAnswer`], held connector calls) and `recent` (the records kept
//! for replays).

mod answers;
mod control;
mod displacement;
mod presence;
mod recent;
mod sessions;
mod waiters;

pub use crate::presence::PRESENCE_TTL_INTERVALS;
pub use answers::WaitForAnswer;
pub use presence::{ActivityKind, NoteActivity};
pub use recent::{RECENT_RECORDS, WARM_WINDOW};
pub use waiters::{WaitForEntry, WaitForMessage};

use crate::presence::PresenceSettings;
use crate::session::{estimate_bytes, Close, CloseReason, Deliver, SessionHandle, Watermark};
use crate::store::log::{LogEvent, LogRecord};
use crate::store::{Replay, Store, StoreError};
use crate::token_cache::TokenCache;
use actix::prelude::*;
use presence::Presence;
use recent::warm_recent;
use sessions::{remove_from, Attachment, Sessions};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchboard_protocol::cursor::{EntryId, LogPosition};
use switchboard_protocol::ids::{BayId, ConversationId, ParticipantId, SessionId, TokenId};
use waiters::Waiter;

/// Sessions one turn of the feed hands records to before it yields (see
/// the module docs): small enough that the next post's request, actor and
/// tail run within a fraction of a round, large enough that a round of
/// 1,000 sessions costs only ~16 extra turns.
pub const FAN_OUT_CHUNK: usize = 16;

/// Sessions detached for falling too far behind (counter).
pub const SLOW_CONSUMERS: &str = "switchboard_slow_consumer_disconnects_total";

/// Tunables of a feed.
#[derive(Clone, Copy, Debug)]
pub struct FeedSettings {
    /// How often sessions that received nothing get a watermark.
    pub watermark_interval: Duration,
    /// Pause after a batch shorter than `batch_max` before the next read,
    /// so entries arriving meanwhile fan out together (`timing.feed_linger`).
    pub linger: Duration,
    /// Most entries read from the log at once.
    pub batch_max: usize,
    /// Records kept for replays (see [`RECENT_RECORDS`]); at most the
    /// store's `replay_max_entries`, so the feed never serves what the
    /// store already trimmed by count.
    pub recent_max: usize,
    /// The replay window: kept records older than this are not served, so
    /// a cursor expires on every node alike (the store trims by age no
    /// earlier than this).
    pub replay_window: Duration,
    /// How long one blocking log read waits before reading again.
    pub block: Duration,
    /// Presence records and the publisher (see the module docs). A zero
    /// `interval` turns records off; a zero `tick` the publisher.
    pub presence: PresenceSettings,
    /// Largest conversation whose members get each other's `Presence`
    /// entries (`limits.presence_max_members`): a change reaches every
    /// room-mate, N² deliveries while a room of N connects.
    pub presence_max_members: usize,
    /// A feed with nothing to serve on this node — no session, no waiter
    /// of `GET …/messages/wait`, no [`WatchHead`] subscriber (a webhook
    /// worker), nobody shown online — for this long stops, releasing its
    /// tails (two blocking store reads, i.e. two dedicated Redis
    /// connections), its index and its recent records; the next use starts
    /// it again (`timing.actor_idle_timeout`). So what a node holds for
    /// feeds depends on the Bays in use, not on every Bay ever touched.
    /// Zero: feeds never stop.
    pub idle_timeout: Duration,
}

/// The feed actor. See the module docs.
pub struct BayFeed {
    bay: BayId,
    store: Arc<dyn Store>,
    settings: FeedSettings,
    /// The node's token cache, told of every `CredentialRevoked` and
    /// `Suspension` the feed applies (the node's credentials tail keeps it
    /// exact for every Bay; this makes the drop no later than the feed's
    /// own closing of the sessions concerned).
    tokens: Arc<TokenCache>,
    /// The position the feed is past; `None` until the index is loaded.
    position: Option<LogPosition>,
    /// The newest records the feed read, oldest first, at most
    /// [`RECENT_RECORDS`]: replays from a cursor they cover are served from
    /// here, shared and already decoded, instead of reading the store.
    /// Invariant: holds every record in (`recent_floor`, `position`].
    recent: VecDeque<Arc<LogRecord>>,
    /// See `recent`; `None` until the index is loaded.
    recent_floor: Option<EntryId>,
    /// Membership index. Invariant: equals the store's membership as of
    /// `position` (modulo the start-up window, see `load`).
    members: HashMap<ConversationId, HashSet<ParticipantId>>,
    /// Whether the displacement channel's tail runs (it survives log resets).
    openings_tailed: bool,
    sessions: Sessions,
    /// Slots (in `sessions`) of each participant's sessions.
    by_participant: HashMap<ParticipantId, Vec<usize>>,
    by_token: HashMap<TokenId, Vec<SessionId>>,
    /// Waits for a reply ([`WaitForMessage`]), by conversation.
    waiters: HashMap<ConversationId, Vec<Waiter>>,
    /// Held connector calls ([`WaitForAnswer`]), by request id.
    answers: HashMap<String, answers::AnswerWaiter>,
    /// Presence publishing; see the module docs.
    presence: Presence,
    /// The last entry the tail handed out, for [`WatchHead`] subscribers.
    head: tokio::sync::watch::Sender<EntryId>,
    /// Slots of sessions with pending records, in the order they got their
    /// first one: the fan-out round in progress (see the module docs). A
    /// slot whose attachment is no longer `queued` is skipped.
    outgoing: VecDeque<usize>,
    /// A turn that sends the next chunk of `outgoing` is scheduled.
    fanning_out: bool,
    /// Since when the feed has had nothing to serve (see
    /// [`FeedSettings::idle_timeout`]); `None` while in use.
    idle_since: Option<Instant>,
    /// Told when the feed stops for idleness, before it stops, so the
    /// directory that handed out its address hands out a new feed from
    /// then on (see [`BayFeed::on_idle_stop`]).
    on_idle_stop: Option<IdleStop>,
}

/// See [`BayFeed::on_idle_stop`].
pub type IdleStop = Arc<dyn Fn(&BayId, &Addr<BayFeed>) + Send + Sync>;

impl BayFeed {
    /// Creates a feed; it loads its index and starts tailing when started.
    pub fn new(
        bay: BayId,
        store: Arc<dyn Store>,
        settings: FeedSettings,
        tokens: Arc<TokenCache>,
    ) -> Self {
        BayFeed {
            bay,
            store,
            settings,
            tokens,
            position: None,
            recent: VecDeque::new(),
            recent_floor: None,
            members: HashMap::new(),
            openings_tailed: false,
            sessions: Sessions::default(),
            by_participant: HashMap::new(),
            by_token: HashMap::new(),
            waiters: HashMap::new(),
            answers: HashMap::new(),
            presence: Presence::default(),
            head: tokio::sync::watch::channel(EntryId::ZERO).0,
            outgoing: VecDeque::new(),
            fanning_out: false,
            idle_since: None,
            on_idle_stop: None,
        }
    }

    /// Calls `forget(bay, address)` when the feed decides to stop for
    /// idleness, before it stops: the registry then drops the address, so
    /// a caller whose message to the stopping feed failed finds a new feed
    /// when it asks again, never the stopping one.
    pub fn on_idle_stop(mut self, forget: IdleStop) -> Self {
        self.on_idle_stop = Some(forget);
        self
    }

    /// Whether the feed serves nobody on this node: no session, no live
    /// waiter, no head subscriber, and nobody left to show online (so no
    /// presence record of this node is left to expire on its own).
    fn serves_nobody(&mut self) -> bool {
        let waiting = self.has_waiters() || self.has_answer_waiters();
        self.sessions.is_empty()
            && !waiting
            && self.head.receiver_count() == 0
            && !self.shows_anyone()
    }

    /// Stops the feed once it has served nobody for `idle_timeout` (see
    /// [`FeedSettings::idle_timeout`]).
    fn stop_if_idle(&mut self, ctx: &mut Context<Self>) {
        if !self.serves_nobody() {
            self.idle_since = None;
            return;
        }
        let since = *self.idle_since.get_or_insert_with(Instant::now);
        if since.elapsed() >= self.settings.idle_timeout {
            tracing::debug!(bay = %self.bay, "bay feed idle; stopping");
            if let Some(forget) = &self.on_idle_stop {
                forget(&self.bay, &ctx.address());
            }
            ctx.stop();
        }
    }

    /// Loads the membership index, then starts the tail. The head is read
    /// before the conversations, so `Roster` entries appended in between are
    /// replayed by the tail; they are full snapshots, so re-applying them is
    /// harmless.
    fn load(&mut self, ctx: &mut Context<Self>) {
        let store = self.store.clone();
        let bay = self.bay.clone();
        let keep = self.settings.recent_max.min(RECENT_RECORDS);
        let window = WARM_WINDOW.min(self.settings.replay_window);
        let fut = async move {
            let openings = store.openings_head(&bay).await?;
            let head = store.log_head(&bay).await?;
            let conversations = store.conversations(&bay).await?;
            let warm = warm_recent(&*store, &bay, &head, keep, window).await;
            Ok::<_, StoreError>((openings, head, conversations, warm))
        };
        ctx.wait(fut.into_actor(self).map(|res, act, ctx| match res {
            Ok((openings, head, conversations, (recent, floor))) => {
                act.tail_openings(openings, ctx);
                act.members = conversations
                    .into_iter()
                    .map(|c| {
                        let ids = c.member_ids().into_iter().collect();
                        (c.id, ids)
                    })
                    .collect();
                act.position = Some(head.clone());
                act.recent = recent;
                act.recent_floor = Some(floor);
                act.start_tail(head, ctx);
            }
            Err(err) => {
                tracing::warn!(bay = %act.bay, error = %err, "feed could not load its index; retrying");
                ctx.run_later(Duration::from_secs(1), |act, ctx| act.load(ctx));
            }
        }));
    }

    fn start_tail(&self, from: LogPosition, ctx: &mut Context<Self>) {
        let addr = ctx.address();
        let store = self.store.clone();
        let bay = self.bay.clone();
        let settings = self.settings;
        actix_rt::spawn(async move {
            let mut pos = from;
            let mut backoff = Duration::from_millis(100);
            loop {
                if !addr.connected() {
                    return;
                }
                match store
                    .read_log(&bay, &pos, settings.batch_max, Some(settings.block))
                    .await
                {
                    Ok(Replay::Records { records, through }) => {
                        backoff = Duration::from_millis(100);
                        if records.is_empty() && through == pos.entry {
                            continue;
                        }
                        pos.entry = through;
                        let short = records.len() < settings.batch_max;
                        if addr.send(Batch { records, through }).await.is_err() {
                            return;
                        }
                        if short && !settings.linger.is_zero() {
                            tokio::time::sleep(settings.linger).await;
                        }
                    }
                    Ok(Replay::Expired | Replay::EpochChanged) => {
                        match store.log_head(&bay).await {
                            Ok(head) => {
                                // The feed reloads its index and starts a new tail.
                                addr.do_send(LogLost { head });
                                return;
                            }
                            Err(err) => {
                                tracing::warn!(bay = %bay, error = %err, "feed lost its log and cannot read the head");
                                tokio::time::sleep(backoff).await;
                            }
                        }
                    }
                    Err(err) => {
                        tracing::warn!(bay = %bay, error = %err, backoff_ms = backoff.as_millis() as u64, "feed tail read failed");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                    }
                }
            }
        });
    }

    fn close_session(&mut self, session: &SessionId, reason: CloseReason) {
        if let Some((slot, mut att)) = self.sessions.remove(session) {
            // What the round has not sent it yet goes before the close.
            if att.queued && reason != CloseReason::TooSlow {
                let through = self.through();
                send_pending(&mut att, through, &mut None);
            }
            att.handle.close.do_send(Close { reason });
            remove_from(&mut self.by_participant, &att.participant, &slot);
            remove_from(&mut self.by_token, &att.token, session);
            self.session_ended(&att.participant, &att.handle);
        }
    }

    /// The conversations `participant` is in as of the feed's position.
    fn conversations_of(&self, participant: &ParticipantId) -> HashSet<ConversationId> {
        self.members
            .iter()
            .filter(|(_, m)| m.contains(participant))
            .map(|(c, _)| c.clone())
            .collect()
    }

    /// Sends a [`Watermark`] of the feed's position to every session sent
    /// nothing since the last tick, so idle clients advance
    /// (docs/architecture.md, "The cursor invariant", rule 3).
    fn send_watermarks(&mut self) {
        let Some(pos) = &self.position else { return };
        let through = pos.entry;
        for att in self.sessions.values_mut() {
            // A session sent records since the last tick is not idle:
            // its next delivery moves it on. In a busy Bay that spares
            // a message (and a wake-up) per session per tick.
            if std::mem::take(&mut att.delivered) {
                continue;
            }
            // A queued session gets its records with a later `through`.
            if att.last_sent < through && !att.queued {
                att.last_sent = through;
                att.handle.watermark.do_send(Watermark { through });
            }
        }
    }
}

impl Actor for BayFeed {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.load(ctx);
        if !self.settings.idle_timeout.is_zero() {
            let every = (self.settings.idle_timeout / 4)
                .clamp(Duration::from_millis(100), Duration::from_secs(5));
            ctx.run_interval(every, |act, ctx| act.stop_if_idle(ctx));
        }
        self.start_presence(ctx);
        ctx.run_interval(self.settings.watermark_interval, |act, _| {
            act.send_watermarks()
        });
    }
}

/// Registers a session with the feed. From the moment this is handled, every
/// record logged after the returned `position` and addressed to the session's
/// participant is pushed to it.
#[derive(Message)]
#[rtype(result = "Result<Attached, AttachError>")]
pub struct Attach {
    /// The connection; it keys the attachment until [`Detach`].
    pub session: SessionId,
    /// Whose conversations the session receives.
    pub participant: ParticipantId,
    /// The token the session authenticated with: one live session per token
    /// (protocol §11), and a `CredentialRevoked` for it closes the session.
    pub token: TokenId,
    /// Id of the session's own [`Opening`](crate::store::Opening) (from
    /// [`DisplacementStore::open_session`](crate::store::DisplacementStore::open_session)).
    pub opened_at: EntryId,
    /// Where the feed pushes records, watermarks and the close.
    pub handle: SessionHandle,
    /// The cursor the session resumes from, if any: when the feed's recent
    /// records cover it, the reply carries its replay.
    pub resume: Option<LogPosition>,
}

/// Reply to [`Attach`].
#[derive(Debug, Clone)]
pub struct Attached {
    /// The feed's position at attach time. Everything after it is pushed;
    /// everything up to it must come from a replay.
    pub position: LogPosition,
    /// The participant's conversations as of `position`. A replay from an
    /// older cursor must not judge older records by these: see
    /// [`crate::replay::memberships_at`].
    pub conversations: HashSet<ConversationId>,
    /// Every record after `Attach::resume` up to `position`, when the
    /// feed's recent records cover that range (same epoch, not older than
    /// what the feed keeps, not ahead of it): the replay, with no store read.
    pub replay: Option<Vec<Arc<LogRecord>>>,
    /// Who shares a conversation with the participant as of `position`
    /// (itself excluded): the replay gives it the `Presence` entries of
    /// these participants.
    pub peers: HashSet<ParticipantId>,
}

/// Why an [`Attach`] was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttachError {
    /// The feed has not loaded its index (the store is unreachable).
    #[error("the bay feed is not ready")]
    NotReady,
    /// A newer connection of the same token already exists. `position`
    /// is the feed's position: a cursor the loser may hand back unchanged.
    #[error("a newer connection of this token exists")]
    Superseded {
        /// The feed's position when the attach was refused.
        position: LogPosition,
    },
}

impl Handler<Attach> for BayFeed {
    type Result = Result<Attached, AttachError>;

    fn handle(&mut self, msg: Attach, ctx: &mut Self::Context) -> Self::Result {
        let position = self.position.clone().ok_or(AttachError::NotReady)?;
        if self.newer_exists(&msg.token, msg.opened_at) {
            return Err(AttachError::Superseded { position });
        }
        self.displace_older(&msg.token, msg.opened_at, &msg.session);
        let conversations = self.conversations_of(&msg.participant);
        let replay = msg
            .resume
            .as_ref()
            .and_then(|r| self.recent_after(r, &position));
        self.by_token
            .entry(msg.token.clone())
            .or_default()
            .push(msg.session.clone());
        let transport = msg.handle.transport;
        let slot = self.sessions.insert(Attachment {
            session: msg.session,
            participant: msg.participant.clone(),
            token: msg.token,
            opened_at: msg.opened_at,
            handle: msg.handle,
            last_sent: position.entry,
            pending: Vec::new(),
            queued: false,
            delivered: false,
        });
        self.by_participant
            .entry(msg.participant.clone())
            .or_default()
            .push(slot);
        self.session_started(&msg.participant, transport, ctx);
        self.publish_if_due(ctx);
        let peers = self.peers_of(&msg.participant);
        Ok(Attached {
            position,
            conversations,
            replay,
            peers,
        })
    }
}

/// Subscribes to the feed's head: the id of the last log entry it has
/// read, moved after each batch. Readers of the store that must not hold a
/// blocking read each (webhook workers) wait on it instead.
#[derive(Message)]
#[rtype(result = "tokio::sync::watch::Receiver<EntryId>")]
pub struct WatchHead;

impl Handler<WatchHead> for BayFeed {
    type Result = MessageResult<WatchHead>;

    fn handle(&mut self, _: WatchHead, _: &mut Self::Context) -> Self::Result {
        MessageResult(self.head.subscribe())
    }
}

/// Unregisters a session (its connection ended).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Detach {
    /// The session to forget; unknown ids are ignored.
    pub session: SessionId,
}

impl Handler<Detach> for BayFeed {
    type Result = ();

    fn handle(&mut self, msg: Detach, ctx: &mut Self::Context) {
        if let Some((slot, att)) = self.sessions.remove(&msg.session) {
            remove_from(&mut self.by_participant, &att.participant, &slot);
            remove_from(&mut self.by_token, &att.token, &msg.session);
            self.session_ended(&att.participant, &att.handle);
        }
        self.publish_if_due(ctx);
    }
}

/// Closes every session with `reason` (graceful drain), and records at
/// once that nobody holds a session on this node any more: its
/// participants linger (`presence_linger`), so clients that reconnect to
/// another node within it change nothing, and the others go offline.
#[derive(Message)]
#[rtype(result = "()")]
pub struct CloseAll {
    /// Passed to every session's [`Close`].
    pub reason: CloseReason,
}

impl Handler<CloseAll> for BayFeed {
    type Result = ();

    fn handle(&mut self, msg: CloseAll, ctx: &mut Self::Context) {
        let all: Vec<SessionId> = self.sessions.keys().cloned().collect();
        for s in all {
            self.close_session(&s, msg.reason);
        }
        self.publish_presence_now(ctx);
    }
}

/// Entries read by the tail task, in log order.
#[derive(Message)]
#[rtype(result = "()")]
struct Batch {
    records: Vec<Arc<LogRecord>>,
    through: EntryId,
}

impl Handler<Batch> for BayFeed {
    type Result = ();

    fn handle(&mut self, msg: Batch, ctx: &mut Self::Context) {
        // Each record is staged in the `pending` of every session it
        // reaches (found by slot); sessions not yet in the round join it.
        for record in &msg.records {
            match &record.event {
                LogEvent::Message { conversation, .. } | LogEvent::Change { conversation, .. } => {
                    if !self.waiters.is_empty() {
                        self.wake_waiters(record);
                    }
                    let Some(members) = self.members.get(&conversation.id) else {
                        continue;
                    };
                    for participant in members {
                        for &slot in self.by_participant.get(participant).into_iter().flatten() {
                            stage(&mut self.sessions, &mut self.outgoing, slot, record);
                        }
                    }
                }
                LogEvent::SummaryRequested { summarizer: to, .. }
                | LogEvent::ConnectorRequest { connector: to, .. } => {
                    for &slot in self.by_participant.get(to).into_iter().flatten() {
                        stage(&mut self.sessions, &mut self.outgoing, slot, record);
                    }
                }
                LogEvent::ConnectorAnswered { .. } => self.wake_answer(record),
                LogEvent::Presence {
                    participant, state, ..
                } => {
                    self.announced(participant, *state);
                    for peer in self.peers_of(participant) {
                        for &slot in self.by_participant.get(&peer).into_iter().flatten() {
                            stage(&mut self.sessions, &mut self.outgoing, slot, record);
                        }
                    }
                }
                _ => self.apply_control(record),
            }
        }
        self.keep_recent(&msg.records);
        if let Some(pos) = &mut self.position {
            pos.entry = msg.through;
        }
        self.head.send_replace(msg.through);
        if !self.fanning_out {
            self.fan_out(ctx);
        }
        self.publish_if_due(ctx);
    }
}

impl BayFeed {
    /// The position deliveries name: everything up to it addressed to a
    /// session is in its `Deliver` or was sent before.
    fn through(&self) -> EntryId {
        self.position.as_ref().map_or(EntryId::ZERO, |p| p.entry)
    }

    /// Sends the next [`FAN_OUT_CHUNK`] sessions of the round their pending
    /// records; schedules the next chunk, after a yield, while any remain.
    fn fan_out(&mut self, ctx: &mut Context<Self>) {
        let through = self.through();
        // Sessions given the same records (all members of one room, in the
        // common case) share one list and one size estimate.
        let mut shared: Option<(Arc<[Arc<LogRecord>]>, usize)> = None;
        let mut too_slow = Vec::new();
        let mut sent = 0;
        while sent < FAN_OUT_CHUNK {
            let Some(slot) = self.outgoing.pop_front() else {
                break;
            };
            let Some(att) = self.sessions.at_mut(slot).filter(|a| a.queued) else {
                continue;
            };
            sent += 1;
            if !send_pending(att, through, &mut shared) {
                too_slow.push(att.session.clone());
            }
        }
        for session in too_slow {
            tracing::info!(bay = %self.bay, session = %session, "detaching a session too slow to keep up");
            metrics::counter!(SLOW_CONSUMERS).increment(1);
            self.close_session(&session, CloseReason::TooSlow);
        }
        self.fanning_out = !self.outgoing.is_empty();
        if self.fanning_out {
            ctx.spawn(
                actix::fut::wrap_future::<_, Self>(tokio::task::yield_now())
                    .map(|(), act, ctx| act.fan_out(ctx)),
            );
        }
    }
}

/// Most record slots a session's `pending` keeps between rounds.
const PENDING_KEPT: usize = 16;

/// Adds `record` to the pending records of the session in `slot`, listing
/// the session in `outgoing` if the round does not hold it yet.
fn stage(
    sessions: &mut Sessions,
    outgoing: &mut VecDeque<usize>,
    slot: usize,
    record: &Arc<LogRecord>,
) {
    if let Some(att) = sessions.at_mut(slot) {
        if !att.queued {
            att.queued = true;
            outgoing.push_back(slot);
        }
        att.pending.push(record.clone());
    }
}

/// Sends `att` its pending records as one [`Deliver`] stamped `through`
/// (sharing `shared`'s list when the records are the same). Returns false
/// when its backlog refused them: the session is too slow.
fn send_pending(
    att: &mut Attachment,
    through: EntryId,
    shared: &mut Option<(Arc<[Arc<LogRecord>]>, usize)>,
) -> bool {
    att.queued = false;
    let (records, bytes) = match shared {
        Some((records, bytes)) if same_records(records, &att.pending) => (records.clone(), *bytes),
        _ => {
            let records: Arc<[Arc<LogRecord>]> = att.pending.as_slice().into();
            let bytes = estimate_bytes(&records);
            *shared = Some((records.clone(), bytes));
            (records, bytes)
        }
    };
    att.pending.clear();
    if att.pending.capacity() > PENDING_KEPT {
        att.pending = Vec::new();
    }
    if !att.handle.backlog.charge(bytes) {
        return false;
    }
    att.last_sent = through;
    att.delivered = true;
    att.handle.deliver.do_send(Deliver {
        records,
        through,
        bytes,
    });
    true
}

/// Whether `a` and `b` hold the same records (by identity), in order.
fn same_records(a: &[Arc<LogRecord>], b: &[Arc<LogRecord>]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| Arc::ptr_eq(x, y))
}

/// The tail found its position gone (log lost or trimmed past it).
#[derive(Message)]
#[rtype(result = "()")]
struct LogLost {
    head: LogPosition,
}

impl Handler<LogLost> for BayFeed {
    type Result = ();

    fn handle(&mut self, msg: LogLost, ctx: &mut Self::Context) {
        tracing::warn!(bay = %self.bay, epoch = %msg.head.epoch, "bay log was lost; resetting every session");
        let all: Vec<SessionId> = self.sessions.keys().cloned().collect();
        for s in all {
            self.close_session(&s, CloseReason::LogReset);
        }
        self.position = None;
        self.forget_recent();
        self.publish_if_due(ctx);
        // The index may be stale too: reload it from the new head.
        self.load(ctx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Bay;
    use crate::session::Backlog;
    use crate::store::memory::{MemoryLimits, MemoryStore};

    /// A session that ignores what it is sent.
    struct Sink;

    impl Actor for Sink {
        type Context = Context<Self>;
    }

    impl Handler<Deliver> for Sink {
        type Result = ();
        fn handle(&mut self, _: Deliver, _: &mut Self::Context) {}
    }

    impl Handler<Watermark> for Sink {
        type Result = ();
        fn handle(&mut self, _: Watermark, _: &mut Self::Context) {}
    }

    impl Handler<Close> for Sink {
        type Result = ();
        fn handle(&mut self, _: Close, _: &mut Self::Context) {}
    }

    /// A feed of Bay `b` on a memory store, with a session sink.
    pub(super) struct Fixture {
        pub(super) store: Arc<dyn Store>,
        pub(super) bay: BayId,
        pub(super) feed: Addr<BayFeed>,
        sink: Addr<Sink>,
    }

    impl Fixture {
        pub(super) async fn start(presence_interval: Duration) -> Fixture {
            Self::start_with(PresenceSettings {
                interval: presence_interval,
                linger: presence_interval,
                tick: Duration::ZERO,
                idle_after: Duration::from_secs(300),
            })
            .await
        }

        pub(super) async fn start_with(presence: PresenceSettings) -> Fixture {
            Self::start_prepared(presence, async |_, _| {}).await
        }

        /// The same, `prepare` run on the store (its Bay created) before
        /// the feed starts.
        pub(super) async fn start_prepared(
            presence: PresenceSettings,
            prepare: impl AsyncFnOnce(&dyn Store, &BayId),
        ) -> Fixture {
            let store: Arc<dyn Store> = Arc::new(MemoryStore::new(MemoryLimits {
                replay_window: Duration::from_secs(900),
                max_entries: 1000,
            }));
            let bay = BayId("b".into());
            store
                .create_bay(Bay {
                    id: bay.clone(),
                    name: "B".into(),
                })
                .await
                .unwrap();
            prepare(&*store, &bay).await;
            let settings = FeedSettings {
                watermark_interval: Duration::from_secs(60),
                linger: Duration::ZERO,
                batch_max: 64,
                recent_max: 100,
                replay_window: Duration::from_secs(900),
                block: Duration::from_millis(100),
                presence,
                presence_max_members: 100,
                idle_timeout: Duration::ZERO,
            };
            let feed = BayFeed::new(bay.clone(), store.clone(), settings, Arc::default()).start();
            Fixture {
                store,
                bay,
                feed,
                sink: Sink.start(),
            }
        }

        /// Attaches session `session` (its own token) of `participant`.
        pub(super) async fn attach(&self, session: &str, participant: &str) {
            let handle = SessionHandle::of(&self.sink, Backlog::bounded(1 << 20));
            self.attach_with(session, participant, handle).await
        }

        /// The same, the session riding on `transport`.
        pub(super) async fn attach_via(
            &self,
            session: &str,
            participant: &str,
            transport: crate::session::Transport,
        ) {
            let handle = SessionHandle::of(&self.sink, Backlog::bounded(1 << 20)).via(transport);
            self.attach_with(session, participant, handle).await
        }

        /// The same, with the session's own handle.
        pub(super) async fn attach_with(
            &self,
            session: &str,
            participant: &str,
            handle: SessionHandle,
        ) {
            loop {
                let res = self
                    .feed
                    .send(Attach {
                        session: SessionId(session.into()),
                        participant: ParticipantId(participant.into()),
                        token: TokenId(session.into()),
                        opened_at: EntryId::ZERO,
                        handle: handle.clone(),
                        resume: None,
                    })
                    .await
                    .unwrap();
                match res {
                    Ok(_) => return,
                    Err(AttachError::NotReady) => {
                        tokio::time::sleep(Duration::from_millis(10)).await
                    }
                    Err(e) => panic!("attach: {e}"),
                }
            }
        }

        pub(super) async fn detach(&self, session: &str) {
            self.feed
                .send(Detach {
                    session: SessionId(session.into()),
                })
                .await
                .unwrap();
        }

        pub(super) async fn online(&self) -> Vec<String> {
            let online = self.store.online(&self.bay).await.unwrap();
            online.into_iter().map(|p| p.0).collect()
        }

        /// Waits up to `patience` for the store to say exactly `want`.
        pub(super) async fn wait_online(&self, want: &[&str], patience: Duration) {
            let deadline = tokio::time::Instant::now() + patience;
            loop {
                let now = self.online().await;
                if now == want {
                    return;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "online is {now:?}, not {want:?}, after {patience:?}"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }

    /// Each `Deliver` a session got: its records' ids and its `through`.
    type Deliveries = Arc<std::sync::Mutex<Vec<(Vec<EntryId>, EntryId)>>>;

    /// A session that records every `Deliver`.
    struct Recorder(Deliveries);

    impl Actor for Recorder {
        type Context = Context<Self>;
    }

    impl Handler<Deliver> for Recorder {
        type Result = ();
        fn handle(&mut self, msg: Deliver, _: &mut Self::Context) {
            let ids = msg.records.iter().map(|r| r.id).collect();
            self.0.lock().unwrap().push((ids, msg.through));
        }
    }

    impl Handler<Watermark> for Recorder {
        type Result = ();
        fn handle(&mut self, _: Watermark, _: &mut Self::Context) {}
    }

    impl Handler<Close> for Recorder {
        type Result = ();
        fn handle(&mut self, _: Close, _: &mut Self::Context) {}
    }

    fn presence_of(id: u64, participant: &str) -> Arc<LogRecord> {
        Arc::new(LogRecord::new(
            EntryId::new(id, 0),
            LogEvent::Presence {
                participant: ParticipantId(participant.into()),
                state: switchboard_protocol::presence::PresenceState::Online,
                at: chrono::Utc::now(),
            },
        ))
    }

    #[actix_rt::test]
    async fn a_batch_arriving_mid_round_joins_the_records_of_sessions_not_reached_yet() {
        let f = Fixture::start(Duration::ZERO).await;
        let members: Vec<ParticipantId> = (0..40).map(|i| ParticipantId(format!("p{i}"))).collect();
        let roster = Arc::new(LogRecord::new(
            EntryId::new(1, 0),
            LogEvent::Roster {
                conversation: switchboard_protocol::event::ConversationRef {
                    id: ConversationId("c".into()),
                    kind: switchboard_protocol::model::ConversationType::Group,
                    title: None,
                },
                members: members.clone(),
            },
        ));
        f.feed.do_send(Batch {
            records: vec![roster],
            through: EntryId::new(1, 0),
        });
        let mut logs = Vec::new();
        for (i, p) in members.iter().enumerate().skip(1) {
            let log = Deliveries::default();
            let recorder = Recorder(log.clone()).start();
            let handle = SessionHandle::of(&recorder, Backlog::bounded(1 << 20));
            f.attach_with(&format!("s{i}"), &p.0, handle).await;
            logs.push(log);
        }
        // Two batches in the mailbox at once: the second is handled while
        // the first round has reached only its first chunk of 39 peers.
        for id in [2, 3] {
            f.feed.do_send(Batch {
                records: vec![presence_of(id, "p0")],
                through: EntryId::new(id, 0),
            });
        }
        let done = || {
            logs.iter()
                .all(|l| l.lock().unwrap().last().map(|(_, t)| *t) == Some(EntryId::new(3, 0)))
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !done() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "not every session got the second batch"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let mut merged = 0;
        for log in &logs {
            let log = log.lock().unwrap();
            let ids: Vec<EntryId> = log.iter().flat_map(|(ids, _)| ids.clone()).collect();
            assert_eq!(
                ids,
                [EntryId::new(2, 0), EntryId::new(3, 0)],
                "each once, in order"
            );
            let throughs: Vec<EntryId> = log.iter().map(|(_, t)| *t).collect();
            assert!(throughs.windows(2).all(|w| w[0] < w[1]), "{throughs:?}");
            if log.len() == 1 {
                merged += 1;
            }
        }
        assert_eq!(
            merged,
            39 - FAN_OUT_CHUNK,
            "the sessions past the first chunk get both records in one delivery"
        );
    }
}
