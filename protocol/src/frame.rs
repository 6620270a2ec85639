//! WebSocket frames of `GET /api/agent-api/ws` (protocol §11). Every frame
//! is a JSON text frame tagged by `t`. The close codes are in
//! [`crate::error::close`], beside [`WsClose`], which chooses them.

use crate::error::WsClose;
use crate::event::Event;
use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Frames a client may send. Only `hello` exists; it must be the first frame
/// and arrive within the hello timeout (10 s by default).
///
/// A frame is a JSON **object** (docs/websocket.md, protocol §11): its
/// `Deserialize` refuses every other JSON type, the array form
/// `["hello", <resume>]` included, which serde's derive would otherwise
/// accept for an internally tagged enum (fields by position). A refused
/// frame closes the socket with 4002 `FRAMING_VIOLATION`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientFrame {
    /// `{"t":"hello","resume":"<cursor>"|null}`. `resume` is optional and
    /// `null` means "start at now".
    Hello {
        /// A cursor from a `cursor` frame or an `/updates` answer (the same
        /// opaque string). Absent, `null` or empty starts at the log head,
        /// with no history; one that does not decode gets `ready` then
        /// `reset`.
        resume: Option<String>,
    },
}

/// The object grammar of [`ClientFrame`], derived; reached only through
/// [`ObjectOnly`], so never from a JSON array.
#[derive(Deserialize)]
#[serde(tag = "t", rename_all = "lowercase", deny_unknown_fields)]
enum ClientFrameObject {
    Hello {
        #[serde(default)]
        resume: Option<String>,
    },
}

impl From<ClientFrameObject> for ClientFrame {
    fn from(frame: ClientFrameObject) -> Self {
        match frame {
            ClientFrameObject::Hello { resume } => ClientFrame::Hello { resume },
        }
    }
}

/// Visitor that accepts a map and nothing else (no sequence, no scalar).
struct ObjectOnly;

impl<'de> Visitor<'de> for ObjectOnly {
    type Value = ClientFrame;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object frame")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ClientFrame, A::Error> {
        ClientFrameObject::deserialize(MapAccessDeserializer::new(map)).map(ClientFrame::from)
    }
}

impl<'de> Deserialize<'de> for ClientFrame {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ObjectOnly)
    }
}

/// Frames the server sends.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "t", rename_all = "lowercase")]
pub enum ServerFrame<'a> {
    /// Connected; `cursor` echoes the client's `resume` (`null` if none).
    Ready {
        /// The client's `resume`, verbatim, or `null`. Not a new position:
        /// store cursors from `cursor` frames only.
        cursor: Option<&'a str>,
    },
    /// One event, identical to an element of `/updates`'s `events`.
    Event {
        /// The event; deliberately carries no cursor (protocol §11).
        event: &'a Event,
    },
    /// "You are now past everything sent above." Sent after each batch and
    /// every ~25 s while idle.
    Cursor {
        /// Opaque cursor ([`crate::cursor::LogPosition::encode`]). Invariant:
        /// every event up to it addressed to this token was sent before it.
        cursor: &'a str,
    },
    /// The `resume` cursor is no longer addressable (the 409 of this transport).
    Reset,
    /// Sent immediately before the server closes the socket.
    Error {
        /// Why the socket closes; serialized as its `UPPER_CASE` wire string.
        code: WsClose,
        /// Human-readable lowercase phrase; never branch on it.
        message: &'a str,
    },
}

impl ServerFrame<'_> {
    /// Serializes the frame to its JSON text.
    pub fn to_json(&self) -> String {
        // Serializing these plain structs cannot fail: no maps with non-string keys.
        serde_json::to_string(self).expect("server frames always serialize")
    }
}
