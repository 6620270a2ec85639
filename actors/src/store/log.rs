//! Entries of a Bay's event log: the replay buffer behind every cursor.
//!
//! Besides messages, the log carries the control facts every node must see
//! in order with them: roster snapshots (so a feed subscribes sessions to a
//! conversation exactly from the entry where they joined) and credential
//! revocations. Session openings (cluster-wide displacement) travel on a
//! channel of their own, [`super::displacement::Opening`], so replays never read them.

use super::StoreError;
use crate::model::StoredMessage;
use async_trait::async_trait;
use bytestring::ByteString;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::sync::OnceLock;
use std::time::Duration;
use switchboard_protocol::connector::RequestKind;
use switchboard_protocol::cursor::EntryId;
use switchboard_protocol::cursor::LogPosition;
use switchboard_protocol::event::ConversationRef;
use switchboard_protocol::event::Event;
use switchboard_protocol::event::{ReactionChange, UpdatedMessageView};
use switchboard_protocol::frame::ServerFrame;
use switchboard_protocol::ids::BayId;
use switchboard_protocol::ids::MessageId;
use switchboard_protocol::ids::{ConversationId, ParticipantId, TokenId};
use switchboard_protocol::poll::PollState;
use switchboard_protocol::presence::PresenceState;

mod classify;

/// Outcome of reading a Bay's log after a position.
#[derive(Debug, Clone)]
pub enum Replay {
    /// Entries after the position, in order, and `through`: the position a
    /// reader is past once it has handled them (the last entry's id, or the
    /// log head when the read reached it).
    Records {
        /// At most `max` records with ids above the position, in log order.
        records: Vec<Arc<LogRecord>>,
        /// The entry a reader is past after handling `records`. Invariant:
        /// at least the requested position and at least the last record's id.
        through: EntryId,
    },
    /// Entries after the position were trimmed from the replay buffer
    /// (or the position lies beyond the head): 409 CURSOR_EXPIRED / `reset`.
    Expired,
    /// The position belongs to another incarnation of the log (it was lost):
    /// 409 CURSOR_EXPIRED / `reset`.
    EpochChanged,
}

impl Replay {
    /// A page of `records` read after `after` with a limit of `max`, from a
    /// log whose newest entry is `last`: `through` is the last record when
    /// the page is full (more may follow), else the head (the reader has
    /// seen everything). Shared by both engines so they agree exactly.
    pub fn page(records: Vec<Arc<LogRecord>>, max: usize, after: EntryId, last: EntryId) -> Self {
        let through = if records.len() < max {
            last.max(after)
        } else {
            records.last().map(|r| r.id).unwrap_or(after)
        };
        Replay::Records { records, through }
    }
}

/// A roster change as the replay buffer keeps it: who was in
/// `conversation` just before log entry `at` changed it. A replay starting
/// at any cursor rebuilds the memberships in force at that cursor from the
/// first change after it (docs/architecture.md, "Membership and replays"), on any node, whatever that
/// node's feed has seen.
#[derive(Debug, Clone, PartialEq)]
pub struct RosterChange {
    /// Id of the `Roster` entry in the Bay's log.
    pub at: EntryId,
    /// The conversation that changed.
    pub conversation: ConversationId,
    /// Its members just before the change (empty when it was created).
    pub before: Vec<ParticipantId>,
    /// Its members right after the change (what the `Roster` entry says).
    pub after: Vec<ParticipantId>,
}

/// The Bay's event log, the replay buffer behind every cursor: its head,
/// reads after a position, control entries and the roster changes a replay
/// rebuilds memberships from.
///
/// # Errors
///
/// Every method fails with [`StoreError::Unavailable`] when the backing
/// service cannot be reached and [`StoreError::Corrupt`] when a stored record
/// does not decode.
#[async_trait]
pub trait LogStore: Send + Sync + 'static {
    /// The log's current head: its epoch and last entry id.
    async fn log_head(&self, bay: &BayId) -> Result<LogPosition, StoreError>;
    /// Reads up to `max` entries after `after`. With `block`, waits up to
    /// that long for the first entry when none is there yet (the feed's tail).
    async fn read_log(
        &self,
        bay: &BayId,
        after: &LogPosition,
        max: usize,
        block: Option<Duration>,
    ) -> Result<Replay, StoreError>;
    /// Appends a control entry.
    async fn append_control(&self, bay: &BayId, event: LogEvent) -> Result<EntryId, StoreError>;
    /// The roster changes logged after `after`, oldest first, within the
    /// replay buffer (empty when `after` is of another epoch: the replay
    /// itself then answers `EpochChanged`).
    async fn roster_changes(
        &self,
        bay: &BayId,
        after: &LogPosition,
    ) -> Result<Vec<RosterChange>, StoreError>;
}

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

    /// The event this record gives `recipient` (a member of its
    /// conversation), or `None` for control entries.
    pub fn event_for(&self, recipient: &ParticipantId) -> Option<Event> {
        if self.event.hidden_from(recipient) {
            return None;
        }
        match &self.event {
            LogEvent::Message {
                conversation,
                message,
            } => Some(message.event_for(conversation, recipient)),
            LogEvent::Change {
                conversation,
                change,
            } => Some(change.event_for(conversation, recipient)),
            LogEvent::Presence {
                participant,
                state,
                at,
            } => Some(Event::PresenceUpdated {
                participant_id: participant.clone(),
                state: *state,
                at: wire_time(*at),
            }),
            LogEvent::SummaryRequested {
                conversation,
                requested_by,
                through,
                version,
                at,
                ..
            } => Some(Event::SummaryRequested {
                conversation_id: conversation.id.clone(),
                requested_by: requested_by.clone(),
                through_message_id: through.clone(),
                version: *version,
                requested_at: wire_time(*at),
                conversation: conversation.clone(),
            }),
            LogEvent::ConnectorRequest {
                request,
                asker,
                asker_name,
                call,
                payload,
                expires_at,
                ..
            } => Some(Event::ConnectorRequest {
                request_id: request.clone(),
                kind: *call,
                from_id: asker.clone(),
                from_name: asker_name.clone(),
                payload: payload.clone(),
                expires_at: wire_time(*expires_at),
            }),
            LogEvent::Roster { .. }
            | LogEvent::CredentialRevoked { .. }
            | LogEvent::Suspension { .. }
            | LogEvent::WebhookChanged { .. }
            | LogEvent::ConnectorAnswered { .. }
            | LogEvent::Canary { .. } => None,
        }
    }

    /// The `{"t":"event",...}` frame this record gives `recipient`, or
    /// `None` for control entries. Identical to serializing
    /// `ServerFrame::Event` with [`LogRecord::event_for`]'s event.
    pub fn ws_event_frame(&self, recipient: &ParticipantId) -> Option<ByteString> {
        if self.event.hidden_from(recipient) {
            return None;
        }
        let (conversation, message) = match &self.event {
            LogEvent::Message {
                conversation,
                message,
            } => (conversation, message),
            LogEvent::Change {
                conversation,
                change,
            } => {
                if change.per_recipient() {
                    let event = change.event_for(conversation, recipient);
                    return Some(ServerFrame::Event { event: &event }.to_json().into());
                }
                // The same frame for everyone: render once, share.
                let frames = self.frames.get_or_init(|| {
                    let event = change.event_for(conversation, recipient);
                    let frame: ByteString = ServerFrame::Event { event: &event }.to_json().into();
                    [frame.clone(), frame]
                });
                return Some(frames[0].clone());
            }
            LogEvent::Presence { .. }
            | LogEvent::SummaryRequested { .. }
            | LogEvent::ConnectorRequest { .. } => {
                // The same frame for every recipient: render once, share.
                let frames = self.frames.get_or_init(|| {
                    let frame: ByteString = self
                        .event_for(recipient)
                        .map(|event| ServerFrame::Event { event: &event }.to_json())
                        .unwrap_or_default()
                        .into();
                    [frame.clone(), frame]
                });
                return Some(frames[0].clone());
            }
            LogEvent::Roster { .. }
            | LogEvent::CredentialRevoked { .. }
            | LogEvent::Suspension { .. }
            | LogEvent::WebhookChanged { .. }
            | LogEvent::ConnectorAnswered { .. }
            | LogEvent::Canary { .. } => return None,
        };
        let frames = self.frames.get_or_init(|| {
            // The sender's own view has shouldRespond false; flip it for the other.
            let mut event = message.event_for(conversation, &message.sender.id);
            let no = ServerFrame::Event { event: &event }.to_json();
            if let Event::Message { message: view, .. } = &mut event {
                view.should_respond = true;
            }
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
// The two large payloads are boxed: the enum is as large as its largest
// variant, and the replay buffer holds every record, most of them small
// (session controls, presence, rosters). Unboxed, each took 816 bytes.
pub enum LogEvent {
    /// A new message; delivered to the conversation's members as an `Event`.
    Message {
        /// `{ id, type, title }` of the conversation at append time; the
        /// event's `conversation`.
        conversation: ConversationRef,
        /// The message as stored, routing included, so every recipient's
        /// `shouldRespond` is computed from it alone.
        message: Box<StoredMessage>,
    },
    /// Something happened to a message after it was sent (edit, delete,
    /// reaction, vote) or to a member's read state; delivered to the
    /// conversation's members as of this entry, like a message.
    Change {
        /// `{ id, type, title }` of the conversation at the time of the change.
        conversation: ConversationRef,
        /// What changed.
        change: Box<Change>,
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
    /// A participant's activity presence changed (`presence.updated`);
    /// delivered to the participants who share a conversation with it as
    /// of this entry, never to itself, and never to webhooks. Logged by
    /// the Bay's presence publisher ([`crate::presence`]).
    Presence {
        /// Whose presence changed.
        participant: ParticipantId,
        /// The new state.
        state: PresenceState,
        /// When the publisher noticed the change.
        at: DateTime<Utc>,
    },
    /// A member asked for a fresh summary (`GET …/summary?refresh=1`):
    /// `summary.requested`, delivered to the Bay's summarizer alone, over
    /// every transport, whether or not it is a member (docs/summary.md).
    SummaryRequested {
        /// `{ id, type, title }` of the conversation to summarize.
        conversation: ConversationRef,
        /// The summarizer designated when it was asked: the one recipient.
        summarizer: ParticipantId,
        /// The member who asked.
        requested_by: ParticipantId,
        /// The stored summary's boundary, if there is one.
        through: Option<MessageId>,
        /// The stored summary's version (0: none yet).
        version: u64,
        /// When it was asked.
        at: DateTime<Utc>,
    },
    /// A participant called `POST /agents/{id}/ask` or `/send`:
    /// `connector.request`, delivered to the connector alone, over every
    /// transport (protocol §9, docs/connectors.md).
    ConnectorRequest {
        /// The pending request's id (see `store::PendingRequest`).
        request: String,
        /// The connector asked: the one recipient.
        connector: ParticipantId,
        /// Who asked.
        asker: ParticipantId,
        /// The asker's display name.
        asker_name: String,
        /// `ask` or `send`.
        call: RequestKind,
        /// `ask`: `{ query, limit }`; `send`: the caller's body.
        payload: serde_json::Value,
        /// When the asker stops waiting.
        expires_at: DateTime<Utc>,
    },
    /// The connector answered a request: no event for anyone, but the
    /// feeds hand it to the asker's held call, on whichever node it is.
    ConnectorAnswered {
        /// The request answered.
        request: String,
        /// Who asked (the held call's owner).
        asker: ParticipantId,
        /// `Ok(result)` or `Err(message)`: the connector's answer as given.
        answer: Result<serde_json::Value, String>,
    },
    /// A node's readiness probe (`/readyz`): logged only in the reserved
    /// canary Bay (`gateway/src/ops/canary.rs`), addressed to no one. The
    /// node that wrote it waits for its own feed of that Bay to read it
    /// back, which proves the store's write and the feed's tail both work.
    Canary {
        /// The node that wrote it ([`crate::node::id`]).
        node: String,
        /// When it was written, Unix ms of the writer's clock.
        sent_ms: u64,
    },
    /// A token was rotated or revoked: its sessions close (4001 / 401).
    CredentialRevoked {
        /// Whose token it was.
        participant: ParticipantId,
        /// Handle of the old token; only its sessions close.
        token: TokenId,
    },
    /// An operator suspended or reinstated a participant (`Some`) or the
    /// whole Bay (`None`): every node forgets the cached tokens concerned,
    /// and on suspension their sessions close (WS 4004; `/updates` 403).
    Suspension {
        /// Whose standing changed; `None`: the Bay's.
        participant: Option<ParticipantId>,
        /// `true`: suspended; `false`: reinstated.
        suspended: bool,
    },
    /// A participant's webhook was set, replaced or removed (by its owner,
    /// an operator or a 410): no event for anyone, but the idle delivery
    /// worker of that participant, on whichever node it runs, wakes on it
    /// and reads the webhook again instead of polling for changes
    /// (docs/webhooks.md). Logged by the store's
    /// [`WebhookStore`](crate::store::WebhookStore) writes.
    WebhookChanged {
        /// Whose webhook changed.
        participant: ParticipantId,
    },
}

impl LogEvent {
    /// Decodes a record (JSON, its keys in any order).
    ///
    /// serde reads an internally tagged enum (`{"kind": …, …}`) by first
    /// buffering the whole object into a tree of its own, then reading the
    /// variant from that tree: two passes, and an allocation per string. A
    /// message record (nearly every record, and every feed of the Bay on
    /// every node decodes each one) is read in one pass instead, as a
    /// struct whose `kind` must be `message`. Any other record fails that
    /// at its first unknown key or at its `kind` and goes through serde's
    /// own path, which also gives the error for one that is no `LogEvent`.
    ///
    /// # Errors
    /// serde_json's, for a record that is not a valid `LogEvent`.
    pub fn from_json(raw: &[u8]) -> serde_json::Result<LogEvent> {
        /// [`LogEvent::Message`]'s fields and its tag.
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct MessageRecord {
            #[serde(rename = "kind")]
            _kind: MessageKind,
            conversation: ConversationRef,
            message: StoredMessage,
        }
        /// The only `kind` a [`MessageRecord`] takes.
        #[derive(Deserialize)]
        #[serde(rename_all = "snake_case")]
        enum MessageKind {
            Message,
        }
        if let Ok(MessageRecord {
            conversation,
            message,
            ..
        }) = serde_json::from_slice(raw)
        {
            return Ok(LogEvent::Message {
                conversation,
                message: Box::new(message),
            });
        }
        serde_json::from_slice(raw)
    }
}

/// What a [`LogEvent::Change`] records. Each becomes one event type on the
/// wire (see [`Event`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "what", rename_all = "snake_case")]
#[allow(clippy::large_enum_variant)]
pub enum Change {
    /// `message.updated`: the message after the edit.
    Edited {
        /// The message as stored after the edit.
        message: StoredMessage,
    },
    /// `message.deleted`.
    Deleted {
        /// The deleted message.
        message: MessageId,
        /// When it was deleted.
        at: DateTime<Utc>,
        /// Who deleted it (the sender or an admin).
        by: ParticipantId,
    },
    /// `reaction.added` (`added`) or `reaction.removed`.
    Reaction {
        /// The message reacted to.
        message: MessageId,
        /// The emoji.
        emoji: String,
        /// Who reacted.
        participant: ParticipantId,
        /// Members holding the emoji after the change.
        count: u32,
        /// Added (true) or removed.
        added: bool,
    },
    /// `poll.updated`: the poll after a vote or its close.
    Poll {
        /// The `card.poll` message.
        message: MessageId,
        /// The poll after the change; each recipient's view is built from it.
        poll: PollState,
    },
    /// `read.updated`.
    Read {
        /// Whose marker moved.
        participant: ParticipantId,
        /// The newest message they have read.
        message: MessageId,
    },
    /// `message.delta`: one flush window's appends to a draft.
    Delta {
        /// The draft.
        message: MessageId,
        /// Where `text` starts, in Unicode scalar values.
        offset: u64,
        /// The appended text.
        text: String,
        /// The draft's version after the flush.
        version: u64,
    },
    /// `message.completed`: the draft became final, routed on its text.
    Completed {
        /// The message as stored at completion (final content, routing,
        /// `routing.suppressed` from the round cap).
        message: StoredMessage,
    },
    /// `message.cancelled` to members, `message.cancel_requested` to the
    /// draft's author.
    Cancelled {
        /// The draft.
        message: MessageId,
        /// Its author (who receives `message.cancel_requested`).
        author: ParticipantId,
        /// Who cancelled it.
        by: ParticipantId,
        /// Its final length, in Unicode scalar values.
        length: u64,
        /// Its version after the cancel.
        version: u64,
    },
    /// `typing.started`: a member is typing; shown to the other members
    /// (never to the typer) until `until`.
    Typing {
        /// Who is typing.
        participant: ParticipantId,
        /// When the indicator ends unless renewed.
        until: DateTime<Utc>,
    },
    /// `message.failed`: the draft was abandoned.
    Failed {
        /// The draft.
        message: MessageId,
        /// Why, lowercase text.
        reason: String,
        /// Its final length, in Unicode scalar values.
        length: u64,
        /// Its version after the failure.
        version: u64,
    },
}

impl Change {
    /// Whether recipients see different events (a poll's `mine`).
    pub fn per_recipient(&self) -> bool {
        matches!(
            self,
            Change::Poll { .. } | Change::Completed { .. } | Change::Cancelled { .. }
        )
    }

    /// Whether the change is a step of a draft's stream (`message.delta`):
    /// replays coalesce these into one snapshot, and webhooks skip them
    /// (a draft wakes nobody while it streams).
    pub fn is_delta(&self) -> bool {
        matches!(self, Change::Delta { .. })
    }

    /// Who made the change, when the log knows (a vote's voter is inside
    /// the poll, not named here).
    pub fn actor(&self) -> Option<&ParticipantId> {
        match self {
            Change::Edited { message } => Some(&message.sender.id),
            Change::Deleted { by, .. } => Some(by),
            Change::Reaction { participant, .. } | Change::Read { participant, .. } => {
                Some(participant)
            }
            Change::Completed { message } => Some(&message.sender.id),
            Change::Cancelled { by, .. } => Some(by),
            Change::Typing { participant, .. } => Some(participant),
            Change::Poll { .. } | Change::Delta { .. } | Change::Failed { .. } => None,
        }
    }

    /// The message the change is about, if any.
    pub fn message(&self) -> Option<&MessageId> {
        match self {
            Change::Edited { message } | Change::Completed { message } => Some(&message.id),
            Change::Deleted { message, .. }
            | Change::Reaction { message, .. }
            | Change::Poll { message, .. }
            | Change::Delta { message, .. }
            | Change::Cancelled { message, .. }
            | Change::Failed { message, .. } => Some(message),
            Change::Read { .. } | Change::Typing { .. } => None,
        }
    }

    /// The event `recipient`, a member of `conversation`, receives.
    pub fn event_for(&self, conversation: &ConversationRef, recipient: &ParticipantId) -> Event {
        let conversation_id = conversation.id.clone();
        let conversation = conversation.clone();
        match self {
            Change::Edited { message } => Event::MessageUpdated {
                conversation_id,
                message: updated_view(message),
                conversation,
            },
            Change::Deleted { message, at, by } => Event::MessageDeleted {
                conversation_id,
                message_id: message.clone(),
                deleted_at: wire_time(*at),
                deleted_by: by.clone(),
                conversation,
            },
            Change::Reaction {
                message,
                emoji,
                participant,
                count,
                added,
            } => reaction_event(conversation, message, emoji, participant, *count, *added),
            Change::Poll { message, poll } => Event::PollUpdated {
                conversation_id,
                message_id: message.clone(),
                poll: poll.view(recipient, true),
                conversation,
            },
            Change::Read {
                participant,
                message,
            } => Event::ReadUpdated {
                conversation_id,
                participant_id: participant.clone(),
                last_read_message_id: message.clone(),
                conversation,
            },
            Change::Delta {
                message,
                offset,
                text,
                version,
            } => Event::MessageDelta {
                conversation_id,
                message_id: message.clone(),
                offset: *offset,
                text: text.clone(),
                version: *version,
                conversation,
            },
            Change::Completed { message } => Event::MessageCompleted {
                conversation_id,
                message: message.view_for(recipient, message.sender.clone()),
                version: message.version,
                conversation,
            },
            Change::Cancelled {
                message,
                author,
                by,
                length,
                version,
            } => cancel_event(
                conversation,
                message,
                author == recipient,
                by,
                *length,
                *version,
            ),
            Change::Typing { participant, until } => Event::TypingStarted {
                conversation_id,
                participant_id: participant.clone(),
                expires_at: wire_time(*until),
                conversation,
            },
            Change::Failed {
                message,
                reason,
                length,
                version,
            } => Event::MessageFailed {
                conversation_id,
                message_id: message.clone(),
                reason: reason.clone(),
                length: *length,
                version: *version,
                conversation,
            },
        }
    }
}

/// The message a `message.updated` carries: the edited text with its
/// mentions as sent (an edit never re-routes), and `editedAt` (the creation
/// time for a message never edited).
fn updated_view(message: &StoredMessage) -> UpdatedMessageView {
    UpdatedMessageView {
        id: message.id.clone(),
        sender_id: message.sender.id.clone(),
        sender_type: message.sender.kind.sender_type(),
        content: message.content.clone(),
        created_at: message.created_at_wire(),
        edited_at: message
            .edited_at
            .map(wire_time)
            .unwrap_or_else(|| message.created_at_wire()),
        mentions: message.routing.mentions.clone(),
    }
}

/// `reaction.added` (`added`) or `reaction.removed` in `conversation`:
/// `participant`'s `emoji` on `message`, which `count` members hold after
/// the change.
fn reaction_event(
    conversation: ConversationRef,
    message: &MessageId,
    emoji: &str,
    participant: &ParticipantId,
    count: u32,
    added: bool,
) -> Event {
    let conversation_id = conversation.id.clone();
    let reaction = ReactionChange {
        message_id: message.clone(),
        emoji: emoji.to_owned(),
        participant_id: participant.clone(),
        count,
    };
    if added {
        Event::ReactionAdded {
            conversation_id,
            reaction,
            conversation,
        }
    } else {
        Event::ReactionRemoved {
            conversation_id,
            reaction,
            conversation,
        }
    }
}

/// A cancelled draft as one recipient sees it: `message.cancel_requested`
/// for its author (`to_author`), who stops producing text, and
/// `message.cancelled` for everyone else; `by` cancelled it, `length`
/// (Unicode scalar values) and `version` are the draft's final ones.
fn cancel_event(
    conversation: ConversationRef,
    message: &MessageId,
    to_author: bool,
    by: &ParticipantId,
    length: u64,
    version: u64,
) -> Event {
    let conversation_id = conversation.id.clone();
    let (message_id, by) = (message.clone(), by.clone());
    if to_author {
        Event::MessageCancelRequested {
            conversation_id,
            message_id,
            requested_by: by,
            length,
            version,
            conversation,
        }
    } else {
        Event::MessageCancelled {
            conversation_id,
            message_id,
            cancelled_by: by,
            length,
            version,
            conversation,
        }
    }
}

/// RFC 3339, UTC, milliseconds: every time on the wire.
pub fn wire_time(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_protocol::event::SenderView;
    use switchboard_protocol::ids::MessageId;
    use switchboard_protocol::model::{ConversationType, ParticipantKind, Role};
    use switchboard_protocol::routing::Routing;

    /// The fast path of `from_json` reads a message record exactly as
    /// serde's own path does, whatever the order of its keys, and other
    /// records still decode.
    #[test]
    fn records_decode_the_same_on_either_path() {
        let conversation = ConversationRef {
            id: ConversationId("c".into()),
            kind: ConversationType::Group,
            title: Some("Launch \"plan\"".into()),
        };
        let message = StoredMessage::new(
            MessageId("m".into()),
            ConversationId("c".into()),
            SenderView {
                id: ParticipantId("ana".into()),
                name: "Ana".into(),
                kind: ParticipantKind::User,
                role: Some(Role::Member),
            },
            "@Rex hi, \"kind\":\"message\" é".into(),
            None,
            None,
            Routing::default(),
        );
        let events = [
            LogEvent::Message {
                conversation: conversation.clone(),
                message: Box::new(message),
            },
            LogEvent::Roster {
                conversation,
                members: vec![ParticipantId("ana".into())],
            },
        ];
        for event in events {
            let raw = serde_json::to_vec(&event).unwrap();
            let slow: LogEvent = serde_json::from_slice(&raw).unwrap();
            assert_eq!(LogEvent::from_json(&raw).unwrap(), slow);
            assert_eq!(slow, event);
            // With `kind` not first, as the Redis engine may write it
            // (through a `Value`, whose keys are sorted unless serde_json's
            // `preserve_order` is on; then `kind` goes last here).
            let mut value = serde_json::to_value(&event).unwrap();
            let fields = value.as_object_mut().unwrap();
            let kind = fields.remove("kind").unwrap();
            fields.insert("kind".into(), kind);
            let moved = serde_json::to_vec(&value).unwrap();
            assert!(!moved.starts_with(br#"{"kind""#));
            assert_eq!(LogEvent::from_json(&moved).unwrap(), event);
        }
        assert!(LogEvent::from_json(br#"{"kind":"message","conversation":1}"#).is_err());
        assert!(LogEvent::from_json(br#"{"kind":"roster","message":{}}"#).is_err());
        assert!(LogEvent::from_json(b"[]").is_err());
    }

    #[test]
    fn cached_frames_equal_per_recipient_serialization() {
        let pid = |s: &str| ParticipantId(s.into());
        let conversation = ConversationRef {
            id: ConversationId("c".into()),
            kind: ConversationType::Group,
            title: None,
        };
        let message = StoredMessage::new(
            MessageId("m".into()),
            ConversationId("c".into()),
            SenderView {
                id: pid("ana"),
                name: "Ana".into(),
                kind: ParticipantKind::User,
                role: Some(Role::Member),
            },
            "@Rex hi".into(),
            None,
            None,
            Routing {
                mentions: vec![pid("rex")],
                respondents: vec![pid("rex")],
                ..Routing::default()
            },
        );
        let record = LogRecord::new(
            EntryId::new(1, 0),
            LogEvent::Message {
                conversation: conversation.clone(),
                message: Box::new(message.clone()),
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
