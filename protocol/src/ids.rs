//! Newtype identifiers. A newtype cannot be passed in the wrong argument slot:
//! a `ConversationId` is never mistaken for a `ParticipantId`.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema,
        )]
        #[serde(transparent)]
        pub struct $name(pub String);

        impl $name {
            /// Borrow the id as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self(s.to_owned())
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self(s)
            }
        }
    };
}

string_id!(
    /// A tenant ("Bay"). Every conversation, participant and token belongs to exactly one.
    BayId
);
string_id!(
    /// A conversation inside a Bay (`DM`, `AGENT_CHAT` or `GROUP`).
    ConversationId
);
string_id!(
    /// A participant (human `user` or AI `agent`) inside a Bay.
    ParticipantId
);
string_id!(
    /// A stored message. `message.id` is the client's dedupe key (at-least-once delivery).
    MessageId
);
string_id!(
    /// One live connection (a WebSocket or a held `/updates` call); used for displacement.
    SessionId
);
string_id!(
    /// Public handle of a bearer token: the first 16 hex digits of its SHA-256.
    /// Safe to log and to put in the event log; the token itself never is.
    TokenId
);

/// Validates a caller-chosen id: 1–64 chars of `[A-Za-z0-9_-]`.
///
/// Ids appear in URLs and Redis keys, so anything else is refused up front.
pub fn is_valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
