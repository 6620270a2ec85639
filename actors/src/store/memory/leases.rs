//! Named leases: the memory engine's [`LeaseStore`].

use super::{now_ms, MemoryStore};
use crate::store::{LeaseStore, StoreError};
use async_trait::async_trait;
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
}
