//! The room protocol's shapes: messages, reactions and the room record,
//! with ids and revisions as decimal strings (docs/rooms.md, "Shapes").
//!
//! - A message's `id` is its stored id's ULID (128 bits) written in
//!   decimal, so ids order like creation and convert back without a lookup.
//! - A revision is a position in the Bay's log, `ms × 10⁶ + seq` of the
//!   entry id: `revision`, the cursor's position and `changed_revision` in
//!   FOLLOW answers are exact; READ and history give `created_revision`
//!   and `changed_revision` from the message's own times (creation, last
//!   edit), a lower bound of the entries that logged them.

use super::Opened;
use crate::error::ApiError;
use serde::Serialize;
use std::collections::HashMap;
use switchboard_actors::model::{Participant, StoredMessage};
use switchboard_actors::store::log::wire_time;
use switchboard_actors::store::Store;
use switchboard_protocol::cursor::EntryId;
use switchboard_protocol::ids::{BayId, MessageId, ParticipantId};
use switchboard_protocol::model::MessageState;
use utoipa::ToSchema;

/// Participant ids of link authors start with this (see [`super::authors`]).
pub const LINK_AUTHOR_PREFIX: &str = "p_link_";

/// Whether a sender posted through a link (a link author, or a created
/// room's owner) rather than as a member of the Bay.
fn link_side(sender: &ParticipantId) -> bool {
    sender.0.starts_with(LINK_AUTHOR_PREFIX) || sender.0 == super::create::OWNER_ID
}

/// The decimal wire id of a stored message id (`msg_<ulid>`), or `None`
/// for an id of another shape.
pub fn wire_id(id: &MessageId) -> Option<String> {
    let ulid = id.0.strip_prefix("msg_")?;
    ulid::Ulid::from_string(ulid)
        .ok()
        .map(|u| u128::from(u).to_string())
}

/// The stored message id a decimal wire id names, or `None` when it is
/// not a decimal of at most 128 bits.
pub fn message_id(wire: &str) -> Option<MessageId> {
    if wire.is_empty() || wire.len() > 39 || !wire.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u128 = wire.parse().ok()?;
    Some(MessageId(format!(
        "msg_{}",
        ulid::Ulid::from(n).to_string().to_ascii_lowercase()
    )))
}

/// A log position as a decimal revision: `ms × 10⁶ + seq`.
pub fn revision(entry: EntryId) -> u64 {
    entry
        .ms
        .saturating_mul(1_000_000)
        .saturating_add(entry.seq.min(999_999))
}

/// The revision of a time in ms (the first position of that millisecond).
fn revision_at_ms(ms: i64) -> u64 {
    revision(EntryId::new(ms.max(0) as u64, 0))
}

/// One emoji's reactions: the names of who reacted, in order.
#[derive(Serialize, ToSchema, Clone, Debug)]
pub struct RoomReaction {
    /// The emoji.
    pub emoji: String,
    /// Display names of who reacted with it.
    pub authors: Vec<String>,
}

/// A message as the room protocol shows it.
#[derive(Serialize, ToSchema, Clone, Debug)]
pub struct RoomMessage {
    /// Decimal string; stable, ordered like creation.
    pub id: String,
    /// The author's display name (unverified for link posts).
    pub author: String,
    /// The text.
    pub body: String,
    /// `null` for a link post (or the room's own brief), `"bay"` for a post of a Bay member.
    pub source: Option<&'static str>,
    /// ISO 8601 UTC, ms precision.
    pub created_at: String,
    /// The decimal id of the quoted message, or null.
    pub reply_to: Option<String>,
    /// Whether it is the room's brief.
    pub pinned: bool,
    /// Reactions, one entry per emoji.
    pub reactions: Vec<RoomReaction>,
    /// Decimal revision at creation.
    pub created_revision: String,
    /// Decimal revision of its last change.
    pub changed_revision: String,
}

/// `expiration` of the room record.
#[derive(Serialize, ToSchema, Clone, Debug)]
pub struct RoomExpiration {
    /// Grace after the inactivity timeout, seconds.
    pub grace_seconds: u64,
    /// Inactivity timeout, seconds.
    pub inactivity_seconds: u64,
}

/// The room record of a READ (and of a FOLLOW when the metadata changed).
#[derive(Serialize, ToSchema, Clone, Debug)]
pub struct RoomView {
    /// ISO 8601 UTC creation time.
    pub created_at: String,
    /// When it expires without activity.
    pub expiration: RoomExpiration,
    /// Decimal; bumped by every brief or metadata change.
    pub metadata_revision: String,
    /// Display name.
    pub name: String,
    /// Whether this link is the owner's.
    pub owner: bool,
    /// `owner`, `guest` or `reader`.
    pub role: &'static str,
    /// `public` or `private`.
    pub visibility: &'static str,
    /// Whether this link may send.
    pub writable: bool,
}

impl RoomView {
    /// The record as `link` sees it.
    pub fn of(link: &Opened, settings: &switchboard_config::RoomsSettings) -> Self {
        RoomView {
            created_at: crate::api::pairing::iso(link.room.created_at_ms),
            expiration: RoomExpiration {
                grace_seconds: settings.expiry_grace.as_secs(),
                inactivity_seconds: settings.inactivity_timeout.as_secs(),
            },
            metadata_revision: link.room.metadata_revision.to_string(),
            name: link.room.name.clone(),
            owner: link.role == switchboard_actors::store::RoomRole::Owner,
            role: link.role.as_str(),
            visibility: link.room.visibility.as_str(),
            writable: link.may("send"),
        }
    }
}

/// Whether a stored message shows in the room: complete and not deleted
/// (drafts show once they complete; tombstones go as tombstones).
pub fn visible(m: &StoredMessage) -> bool {
    m.state == MessageState::Complete && !m.is_deleted() && wire_id(&m.id).is_some()
}

/// Renders messages, resolving reaction authors' names in one store read.
/// `changed` gives a message's exact changed revision when the caller
/// knows it (FOLLOW); otherwise it comes from the message's times.
///
/// # Errors
/// 503 when the store is down.
pub async fn render(
    store: &dyn Store,
    bay: &BayId,
    brief: Option<&MessageId>,
    messages: &[StoredMessage],
    changed: &HashMap<MessageId, u64>,
) -> Result<Vec<RoomMessage>, ApiError> {
    let mut ids: Vec<ParticipantId> = messages
        .iter()
        .flat_map(|m| m.reactions.iter().flat_map(|r| r.by.iter().cloned()))
        .collect();
    ids.sort();
    ids.dedup();
    let names: HashMap<ParticipantId, String> = if ids.is_empty() {
        HashMap::new()
    } else {
        store
            .participants_in(bay, &ids)
            .await?
            .into_iter()
            .map(|p: Participant| (p.id, p.name))
            .collect()
    };
    Ok(messages
        .iter()
        .filter_map(|m| one(m, brief, &names, changed.get(&m.id).copied()))
        .collect())
}

fn one(
    m: &StoredMessage,
    brief: Option<&MessageId>,
    names: &HashMap<ParticipantId, String>,
    changed: Option<u64>,
) -> Option<RoomMessage> {
    let id = wire_id(&m.id)?;
    let created = revision_at_ms(m.created_at.timestamp_millis());
    let edited = m
        .edited_at
        .map_or(created, |t| revision_at_ms(t.timestamp_millis()));
    Some(RoomMessage {
        id,
        author: m.sender.name.clone(),
        body: m.content.clone(),
        source: (!link_side(&m.sender.id)).then_some("bay"),
        created_at: wire_time(m.created_at),
        reply_to: m.reply_to.as_ref().and_then(|r| wire_id(&r.id)),
        pinned: brief == Some(&m.id),
        reactions: m
            .reactions
            .iter()
            .map(|r| RoomReaction {
                emoji: r.emoji.clone(),
                authors: r
                    .by
                    .iter()
                    .map(|p| names.get(p).cloned().unwrap_or_else(|| p.0.clone()))
                    .collect(),
            })
            .collect(),
        created_revision: created.to_string(),
        changed_revision: changed.unwrap_or(edited).max(created).to_string(),
    })
}
