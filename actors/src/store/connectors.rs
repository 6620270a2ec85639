//! Connector agents (protocol §9): which agents of a Bay are connectors,
//! and the `ask`/`send` requests relayed to them that still await an
//! answer.
//!
//! A pending request is kept only to check an answer: that it names a
//! request that was made, to the connector answering, and not yet
//! answered or expired. The answer itself travels through the Bay's event
//! log (`LogEvent::ConnectorAnswered`), which every node's feed tails, so
//! the caller's request, held on whichever node it reached, is woken
//! wherever the connector answered (docs/connectors.md).

use super::StoreError;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::Duration;
use switchboard_protocol::connector::{Platform, RequestKind};
use switchboard_protocol::ids::{BayId, ParticipantId};

/// A relayed request awaiting the connector's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingRequest {
    /// `creq_` + 128 random bits, url-safe; what the answer names.
    pub id: String,
    /// The connector asked: the only participant that may answer.
    pub connector: ParticipantId,
    /// Who asked.
    pub asker: ParticipantId,
    /// `ask` or `send`.
    pub kind: RequestKind,
    /// When the asker stops waiting, Unix ms.
    pub expires_at_ms: u64,
}

/// Connector designations and pending requests.
///
/// # Errors
///
/// Every method fails with [`StoreError::Unavailable`] when the backing
/// service cannot be reached and [`StoreError::Corrupt`] when a stored record
/// does not decode.
#[async_trait]
pub trait ConnectorStore: Send + Sync + 'static {
    /// Every connector of the Bay with its platform.
    async fn connectors(&self, bay: &BayId)
        -> Result<HashMap<ParticipantId, Platform>, StoreError>;
    /// The participant's platform, `None` when it is not a connector.
    async fn connector(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<Option<Platform>, StoreError>;
    /// Marks `participant` as a connector of `platform` (`None`: no longer
    /// a connector). The caller checks that it is an agent of the Bay.
    async fn set_connector(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        platform: Option<Platform>,
    ) -> Result<(), StoreError>;
    /// Keeps `request` for `ttl` (then it is gone as if answered). Ids are
    /// random: a second request with the same id replaces the first.
    async fn open_request(
        &self,
        bay: &BayId,
        request: &PendingRequest,
        ttl: Duration,
    ) -> Result<(), StoreError>;
    /// Removes and returns the request `id` addressed to `connector`, in
    /// one atomic step, so of two answers only one finds it. `None` when
    /// there is no such request for this connector: never made, made to
    /// another connector, already answered or expired.
    async fn take_request(
        &self,
        bay: &BayId,
        connector: &ParticipantId,
        id: &str,
    ) -> Result<Option<PendingRequest>, StoreError>;
}
