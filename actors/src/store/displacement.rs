//! The displacement channel: who opened a connection last, per token.

use super::StoreError;
use async_trait::async_trait;
use std::time::Duration;
use switchboard_protocol::cursor::EntryId;
use switchboard_protocol::ids::{BayId, SessionId, TokenId};

/// A connection opening on a Bay's displacement channel: the newest opening
/// of a token wins, and every older connection of it, on any node, is
/// displaced (protocol §11: 4000 / an empty answer). The channel is apart
/// from the log so that replays never read it: a resume storm of N clients
/// would otherwise make every replay read the storm's own N openings.
#[derive(Debug, Clone, PartialEq)]
pub struct Opening {
    /// Position on the channel; increasing, comparable only with other openings.
    pub id: EntryId,
    /// Handle of the token the connection authenticated with.
    pub token: TokenId,
    /// The new connection.
    pub session: SessionId,
}

/// Openings kept per Bay on the displacement channel (about; Redis trims
/// approximately). Only feeds lagging by more than this many openings
/// could miss one.
pub const OPENINGS_KEPT: usize = 10_000;

/// The displacement channel: connection openings, apart from the log (see
/// [`Opening`]).
///
/// # Errors
///
/// Every method fails with [`StoreError::Unavailable`] when the backing
/// service cannot be reached and [`StoreError::Corrupt`] when a stored record
/// does not decode.
#[async_trait]
pub trait DisplacementStore: Send + Sync + 'static {
    /// Announces a connection of `token` (see [`Opening`]); returns its id.
    async fn open_session(
        &self,
        bay: &BayId,
        token: &TokenId,
        session: &SessionId,
    ) -> Result<EntryId, StoreError>;
    /// The newest opening's id ([`EntryId::ZERO`] when there is none).
    async fn openings_head(&self, bay: &BayId) -> Result<EntryId, StoreError>;
    /// Up to `max` openings after `after`, oldest first; with `block`,
    /// waits up to that long for the first when none is there yet.
    async fn read_openings(
        &self,
        bay: &BayId,
        after: EntryId,
        max: usize,
        block: Option<Duration>,
    ) -> Result<Vec<Opening>, StoreError>;
}
