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

pub use setup::{connect, connect_cluster, connect_to};

use super::log::{Change, LogEvent};
use super::{
    new_revision, AppendOutcome, Appended, Changed, ConversationChange, Created, DraftAppend,
    DraftAppended, MessageChange, NewMessage, OpenDraft, Opening, ParticipantPresence,
    PresenceChange, Principal, Published, ReadState, Replay, Revisioned, RosterChange, RoundStep,
    Store, StoreError, Updated, Webhook, WebhookStatus, OPENINGS_KEPT,
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

#[async_trait]
impl Store for RedisStore {
    /// Pings every shared connection in turn (round-robin): `/readyz` then
    /// also reconnects the ones a Redis restart broke, before a write would
    /// find them broken (writes are not retried).
    async fn ping(&self) -> Result<(), StoreError> {
        for _ in 0..self.shared.len() {
            let _: String = self.query("pinging Redis", "PING", &cmd("PING")).await?;
        }
        Ok(())
    }

    async fn create_bay(&self, bay: Bay) -> Result<Created<Bay>, StoreError> {
        let doing = "creating a bay";
        let key = BayKeys::new(&bay.id).bay();
        let json = encode(doing, &key, &bay)?;
        let reply: Value = self
            .query(doing, &key, cmd("SET").arg(&key).arg(json).arg("NX"))
            .await?;
        Ok(match reply {
            Value::Nil => Created::AlreadyExists,
            _ => Created::Created(bay),
        })
    }

    async fn bay(&self, bay: &BayId) -> Result<Option<Bay>, StoreError> {
        let doing = "reading a bay";
        let key = BayKeys::new(bay).bay();
        let raw: Option<Vec<u8>> = self.query(doing, &key, cmd("GET").arg(&key)).await?;
        raw.map(|r| decode(doing, &key, &r)).transpose()
    }

    async fn create_participant(
        &self,
        bay: &BayId,
        participant: Participant,
        token: TokenHash,
    ) -> Result<Created<Participant>, StoreError> {
        let doing = "creating a participant";
        let k = BayKeys::new(bay);
        let tkey = keys::token(&token);
        let owner = encode(
            doing,
            &tkey,
            &TokenOwner {
                bay: bay.clone(),
                participant: participant.id.clone(),
            },
        )?;
        // 1. Claim the token's index entry (unless a live participant holds it).
        let mut claimed = false;
        for _ in 0..CAS_ATTEMPTS {
            let current: Option<String> = self.query(doing, &tkey, cmd("GET").arg(&tkey)).await?;
            let expected = match current {
                None => String::new(),
                Some(raw) => {
                    let holder: TokenOwner = decode(doing, &tkey, raw.as_bytes())?;
                    if self.token_is_current(doing, &holder, &token).await? {
                        return Ok(Created::AlreadyExists);
                    }
                    raw
                }
            };
            let swapped: i64 = self
                .invoke(doing, &scripts::TOKEN_CLAIM, &[&tkey], &[&expected, &owner])
                .await?;
            if swapped == 1 {
                claimed = true;
                break;
            }
        }
        if !claimed {
            return Err(unavailable(doing, &tkey, "token index entry kept changing"));
        }
        // 2. Create the participant with its token, in the Bay's slot.
        let (bay_key, participants, ptokens) = (k.bay(), k.participants(), k.participant_tokens());
        let json = encode(doing, &participants, &participant)?;
        let reply = self
            .invoke_status(
                doing,
                &scripts::CREATE_PARTICIPANT,
                &[&bay_key, &participants, &ptokens],
                &[participant.id.as_str(), &json, &token.0],
            )
            .await?;
        match status(doing, &participants, &reply)? {
            ScriptStatus::Ok => Ok(Created::Created(participant)),
            ScriptStatus::NoBay | ScriptStatus::Exists => {
                // Give the claim back, unless the existing participant is
                // this very one with this very token (a concurrent create
                // of the same record, e.g. two nodes bootstrapping at once).
                let holder = TokenOwner {
                    bay: bay.clone(),
                    participant: participant.id.clone(),
                };
                if !self.token_is_current(doing, &holder, &token).await? {
                    self.release_token(doing, &token, &owner).await;
                }
                Ok(Created::AlreadyExists)
            }
            other => Err(corrupt(
                doing,
                &participants,
                format!("script said {other:?}"),
            )),
        }
    }

    async fn participant(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<Option<Participant>, StoreError> {
        self.hash_record(
            "reading a participant",
            &BayKeys::new(bay).participants(),
            participant.as_str(),
        )
        .await
    }

    async fn participants(&self, bay: &BayId) -> Result<Vec<Participant>, StoreError> {
        let mut out: Vec<Participant> = self
            .hash_records("listing participants", &BayKeys::new(bay).participants())
            .await?;
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    async fn participants_in(
        &self,
        bay: &BayId,
        ids: &[ParticipantId],
    ) -> Result<Vec<Participant>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let doing = "loading a roster's participants";
        let key = BayKeys::new(bay).participants();
        let mut c = cmd("HMGET");
        c.arg(&key);
        for id in ids {
            c.arg(id.as_str());
        }
        let raw: Vec<Option<Vec<u8>>> = self.query(doing, &key, &c).await?;
        raw.iter()
            .flatten()
            .map(|r| decode::<Participant>(doing, &key, r))
            .collect()
    }

    async fn set_token(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        token: Option<TokenHash>,
    ) -> Result<Updated<()>, StoreError> {
        let doing = "replacing a token";
        let k = BayKeys::new(bay);
        let (participants, ptokens, log, epoch, meta, rosters) = (
            k.participants(),
            k.participant_tokens(),
            k.log(),
            k.epoch(),
            k.log_meta(),
            k.rosters(),
        );
        let owner = encode(
            doing,
            &participants,
            &TokenOwner {
                bay: bay.clone(),
                participant: participant.clone(),
            },
        )?;
        // 1. Point the new token at its owner. It authenticates only once
        //    step 2 made it the participant's current token.
        if let Some(new) = &token {
            let tkey = keys::token(new);
            let _: Value = self
                .query(doing, &tkey, cmd("SET").arg(&tkey).arg(&owner))
                .await?;
        }
        // 2. Swap the participant's token and log the revocation, atomically.
        //    From here on the old token no longer authenticates.
        let holes = Holes::new();
        let mut revoked = to_value(
            doing,
            &LogEvent::CredentialRevoked {
                participant: participant.clone(),
                token: TokenId(String::new()),
            },
        )?;
        punch(doing, &mut revoked, &["token"], holes.hole(0))?;
        let revoked = holes.split(doing, &to_text(doing, &revoked)?, 1)?;
        let new_hash = token.as_ref().map(|t| t.0.as_str()).unwrap_or("");
        let reply = self
            .invoke_status(
                doing,
                &scripts::SET_TOKEN,
                &[&participants, &ptokens, &log, &epoch, &meta, &rosters],
                &[
                    participant.as_str(),
                    new_hash,
                    &epoch_candidate(),
                    &self.window_ms(),
                    &self.max_entries(),
                    &revoked[0],
                    &revoked[1],
                ],
            )
            .await?;
        match status(doing, &participants, &reply)? {
            ScriptStatus::Ok => {}
            ScriptStatus::Missing => {
                if let Some(new) = &token {
                    self.release_token(doing, new, &owner).await;
                }
                return Ok(Updated::NotFound);
            }
            other => {
                return Err(corrupt(
                    doing,
                    &participants,
                    format!("script said {other:?}"),
                ))
            }
        }
        // 3. Drop the old token's index entry (garbage collection only).
        let old = reply
            .get(1)
            .map(|v| text(doing, &ptokens, v))
            .transpose()?
            .unwrap_or("");
        if !old.is_empty() && Some(old) != token.as_ref().map(|t| t.0.as_str()) {
            self.release_token(doing, &TokenHash(old.to_owned()), &owner)
                .await;
        }
        Ok(Updated::Updated(()))
    }

    async fn authenticate(&self, token: &TokenHash) -> Result<Option<Principal>, StoreError> {
        let doing = "authenticating a token";
        let tkey = keys::token(token);
        let raw: Option<Vec<u8>> = self.query(doing, &tkey, cmd("GET").arg(&tkey)).await?;
        let Some(raw) = raw else {
            return Ok(None);
        };
        let owner: TokenOwner = decode(doing, &tkey, &raw)?;
        let k = BayKeys::new(&owner.bay);
        let (ptokens, participants) = (k.participant_tokens(), k.participants());
        let found: Option<Vec<u8>> = self
            .invoke(
                doing,
                &scripts::AUTHENTICATE,
                &[&ptokens, &participants],
                &[owner.participant.as_str(), &token.0],
            )
            .await?;
        let Some(found) = found else {
            return Ok(None);
        };
        Ok(Some(Principal {
            bay: owner.bay,
            participant: decode(doing, &participants, &found)?,
            token: token.id(),
        }))
    }

    async fn create_conversation(
        &self,
        bay: &BayId,
        conversation: Conversation,
    ) -> Result<Created<Conversation>, StoreError> {
        let doing = "creating a conversation";
        let k = BayKeys::new(bay);
        let (bay_key, convs, revisions, log, epoch, meta, rosters) = (
            k.bay(),
            k.conversations(),
            k.revisions(),
            k.log(),
            k.epoch(),
            k.log_meta(),
            k.rosters(),
        );
        let json = encode(doing, &convs, &conversation)?;
        let event = encode(doing, &log, &LogEvent::roster(&conversation))?;
        let change = Self::roster_change_json(doing, &rosters, &conversation, Vec::new())?;
        let reply = self
            .invoke_status(
                doing,
                &scripts::CREATE_CONVERSATION,
                &[&bay_key, &convs, &revisions, &log, &epoch, &meta, &rosters],
                &[
                    conversation.id.as_str(),
                    &json,
                    &event,
                    &epoch_candidate(),
                    &self.window_ms(),
                    &self.max_entries(),
                    &change,
                    &new_revision().to_string(),
                ],
            )
            .await?;
        match status(doing, &convs, &reply)? {
            ScriptStatus::Ok => Ok(Created::Created(conversation)),
            ScriptStatus::NoBay | ScriptStatus::Exists => Ok(Created::AlreadyExists),
            other => Err(corrupt(doing, &convs, format!("script said {other:?}"))),
        }
    }

    async fn conversation(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
    ) -> Result<Option<Conversation>, StoreError> {
        self.hash_record(
            "reading a conversation",
            &BayKeys::new(bay).conversations(),
            conversation.as_str(),
        )
        .await
    }

    async fn conversations(&self, bay: &BayId) -> Result<Vec<Conversation>, StoreError> {
        let mut out: Vec<Conversation> = self
            .hash_records("listing conversations", &BayKeys::new(bay).conversations())
            .await?;
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    async fn conversation_revisioned(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
    ) -> Result<Option<Revisioned<Conversation>>, StoreError> {
        let doing = "reading a conversation for a write";
        let k = BayKeys::new(bay);
        let (convs, revisions) = (k.conversations(), k.revisions());
        let reply: Value = self
            .invoke(
                doing,
                &scripts::CONVERSATION_REVISIONED,
                &[&convs, &revisions],
                &[conversation.as_str()],
            )
            .await?;
        match array(doing, &convs, &reply)? {
            [] => Ok(None),
            [json, revision] => Ok(Some(Revisioned {
                value: decode(doing, &convs, bytes(doing, &convs, json)?)?,
                revision: text(doing, &revisions, revision)?
                    .parse()
                    .map_err(|e| corrupt(doing, &revisions, e))?,
            })),
            _ => Err(corrupt(doing, &convs, "malformed conversation reply")),
        }
    }

    /// Compare-and-set: reads the conversation, applies `change` in Rust,
    /// and writes it back with its `Roster` entry, roster change and
    /// revision bump unless someone changed it meanwhile (then retries).
    async fn change_conversation(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        change: ConversationChange,
    ) -> Result<Updated<Conversation>, StoreError> {
        let doing = "changing a conversation";
        let k = BayKeys::new(bay);
        let (convs, revisions, log, epoch, meta, rosters) = (
            k.conversations(),
            k.revisions(),
            k.log(),
            k.epoch(),
            k.log_meta(),
            k.rosters(),
        );
        for _ in 0..CAS_ATTEMPTS {
            let raw: Option<String> = self
                .query(
                    doing,
                    &convs,
                    cmd("HGET").arg(&convs).arg(conversation.as_str()),
                )
                .await?;
            let Some(raw) = raw else {
                return Ok(Updated::NotFound);
            };
            let mut c: Conversation = decode(doing, &convs, raw.as_bytes())?;
            let before = c.member_ids();
            if !change.apply(&mut c) {
                return Ok(Updated::NotFound);
            }
            let new = encode(doing, &convs, &c)?;
            let event = encode(doing, &log, &LogEvent::roster(&c))?;
            let roster_change = Self::roster_change_json(doing, &rosters, &c, before)?;
            let reply = self
                .invoke_status(
                    doing,
                    &scripts::CHANGE_CONVERSATION,
                    &[&convs, &revisions, &log, &epoch, &meta, &rosters],
                    &[
                        conversation.as_str(),
                        &raw,
                        &new,
                        &event,
                        &epoch_candidate(),
                        &self.window_ms(),
                        &self.max_entries(),
                        &roster_change,
                        &new_revision().to_string(),
                    ],
                )
                .await?;
            match status(doing, &convs, &reply)? {
                ScriptStatus::Ok => return Ok(Updated::Updated(c)),
                ScriptStatus::Missing => return Ok(Updated::NotFound),
                ScriptStatus::Conflict => continue,
                other => return Err(corrupt(doing, &convs, format!("script said {other:?}"))),
            }
        }
        Err(unavailable(
            doing,
            &convs,
            "the conversation kept changing under concurrent updates",
        ))
    }

    async fn append_message(
        &self,
        bay: &BayId,
        mut new: NewMessage,
        sender_kind: ParticipantKind,
    ) -> Result<AppendOutcome, StoreError> {
        let doing = "appending a message";
        // Versions count changes after the append, from 0 (the versions
        // hash starts empty).
        new.message.version = 0;
        let k = BayKeys::new(bay);
        let cid = &new.conversation.id;
        let idempotency = new.idempotency.as_ref();
        let keys = [
            k.conversations(),
            k.revisions(),
            k.conversation_state(cid),
            k.messages(cid),
            k.message_ids(cid),
            k.log(),
            k.epoch(),
            k.log_meta(),
            k.rosters(),
            k.bodies(cid),
            k.reads(cid),
            k.polls(),
            k.idempotency(idempotency.map_or("none", |i| i.key.as_str())),
            k.draft_text(cid, new.message.id.as_str()),
            k.drafts(),
            k.draft_info(),
        ];
        let draft = new.message.is_streaming();
        let (msgs, log) = (&keys[3], &keys[5]);
        // The message with holes for `createdAt`, `routing.suppressed` and
        // `seq`, and the log event with a hole for the message: the script
        // stamps and fills them.
        let holes = Holes::new();
        let mut message = to_value(doing, &new.message)?;
        punch(doing, &mut message, &["created_at"], holes.hole(0))?;
        punch(
            doing,
            &mut message,
            &["routing", "suppressed"],
            holes.hole(1),
        )?;
        punch(doing, &mut message, &["seq"], holes.hole(2))?;
        let message = holes.split(doing, &to_text(doing, &message)?, 3)?;
        let event_holes = Holes::new();
        let given_suppressed = new.message.routing.suppressed;
        let message_id = new.message.id.clone();
        // The event around a hole for the message (which is in the pieces
        // above already): no second serialization of the message.
        let mut event = serde_json::json!({
            "kind": "message",
            "conversation": to_value(doing, &new.conversation)?,
            "message": null,
        });
        punch(doing, &mut event, &["message"], event_holes.hole(0))?;
        let event = event_holes.split(doing, &to_text(doing, &event)?, 1)?;
        let kind = match sender_kind {
            ParticipantKind::User => "user",
            ParticipantKind::Agent => "agent",
        };
        let cap = new.round_cap.map(|c| c.to_string()).unwrap_or_default();
        let revision = new.revision.to_string();
        let poll = new.message.poll.as_ref().map_or("", |p| p.id.as_str());
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let reply = self
            .invoke_status(
                doing,
                &scripts::APPEND_MESSAGE,
                &key_refs,
                &[
                    cid.as_str(),
                    message_id.as_str(),
                    kind,
                    &cap,
                    if given_suppressed { "true" } else { "false" },
                    &message[0],
                    &message[1],
                    &message[2],
                    &message[3],
                    &event[0],
                    &event[1],
                    &epoch_candidate(),
                    &self.window_ms(),
                    &self.max_entries(),
                    &revision,
                    idempotency.map_or("", |i| i.fingerprint.as_str()),
                    poll,
                    new.message.sender.id.as_str(),
                    if draft {
                        new.message.sender.id.as_str()
                    } else {
                        ""
                    },
                    if draft {
                        new.message.content.as_str()
                    } else {
                        ""
                    },
                ],
            )
            .await?;
        match status(doing, msgs, &reply)? {
            ScriptStatus::Ok => {}
            ScriptStatus::Stale => return Ok(AppendOutcome::Stale),
            ScriptStatus::Conflict => return Ok(AppendOutcome::KeyReused),
            ScriptStatus::Exists => {
                let first = reply
                    .get(1)
                    .map(|v| bytes(doing, msgs, v))
                    .transpose()?
                    .filter(|b| !b.is_empty())
                    .ok_or_else(|| corrupt(doing, msgs, "idempotent send lost its message"))?;
                return Ok(AppendOutcome::Duplicate(Box::new(decode(
                    doing, msgs, first,
                )?)));
            }
            ScriptStatus::Missing => {
                return Err(corrupt(
                    doing,
                    &keys[0],
                    format!("conversation {cid} vanished"),
                ))
            }
            other => return Err(corrupt(doing, msgs, format!("script said {other:?}"))),
        }
        let [_, entry, ms, suppressed, seq] = reply.as_slice() else {
            return Err(corrupt(doing, msgs, "append script gave a malformed reply"));
        };
        // The stored message is ours with the holes filled: patch them in
        // rather than decode the JSON back.
        let mut message = new.message;
        let ms: i64 = text(doing, msgs, ms)?
            .parse()
            .map_err(|e| corrupt(doing, msgs, e))?;
        message.created_at = DateTime::<Utc>::from_timestamp_millis(ms)
            .ok_or_else(|| corrupt(doing, msgs, format!("createdAt {ms} out of range")))?;
        message.routing.suppressed = text(doing, msgs, suppressed)? == "true";
        message.seq = text(doing, msgs, seq)?
            .parse()
            .map_err(|e| corrupt(doing, msgs, e))?;
        if draft {
            // The sweep's cross-Bay index lives in another slot: written
            // after the Bay's own keys; the sweep checks the Bay's set.
            let index = keys::draft_bays();
            let _: i64 = self
                .query(doing, &index, cmd("SADD").arg(&index).arg(bay.as_str()))
                .await?;
        }
        Ok(AppendOutcome::Appended(Box::new(Appended {
            entry: entry_id(doing, log, entry)?,
            message,
        })))
    }

    async fn change_message(
        &self,
        bay: &BayId,
        change: MessageChange,
    ) -> Result<Changed, StoreError> {
        let doing = "changing a message";
        let k = BayKeys::new(bay);
        let cid = &change.conversation.id;
        let keys = message_change_keys(&k, cid);
        let body = to_text(doing, &to_value(doing, &change.message)?)?;
        let event = to_text(
            doing,
            &to_value(
                doing,
                &LogEvent::Change {
                    conversation: change.conversation.clone(),
                    change: change.change,
                },
            )?,
        )?;
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let reply = self
            .invoke_status(
                doing,
                &scripts::CHANGE_MESSAGE,
                &key_refs,
                &[
                    cid.as_str(),
                    change.message.id.as_str(),
                    &change.revision.to_string(),
                    &change.message.version.to_string(),
                    &body,
                    &event,
                    &epoch_candidate(),
                    &self.window_ms(),
                    &self.max_entries(),
                ],
            )
            .await?;
        changed(doing, &keys[4], &keys[5], &reply)
    }

    async fn append_draft(
        &self,
        bay: &BayId,
        append: DraftAppend,
    ) -> Result<DraftAppended, StoreError> {
        let doing = "appending to a draft";
        let k = BayKeys::new(bay);
        let cid = append.conversation.id.clone();
        let keys = [
            k.versions(&cid),
            k.draft_text(&cid, append.message.as_str()),
            k.drafts(),
            k.log(),
            k.epoch(),
            k.log_meta(),
            k.rosters(),
            k.conversations(),
            k.revisions(),
        ];
        let version = append.version + 1;
        let text = append.text.clone();
        let event = to_text(
            doing,
            &to_value(
                doing,
                &LogEvent::Change {
                    conversation: append.conversation,
                    change: Change::Delta {
                        message: append.message.clone(),
                        offset: append.offset,
                        text: append.text,
                        version,
                    },
                },
            )?,
        )?;
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let reply = self
            .invoke_status(
                doing,
                &scripts::APPEND_DRAFT,
                &key_refs,
                &[
                    append.message.as_str(),
                    &append.version.to_string(),
                    &text,
                    &event,
                    &epoch_candidate(),
                    &self.window_ms(),
                    &self.max_entries(),
                    cid.as_str(),
                    &append.revision.to_string(),
                ],
            )
            .await?;
        Ok(match status(doing, &keys[1], &reply)? {
            ScriptStatus::Ok => {
                let entry = reply
                    .get(1)
                    .ok_or_else(|| corrupt(doing, &keys[3], "no log id"))?;
                DraftAppended::Appended {
                    entry: entry_id(doing, &keys[3], entry)?,
                    version,
                }
            }
            ScriptStatus::Conflict => DraftAppended::Conflict,
            ScriptStatus::Closed => DraftAppended::Closed,
            ScriptStatus::Stale => DraftAppended::Stale,
            ScriptStatus::Missing => DraftAppended::NotFound,
            other => return Err(corrupt(doing, &keys[1], format!("script said {other:?}"))),
        })
    }

    async fn close_draft(
        &self,
        bay: &BayId,
        change: MessageChange,
        round: Option<RoundStep>,
    ) -> Result<Changed, StoreError> {
        let doing = "ending a draft";
        let k = BayKeys::new(bay);
        let cid = &change.conversation.id;
        let mid = change.message.id.clone();
        let mut keys = message_change_keys(&k, cid).to_vec();
        keys.extend([
            k.conversation_state(cid),
            k.draft_text(cid, mid.as_str()),
            k.drafts(),
            k.draft_info(),
        ]);
        // Both outcomes of the round cap, rendered here: the script picks
        // one, so it never edits JSON.
        let render = |suppressed: bool| -> Result<(String, String), StoreError> {
            let mut message = change.message.clone();
            let mut logged = change.change.clone();
            message.routing.suppressed = suppressed;
            if let Change::Completed { message: m } = &mut logged {
                m.routing.suppressed = suppressed;
            }
            let body = to_text(doing, &to_value(doing, &message)?)?;
            let event = to_text(
                doing,
                &to_value(
                    doing,
                    &LogEvent::Change {
                        conversation: change.conversation.clone(),
                        change: logged,
                    },
                )?,
            )?;
            Ok((body, event))
        };
        let given = change.message.routing.suppressed;
        // Without a round step the given flag stands; with one, the
        // script decides and picks the matching rendering.
        let (body, event) = render(given && round.is_none())?;
        let (body_yes, event_yes) = match round {
            Some(_) => render(true)?,
            None => (String::new(), String::new()),
        };
        let kind = match round.map(|r| r.sender) {
            Some(ParticipantKind::User) => "user",
            Some(ParticipantKind::Agent) => "agent",
            None => "",
        };
        let cap = round
            .and_then(|r| r.cap)
            .map(|c| c.to_string())
            .unwrap_or_default();
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let reply = self
            .invoke_status(
                doing,
                &scripts::CLOSE_DRAFT,
                &key_refs,
                &[
                    cid.as_str(),
                    mid.as_str(),
                    &change.revision.to_string(),
                    &change.message.version.to_string(),
                    &body,
                    &event,
                    &epoch_candidate(),
                    &self.window_ms(),
                    &self.max_entries(),
                    kind,
                    &cap,
                    &body_yes,
                    &event_yes,
                    if given { "true" } else { "false" },
                ],
            )
            .await?;
        changed(doing, &keys[4], &keys[5], &reply)
    }

    async fn open_drafts(&self, bay: &BayId) -> Result<Vec<OpenDraft>, StoreError> {
        let doing = "listing open drafts";
        let k = BayKeys::new(bay);
        let (drafts, info) = (k.drafts(), k.draft_info());
        let scored: Vec<(String, i64)> = self
            .query(
                doing,
                &drafts,
                cmd("ZRANGE").arg(&drafts).arg(0).arg(-1).arg("WITHSCORES"),
            )
            .await?;
        if scored.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<&str> = scored.iter().map(|(m, _)| m.as_str()).collect();
        let infos: Vec<Option<String>> = self
            .query(doing, &info, cmd("HMGET").arg(&info).arg(&ids))
            .await?;
        Ok(scored
            .iter()
            .zip(infos)
            .filter_map(|((mid, ms), info)| {
                let info = info?;
                let (cid, author) = info.split_once(' ')?;
                Some(OpenDraft {
                    conversation: ConversationId(cid.to_owned()),
                    message: MessageId(mid.clone()),
                    author: ParticipantId(author.to_owned()),
                    last_activity: DateTime::<Utc>::from_timestamp_millis(*ms)?,
                })
            })
            .collect())
    }

    async fn draft_bays(&self) -> Result<Vec<BayId>, StoreError> {
        let doing = "listing Bays with drafts";
        let key = keys::draft_bays();
        let raw: Vec<String> = self.query(doing, &key, cmd("SMEMBERS").arg(&key)).await?;
        Ok(raw.into_iter().map(BayId).collect())
    }

    async fn prune_draft_bay(&self, bay: &BayId) -> Result<(), StoreError> {
        let doing = "pruning the draft index";
        let drafts = BayKeys::new(bay).drafts();
        let open: i64 = self
            .query(doing, &drafts, cmd("ZCARD").arg(&drafts))
            .await?;
        if open == 0 {
            // A draft opened between the two calls re-adds the Bay itself.
            let key = keys::draft_bays();
            let _: i64 = self
                .query(doing, &key, cmd("SREM").arg(&key).arg(bay.as_str()))
                .await?;
        }
        Ok(())
    }

    async fn set_webhook(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        webhook: Option<(Webhook, LogPosition)>,
    ) -> Result<(), StoreError> {
        let doing = "setting a webhook";
        let k = BayKeys::new(bay);
        let (hooks, positions, status) = (k.webhooks(), k.webhook_positions(), k.webhook_status());
        let owner = format!("{bay} {participant}");
        let owners = keys::webhook_owners();
        let (json, from) = match &webhook {
            Some((hook, from)) => (encode(doing, &hooks, hook)?, from.encode()),
            None => (String::new(), String::new()),
        };
        let _: i64 = self
            .invoke(
                doing,
                &scripts::SET_WEBHOOK,
                &[&hooks, &positions, &status],
                &[participant.as_str(), &json, &from],
            )
            .await?;
        // The cross-Bay index lives in another slot: written after the
        // Bay's own keys, and readers check the Bay's hash.
        let index = match webhook {
            Some(_) => cmd("SADD"),
            None => cmd("SREM"),
        };
        let _: i64 = self
            .query(doing, &owners, index.clone().arg(&owners).arg(&owner))
            .await?;
        Ok(())
    }

    async fn webhook(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<Option<Webhook>, StoreError> {
        let doing = "reading a webhook";
        let key = BayKeys::new(bay).webhooks();
        let raw: Option<Vec<u8>> = self
            .query(doing, &key, cmd("HGET").arg(&key).arg(participant.as_str()))
            .await?;
        raw.map(|r| decode(doing, &key, &r)).transpose()
    }

    async fn webhook_owners(&self) -> Result<Vec<(BayId, ParticipantId)>, StoreError> {
        let doing = "listing webhooks";
        let key = keys::webhook_owners();
        let raw: Vec<String> = self.query(doing, &key, cmd("SMEMBERS").arg(&key)).await?;
        Ok(raw
            .iter()
            .filter_map(|o| o.split_once(' '))
            .map(|(b, p)| (BayId(b.to_owned()), ParticipantId(p.to_owned())))
            .collect())
    }

    async fn webhook_position(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<Option<LogPosition>, StoreError> {
        let doing = "reading a webhook position";
        let key = BayKeys::new(bay).webhook_positions();
        let raw: Option<String> = self
            .query(doing, &key, cmd("HGET").arg(&key).arg(participant.as_str()))
            .await?;
        raw.map(|r| LogPosition::decode(&r).map_err(|e| corrupt(doing, &key, e)))
            .transpose()
    }

    async fn set_webhook_position(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        of: &Webhook,
        position: &LogPosition,
    ) -> Result<(), StoreError> {
        let doing = "moving a webhook position";
        let k = BayKeys::new(bay);
        let (hooks, positions) = (k.webhooks(), k.webhook_positions());
        let _: i64 = self
            .invoke(
                doing,
                &scripts::SET_IF_WEBHOOK,
                &[&hooks, &positions],
                &[
                    participant.as_str(),
                    &encode(doing, &hooks, of)?,
                    &position.encode(),
                ],
            )
            .await?;
        Ok(())
    }

    async fn webhook_status(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<WebhookStatus, StoreError> {
        let doing = "reading a webhook status";
        let key = BayKeys::new(bay).webhook_status();
        let raw: Option<Vec<u8>> = self
            .query(doing, &key, cmd("HGET").arg(&key).arg(participant.as_str()))
            .await?;
        Ok(raw
            .map(|r| decode(doing, &key, &r))
            .transpose()?
            .unwrap_or_default())
    }

    async fn set_webhook_status(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        of: &Webhook,
        status: &WebhookStatus,
    ) -> Result<(), StoreError> {
        let doing = "recording a webhook status";
        let k = BayKeys::new(bay);
        let (hooks, key) = (k.webhooks(), k.webhook_status());
        let _: i64 = self
            .invoke(
                doing,
                &scripts::SET_IF_WEBHOOK,
                &[&hooks, &key],
                &[
                    participant.as_str(),
                    &encode(doing, &hooks, of)?,
                    &encode(doing, &key, status)?,
                ],
            )
            .await?;
        Ok(())
    }

    async fn disable_webhook(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        of: &Webhook,
        status: &WebhookStatus,
    ) -> Result<(), StoreError> {
        let doing = "disabling a webhook";
        let k = BayKeys::new(bay);
        let (hooks, positions, key) = (k.webhooks(), k.webhook_positions(), k.webhook_status());
        let removed: i64 = self
            .invoke(
                doing,
                &scripts::DISABLE_WEBHOOK,
                &[&hooks, &positions, &key],
                &[
                    participant.as_str(),
                    &encode(doing, &hooks, of)?,
                    &encode(doing, &key, status)?,
                ],
            )
            .await?;
        if removed == 1 {
            let owners = keys::webhook_owners();
            let _: i64 = self
                .query(
                    doing,
                    &owners,
                    cmd("SREM").arg(&owners).arg(format!("{bay} {participant}")),
                )
                .await?;
        }
        Ok(())
    }

    async fn lease(&self, name: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError> {
        let key = keys::lease(name);
        let held: i64 = self
            .invoke(
                "taking a lease",
                &scripts::LEASE,
                &[&key],
                &[holder, &ttl.as_millis().max(1).to_string()],
            )
            .await?;
        Ok(held == 1)
    }

    async fn release_lease(&self, name: &str, holder: &str) -> Result<(), StoreError> {
        let key = keys::lease(name);
        let _: i64 = self
            .invoke(
                "releasing a lease",
                &scripts::RELEASE_LEASE,
                &[&key],
                &[holder],
            )
            .await?;
        Ok(())
    }

    async fn set_presence(
        &self,
        bay: &BayId,
        node: &str,
        entries: &[ParticipantPresence],
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let doing = "recording presence";
        let key = BayKeys::new(bay).presence();
        let until = Utc::now().timestamp_millis() + ttl.as_millis() as i64;
        let now = super::now_ms();
        let value = encode(
            doing,
            &key,
            &Presence {
                until,
                online: entries
                    .iter()
                    .filter(|e| e.present_at(now))
                    .map(|e| e.participant.clone())
                    .collect(),
                entries: Some(entries.to_vec()),
            },
        )?;
        let _: i64 = self
            .query(doing, &key, cmd("HSET").arg(&key).arg(node).arg(value))
            .await?;
        Ok(())
    }

    async fn presence_records(&self, bay: &BayId) -> Result<Vec<ParticipantPresence>, StoreError> {
        let doing = "reading presence";
        let key = BayKeys::new(bay).presence();
        let raw: Vec<(String, Vec<u8>)> = self.query(doing, &key, cmd("HGETALL").arg(&key)).await?;
        let now = Utc::now().timestamp_millis();
        let mut out = Vec::new();
        let mut expired = Vec::new();
        for (node, value) in raw {
            let p: Presence = decode(doing, &key, &value)?;
            if p.until <= now {
                expired.push(node);
                continue;
            }
            match p.entries {
                Some(entries) => out.extend(entries),
                None => out.extend(p.online.into_iter().map(|participant| ParticipantPresence {
                    session: true,
                    ..ParticipantPresence::new(participant)
                })),
            }
        }
        // Node ids are new at every start: drop the records of nodes gone
        // for good, so the hash does not grow with every restart.
        if !expired.is_empty() {
            let _: i64 = self
                .query(doing, &key, cmd("HDEL").arg(&key).arg(&expired))
                .await?;
        }
        Ok(out)
    }

    async fn published_presence(
        &self,
        bay: &BayId,
    ) -> Result<Vec<(ParticipantId, PresenceState)>, StoreError> {
        let doing = "reading published presence";
        let key = BayKeys::new(bay).presence_states();
        let raw: Vec<(String, String)> = self.query(doing, &key, cmd("HGETALL").arg(&key)).await?;
        let mut out = raw
            .into_iter()
            .map(|(p, state)| {
                let state = PresenceState::parse(&state)
                    .ok_or_else(|| corrupt(doing, &key, format!("unknown state {state:?}")))?;
                Ok((ParticipantId(p), state))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        out.sort();
        Ok(out)
    }

    async fn publish_presence(
        &self,
        bay: &BayId,
        changes: &[PresenceChange],
    ) -> Result<Published, StoreError> {
        if changes.is_empty() {
            return Ok(Published::Logged(Vec::new()));
        }
        let doing = "publishing presence";
        let k = BayKeys::new(bay);
        let (log, epoch, meta, rosters, states) = (
            k.log(),
            k.epoch(),
            k.log_meta(),
            k.rosters(),
            k.presence_states(),
        );
        let mut args = vec![epoch_candidate(), self.window_ms(), self.max_entries()];
        for c in changes {
            args.push(c.participant.as_str().to_owned());
            args.push(c.from.as_str().to_owned());
            args.push(c.to.as_str().to_owned());
            args.push(encode(
                doing,
                &log,
                &LogEvent::Presence {
                    participant: c.participant.clone(),
                    state: c.to,
                    at: c.at,
                },
            )?);
        }
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let reply = self
            .invoke_status(
                doing,
                &scripts::PUBLISH_PRESENCE,
                &[&log, &epoch, &meta, &rosters, &states],
                &argv,
            )
            .await?;
        match status(doing, &log, &reply)? {
            ScriptStatus::Ok => reply[1..]
                .iter()
                .map(|id| entry_id(doing, &log, id))
                .collect::<Result<Vec<_>, _>>()
                .map(Published::Logged),
            ScriptStatus::Conflict => Ok(Published::Conflict),
            other => Err(corrupt(doing, &log, format!("script said {other:?}"))),
        }
    }

    async fn poll_message(
        &self,
        bay: &BayId,
        poll: &str,
    ) -> Result<Option<(ConversationId, MessageId)>, StoreError> {
        let doing = "finding a poll";
        let key = BayKeys::new(bay).polls();
        let raw: Option<String> = self
            .query(doing, &key, cmd("HGET").arg(&key).arg(poll))
            .await?;
        Ok(raw.and_then(|r| {
            let (c, m) = r.split_once(' ')?;
            Some((ConversationId(c.to_owned()), MessageId(m.to_owned())))
        }))
    }

    async fn mark_read(
        &self,
        bay: &BayId,
        conversation: &ConversationRef,
        participant: &ParticipantId,
        message: &StoredMessage,
    ) -> Result<Option<EntryId>, StoreError> {
        let doing = "moving a read marker";
        let k = BayKeys::new(bay);
        let keys = [
            k.reads(&conversation.id),
            k.log(),
            k.epoch(),
            k.log_meta(),
            k.rosters(),
            k.conversations(),
        ];
        let event = to_text(
            doing,
            &to_value(
                doing,
                &LogEvent::Change {
                    conversation: conversation.clone(),
                    change: Change::Read {
                        participant: participant.clone(),
                        message: message.id.clone(),
                    },
                },
            )?,
        )?;
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let reply = self
            .invoke_status(
                doing,
                &scripts::MARK_READ,
                &key_refs,
                &[
                    participant.as_str(),
                    &message.seq.to_string(),
                    message.id.as_str(),
                    &event,
                    conversation.id.as_str(),
                    &epoch_candidate(),
                    &self.window_ms(),
                    &self.max_entries(),
                ],
            )
            .await?;
        Ok(match status(doing, &keys[0], &reply)? {
            ScriptStatus::Ok => {
                let entry = reply
                    .get(1)
                    .ok_or_else(|| corrupt(doing, &keys[1], "no log id"))?;
                Some(entry_id(doing, &keys[1], entry)?)
            }
            ScriptStatus::Exists | ScriptStatus::Missing => None,
            other => return Err(corrupt(doing, &keys[0], format!("script said {other:?}"))),
        })
    }

    async fn read_states(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        conversations: &[ConversationId],
    ) -> Result<Vec<ReadState>, StoreError> {
        let doing = "reading read markers";
        if conversations.is_empty() {
            return Ok(Vec::new());
        }
        let k = BayKeys::new(bay);
        let keys: Vec<String> = conversations
            .iter()
            .flat_map(|c| [k.conversation_state(c), k.reads(c)])
            .collect();
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let reply: Vec<String> = self
            .invoke(
                doing,
                &scripts::READ_STATES,
                &key_refs,
                &[participant.as_str()],
            )
            .await?;
        reply
            .chunks(2)
            .map(|pair| {
                let [last, marker] = pair else {
                    return Err(corrupt(doing, &keys[0], "odd read-state reply"));
                };
                let last: u64 = last.parse().map_err(|e| corrupt(doing, &keys[0], e))?;
                let (seq, last_read) = match marker.split_once(' ') {
                    Some((seq, id)) => (
                        seq.parse::<u64>()
                            .map_err(|e| corrupt(doing, &keys[1], e))?,
                        Some(MessageId(id.to_owned())),
                    ),
                    None => (0, None),
                };
                Ok(ReadState {
                    last_read,
                    unread: last.saturating_sub(seq),
                })
            })
            .collect()
    }

    async fn message(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        message: &MessageId,
    ) -> Result<Option<StoredMessage>, StoreError> {
        let doing = "reading a message";
        let k = BayKeys::new(bay);
        let (msgs, ids, bodies) = (
            k.messages(conversation),
            k.message_ids(conversation),
            k.bodies(conversation),
        );
        let raw: Option<Vec<u8>> = self
            .invoke(
                doing,
                &scripts::MESSAGE,
                &[&msgs, &ids, &bodies],
                &[message.as_str()],
            )
            .await?;
        let mut found: Vec<StoredMessage> = raw
            .map(|r| decode(doing, &msgs, &r))
            .transpose()?
            .into_iter()
            .collect();
        self.fill_drafts(bay, &mut found).await?;
        Ok(found.pop())
    }

    async fn messages_since(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        since: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let doing = "reading messages since a time";
        if limit == 0 {
            return Ok(Vec::new());
        }
        let k = BayKeys::new(bay);
        let (key, bodies) = (k.messages(conversation), k.bodies(conversation));
        // History ids are `<createdAt ms>-0` and createdAt has ms precision:
        // "strictly after `since`" is "ms > floor(since in ms)".
        let floor = since.timestamp_millis();
        let start = if floor < 0 {
            "-".to_owned()
        } else {
            format!("{}-0", floor + 1)
        };
        let reply: Vec<Vec<u8>> = self
            .invoke(
                doing,
                &scripts::MESSAGES_SINCE,
                &[&key, &bodies],
                &[&start, &limit.min(MAX_COUNT).to_string()],
            )
            .await?;
        let mut out = reply
            .iter()
            .map(|raw| decode(doing, &key, raw))
            .collect::<Result<Vec<StoredMessage>, _>>()?;
        self.fill_drafts(bay, &mut out).await?;
        Ok(out)
    }

    async fn messages_before(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        before: Option<&MessageId>,
        limit: usize,
    ) -> Result<(Vec<StoredMessage>, bool), StoreError> {
        let doing = "reading a page of messages";
        let k = BayKeys::new(bay);
        let (msgs, ids, bodies) = (
            k.messages(conversation),
            k.message_ids(conversation),
            k.bodies(conversation),
        );
        let reply: Value = self
            .invoke(
                doing,
                &scripts::MESSAGES_BEFORE,
                &[&msgs, &ids, &bodies],
                &[
                    before.map(|m| m.as_str()).unwrap_or(""),
                    &limit.min(MAX_PAGE).to_string(),
                ],
            )
            .await?;
        let items = array(doing, &msgs, &reply)?;
        let (more, page) = items
            .split_first()
            .ok_or_else(|| corrupt(doing, &msgs, "empty page reply"))?;
        let more = matches!(more, Value::Int(1));
        let mut out = page
            .iter()
            .map(|v| decode::<StoredMessage>(doing, &msgs, bytes(doing, &msgs, v)?))
            .collect::<Result<Vec<_>, _>>()?;
        out.reverse();
        self.fill_drafts(bay, &mut out).await?;
        Ok((out, more))
    }

    async fn log_head(&self, bay: &BayId) -> Result<LogPosition, StoreError> {
        let doing = "reading the log head";
        let k = BayKeys::new(bay);
        let (log, epoch, meta) = (k.log(), k.epoch(), k.log_meta());
        let reply: Value = self
            .invoke(
                doing,
                &scripts::LOG_HEAD,
                &[&log, &epoch, &meta],
                &[&epoch_candidate()],
            )
            .await?;
        let [current, last] = array(doing, &log, &reply)? else {
            return Err(corrupt(doing, &log, "head script gave a malformed reply"));
        };
        Ok(LogPosition {
            epoch: Epoch(text(doing, &epoch, current)?.to_owned()),
            entry: entry_id(doing, &log, last)?,
        })
    }

    async fn read_log(
        &self,
        bay: &BayId,
        after: &LogPosition,
        max: usize,
        block: Option<Duration>,
    ) -> Result<Replay, StoreError> {
        // A blocking read (a feed's tail) costs one XREAD per batch when the
        // entries chain on from `after`; anything else takes the full read.
        if let Some(block) = block.filter(|b| !b.is_zero()) {
            if let Some(replay) = self.tail_once(bay, after, max, block).await? {
                return Ok(replay);
            }
        }
        self.read_once(bay, after, max).await
    }

    async fn append_control(&self, bay: &BayId, event: LogEvent) -> Result<EntryId, StoreError> {
        let doing = "appending a control entry";
        let k = BayKeys::new(bay);
        let (log, epoch, meta, rosters) = (k.log(), k.epoch(), k.log_meta(), k.rosters());
        let json = encode(doing, &log, &event)?;
        let reply = self
            .invoke_status(
                doing,
                &scripts::APPEND_EVENT,
                &[&log, &epoch, &meta, &rosters],
                &[
                    &epoch_candidate(),
                    &self.window_ms(),
                    &self.max_entries(),
                    &json,
                ],
            )
            .await?;
        match reply.as_slice() {
            [_, id] => entry_id(doing, &log, id),
            _ => Err(corrupt(doing, &log, "append script gave a malformed reply")),
        }
    }

    async fn roster_changes(
        &self,
        bay: &BayId,
        after: &LogPosition,
    ) -> Result<Vec<RosterChange>, StoreError> {
        let doing = "reading roster changes";
        let key = BayKeys::new(bay).rosters();
        let reply: Value = self
            .query(
                doing,
                &key,
                cmd("XRANGE")
                    .arg(&key)
                    .arg(format!("({}", after.entry))
                    .arg("+"),
            )
            .await?;
        stream_entries(doing, &key, &reply, "r")?
            .into_iter()
            .map(|(at, raw)| {
                let stored: StoredRosterChange = decode(doing, &key, raw)?;
                Ok(RosterChange {
                    at,
                    conversation: stored.conversation,
                    before: stored.before,
                    after: stored.after,
                })
            })
            .collect()
    }

    async fn open_session(
        &self,
        bay: &BayId,
        token: &TokenId,
        session: &SessionId,
    ) -> Result<EntryId, StoreError> {
        let doing = "announcing a session";
        let key = BayKeys::new(bay).openings();
        let json = encode(
            doing,
            &key,
            &StoredOpening {
                token: token.clone(),
                session: session.clone(),
            },
        )?;
        let id: String = self
            .query(
                doing,
                &key,
                cmd("XADD")
                    .arg(&key)
                    .arg("MAXLEN")
                    .arg("~")
                    .arg(OPENINGS_KEPT)
                    .arg("*")
                    .arg("o")
                    .arg(json),
            )
            .await?;
        id.parse().map_err(|e| corrupt(doing, &key, e))
    }

    async fn openings_head(&self, bay: &BayId) -> Result<EntryId, StoreError> {
        let doing = "reading the openings head";
        let key = BayKeys::new(bay).openings();
        let reply: Value = self
            .query(
                doing,
                &key,
                cmd("XREVRANGE")
                    .arg(&key)
                    .arg("+")
                    .arg("-")
                    .arg("COUNT")
                    .arg(1),
            )
            .await?;
        Ok(stream_entries(doing, &key, &reply, "o")?
            .first()
            .map_or(EntryId::ZERO, |(id, _)| *id))
    }

    async fn read_openings(
        &self,
        bay: &BayId,
        after: EntryId,
        max: usize,
        block: Option<Duration>,
    ) -> Result<Vec<Opening>, StoreError> {
        let doing = "reading session openings";
        let key = BayKeys::new(bay).openings();
        let read = || async {
            let reply: Value = self
                .query(
                    doing,
                    &key,
                    cmd("XRANGE")
                        .arg(&key)
                        .arg(format!("({after}"))
                        .arg("+")
                        .arg("COUNT")
                        .arg(max.clamp(1, MAX_COUNT)),
                )
                .await?;
            stream_entries(doing, &key, &reply, "o")?
                .into_iter()
                .map(|(id, raw)| {
                    let stored: StoredOpening = decode(doing, &key, raw)?;
                    Ok(Opening {
                        id,
                        token: stored.token,
                        session: stored.session,
                    })
                })
                .collect::<Result<Vec<_>, StoreError>>()
        };
        let first = read().await?;
        match block.filter(|b| !b.is_zero()) {
            Some(block) if first.is_empty() => {
                if self.wait_for_entry(&key, after, block).await? {
                    read().await
                } else {
                    Ok(first)
                }
            }
            _ => Ok(first),
        }
    }
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
