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
            excluding: msg.excluding,
            reply: msg.reply,
        });
    }
}

/// One [`WaitForMessage`] still waiting.
pub(super) struct Waiter {
    excluding: ParticipantId,
    reply: tokio::sync::oneshot::Sender<Arc<LogRecord>>,
}

impl BayFeed {
    /// Hands `record`, a message, to the waiters of its conversation that
    /// did not send it.
    pub(super) fn wake_waiters(&mut self, record: &Arc<LogRecord>) {
        // A message is a reply once it is final: posted whole, or a draft
        // completed (an open draft wakes nobody).
        let (conversation, message) = match &record.event {
            LogEvent::Message {
                conversation,
                message,
            } if !message.is_streaming() => (conversation, message),
            LogEvent::Change {
                conversation,
                change: Change::Completed { message },
            } => (conversation, message),
            _ => return,
        };
        let Some(waiting) = self.waiters.remove(&conversation.id) else {
            return;
        };
        let still: Vec<Waiter> = waiting
            .into_iter()
            .filter_map(|w| {
                if w.excluding == message.sender.id {
                    return (!w.reply.is_closed()).then_some(w);
                }
                let _ = w.reply.send(record.clone());
                None
            })
            .collect();
        if !still.is_empty() {
            self.waiters.insert(conversation.id.clone(), still);
        }
    }

    /// Whether any wait is still live; drops those whose callers gave up.
    /// Drops the waits of `participant` (every wait of the Bay for
    /// `None`): their callers wake, see the closed channel and check their
    /// token again, so a revoked or suspended caller's held wait ends with
    /// its 401 / 403 at once instead of when it times out.
    pub(super) fn release_waiters(&mut self, participant: Option<&ParticipantId>) {
        self.waiters.retain(|_, waiting| {
            waiting.retain(|w| participant.is_some_and(|p| &w.excluding != p));
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
