//! The Redis engine: state shared by every node, in Redis ≥ 7.
//!
//! Layout: see [`keys`]. Every key of a Bay is hash-tagged with the Bay id,
//! so each write below is ONE Lua script (atomic: Redis runs one script at
//! a time, and a script either runs to the end or, on error, stops) that
//! touches one slot, and stays valid on Redis Cluster:
//!
//! - `append_message`: round counter + `createdAt` stamp + history + log
//!   entry (+ trimming) in one script, which appends every message this
//!   node had waiting for the Bay (group commit, `messages/batch.rs`);
//! - roster changes: compare-and-set of the conversation JSON + `Roster`
//!   log entry in one script (the change itself is computed in Rust on the
//!   JSON read, and retried when someone changed it in between);
//! - `set_token`: token swap + `CredentialRevoked` log entry in one script
//!   (+ the credentials channel's entry, off a cluster; see `directory.rs`);
//! - every log append mints the epoch (`SET NX`) if it is missing.
//!
//! Each area's file (`messages.rs`, `drafts.rs`, …) implements its store
//! trait and keeps its scripts beside it (`messages/*.lua`, …), with the
//! script's KEYS and ARGV named in Rust; the fragments several areas
//! compose in (the log append, the round step, the revision check) and the
//! conventions every script follows are in the private `lua` module.
//!
//! The token index is the one cross-slot structure; it is a pointer checked
//! against the Bay's own record on every `authenticate` (see [`keys`]), so
//! the order of its writes can never make a revoked token authenticate.
//!
//! Cursor expiry (docs/architecture.md, "The cursor invariant", rule 4): a
//! cursor is `EpochChanged` when its epoch is not the Bay's
//! `sb:{bay}:epoch` (a missing epoch is
//! minted anew, so after a data loss every old cursor is refused, never
//! silently re-based), and `Expired` when the stream's
//! `max-deleted-entry-id` lies after it (entries it has not seen were
//! trimmed) or it lies beyond the stream's last generated id. Redis moves
//! `max-deleted-entry-id` only on `XDEL`, not when trimming, so the append
//! script finds the newest entry it is about to trim and records it with
//! `XSETID … MAXDELETEDID`. Trimming is exact (`MINID =` the replay window,
//! `MAXLEN =` the entry cap), so the replay window is what the settings say
//! and a cursor expires exactly when something it has not seen is gone.
//!
//! Blocking reads (`read_log` with `block`) use `XREAD BLOCK` on a dedicated
//! connection, never a shared one (see the private `blocking` module).
//!
//! Failure behaviour: a refused, dropped or timed-out connection, or an
//! error reply such as `OOM`/`READONLY`/`LOADING`, is
//! [`StoreError::Unavailable`] naming what was being done and the key;
//! a record that does not decode is [`StoreError::Corrupt`]. Every command
//! is bounded by a timeout, so a hung server turns into `Unavailable`
//! rather than a hung request. An error is never turned into success; a
//! write whose reply was lost may have been applied (at-least-once, as the
//! protocol expects).
//!
//! Start-up guard ([`connect`]): the server must be Redis ≥ 7
//! (`max-deleted-entry-id`), and must not run an evicting
//! `maxmemory-policy`: eviction would drop log entries, epochs or history
//! without a trace and break every guarantee above.
//!
//! Redis Cluster ([`connect_cluster`]): the same engine over cluster
//! connections that route every command and script by its slot (see the
//! private `connection` module); the start-up guard runs on every master.

mod blocking;
mod codec;
mod command;
mod connection;
pub mod keys;
mod lua;
mod setup;
mod tail;

mod connectors;
mod conversations;
mod directory;
mod displacement;
mod drafts;
mod files;
mod leases;
mod log;
mod messages;
mod nodes;
mod pairing;
mod presence;
mod rooms;
mod summaries;
mod webhooks;

pub use blocking::BLOCKING_CONNECTIONS;
pub use connection::{Connection, Target};
pub use lua::TAKE_BUDGET;
pub use setup::{connect, connect_cluster, connect_to};

use super::log::{Change, LogEvent};
use super::{Changed, StoreError};
use ::redis::Value;
use blocking::BlockingConnections;
use codec::{corrupt, entry_id, status, to_text, to_value, ScriptStatus};
use connection::Shared;
use std::time::Duration;
use switchboard_protocol::event::ConversationRef;

/// Replay-buffer limits of the Redis engine (as for the memory engine).
#[derive(Clone, Copy, Debug)]
pub struct RedisLimits {
    /// Entries older than this are trimmed (protocol §11: 15 minutes).
    pub replay_window: Duration,
    /// Safety cap on entries kept per Bay, whatever their age.
    pub max_entries: usize,
}

/// Longest any one command may take, queueing on its connection included.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest wait for a dedicated (blocking-read) connection to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Extra time a blocking read gets beyond its `BLOCK` before it is abandoned.
const BLOCK_GRACE: Duration = Duration::from_secs(3);
/// Attempts of a compare-and-set before giving up as contended.
const CAS_ATTEMPTS: usize = 32;
/// Largest page `messages_before` reads at once (keeps Lua's numbers exact).
const MAX_PAGE: usize = 1_000_000;
/// Largest `COUNT` / `BLOCK` sent to Redis (it parses signed 64-bit integers).
const MAX_COUNT: usize = i64::MAX as usize;

/// The Redis store engine. Cheap to share behind an `Arc`.
pub struct RedisStore {
    shared: Shared,
    blocking: BlockingConnections,
    limits: RedisLimits,
    /// What this process last wrote of each of its presence records, so
    /// an interval writes only the entries that changed (see
    /// `presence.rs`).
    presence_written: presence::Written,
    /// The presence records this process last read, by version, so a
    /// record is decoded again only when its node wrote it again (see
    /// `presence.rs`).
    presence_read: parking_lot::Mutex<presence::ReadCache>,
    /// Whether the credentials channel may be written in the same script
    /// as a Bay's keys: a server that is not a cluster (see `directory.rs`).
    atomic_credentials: bool,
    /// This node's message appends, batched per Bay (`messages/batch.rs`).
    appends: std::sync::Arc<messages::batch::Appends>,
}

/// The JSON of a `Change` log event in `conversation` (what
/// `messages/change.lua`, `messages/mark_read.lua` and the draft scripts
/// log).
fn change_event(
    doing: &'static str,
    conversation: ConversationRef,
    change: Change,
) -> Result<String, StoreError> {
    to_text(
        doing,
        &to_value(
            doing,
            &LogEvent::Change {
                conversation,
                change: Box::new(change),
            },
        )?,
    )
}

/// The outcome of a script that changes a message (`messages/change.lua`,
/// `drafts/close.lua`): its status, and on success the log entry it wrote.
fn changed(
    doing: &'static str,
    bodies: &str,
    log: &str,
    reply: &[Value],
) -> Result<Changed, StoreError> {
    Ok(match status(doing, bodies, reply)? {
        ScriptStatus::Ok => {
            let entry = reply
                .get(1)
                .ok_or_else(|| corrupt(doing, log, "no log id"))?;
            Changed::Changed(entry_id(doing, log, entry)?)
        }
        ScriptStatus::Stale => Changed::Stale,
        ScriptStatus::Conflict => Changed::Conflict,
        ScriptStatus::Missing => Changed::NotFound,
        other => return Err(corrupt(doing, bodies, format!("script said {other:?}"))),
    })
}
