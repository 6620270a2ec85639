//! The Bay's event log (replay buffer): the Redis engine's [`LogStore`],
//! the arguments of the log append every log-writing script makes
//! ([`LogArgs`], for `append_log` in `lua/append_log.lua`) and the log
//! state the reads start from (`log/state.lua`).

use super::codec::{
    array, corrupt, decode, encode, entry_id, epoch_candidate, stream_entries, text,
};
use super::keys::BayKeys;
use super::lua::{lua_params, LuaScript, APPEND_LOG};
use super::{RedisLimits, RedisStore};
use crate::store::log::LogEvent;
use crate::store::{LogStore, Replay, RosterChange, StoreError};
use ::redis::{cmd, Value};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::sync::LazyLock;
use std::time::Duration;
use switchboard_protocol::cursor::{EntryId, Epoch, LogPosition};
use switchboard_protocol::ids::{BayId, ConversationId, ParticipantId};

/// `log_state(log, epoch, meta, candidate)`: the epoch (minted if
/// missing), the last generated id and the newest trimmed id.
pub(super) const LOG_STATE: &str = include_str!("log/state.lua");

/// `append_control`'s script: one control entry.
static APPEND_EVENT: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[APPEND_LOG, include_str!("log/append_event.lua")]));

/// `log_head`'s script (KEYS: [`LogStateKeys`]; ARGV: an epoch
/// candidate): `{epoch, last id}`.
static LOG_HEAD: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::read_only(&[LOG_STATE, include_str!("log/head.lua")]));

/// The ARGV of `append_log` that every log-writing script passes on: a
/// fresh epoch candidate (minted only when the epoch is missing), the
/// replay window in ms and the entry cap, both at least 1.
pub(super) struct LogArgs {
    pub epoch_candidate: String,
    pub window_ms: String,
    pub max_entries: String,
}

impl LogArgs {
    /// The log append's arguments for one call under `limits` (a fresh
    /// epoch candidate).
    pub(super) fn new(limits: &RedisLimits) -> Self {
        LogArgs {
            epoch_candidate: epoch_candidate(),
            window_ms: limits.replay_window.as_millis().max(1).to_string(),
            max_entries: limits.max_entries.max(1).to_string(),
        }
    }
}

impl RedisStore {
    /// The log append's arguments for one call (a fresh epoch candidate).
    pub(super) fn log_args(&self) -> LogArgs {
        LogArgs::new(&self.limits)
    }
}

lua_params! {
    /// KEYS of the log reads (`log/head.lua`, `log/read.lua`).
    pub(super) struct LogStateKeys of String { log, epoch, log_meta }
}

impl LogStateKeys {
    pub(super) fn new(k: &BayKeys) -> Self {
        LogStateKeys {
            log: k.log(),
            epoch: k.epoch(),
            log_meta: k.log_meta(),
        }
    }
}

lua_params! {
    /// KEYS of `log/append_event.lua`.
    struct AppendEventKeys of String { log, epoch, log_meta, rosters }
}

lua_params! {
    /// ARGV of `log/append_event.lua`: [`LogArgs`] and the event's JSON.
    struct AppendEventArgs<'a> of &'a str { epoch_candidate, window_ms, max_entries, event }
}

/// A roster change as `sb:{bay}:rosters` stores it, at the id of its
/// `Roster` log entry (written by `conversations.rs`, trimmed with the log).
#[derive(Serialize, Deserialize)]
pub(super) struct StoredRosterChange {
    pub conversation: ConversationId,
    pub before: Vec<ParticipantId>,
    pub after: Vec<ParticipantId>,
}

#[async_trait]
impl LogStore for RedisStore {
    async fn log_head(&self, bay: &BayId) -> Result<LogPosition, StoreError> {
        let doing = "reading the log head";
        let keys = LogStateKeys::new(&BayKeys::new(bay));
        let reply: Value = self
            .invoke(doing, &LOG_HEAD, &keys.in_order(), &[&epoch_candidate()])
            .await?;
        let [current, last] = array(doing, &keys.log, &reply)? else {
            return Err(corrupt(
                doing,
                &keys.log,
                "head script gave a malformed reply",
            ));
        };
        Ok(LogPosition {
            epoch: Epoch(text(doing, &keys.epoch, current)?.to_owned()),
            entry: entry_id(doing, &keys.log, last)?,
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
        let keys = AppendEventKeys {
            log: k.log(),
            epoch: k.epoch(),
            log_meta: k.log_meta(),
            rosters: k.rosters(),
        };
        let log = self.log_args();
        let args = AppendEventArgs {
            epoch_candidate: &log.epoch_candidate,
            window_ms: &log.window_ms,
            max_entries: &log.max_entries,
            event: &encode(doing, &keys.log, &event)?,
        };
        let reply = self
            .invoke_status(doing, &APPEND_EVENT, &keys.in_order(), &args.in_order())
            .await?;
        match reply.as_slice() {
            [_, id] => entry_id(doing, &keys.log, id),
            _ => Err(corrupt(
                doing,
                &keys.log,
                "append script gave a malformed reply",
            )),
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::redis::lua::bound;

    #[test]
    fn scripts_bind_their_keys_and_args_in_order() {
        let append = include_str!("log/append_event.lua");
        assert_eq!(bound(append, "KEYS"), AppendEventKeys::NAMES);
        assert_eq!(bound(append, "ARGV"), AppendEventArgs::NAMES);
        assert_eq!(
            bound(include_str!("log/head.lua"), "KEYS"),
            LogStateKeys::NAMES
        );
        assert_eq!(
            bound(include_str!("log/read.lua"), "KEYS"),
            LogStateKeys::NAMES
        );
    }
}
