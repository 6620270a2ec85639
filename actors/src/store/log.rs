//! Entries of a Bay's event log: the replay buffer behind every cursor.
//!
//! Besides messages, the log carries the control facts every node must see
//! in order with them: roster snapshots (so a feed subscribes sessions to a
//! conversation exactly from the entry where they joined), credential
//! revocations and session openings (cluster-wide displacement).

use crate::model::StoredMessage;
use serde::{Deserialize, Serialize};
use switchboard_protocol::cursor::EntryId;
use switchboard_protocol::event::ConversationRef;
use switchboard_protocol::ids::{ConversationId, ParticipantId, SessionId, TokenId};

/// One log entry: its id and what happened.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogRecord {
    /// Position in the Bay's log (`<ms>-<seq>`, like a Redis stream id).
    /// Invariant: strictly increasing in log order.
    pub id: EntryId,
    /// What the entry records.
    pub event: LogEvent,
}

/// What a log entry records.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
// Records live behind `Arc` and are never moved by value in bulk, so the
// size gap between variants costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
pub enum LogEvent {
    /// A new message; delivered to the conversation's members as an `Event`.
    Message {
        /// `{ id, type, title }` of the conversation at append time; the
        /// event's `conversation`.
        conversation: ConversationRef,
        /// The message as stored, routing included, so every recipient's
        /// `shouldRespond` is computed from it alone.
        message: StoredMessage,
    },
    /// The conversation was created or changed: its full member list after
    /// the change. Idempotent, so replaying it twice is harmless.
    Roster {
        /// `{ id, type, title }` after the change.
        conversation: ConversationRef,
        /// Every member after the change, in roster order (a snapshot, not
        /// a delta).
        members: Vec<ParticipantId>,
    },
    /// A token was rotated or revoked: its sessions close (4001 / 401).
    CredentialRevoked {
        /// Whose token it was.
        participant: ParticipantId,
        /// Handle of the old token; only its sessions close.
        token: TokenId,
    },
    /// A connection for `token` opened; every other connection of that
    /// token, on any node, is displaced (4000 / empty answer).
    SessionOpened {
        /// Handle of the token the connection authenticated with.
        token: TokenId,
        /// The new connection; older connections of the token are displaced.
        session: SessionId,
    },
}

impl LogEvent {
    /// The conversation an event belongs to, if any.
    pub fn conversation(&self) -> Option<&ConversationId> {
        match self {
            LogEvent::Message { conversation, .. } | LogEvent::Roster { conversation, .. } => {
                Some(&conversation.id)
            }
            LogEvent::CredentialRevoked { .. } | LogEvent::SessionOpened { .. } => None,
        }
    }
}
