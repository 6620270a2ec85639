//! Named leases with a TTL: one holder at a time.

use super::StoreError;
use async_trait::async_trait;
use std::time::Duration;

/// Named leases: one holder at a time, for a TTL (webhook workers, presence
/// publishers).
///
/// # Errors
///
/// Every method fails with [`StoreError::Unavailable`] when the backing
/// service cannot be reached and [`StoreError::Corrupt`] when a stored record
/// does not decode.
#[async_trait]
pub trait LeaseStore: Send + Sync + 'static {
    /// Takes the lease `name` for `holder` for `ttl`, or renews it when
    /// `holder` has it: `true` when `holder` holds it now. One node at a
    /// time delivers an agent's webhooks this way.
    async fn lease(&self, name: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError>;
    /// Gives the lease up if `holder` has it.
    async fn release_lease(&self, name: &str, holder: &str) -> Result<(), StoreError>;
    /// Who holds the lease `name` now (`None`: free, or expired). The
    /// operator console names the node delivering an agent's webhooks
    /// this way.
    async fn lease_holder(&self, name: &str) -> Result<Option<String>, StoreError>;
}
