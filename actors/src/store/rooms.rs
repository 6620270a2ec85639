//! Rooms reached by link: a conversation shared through capability URLs
//! (docs/rooms.md). The room's messages are the conversation's own
//! messages (the `messages` area), its changes are the Bay's log entries
//! (the `log` area); this area keeps only what the link protocol adds: the
//! room record (name, visibility, the pinned brief, the metadata revision,
//! the last activity that keeps it alive) and the capabilities, each kept
//! as its SHA-256 ([`SecretHash`]) with the role it grants.

use super::{Created, SecretHash, StoreError, Updated};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId};

/// Who may see a room's links' existence: `public` rooms may be listed
/// and have the lower write rate; `private` is the default.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Visibility {
    /// Shared openly; participant writes are limited more tightly.
    Public,
    /// Shared with chosen people (the default).
    #[default]
    Private,
}

impl Visibility {
    /// `"public"` or `"private"`, as the wire says.
    pub fn as_str(self) -> &'static str {
        match self {
            Visibility::Public => "public",
            Visibility::Private => "private",
        }
    }
}

/// The role a capability grants (the room protocol's `role`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RoomRole {
    /// Every operation, deleting messages included.
    Owner,
    /// Read, listen, history, send, pin, unpin, react.
    Guest,
    /// Read, listen, history.
    Reader,
}

impl RoomRole {
    /// `"owner"`, `"guest"` or `"reader"`.
    pub fn as_str(self) -> &'static str {
        match self {
            RoomRole::Owner => "owner",
            RoomRole::Guest => "guest",
            RoomRole::Reader => "reader",
        }
    }
}

/// A room: one conversation of one Bay, shared by link.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Room {
    /// The Bay holding the conversation.
    pub bay: BayId,
    /// The conversation whose messages are the room's.
    pub conversation: ConversationId,
    /// Display name, 1–200 characters.
    pub name: String,
    /// `public` or `private`.
    pub visibility: Visibility,
    /// Creation time, Unix ms.
    pub created_at_ms: u64,
    /// The pinned message (the room's brief), if any.
    pub brief: Option<MessageId>,
    /// Bumped by every change of the brief or the room's metadata; from 1.
    pub metadata_revision: u64,
    /// The last authorized read or write, Unix ms: the room expires
    /// `rooms.inactivity_timeout` + `rooms.expiry_grace` after it.
    pub last_activity_ms: u64,
}

/// What a capability opens: a room and the role it grants there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoomLink {
    /// The room's Bay.
    pub bay: BayId,
    /// The room's conversation.
    pub conversation: ConversationId,
    /// The role granted.
    pub role: RoomRole,
}

/// A change of the brief, applied by [`RoomStore::set_brief`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BriefChange {
    /// Pin this message, replacing any other brief.
    Pin(MessageId),
    /// Clear the brief if it is this message (an unpin or the message's
    /// deletion); another brief stays.
    Unpin(MessageId),
}

/// Where a link author stands in a room ([`RoomStore::admit_room_author`]).
/// A room counts every distinct author its links ever admitted; an author
/// is `Joined` once its first write made it a member of the conversation,
/// so a joined author that is no member any more was removed by an
/// operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoomAuthor {
    /// Counted now: the room had fewer authors than the cap.
    New,
    /// Counted before, never recorded as joined (its first write did not
    /// finish).
    Pending,
    /// Counted and recorded as joined.
    Joined,
    /// Unknown, and the room counts the cap already: nothing changed.
    Full,
}

/// Room records and capabilities.
///
/// # Errors
///
/// Every method fails with [`StoreError::Unavailable`] when the backing
/// service cannot be reached and [`StoreError::Corrupt`] when a stored record
/// does not decode.
#[async_trait]
pub trait RoomStore: Send + Sync + 'static {
    /// Stores a room for its conversation unless one exists
    /// (`AlreadyExists`: nothing changed). The stored record has
    /// `metadata_revision` 1 and `last_activity_ms` = `created_at_ms`.
    async fn create_room(&self, room: Room) -> Result<Created<Room>, StoreError>;
    /// The room of a conversation, or `None`.
    async fn room(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
    ) -> Result<Option<Room>, StoreError>;
    /// Stores a capability (its hash) for `link`. `AlreadyExists` when the
    /// hash is taken (never, for 128 random bits; the caller mints another).
    async fn create_room_link(
        &self,
        capability: &SecretHash,
        link: RoomLink,
    ) -> Result<Created<()>, StoreError>;
    /// What a capability opens, or `None` for an unknown one.
    async fn room_link(&self, capability: &SecretHash) -> Result<Option<RoomLink>, StoreError>;
    /// Applies a brief change atomically, bumping `metadata_revision` when
    /// the brief really changed (a repeated pin or an unpin of another
    /// message changes nothing). `NotFound` when there is no such room.
    async fn set_brief(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        change: BriefChange,
    ) -> Result<Updated<Room>, StoreError>;
    /// Renames the room (its conversation's title changed), bumping
    /// `metadata_revision` when the name changed (an engine may bump it
    /// on a room's first rename to the same name). `NotFound` when there
    /// is no such room.
    async fn rename_room(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        name: &str,
    ) -> Result<Updated<Room>, StoreError>;
    /// Records an authorized read or write at `at_ms`; never moves the
    /// activity back. Nothing happens for an unknown room.
    async fn touch_room(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        at_ms: u64,
    ) -> Result<(), StoreError>;
    /// Counts `author` among the room's link authors unless it is
    /// already, when the room counts fewer than `max` (`Full` otherwise,
    /// nothing changed), and says where it stands. Atomic, so concurrent
    /// first writes never pass the cap.
    async fn admit_room_author(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        author: &ParticipantId,
        max: u32,
    ) -> Result<RoomAuthor, StoreError>;
    /// Records that a counted author joined the conversation (its first
    /// write made it a member); from then on it stays `Joined`.
    async fn room_author_joined(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        author: &ParticipantId,
    ) -> Result<(), StoreError>;
}
