//! Switchboard's actor system and storage.
//!
//! This crate owns the moving parts behind the wire protocol. Its layout
//! (docs/architecture.md has the picture):
//! - [`store`]: the store contract, one trait per area (directory,
//!   conversations, messages, drafts, the event log = the replay buffer,
//!   displacement, webhooks, leases, presence; [`store::Store`] is them all)
//!   and its engines, `store/memory/` and `store/redis/`, each a folder with
//!   the same area files;
//! - [`model`]: the records the store keeps (Bays, participants,
//!   conversations, messages);
//! - [`token`]: bearer tokens (protocol §2) and the hash that is stored;
//! - [`feed::BayFeed`]: one per Bay with local sessions; tails the Bay's log
//!   in order and fans each batch out to the sessions it concerns (the
//!   cursor rule), plus presence records, displacement, message waiters and
//!   a recent-records cache, each in its own file under `feed/`;
//! - [`conversation::ConversationActor`]: one per live conversation; the
//!   write path (validate, route, append), changes to messages and
//!   streaming drafts, across `conversation.rs` and `conversation/`;
//! - [`registry::Registry`]: creates and finds the above on demand;
//! - [`open`]: opening a session for any transport: attach to the feed
//!   before replaying, and the replay's projection;
//! - [`replay`]: what a replay from a cursor needs beyond the log itself
//!   (the memberships in force at the cursor);
//! - [`drafts`]: streaming drafts as sessions see them (snapshots in
//!   replays, live deltas after them);
//! - [`session`]: what a session (a WebSocket, an SSE stream or a held
//!   `/updates`) receives, and the cursor bookkeeping transports share;
//! - [`presence`]: activity presence (the state rule and the Bay's
//!   publisher of `presence.updated`);
//! - [`orphans`]: the sweep that fails drafts whose author went away;
//! - [`token_cache::TokenCache`]: authenticated tokens per node, kept
//!   exact by the node's one [`credentials`] tail (the store's
//!   credentials channel), whatever the number of Bays;
//! - [`node`]: this process's node id, for leases and presence records;
//! - [`attachment_links`]: fresh signed attachment URLs on every copy of a
//!   message (the gateway installs the signer).
//!
//! It knows nothing about HTTP or WebSocket framing: the gateway crate owns
//! transports and turns what arrives here into frames and response bodies.

#![warn(missing_docs)]

pub mod attachment_links;
pub mod conversation;
pub mod credentials;
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
