//! FOLLOW: `GET /r/{cap}?cursor=&wait=&limit=` (docs/rooms.md, "FOLLOW").
//!
//! The room cursor is a position in the Bay's log plus the room's
//! metadata revision. A FOLLOW reads the log after the position, keeps the
//! entries about the room's conversation (messages and every change of
//! one: edits, reactions, deletions, completed drafts), and answers each
//! message they name once, as it is now: an upsert, or a tombstone when it
//! is gone. The brief and room record come along when the metadata
//! revision moved. With nothing to say it holds, woken by the Bay's feed
//! on the next entry of the conversation ([`WaitForEntry`], any node's
//! writes: the feed tails the shared log) and re-reading the room record
//! every [`METADATA_RECHECK`] for brief changes.
//!
//! A cursor this server did not issue, or one the replay buffer no longer
//! covers (older than `replay_window`, or a log that was reset), is 409
//! CURSOR_EXPIRED: the client READs again and continues from there.

use super::read::{self, MAX_LIMIT};
use super::view::{self, RoomMessage, RoomView};
use super::Opened;
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::{HttpRequest, HttpResponse};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::Serialize;
use std::collections::HashMap;
use std::time::Duration;
use switchboard_actors::feed::WaitForEntry;
use switchboard_actors::store::log::{Change, LogEvent, LogRecord};
use switchboard_actors::store::Replay;
use switchboard_protocol::cursor::{EntryId, Epoch, LogPosition};
use switchboard_protocol::error::ErrorCode;
use switchboard_protocol::ids::MessageId;
use tokio::sync::oneshot;
use utoipa::ToSchema;

/// How often a held FOLLOW re-reads the room record (brief changes made
/// on other nodes reach it within this).
pub const METADATA_RECHECK: Duration = Duration::from_secs(1);
/// Every how many [`METADATA_RECHECK`] ticks a held FOLLOW re-reads the
/// log even unwoken (5 s: a wait registered while the feed was still
/// loading ends within this).
const LOG_RECHECK_TICKS: u32 = 5;
/// Log entries read per store call.
const LOG_PAGE: usize = 500;

/// A room cursor: `base64url("r1.<epoch>.<ms>-<seq>.<metadata revision>")`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoomCursor {
    /// Where in the Bay's log the reader is.
    pub position: LogPosition,
    /// The metadata revision the reader has seen.
    pub metadata_revision: u64,
}

impl RoomCursor {
    /// The opaque wire form.
    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(format!(
            "r1.{}.{}.{}",
            self.position.epoch, self.position.entry, self.metadata_revision
        ))
    }

    /// Decodes the wire form; `None` for anything `encode` could not make.
    pub fn decode(raw: &str) -> Option<Self> {
        if raw.len() > 160 {
            return None;
        }
        let text = String::from_utf8(URL_SAFE_NO_PAD.decode(raw).ok()?).ok()?;
        let mut parts = text.split('.');
        let (Some("r1"), Some(epoch), Some(entry), Some(mrev), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return None;
        };
        if !Epoch::is_valid(epoch) {
            return None;
        }
        Some(RoomCursor {
            position: LogPosition {
                epoch: Epoch(epoch.to_owned()),
                entry: entry.parse::<EntryId>().ok()?,
            },
            metadata_revision: mrev.parse().ok()?,
        })
    }
}

/// A FOLLOW's answer (an empty one has the same shape).
#[derive(Serialize, ToSchema)]
pub struct RoomFollow {
    /// Messages created or changed since the cursor, as they are now, by id.
    pub upserts: Vec<RoomMessage>,
    /// Decimal ids of messages removed since the cursor.
    pub tombstones: Vec<String>,
    /// The room record, present when the metadata changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub room: Option<RoomView>,
    /// The brief (null: none), present when the metadata changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<RoomMessage>)]
    pub brief: Option<Option<RoomMessage>>,
    /// Whether the next page follows at once (read it without waiting).
    pub has_more: bool,
    /// Decimal revision of the room's log this answer covers.
    pub revision: String,
    /// The next cursor.
    pub cursor: String,
}

/// Messages named by the log after a position.
struct Page {
    /// Named messages, first-named first, with the revision of the last
    /// entry naming each.
    changed: Vec<(MessageId, u64)>,
    /// Where the next read starts.
    through: EntryId,
    /// Whether the page stopped at `limit` before the head.
    has_more: bool,
}

fn expired() -> ApiError {
    ApiError::new(
        ErrorCode::CursorExpired,
        "this cursor cannot be resumed (too old, or not from this room): READ the link again",
    )
}

/// The message a log record changes in `conversation`, if it is one the
/// room shows a change of.
fn named(
    record: &LogRecord,
    conversation: &switchboard_protocol::ids::ConversationId,
) -> Option<MessageId> {
    match &record.event {
        LogEvent::Message {
            conversation: c,
            message,
        } if &c.id == conversation => Some(message.id.clone()),
        LogEvent::Change {
            conversation: c,
            change,
        } if &c.id == conversation => match &**change {
            Change::Delta { .. } | Change::Read { .. } | Change::Typing { .. } => None,
            other => other.message().cloned(),
        },
        _ => None,
    }
}

/// Reads the log after `after` until `limit` messages are named or the
/// head is reached.
async fn collect(
    state: &AppState,
    link: &Opened,
    after: &LogPosition,
    limit: usize,
) -> Result<Page, ApiError> {
    let bay = &link.room.bay;
    let mut position = after.clone();
    let mut changed: Vec<(MessageId, u64)> = Vec::new();
    loop {
        let (records, through) = match state.store.read_log(bay, &position, LOG_PAGE, None).await? {
            Replay::Records { records, through } => (records, through),
            Replay::Expired | Replay::EpochChanged => return Err(expired()),
        };
        let full = records.len() >= LOG_PAGE;
        for record in &records {
            let Some(id) = named(record, &link.room.conversation) else {
                continue;
            };
            let rev = view::revision(record.id);
            let full_page = changed.len() == limit;
            match changed.iter_mut().find(|(m, _)| m == &id) {
                Some(seen) => seen.1 = rev,
                None if full_page => {
                    // Stop before this record: the next page starts here.
                    return Ok(Page {
                        changed,
                        through: position.entry,
                        has_more: true,
                    });
                }
                None => changed.push((id, rev)),
            }
            position.entry = record.id;
        }
        position.entry = through.max(position.entry);
        if !full {
            return Ok(Page {
                changed,
                through: position.entry,
                has_more: false,
            });
        }
    }
}

/// Refuses (409 CURSOR_EXPIRED) a cursor this server cannot have issued
/// for the room, or one the replay window no longer covers:
///
/// - a metadata revision above the room's (revisions only grow);
/// - a position the window's trim point has passed: the first log entry
///   after it is older than `replay_window`. The store trims when it
///   appends, so a quiet log may still hold such entries; they are refused
///   all the same. A follower of a quiet room is never refused for the
///   quiet: its position may be old, but nothing older than the window
///   follows it.
async fn check_issued(
    state: &AppState,
    link: &Opened,
    cursor: &RoomCursor,
) -> Result<(), ApiError> {
    if cursor.metadata_revision > link.room.metadata_revision {
        return Err(expired());
    }
    let window = state.settings.replay_window.as_millis() as u64;
    let trim_point = switchboard_actors::store::now_ms().saturating_sub(window);
    // Entries after the position are no older than it.
    if cursor.position.entry.ms >= trim_point {
        return Ok(());
    }
    match state
        .store
        .read_log(&link.room.bay, &cursor.position, 1, None)
        .await?
    {
        Replay::Records { records, .. } => match records.first() {
            Some(first) if first.id.ms < trim_point => Err(expired()),
            _ => Ok(()),
        },
        Replay::Expired | Replay::EpochChanged => Err(expired()),
    }
}

/// Registers a wait for the next entry of the room's conversation.
async fn register(
    state: &AppState,
    link: &Opened,
) -> Result<oneshot::Receiver<std::sync::Arc<LogRecord>>, ApiError> {
    let attempt = || {
        let (tx, rx) = oneshot::channel();
        let sent = state.registry.feed(&link.room.bay).send(WaitForEntry {
            conversation: link.room.conversation.clone(),
            reply: tx,
        });
        async move { sent.await.map(|()| rx) }
    };
    // The feed may stop (idle) between lookup and send: ask again once.
    Ok(match attempt().await {
        Ok(rx) => rx,
        Err(_) => attempt().await?,
    })
}

fn wait_of(state: &AppState, params: &HashMap<String, String>) -> Result<Duration, ApiError> {
    let max = state.settings.rooms.max_wait;
    match params.get("wait") {
        None => Ok(max),
        Some(raw) => raw
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(|s| Duration::from_secs_f64(s).min(max))
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::InvalidRequest,
                    "wait must be a number of seconds, 0 or more",
                )
            }),
    }
}

/// Answers a FOLLOW for `link`. A held FOLLOW answers at once, with
/// nothing new and its cursor, when the node starts draining.
///
/// # Errors
/// 409 CURSOR_EXPIRED (READ again); 400 for a bad `wait` or `limit`; 429
/// when the IP holds too many waiting FOLLOWs; 503 UNAVAILABLE (with
/// `Retry-After`) on a draining node, and when the store is down.
pub async fn follow(
    state: &AppState,
    req: &HttpRequest,
    link: &Opened,
    params: &HashMap<String, String>,
) -> Result<HttpResponse, ApiError> {
    // A draining node takes no new FOLLOW: the client polls another.
    if state.is_draining() {
        return Err(ApiError::new(
            ErrorCode::Unavailable,
            "this node is draining; poll again, another node answers",
        )
        .retry_after(Duration::from_secs(1)));
    }
    let mut cursor = params
        .get("cursor")
        .and_then(|c| RoomCursor::decode(c))
        .ok_or_else(expired)?;
    let limit = read::limit(params, MAX_LIMIT)?;
    let wait = wait_of(state, params)?;
    check_issued(state, link, &cursor).await?;
    let deadline = tokio::time::Instant::now() + wait;
    let mut holding = None;
    let mut rx = register(state, link).await?;
    let mut read_log = true;
    let mut ticks = 0u32;
    // A drain answers a held FOLLOW at once, as having nothing new.
    let drain = state.drain_started();
    tokio::pin!(drain);
    let mut page = Page {
        changed: Vec::new(),
        through: cursor.position.entry,
        has_more: false,
    };
    loop {
        if read_log {
            page = collect(state, link, &cursor.position, limit).await?;
            cursor.position.entry = page.through;
        }
        let room = state
            .store
            .room(&link.room.bay, &link.room.conversation)
            .await?
            .ok_or_else(ApiError::not_found)?;
        let metadata = room.metadata_revision != cursor.metadata_revision;
        let now = tokio::time::Instant::now();
        let fresh = Opened {
            room,
            ..link.clone()
        };
        if !page.changed.is_empty() || metadata || now >= deadline {
            return answer(state, &fresh, cursor, page, metadata).await;
        }
        if holding.is_none() {
            holding = Some(state.rooms.hold(state.client_of(req))?);
        }
        let tick = (now + METADATA_RECHECK).min(deadline);
        let woken = tokio::select! {
            woken = tokio::time::timeout_at(tick, &mut rx) => woken,
            () = &mut drain => return answer(state, &fresh, cursor, page, false).await,
        };
        read_log = match woken {
            Ok(_) => {
                rx = register(state, link).await?;
                true
            }
            // Unwoken: the record every tick, the log every LOG_RECHECK.
            Err(_) => {
                ticks += 1;
                ticks.is_multiple_of(LOG_RECHECK_TICKS)
            }
        };
    }
}

/// Builds the answer: each named message as it is now.
async fn answer(
    state: &AppState,
    link: &Opened,
    mut cursor: RoomCursor,
    page: Page,
    metadata: bool,
) -> Result<HttpResponse, ApiError> {
    let (bay, conv) = (&link.room.bay, &link.room.conversation);
    let mut current = Vec::new();
    let mut tombstones = Vec::new();
    let mut revisions = HashMap::new();
    for (id, rev) in &page.changed {
        match state.store.message(bay, conv, id).await? {
            Some(m) if view::visible(&m) => {
                revisions.insert(id.clone(), *rev);
                current.push(m);
            }
            // An open draft shows once it completes.
            Some(m) if !m.is_deleted() && m.is_streaming() => {}
            _ => tombstones.extend(view::wire_id(id)),
        }
    }
    current.sort_by_key(|m| m.created_at);
    let upserts = view::render(
        &*state.store,
        bay,
        link.room.brief.as_ref(),
        &current,
        &revisions,
    )
    .await?;
    let (room, brief) = if metadata {
        (
            Some(RoomView::of(link, &state.settings.rooms)),
            Some(read::brief(state, link).await?),
        )
    } else {
        (None, None)
    };
    cursor.metadata_revision = link.room.metadata_revision;
    Ok(HttpResponse::Ok().json(RoomFollow {
        upserts,
        tombstones,
        room,
        brief,
        has_more: page.has_more,
        revision: view::revision(cursor.position.entry).to_string(),
        cursor: cursor.encode(),
    }))
}
