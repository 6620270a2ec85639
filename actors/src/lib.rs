//! Switchboard's actor system and storage.
//!
//! This crate owns the moving parts behind the wire protocol:
//! - [`store`]: the [`store::Store`] trait (Bays, participants, tokens,
//!   conversations, history, and each Bay's event log = the replay buffer)
//!   and its engines;
//! - [`feed::BayFeed`]: one per Bay with local sessions; tails the Bay's log
//!   in order and fans each batch out to the sessions it concerns;
//! - [`conversation::ConversationActor`]: one per live conversation; the
//!   write path (validate, route, append) and ephemeral typing state;
//! - [`registry::Registry`]: creates and finds the above on demand;
//! - [`presence`]: activity presence (the state rule and the Bay's
//!   publisher of `presence.updated`);
//! - [`open`]: opening a session for any transport: attach to the feed
//!   before replaying, and the replay's projection;
//! - [`replay`]: what a replay from a cursor needs beyond the log itself
//!   (the memberships in force at the cursor);
//! - [`token_cache::TokenCache`]: authenticated tokens per node, kept
//!   exact by the feeds' `CredentialRevoked` entries;
//! - [`session`]: what a session (a WebSocket or a held `/updates`) receives,
//!   and the cursor bookkeeping both transports share.
//!
//! It knows nothing about HTTP or WebSocket framing: the gateway crate owns
//! transports and turns what arrives here into frames and response bodies.

#![warn(missing_docs)]

pub mod conversation;
pub mod drafts;
pub mod feed;
pub mod model;
pub mod node;
pub mod open;
pub mod orphans;
pub mod presence;
pub mod registry;
pub mod replay;
pub mod session;
pub mod store;
pub mod token;
pub mod token_cache;
