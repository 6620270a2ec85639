//! Opening a session, shared by every transport (`/ws`, `/events`,
//! `/updates`): read the client's resume cursor ([`Resume::parse`]),
//! announce the opening (cluster-wide displacement), attach to the Bay
//! feed, re-check the credential, and replay the log from the client's
//! cursor ([`open_session`]).
//!
//! Order matters for the cursor invariant: the session attaches *before*
//! the replay reads the log, so every entry is either in the replay (≤ the
//! replay's `through`) or pushed live by the feed (> the feed's position at
//! attach time); live copies of replayed entries are dropped by
//! [`SessionCursor::is_new`].
//!
//! Nothing here knows a transport: failures are [`OpenFailure`] /
//! [`OpenError`], which the gateway turns into close codes and HTTP answers.

use crate::drafts::snapshot_drafts;
use crate::feed::{Attach, AttachError, Attached, BayFeed, Detach};
use crate::registry::Registry;
use crate::replay::memberships_at;
use crate::session::{SessionCursor, SessionHandle};
use crate::store::log::{LogEvent, LogRecord};
use crate::store::{Principal, Replay, Store, StoreError, Suspension};
use crate::token::TokenHash;
use actix::{Addr, MailboxError};
use std::collections::HashSet;
use std::sync::Arc;
use switchboard_protocol::cursor::{EntryId, LogPosition};
use switchboard_protocol::event::Event;
use switchboard_protocol::ids::{BayId, ConversationId, ParticipantId, SessionId};
use tokio::sync::{Semaphore, SemaphorePermit};

/// Session openings that resumed from a cursor (counter), label `source` =
/// `feed` (served from the feed's recent records in memory) | `store` (read
/// the log from the store under a replay slot). Mostly `store` right after
/// a node restart means clients resume from further back than the feed
/// keeps (see [`crate::feed::WARM_WINDOW`]).
pub const REPLAYS: &str = "switchboard_replays_total";

/// Log entries read per store call during a replay.
const REPLAY_READ: usize = 1000;

/// Where a client asked to resume, read from `hello.resume` (`/ws`),
/// `Last-Event-ID` or `?cursor=` (`/events`) or `?cursor=` (`/updates`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resume {
    /// Absent, `null` or empty: start at the log head, no history.
    Now,
    /// After this position.
    After(LogPosition),
    /// Not a cursor this server issued (another deployment's, or mangled):
    /// not addressable, so the client gets the protocol's recovery path
    /// (`reset` on the streams, 409 `CURSOR_EXPIRED` on `/updates`).
    Unaddressable,
}

impl Resume {
    /// Reads a raw cursor; surrounding whitespace is ignored.
    pub fn parse(raw: Option<&str>) -> Resume {
        match raw.map(str::trim) {
            None | Some("") => Resume::Now,
            Some(c) => match LogPosition::decode(c) {
                Ok(p) => Resume::After(p),
                Err(_) => Resume::Unaddressable,
            },
        }
    }

    /// The position to replay from: `None` starts at the head (for
    /// [`Resume::Unaddressable`] too; the transport signals the reset).
    pub fn position(&self) -> Option<LogPosition> {
        match self {
            Resume::After(p) => Some(p.clone()),
            Resume::Now | Resume::Unaddressable => None,
        }
    }
}

/// One replayed event and the log entry it came from: a position a
/// transport may hand out right after the event (every entry up to it
/// addressed to the session precedes it), as `/events` does in `id:`.
pub struct Replayed {
    /// The entry the event was projected from.
    pub entry: EntryId,
    /// The event as the session's participant sees it.
    pub event: Event,
}

/// A session that attached and replayed (the first page, when the
/// replay is longer than [`OpenRequest::limit`]).
pub struct Opened {
    /// The feed the session is attached to; send it [`Detach`] when the
    /// connection ends.
    ///
    /// [`Detach`]: crate::feed::Detach
    pub feed: Addr<BayFeed>,
    /// Position after the replay; live records at or below it are duplicates.
    pub cursor: SessionCursor,
    /// Replayed events addressed to the caller, in log order.
    pub events: Vec<Replayed>,
    /// The rest of the replay when it stopped at the page limit before
    /// reaching the head: [`continue_replay`] reads the next page.
    pub rest: Option<ReplayRest>,
}

impl Opened {
    /// Whether the replay reached the head (nothing is left to read).
    pub fn complete(&self) -> bool {
        self.rest.is_none()
    }
}

/// How much one page of a replay holds. A page ends with the event that
/// reaches either bound, so it always holds at least one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLimit {
    /// Most events (`usize::MAX`: no bound).
    pub events: usize,
    /// Most bytes, as [`LogEvent::estimated_bytes`] counts them
    /// (`usize::MAX`: no bound).
    pub bytes: usize,
}

impl PageLimit {
    /// The whole replay in one page.
    pub const ALL: PageLimit = PageLimit {
        events: usize::MAX,
        bytes: usize::MAX,
    };

    /// At most `n` events per page (`/updates`' answer size).
    pub fn events(n: usize) -> Self {
        PageLimit {
            events: n,
            ..Self::ALL
        }
    }

    /// At most about `n` bytes of events per page: a streaming transport
    /// sends a page, waits until its client took it, then reads the next,
    /// so a resume from far back holds one page in memory, not the log.
    pub fn bytes(n: usize) -> Self {
        PageLimit {
            bytes: n,
            ..Self::ALL
        }
    }
}

/// One later page of a replay (see [`continue_replay`]).
pub struct ReplayPage {
    /// The session's cursor, moved past the page (live copies of its
    /// records are duplicates) and holding its draft snapshots.
    pub cursor: SessionCursor,
    /// The page's events, in log order.
    pub events: Vec<Replayed>,
    /// What is left, or `None`: the replay reached the head.
    pub rest: Option<ReplayRest>,
}

/// Why a session could not open.
pub enum OpenFailure {
    /// The resume cursor is not addressable: 409 CURSOR_EXPIRED / `reset`.
    /// The session is attached and can continue from `cursor` (the head).
    Expired {
        /// The feed the session stays attached to.
        feed: Addr<BayFeed>,
        /// Positioned at the feed's head at attach time, nothing replayed.
        cursor: SessionCursor,
    },
    /// A newer connection of the same token exists (4000 / empty answer).
    Superseded {
        /// The feed's position; a cursor the loser may hand back.
        position: LogPosition,
    },
    /// The credential was revoked while the session opened (4001 / 401).
    Revoked {
        /// The feed the session attached to; the caller must detach it.
        feed: Addr<BayFeed>,
    },
    /// An operator suspended the participant or its Bay while the session
    /// opened (4004 / 403).
    Suspended {
        /// The feed the session attached to; the caller must detach it.
        feed: Addr<BayFeed>,
        /// What was suspended.
        suspension: Suspension,
    },
    /// Store or node trouble.
    Failed(OpenError),
}

impl<E: Into<OpenError>> From<E> for OpenFailure {
    fn from(e: E) -> Self {
        OpenFailure::Failed(e.into())
    }
}

/// Store or node trouble while a session opens. Not tied to any
/// transport: the gateway maps it to its HTTP answer or close code.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// A store call failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The Bay's feed could not be reached (its mailbox failed twice).
    #[error("the bay feed could not be reached: {0}")]
    FeedUnreachable(#[from] MailboxError),
    /// The feed has not loaded its index: the store is unreachable; retry
    /// after a pause.
    #[error("the bay feed is not ready")]
    NotReady,
    /// The node is shutting down (no replay slot will be handed out).
    #[error("the node is shutting down")]
    ShuttingDown,
}

/// What a session opening needs from its node.
#[derive(Clone, Copy)]
pub struct Node<'a> {
    /// The store.
    pub store: &'a Arc<dyn Store>,
    /// Finds the Bay's feed, and holds the node's token cache.
    pub registry: &'a Registry,
    /// Store replays queue for one of these instead of all reading at
    /// once, so a resume storm's memory stays bounded (and, on Redis, the
    /// pool is not exhausted by sessions that merely had to wait).
    pub replay_slots: &'a Semaphore,
}

/// One session to open.
pub struct OpenRequest {
    /// Who opens it (Bay, participant, token).
    pub principal: Principal,
    /// The hash of the presented token, to re-check it once attached.
    pub token_hash: TokenHash,
    /// The connection's id.
    pub session: SessionId,
    /// Where the feed pushes the session's records.
    pub handle: SessionHandle,
    /// `None` starts at the log head, with no history.
    pub resume: Option<LogPosition>,
    /// How much the first page of the replay holds.
    pub limit: PageLimit,
}

/// Opens a session: announce, attach, re-check the credential, replay
/// the first page.
///
/// # Errors
///
/// [`OpenFailure`]: an expired cursor, a newer connection of the token, a
/// credential revoked meanwhile, or store / feed trouble.
pub async fn open_session(node: Node<'_>, req: OpenRequest) -> Result<Opened, OpenFailure> {
    let (feed, attached, guard) = attach(node, &req).await?;
    match still_valid(node, &req).await? {
        Some(None) => {}
        Some(Some(suspension)) => return Err(OpenFailure::Suspended { feed, suspension }),
        None => return Err(OpenFailure::Revoked { feed }),
    }
    if req.resume.is_some() {
        let source = if attached.replay.is_some() {
            "feed"
        } else {
            "store"
        };
        metrics::counter!(REPLAYS, "source" => source).increment(1);
    }
    let conversations = memberships_for_replay(node, &req, &attached).await?;
    let from = req
        .resume
        .clone()
        .unwrap_or_else(|| attached.position.clone());
    let rest = ReplayRest {
        bay: req.principal.bay.clone(),
        participant: req.principal.participant.id.clone(),
        // The feed's recent records, when they cover the cursor: shared and
        // decoded already, so a resume storm after a short outage reads nothing.
        recent: attached
            .replay
            .map(|records| (records, attached.position.entry)),
        from,
        head: attached.position,
        conversations,
        peers: attached.peers,
        feed,
    };
    let cursor = SessionCursor::after_replay(rest.from.epoch.clone(), rest.from.entry);
    let feed = rest.feed.clone();
    let page = match rest.page(node, cursor, req.limit).await {
        Ok(page) => page,
        // The session stays attached, at the head.
        Err(expired @ OpenFailure::Expired { .. }) => {
            guard.disarm();
            return Err(expired);
        }
        Err(other) => return Err(other),
    };
    guard.disarm();
    Ok(Opened {
        feed,
        cursor: page.cursor,
        events: page.events,
        rest: page.rest,
    })
}

/// Reads the next page of a replay that [`open_session`] (or an earlier
/// call) left unfinished. `cursor` is the session's, as that page left it:
/// draft deltas that a snapshot it was sent already holds are dropped, and
/// the page's own snapshots are added to it.
///
/// # Errors
///
/// [`OpenFailure::Expired`] when the log was trimmed past the replay's
/// position meanwhile (the cursor then starts at the feed's position at
/// attach time, as for an expired resume), or
/// [`OpenFailure::Failed`] for store trouble.
pub async fn continue_replay(
    node: Node<'_>,
    rest: ReplayRest,
    cursor: SessionCursor,
    limit: PageLimit,
) -> Result<ReplayPage, OpenFailure> {
    rest.page(node, cursor, limit).await
}

/// Detaches a session from its feed when dropped, unless disarmed: an
/// opening that fails after its attach, or that its caller drops (the
/// client hung up mid-opening, so the session actor stopped and took the
/// opening's future with it), must not leave the session attached. The
/// feed would otherwise keep it for good: the participant shown present
/// with no connection, and its drafts never failed as orphans.
///
/// Armed before the [`Attach`] is sent: a future dropped while it awaits
/// the feed's answer has its `Detach` queued behind the `Attach` in the
/// feed's mailbox, which handles both in order (an unknown session's
/// `Detach` is a no-op).
struct AttachGuard {
    feed: Option<Addr<BayFeed>>,
    session: SessionId,
}

impl AttachGuard {
    fn new(feed: &Addr<BayFeed>, session: &SessionId) -> Self {
        AttachGuard {
            feed: Some(feed.clone()),
            session: session.clone(),
        }
    }

    /// The session stays attached: its caller detaches it when it ends.
    fn disarm(mut self) {
        self.feed = None;
    }
}

impl Drop for AttachGuard {
    fn drop(&mut self) {
        if let Some(feed) = self.feed.take() {
            feed.do_send(Detach {
                session: self.session.clone(),
            });
        }
    }
}

/// Announces the opening (displacing older connections of the token on
/// every node) and attaches to the Bay's feed: from then on the feed
/// pushes everything logged after the returned position, until the
/// returned guard is dropped undisarmed.
async fn attach(
    node: Node<'_>,
    req: &OpenRequest,
) -> Result<(Addr<BayFeed>, Attached, AttachGuard), OpenFailure> {
    let bay = &req.principal.bay;
    let opened_at = node
        .store
        .open_session(bay, &req.principal.token, &req.session)
        .await?;
    let attach = || Attach {
        session: req.session.clone(),
        participant: req.principal.participant.id.clone(),
        token: req.principal.token.clone(),
        opened_at,
        handle: req.handle.clone(),
        resume: req.resume.clone(),
    };
    let mut feed = node.registry.feed(bay);
    let mut guard = AttachGuard::new(&feed, &req.session);
    let attached = match feed.send(attach()).await {
        Ok(r) => r,
        // The feed stopped between lookup and send: ask again once.
        Err(_) => {
            feed = node.registry.feed(bay);
            guard.disarm();
            guard = AttachGuard::new(&feed, &req.session);
            feed.send(attach()).await?
        }
    };
    match attached {
        Ok(a) => Ok((feed, a, guard)),
        Err(AttachError::Superseded { position }) => Err(OpenFailure::Superseded { position }),
        Err(AttachError::NotReady) => Err(OpenError::NotReady.into()),
    }
}

/// A rotation or suspension that raced the attach: the feed may have
/// applied it before this session registered, so look again now that it
/// has. A cached entry still there means the feed applied no revocation or
/// suspension of it so far. `None`: revoked; `Some(suspension)`: still
/// valid, with its standing.
async fn still_valid(
    node: Node<'_>,
    req: &OpenRequest,
) -> Result<Option<Option<Suspension>>, OpenFailure> {
    let token = &req.principal.token;
    let now = match node.registry.tokens().get(&req.token_hash) {
        Some(p) => Some(p),
        None => node.store.authenticate(&req.token_hash).await?,
    };
    Ok(now.filter(|p| p.token == *token).map(|p| p.suspended))
}

/// The participant's memberships to judge the replay's first records by.
///
/// Each replayed record is judged by the roster in force when it was
/// logged: start from the memberships as of the resume cursor, rebuilt
/// from the store's roster changes (read after attaching, so they reach at
/// least the feed's position); the `Roster` entries the replay passes then
/// keep them current.
async fn memberships_for_replay(
    node: Node<'_>,
    req: &OpenRequest,
    attached: &Attached,
) -> Result<HashSet<ConversationId>, OpenFailure> {
    match &req.resume {
        Some(cursor) if cursor.epoch == attached.position.epoch => {
            let since = LogPosition {
                epoch: cursor.epoch.clone(),
                entry: cursor.entry.min(attached.position.entry),
            };
            let changes = node
                .store
                .roster_changes(&req.principal.bay, &since)
                .await?;
            Ok(memberships_at(
                &req.principal.participant.id,
                cursor.entry,
                attached.position.entry,
                attached.conversations.clone(),
                &changes,
            ))
        }
        // Another epoch: the replay answers EpochChanged before using them.
        _ => Ok(attached.conversations.clone()),
    }
}

/// Waits for a store-replay slot (see [`Node::replay_slots`]). The wait is
/// not bounded on purpose: refusing a queued opening wastes the work it
/// already did (its announce, authentication) and its retry, with an older
/// cursor, reads more; a client that gives up instead drops its opening
/// (the transports keep reading while they open) and with it its place.
async fn replay_slot(slots: &Semaphore) -> Result<SemaphorePermit<'_>, OpenError> {
    slots.acquire().await.map_err(|_| OpenError::ShuttingDown)
}

/// A replay between two pages: where it stands, the memberships as of
/// that position, and where its records come from.
pub struct ReplayRest {
    bay: BayId,
    participant: ParticipantId,
    /// Everything up to here was replayed.
    from: LogPosition,
    /// The feed's position at attach time: where an expired replay goes on.
    head: LogPosition,
    /// The participant's memberships as of `from`.
    conversations: HashSet<ConversationId>,
    /// Who shares a conversation with the participant (see [`project`]).
    peers: HashSet<ParticipantId>,
    /// Served from the feed's recent records: those after `from` not yet
    /// projected, and the position they reach. `None`: read the store.
    recent: Option<(Vec<Arc<LogRecord>>, EntryId)>,
    feed: Addr<BayFeed>,
}

impl ReplayRest {
    /// Projects the next page into `cursor`'s session: `Ok` with what is
    /// left, if anything.
    async fn page(
        mut self,
        node: Node<'_>,
        mut cursor: SessionCursor,
        limit: PageLimit,
    ) -> Result<ReplayPage, OpenFailure> {
        let Some((events, through, complete)) = self.read(node, &mut cursor, limit).await? else {
            let head = &self.head;
            let cursor = SessionCursor::after_replay(head.epoch.clone(), head.entry);
            return Err(OpenFailure::Expired {
                feed: self.feed,
                cursor,
            });
        };
        // Drafts replay as one snapshot each, not as their deltas.
        let tagged = events.into_iter().map(|r| (r.entry, r.event)).collect();
        let (tagged, drafts) = snapshot_drafts(
            &**node.store,
            &self.bay,
            &self.participant,
            &self.conversations,
            cursor.drafts(),
            tagged,
        )
        .await?;
        cursor.drafts_mut().merge(drafts);
        cursor.replayed(through);
        self.from.entry = through;
        Ok(ReplayPage {
            cursor,
            events: tagged
                .into_iter()
                .map(|(entry, event)| Replayed { entry, event })
                .collect(),
            rest: (!complete).then_some(self),
        })
    }

    /// Reads records after `from` until `limit` events are projected or
    /// the head is reached: the events, the entry they cover through and
    /// whether that is the head. `None`: the log no longer reaches `from`.
    async fn read(
        &mut self,
        node: Node<'_>,
        cursor: &mut SessionCursor,
        limit: PageLimit,
    ) -> Result<Option<(Vec<Replayed>, EntryId, bool)>, OpenFailure> {
        let mut page = Page::new(limit);
        let _slot = match self.recent {
            Some(_) => None,
            None => Some(replay_slot(node.replay_slots).await?),
        };
        let mut from = self.from.clone();
        loop {
            let served_from_feed = self.recent.is_some();
            let (records, through, read_all) = match self.recent.take() {
                Some((records, through)) => (records, through, true),
                None => match node
                    .store
                    .read_log(&self.bay, &from, REPLAY_READ, None)
                    .await?
                {
                    Replay::Records { records, through } => {
                        let read_all = records.len() < REPLAY_READ;
                        (records, through, read_all)
                    }
                    Replay::Expired | Replay::EpochChanged => return Ok(None),
                },
            };
            let stopped_at = page.project(&records, self, cursor);
            if let Some((end, complete)) = page_end(stopped_at, &records, through, read_all) {
                if served_from_feed && !complete {
                    let left = records.partition_point(|r| r.id <= end);
                    self.recent = Some((records[left..].to_vec(), through));
                }
                return Ok(Some((page.events, end, complete)));
            }
            from.entry = through;
        }
    }
}

/// One page being projected: its events and their size so far.
struct Page {
    events: Vec<Replayed>,
    bytes: usize,
    limit: PageLimit,
}

impl Page {
    fn new(limit: PageLimit) -> Self {
        Page {
            events: Vec::new(),
            bytes: 0,
            limit,
        }
    }

    /// Projects records for the replay's participant, keeping its
    /// memberships current; returns the entry it stopped at when the page
    /// filled up. Draft deltas `cursor` already has a snapshot of are
    /// skipped.
    fn project(
        &mut self,
        records: &[Arc<LogRecord>],
        replay: &mut ReplayRest,
        cursor: &mut SessionCursor,
    ) -> Option<EntryId> {
        for record in records {
            let Some(event) = project(
                record,
                &replay.participant,
                &mut replay.conversations,
                &replay.peers,
            ) else {
                continue;
            };
            if !cursor.drafts_mut().admits(record) {
                continue;
            }
            self.bytes = self.bytes.saturating_add(record.event.estimated_bytes());
            self.events.push(Replayed {
                entry: record.id,
                event,
            });
            if self.events.len() >= self.limit.events || self.bytes >= self.limit.bytes {
                return Some(record.id);
            }
        }
        None
    }
}

/// Where the replay ends after a page, if it does: the position it
/// covers and whether it reached the head. `None`: read the next page.
fn page_end(
    stopped_at: Option<EntryId>,
    records: &[Arc<LogRecord>],
    through: EntryId,
    read_all: bool,
) -> Option<(EntryId, bool)> {
    match stopped_at {
        Some(at) => {
            let done = read_all && records.last().map(|r| r.id) == Some(at);
            Some((if done { through } else { at }, done))
        }
        None if read_all => Some((through, true)),
        None => None,
    }
}

/// The event `record` gives `participant`, if any, keeping `conversations`
/// (the participant's memberships) current as `Roster` entries pass by.
/// A `Presence` entry reaches it when its subject is among `peers` (who
/// shares a conversation with the participant). Replays pass the peers as
/// of the feed's position at attach, i.e. the current memberships, not
/// those of each entry's time as the live feed judges them: a presence
/// event is a hint for live UIs, superseded by the next one, so a replay
/// that shows a former peer's last change, or misses a new peer's, is
/// acceptable. Webhook deliveries pass no peers: they never get presence.
pub fn project(
    record: &LogRecord,
    participant: &ParticipantId,
    conversations: &mut HashSet<ConversationId>,
    peers: &HashSet<ParticipantId>,
) -> Option<Event> {
    match &record.event {
        LogEvent::Presence {
            participant: subject,
            ..
        } => {
            if subject != participant && peers.contains(subject) {
                record.event_for(participant)
            } else {
                None
            }
        }
        // Addressed to one participant alone (the summarizer, a connector),
        // member or not.
        LogEvent::SummaryRequested { summarizer: to, .. }
        | LogEvent::ConnectorRequest { connector: to, .. } => {
            (to == participant).then(|| record.event_for(participant))?
        }
        LogEvent::Message { conversation, .. } | LogEvent::Change { conversation, .. } => {
            if conversations.contains(&conversation.id) {
                record.event_for(participant)
            } else {
                None
            }
        }
        LogEvent::Roster {
            conversation,
            members,
        } => {
            if members.contains(participant) {
                conversations.insert(conversation.id.clone());
            } else {
                conversations.remove(&conversation.id);
            }
            None
        }
        LogEvent::CredentialRevoked { .. }
        | LogEvent::Suspension { .. }
        | LogEvent::ConnectorAnswered { .. }
        | LogEvent::WebhookChanged { .. }
        | LogEvent::Canary { .. } => None,
    }
}

/// Projects records the feed pushed (already filtered to the participant's
/// conversations), skipping those the replay covered (draft deltas a
/// replayed snapshot holds included).
pub fn live_events(
    records: &[std::sync::Arc<LogRecord>],
    cursor: &mut SessionCursor,
    participant: &ParticipantId,
) -> Vec<Event> {
    records
        .iter()
        .filter(|r| cursor.admits(r))
        .filter_map(|r| r.event_for(participant))
        .collect()
}
