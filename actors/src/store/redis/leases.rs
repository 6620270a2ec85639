//! Named leases: the Redis engine's [`LeaseStore`].

use super::*;
use crate::store::LeaseStore;

#[async_trait]
impl LeaseStore for RedisStore {
    async fn lease(&self, name: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError> {
        let key = keys::lease(name);
        let held: i64 = self
            .invoke(
                "taking a lease",
                &scripts::LEASE,
                &[&key],
                &[holder, &ttl.as_millis().max(1).to_string()],
            )
            .await?;
        Ok(held == 1)
    }

    async fn release_lease(&self, name: &str, holder: &str) -> Result<(), StoreError> {
        let key = keys::lease(name);
        let _: i64 = self
            .invoke(
                "releasing a lease",
                &scripts::RELEASE_LEASE,
                &[&key],
                &[holder],
            )
            .await?;
        Ok(())
    }
}
