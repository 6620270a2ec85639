//! Named leases: the Redis engine's [`LeaseStore`]. Scripts:
//! `leases/take.lua` and `leases/release.lua`; group leases, one hash per
//! group (`sb:{lease:<group>}`), `leases/group_*.lua`.

use super::keys;
use super::lua::LuaScript;
use super::RedisStore;
use crate::store::{LeaseStore, StoreError};
use ::redis::cmd;
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::Duration;

/// Takes or renews a lease (KEYS: the lease; ARGV: holder, ttl ms): 1
/// when the holder has it now.
static LEASE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("leases/take.lua")]));

/// Lets a lease go if the holder has it (KEYS: the lease; ARGV: holder).
static RELEASE_LEASE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("leases/release.lua")]));

/// Takes a group lease (KEYS: the group; ARGV: name, holder, ttl ms): 1
/// when the holder has it now.
static GROUP_TAKE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("leases/group_take.lua")]));

/// Renews a holder's heartbeat in a group (KEYS: the group; ARGV: holder,
/// ttl ms).
static GROUP_RENEW: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("leases/group_renew.lua")]));

/// Lets a group lease go if the holder has it (KEYS: the group; ARGV:
/// name, holder).
static GROUP_RELEASE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("leases/group_release.lua")]));

/// A group lease's live holder (KEYS: the group; ARGV: name).
static GROUP_HOLDER: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("leases/group_holder.lua")]));

/// A group's held leases (KEYS: the group): a flat array of name,
/// holder pairs, one per lease whose holder's heartbeat lives.
static GROUP_LIVE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::read_only(&[include_str!("leases/group_live.lua")]));

#[async_trait]
impl LeaseStore for RedisStore {
    async fn lease(&self, name: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError> {
        let key = keys::lease(name);
        let held: i64 = self
            .invoke(
                "taking a lease",
                &LEASE,
                &[&key],
                &[holder, &ttl.as_millis().max(1).to_string()],
            )
            .await?;
        Ok(held == 1)
    }

    async fn lease_holder(&self, name: &str) -> Result<Option<String>, StoreError> {
        let key = keys::lease(name);
        // The key expires with the lease (`SET … PX`): present means held.
        self.query("reading a lease", &key, cmd("GET").arg(&key))
            .await
    }

    async fn release_lease(&self, name: &str, holder: &str) -> Result<(), StoreError> {
        let key = keys::lease(name);
        let _: i64 = self
            .invoke("releasing a lease", &RELEASE_LEASE, &[&key], &[holder])
            .await?;
        Ok(())
    }

    async fn take_group_lease(
        &self,
        group: &str,
        name: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let key = keys::group_leases(group);
        let held: i64 = self
            .invoke(
                "taking a group lease",
                &GROUP_TAKE,
                &[&key],
                &[name, holder, &ttl.as_millis().max(1).to_string()],
            )
            .await?;
        Ok(held == 1)
    }

    async fn renew_group(
        &self,
        group: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let key = keys::group_leases(group);
        let _: i64 = self
            .invoke(
                "renewing group leases",
                &GROUP_RENEW,
                &[&key],
                &[holder, &ttl.as_millis().max(1).to_string()],
            )
            .await?;
        Ok(())
    }

    async fn release_group_lease(
        &self,
        group: &str,
        name: &str,
        holder: &str,
    ) -> Result<(), StoreError> {
        let key = keys::group_leases(group);
        let _: i64 = self
            .invoke(
                "releasing a group lease",
                &GROUP_RELEASE,
                &[&key],
                &[name, holder],
            )
            .await?;
        Ok(())
    }

    async fn group_lease_holder(
        &self,
        group: &str,
        name: &str,
    ) -> Result<Option<String>, StoreError> {
        let key = keys::group_leases(group);
        self.invoke("reading a group lease", &GROUP_HOLDER, &[&key], &[name])
            .await
    }

    async fn live_group_holders(&self, group: &str) -> Result<HashMap<String, String>, StoreError> {
        let key = keys::group_leases(group);
        let pairs: Vec<String> = self
            .invoke("reading a group's leases", &GROUP_LIVE, &[&key], &[])
            .await?;
        if pairs.len() % 2 != 0 {
            return Err(super::codec::corrupt(
                "reading a group's leases",
                &key,
                format!("an odd reply of {} items", pairs.len()),
            ));
        }
        let mut held = HashMap::with_capacity(pairs.len() / 2);
        let mut pairs = pairs.into_iter();
        while let (Some(name), Some(holder)) = (pairs.next(), pairs.next()) {
            held.insert(name, holder);
        }
        Ok(held)
    }
}
