//! What a [`crate::Listener`] yields.

use serde_json::Value;
use switchboard_protocol::event::Event;

/// The transport a listener is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    /// `GET /api/agent-api/ws`.
    WebSocket,
    /// `GET /api/agent-api/updates`, long-polled.
    Updates,
    /// `GET /api/agent-api/events`, Server-Sent Events.
    Sse,
}

impl Transport {
    /// `ws`, `updates` or `sse`.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::WebSocket => "ws",
            Transport::Updates => "updates",
            Transport::Sse => "sse",
        }
    }
}

/// One item of the listener's stream.
#[derive(Clone, Debug, PartialEq)]
pub enum Update {
    /// An event of a kind this crate knows (the `switchboard-protocol`
    /// [`Event`]), with the JSON it came as.
    Event {
        /// The typed event.
        event: Box<Event>,
        /// The event object as the server sent it (its fields and values,
        /// not its key order; fields a newer server added are kept here).
        raw: Value,
    },
    /// An event of a kind this crate does not know (e.g. `message.delta`,
    /// `presence.updated`), passed through untouched. Protocol §11:
    /// later versions add event types in the same envelope.
    Other {
        /// Its `type` (empty when the object had none).
        kind: String,
        /// The event object as the server sent it (fields and values, not
        /// key order).
        raw: Value,
    },
    /// A message recovered over REST after the cursor expired (`reset` /
    /// 409 `CURSOR_EXPIRED`): the same `message` event shape, rebuilt from
    /// `GET /conversations/{id}/messages?since=`. Lifecycle events
    /// (edits, reactions) are not recoverable this way.
    Recovered {
        /// The rebuilt `message` event.
        event: Box<Event>,
        /// Its JSON.
        raw: Value,
    },
    /// The listener is about to catch up over REST: the stored cursor
    /// could not be resumed (`reset`, 409 `CURSOR_EXPIRED`), or a session
    /// after one started at now. The messages found follow as
    /// [`Update::Recovered`].
    CatchUp {
        /// Where the catch-up starts in a conversation without a
        /// watermark (RFC 3339); elsewhere it starts right after the
        /// newest message taken.
        since: String,
        /// `true` for a reset or an expired cursor, `false` for the
        /// catch-up of a session that followed one.
        reset: bool,
    },
    /// The listener moved to another transport (WebSocket refused by a
    /// proxy, or back after a probe).
    TransportChanged(Transport),
    /// A connection attempt or session failed in a way that may heal (the
    /// server is unreachable, a 5xx, a 429, a dropped socket, an upgrade a
    /// proxy refused): the listener tries again after `delay`. One per
    /// failed attempt, so a caller can report trouble that does not go
    /// away; errors that cannot heal stop the listener instead
    /// ([`crate::ClientError::is_terminal`]).
    Retrying {
        /// The transport that failed.
        transport: Transport,
        /// What failed, for humans (not meant to be matched on).
        reason: String,
        /// How long the listener waits before the next attempt (backoff
        /// with full jitter, at least the server's `Retry-After`); zero
        /// when it moves to another transport at once.
        delay: std::time::Duration,
    },
}

impl Update {
    /// Types an event object: [`Update::Event`] when its `type` is known
    /// and it parses, else [`Update::Other`] (never an error: unknown or
    /// newer shapes pass through).
    pub fn from_raw(raw: Value) -> Update {
        match serde_json::from_value::<Event>(raw.clone()) {
            Ok(event) => Update::Event {
                event: Box::new(event),
                raw,
            },
            Err(_) => Update::Other {
                kind: raw["type"].as_str().unwrap_or_default().to_owned(),
                raw,
            },
        }
    }

    /// The event JSON, for the variants that carry one.
    pub fn raw(&self) -> Option<&Value> {
        match self {
            Update::Event { raw, .. }
            | Update::Other { raw, .. }
            | Update::Recovered { raw, .. } => Some(raw),
            Update::TransportChanged(_) | Update::Retrying { .. } | Update::CatchUp { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_kinds_pass_through_untouched() {
        let raw = json!({"type":"message.delta","conversationId":"c","delta":"he","seq":3});
        match Update::from_raw(raw.clone()) {
            Update::Other { kind, raw: r } => {
                assert_eq!(kind, "message.delta");
                assert_eq!(r, raw);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn known_kinds_are_typed() {
        let raw = json!({"type":"read.updated","conversationId":"c","participantId":"ana",
            "lastReadMessageId":"m1","conversation":{"id":"c","type":"GROUP","title":null}});
        assert!(matches!(Update::from_raw(raw), Update::Event { .. }));
    }
}
