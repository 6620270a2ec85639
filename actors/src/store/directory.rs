//! Bays, participants and tokens: the directory every request authenticates against.

use super::StoreError;
use super::{Created, Updated};
use crate::model::{Bay, Participant};
use crate::token::TokenHash;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use switchboard_protocol::ids::{BayId, ParticipantId, TokenId};

/// What `authenticate` returns for a valid token.
#[derive(Debug, Clone, PartialEq)]
pub struct Principal {
    /// The token's Bay: the caller can see nothing outside it (protocol §1).
    pub bay: BayId,
    /// Who the token authenticates, as currently stored.
    pub participant: Participant,
    /// Public handle of the presented token (first 16 hex digits of its
    /// SHA-256); keys displacement and revocation, safe to log.
    pub token: TokenId,
    /// Whether an operator suspended the participant or its Bay, as of the
    /// answer; `None` when the caller is in good standing. While `Some`,
    /// every agent API route answers 403 with the suspension's code.
    pub suspended: Option<Suspension>,
}

/// What an operator suspended that refuses a caller (403
/// `ACCOUNT_SUSPENDED` / `BAY_SUSPENDED`, the codes BayChat CLI 0.23.1's
/// relay waits out as standing refusals). When both are, the Bay's wins:
/// reinstating the participant alone would not let it in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Suspension {
    /// The participant itself.
    Participant,
    /// The participant's whole Bay.
    Bay,
}

impl Suspension {
    /// The refusal of a caller suspended `participant`-wise (`true`) and/or
    /// Bay-wise; the Bay's wins.
    pub fn of(participant: bool, bay: bool) -> Option<Suspension> {
        if bay {
            Some(Suspension::Bay)
        } else if participant {
            Some(Suspension::Participant)
        } else {
            None
        }
    }
}

/// Bays, participants and their tokens: who exists and who a token is.
///
/// # Errors
///
/// Every method fails with [`StoreError::Unavailable`] when the backing
/// service cannot be reached and [`StoreError::Corrupt`] when a stored record
/// does not decode.
#[async_trait]
pub trait DirectoryStore: Send + Sync + 'static {
    /// Whether the store answers (for `/readyz`).
    async fn ping(&self) -> Result<(), StoreError>;
    /// Creates a Bay; `AlreadyExists` when its id is taken.
    async fn create_bay(&self, bay: Bay) -> Result<Created<Bay>, StoreError>;
    /// The Bay, or `None` when it does not exist.
    async fn bay(&self, bay: &BayId) -> Result<Option<Bay>, StoreError>;
    /// Every Bay of the store, sorted by id (the operator console's list).
    /// On Redis it reads the `sb:bays` index, which `create_bay` writes:
    /// Bays created before the index existed are not listed.
    async fn bays(&self) -> Result<Vec<Bay>, StoreError>;
    /// Creates a participant with its first token (hash only).
    async fn create_participant(
        &self,
        bay: &BayId,
        participant: Participant,
        token: TokenHash,
    ) -> Result<Created<Participant>, StoreError>;
    /// One participant of the Bay, or `None`.
    async fn participant(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<Option<Participant>, StoreError>;
    /// All participants of a Bay.
    async fn participants(&self, bay: &BayId) -> Result<Vec<Participant>, StoreError>;
    /// The participants with the given ids (unknown ids are skipped), in
    /// the order given. The write path uses it to load one conversation's
    /// roster without touching the rest of the Bay.
    async fn participants_in(
        &self,
        bay: &BayId,
        ids: &[ParticipantId],
    ) -> Result<Vec<Participant>, StoreError>;
    /// Replaces (`Some`) or removes (`None`) a participant's token. The old
    /// token stops authenticating at once, and a `CredentialRevoked` entry
    /// is appended to the Bay's log in the same step so every node closes
    /// its sessions. `NotFound` when the participant does not exist.
    async fn set_token(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        token: Option<TokenHash>,
    ) -> Result<Updated<()>, StoreError>;
    /// Suspends (`suspended`) or reinstates a participant (`Some`) or the
    /// whole Bay (`None`). Nothing else changes: tokens, memberships and
    /// webhooks stay, so reinstating restores access with the same token.
    /// When the state changes, a `Suspension` entry is appended to the Bay's
    /// log in the same step, so every node's feed drops its cached tokens
    /// and (on suspension) closes the sessions concerned. `Updated(true)`
    /// when the state changed, `Updated(false)` when it already was so
    /// (idempotent, nothing logged); `NotFound` for an unknown Bay or
    /// participant.
    async fn set_suspended(
        &self,
        bay: &BayId,
        participant: Option<&ParticipantId>,
        suspended: bool,
    ) -> Result<Updated<bool>, StoreError>;
    /// Whether the participant (`Some`) or the Bay itself (`None`) is
    /// suspended; `false` for unknown ids.
    async fn suspended(
        &self,
        bay: &BayId,
        participant: Option<&ParticipantId>,
    ) -> Result<bool, StoreError>;
    /// Resolves a token hash to its Bay and participant, with its
    /// suspension ([`Principal::suspended`]).
    async fn authenticate(&self, token: &TokenHash) -> Result<Option<Principal>, StoreError>;
}
