//! `GET …/messages/wait`: long-polls for the next message of a
//! conversation. The feed hands each final message it reads to the waiters
//! of its conversation that did not send it. Separate because the waits
//! touch neither sessions nor the cursor: a waiter reads the store itself
//! once its wait is registered (see [`WaitForMessage`]).

use super::BayFeed;
use crate::store::log::{Change, LogEvent, LogRecord};
use actix::prelude::*;
use std::sync::Arc;
use switchboard_protocol::ids::{ConversationId, ParticipantId};

/// Registers a wait for the next message in `conversation` that
/// `excluding` did not send (`GET …/messages/wait`). Answered once the
/// wait is registered: a message appended after that answer reaches the
/// waiter, so the caller reads the store only afterwards and nothing falls
/// between the read and the wait.
#[derive(Message)]
#[rtype(result = "()")]
pub struct WaitForMessage {
    /// The conversation to watch.
    pub conversation: ConversationId,
    /// The waiter; its own messages do not end the wait.
    pub excluding: ParticipantId,
    /// Gets the message's log record; dropping the receiver cancels.
    pub reply: tokio::sync::oneshot::Sender<Arc<LogRecord>>,
}

impl Handler<WaitForMessage> for BayFeed {
    type Result = ();

    fn handle(&mut self, msg: WaitForMessage, _: &mut Self::Context) {
        let waiting = self.waiters.entry(msg.conversation).or_default();
        // Waits whose callers gave up are dropped here and on wake-up.
        waiting.retain(|w| !w.reply.is_closed());
        waiting.push(Waiter {
            excluding: Some(msg.excluding),
            reply: msg.reply,
        });
    }
}

/// Registers a wait for the next log entry of any kind about
/// `conversation` (a message, any change of one, a roster change): a room
/// link's FOLLOW (docs/rooms.md), which answers edits, reactions and
/// deletions too. Answered once registered, like [`WaitForMessage`].
#[derive(Message)]
#[rtype(result = "()")]
pub struct WaitForEntry {
    /// The conversation to watch.
    pub conversation: ConversationId,
    /// Gets the entry's log record; dropping the receiver cancels.
    pub reply: tokio::sync::oneshot::Sender<Arc<LogRecord>>,
}

impl Handler<WaitForEntry> for BayFeed {
    type Result = ();

    fn handle(&mut self, msg: WaitForEntry, _: &mut Self::Context) {
        let waiting = self.waiters.entry(msg.conversation).or_default();
        waiting.retain(|w| !w.reply.is_closed());
        waiting.push(Waiter {
            excluding: None,
            reply: msg.reply,
        });
    }
}

/// One [`WaitForMessage`] or [`WaitForEntry`] still waiting.
pub(super) struct Waiter {
    /// `Some`: a reply wait, ended by a final message someone else sent;
    /// `None`: ended by any entry of the conversation.
    excluding: Option<ParticipantId>,
    reply: tokio::sync::oneshot::Sender<Arc<LogRecord>>,
}

impl BayFeed {
    /// Hands `record`, a message, to the waiters of its conversation that
    /// did not send it.
    pub(super) fn wake_waiters(&mut self, record: &Arc<LogRecord>) {
        let Some(conversation) = record.event.conversation() else {
            return;
        };
        // A message is a reply once it is final: posted whole, or a draft
        // completed (an open draft wakes no reply wait).
        let sender = match &record.event {
            LogEvent::Message { message, .. } if !message.is_streaming() => {
                Some(&message.sender.id)
            }
            LogEvent::Change { change, .. } => match &**change {
                Change::Completed { message } => Some(&message.sender.id),
                _ => None,
            },
            _ => None,
        };
        let Some(waiting) = self.waiters.remove(conversation) else {
            return;
        };
        let still: Vec<Waiter> = waiting
            .into_iter()
            .filter_map(|w| {
                let wakes = match &w.excluding {
                    None => true,
                    Some(me) => sender.is_some_and(|s| s != me),
                };
                if !wakes {
                    return (!w.reply.is_closed()).then_some(w);
                }
                let _ = w.reply.send(record.clone());
                None
            })
            .collect();
        if !still.is_empty() {
            self.waiters.insert(conversation.clone(), still);
        }
    }

    /// Whether any wait is still live; drops those whose callers gave up.
    /// Drops the waits of `participant` (every wait of the Bay for
    /// `None`): their callers wake, see the closed channel and check their
    /// token again, so a revoked or suspended caller's held wait ends with
    /// its 401 / 403 at once instead of when it times out.
    pub(super) fn release_waiters(&mut self, participant: Option<&ParticipantId>) {
        self.waiters.retain(|_, waiting| {
            waiting.retain(|w| participant.is_some_and(|p| w.excluding.as_ref() != Some(p)));
            !waiting.is_empty()
        });
    }

    pub(super) fn has_waiters(&mut self) -> bool {
        self.waiters.retain(|_, waiting| {
            waiting.retain(|w| !w.reply.is_closed());
            !waiting.is_empty()
        });
        !self.waiters.is_empty()
    }
}
