//! A reference client of Switchboard's agent API that never loses a
//! message.
//!
//! [`Listener`] holds one realtime session per token, on `/ws` (a
//! WebSocket), `/updates` (long-poll) or `/events` (Server-Sent Events), and
//! yields every event as a [`futures_util::Stream`] of [`Update`]s:
//!
//! - **Cursor.** `hello` (or `?cursor=`, or `Last-Event-ID`) carries the
//!   stored cursor; every `cursor` frame, `/updates` answer and SSE `id:` is
//!   saved through a [`CursorStore`] ([`FileCursorStore`] writes a temp
//!   file and renames it; [`MemoryCursorStore`]) once the caller has taken
//!   every event before it, so a restart resumes where the caller stopped.
//!   One cursor serves all three transports (protocol §11).
//! - **Dedupe.** Delivery is at-least-once across reconnects; a bounded
//!   window of message ids (whole events for other kinds) drops repeats.
//! - **Reconnects.** Exponential backoff with full jitter, never shorter
//!   than `Retry-After`. Close codes as docs/websocket.md lists them:
//!   4000 displaced, 4001 revoked and 4004 suspended stop the listener
//!   ([`ClientError::Displaced`], [`ClientError::Unauthorized`],
//!   [`ClientError::Suspended`], which a 403 `ACCOUNT_SUSPENDED` /
//!   `BAY_SUSPENDED` on any transport also gives); 4003
//!   (drain) reconnects at once; 1009 stops with
//!   [`ClientError::MessageTooBig`].
//! - **Reset.** On `reset` or 409 `CURSOR_EXPIRED` the listener catches up
//!   over REST (`GET /conversations/{id}/messages?since=`, yielded as
//!   [`Update::Recovered`]) and continues without a cursor. The checkpoint
//!   carries each conversation's newest message taken
//!   ([`Checkpoint::delivered`]), so the catch-up starts strictly after
//!   it, across restarts too; elsewhere it starts a margin before the last
//!   cursor, never before the listener first started.
//! - **Trouble.** Each failed attempt is reported as
//!   [`Update::Retrying`] (what failed, the delay before the next);
//!   401, and 4xx answers no retry changes (404 from a wrong base URL),
//!   stop the listener with the error.
//! - **Fallback.** With [`TransportChoice::Auto`], when the WebSocket
//!   cannot be had (a proxy refuses the upgrade, or it breaks repeatedly
//!   inside a window) the listener moves to `/updates` with the same
//!   cursor, and probes `/ws` again later.
//! - **Open-ended events.** Kinds this crate does not know
//!   (`message.delta`, `presence.updated`, …) arrive as [`Update::Other`]
//!   with their JSON untouched.
//!
//! # Example
//!
//! ```no_run
//! use futures_util::StreamExt;
//! use std::sync::Arc;
//! use switchboard_client::{Client, FileCursorStore, Listener, ListenerConfig, Update};
//!
//! # async fn run() -> Result<(), switchboard_client::ClientError> {
//! let client = Client::new("http://127.0.0.1:8080", "bay_demo_rex_000000000000000000000000")?;
//! let store = Arc::new(FileCursorStore::new("rex.cursor"));
//! let mut updates = Listener::start(client.clone(), store, ListenerConfig::default())?;
//! while let Some(update) = updates.next().await {
//!     match update? {
//!         Update::Event { event, .. } | Update::Recovered { event, .. } => {
//!             if let switchboard_protocol::event::Event::Message { conversation_id, message, .. } = *event {
//!                 if message.should_respond {
//!                     let reply = format!("got it: {}", message.content);
//!                     client.send(&conversation_id.0, &reply, &Default::default()).await?;
//!                 }
//!             }
//!         }
//!         Update::Other { kind, raw } => println!("new kind {kind}: {raw}"),
//!         Update::TransportChanged(t) => eprintln!("now on {}", t.as_str()),
//!         Update::CatchUp { since, .. } => eprintln!("catching up over REST from {since}"),
//!         Update::Retrying { transport, reason, delay } => {
//!             eprintln!("{}: {reason}; again in {delay:?}", transport.as_str())
//!         }
//!     }
//! }
//! # Ok(())
//! # }
//! ```
//!
//! The `switchboard-cli` binary of this crate (`listen`, `send`, `me`,
//! `conversations`) is built on the same types.
//!
//! # Layout
//!
//! - `listener.rs`: [`Listener`], the stream and its session loop
//!   (reconnects, fall-back to `/updates`, the `/ws` probe);
//! - `transport/`: one session of `/ws`, `/updates` or `/events`, and the
//!   contract they share with the listener (how a session ended; the
//!   cursor, dedupe and watermarks every session feeds; the REST catch-up
//!   after a reset);
//! - `rest.rs`: [`Client`], the agent API calls; `error.rs`:
//!   [`ClientError`]; `update.rs`: [`Update`] and [`Transport`];
//! - `cursor_store.rs`: [`Checkpoint`] and where it is saved;
//!   `dedupe.rs`: [`DedupeWindow`]; `backoff.rs`: [`Backoff`];
//!   `config.rs`: [`ListenerConfig`].

#![warn(missing_docs)]

mod backoff;
mod config;
mod connectors;
mod cursor_store;
mod dedupe;
mod error;
mod files;
mod listener;
mod rest;
mod transport;
mod update;

pub use backoff::Backoff;
pub use config::{ListenerConfig, TransportChoice};
pub use cursor_store::{Checkpoint, CursorStore, Delivered, FileCursorStore, MemoryCursorStore};
pub use dedupe::{key_of, DedupeWindow};
pub use error::{chain as error_chain, ClientError};
pub use files::{MAX_DOWNLOAD_BYTES, MAX_FILES};
pub use listener::Listener;
pub use rest::{pair, Client, SendOptions};
pub use update::{Transport, Update};
