//! What a session receives from its Bay feed, and the cursor bookkeeping
//! both transports (`/ws` and a held `/updates`) share.
//!
//! A session is one live connection of one token. It attaches to the feed
//! of its Bay (which from then on pushes every record addressed to it, in
//! log order, through one mailbox), then replays the store's log from the
//! client's cursor up to the head. Records the feed pushes that the replay
//! already covered are dropped, so each record reaches the client once per
//! connection.
//!
//! The cursor invariant (protocol §11; DESIGN "The cursor invariant"): a
//! cursor X may be handed out only after every event with id ≤ X addressed
//! to the session was sent. Because all records reach a session through the
//! single feed → session mailbox, the `through` of the last batch received
//! is such an X.

use crate::store::log::LogRecord;
use actix::prelude::*;
use std::sync::Arc;
use switchboard_protocol::cursor::{EntryId, Epoch, LogPosition};

/// A batch of log records addressed to this session's participant, in log
/// order, followed by the position the feed is now past.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Deliver {
    /// Only `LogEvent::Message` records of conversations the participant is in.
    pub records: Vec<Arc<LogRecord>>,
    /// Every record ≤ `through` addressed to this session has been sent.
    pub through: EntryId,
}

/// The feed moved past entries that did not concern this session: the
/// session's cursor may advance (keeps idle clients inside the replay buffer).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Watermark {
    pub through: EntryId,
}

/// Why the feed ends a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// A newer connection of the same token opened (WS 4000; `/updates`
    /// answers at once, empty).
    Displaced,
    /// The token was rotated or revoked (WS 4001; `/updates` 401).
    Revoked,
    /// The Bay's log was lost or the feed fell out of it: the session's
    /// position is no longer addressable (WS `reset`; `/updates` 409).
    LogReset,
    /// The node is draining (WS 4003 after a final `cursor` frame).
    Draining,
}

/// Tells a session to end.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Close {
    pub reason: CloseReason,
}

/// The three recipients a feed needs to reach one session. All three point
/// at the same actor, so everything a session receives arrives in the order
/// the feed sent it.
#[derive(Clone)]
pub struct SessionHandle {
    pub deliver: Recipient<Deliver>,
    pub watermark: Recipient<Watermark>,
    pub close: Recipient<Close>,
}

impl SessionHandle {
    /// Builds the handle of actor `addr`.
    pub fn of<A>(addr: &Addr<A>) -> Self
    where
        A: Actor + Handler<Deliver> + Handler<Watermark> + Handler<Close>,
        A::Context: actix::dev::ToEnvelope<A, Deliver>
            + actix::dev::ToEnvelope<A, Watermark>
            + actix::dev::ToEnvelope<A, Close>,
    {
        SessionHandle {
            deliver: addr.clone().recipient(),
            watermark: addr.clone().recipient(),
            close: addr.clone().recipient(),
        }
    }
}

/// A session's position bookkeeping.
#[derive(Debug, Clone)]
pub struct SessionCursor {
    epoch: Epoch,
    /// Records ≤ this were sent by the replay; live copies are duplicates.
    replayed_through: EntryId,
    /// Everything ≤ this addressed to the session was handed to the transport.
    position: EntryId,
}

impl SessionCursor {
    /// Starts bookkeeping after a replay that covered everything ≤ `through`.
    pub fn after_replay(epoch: Epoch, through: EntryId) -> Self {
        SessionCursor {
            epoch,
            replayed_through: through,
            position: through,
        }
    }

    /// Whether a live record still needs sending (the replay did not cover it).
    pub fn is_new(&self, id: EntryId) -> bool {
        id > self.replayed_through
    }

    /// Records that the session is past `through` (never moves backwards).
    pub fn advance(&mut self, through: EntryId) {
        self.position = self.position.max(through);
    }

    /// The current position.
    pub fn position(&self) -> LogPosition {
        LogPosition {
            epoch: self.epoch.clone(),
            entry: self.position,
        }
    }
}
