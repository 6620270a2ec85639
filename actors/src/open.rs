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
use crate::feed::{Attach, AttachError, Attached, BayFeed};
use crate::registry::Registry;
use crate::replay::memberships_at;
use crate::session::{SessionCursor, SessionHandle};
use crate::store::log::{LogEvent, LogRecord};
use crate::store::{Principal, Replay, Store, StoreError};
use crate::token::TokenHash;
use actix::{Addr, MailboxError};
use std::collections::HashSet;
use std::sync::Arc;
use switchboard_protocol::cursor::{EntryId, LogPosition};
use switchboard_protocol::event::Event;
use switchboard_protocol::ids::{ConversationId, ParticipantId, SessionId};
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

/// A session that attached and replayed.
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
    /// False when the replay stopped at `max_events` before reaching the head.
    pub complete: bool,
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
    /// Most events replayed (`usize::MAX` for all).
    pub max_events: usize,
}

/// Opens a session: announce, attach, re-check the credential, replay.
///
/// # Errors
///
/// [`OpenFailure`]: an expired cursor, a newer connection of the token, a
/// credential revoked meanwhile, or store / feed trouble.
pub async fn open_session(node: Node<'_>, req: OpenRequest) -> Result<Opened, OpenFailure> {
    let (feed, attached) = attach(node, &req).await?;
    if !still_valid(node, &req).await? {
        return Err(OpenFailure::Revoked { feed });
    }
    let participant = &req.principal.participant.id;
    let mut replay = Replaying {
        conversations: memberships_for_replay(node, &req, &attached).await?,
        events: Vec::new(),
        max_events: req.max_events,
    };
    let start = req
        .resume
        .clone()
        .unwrap_or_else(|| attached.position.clone());
    let mut from = start;
    // The feed's recent records, when they cover the cursor: shared and
    // decoded already, so a resume storm after a short outage reads nothing.
    let mut from_feed = attached
        .replay
        .map(|records| (records, attached.position.entry));
    if req.resume.is_some() {
        let source = if from_feed.is_some() { "feed" } else { "store" };
        metrics::counter!(REPLAYS, "source" => source).increment(1);
    }
    let _slot = match from_feed {
        Some(_) => None,
        None => Some(replay_slot(node.replay_slots).await?),
    };
    loop {
        let (records, through, read_all) = match from_feed.take() {
            Some((records, through)) => (records, through, true),
            None => match node
                .store
                .read_log(&req.principal.bay, &from, REPLAY_READ, None)
                .await?
            {
                Replay::Records { records, through } => {
                    let read_all = records.len() < REPLAY_READ;
                    (records, through, read_all)
                }
                Replay::Expired | Replay::EpochChanged => {
                    let head = &attached.position;
                    let cursor = SessionCursor::after_replay(head.epoch.clone(), head.entry);
                    return Err(OpenFailure::Expired { feed, cursor });
                }
            },
        };
        let stopped_at = replay.project_page(&records, participant, &attached.peers);
        if let Some((through, complete)) = page_end(stopped_at, &records, through, read_all) {
            return finish(node, &req, feed, replay, from, through, complete).await;
        }
        from.entry = through;
    }
}

/// Announces the opening (displacing older connections of the token on
/// every node) and attaches to the Bay's feed: from then on the feed
/// pushes everything logged after the returned position.
async fn attach(
    node: Node<'_>,
    req: &OpenRequest,
) -> Result<(Addr<BayFeed>, Attached), OpenFailure> {
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
    let attached = match feed.send(attach()).await {
        Ok(r) => r,
        // The feed stopped between lookup and send: ask again once.
        Err(_) => {
            feed = node.registry.feed(bay);
            feed.send(attach()).await?
        }
    };
    match attached {
        Ok(a) => Ok((feed, a)),
        Err(AttachError::Superseded { position }) => Err(OpenFailure::Superseded { position }),
        Err(AttachError::NotReady) => Err(OpenError::NotReady.into()),
    }
}

/// A rotation that raced the attach: the feed may have applied it before
/// this session registered, so look again now that it has. A cached entry
/// still there means the feed applied no revocation of it so far.
async fn still_valid(node: Node<'_>, req: &OpenRequest) -> Result<bool, OpenFailure> {
    let token = &req.principal.token;
    Ok(match node.registry.tokens().get(&req.token_hash) {
        Some(p) => p.token == *token,
        None => node
            .store
            .authenticate(&req.token_hash)
            .await?
            .is_some_and(|p| p.token == *token),
    })
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
async fn replay_slot(slots: &Semaphore) -> Result<SemaphorePermit<'_>, OpenFailure> {
    slots
        .acquire()
        .await
        .map_err(|_| OpenFailure::Failed(OpenError::ShuttingDown))
}

/// A replay in progress: the memberships as of the record being read and
/// the events projected so far.
struct Replaying {
    conversations: HashSet<ConversationId>,
    events: Vec<Replayed>,
    max_events: usize,
}

impl Replaying {
    /// Projects one page of records; returns the entry it stopped at when
    /// `max_events` was reached.
    fn project_page(
        &mut self,
        records: &[Arc<LogRecord>],
        participant: &ParticipantId,
        peers: &HashSet<ParticipantId>,
    ) -> Option<EntryId> {
        for record in records {
            if let Some(event) = project(record, participant, &mut self.conversations, peers) {
                self.events.push(Replayed {
                    entry: record.id,
                    event,
                });
                if self.events.len() >= self.max_events {
                    return Some(record.id);
                }
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

/// Ends the replay: drafts replay as one snapshot each, not as their
/// deltas, and the session's cursor starts at `through`.
async fn finish(
    node: Node<'_>,
    req: &OpenRequest,
    feed: Addr<BayFeed>,
    replay: Replaying,
    from: LogPosition,
    through: EntryId,
    complete: bool,
) -> Result<Opened, OpenFailure> {
    let tagged = replay
        .events
        .into_iter()
        .map(|r| (r.entry, r.event))
        .collect();
    let (tagged, drafts) = snapshot_drafts(
        &**node.store,
        &req.principal.bay,
        &req.principal.participant.id,
        &replay.conversations,
        tagged,
    )
    .await?;
    let events = tagged
        .into_iter()
        .map(|(entry, event)| Replayed { entry, event })
        .collect();
    Ok(Opened {
        feed,
        cursor: SessionCursor::after_replay(from.epoch, through).with_drafts(drafts),
        events,
        complete,
    })
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
        LogEvent::CredentialRevoked { .. } => None,
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
