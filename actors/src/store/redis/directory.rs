//! Bays, participants and tokens: the Redis engine's [`DirectoryStore`],
//! with the token index (see [`keys`]: a pointer checked
//! against the Bay's own record on every `authenticate`). Scripts:
//! `directory/*.lua`.
//!
//! The credentials channel (`sb:{credentials}:log`, see
//! [`keys::credentials`]): `set_token` and `set_suspended` publish their
//! change in the same script as the write on a server that is not a
//! cluster, so no crash can separate them. On a Redis Cluster the channel
//! lives in another slot than the Bay, so the change is published by a
//! second script right after the write succeeded: a crash (or a failure
//! to reach the channel's master) in between leaves the change
//! unpublished, and nodes whose feed of that Bay is not running keep
//! answering a cached token for at most the token cache's `MAX_AGE` (five
//! minutes; see `token_cache`). Publishing first would not help: a node
//! could then cache the store's answer from before the write.

use super::codec::{
    corrupt, decode, encode, punch, status, stream_fields, text, to_text, to_value, unavailable,
    Holes, ScriptStatus,
};
use super::keys::{self, BayKeys};
use super::lua::{lua_params, LuaScript, APPEND_LOG, PUBLISH_CREDENTIALS};
use super::tail::xread_entries;
use super::MAX_COUNT;
use super::{RedisStore, CAS_ATTEMPTS};
use crate::model::{Bay, Participant};
use crate::store::log::LogEvent;
use crate::store::{
    Created, CredentialChange, CredentialChangeKind, CredentialsRead, DirectoryStore, Principal,
    StoreError, Suspension, Updated, CREDENTIAL_CHANGES_KEPT,
};
use crate::token::TokenHash;
use ::redis::{cmd, Value};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::sync::LazyLock;
use std::time::Duration;
use switchboard_protocol::cursor::EntryId;
use switchboard_protocol::ids::{BayId, ParticipantId, TokenId};

/// `create_participant`'s script (KEYS: [`CreateParticipantKeys`]; ARGV:
/// [`CreateParticipantArgs`]).
static CREATE_PARTICIPANT: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("directory/create_participant.lua")]));

/// `set_token`'s script (KEYS: [`SetTokenKeys`]; ARGV: [`SetTokenArgs`]).
static SET_TOKEN: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(&[
        APPEND_LOG,
        PUBLISH_CREDENTIALS,
        include_str!("directory/set_token.lua"),
    ])
});

/// `set_suspended`'s script (KEYS: [`SetSuspendedKeys`]; ARGV:
/// [`SetSuspendedArgs`]).
static SET_SUSPENDED: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(&[
        APPEND_LOG,
        PUBLISH_CREDENTIALS,
        include_str!("directory/set_suspended.lua"),
    ])
});

/// Publishes one change on the credentials channel, apart from its write
/// (KEYS: [`PublishCredentialsKeys`]; ARGV: [`PublishCredentialsArgs`]).
static PUBLISH: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(&[
        PUBLISH_CREDENTIALS,
        include_str!("directory/publish_credentials.lua"),
    ])
});

/// The member of the `suspended` set that stands for the Bay itself (no
/// participant id can be `*`).
const BAY_MEMBER: &str = "*";

/// `authenticate`'s check against the Bay's record (KEYS:
/// participant-tokens, participants, suspended; ARGV: participant id, token hash).
static AUTHENTICATE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::read_only(&[include_str!("directory/authenticate.lua")]));

/// Compare-and-set of a token index entry (KEYS: the entry; ARGV: the
/// value expected, `''` for none, and the new value).
static TOKEN_CLAIM: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("directory/token_claim.lua")]));

/// Deletes a token index entry that still holds the value expected
/// (KEYS: the entry; ARGV: that value).
static TOKEN_RELEASE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("directory/token_release.lua")]));

lua_params! {
    /// KEYS of `directory/create_participant.lua`, each the [`BayKeys`] key
    /// of the same name.
    struct CreateParticipantKeys of String { bay, participants, participant_tokens }
}

lua_params! {
    /// ARGV of `directory/create_participant.lua`: the participant's id,
    /// its JSON and its token hash.
    struct CreateParticipantArgs<'a> of &'a str { participant_id, participant, token_hash }
}

lua_params! {
    /// KEYS of `directory/set_token.lua`, each the [`BayKeys`] key of the
    /// same name.
    /// `credentials` is [`keys::credentials`], passed only where it shares
    /// a server with the Bay (not a cluster).
    struct SetTokenKeys of String {
        participants, participant_tokens, log, epoch, log_meta, rosters, credentials,
    }
}

lua_params! {
    /// ARGV of `directory/set_token.lua`: the participant, the new token
    /// hash (`''` revokes), the log append's arguments, and the
    /// `CredentialRevoked` JSON around the hole for the old token's id,
    /// the credentials channel's cap and the change to publish there.
    struct SetTokenArgs<'a> of &'a str {
        participant_id, token_hash, epoch_candidate, window_ms, max_entries, revoked_0, revoked_1,
        kept, change,
    }
}

lua_params! {
    /// KEYS of `directory/set_suspended.lua`, each the [`BayKeys`] key of
    /// the same name; `credentials` as in [`SetTokenKeys`].
    struct SetSuspendedKeys of String {
        bay, participants, suspended, log, epoch, log_meta, rosters, credentials,
    }
}

lua_params! {
    /// ARGV of `directory/set_suspended.lua`: the participant id (`*` for
    /// the Bay), `1` to suspend / `0` to reinstate, the log append's
    /// arguments, the `Suspension` entry's JSON, the credentials
    /// channel's cap and the change to publish there.
    struct SetSuspendedArgs<'a> of &'a str {
        member, flag, epoch_candidate, window_ms, max_entries, event, kept, change,
    }
}

lua_params! {
    /// KEYS of `directory/publish_credentials.lua`.
    struct PublishCredentialsKeys of String { credentials }
}

lua_params! {
    /// ARGV of `directory/publish_credentials.lua`: the channel's cap and
    /// the change's JSON.
    struct PublishCredentialsArgs<'a> of &'a str { kept, change }
}

/// Token index value: who a token hash belongs to.
#[derive(Serialize, Deserialize)]
struct TokenOwner {
    bay: BayId,
    participant: ParticipantId,
}

#[async_trait]
impl DirectoryStore for RedisStore {
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
        if matches!(reply, Value::Nil) {
            return Ok(Created::AlreadyExists);
        }
        let index = keys::bays();
        let _: i64 = self
            .query(doing, &index, cmd("SADD").arg(&index).arg(bay.id.as_str()))
            .await?;
        Ok(Created::Created(bay))
    }

    async fn bays(&self) -> Result<Vec<Bay>, StoreError> {
        let doing = "listing bays";
        let index = keys::bays();
        let mut ids: Vec<String> = self
            .query(doing, &index, cmd("SMEMBERS").arg(&index))
            .await?;
        ids.sort();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(bay) = self.bay(&BayId(id)).await? {
                out.push(bay);
            }
        }
        Ok(out)
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
        if !self.claim_token(doing, &token, &owner).await? {
            return Ok(Created::AlreadyExists);
        }
        // 2. Create the participant with its token, in the Bay's slot.
        let keys = CreateParticipantKeys {
            bay: k.bay(),
            participants: k.participants(),
            participant_tokens: k.participant_tokens(),
        };
        let participants = &keys.participants;
        let args = CreateParticipantArgs {
            participant_id: participant.id.as_str(),
            participant: &encode(doing, participants, &participant)?,
            token_hash: &token.0,
        };
        let reply = self
            .invoke_status(
                doing,
                &CREATE_PARTICIPANT,
                &keys.in_order(),
                &args.in_order(),
            )
            .await?;
        match status(doing, participants, &reply)? {
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
                participants,
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
        let keys = SetTokenKeys {
            participants: k.participants(),
            participant_tokens: k.participant_tokens(),
            log: k.log(),
            epoch: k.epoch(),
            log_meta: k.log_meta(),
            rosters: k.rosters(),
            credentials: keys::credentials(),
        };
        let owner = encode(
            doing,
            &keys.participants,
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
        let reply = self
            .swap_token(doing, bay, &keys, participant, token.as_ref())
            .await?;
        match status(doing, &keys.participants, &reply)? {
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
                    &keys.participants,
                    format!("script said {other:?}"),
                ))
            }
        }
        // 3. Drop the old token's index entry (garbage collection only).
        let old = reply
            .get(1)
            .map(|v| text(doing, &keys.participant_tokens, v))
            .transpose()?
            .unwrap_or("");
        // 3b. Publish the change where the script could not.
        if !old.is_empty() && !self.atomic_credentials {
            self.publish_credentials(&change_of(
                bay,
                Some(participant),
                CredentialChangeKind::Revoked,
            ))
            .await;
        }
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
        let found: Option<(Vec<u8>, i64, i64)> = self
            .invoke(
                doing,
                &AUTHENTICATE,
                &[&ptokens, &participants, &k.suspended()],
                &[owner.participant.as_str(), &token.0],
            )
            .await?;
        let Some((found, participant_suspended, bay_suspended)) = found else {
            return Ok(None);
        };
        Ok(Some(Principal {
            bay: owner.bay,
            participant: decode(doing, &participants, &found)?,
            token: token.id(),
            suspended: Suspension::of(participant_suspended == 1, bay_suspended == 1),
        }))
    }

    async fn set_suspended(
        &self,
        bay: &BayId,
        participant: Option<&ParticipantId>,
        suspended: bool,
    ) -> Result<Updated<bool>, StoreError> {
        let doing = "suspending or reinstating";
        let k = BayKeys::new(bay);
        let keys = SetSuspendedKeys {
            bay: k.bay(),
            participants: k.participants(),
            suspended: k.suspended(),
            log: k.log(),
            epoch: k.epoch(),
            log_meta: k.log_meta(),
            rosters: k.rosters(),
            credentials: keys::credentials(),
        };
        let event = to_text(
            doing,
            &to_value(
                doing,
                &LogEvent::Suspension {
                    participant: participant.cloned(),
                    suspended,
                },
            )?,
        )?;
        let kind = if suspended {
            CredentialChangeKind::Suspended
        } else {
            CredentialChangeKind::Reinstated
        };
        let change = change_of(bay, participant, kind);
        let log = self.log_args();
        let args = SetSuspendedArgs {
            member: participant.map_or(BAY_MEMBER, |p| p.as_str()),
            flag: if suspended { "1" } else { "0" },
            epoch_candidate: &log.epoch_candidate,
            window_ms: &log.window_ms,
            max_entries: &log.max_entries,
            event: &event,
            kept: &CREDENTIAL_CHANGES_KEPT.to_string(),
            change: &encode(doing, &keys.credentials, &change)?,
        };
        let reply = self
            .invoke_status(
                doing,
                &SET_SUSPENDED,
                &self.with_credentials(keys.in_order()),
                &args.in_order(),
            )
            .await?;
        match status(doing, &keys.suspended, &reply)? {
            ScriptStatus::Ok => {}
            ScriptStatus::Missing => return Ok(Updated::NotFound),
            other => {
                return Err(corrupt(
                    doing,
                    &keys.suspended,
                    format!("script said {other:?}"),
                ))
            }
        }
        let changed = matches!(reply.get(1), Some(Value::Int(1)));
        if changed && !self.atomic_credentials {
            self.publish_credentials(&change).await;
        }
        Ok(Updated::Updated(changed))
    }

    async fn suspended(
        &self,
        bay: &BayId,
        participant: Option<&ParticipantId>,
    ) -> Result<bool, StoreError> {
        let doing = "reading a suspension";
        let key = BayKeys::new(bay).suspended();
        let member = participant.map_or(BAY_MEMBER, |p| p.as_str());
        let found: i64 = self
            .query(doing, &key, cmd("SISMEMBER").arg(&key).arg(member))
            .await?;
        Ok(found == 1)
    }

    async fn credentials_head(&self) -> Result<EntryId, StoreError> {
        let doing = "reading the credentials channel's head";
        self.stream_head(doing, &keys::credentials(), "c").await
    }

    /// Without `block`: one `XRANGE` on a shared connection. With it: one
    /// `XREAD BLOCK` on a dedicated connection, which answers at once when
    /// changes are there. Either way the first change must name `after` as
    /// the entry before it, else changes in between were trimmed: `Lost`.
    async fn read_credentials(
        &self,
        after: EntryId,
        max: usize,
        block: Option<Duration>,
    ) -> Result<CredentialsRead, StoreError> {
        let doing = "reading the credentials channel";
        let key = keys::credentials();
        let max = max.clamp(1, MAX_COUNT);
        let reply: Value = match block.filter(|b| !b.is_zero()) {
            Some(block) => {
                let reply = self.xread_blocking(doing, &key, after, max, block).await?;
                match xread_entries(doing, &key, reply)? {
                    Some(entries) => entries,
                    None => return Ok(CredentialsRead::Changes(Vec::new())),
                }
            }
            None => {
                self.query(
                    doing,
                    &key,
                    cmd("XRANGE")
                        .arg(&key)
                        .arg(format!("({after}"))
                        .arg("+")
                        .arg("COUNT")
                        .arg(max),
                )
                .await?
            }
        };
        let mut changes = Vec::new();
        let mut expected = after.to_string();
        for (id, [change, prev]) in stream_fields(doing, &key, &reply, &["c", "p"])? {
            let (Some(change), Some(prev)) = (change, prev) else {
                return Err(corrupt(doing, &key, format!("entry {id} lacks a field")));
            };
            if prev != expected.as_bytes() {
                return Ok(CredentialsRead::Lost);
            }
            expected = id.to_string();
            let mut change: CredentialChange = decode(doing, &key, change)?;
            change.id = id;
            changes.push(change);
        }
        Ok(CredentialsRead::Changes(changes))
    }
}

/// The change a write of `bay`'s directory publishes on the credentials
/// channel.
fn change_of(
    bay: &BayId,
    participant: Option<&ParticipantId>,
    kind: CredentialChangeKind,
) -> CredentialChange {
    CredentialChange {
        id: EntryId::ZERO,
        bay: bay.clone(),
        participant: participant.cloned(),
        kind,
    }
}

/// Attempts at publishing a change apart from its write before giving up.
const PUBLISH_ATTEMPTS: usize = 3;

impl RedisStore {
    /// `keys` of a script whose last key is the credentials channel,
    /// without it where the channel may live on another slot (a cluster):
    /// the script then skips the publish and the caller does it.
    fn with_credentials<'a>(&self, mut keys: Vec<&'a str>) -> Vec<&'a str> {
        if !self.atomic_credentials {
            keys.pop();
        }
        keys
    }

    /// Publishes `change` apart from the write it announces (on a
    /// cluster), after that write succeeded. The write stands whatever
    /// happens here, so a failure is retried a little and then only
    /// logged: nodes that cached the token before keep answering it for at
    /// most the token cache's `MAX_AGE` (or until their feed of the Bay,
    /// if one runs, reads the Bay's own log entry).
    async fn publish_credentials(&self, change: &CredentialChange) {
        let doing = "publishing a credential change";
        let key = keys::credentials();
        let json = match encode(doing, &key, change) {
            Ok(json) => json,
            Err(err) => {
                tracing::error!(error = %err, "could not encode a credential change");
                return;
            }
        };
        let keys = PublishCredentialsKeys {
            credentials: key.clone(),
        };
        let kept = CREDENTIAL_CHANGES_KEPT.to_string();
        let args = PublishCredentialsArgs {
            kept: &kept,
            change: &json,
        };
        let mut pause = Duration::from_millis(50);
        for attempt in 1..=PUBLISH_ATTEMPTS {
            match self
                .invoke::<Value>(doing, &PUBLISH, &keys.in_order(), &args.in_order())
                .await
            {
                Ok(_) => return,
                Err(err) if attempt == PUBLISH_ATTEMPTS => {
                    tracing::error!(bay = %change.bay, error = %err, "a credential change was applied but not published; other nodes may answer cached tokens of the Bay for up to five minutes");
                }
                Err(_) => {
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                }
            }
        }
    }

    /// Step 1 of `create_participant`: points `token`'s index entry at
    /// `owner` (the encoded [`TokenOwner`]) by compare-and-set. `false`
    /// when a live participant holds the token; `Unavailable` when the
    /// entry kept changing for [`CAS_ATTEMPTS`] tries.
    async fn claim_token(
        &self,
        doing: &'static str,
        token: &TokenHash,
        owner: &str,
    ) -> Result<bool, StoreError> {
        let tkey = keys::token(token);
        for _ in 0..CAS_ATTEMPTS {
            let current: Option<String> = self.query(doing, &tkey, cmd("GET").arg(&tkey)).await?;
            let expected = match current {
                None => String::new(),
                Some(raw) => {
                    let holder: TokenOwner = decode(doing, &tkey, raw.as_bytes())?;
                    if self.token_is_current(doing, &holder, token).await? {
                        return Ok(false);
                    }
                    raw
                }
            };
            let swapped: i64 = self
                .invoke(doing, &TOKEN_CLAIM, &[&tkey], &[&expected, owner])
                .await?;
            if swapped == 1 {
                return Ok(true);
            }
        }
        Err(unavailable(doing, &tkey, "token index entry kept changing"))
    }

    /// Step 2 of `set_token`: swaps the participant's token for `new`
    /// (`None` revokes) and logs the old one's `CredentialRevoked`, in one
    /// script. The status-first reply carries the old hash (`''` if none).
    async fn swap_token(
        &self,
        doing: &'static str,
        bay: &BayId,
        keys: &SetTokenKeys,
        participant: &ParticipantId,
        new: Option<&TokenHash>,
    ) -> Result<Vec<Value>, StoreError> {
        // The event with a hole for the old token's id, which only the
        // script knows.
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
        let log = self.log_args();
        let change = change_of(bay, Some(participant), CredentialChangeKind::Revoked);
        let args = SetTokenArgs {
            participant_id: participant.as_str(),
            token_hash: new.map_or("", |t| t.0.as_str()),
            epoch_candidate: &log.epoch_candidate,
            window_ms: &log.window_ms,
            max_entries: &log.max_entries,
            revoked_0: &revoked[0],
            revoked_1: &revoked[1],
            kept: &CREDENTIAL_CHANGES_KEPT.to_string(),
            change: &encode(doing, &keys.credentials, &change)?,
        };
        self.invoke_status(
            doing,
            &SET_TOKEN,
            &self.with_credentials(keys.in_order()),
            &args.in_order(),
        )
        .await
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

    /// Deletes the token index entry of `token` if it still names `owner`
    /// (the encoded [`TokenOwner`]). A failure is only logged.
    async fn release_token(&self, doing: &'static str, token: &TokenHash, owner: &str) {
        let key = keys::token(token);
        if let Err(err) = self
            .invoke::<i64>(doing, &TOKEN_RELEASE, &[&key], &[owner])
            .await
        {
            // Harmless: `authenticate` checks the Bay's record, so a stale
            // index entry never authenticates.
            tracing::warn!(error = %err, "could not remove a stale token index entry");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::redis::lua::bound;

    #[test]
    fn scripts_bind_their_keys_and_args_in_order() {
        let create = include_str!("directory/create_participant.lua");
        assert_eq!(bound(create, "KEYS"), CreateParticipantKeys::NAMES);
        assert_eq!(bound(create, "ARGV"), CreateParticipantArgs::NAMES);
        let set_token = include_str!("directory/set_token.lua");
        assert_eq!(bound(set_token, "KEYS"), SetTokenKeys::NAMES);
        assert_eq!(bound(set_token, "ARGV"), SetTokenArgs::NAMES);
        let set_suspended = include_str!("directory/set_suspended.lua");
        assert_eq!(bound(set_suspended, "KEYS"), SetSuspendedKeys::NAMES);
        assert_eq!(bound(set_suspended, "ARGV"), SetSuspendedArgs::NAMES);
        let publish = include_str!("directory/publish_credentials.lua");
        assert_eq!(bound(publish, "KEYS"), PublishCredentialsKeys::NAMES);
        assert_eq!(bound(publish, "ARGV"), PublishCredentialsArgs::NAMES);
    }
}
