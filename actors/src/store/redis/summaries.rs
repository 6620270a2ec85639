//! Conversation summaries: the Redis engine's [`SummaryStore`]. Each
//! conversation's summary is one hash (`body`, `seq`, `version`) written by
//! `summaries/put.lua`; refreshes are counted in a sorted set by
//! `summaries/refresh.lua`; the Bay's summarizer is one string.

use super::codec::{corrupt, decode, encode, status, text, ScriptStatus};
use super::keys::BayKeys;
use super::lua::{lua_params, LuaScript};
use super::RedisStore;
use crate::store::{RefreshSlot, StoreError, StoredSummary, SummaryStore, SummaryWritten};
use ::redis::{cmd, Value};
use async_trait::async_trait;
use std::sync::LazyLock;
use std::time::Duration;
use switchboard_protocol::ids::{BayId, ConversationId, ParticipantId};

/// `put_summary`'s compare-and-set (KEYS: [`PutSummaryKeys`]; ARGV:
/// [`PutSummaryArgs`]).
static PUT_SUMMARY: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("summaries/put.lua")]));

/// `take_summary_refresh`'s sliding window (KEYS: [`RefreshKeys`]; ARGV:
/// [`RefreshArgs`]).
static TAKE_REFRESH: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("summaries/refresh.lua")]));

lua_params! {
    /// KEYS of `summaries/put.lua`.
    struct PutSummaryKeys of String { summary }
}

lua_params! {
    /// ARGV of `summaries/put.lua`: the JSON `StoredSummary` and the
    /// decimal `seq` of its boundary.
    struct PutSummaryArgs of String { body, seq }
}

lua_params! {
    /// KEYS of `summaries/refresh.lua`.
    struct RefreshKeys of String { refreshes }
}

lua_params! {
    /// ARGV of `summaries/refresh.lua`: the budget, the window in ms and a
    /// random member name (two refreshes in one ms stay two).
    struct RefreshArgs of String { max, window, member }
}

/// A stored body with the version the hash holds (the body's own
/// `version` field is whatever it was written with).
fn with_version(
    doing: &'static str,
    key: &str,
    body: &[u8],
    version: Option<&str>,
) -> Result<StoredSummary, StoreError> {
    let mut s: StoredSummary = decode(doing, key, body)?;
    if let Some(v) = version {
        s.memory.version = v
            .parse()
            .map_err(|_| corrupt(doing, key, format!("bad summary version {v:?}")))?;
    }
    Ok(s)
}

#[async_trait]
impl SummaryStore for RedisStore {
    async fn summary(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
    ) -> Result<Option<StoredSummary>, StoreError> {
        let doing = "reading a summary";
        let key = BayKeys::new(bay).summary(conversation);
        let (body, version): (Option<Vec<u8>>, Option<String>) = self
            .query(
                doing,
                &key,
                cmd("HMGET").arg(&key).arg("body").arg("version"),
            )
            .await?;
        body.map(|b| with_version(doing, &key, &b, version.as_deref()))
            .transpose()
    }

    async fn put_summary(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        mut summary: StoredSummary,
    ) -> Result<SummaryWritten, StoreError> {
        let doing = "writing a summary";
        let keys = PutSummaryKeys {
            summary: BayKeys::new(bay).summary(conversation),
        };
        let args = PutSummaryArgs {
            body: encode(doing, &keys.summary, &summary)?,
            seq: summary.through_seq.to_string(),
        };
        let reply = self
            .invoke_status(doing, &PUT_SUMMARY, &keys.in_order(), &args.in_order())
            .await?;
        let key = &keys.summary;
        match (status(doing, key, &reply)?, reply.as_slice()) {
            (ScriptStatus::Ok, [_, version]) => {
                let v = text(doing, key, version)?;
                summary.memory.version = v
                    .parse()
                    .map_err(|_| corrupt(doing, key, format!("bad summary version {v:?}")))?;
                Ok(SummaryWritten::Stored(summary))
            }
            (ScriptStatus::Stale, [_, body, version]) => {
                let body = match body {
                    Value::BulkString(b) => b.as_slice(),
                    _ => return Err(corrupt(doing, key, "summary body is not a string")),
                };
                let version = text(doing, key, version)?;
                Ok(SummaryWritten::Stale(with_version(
                    doing,
                    key,
                    body,
                    Some(version),
                )?))
            }
            (other, _) => Err(corrupt(
                doing,
                key,
                format!("unexpected put_summary reply {other:?}"),
            )),
        }
    }

    async fn summarizer(&self, bay: &BayId) -> Result<Option<ParticipantId>, StoreError> {
        let doing = "reading the summarizer";
        let key = BayKeys::new(bay).summarizer();
        let id: Option<String> = self.query(doing, &key, cmd("GET").arg(&key)).await?;
        Ok(id.map(ParticipantId))
    }

    async fn set_summarizer(
        &self,
        bay: &BayId,
        participant: Option<&ParticipantId>,
    ) -> Result<(), StoreError> {
        let doing = "designating the summarizer";
        let key = BayKeys::new(bay).summarizer();
        match participant {
            Some(p) => {
                let () = self
                    .query(doing, &key, cmd("SET").arg(&key).arg(p.as_str()))
                    .await?;
            }
            None => {
                let _: i64 = self.query(doing, &key, cmd("DEL").arg(&key)).await?;
            }
        }
        Ok(())
    }

    async fn take_summary_refresh(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        max: u32,
        window: Duration,
    ) -> Result<RefreshSlot, StoreError> {
        let doing = "counting a summary refresh";
        let keys = RefreshKeys {
            refreshes: BayKeys::new(bay).summary_refreshes(conversation),
        };
        let args = RefreshArgs {
            max: max.max(1).to_string(),
            window: window.as_millis().max(1).to_string(),
            member: format!("{:016x}", rand::random::<u64>()),
        };
        let reply = self
            .invoke_status(doing, &TAKE_REFRESH, &keys.in_order(), &args.in_order())
            .await?;
        let key = &keys.refreshes;
        match (status(doing, key, &reply)?, reply.as_slice()) {
            (ScriptStatus::Ok, _) => Ok(RefreshSlot::Taken),
            (ScriptStatus::Conflict, [_, wait]) => {
                let ms: u64 = text(doing, key, wait)?
                    .parse()
                    .map_err(|_| corrupt(doing, key, "bad refresh wait"))?;
                Ok(RefreshSlot::Limited {
                    retry_after: Duration::from_millis(ms.max(1)),
                })
            }
            (other, _) => Err(corrupt(
                doing,
                key,
                format!("unexpected refresh reply {other:?}"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::redis::lua::bound;

    #[test]
    fn scripts_bind_the_names_rust_passes() {
        let put = include_str!("summaries/put.lua");
        assert_eq!(bound(put, "KEYS"), PutSummaryKeys::NAMES);
        assert_eq!(bound(put, "ARGV"), PutSummaryArgs::NAMES);
        let refresh = include_str!("summaries/refresh.lua");
        assert_eq!(bound(refresh, "KEYS"), RefreshKeys::NAMES);
        assert_eq!(bound(refresh, "ARGV"), RefreshArgs::NAMES);
    }
}
