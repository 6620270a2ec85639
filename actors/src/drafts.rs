//! Streaming drafts as sessions see them: replays send snapshots, not the
//! history of deltas, and live deltas continue exactly after the snapshot.
//!
//! A replay (a `/ws` resume, an `/updates` call, any transport that reads
//! the log from a cursor) may pass many `message.delta` entries of one
//! draft. A client that resumes may have lost the text it had (a page
//! refresh), and replaying the deltas would be both long and useless to
//! it, so [`snapshot_drafts`] replaces them with one `message.streaming`
//! event carrying the draft's text and version as of the replay's last
//! delta of it, at the place of the draft's first replayed entry. The
//! session then remembers that version ([`DraftVersions`]) and drops live
//! deltas at or below it: every delta carries the draft's version after
//! it, and versions only grow, so text is neither repeated nor skipped.
//!
//! The snapshot stops at the replay's last delta, not at the store's text
//! now, because a replay goes in pages and each page has its cursor: the
//! deltas logged after a page's end come in the next page, or in the
//! replay of a new session resuming from that page's cursor. A snapshot
//! holding them already would make those deltas go back in version. Held
//! at the page's end, it is exactly what the cursor covers, so any client
//! that follows the cursor sees versions only grow, across sessions.

use crate::store::log::{Change, LogEvent, LogRecord};
use crate::store::{Store, StoreError};
use std::collections::{HashMap, HashSet};
use switchboard_protocol::event::{ConversationRef, Event};
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId};

/// Drafts a session was sent a snapshot of, with the snapshot's version.
/// Entries go when the draft ends.
#[derive(Debug, Clone, Default)]
pub struct DraftVersions(HashMap<MessageId, u64>);

impl DraftVersions {
    /// Whether live `record` goes out: a delta at or below the snapshot's
    /// version does not. A draft's end forgets it.
    pub fn admits(&mut self, record: &LogRecord) -> bool {
        if self.0.is_empty() {
            return true;
        }
        let LogEvent::Change { change, .. } = &record.event else {
            return true;
        };
        match &**change {
            Change::Delta {
                message, version, ..
            } => self.0.get(message).is_none_or(|seen| version > seen),
            Change::Completed { .. } | Change::Cancelled { .. } | Change::Failed { .. } => {
                if let Some(id) = change.message() {
                    self.0.remove(id);
                }
                true
            }
            _ => true,
        }
    }

    /// Adds the snapshots of a later replay page; a draft snapshotted
    /// again keeps the newer version.
    pub fn merge(&mut self, later: DraftVersions) {
        self.0.extend(later.0);
    }

    /// The snapshot version recorded for `message`, if any.
    pub fn version(&self, message: &MessageId) -> Option<u64> {
        self.0.get(message).copied()
    }
}

/// Replaces the `message.delta` events of each draft in `events` (a
/// replay page, in log order, for `recipient`) with one `message.streaming`
/// snapshot read from the store, as of the page's last delta of it, at the
/// place of the draft's first replayed event; a draft's opening event goes
/// too when deltas of it follow. Drafts `held` already has a snapshot of
/// (an earlier page of the session) keep their deltas above it, as they
/// are, and lose those at or below it. Each event carries a tag `T` (the transport's, e.g. its log
/// entry); a snapshot keeps the tag of the event whose place it takes.
/// Returns the events and the snapshots' versions.
///
/// Only open drafts of conversations `recipient` is a member of at the end
/// of the replay (`members`) get a snapshot: the store's text is the text
/// *now*, which someone removed meanwhile must not read. A draft that
/// ended keeps its events when the replay holds its end (they are its
/// exact history, and the end's version follows theirs); one that
/// completed loses its opening and deltas instead, since
/// `message.completed` carries the whole message.
///
/// # Errors
///
/// [`StoreError`] when a draft cannot be read.
pub async fn snapshot_drafts<T>(
    store: &dyn Store,
    bay: &BayId,
    recipient: &ParticipantId,
    members: &HashSet<ConversationId>,
    held: &DraftVersions,
    events: Vec<(T, Event)>,
) -> Result<(Vec<(T, Event)>, DraftVersions), StoreError> {
    let mut versions = DraftVersions::default();
    // A draft an earlier page of this session snapshotted: its deltas
    // above that snapshot follow it as they are (they continue its text).
    let events: Vec<(T, Event)> = events
        .into_iter()
        .filter(|(_, e)| match e {
            Event::MessageDelta {
                message_id,
                version,
                ..
            } => held.version(message_id).is_none_or(|v| *version > v),
            _ => true,
        })
        .collect();
    let mut streamed = fates(&events);
    streamed.retain(|id, _| held.version(id).is_none());
    let reached = last_deltas(&events);
    if streamed.is_empty() {
        return Ok((events, versions));
    }
    let mut out = Vec::with_capacity(events.len());
    let mut decided: HashMap<MessageId, bool> = HashMap::new();
    for (tag, event) in events {
        let Some((id, conversation)) = draft_of(&event) else {
            out.push((tag, event));
            continue;
        };
        let Some(fate) = streamed.get(id).copied() else {
            out.push((tag, event));
            continue;
        };
        match fate {
            Fate::Ended => {
                out.push((tag, event));
                continue;
            }
            Fate::Completed => continue,
            Fate::Open => {}
        }
        if let Some(snapshotted) = decided.get(id) {
            if !snapshotted {
                out.push((tag, event));
            }
            continue;
        }
        let id = id.clone();
        let snapshot = match reached.get(&id) {
            Some(&upto) if members.contains(&conversation.id) => {
                streaming_snapshot(store, bay, recipient, &id, conversation, upto).await?
            }
            _ => None,
        };
        let Some((snapshot, version)) = snapshot else {
            // Not a member any more, gone, or ended after the replay's
            // end: its replayed events are exact as they are.
            decided.insert(id, false);
            out.push((tag, event));
            continue;
        };
        decided.insert(id.clone(), true);
        versions.0.insert(id, version);
        out.push((tag, snapshot));
    }
    Ok((out, versions))
}

/// What the replay `events` shows became of each draft it holds deltas
/// of. Drafts without deltas in the replay are left out: only those with
/// deltas are rewritten.
fn fates<T>(events: &[(T, Event)]) -> HashMap<MessageId, Fate> {
    let mut streamed: HashMap<MessageId, Fate> = HashMap::new();
    for (_, e) in events {
        match e {
            Event::MessageDelta { message_id, .. } => {
                streamed.entry(message_id.clone()).or_insert(Fate::Open);
            }
            Event::MessageCompleted { message, .. } => {
                streamed.insert(message.id.clone(), Fate::Completed);
            }
            Event::MessageCancelled { message_id, .. }
            | Event::MessageCancelRequested { message_id, .. }
            | Event::MessageFailed { message_id, .. } => {
                streamed.insert(message_id.clone(), Fate::Ended);
            }
            _ => {}
        }
    }
    // Only drafts with deltas in the replay are rewritten.
    let with_deltas: HashSet<&MessageId> = events
        .iter()
        .filter_map(|(_, e)| match e {
            Event::MessageDelta { message_id, .. } => Some(message_id),
            _ => None,
        })
        .collect();
    streamed.retain(|id, _| with_deltas.contains(id));
    streamed
}

/// How far the replay `events` takes each draft it holds deltas of: the
/// text's length after its last delta (Unicode scalar values) and that
/// delta's version.
fn last_deltas<T>(events: &[(T, Event)]) -> HashMap<MessageId, Reached> {
    let mut out = HashMap::new();
    for (_, e) in events {
        if let Event::MessageDelta {
            message_id,
            offset,
            text,
            version,
            ..
        } = e
        {
            let length = offset + text.chars().count() as u64;
            out.insert(
                message_id.clone(),
                Reached {
                    length,
                    version: *version,
                },
            );
        }
    }
    out
}

/// A draft as of a replay's last delta of it.
#[derive(Clone, Copy, Debug)]
struct Reached {
    /// The text's length then, in Unicode scalar values.
    length: u64,
    /// The version then.
    version: u64,
}

/// The draft and conversation of an event a snapshot may take the place
/// of (a `message.delta` or the draft's opening `message.streaming`);
/// `None` for every other event.
fn draft_of(event: &Event) -> Option<(&MessageId, &ConversationRef)> {
    match event {
        Event::MessageDelta {
            message_id,
            conversation,
            ..
        } => Some((message_id, conversation)),
        Event::MessageStreaming {
            message,
            conversation,
            ..
        } => Some((&message.id, conversation)),
        _ => None,
    }
}

/// The `message.streaming` snapshot of draft `id` in `conversation` as
/// `recipient` sees it, as of `upto` (the replay's last delta of it: a
/// draft only grows by appends, so its text then is the first
/// `upto.length` characters of its text now), `shouldRespond` false (a
/// draft wakes nobody), with that version; `None` when the store holds no
/// open draft `id` any more.
async fn streaming_snapshot(
    store: &dyn Store,
    bay: &BayId,
    recipient: &ParticipantId,
    id: &MessageId,
    conversation: &ConversationRef,
    upto: Reached,
) -> Result<Option<(Event, u64)>, StoreError> {
    let Some(draft) = store
        .message(bay, &conversation.id, id)
        .await?
        .filter(|d| d.is_streaming())
    else {
        return Ok(None);
    };
    let mut message = draft.view_for(recipient, draft.sender.clone());
    message.should_respond = false;
    let version = upto.version.min(draft.version);
    if let Some((cut, _)) = message.content.char_indices().nth(upto.length as usize) {
        message.content.truncate(cut);
    }
    let snapshot = Event::MessageStreaming {
        conversation_id: conversation.id.clone(),
        message,
        version,
        conversation: conversation.clone(),
    };
    Ok(Some((snapshot, version)))
}

/// What the replay shows became of a draft.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Still streaming as far as the replay goes.
    Open,
    /// Completed within the replay.
    Completed,
    /// Cancelled or failed within the replay.
    Ended,
}
