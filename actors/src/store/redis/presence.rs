//! Activity presence records: the Redis engine's [`PresenceStore`]:
//! each node's record, and the published states, changed only with their
//! log entries (`presence/publish.lua`).
//!
//! A node's record is a heartbeat in the Bay's presence hash (node id →
//! `{until, online: [], record: true}`) and a hash of its own,
//! `sb:{bay}:presence:<node>`, one field per participant. Each interval
//! the node rewrites its heartbeat and only the entries that changed since
//! its last write (`presence/set.lua`): with 10,000 sessions of which one
//! changed, one entry, not all 10,000. The engine remembers a digest of
//! each entry it wrote; a failed write, or a heartbeat found missing (the
//! record lapsed and was collected, or the data set was lost), makes the
//! next write whole. Readers see exactly what a whole record said.
//!
//! Each write stamps its heartbeat with a version (`seq`) unique to the
//! write, in the same script as the entries. A reader keeps the entries it
//! decoded per record and version ([`ReadCache`]), and reads a record's
//! hash again only when its heartbeat names another version: the Bay's
//! publisher reads every record at every tick (500 ms), and a record only
//! changes at its node's interval (2 s), or not at all while its
//! participants sit idle.

use super::codec::{corrupt, decode, encode, entry_id, status, ScriptStatus};
use super::keys::BayKeys;
use super::lua::{lua_params, LuaScript, APPEND_LOG};
use super::RedisStore;
use crate::store::log::LogEvent;
use crate::store::{ParticipantPresence, PresenceChange, PresenceStore, Published, StoreError};
use ::redis::cmd;
use async_trait::async_trait;
use chrono::Utc;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
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

/// `set_presence`'s script (KEYS: [`SetPresenceKeys`]; ARGV:
/// [`SetPresenceArgs`], then the removed ids and the written pairs).
static SET_PRESENCE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("presence/set.lua")]));

lua_params! {
    /// KEYS of `presence/set.lua`: the Bay's presence hash (heartbeats)
    /// and the node's record.
    struct SetPresenceKeys<'a> of &'a str { presence, record }
}

lua_params! {
    /// ARGV of `presence/set.lua`, before the removed ids and the written
    /// pairs: the node, its heartbeat JSON, the record key's expiry (ms),
    /// `'1'` to replace the record whole, and how many ids are removed.
    struct SetPresenceArgs<'a> of &'a str { node, heartbeat, expire_ms, full, removed }
}

/// What this process last wrote of each of its records: (Bay, node) →
/// participant → digest of the entry ([`digest`]).
pub(super) type Written = Mutex<HashMap<(BayId, String), HashMap<ParticipantId, u64>>>;

/// The records this process read, per Bay: node → (the version its
/// heartbeat named, the entries then), and when the Bay was last read.
/// Bays not read for [`READ_CACHE_IDLE`] are forgotten.
#[derive(Default)]
pub(super) struct ReadCache {
    bays: HashMap<BayId, (std::time::Instant, Records)>,
    swept: Option<std::time::Instant>,
}

/// The entries of one record version, shared by the reads that find it
/// unchanged.
type CachedEntries = std::sync::Arc<[ParticipantPresence]>;

/// One Bay's cached records: node → (version, entries).
type Records = HashMap<String, (u64, CachedEntries)>;

/// How long a Bay's cached records outlive its last read.
const READ_CACHE_IDLE: Duration = Duration::from_secs(60);

impl ReadCache {
    /// `bay`'s cached records (node → version, entries).
    fn of(&self, bay: &BayId) -> Records {
        self.bays
            .get(bay)
            .map(|(_, nodes)| nodes.clone())
            .unwrap_or_default()
    }

    /// Notes the record `node` just wrote of `bay`, at version `seq`.
    fn wrote(&mut self, bay: &BayId, node: &str, seq: u64, entries: CachedEntries) {
        let (used, nodes) = self
            .bays
            .entry(bay.clone())
            .or_insert_with(|| (std::time::Instant::now(), Records::new()));
        *used = std::time::Instant::now();
        nodes.insert(node.to_owned(), (seq, entries));
    }

    /// Replaces `bay`'s cached records with what a read found live, and
    /// forgets Bays no one read for a while (looked for once a minute).
    fn store(&mut self, bay: &BayId, nodes: Records) {
        let now = std::time::Instant::now();
        if nodes.is_empty() {
            self.bays.remove(bay);
        } else {
            self.bays.insert(bay.clone(), (now, nodes));
        }
        if self
            .swept
            .is_none_or(|at| now.duration_since(at) >= READ_CACHE_IDLE)
        {
            self.swept = Some(now);
            self.bays
                .retain(|_, (used, _)| now.duration_since(*used) < READ_CACHE_IDLE);
        }
    }
}

/// A version for one record write: unique to this write among all nodes
/// (a per-process counter started at a random point), so a reader can tell
/// an unchanged record by its heartbeat alone. 0 means "none" (heartbeats
/// of older nodes): such records are always read.
fn next_version() -> u64 {
    static NEXT: LazyLock<std::sync::atomic::AtomicU64> = LazyLock::new(|| {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            ^ (u64::from(std::process::id()) << 32);
        std::sync::atomic::AtomicU64::new(seed.max(1))
    });
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        .max(1)
}

/// One node's field in a Bay's presence hash.
#[derive(Serialize, Deserialize)]
struct Presence {
    /// Unix ms after which the record no longer counts.
    until: i64,
    /// The version of the record this heartbeat was written with (see
    /// [`next_version`]); 0 when the writer predates versions.
    #[serde(default, skip_serializing_if = "is_zero")]
    seq: u64,
    /// Participants present on that node (a session, or within the
    /// linger): all that nodes before activity presence read. Empty in
    /// heartbeats (`record`).
    online: Vec<ParticipantId>,
    /// What the node knows of each participant, in records of nodes
    /// before per-participant records; absent in records of nodes before
    /// activity presence (their `online` then counts as holding a
    /// session) and in heartbeats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    entries: Option<Vec<ParticipantPresence>>,
    /// A heartbeat: the entries are in the node's own hash
    /// ([`BayKeys::presence_record`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    record: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A digest of what an entry stores (every field its JSON carries; not
/// `node`, which a reader fills in): what tells a changed entry. Taken from
/// the fields, not the JSON, so an unchanged entry is never encoded: a
/// record of 10,000 idle participants is rewritten every interval.
fn digest(e: &ParticipantPresence) -> u64 {
    let ParticipantPresence {
        participant,
        session,
        linger_until_ms,
        thinking_until_ms,
        typed_ms,
        sent_ms,
        active_ms,
        transports,
        node: _,
    } = e;
    let mut h = DefaultHasher::new();
    (participant, session, linger_until_ms, thinking_until_ms).hash(&mut h);
    (typed_ms, sent_ms, active_ms, transports).hash(&mut h);
    h.finish()
}

impl RedisStore {
    /// One run of `presence/set.lua`: the heartbeat, `removed` and
    /// `written`; `false` when it wrote nothing because the heartbeat was
    /// missing and the write was not `full`.
    #[allow(clippy::too_many_arguments)]
    async fn write_presence(
        &self,
        bay: &BayId,
        node: &str,
        heartbeat: &str,
        ttl: Duration,
        full: bool,
        removed: &[&ParticipantId],
        written: &[(&ParticipantId, &str)],
    ) -> Result<bool, StoreError> {
        let k = BayKeys::new(bay);
        let presence = k.presence();
        let record = k.presence_record(node);
        let keys = SetPresenceKeys {
            presence: &presence,
            record: &record,
        };
        // Twice the lifetime: the key only collects itself; readers go
        // by the heartbeat's `until` (another node's clock).
        let expire_ms = (ttl.as_millis().max(1) * 2).to_string();
        let removed_count = removed.len().to_string();
        let head = SetPresenceArgs {
            node,
            heartbeat,
            expire_ms: &expire_ms,
            full: if full { "1" } else { "0" },
            removed: &removed_count,
        };
        let mut args: Vec<&str> = head.in_order().to_vec();
        args.extend(removed.iter().map(|p| p.as_str()));
        for (p, json) in written {
            args.push(p.as_str());
            args.push(json);
        }
        let done: i64 = self
            .invoke("recording presence", &SET_PRESENCE, &keys.in_order(), &args)
            .await?;
        Ok(done == 1)
    }
}

#[async_trait]
impl PresenceStore for RedisStore {
    async fn set_presence(
        &self,
        bay: &BayId,
        node: &str,
        entries: Vec<ParticipantPresence>,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let doing = "recording presence";
        let key = BayKeys::new(bay).presence();
        let until = Utc::now().timestamp_millis() + ttl.as_millis() as i64;
        let seq = next_version();
        let heartbeat = encode(
            doing,
            &key,
            &Presence {
                until,
                seq,
                online: Vec::new(),
                entries: None,
                record: true,
            },
        )?;
        let now: HashMap<&ParticipantId, (&ParticipantPresence, u64)> = entries
            .iter()
            .map(|e| (&e.participant, (e, digest(e))))
            .collect();
        let slot = (bay.clone(), node.to_owned());
        // Taken out while the write runs: a failed write leaves nothing,
        // so the next one is whole.
        let before = self.presence_written.lock().remove(&slot);
        let mut full = before.is_none();
        loop {
            let previous = before.as_ref().filter(|_| !full);
            let removed: Vec<&ParticipantId> = previous
                .map(|p| p.keys().filter(|id| !now.contains_key(id)).collect())
                .unwrap_or_default();
            let written: Vec<(&ParticipantId, String)> = now
                .iter()
                .filter(|(id, (_, d))| previous.is_none_or(|p| p.get(*id) != Some(d)))
                .map(|(id, (e, _))| Ok((*id, encode(doing, &key, *e)?)))
                .collect::<Result<_, StoreError>>()?;
            let written: Vec<(&ParticipantId, &str)> = written
                .iter()
                .map(|(id, json)| (*id, json.as_str()))
                .collect();
            if self
                .write_presence(bay, node, &heartbeat, ttl, full, &removed, &written)
                .await?
            {
                break;
            }
            // The heartbeat was gone: write the record whole.
            full = true;
        }
        let digests = now
            .into_iter()
            .map(|(id, (_, d))| (id.clone(), d))
            .collect();
        self.presence_written.lock().insert(slot, digests);
        // What this node wrote is what a read of this version would
        // decode: its own publisher need not read it back.
        self.presence_read
            .lock()
            .wrote(bay, node, seq, CachedEntries::from(entries));
        Ok(())
    }

    /// A digest of the live heartbeats' versions (`seq`), node by node:
    /// every write stamps a new one, and a heartbeat past its `until`
    /// drops out. `None` while a node that predates versions writes to the
    /// Bay (its record may change without a new version).
    async fn presence_version(&self, bay: &BayId) -> Result<Option<u64>, StoreError> {
        let doing = "reading presence";
        let key = BayKeys::new(bay).presence();
        let raw: Vec<(String, Vec<u8>)> = self.query(doing, &key, cmd("HGETALL").arg(&key)).await?;
        let now = Utc::now().timestamp_millis();
        let mut live: Vec<(String, u64)> = Vec::with_capacity(raw.len());
        for (node, value) in raw {
            let p: Presence = decode(doing, &key, &value)?;
            if p.until <= now {
                continue;
            }
            if !p.record || p.seq == 0 {
                return Ok(None);
            }
            live.push((node, p.seq));
        }
        live.sort_unstable();
        let mut digest = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(&live, &mut digest);
        Ok(Some(std::hash::Hasher::finish(&digest)))
    }

    async fn presence_records(&self, bay: &BayId) -> Result<Vec<ParticipantPresence>, StoreError> {
        let doing = "reading presence";
        let k = BayKeys::new(bay);
        let key = k.presence();
        let raw: Vec<(String, Vec<u8>)> = self.query(doing, &key, cmd("HGETALL").arg(&key)).await?;
        let now = Utc::now().timestamp_millis();
        let mut out = Vec::new();
        let mut expired = Vec::new();
        let cached = self.presence_read.lock().of(bay);
        let mut fresh = Records::new();
        for (node, value) in raw {
            let p: Presence = decode(doing, &key, &value)?;
            if p.until <= now {
                expired.push(node);
                continue;
            }
            if p.record {
                let entries = match cached.get(&node) {
                    Some((seq, entries)) if p.seq != 0 && *seq == p.seq => entries.clone(),
                    _ => {
                        let record = k.presence_record(&node);
                        let fields: Vec<(String, Vec<u8>)> = self
                            .query(doing, &record, cmd("HGETALL").arg(&record))
                            .await?;
                        fields
                            .iter()
                            .map(|(_, json)| decode(doing, &record, json))
                            .collect::<Result<CachedEntries, _>>()?
                    }
                };
                let shared: std::sync::Arc<str> = node.as_str().into();
                out.extend(entries.iter().map(|e| ParticipantPresence {
                    node: shared.clone(),
                    ..e.clone()
                }));
                if p.seq != 0 {
                    fresh.insert(node, (p.seq, entries));
                }
                continue;
            }
            // A record in the heartbeat itself (nodes before per-participant
            // records), or only who is online (nodes before activity presence).
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
            let node: std::sync::Arc<str> = node.into();
            out.extend(entries.into_iter().map(|mut e| {
                e.node = node.clone();
                e
            }));
        }
        // Node ids are new at every start: drop the records of nodes gone
        // for good, so the hash does not grow with every restart.
        if !expired.is_empty() {
            let _: i64 = self
                .query(doing, &key, cmd("HDEL").arg(&key).arg(&expired))
                .await?;
            let records: Vec<String> = expired.iter().map(|n| k.presence_record(n)).collect();
            for record in &records {
                let _: i64 = self.query(doing, record, cmd("DEL").arg(record)).await?;
            }
        }
        self.presence_read.lock().store(bay, fresh);
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

    #[test]
    fn the_set_script_binds_its_keys_and_args_in_order() {
        let set = include_str!("presence/set.lua");
        assert_eq!(bound(set, "KEYS"), SetPresenceKeys::NAMES);
        // The leading arguments only: the rest are the ids and pairs.
        let names = SetPresenceArgs::NAMES;
        let binding = format!(
            "local {} = unpack(ARGV, 1, {})",
            names.join(", "),
            names.len()
        );
        assert!(set.contains(&binding), "{binding}");
    }
}
