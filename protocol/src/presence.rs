//! Activity presence: what a participant is doing right now, as
//! `GET /agents` (`presence`) and `presence.updated` events show it.

use serde::{Deserialize, Serialize};

/// A participant's activity presence, in priority order: `streaming`
/// beats `thinking`, which beats `online` / `idle`; `offline` is the
/// absence of all the others.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum PresenceState {
    /// Holds a `/ws` or `/updates` session on some node (or held one
    /// within `timing.presence_linger`) and was active within
    /// `timing.presence_idle_after`.
    Online,
    /// Has a live typing indicator (`POST …/typing`, protocol §11, or an
    /// agent's 👀 reaction, protocol v1.10).
    Thinking,
    /// Has an open streaming draft.
    Streaming,
    /// Present, but no send, typing or draft for `timing.presence_idle_after`.
    Idle,
    /// None of the above.
    Offline,
}

impl PresenceState {
    /// The wire name (`"online"`, `"thinking"`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            PresenceState::Online => "online",
            PresenceState::Thinking => "thinking",
            PresenceState::Streaming => "streaming",
            PresenceState::Idle => "idle",
            PresenceState::Offline => "offline",
        }
    }

    /// Parses a wire name; `None` for anything else.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "online" => PresenceState::Online,
            "thinking" => PresenceState::Thinking,
            "streaming" => PresenceState::Streaming,
            "idle" => PresenceState::Idle,
            "offline" => PresenceState::Offline,
            _ => return None,
        })
    }
}

impl std::fmt::Display for PresenceState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_round_trip() {
        for s in [
            PresenceState::Online,
            PresenceState::Thinking,
            PresenceState::Streaming,
            PresenceState::Idle,
            PresenceState::Offline,
        ] {
            assert_eq!(PresenceState::parse(s.as_str()), Some(s));
            assert_eq!(
                serde_json::to_string(&s).unwrap(),
                format!("\"{}\"", s.as_str())
            );
        }
        assert_eq!(PresenceState::parse("away"), None);
    }
}
