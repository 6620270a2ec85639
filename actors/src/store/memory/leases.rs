//! Named leases: the memory engine's [`LeaseStore`].

use super::{now_ms, MemoryStore};
use crate::store::{LeaseStore, StoreError};
use async_trait::async_trait;
use std::collections::HashMap;
use std::time::Duration;

#[async_trait]
impl LeaseStore for MemoryStore {
    async fn lease(&self, name: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError> {
        let now = now_ms();
        let mut st = self.state.lock();
        let free = match st.leases.get(name) {
            None => true,
            Some((h, until)) => h == holder || *until <= now,
        };
        if free {
            st.leases.insert(
                name.to_owned(),
                (holder.to_owned(), now + ttl.as_millis() as u64),
            );
        }
        Ok(free)
    }

    async fn lease_holder(&self, name: &str) -> Result<Option<String>, StoreError> {
        let now = now_ms();
        Ok(self
            .state
            .lock()
            .leases
            .get(name)
            .filter(|(_, until)| *until > now)
            .map(|(h, _)| h.clone()))
    }

    async fn release_lease(&self, name: &str, holder: &str) -> Result<(), StoreError> {
        let mut st = self.state.lock();
        if st.leases.get(name).is_some_and(|(h, _)| h == holder) {
            st.leases.remove(name);
        }
        Ok(())
    }

    async fn take_group_lease(
        &self,
        group: &str,
        name: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let now = now_ms();
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let beats = st.group_beats.entry(group.to_owned()).or_default();
        beats.insert(holder.to_owned(), now + ttl.as_millis() as u64);
        let names = st.group_leases.entry(group.to_owned()).or_default();
        if let Some(cur) = names.get(name) {
            if cur != holder && beats.get(cur).is_some_and(|until| *until > now) {
                return Ok(false);
            }
        }
        names.insert(name.to_owned(), holder.to_owned());
        Ok(true)
    }

    async fn renew_group(
        &self,
        group: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let until = now_ms() + ttl.as_millis() as u64;
        self.state
            .lock()
            .group_beats
            .entry(group.to_owned())
            .or_default()
            .insert(holder.to_owned(), until);
        Ok(())
    }

    async fn release_group_lease(
        &self,
        group: &str,
        name: &str,
        holder: &str,
    ) -> Result<(), StoreError> {
        let mut st = self.state.lock();
        if let Some(names) = st.group_leases.get_mut(group) {
            if names.get(name).is_some_and(|h| h == holder) {
                names.remove(name);
            }
        }
        Ok(())
    }

    async fn group_lease_holder(
        &self,
        group: &str,
        name: &str,
    ) -> Result<Option<String>, StoreError> {
        let now = now_ms();
        let st = self.state.lock();
        let holder = st.group_leases.get(group).and_then(|n| n.get(name));
        Ok(holder
            .filter(|h| {
                st.group_beats
                    .get(group)
                    .and_then(|b| b.get(*h))
                    .is_some_and(|until| *until > now)
            })
            .cloned())
    }

    async fn live_group_holders(&self, group: &str) -> Result<HashMap<String, String>, StoreError> {
        let now = now_ms();
        let st = self.state.lock();
        let (Some(names), beats) = (st.group_leases.get(group), st.group_beats.get(group)) else {
            return Ok(HashMap::new());
        };
        let live = |holder: &String| {
            beats
                .and_then(|b| b.get(holder))
                .is_some_and(|until| *until > now)
        };
        Ok(names
            .iter()
            .filter(|(_, holder)| live(holder))
            .map(|(name, holder)| (name.clone(), holder.clone()))
            .collect())
    }
}
