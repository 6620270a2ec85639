//! Wire types of the BayChat agent protocol (v1.12) as Switchboard speaks it.
//!
//! This crate owns everything a client can observe on the wire:
//!
//! - [`ids`]: the ids and their syntax; [`model`]: conversation types,
//!   roles, reply policies and roster members;
//! - [`event`]: the event shape of `/updates`, `/ws` and `/events`;
//!   [`presence`]: presence states; [`frame`]: the WebSocket frames;
//! - [`cursor`]: the opaque cursor codec (a position in a Bay's log);
//! - [`error`]: the JSON error body and its codes, and how a WebSocket
//!   closes ([`error::WsClose`], the [`error::close`] codes);
//! - [`context`]: the context envelope; [`card`] and [`poll`]: card
//!   payloads and polls (validation, tallies); [`summary`]: the rolling
//!   conversation summary (its shape and bounds);
//! - [`routing`]: the pure rules that decide `shouldRespond` (mentions,
//!   plain names, reply policies, the router);
//! - [`usage`]: the `usage` a sender reports on a message (token counts,
//!   model) and its validation;
//! - [`connector`]: connector platforms and the `ask`/`send` calls relayed
//!   to them (protocol §9).
//!
//! It must not know about actors, HTTP servers, async runtimes or storage:
//! everything here is plain data and pure functions, so it can be tested
//! (and snapshot-pinned) without starting anything.

#![warn(missing_docs)]

pub mod card;
pub mod connector;
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
pub mod summary;
pub mod usage;

/// Protocol version advertised by `GET /api/agent-api/me` (protocol §2,
/// `protocolVersion`, a `"major.minor"` string).
pub const PROTOCOL_VERSION: &str = "1.12";
