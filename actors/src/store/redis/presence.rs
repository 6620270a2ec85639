//! Activity presence records: the Redis engine's [`PresenceStore`]:
//! each node's record in the Bay's presence hash, and the published
//! states, changed only with their log entries (`presence/publish.lua`).

use super::codec::{corrupt, decode, encode, entry_id, status, ScriptStatus};
use super::keys::BayKeys;
use super::lua::{lua_params, LuaScript, APPEND_LOG};
use super::RedisStore;
use crate::store::log::LogEvent;
use crate::store::{ParticipantPresence, PresenceChange, PresenceStore, Published, StoreError};
use ::redis::cmd;
use async_trait::async_trait;
use chrono::Utc;
use serde::{Deserialize, Serialize};
use std::sync::LazyLock;
use std::time::Duration;
use switchboard_protocol::ids::{BayId, ParticipantId};
use switchboard_protocol::presence::PresenceState;

/// `publish_presence`'s compare-and-set (KEYS: [`PublishPresenceKeys`];
/// ARGV: the log append's arguments, then four per change).
static PUBLISH_PRESENCE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[APPEND_LOG, include_str!("presence/publish.lua")]));

lua_params! {
    /// KEYS of `presence/publish.lua`, each the [`BayKeys`] key of the same
    /// name.
    struct PublishPresenceKeys of String { log, epoch, log_meta, rosters, presence_states }
}

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

#[async_trait]
impl PresenceStore for RedisStore {
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
        let now = crate::store::now_ms();
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
            let entries = match p.entries {
                Some(entries) => entries,
                None => p
                    .online
                    .into_iter()
                    .map(|participant| ParticipantPresence {
                        session: true,
                        ..ParticipantPresence::new(participant)
                    })
                    .collect(),
            };
            out.extend(entries.into_iter().map(|mut e| {
                e.node.clone_from(&node);
                e
            }));
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
        let keys = PublishPresenceKeys {
            log: k.log(),
            epoch: k.epoch(),
            log_meta: k.log_meta(),
            rosters: k.rosters(),
            presence_states: k.presence_states(),
        };
        let log = &keys.log;
        let append = self.log_args();
        let mut args = vec![append.epoch_candidate, append.window_ms, append.max_entries];
        for c in changes {
            args.push(c.participant.as_str().to_owned());
            args.push(c.from.as_str().to_owned());
            args.push(c.to.as_str().to_owned());
            args.push(encode(
                doing,
                log,
                &LogEvent::Presence {
                    participant: c.participant.clone(),
                    state: c.to,
                    at: c.at,
                },
            )?);
        }
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let reply = self
            .invoke_status(doing, &PUBLISH_PRESENCE, &keys.in_order(), &argv)
            .await?;
        match status(doing, log, &reply)? {
            ScriptStatus::Ok => reply[1..]
                .iter()
                .map(|id| entry_id(doing, log, id))
                .collect::<Result<Vec<_>, _>>()
                .map(Published::Logged),
            ScriptStatus::Conflict => Ok(Published::Conflict),
            other => Err(corrupt(doing, log, format!("script said {other:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::redis::lua::bound;

    #[test]
    fn the_publish_script_binds_its_keys_in_order() {
        let publish = include_str!("presence/publish.lua");
        assert_eq!(bound(publish, "KEYS"), PublishPresenceKeys::NAMES);
    }
}
