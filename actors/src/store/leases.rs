//! Named leases with a TTL: one holder at a time.

use super::StoreError;
use async_trait::async_trait;
use std::collections::HashMap;
use std::time::Duration;

/// Named leases: one holder at a time, for a TTL (presence publishers);
/// and group leases, kept by one heartbeat per holder and group (webhook
/// workers: the group is the Bay).
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

    /// Takes the lease `name` of the group `group` for `holder`, or
    /// confirms that `holder` has it: `true` when `holder` holds it now.
    /// A group lease has no lifetime of its own: it stays its holder's
    /// while the holder's heartbeat in the group lives (see
    /// [`LeaseStore::renew_group`]; taking renews it too, for `ttl`), and
    /// another holder takes it once that heartbeat lapsed. So a node that
    /// holds many leases of a group (an agent's webhook deliveries, for
    /// every agent of a Bay) keeps them all with one write per renewal,
    /// not one per lease.
    async fn take_group_lease(
        &self,
        group: &str,
        name: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError>;
    /// Renews `holder`'s heartbeat in `group` for `ttl`: every lease of
    /// the group it holds stays its own until then.
    async fn renew_group(&self, group: &str, holder: &str, ttl: Duration)
        -> Result<(), StoreError>;
    /// Gives the group lease `name` up if `holder` has it.
    async fn release_group_lease(
        &self,
        group: &str,
        name: &str,
        holder: &str,
    ) -> Result<(), StoreError>;
    /// Who holds the group lease `name` now (`None`: free, or its holder's
    /// heartbeat lapsed).
    async fn group_lease_holder(
        &self,
        group: &str,
        name: &str,
    ) -> Result<Option<String>, StoreError>;
    /// Every lease of `group` that is held now, by name → its holder: the
    /// leases whose holder's heartbeat still lives (by the store's clock,
    /// as [`LeaseStore::take_group_lease`] judges it). A lease that is
    /// free, released, or held by a holder whose heartbeat lapsed is not
    /// listed, so [`LeaseStore::take_group_lease`] would hand it to anyone.
    /// One read for the whole group: a node looks here first and tries to
    /// take only the leases that are not another live holder's (for
    /// webhooks, one read per Bay per scan instead of one take per agent).
    async fn live_group_holders(&self, group: &str) -> Result<HashMap<String, String>, StoreError>;
}
