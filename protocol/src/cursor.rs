//! The opaque cursor shared by `/updates` and `/ws` (protocol §11).
//!
//! A cursor names a position in one Bay's event log: the log's `epoch` plus
//! the id of the last entry the client is past. On the wire it is
//! base64url (no padding) of `1.<epoch>.<ms>-<seq>`, so clients cannot read
//! or forge meaning into it, and the server can change the layout behind
//! the leading version digit.
//!
//! Entry ids have the same shape as Redis stream ids (`<ms>-<seq>`), so both
//! store engines share one codec and one ordering.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Id of one entry in a Bay's event log: milliseconds since the Unix epoch
/// plus a sequence number within that millisecond. Ordered like Redis
/// stream ids.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub struct EntryId {
    /// Milliseconds since the Unix epoch at append time.
    pub ms: u64,
    /// Sequence number among entries appended in the same millisecond.
    pub seq: u64,
}

impl EntryId {
    /// The position before every entry (`0-0`).
    pub const ZERO: EntryId = EntryId { ms: 0, seq: 0 };

    /// Creates an entry id.
    pub const fn new(ms: u64, seq: u64) -> Self {
        EntryId { ms, seq }
    }

    /// The smallest id strictly greater than this one.
    pub fn next(self) -> Self {
        match self.seq.checked_add(1) {
            Some(seq) => EntryId { ms: self.ms, seq },
            None => EntryId {
                ms: self.ms + 1,
                seq: 0,
            },
        }
    }
}

impl fmt::Display for EntryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

impl FromStr for EntryId {
    type Err = CursorError;

    /// Parses `<ms>-<seq>` (a Redis stream id).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (ms, seq) = s.split_once('-').ok_or(CursorError::Malformed)?;
        Ok(EntryId {
            ms: ms.parse().map_err(|_| CursorError::Malformed)?,
            seq: seq.parse().map_err(|_| CursorError::Malformed)?,
        })
    }
}

/// Identity of one incarnation of a Bay's event log. When the log is lost
/// (memory engine restart, Redis data loss) a new epoch is minted, and every
/// cursor of the old epoch is expired rather than silently re-based.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Epoch(pub String);

impl Epoch {
    /// Epochs are short lowercase alphanumerics so they survive the cursor's
    /// `.`-separated layout.
    pub fn is_valid(s: &str) -> bool {
        !s.is_empty() && s.len() <= 32 && s.bytes().all(|b| b.is_ascii_alphanumeric())
    }
}

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A position in a Bay's event log: everything up to and including `entry`
/// has been passed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LogPosition {
    /// The log incarnation the position belongs to; a cursor whose epoch
    /// differs from the log's current one is expired, never re-based.
    pub epoch: Epoch,
    /// The last entry passed; [`EntryId::ZERO`] is "before everything".
    pub entry: EntryId,
}

/// Why a cursor string could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CursorError {
    /// Not base64url, not UTF-8, wrong version or wrong layout.
    #[error("cursor is not one this server issued")]
    Malformed,
}

const VERSION: &str = "1";

impl LogPosition {
    /// Encodes the position as the opaque wire cursor.
    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(format!("{VERSION}.{}.{}", self.epoch.0, self.entry))
    }

    /// Decodes a wire cursor.
    ///
    /// # Errors
    /// [`CursorError::Malformed`] for anything [`LogPosition::encode`] could not have produced.
    pub fn decode(cursor: &str) -> Result<Self, CursorError> {
        if cursor.len() > 128 {
            return Err(CursorError::Malformed);
        }
        let raw = URL_SAFE_NO_PAD
            .decode(cursor)
            .map_err(|_| CursorError::Malformed)?;
        let text = String::from_utf8(raw).map_err(|_| CursorError::Malformed)?;
        let mut parts = text.splitn(3, '.');
        let (Some(VERSION), Some(epoch), Some(entry)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(CursorError::Malformed);
        };
        if !Epoch::is_valid(epoch) {
            return Err(CursorError::Malformed);
        }
        Ok(LogPosition {
            epoch: Epoch(epoch.to_owned()),
            entry: entry.parse()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn cursor_round_trips() {
        let pos = LogPosition {
            epoch: Epoch("k3x9".into()),
            entry: EntryId::new(1_764_500_000_000, 7),
        };
        let wire = pos.encode();
        assert!(!wire.contains('.'), "cursor must look opaque: {wire}");
        assert_eq!(LogPosition::decode(&wire).unwrap(), pos);
    }

    #[test]
    fn garbage_cursors_are_malformed() {
        for bad in ["", "u1f", "!!!", "MS5hYmMuMTIz", &"A".repeat(200)] {
            assert_eq!(
                LogPosition::decode(bad),
                Err(CursorError::Malformed),
                "{bad}"
            );
        }
    }

    #[test]
    fn entry_ids_order_like_redis_stream_ids() {
        assert!(EntryId::new(5, 9) < EntryId::new(6, 0));
        assert!(EntryId::new(5, 1) < EntryId::new(5, 2));
        assert_eq!(EntryId::new(5, u64::MAX).next(), EntryId::new(6, 0));
    }

    proptest! {
        #[test]
        fn any_position_round_trips(epoch in "[a-z0-9]{1,32}", ms in any::<u64>(), seq in any::<u64>()) {
            let pos = LogPosition { epoch: Epoch(epoch), entry: EntryId::new(ms, seq) };
            prop_assert_eq!(LogPosition::decode(&pos.encode()).unwrap(), pos);
        }
    }
}
