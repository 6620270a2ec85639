//! Pairing codes and link requests: the memory engine's [`PairingStore`].
//! Expired records are dropped when a new one is stored and ignored when
//! read, so their count stays bounded by what one TTL can create.

use super::{now_ms, MemoryStore};
use crate::store::{
    Approval, Created, LinkRequest, PairingStore, PairingTarget, SecretHash, StoreError,
};
use async_trait::async_trait;
use std::collections::HashMap;
use std::time::Duration;

/// The area's state, inside the store's one lock.
#[derive(Default)]
pub(super) struct PairingState {
    /// Code hash → its target and expiry (Unix ms).
    codes: HashMap<SecretHash, (PairingTarget, u64)>,
    /// Link request id → the request (its own `expires_at_ms`).
    links: HashMap<String, LinkRequest>,
}

impl PairingState {
    fn drop_expired(&mut self, now: u64) {
        self.codes.retain(|_, (_, until)| *until > now);
        self.links.retain(|_, r| r.expires_at_ms > now);
    }

    /// The live request `id`, or `None` (unknown or expired).
    fn live(&mut self, id: &str, now: u64) -> Option<&mut LinkRequest> {
        self.links.get_mut(id).filter(|r| r.expires_at_ms > now)
    }
}

#[async_trait]
impl PairingStore for MemoryStore {
    async fn create_pairing_code(
        &self,
        code: &SecretHash,
        target: PairingTarget,
        ttl: Duration,
    ) -> Result<Created<()>, StoreError> {
        let now = now_ms();
        let mut st = self.state.lock();
        st.pairing.drop_expired(now);
        if st.pairing.codes.contains_key(code) {
            return Ok(Created::AlreadyExists);
        }
        let until = now + (ttl.as_millis() as u64).max(1);
        st.pairing.codes.insert(code.clone(), (target, until));
        Ok(Created::Created(()))
    }

    async fn redeem_pairing_code(
        &self,
        code: &SecretHash,
    ) -> Result<Option<PairingTarget>, StoreError> {
        let now = now_ms();
        let mut st = self.state.lock();
        Ok(st
            .pairing
            .codes
            .remove(code)
            .filter(|(_, until)| *until > now)
            .map(|(target, _)| target))
    }

    async fn create_link_request(&self, request: LinkRequest) -> Result<Created<()>, StoreError> {
        let now = now_ms();
        let mut st = self.state.lock();
        st.pairing.drop_expired(now);
        if st.pairing.links.contains_key(&request.id) {
            return Ok(Created::AlreadyExists);
        }
        st.pairing.links.insert(request.id.clone(), request);
        Ok(Created::Created(()))
    }

    async fn link_request(&self, id: &str) -> Result<Option<LinkRequest>, StoreError> {
        let now = now_ms();
        Ok(self.state.lock().pairing.live(id, now).map(|r| r.clone()))
    }

    async fn approve_link_request(
        &self,
        id: &str,
        target: PairingTarget,
    ) -> Result<Approval, StoreError> {
        let now = now_ms();
        let mut st = self.state.lock();
        let Some(request) = st.pairing.live(id, now) else {
            return Ok(Approval::NotFound);
        };
        if request.approved.is_some() {
            return Ok(Approval::AlreadyApproved);
        }
        request.approved = Some(target);
        Ok(Approval::Approved(request.clone()))
    }

    async fn claim_link_request(&self, id: &str) -> Result<Option<PairingTarget>, StoreError> {
        let now = now_ms();
        let mut st = self.state.lock();
        let approved = st
            .pairing
            .live(id, now)
            .is_some_and(|r| r.approved.is_some());
        if !approved {
            return Ok(None);
        }
        Ok(st.pairing.links.remove(id).and_then(|r| r.approved))
    }
}
