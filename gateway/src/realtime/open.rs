//! Opening a session, shared by `/ws`, `/events` and `/updates`: read the
//! client's resume cursor ([`Resume::parse`]), announce it (cluster-
//! wide displacement), attach to the Bay feed, re-check the credential, and
//! replay the log from the client's cursor.
//!
//! Order matters for the cursor invariant: the session attaches *before*
//! the replay reads the log, so every entry is either in the replay (≤ the
//! replay's `through`) or pushed live by the feed (> the feed's position at
//! attach time); live copies of replayed entries are dropped by
//! [`SessionCursor::is_new`].

use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;
use actix::Addr;
use std::collections::HashSet;
use switchboard_actors::drafts::snapshot_drafts;
use switchboard_actors::feed::{Attach, AttachError, BayFeed};
use switchboard_actors::replay::memberships_at;
use switchboard_actors::session::{SessionCursor, SessionHandle};
use switchboard_actors::store::log::{LogEvent, LogRecord};
use switchboard_actors::store::Replay;
use switchboard_protocol::cursor::{EntryId, LogPosition};
use switchboard_protocol::error::ErrorCode;
use switchboard_protocol::event::Event;
use switchboard_protocol::ids::{ConversationId, ParticipantId, SessionId};

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
    /// [`Detach`]: switchboard_actors::feed::Detach
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
    Failed(ApiError),
}

impl From<ApiError> for OpenFailure {
    fn from(e: ApiError) -> Self {
        OpenFailure::Failed(e)
    }
}

/// Opens a session for `caller`. `resume` is `None` for "start at now".
/// Replays at most `max_events` events (`usize::MAX` for all).
///
/// # Errors
///
/// [`OpenFailure`]: an expired cursor, a newer connection of the token, a
/// credential revoked meanwhile, or store / feed trouble (503 with
/// `Retry-After` while the feed cannot load its index).
pub async fn open_session(
    state: AppState,
    caller: Caller,
    session: SessionId,
    handle: SessionHandle,
    resume: Option<LogPosition>,
    max_events: usize,
) -> Result<Opened, OpenFailure> {
    let bay = caller.principal.bay.clone();
    let store = state.store.clone();
    let opened_at = store
        .open_session(&bay, &caller.principal.token, &session)
        .await
        .map_err(ApiError::from)?;
    let attach = || Attach {
        session: session.clone(),
        participant: caller.principal.participant.id.clone(),
        token: caller.principal.token.clone(),
        opened_at,
        handle: handle.clone(),
        resume: resume.clone(),
    };
    let mut feed = state.registry.feed(&bay);
    let attached = match feed.send(attach()).await {
        Ok(r) => r,
        // The feed stopped between lookup and send: ask again once.
        Err(_) => {
            feed = state.registry.feed(&bay);
            feed.send(attach()).await.map_err(ApiError::from)?
        }
    };
    let attached = match attached {
        Ok(a) => a,
        Err(AttachError::Superseded { position }) => {
            return Err(OpenFailure::Superseded { position })
        }
        Err(AttachError::NotReady) => {
            return Err(OpenFailure::Failed(
                ApiError::new(
                    ErrorCode::StoreUnavailable,
                    "the store is unavailable; retry later",
                )
                .retry_after(std::time::Duration::from_secs(1)),
            ))
        }
    };
    // A rotation that raced the attach: the feed may have applied it before
    // this session registered, so look again now that it has. A cached
    // entry still there means the feed applied no revocation of it so far.
    let still_valid = match state.registry.tokens().get(&caller.token_hash) {
        Some(p) => p.token == caller.principal.token,
        None => store
            .authenticate(&caller.token_hash)
            .await
            .map_err(ApiError::from)?
            .is_some_and(|p| p.token == caller.principal.token),
    };
    if !still_valid {
        return Err(OpenFailure::Revoked { feed });
    }
    let participant = &caller.principal.participant.id;
    // Judge each replayed record by the roster in force when it was logged:
    // start from the memberships as of the resume cursor, rebuilt from the
    // store's roster changes (read after attaching, so they reach at least
    // the feed's position); the `Roster` entries the replay passes then
    // keep them current.
    let mut conversations = match &resume {
        Some(cursor) if cursor.epoch == attached.position.epoch => {
            let since = LogPosition {
                epoch: cursor.epoch.clone(),
                entry: cursor.entry.min(attached.position.entry),
            };
            let changes = store
                .roster_changes(&bay, &since)
                .await
                .map_err(ApiError::from)?;
            memberships_at(
                participant,
                cursor.entry,
                attached.position.entry,
                attached.conversations,
                &changes,
            )
        }
        // Another epoch: the replay answers EpochChanged before using them.
        _ => attached.conversations,
    };
    let start = resume.unwrap_or_else(|| attached.position.clone());
    let mut from = start.clone();
    let mut events = Vec::new();
    // Replays queue for a slot instead of all racing for store connections
    // at once: in a reconnect storm the pool would otherwise time out and
    // close sessions that merely had to wait.
    // The feed's recent records, when they cover the cursor: shared and
    // decoded already, so a resume storm after a short outage reads nothing.
    let mut from_feed = attached
        .replay
        .map(|records| (records, attached.position.entry));
    // Store replays queue for a slot instead of all reading at once, so a
    // resume storm's memory stays bounded.
    let _slot =
        match from_feed {
            Some(_) => None,
            None => {
                Some(state.replay_slots.acquire().await.map_err(|_| {
                    ApiError::new(ErrorCode::Unavailable, "the node is shutting down")
                })?)
            }
        };
    loop {
        let (records, through, read_all) = match from_feed.take() {
            Some((records, through)) => (records, through, true),
            None => match store
                .read_log(&bay, &from, REPLAY_READ, None)
                .await
                .map_err(ApiError::from)?
            {
                Replay::Records { records, through } => {
                    let read_all = records.len() < REPLAY_READ;
                    (records, through, read_all)
                }
                Replay::Expired | Replay::EpochChanged => {
                    let head = attached.position.clone();
                    let cursor = SessionCursor::after_replay(head.epoch.clone(), head.entry);
                    return Err(OpenFailure::Expired { feed, cursor });
                }
            },
        };
        let mut stopped_at: Option<EntryId> = None;
        for record in &records {
            if let Some(event) = project(record, participant, &mut conversations, &attached.peers) {
                events.push(Replayed {
                    entry: record.id,
                    event,
                });
                if events.len() >= max_events {
                    stopped_at = Some(record.id);
                    break;
                }
            }
        }
        let finished = match stopped_at {
            Some(at) => {
                let done = read_all && records.last().map(|r| r.id) == Some(at);
                Some((if done { through } else { at }, done))
            }
            None if read_all => Some((through, true)),
            None => None,
        };
        if let Some((through, complete)) = finished {
            // Drafts replay as one snapshot each, not as their deltas.
            let tagged = events.into_iter().map(|r| (r.entry, r.event)).collect();
            let (tagged, drafts) =
                snapshot_drafts(&*store, &bay, participant, &conversations, tagged)
                    .await
                    .map_err(ApiError::from)?;
            let events = tagged
                .into_iter()
                .map(|(entry, event)| Replayed { entry, event })
                .collect();
            return Ok(Opened {
                feed,
                cursor: SessionCursor::after_replay(from.epoch, through).with_drafts(drafts),
                events,
                complete,
            });
        }
        from.entry = through;
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

/// The delivery metrics of one transport, looked up once: a labelled
/// `counter!` / `histogram!` call hashes its key and searches the
/// recorder's registry, which per delivery would cost more than the
/// update itself. Looked up on first use, after `serve` installed the
/// recorder (a global the process sets once).
struct DeliveryMetrics {
    delivered: metrics::Counter,
    latency: metrics::Histogram,
}

fn delivery_metrics(transport: crate::connections::Transport) -> &'static DeliveryMetrics {
    use crate::connections::Transport;
    static BY_TRANSPORT: std::sync::OnceLock<[DeliveryMetrics; 3]> = std::sync::OnceLock::new();
    let all = BY_TRANSPORT.get_or_init(|| {
        [Transport::Ws, Transport::Updates, Transport::Sse].map(|t| DeliveryMetrics {
            delivered: metrics::counter!(crate::metrics::EVENTS_DELIVERED, "transport" => t.label()),
            latency: metrics::histogram!(crate::metrics::DELIVERY_SECONDS, "transport" => t.label()),
        })
    });
    match transport {
        Transport::Ws => &all[0],
        Transport::Updates => &all[1],
        Transport::Sse => &all[2],
    }
}

/// Records delivery metrics for the live records a session is about to
/// write, once per batch: `switchboard_events_delivered_total` grows by
/// the batch's events, and the publish-to-deliver latency histogram gets
/// one sample, the age of the batch's oldest message (`createdAt` → now;
/// the batch's worst). Replayed events are not recorded: their age is the
/// client's absence, not the gateway's latency.
pub fn observe_live_delivery(
    records: &[std::sync::Arc<LogRecord>],
    cursor: &SessionCursor,
    transport: crate::connections::Transport,
) {
    let mut delivered = 0u64;
    let mut oldest = None;
    for r in records.iter().filter(|r| cursor.is_new(r.id)) {
        match &r.event {
            LogEvent::Message { message, .. } => {
                delivered += 1;
                oldest = Some(
                    oldest.map_or(message.created_at, |o: chrono::DateTime<chrono::Utc>| {
                        o.min(message.created_at)
                    }),
                );
            }
            LogEvent::Change { .. } | LogEvent::Presence { .. } => delivered += 1,
            LogEvent::Roster { .. } | LogEvent::CredentialRevoked { .. } => {}
        }
    }
    if delivered == 0 {
        return;
    }
    let metrics = delivery_metrics(transport);
    metrics.delivered.increment(delivered);
    if let Some(created) = oldest {
        let age = (chrono::Utc::now() - created).to_std().unwrap_or_default();
        metrics.latency.record(age.as_secs_f64());
    }
}
