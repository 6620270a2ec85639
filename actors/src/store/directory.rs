//! Bays, participants and tokens: the directory every request authenticates
//! against, and the credentials channel that tells every node's token cache
//! when a token's standing changed.

use super::StoreError;
use super::{Created, Updated};
use crate::model::{Bay, Participant};
use crate::token::TokenHash;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use switchboard_protocol::cursor::EntryId;
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

/// Changes kept on the credentials channel (about; Redis trims
/// approximately). A reader more than this many changes behind is told it
/// lost some ([`CredentialsRead::Lost`]).
pub const CREDENTIAL_CHANGES_KEPT: usize = 10_000;

/// What changed about a token's standing (see [`CredentialChange`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CredentialChangeKind {
    /// A token was rotated or revoked (the Bay's `CredentialRevoked`).
    Revoked,
    /// The participant or the Bay was suspended (a `Suspension`).
    Suspended,
    /// The participant or the Bay was reinstated (a `Suspension`).
    Reinstated,
}

/// One entry of the credentials channel: the store-wide stream on which
/// every change of a token's standing is published, besides the Bay's own
/// log, so that one reader per node keeps its token cache exact for every
/// Bay without tailing each Bay's log ([`DirectoryStore::read_credentials`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CredentialChange {
    /// Position on the channel; increasing. Not stored in the entry's body.
    #[serde(skip, default = "zero_entry")]
    pub id: EntryId,
    /// The Bay concerned.
    pub bay: BayId,
    /// The participant concerned; `None`: the whole Bay (a Bay-wide
    /// suspension or reinstatement).
    pub participant: Option<ParticipantId>,
    /// What changed.
    pub kind: CredentialChangeKind,
}

fn zero_entry() -> EntryId {
    EntryId::ZERO
}

/// Outcome of reading the credentials channel.
#[derive(Clone, Debug, PartialEq)]
pub enum CredentialsRead {
    /// The changes after the position, oldest first (none when the read
    /// timed out).
    Changes(Vec<CredentialChange>),
    /// Changes after the position are gone (trimmed, or the channel was
    /// lost): the reader must assume anything changed, and start again
    /// from [`DirectoryStore::credentials_head`].
    Lost,
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
    /// its sessions. When there was an old token, a
    /// [`CredentialChangeKind::Revoked`] change is published on the
    /// credentials channel after (or, where the engine can, in the same
    /// step as) the swap. `NotFound` when the participant does not exist.
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
    /// and (on suspension) closes the sessions concerned; the change is
    /// published on the credentials channel too, like `set_token`'s.
    /// `Updated(true)`
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
    /// The newest change's id on the credentials channel
    /// ([`EntryId::ZERO`] when there is none): where a reader starts.
    async fn credentials_head(&self) -> Result<EntryId, StoreError>;
    /// Up to `max` changes of the credentials channel after `after`, oldest
    /// first; with `block`, waits up to that long for the first when none
    /// is there yet (on Redis, on one dedicated connection). `Lost` when
    /// changes after `after` are no longer kept. The channel is store-wide:
    /// one reader per node serves every Bay.
    async fn read_credentials(
        &self,
        after: EntryId,
        max: usize,
        block: Option<Duration>,
    ) -> Result<CredentialsRead, StoreError>;
}
