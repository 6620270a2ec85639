//! Pairing codes and link requests: the two ways an agent obtains its
//! token without an operator copying it over (protocol §2, "The two ways
//! to connect").
//!
//! Neither keeps a secret in the clear: a pairing code and a link
//! request's poll secret are stored as their SHA-256 ([`SecretHash`]), and
//! no token is ever stored here. The token is minted by the gateway when a
//! code is redeemed or an approved request is claimed, after the store
//! handed the target over exactly once.

use super::{Created, StoreError};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::time::Duration;
use switchboard_protocol::ids::{BayId, ParticipantId};

/// SHA-256 of a pairing code or a poll secret, lowercase hex (64 chars):
/// the only form the store keeps.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SecretHash(pub String);

impl SecretHash {
    /// Hashes a presented secret (already normalised by the caller).
    pub fn of(secret: &str) -> Self {
        SecretHash(hex::encode(Sha256::digest(secret.as_bytes())))
    }
}

/// The agent a pairing code, or an approved link request, hands a fresh
/// token to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairingTarget {
    /// The agent's Bay.
    pub bay: BayId,
    /// The agent.
    pub participant: ParticipantId,
}

/// A reverse-linking request (`baychat link`): created by a client with
/// no credential, approved by an operator for an agent, claimed once by
/// the client that holds its poll secret.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkRequest {
    /// Public id (in the approve URL): `lr_` + a ULID.
    pub id: String,
    /// The name the client asked for (`baychat link --name`), shown to the
    /// approving operator; `None` when it sent none.
    pub name: Option<String>,
    /// Hash of the poll secret only the creating client holds.
    pub secret: SecretHash,
    /// Creation time, Unix ms.
    pub created_at_ms: u64,
    /// When the request goes away, Unix ms, approved or not.
    pub expires_at_ms: u64,
    /// The agent it was approved for; `None` while pending.
    pub approved: Option<PairingTarget>,
}

/// Outcome of [`PairingStore::approve_link_request`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Approval {
    /// Approved now; the request as stored.
    Approved(LinkRequest),
    /// No such request (never was, expired or already claimed).
    NotFound,
    /// Already approved (for this or another agent); nothing changed.
    AlreadyApproved,
}

/// Pairing codes and link requests. Both expire on their own (a TTL on
/// every record, Redis: keys with `PX`), so nothing sweeps them.
///
/// # Errors
///
/// Every method fails with [`StoreError::Unavailable`] when the backing
/// service cannot be reached and [`StoreError::Corrupt`] when a stored record
/// does not decode.
#[async_trait]
pub trait PairingStore: Send + Sync + 'static {
    /// Stores a pairing code (its hash) for `target`, valid for `ttl`.
    /// `AlreadyExists` when the hash is taken (a fresh random code never
    /// collides in practice; the caller mints another).
    async fn create_pairing_code(
        &self,
        code: &SecretHash,
        target: PairingTarget,
        ttl: Duration,
    ) -> Result<Created<()>, StoreError>;
    /// Redeems a code: removes it and answers its target, in one atomic
    /// step, so of two concurrent redemptions (on any nodes) exactly one
    /// gets `Some`. `None` for a code that is unknown, expired or used.
    async fn redeem_pairing_code(
        &self,
        code: &SecretHash,
    ) -> Result<Option<PairingTarget>, StoreError>;
    /// Stores a new, pending link request until its `expires_at_ms`.
    /// `AlreadyExists` when its id is taken.
    async fn create_link_request(&self, request: LinkRequest) -> Result<Created<()>, StoreError>;
    /// The request, pending or approved; `None` when unknown, expired or
    /// claimed.
    async fn link_request(&self, id: &str) -> Result<Option<LinkRequest>, StoreError>;
    /// Approves a pending request for `target`, atomically: of two
    /// concurrent approvals exactly one is `Approved`. The request keeps
    /// its expiry.
    async fn approve_link_request(
        &self,
        id: &str,
        target: PairingTarget,
    ) -> Result<Approval, StoreError>;
    /// Claims an approved request: removes it and answers its target, in
    /// one atomic step (exactly one of concurrent claims gets `Some`).
    /// `None` when it is unknown, expired, claimed or still pending (a
    /// pending request stays).
    async fn claim_link_request(&self, id: &str) -> Result<Option<PairingTarget>, StoreError>;
}
