//! Reading the log: the full read (one script: epoch, head, newest
//! trimmed id and the entries) and the feeds' tail (one blocking `XREAD`
//! whose entries are used as they come when they chain on unbroken).
//! The full read's script is `log/read.lua`.

use super::codec::{
    array, corrupt, entry_id, epoch_candidate, from_redis, stream_entries, stream_fields, text,
    unavailable,
};
use super::keys::BayKeys;
use super::log::{LogStateKeys, LOG_STATE};
use super::lua::{lua_params, LuaScript};
use super::{RedisStore, BLOCK_GRACE, CONNECT_TIMEOUT, MAX_COUNT};
use crate::store::log::{LogEvent, LogRecord};
use crate::store::{Replay, StoreError};
use ::redis::{cmd, Value};
use std::sync::{Arc, LazyLock};
use std::time::Duration;
use switchboard_protocol::cursor::{EntryId, LogPosition};
use switchboard_protocol::ids::BayId;

/// The full read's script (KEYS: [`LogStateKeys`]; ARGV:
/// [`ReadLogArgs`]): `{epoch, last id, max deleted id, entries}`.
static READ_LOG: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::read_only(&[LOG_STATE, include_str!("log/read.lua")]));

lua_params! {
    /// ARGV of `log/read.lua`: an epoch candidate, the cursor's epoch and
    /// entry id (entries after it are read), and the most to read.
    struct ReadLogArgs<'a> of &'a str { epoch_candidate, cursor_epoch, after, count }
}

impl RedisStore {
    /// Reads the log once (no blocking).
    pub(super) async fn read_once(
        &self,
        bay: &BayId,
        after: &LogPosition,
        max: usize,
    ) -> Result<Replay, StoreError> {
        let doing = "reading the event log";
        let keys = LogStateKeys::new(&BayKeys::new(bay));
        let (log, epoch) = (&keys.log, &keys.epoch);
        let args = ReadLogArgs {
            epoch_candidate: &epoch_candidate(),
            cursor_epoch: &after.epoch.0,
            after: &after.entry.to_string(),
            count: &max.min(MAX_COUNT).to_string(),
        };
        let reply: Value = self
            .invoke(doing, &READ_LOG, &keys.in_order(), &args.in_order())
            .await?;
        let parts = array(doing, log, &reply)?;
        let [current, last, max_deleted, entries] = parts else {
            return Err(corrupt(doing, log, "read script gave a malformed reply"));
        };
        if text(doing, epoch, current)? != after.epoch.0 {
            return Ok(Replay::EpochChanged);
        }
        let last = entry_id(doing, log, last)?;
        let max_deleted = entry_id(doing, log, max_deleted)?;
        if after.entry < max_deleted || after.entry > last {
            return Ok(Replay::Expired);
        }
        let records = stream_entries(doing, log, entries, "e")?
            .into_iter()
            .map(|(id, raw)| {
                let event = LogEvent::from_json(raw).map_err(|e| corrupt(doing, log, e))?;
                Ok(Arc::new(LogRecord::new(id, event)))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        Ok(Replay::page(records, max, after.entry, last))
    }

    /// The id of the newest entry of the stream at `key` (`field`: a field
    /// every entry has), or [`EntryId::ZERO`] when it is empty or missing.
    pub(super) async fn stream_head(
        &self,
        doing: &'static str,
        key: &str,
        field: &str,
    ) -> Result<EntryId, StoreError> {
        let newest = cmd("XREVRANGE")
            .arg(key)
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(1)
            .clone();
        let reply: Value = self.query(doing, key, &newest).await?;
        Ok(stream_fields(doing, key, &reply, &[field])?
            .first()
            .map_or(EntryId::ZERO, |(id, _)| *id))
    }

    /// Waits (on a dedicated connection) up to `block` for an entry after
    /// `after` in `log`. `true` when one arrived.
    pub(super) async fn wait_for_entry(
        &self,
        log: &str,
        after: EntryId,
        block: Duration,
    ) -> Result<bool, StoreError> {
        let reply = self
            .xread_blocking("waiting for session openings", log, after, 1, block)
            .await?;
        Ok(!matches!(reply, Value::Nil))
    }

    /// `XREAD COUNT count BLOCK block STREAMS key after` on a dedicated
    /// connection: the entries after `after` (waiting up to `block` for
    /// the first), or `Nil` when none came.
    pub(super) async fn xread_blocking(
        &self,
        doing: &'static str,
        key: &str,
        after: EntryId,
        count: usize,
        block: Duration,
    ) -> Result<Value, StoreError> {
        let block_ms = block.as_millis().clamp(1, MAX_COUNT as u128) as u64;
        let mut xread = cmd("XREAD");
        xread
            .arg("COUNT")
            .arg(count.clamp(1, MAX_COUNT))
            .arg("BLOCK")
            .arg(block_ms)
            .arg("STREAMS")
            .arg(key)
            .arg(after.to_string());
        // One retry with a fresh connection when a reused idle one turns
        // out to be dead (e.g. Redis restarted while it sat idle).
        loop {
            let (mut conn, reused) = tokio::time::timeout(CONNECT_TIMEOUT, self.blocking.take())
                .await
                .map_err(|_| unavailable(doing, key, "timed out connecting"))?
                .map_err(|e| from_redis(doing, key, e))?;
            match tokio::time::timeout(
                block.saturating_add(BLOCK_GRACE),
                xread.query_async::<Value>(&mut conn.conn),
            )
            .await
            {
                Ok(Ok(reply)) => {
                    self.blocking.give_back(conn);
                    return Ok(reply);
                }
                Ok(Err(err)) if reused && (err.is_io_error() || err.is_connection_dropped()) => {
                    continue;
                }
                Ok(Err(err)) => return Err(from_redis(doing, key, err)),
                Err(_) => return Err(unavailable(doing, key, "blocking read timed out")),
            }
        }
    }

    /// The tail's read: one blocking `XREAD` whose entries are used as they
    /// come, without the full read's epoch and expiry checks, when they
    /// provably follow `after` unbroken: each entry names the epoch it was
    /// logged in (`ep`) and the entry before it (`p`). `None` when they do
    /// not (the log was lost, trimmed past `after`, or written before
    /// entries were chained) or when nothing came: the full read decides.
    pub(super) async fn tail_once(
        &self,
        bay: &BayId,
        after: &LogPosition,
        max: usize,
        block: Duration,
    ) -> Result<Option<Replay>, StoreError> {
        let doing = "tailing the event log";
        let log = BayKeys::new(bay).log();
        let reply = self
            .xread_blocking(doing, &log, after.entry, max, block)
            .await?;
        let Some(entries) = xread_entries(doing, &log, reply)? else {
            return Ok(None);
        };
        let entries = &entries;
        let mut expected = after.entry;
        let mut records = Vec::new();
        for (id, fields) in stream_fields(doing, &log, entries, &["e", "p", "ep"])? {
            let [Some(event), Some(prev), Some(epoch)] = fields else {
                return Ok(None);
            };
            if epoch != after.epoch.0.as_bytes() || prev != expected.to_string().as_bytes() {
                return Ok(None);
            }
            expected = id;
            let event = LogEvent::from_json(event).map_err(|e| corrupt(doing, &log, e))?;
            records.push(Arc::new(LogRecord::new(id, event)));
        }
        if records.is_empty() {
            return Ok(None);
        }
        Ok(Some(Replay::page(records, max, after.entry, expected)))
    }
}

/// The entry list of a one-stream `XREAD` reply, `None` when it timed out.
/// XREAD answers [[key, entries]] (RESP2) or {key: entries} (RESP3).
pub(super) fn xread_entries(
    doing: &'static str,
    key: &str,
    reply: Value,
) -> Result<Option<Value>, StoreError> {
    match reply {
        Value::Nil => Ok(None),
        Value::Array(streams) => match streams.into_iter().next() {
            Some(Value::Array(mut pair)) if pair.len() == 2 => Ok(pair.pop()),
            _ => Err(corrupt(doing, key, "malformed XREAD reply")),
        },
        Value::Map(streams) => Ok(streams.into_iter().next().map(|(_, entries)| entries)),
        _ => Err(corrupt(doing, key, "malformed XREAD reply")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::redis::lua::bound;

    #[test]
    fn the_full_read_binds_its_args_in_order() {
        assert_eq!(
            bound(include_str!("log/read.lua"), "ARGV"),
            ReadLogArgs::NAMES
        );
    }
}
