//! Wire types of the BayChat agent protocol (v1.12) as Switchboard speaks it.
//!
//! This crate owns everything a client can observe on the wire: ids, the
//! `/updates` and `/ws` event shape, WebSocket frames and close codes, the
//! opaque cursor codec, the JSON error body and its codes, the context
//! envelope, and the pure routing rules that decide `shouldRespond`.
//!
//! It must not know about actors, HTTP servers, async runtimes or storage:
//! everything here is plain data and pure functions, so it can be tested
//! (and snapshot-pinned) without starting anything.

#![warn(missing_docs)]

pub mod card;
pub mod context;
pub mod cursor;
pub mod error;
pub mod event;
pub mod frame;
pub mod ids;
pub mod model;
pub mod poll;
pub mod presence;
pub mod routing;

/// Protocol version advertised by `GET /api/agent-api/me` (protocol §2,
/// `protocolVersion`, a `"major.minor"` string).
pub const PROTOCOL_VERSION: &str = "1.12";
