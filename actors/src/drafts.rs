//! Streaming drafts as sessions see them: replays send snapshots, not the
//! history of deltas, and live deltas continue exactly after the snapshot.
//!
//! A replay (a `/ws` resume, an `/updates` call, any transport that reads
//! the log from a cursor) may pass many `message.delta` entries of one
//! draft. A client that resumes may have lost the text it had (a page
//! refresh), and replaying the deltas would be both long and useless to
//! it, so [`snapshot_drafts`] replaces them with one `message.streaming`
//! event carrying the draft's full text so far and its version, read from
//! the store, at the place of the draft's first replayed entry. The
//! session then remembers that version ([`DraftVersions`]) and drops live
//! deltas at or below it: every delta carries the draft's version after
//! it, and versions only grow, so text is neither repeated nor skipped.

use crate::store::log::{Change, LogEvent, LogRecord};
use crate::store::{Store, StoreError};
use std::collections::HashMap;
use switchboard_protocol::event::Event;
use switchboard_protocol::ids::{BayId, MessageId, ParticipantId};

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
        match change {
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

    /// The snapshot version recorded for `message`, if any.
    pub fn version(&self, message: &MessageId) -> Option<u64> {
        self.0.get(message).copied()
    }
}

/// Replaces the `message.delta` events of each draft in `events` (a
/// replay, in log order, for `recipient`) with one `message.streaming`
/// snapshot read from the store, at the place of the draft's first
/// replayed event; a draft's opening event goes too when deltas of it
/// follow. Each event carries a tag `T` (the transport's, e.g. its log
/// entry); a snapshot keeps the tag of the event whose place it takes.
/// Returns the events and the snapshots' versions.
///
/// # Errors
///
/// [`StoreError`] when a draft cannot be read.
pub async fn snapshot_drafts<T>(
    store: &dyn Store,
    bay: &BayId,
    recipient: &ParticipantId,
    events: Vec<(T, Event)>,
) -> Result<(Vec<(T, Event)>, DraftVersions), StoreError> {
    let mut versions = DraftVersions::default();
    let streamed: Vec<MessageId> = {
        let mut ids: Vec<MessageId> = events
            .iter()
            .filter_map(|(_, e)| match e {
                Event::MessageDelta { message_id, .. } => Some(message_id.clone()),
                _ => None,
            })
            .collect();
        ids.sort_by(|a, b| a.0.cmp(&b.0));
        ids.dedup();
        ids
    };
    if streamed.is_empty() {
        return Ok((events, versions));
    }
    let mut out = Vec::with_capacity(events.len());
    for (tag, event) in events {
        let id = match &event {
            Event::MessageDelta { message_id, .. } => Some(message_id),
            Event::MessageStreaming { message, .. } => Some(&message.id),
            _ => None,
        };
        let Some(id) = id.filter(|id| streamed.contains(id)).cloned() else {
            out.push((tag, event));
            continue;
        };
        if versions.0.contains_key(&id) {
            // Covered by the snapshot sent at the draft's first event.
            continue;
        }
        let conversation = match &event {
            Event::MessageDelta { conversation, .. }
            | Event::MessageStreaming { conversation, .. } => conversation.clone(),
            _ => unreachable!("filtered above"),
        };
        match store.message(bay, &conversation.id, &id).await? {
            Some(draft) => {
                let mut message = draft.view_for(recipient, draft.sender.clone());
                // A snapshot asks nobody to respond, even of a draft that
                // completed meanwhile: its `message.completed` follows.
                message.should_respond = false;
                versions.0.insert(id, draft.version);
                out.push((
                    tag,
                    Event::MessageStreaming {
                        conversation_id: conversation.id.clone(),
                        message,
                        version: draft.version,
                        conversation,
                    },
                ));
            }
            // Gone (its conversation was lost): the deltas are all there is.
            None => out.push((tag, event)),
        }
    }
    Ok((out, versions))
}
