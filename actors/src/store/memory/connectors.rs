//! Connector agents: the memory engine's [`ConnectorStore`].

use super::{now_ms, MemoryStore};
use crate::store::{ConnectorStore, PendingRequest, StoreError};
use async_trait::async_trait;
use std::collections::HashMap;
use std::time::Duration;
use switchboard_protocol::connector::Platform;
use switchboard_protocol::ids::{BayId, ParticipantId};

/// What the connectors area keeps, for every Bay.
#[derive(Default)]
pub(super) struct ConnectorState {
    /// Each connector's platform.
    platforms: HashMap<(BayId, ParticipantId), Platform>,
    /// Pending requests by (Bay, connector, id), with their expiry in
    /// Unix ms (the record's own `expires_at_ms` is the asker's deadline;
    /// the store keeps a request for the `ttl` it was opened with).
    requests: HashMap<(BayId, ParticipantId, String), (PendingRequest, u64)>,
}

#[async_trait]
impl ConnectorStore for MemoryStore {
    async fn connectors(
        &self,
        bay: &BayId,
    ) -> Result<HashMap<ParticipantId, Platform>, StoreError> {
        let st = self.state.lock();
        Ok(st
            .connectors
            .platforms
            .iter()
            .filter(|((b, _), _)| b == bay)
            .map(|((_, p), platform)| (p.clone(), *platform))
            .collect())
    }

    async fn connector(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<Option<Platform>, StoreError> {
        let st = self.state.lock();
        let key = (bay.clone(), participant.clone());
        Ok(st.connectors.platforms.get(&key).copied())
    }

    async fn set_connector(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        platform: Option<Platform>,
    ) -> Result<(), StoreError> {
        let mut st = self.state.lock();
        let key = (bay.clone(), participant.clone());
        match platform {
            Some(p) => st.connectors.platforms.insert(key, p),
            None => st.connectors.platforms.remove(&key),
        };
        Ok(())
    }

    async fn open_request(
        &self,
        bay: &BayId,
        request: &PendingRequest,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let now = now_ms();
        let mut st = self.state.lock();
        // Expired requests go when the next one is opened: the map stays
        // bounded by the requests of the last `ttl`.
        st.connectors.requests.retain(|_, (_, until)| *until > now);
        let key = (bay.clone(), request.connector.clone(), request.id.clone());
        let until = now + ttl.as_millis() as u64;
        st.connectors.requests.insert(key, (request.clone(), until));
        Ok(())
    }

    async fn take_request(
        &self,
        bay: &BayId,
        connector: &ParticipantId,
        id: &str,
    ) -> Result<Option<PendingRequest>, StoreError> {
        let mut st = self.state.lock();
        let key = (bay.clone(), connector.clone(), id.to_owned());
        Ok(st
            .connectors
            .requests
            .remove(&key)
            .filter(|(_, until)| *until > now_ms())
            .map(|(r, _)| r))
    }
}
