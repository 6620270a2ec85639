//! The Redis engine: state shared by every node, in Redis ≥ 7.
//!
//! Layout: see [`keys`]. Every key of a Bay is hash-tagged with the Bay id,
//! so each write below is ONE Lua script (atomic: Redis runs one script at
//! a time, and a script either runs to the end or, on error, stops) that
//! touches one slot, and stays valid on Redis Cluster:
//!
//! - `append_message`: round counter + `createdAt` stamp + history + log
//!   entry (+ trimming) in one script;
//! - roster changes: compare-and-set of the conversation JSON + `Roster`
//!   log entry in one script (the change itself is computed in Rust on the
//!   JSON read, and retried when someone changed it in between);
//! - `set_token`: token swap + `CredentialRevoked` log entry in one script;
//! - every log append mints the epoch (`SET NX`) if it is missing.
//!
//! The token index is the one cross-slot structure; it is a pointer checked
//! against the Bay's own record on every `authenticate` (see [`keys`]), so
//! the order of its writes can never make a revoked token authenticate.
//!
//! Cursor expiry (DESIGN "cursor invariant"): a cursor is `EpochChanged`
//! when its epoch is not the Bay's `sb:{bay}:epoch` (a missing epoch is
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
mod scripts;
mod setup;
mod tail;

mod conversations;
mod directory;
mod displacement;
mod drafts;
mod leases;
mod log;
mod messages;
mod presence;
mod webhooks;

pub use setup::{connect, connect_cluster, connect_to};

use super::log::{Change, LogEvent};
use super::{
    new_revision, AppendOutcome, Appended, Changed, ConversationChange, Created, DraftAppend,
    DraftAppended, MessageChange, NewMessage, OpenDraft, Opening, ParticipantPresence,
    PresenceChange, Principal, Published, ReadState, Replay, Revisioned, RosterChange, RoundStep,
    StoreError, Updated, Webhook, WebhookStatus, OPENINGS_KEPT,
};

/// One node's entry in a Bay's presence hash.
#[derive(Serialize, Deserialize)]
struct Presence {
    /// Unix ms after which the entry no longer counts.
    until: i64,
    /// Participants present on that node (a session, or within the
    /// linger): all that nodes before activity presence read.
    online: Vec<ParticipantId>,
    /// What the node knows of each participant; absent in records of
    /// nodes before activity presence (their `online` then counts as
    /// holding a session).
    #[serde(default)]
    entries: Option<Vec<ParticipantPresence>>,
}
use crate::model::{Bay, Conversation, Participant, StoredMessage};
use crate::token::TokenHash;
use ::redis::{cmd, Value};
use async_trait::async_trait;
use blocking::BlockingConnections;
pub use blocking::BLOCKING_CONNECTIONS;
use chrono::{DateTime, Utc};
use codec::{
    array, bytes, corrupt, decode, encode, entry_id, epoch_candidate, punch, status,
    stream_entries, text, to_text, to_value, unavailable, Holes, ScriptStatus,
};
use connection::Shared;
pub use connection::{Connection, Target};
use keys::BayKeys;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use switchboard_protocol::cursor::{EntryId, Epoch, LogPosition};
use switchboard_protocol::event::ConversationRef;
use switchboard_protocol::ids::{
    BayId, ConversationId, MessageId, ParticipantId, SessionId, TokenId,
};
use switchboard_protocol::model::ParticipantKind;
use switchboard_protocol::presence::PresenceState;

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
}

/// Token index value: who a token hash belongs to.
#[derive(Serialize, Deserialize)]
struct TokenOwner {
    bay: BayId,
    participant: ParticipantId,
}

impl RedisStore {
    fn window_ms(&self) -> String {
        self.limits.replay_window.as_millis().max(1).to_string()
    }

    fn max_entries(&self) -> String {
        self.limits.max_entries.max(1).to_string()
    }

    /// Whether `token` is the current token of its index entry's owner.
    async fn token_is_current(
        &self,
        doing: &'static str,
        owner: &TokenOwner,
        token: &TokenHash,
    ) -> Result<bool, StoreError> {
        let k = BayKeys::new(&owner.bay);
        let key = k.participant_tokens();
        let current: Option<String> = self
            .query(
                doing,
                &key,
                cmd("HGET").arg(&key).arg(owner.participant.as_str()),
            )
            .await?;
        Ok(current.as_deref() == Some(token.0.as_str()))
    }

    /// Deletes the token index entry of `token` if it still names `owner`.
    /// Brings open drafts among `messages` up to date: their body keeps
    /// the text they opened with; the text so far and the version live
    /// apart (see `APPEND_DRAFT`).
    async fn fill_drafts(
        &self,
        bay: &BayId,
        messages: &mut [StoredMessage],
    ) -> Result<(), StoreError> {
        let doing = "reading a draft";
        let k = BayKeys::new(bay);
        for m in messages.iter_mut().filter(|m| m.is_streaming()) {
            let (text_key, versions) = (
                k.draft_text(&m.conversation_id, m.id.as_str()),
                k.versions(&m.conversation_id),
            );
            let (text, version): (Option<String>, Option<u64>) = self
                .invoke(
                    doing,
                    &scripts::DRAFT_STATE,
                    &[&text_key, &versions],
                    &[m.id.as_str()],
                )
                .await?;
            // Missing text: the draft ended between the two reads; the
            // body read first is still a consistent older state.
            if let Some(text) = text {
                m.content = text;
                m.version = version.unwrap_or(m.version);
            }
        }
        Ok(())
    }

    async fn release_token(&self, doing: &'static str, token: &TokenHash, owner: &str) {
        let key = keys::token(token);
        if let Err(err) = self
            .invoke::<i64>(doing, &scripts::TOKEN_RELEASE, &[&key], &[owner])
            .await
        {
            // Harmless: `authenticate` checks the Bay's record, so a stale
            // index entry never authenticates.
            tracing::warn!(error = %err, "could not remove a stale token index entry");
        }
    }

    /// The `XADD` value of a roster change: who was in `conversation`
    /// before the change logged at the same id.
    fn roster_change_json(
        doing: &'static str,
        key: &str,
        conversation: &Conversation,
        before: Vec<ParticipantId>,
    ) -> Result<String, StoreError> {
        encode(
            doing,
            key,
            &StoredRosterChange {
                conversation: conversation.id.clone(),
                before,
                after: conversation.member_ids(),
            },
        )
    }

    /// Formats a Unix time in ms with the Lua formatter `append_message`
    /// uses for `createdAt` (for tests that check it against chrono).
    #[doc(hidden)]
    pub async fn lua_format_ms(&self, ms: u64) -> Result<String, StoreError> {
        self.invoke(
            "formatting a time",
            &scripts::FORMAT_MS,
            &[],
            &[&ms.to_string()],
        )
        .await
    }
}

/// An opening as `sb:{bay}:openings` stores it (its id is the entry's).
#[derive(Serialize, Deserialize)]
struct StoredOpening {
    token: TokenId,
    session: SessionId,
}

/// A roster change as `sb:{bay}:rosters` stores it (its id is the entry's).
#[derive(Serialize, Deserialize)]
struct StoredRosterChange {
    conversation: ConversationId,
    before: Vec<ParticipantId>,
    after: Vec<ParticipantId>,
}

/// The keys `CHANGE_MESSAGE` takes, in order; `CLOSE_DRAFT` takes them
/// and more.
fn message_change_keys(k: &BayKeys, cid: &ConversationId) -> [String; 9] {
    [
        k.conversations(),
        k.revisions(),
        k.message_ids(cid),
        k.versions(cid),
        k.bodies(cid),
        k.log(),
        k.epoch(),
        k.log_meta(),
        k.rosters(),
    ]
}

/// The outcome of a script that changes a message (`CHANGE_MESSAGE`,
/// `CLOSE_DRAFT`): its status, and on success the log entry it wrote.
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
