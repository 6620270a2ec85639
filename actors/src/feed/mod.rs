//! `BayFeed`: one per Bay with local sessions, per node.
//!
//! The feed tails the Bay's event log in order (a task blocked in
//! [`Store::read_log`]) and, for each batch, sends every local session one
//! [`Deliver`] holding the records addressed to it, stamped with the batch's
//! `through`. Because a session receives everything through this single
//! mailbox, the `through` it last received is a valid cursor (protocol §11,
//! DESIGN "cursor invariant" rule 1). Sessions sent nothing for a whole
//! `watermark_interval` get a [`Watermark`], so idle clients advance too
//! (rule 2); the others advance with their next delivery.
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
//! `CredentialRevoked` (4001), whichever node wrote them; and a second
//! tail reads the Bay's displacement channel (see [`Opening`]): a newer
//! connection of a token, on any node, displaces the older ones (4000).
//!
//! Presence: every `presence_interval` the feed records what this node
//! knows of the Bay's participants ([`Store::set_presence`] under
//! [`node::id`](crate::node::id), living
//! [`PresenceSettings::record_ttl`]): who holds a `/ws` or `/updates`
//! session here, who lingers after its last one (for
//! `presence_linger`: an `/updates` client polls in a loop with short
//! gaps between requests, and must not flicker offline in them), and the
//! activity the node's REST handlers reported ([`NoteActivity`]: sends,
//! typing, an agent's 👀). A participant's first session here, the end
//! of its last one, a typing indicator, and a send that may end one or an
//! idle spell are written at once; the rest (a send by an active
//! participant only pushes its idle timer back) at the interval. A failed write is logged and retried at the next tick;
//! the feed goes on. The feed also runs the Bay's presence publisher
//! ([`crate::presence::run_publisher`]; one node per Bay publishes at a
//! time) and delivers its `Presence` entries to the participants who
//! share a conversation with the one whose presence changed.

use crate::presence::PresenceSettings;
use crate::session::{estimate_bytes, Close, CloseReason, Deliver, SessionHandle, Watermark};
use crate::store::log::{Change, LogEvent, LogRecord};
use crate::store::{now_ms, Opening, ParticipantPresence, Replay, Store, StoreError};
use crate::token_cache::TokenCache;
use actix::prelude::*;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchboard_protocol::cursor::{EntryId, LogPosition};
use switchboard_protocol::ids::{BayId, ConversationId, ParticipantId, SessionId, TokenId};

/// Sessions one turn of the feed hands records to before it yields (see
/// the module docs): small enough that the next post's request, actor and
/// tail run within a fraction of a round, large enough that a round of
/// 1,000 sessions costs only ~16 extra turns.
pub const FAN_OUT_CHUNK: usize = 16;

/// Most records a feed keeps for replays (see `BayFeed::recent`): at about
/// 1 KiB each, up to ~10 MiB per Bay per node; a resume storm after a short
/// outage is then served from memory on every node.
pub const RECENT_RECORDS: usize = 10_000;

/// How far back a starting feed reads the log into its recent records
/// (capped by the replay window and `recent_max`). A node that restarts
/// then meets its reconnect storm with one shared read: every client that
/// was connected until the restart resumes from memory instead of each
/// reading the Bay's log from Redis (10,000 clients × the records since
/// their cursor), which is what saturates Redis and stretches the storm.
pub const WARM_WINDOW: Duration = Duration::from_secs(120);

/// Records per read while warming (see [`WARM_WINDOW`]).
const WARM_PAGE: usize = 1_000;

/// Sessions that start within this long of each other are written to the
/// presence record together: each write carries the node's whole record
/// (every participant present here), so writing once per session made a
/// connect storm of N sessions cost N² entries.
const PRESENCE_GATHER: Duration = Duration::from_millis(50);

/// Sessions detached for falling too far behind (counter).
pub const SLOW_CONSUMERS: &str = "switchboard_slow_consumer_disconnects_total";

pub use crate::presence::PRESENCE_TTL_INTERVALS;

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
    /// The node's token cache: live for this Bay while the tail reads, and
    /// told of every `CredentialRevoked`.
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

/// The feed's presence bookkeeping (see the module docs).
struct Presence {
    /// Unix ms until which each participant whose last session on this
    /// node ended stays present (`presence_linger` after the end). Pruned
    /// at each write.
    linger_until: HashMap<ParticipantId, u64>,
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
            activity: HashMap::new(),
            published: Some(HashMap::new()),
            writing: false,
            due: false,
            again: false,
            gathering: false,
            failing: false,
        }
    }
}

/// One [`WaitForMessage`] still waiting.
struct Waiter {
    excluding: ParticipantId,
    reply: tokio::sync::oneshot::Sender<Arc<LogRecord>>,
}

struct Attachment {
    session: SessionId,
    participant: ParticipantId,
    token: TokenId,
    /// Id of this session's [`Opening`]: the newest one per token wins.
    opened_at: EntryId,
    handle: SessionHandle,
    /// The last `through` this session was sent.
    last_sent: EntryId,
    /// Records addressed to this session not yet sent to it; empty
    /// between rounds (its capacity is reused).
    pending: Vec<Arc<LogRecord>>,
    /// Listed in the feed's `outgoing` (so `pending` goes out).
    queued: bool,
    /// Sent a `Deliver` since the last watermark tick.
    delivered: bool,
}

/// The attached sessions, each in a slot: the fan-out reaches a session
/// by its slot (listed in `by_participant`), so a delivery costs no
/// session-id hashing or cloning.
#[derive(Default)]
struct Sessions {
    slots: Vec<Option<Attachment>>,
    /// Free slots, reused first.
    free: Vec<usize>,
    /// Invariant: `ids[id] = i` exactly when `slots[i]` holds `id`'s attachment.
    ids: HashMap<SessionId, usize>,
}

impl Sessions {
    /// Stores `att` (keyed by `att.session`); returns its slot.
    fn insert(&mut self, att: Attachment) -> usize {
        let id = att.session.clone();
        self.remove(&id);
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot] = Some(att);
                slot
            }
            None => {
                self.slots.push(Some(att));
                self.slots.len() - 1
            }
        };
        self.ids.insert(id, slot);
        slot
    }

    fn get(&self, id: &SessionId) -> Option<&Attachment> {
        self.ids.get(id).and_then(|&i| self.slots[i].as_ref())
    }

    /// Removes `id`'s attachment; returns it with the slot it held.
    fn remove(&mut self, id: &SessionId) -> Option<(usize, Attachment)> {
        let slot = self.ids.remove(id)?;
        let att = self.slots[slot].take()?;
        self.free.push(slot);
        Some((slot, att))
    }

    fn at_mut(&mut self, slot: usize) -> Option<&mut Attachment> {
        self.slots.get_mut(slot).and_then(Option::as_mut)
    }

    fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    fn keys(&self) -> impl Iterator<Item = &SessionId> {
        self.ids.keys()
    }

    fn values_mut(&mut self) -> impl Iterator<Item = &mut Attachment> {
        self.slots.iter_mut().flatten()
    }
}

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
        self.waiters.retain(|_, waiting| {
            waiting.retain(|w| !w.reply.is_closed());
            !waiting.is_empty()
        });
        self.sessions.is_empty()
            && self.waiters.is_empty()
            && self.head.receiver_count() == 0
            && !self.presence.writing
            && {
                // Past activity alone (a send, a typing that ended) keeps
                // no feed alive: its record then expires on its own.
                let now = now_ms();
                let holds = |p: &ParticipantPresence| {
                    p.session || p.linger_until_ms > now || p.thinking_until_ms > now
                };
                !self.record_here().values().any(holds)
                    && self
                        .presence
                        .published
                        .as_ref()
                        .is_some_and(|published| !published.values().any(holds))
            }
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

    /// Notes that a session of `participant` ended: after its last one
    /// here it stays present for `presence_linger`, or the session's own
    /// linger (see the module docs), written at the handler's end
    /// ([`BayFeed::publish_if_due`]) so the linger starts now.
    fn session_ended(&mut self, participant: &ParticipantId, linger: Option<Duration>) {
        if self.by_participant.contains_key(participant) {
            return;
        }
        let linger = linger.unwrap_or(self.settings.presence.linger);
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
    fn publish_if_due(&mut self, ctx: &mut Context<Self>) {
        if std::mem::take(&mut self.presence.due) {
            self.publish_presence(ctx);
        }
    }

    /// Notes that a session of `participant` started. Its first one here
    /// (not merely a reconnect within the linger) counts as activity.
    fn session_started(&mut self, participant: &ParticipantId, ctx: &mut Context<Self>) {
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
        if !lingering && !had_session {
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
            .is_some_and(|e| e.session || e.linger_until_ms > next_write);
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
        self.presence
            .activity
            .retain(|_, a| a.thinking_until_ms > now || a.active_ms + idle_ms > now);
        let mut out: HashMap<ParticipantId, ParticipantPresence> = HashMap::new();
        fn entry<'a>(
            out: &'a mut HashMap<ParticipantId, ParticipantPresence>,
            p: &ParticipantId,
        ) -> &'a mut ParticipantPresence {
            out.entry(p.clone())
                .or_insert_with(|| ParticipantPresence::new(p.clone()))
        }
        for p in self.by_participant.keys() {
            entry(&mut out, p).session = true;
        }
        for (p, until) in &self.presence.linger_until {
            entry(&mut out, p).linger_until_ms = *until;
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
        let mut list: Vec<ParticipantPresence> = record.values().cloned().collect();
        list.sort_by(|a, b| a.participant.cmp(&b.participant));
        self.presence.writing = true;
        self.presence.published = Some(record);
        let (store, bay, ttl) = (
            self.store.clone(),
            self.bay.clone(),
            self.settings.presence.record_ttl(),
        );
        let write = async move {
            store
                .set_presence(&bay, crate::node::id(), &list, ttl)
                .await
        };
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
    fn peers_of(&self, participant: &ParticipantId) -> HashSet<ParticipantId> {
        let max = self.settings.presence_max_members;
        self.members
            .values()
            .filter(|m| m.len() <= max && m.contains(participant))
            .flatten()
            .filter(|p| *p != participant)
            .cloned()
            .collect()
    }

    /// Hands `record`, a message, to the waiters of its conversation that
    /// did not send it.
    fn wake_waiters(&mut self, record: &Arc<LogRecord>) {
        // A message is a reply once it is final: posted whole, or a draft
        // completed (an open draft wakes nobody).
        let (conversation, message) = match &record.event {
            LogEvent::Message {
                conversation,
                message,
            } if !message.is_streaming() => (conversation, message),
            LogEvent::Change {
                conversation,
                change: Change::Completed { message },
            } => (conversation, message),
            _ => return,
        };
        let Some(waiting) = self.waiters.remove(&conversation.id) else {
            return;
        };
        let still: Vec<Waiter> = waiting
            .into_iter()
            .filter_map(|w| {
                if w.excluding == message.sender.id {
                    return (!w.reply.is_closed()).then_some(w);
                }
                let _ = w.reply.send(record.clone());
                None
            })
            .collect();
        if !still.is_empty() {
            self.waiters.insert(conversation.id.clone(), still);
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
                if !act.openings_tailed {
                    act.openings_tailed = true;
                    act.start_openings_tail(openings, ctx);
                }
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
                act.tokens.set_live(&act.bay, true);
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
        let tokens = self.tokens.clone();
        actix_rt::spawn(async move {
            let mut pos = from;
            let mut backoff = Duration::from_millis(100);
            let mut failing = false;
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
                        // Live again through the actor only: a stopped
                        // feed (whose read was still blocked) must never
                        // mark its Bay live.
                        if std::mem::take(&mut failing) && addr.send(TailReads).await.is_err() {
                            return;
                        }
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
                        // Revocations may be logged unseen meanwhile.
                        tokens.set_live(&bay, false);
                        failing = true;
                        tracing::warn!(bay = %bay, error = %err, backoff_ms = backoff.as_millis() as u64, "feed tail read failed");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                    }
                }
            }
        });
    }

    /// Tails the displacement channel: each opening displaces the older
    /// connections of its token on this node, whichever node it opened on.
    fn start_openings_tail(&self, from: EntryId, ctx: &mut Context<Self>) {
        let addr = ctx.address();
        let store = self.store.clone();
        let bay = self.bay.clone();
        let settings = self.settings;
        actix_rt::spawn(async move {
            let mut after = from;
            let mut backoff = Duration::from_millis(100);
            while addr.connected() {
                match store
                    .read_openings(&bay, after, settings.batch_max, Some(settings.block))
                    .await
                {
                    Ok(openings) => {
                        backoff = Duration::from_millis(100);
                        let Some(last) = openings.last() else {
                            continue;
                        };
                        after = last.id;
                        if addr.send(Openings { openings }).await.is_err() {
                            return;
                        }
                    }
                    Err(err) => {
                        tracing::warn!(bay = %bay, error = %err, backoff_ms = backoff.as_millis() as u64, "feed openings read failed");
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
            self.session_ended(&att.participant, att.handle.linger);
        }
    }

    /// Closes every session of `token` opened before `opened_at`.
    fn displace_older(&mut self, token: &TokenId, opened_at: EntryId, keep: &SessionId) {
        let older: Vec<SessionId> = self
            .by_token
            .get(token)
            .into_iter()
            .flatten()
            .filter(|s| *s != keep)
            .filter(|s| {
                self.sessions
                    .get(s)
                    .is_some_and(|a| a.opened_at < opened_at)
            })
            .cloned()
            .collect();
        for s in older {
            self.close_session(&s, CloseReason::Displaced);
        }
    }

    /// The records after `cursor` up to `position` from the recent ones, or
    /// `None` when they do not cover that range.
    fn recent_after(
        &self,
        cursor: &LogPosition,
        position: &LogPosition,
    ) -> Option<Vec<Arc<LogRecord>>> {
        let mut floor = self.recent_floor?;
        // Records older than the replay window count as gone, as in the store.
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let min_ms = now_ms.saturating_sub(self.settings.replay_window.as_millis() as u64);
        let aged = self.recent.partition_point(|r| r.id.ms < min_ms);
        if let Some(newest_aged) = aged.checked_sub(1).map(|i| self.recent[i].id) {
            floor = floor.max(newest_aged);
        }
        if cursor.epoch != position.epoch || cursor.entry < floor || cursor.entry > position.entry {
            return None;
        }
        let start = self.recent.partition_point(|r| r.id <= cursor.entry);
        Some(self.recent.iter().skip(start).cloned().collect())
    }

    /// The conversations `participant` is in as of the feed's position.
    fn conversations_of(&self, participant: &ParticipantId) -> HashSet<ConversationId> {
        self.members
            .iter()
            .filter(|(_, m)| m.contains(participant))
            .map(|(c, _)| c.clone())
            .collect()
    }

    fn apply_control(&mut self, record: &LogRecord) {
        match &record.event {
            LogEvent::Roster {
                conversation,
                members,
            } => {
                self.members
                    .insert(conversation.id.clone(), members.iter().cloned().collect());
            }
            LogEvent::CredentialRevoked { token, participant } => {
                self.tokens.revoke(&self.bay, participant);
                let revoked: Vec<SessionId> = self.by_token.get(token).cloned().unwrap_or_default();
                for s in revoked {
                    self.close_session(&s, CloseReason::Revoked);
                }
            }
            LogEvent::Message { .. } | LogEvent::Change { .. } | LogEvent::Presence { .. } => {}
        }
    }
}

fn remove_from<K: std::hash::Hash + Eq, V: PartialEq>(
    map: &mut HashMap<K, Vec<V>>,
    key: &K,
    session: &V,
) {
    if let Some(list) = map.get_mut(key) {
        list.retain(|s| s != session);
        if list.is_empty() {
            map.remove(key);
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
        let presence = self.settings.presence;
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
        ctx.run_interval(self.settings.watermark_interval, |act, _| {
            let Some(pos) = &act.position else { return };
            let through = pos.entry;
            for att in act.sessions.values_mut() {
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
        });
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        // Nothing keeps this Bay's cached tokens exact any more.
        self.tokens.set_live(&self.bay, false);
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
    /// Id of the session's own [`Opening`] (from [`Store::open_session`]).
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
        let newer_exists = self
            .by_token
            .get(&msg.token)
            .into_iter()
            .flatten()
            .any(|s| {
                self.sessions
                    .get(s)
                    .is_some_and(|a| a.opened_at > msg.opened_at)
            });
        if newer_exists {
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
        self.session_started(&msg.participant, ctx);
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

/// Registers a wait for the next message in `conversation` that
/// `excluding` did not send (`GET …/messages/wait`). Answered once the
/// wait is registered: a message appended after that answer reaches the
/// waiter, so the caller reads the store only afterwards and nothing falls
/// between the read and the wait.
#[derive(Message)]
#[rtype(result = "()")]
pub struct WaitForMessage {
    /// The conversation to watch.
    pub conversation: ConversationId,
    /// The waiter; its own messages do not end the wait.
    pub excluding: ParticipantId,
    /// Gets the message's log record; dropping the receiver cancels.
    pub reply: tokio::sync::oneshot::Sender<Arc<LogRecord>>,
}

impl Handler<WaitForMessage> for BayFeed {
    type Result = ();

    fn handle(&mut self, msg: WaitForMessage, _: &mut Self::Context) {
        let waiting = self.waiters.entry(msg.conversation).or_default();
        // Waits whose callers gave up are dropped here and on wake-up.
        waiting.retain(|w| !w.reply.is_closed());
        waiting.push(Waiter {
            excluding: msg.excluding,
            reply: msg.reply,
        });
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
            self.session_ended(&att.participant, att.handle.linger);
        }
        self.publish_if_due(ctx);
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
        self.presence.due = false;
        self.publish_presence(ctx);
    }
}

/// The last `keep` records of the log from `window` before `head` up to
/// `head`, and the floor they cover from (every record in (floor, head] is
/// among them). Best effort: on any store answer but records it returns
/// none, floor `head`, and the feed starts cold as it would have anyway.
async fn warm_recent(
    store: &dyn Store,
    bay: &BayId,
    head: &LogPosition,
    keep: usize,
    window: Duration,
) -> (VecDeque<Arc<LogRecord>>, EntryId) {
    let cold = (VecDeque::new(), head.entry);
    let mut floor = EntryId {
        ms: head.entry.ms.saturating_sub(window.as_millis() as u64),
        seq: 0,
    };
    if keep == 0 || floor >= head.entry {
        return cold;
    }
    let mut from = LogPosition {
        epoch: head.epoch.clone(),
        entry: floor,
    };
    let mut kept: VecDeque<Arc<LogRecord>> = VecDeque::new();
    loop {
        let Ok(Replay::Records { records, through }) =
            store.read_log(bay, &from, WARM_PAGE, None).await
        else {
            return cold;
        };
        let mut done = records.is_empty() || through >= head.entry;
        for record in records {
            // Past the head the tail delivers it; the recent records end there.
            if record.id > head.entry {
                done = true;
                break;
            }
            kept.push_back(record);
            if kept.len() > keep {
                if let Some(oldest) = kept.pop_front() {
                    floor = oldest.id;
                }
            }
        }
        if done {
            return (kept, floor);
        }
        from.entry = through;
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
                LogEvent::Presence { participant, .. } => {
                    for peer in self.peers_of(participant) {
                        for &slot in self.by_participant.get(&peer).into_iter().flatten() {
                            stage(&mut self.sessions, &mut self.outgoing, slot, record);
                        }
                    }
                }
                _ => self.apply_control(record),
            }
        }
        self.recent.extend(msg.records.iter().cloned());
        while self.recent.len() > self.settings.recent_max.min(RECENT_RECORDS) {
            if let Some(oldest) = self.recent.pop_front() {
                self.recent_floor = Some(oldest.id);
            }
        }
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

/// Openings read from the displacement channel, in order.
#[derive(Message)]
#[rtype(result = "()")]
struct Openings {
    openings: Vec<Opening>,
}

impl Handler<Openings> for BayFeed {
    type Result = ();

    fn handle(&mut self, msg: Openings, ctx: &mut Self::Context) {
        for o in msg.openings {
            self.displace_older(&o.token, o.id, &o.session);
        }
        self.publish_if_due(ctx);
    }
}

/// The tail reads the log again after failing: the Bay's cached tokens
/// are kept exact again (see [`TokenCache`]).
#[derive(Message)]
#[rtype(result = "()")]
struct TailReads;

impl Handler<TailReads> for BayFeed {
    type Result = ();

    fn handle(&mut self, _: TailReads, _: &mut Self::Context) {
        if self.position.is_some() {
            self.tokens.set_live(&self.bay, true);
        }
    }
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
        self.tokens.set_live(&self.bay, false);
        let all: Vec<SessionId> = self.sessions.keys().cloned().collect();
        for s in all {
            self.close_session(&s, CloseReason::LogReset);
        }
        self.position = None;
        self.recent.clear();
        self.recent_floor = None;
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

    struct Fixture {
        store: Arc<dyn Store>,
        bay: BayId,
        feed: Addr<BayFeed>,
        sink: Addr<Sink>,
    }

    impl Fixture {
        async fn start(presence_interval: Duration) -> Fixture {
            Self::start_with(PresenceSettings {
                interval: presence_interval,
                linger: presence_interval,
                tick: Duration::ZERO,
                idle_after: Duration::from_secs(300),
            })
            .await
        }

        async fn start_with(presence: PresenceSettings) -> Fixture {
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
        async fn attach(&self, session: &str, participant: &str) {
            let handle = SessionHandle::of(&self.sink, Backlog::bounded(1 << 20));
            self.attach_with(session, participant, handle).await
        }

        /// The same, with the session's own handle.
        async fn attach_with(&self, session: &str, participant: &str, handle: SessionHandle) {
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

        async fn detach(&self, session: &str) {
            self.feed
                .send(Detach {
                    session: SessionId(session.into()),
                })
                .await
                .unwrap();
        }

        async fn online(&self) -> Vec<String> {
            let online = self.store.online(&self.bay).await.unwrap();
            online.into_iter().map(|p| p.0).collect()
        }

        /// Waits up to `patience` for the store to say exactly `want`.
        async fn wait_online(&self, want: &[&str], patience: Duration) {
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
                .find(|e| e.participant.0 == participant);
            if let Some(e) = found.filter(|e| ok(e)) {
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
