//! Held connector calls (`POST /agents/{id}/ask` and `/send`, protocol §9):
//! the asker's request waits on its node's feed for the connector's
//! `ConnectorAnswered` entry, which may have been written on any node.
//! Separate from the message waiters: an answer wakes exactly one call,
//! by request id, and is never an event for anyone.

use super::BayFeed;
use crate::store::log::{LogEvent, LogRecord};
use actix::prelude::*;
use std::sync::Arc;
use switchboard_protocol::ids::ParticipantId;

/// Registers a wait for the answer to request `request`. Answered once the
/// wait is registered: an answer appended after that reaches the waiter,
/// so the caller relays the request to the connector only afterwards and
/// no answer can come before the wait.
#[derive(Message)]
#[rtype(result = "()")]
pub struct WaitForAnswer {
    /// The pending request's id.
    pub request: String,
    /// Who asked: its revocation or suspension releases the wait.
    pub asker: ParticipantId,
    /// The connector asked: its suspension releases the wait.
    pub connector: ParticipantId,
    /// Gets the answer's log record; dropping the receiver cancels.
    pub reply: tokio::sync::oneshot::Sender<Arc<LogRecord>>,
}

impl Handler<WaitForAnswer> for BayFeed {
    type Result = ();

    fn handle(&mut self, msg: WaitForAnswer, _: &mut Self::Context) {
        // Calls whose askers gave up are dropped here and on wake-up.
        self.answers.retain(|_, w| !w.reply.is_closed());
        self.answers.insert(
            msg.request,
            AnswerWaiter {
                asker: msg.asker,
                connector: msg.connector,
                reply: msg.reply,
            },
        );
    }
}

/// One [`WaitForAnswer`] still waiting.
pub(super) struct AnswerWaiter {
    asker: ParticipantId,
    connector: ParticipantId,
    reply: tokio::sync::oneshot::Sender<Arc<LogRecord>>,
}

impl BayFeed {
    /// Hands `record`, a `ConnectorAnswered`, to the call waiting for it on
    /// this node, if any (the asker's node; elsewhere nobody waits).
    pub(super) fn wake_answer(&mut self, record: &Arc<LogRecord>) {
        if let LogEvent::ConnectorAnswered { request, .. } = &record.event {
            if let Some(w) = self.answers.remove(request) {
                let _ = w.reply.send(record.clone());
            }
        }
    }

    /// Whether a call still waits for an answer (keeps the feed running).
    pub(super) fn has_answer_waiters(&mut self) -> bool {
        self.answers.retain(|_, w| !w.reply.is_closed());
        !self.answers.is_empty()
    }

    /// Drops the held calls that `participant` made or was asked (every
    /// call of the Bay for `None`): the caller wakes to the closed channel
    /// and checks both sides' standing, so a suspension or revocation ends
    /// the call at once rather than at its timeout.
    pub(super) fn release_answer_waiters(&mut self, participant: Option<&ParticipantId>) {
        self.answers
            .retain(|_, w| participant.is_some_and(|p| &w.asker != p && &w.connector != p));
    }
}
