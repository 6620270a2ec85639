//! Entries of a Bay's event log: the replay buffer behind every cursor.
//!
//! Besides messages, the log carries the control facts every node must see
//! in order with them: roster snapshots (so a feed subscribes sessions to a
//! conversation exactly from the entry where they joined) and credential
//! revocations. Session openings (cluster-wide displacement) travel on a
//! channel of their own, [`super::Opening`], so replays never read them.

use crate::model::StoredMessage;
use bytestring::ByteString;
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;
use switchboard_protocol::cursor::EntryId;
use switchboard_protocol::event::ConversationRef;
use switchboard_protocol::event::Event;
use switchboard_protocol::frame::ServerFrame;
use switchboard_protocol::ids::{ConversationId, ParticipantId, TokenId};

/// One log entry: its id and what happened.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogRecord {
    /// Position in the Bay's log (`<ms>-<seq>`, like a Redis stream id).
    /// Invariant: strictly increasing in log order.
    pub id: EntryId,
    /// What the entry records.
    pub event: LogEvent,
    /// A message's `/ws` event frame, rendered on first use once per verdict
    /// (index 0: `shouldRespond` false, 1: true) and then shared, reference
    /// counted, by every session the record reaches: fan-out to N sessions
    /// serializes the message twice, not N times.
    #[serde(skip)]
    frames: OnceLock<[ByteString; 2]>,
}

impl LogRecord {
    /// A record at `id`.
    pub fn new(id: EntryId, event: LogEvent) -> Self {
        LogRecord {
            id,
            event,
            frames: OnceLock::new(),
        }
    }

    /// The `{"t":"event",...}` frame this record gives `recipient`, or
    /// `None` for control entries. Identical to serializing
    /// `ServerFrame::Event` with the event `StoredMessage::event_for` builds.
    pub fn ws_event_frame(&self, recipient: &ParticipantId) -> Option<ByteString> {
        let LogEvent::Message {
            conversation,
            message,
        } = &self.event
        else {
            return None;
        };
        let frames = self.frames.get_or_init(|| {
            // The sender's own view has shouldRespond false; flip it for the other.
            let mut event = message.event_for(conversation, &message.sender.id);
            let no = ServerFrame::Event { event: &event }.to_json();
            let Event::Message { message: view, .. } = &mut event;
            view.should_respond = true;
            let yes = ServerFrame::Event { event: &event }.to_json();
            [no.into(), yes.into()]
        });
        let verdict = message
            .routing
            .should_respond(recipient, &message.sender.id);
        Some(frames[usize::from(verdict)].clone())
    }
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
}

impl LogEvent {
    /// The `Roster` entry of `conversation` as it is now.
    pub fn roster(conversation: &crate::model::Conversation) -> Self {
        LogEvent::Roster {
            conversation: conversation.reference(),
            members: conversation.member_ids(),
        }
    }

    /// The conversation an event belongs to, if any.
    pub fn conversation(&self) -> Option<&ConversationId> {
        match self {
            LogEvent::Message { conversation, .. } | LogEvent::Roster { conversation, .. } => {
                Some(&conversation.id)
            }
            LogEvent::CredentialRevoked { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use switchboard_protocol::event::SenderView;
    use switchboard_protocol::ids::MessageId;
    use switchboard_protocol::model::{ConversationType, ParticipantKind, Role};
    use switchboard_protocol::routing::Routing;

    #[test]
    fn cached_frames_equal_per_recipient_serialization() {
        let pid = |s: &str| ParticipantId(s.into());
        let conversation = ConversationRef {
            id: ConversationId("c".into()),
            kind: ConversationType::Group,
            title: None,
        };
        let message = StoredMessage {
            id: MessageId("m".into()),
            conversation_id: ConversationId("c".into()),
            sender: SenderView {
                id: pid("ana"),
                name: "Ana".into(),
                kind: ParticipantKind::User,
                role: Some(Role::Member),
            },
            content: "@Rex hi".into(),
            created_at: Utc::now(),
            metadata: None,
            reply_to: None,
            routing: Routing {
                mentions: vec![pid("rex")],
                respondents: vec![pid("rex")],
                ..Routing::default()
            },
        };
        let record = LogRecord::new(
            EntryId::new(1, 0),
            LogEvent::Message {
                conversation: conversation.clone(),
                message: message.clone(),
            },
        );
        for who in ["rex", "brain", "ana"] {
            let expected = ServerFrame::Event {
                event: &message.event_for(&conversation, &pid(who)),
            }
            .to_json();
            assert_eq!(
                &*record.ws_event_frame(&pid(who)).unwrap(),
                expected.as_str(),
                "{who}"
            );
        }
    }
}
