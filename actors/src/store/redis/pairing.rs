//! Pairing codes and link requests: the Redis engine's [`PairingStore`].
//!
//! A code is one string key set with `NX PX` and redeemed with `GETDEL`
//! (atomic on the server, so exactly one of concurrent redemptions gets
//! the value). A link request is one hash with a TTL; its approval and
//! claim are scripts (`pairing/*.lua`) because each reads before it
//! writes. Every operation touches one key, so nothing needs a shared
//! hash tag and all of it works on Redis Cluster.

use super::codec::{bytes, corrupt, decode, encode, status, ScriptStatus};
use super::keys;
use super::lua::LuaScript;
use super::RedisStore;
use crate::store::{
    now_ms, Approval, Created, LinkRequest, PairingStore, PairingTarget, SecretHash, StoreError,
};
use ::redis::{cmd, Value};
use async_trait::async_trait;
use std::sync::LazyLock;
use std::time::Duration;

/// Stores a pending request unless its id is taken (KEYS: the request;
/// ARGV: JSON, TTL ms).
static CREATE_LINK: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("pairing/create_link.lua")]));

/// Approves a pending request (KEYS: the request; ARGV: the target's JSON).
static APPROVE_LINK: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("pairing/approve_link.lua")]));

/// Removes an approved request and answers its target (KEYS: the request).
static CLAIM_LINK: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("pairing/claim_link.lua")]));

#[async_trait]
impl PairingStore for RedisStore {
    async fn create_pairing_code(
        &self,
        code: &SecretHash,
        target: PairingTarget,
        ttl: Duration,
    ) -> Result<Created<()>, StoreError> {
        const DOING: &str = "storing a pairing code";
        let key = keys::pairing_code(code);
        let json = encode(DOING, &key, &target)?;
        let set: Option<String> = self
            .query(
                DOING,
                &key,
                cmd("SET")
                    .arg(&key)
                    .arg(json)
                    .arg("NX")
                    .arg("PX")
                    .arg(ttl.as_millis().max(1) as u64),
            )
            .await?;
        Ok(match set {
            Some(_) => Created::Created(()),
            None => Created::AlreadyExists,
        })
    }

    async fn redeem_pairing_code(
        &self,
        code: &SecretHash,
    ) -> Result<Option<PairingTarget>, StoreError> {
        const DOING: &str = "redeeming a pairing code";
        let key = keys::pairing_code(code);
        let raw: Option<Vec<u8>> = self.query(DOING, &key, cmd("GETDEL").arg(&key)).await?;
        raw.map(|r| decode(DOING, &key, &r)).transpose()
    }

    async fn create_link_request(&self, request: LinkRequest) -> Result<Created<()>, StoreError> {
        const DOING: &str = "storing a link request";
        let key = keys::link_request(&request.id);
        let pending = LinkRequest {
            approved: None,
            ..request
        };
        let json = encode(DOING, &key, &pending)?;
        let ttl = pending.expires_at_ms.saturating_sub(now_ms()).max(1);
        let reply = self
            .invoke_status(DOING, &CREATE_LINK, &[&key], &[&json, &ttl.to_string()])
            .await?;
        Ok(match status(DOING, &key, &reply)? {
            ScriptStatus::Ok => Created::Created(()),
            ScriptStatus::Exists => Created::AlreadyExists,
            other => return Err(corrupt(DOING, &key, format!("script said {other:?}"))),
        })
    }

    async fn link_request(&self, id: &str) -> Result<Option<LinkRequest>, StoreError> {
        const DOING: &str = "reading a link request";
        let key = keys::link_request(id);
        let (request, approved): (Option<Vec<u8>>, Option<Vec<u8>>) = self
            .query(DOING, &key, cmd("HMGET").arg(&key).arg("r").arg("a"))
            .await?;
        let Some(request) = request else {
            return Ok(None);
        };
        let mut request: LinkRequest = decode(DOING, &key, &request)?;
        request.approved = approved.map(|a| decode(DOING, &key, &a)).transpose()?;
        // The key's TTL and the record's expiry agree to the millisecond;
        // checking both makes the two engines answer alike at the edge.
        Ok((request.expires_at_ms > now_ms()).then_some(request))
    }

    async fn approve_link_request(
        &self,
        id: &str,
        target: PairingTarget,
    ) -> Result<Approval, StoreError> {
        const DOING: &str = "approving a link request";
        let key = keys::link_request(id);
        let json = encode(DOING, &key, &target)?;
        let reply = self
            .invoke_status(DOING, &APPROVE_LINK, &[&key], &[&json])
            .await?;
        Ok(match status(DOING, &key, &reply)? {
            ScriptStatus::Ok => {
                let raw = reply
                    .get(1)
                    .ok_or_else(|| corrupt(DOING, &key, "no request in the reply"))?;
                let mut request: LinkRequest = decode(DOING, &key, bytes(DOING, &key, raw)?)?;
                request.approved = Some(target);
                Approval::Approved(request)
            }
            ScriptStatus::Missing => Approval::NotFound,
            ScriptStatus::Exists => Approval::AlreadyApproved,
            other => return Err(corrupt(DOING, &key, format!("script said {other:?}"))),
        })
    }

    async fn claim_link_request(&self, id: &str) -> Result<Option<PairingTarget>, StoreError> {
        const DOING: &str = "claiming a link request";
        let key = keys::link_request(id);
        let reply: Vec<Value> = self.invoke_status(DOING, &CLAIM_LINK, &[&key], &[]).await?;
        match status(DOING, &key, &reply)? {
            ScriptStatus::Ok => {
                let raw = reply
                    .get(1)
                    .ok_or_else(|| corrupt(DOING, &key, "no target in the reply"))?;
                Ok(Some(decode(DOING, &key, bytes(DOING, &key, raw)?)?))
            }
            ScriptStatus::Missing => Ok(None),
            other => Err(corrupt(DOING, &key, format!("script said {other:?}"))),
        }
    }
}
