//! The feed's recent records: the newest records it read, kept shared and
//! already decoded, so a replay from a cursor they cover is served from
//! memory instead of the store (docs/architecture.md, "Membership and
//! replays"). A starting feed warms them from the last [`WARM_WINDOW`] of
//! the log. Separate because they are a cache beside the cursor rule: the
//! fan-out never reads them.

use super::BayFeed;
use crate::store::log::LogRecord;
use crate::store::{Replay, Store};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use switchboard_protocol::cursor::{EntryId, LogPosition};
use switchboard_protocol::ids::BayId;

/// Most records a feed keeps for replays (see `BayFeed::recent`): at about
/// 1 KiB each, up to ~10 MiB per Bay per node; a resume storm after a short
/// outage is then served from memory on every node.
pub const RECENT_RECORDS: usize = 10_000;

/// How far back a starting feed reads the log into its recent records
/// (capped by the replay window and `recent_max`). A node that restarts
/// then meets its reconnect storm with one shared read: every client that
/// was connected until the restart resumes from memory instead of each
/// reading the Bay's log from Redis (10,000 clients × the records since
/// their cursor), which is what saturates Redis and stretches the storm.
pub const WARM_WINDOW: Duration = Duration::from_secs(120);

/// Records per read while warming (see [`WARM_WINDOW`]).
const WARM_PAGE: usize = 1_000;

impl BayFeed {
    /// The records after `cursor` up to `position` from the recent ones, or
    /// `None` when they do not cover that range.
    pub(super) fn recent_after(
        &self,
        cursor: &LogPosition,
        position: &LogPosition,
    ) -> Option<Vec<Arc<LogRecord>>> {
        let mut floor = self.recent_floor?;
        // Records older than the replay window count as gone, as in the store.
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let min_ms = now_ms.saturating_sub(self.settings.replay_window.as_millis() as u64);
        let aged = self.recent.partition_point(|r| r.id.ms < min_ms);
        if let Some(newest_aged) = aged.checked_sub(1).map(|i| self.recent[i].id) {
            floor = floor.max(newest_aged);
        }
        if cursor.epoch != position.epoch || cursor.entry < floor || cursor.entry > position.entry {
            return None;
        }
        let start = self.recent.partition_point(|r| r.id <= cursor.entry);
        Some(self.recent.iter().skip(start).cloned().collect())
    }

    /// Adds a batch's `records` to the recent ones, dropping the oldest
    /// past `recent_max` (at most [`RECENT_RECORDS`]); the floor moves up
    /// to the newest one dropped.
    pub(super) fn keep_recent(&mut self, records: &[Arc<LogRecord>]) {
        self.recent.extend(records.iter().cloned());
        while self.recent.len() > self.settings.recent_max.min(RECENT_RECORDS) {
            if let Some(oldest) = self.recent.pop_front() {
                self.recent_floor = Some(oldest.id);
            }
        }
    }

    /// Drops the recent records after the log was lost: they name
    /// positions of the old log, and the floor is unknown until the index
    /// is loaded again.
    pub(super) fn forget_recent(&mut self) {
        self.recent.clear();
        self.recent_floor = None;
    }
}

/// The last `keep` records of the log from `window` before `head` up to
/// `head`, and the floor they cover from (every record in (floor, head] is
/// among them). Best effort: on any store answer but records it returns
/// none, floor `head`, and the feed starts cold as it would have anyway.
pub(super) async fn warm_recent(
    store: &dyn Store,
    bay: &BayId,
    head: &LogPosition,
    keep: usize,
    window: Duration,
) -> (VecDeque<Arc<LogRecord>>, EntryId) {
    let cold = (VecDeque::new(), head.entry);
    let mut floor = EntryId {
        ms: head.entry.ms.saturating_sub(window.as_millis() as u64),
        seq: 0,
    };
    if keep == 0 || floor >= head.entry {
        return cold;
    }
    let mut from = LogPosition {
        epoch: head.epoch.clone(),
        entry: floor,
    };
    let mut kept: VecDeque<Arc<LogRecord>> = VecDeque::new();
    loop {
        let Ok(Replay::Records { records, through }) =
            store.read_log(bay, &from, WARM_PAGE, None).await
        else {
            return cold;
        };
        let mut done = records.is_empty() || through >= head.entry;
        for record in records {
            // Past the head the tail delivers it; the recent records end there.
            if record.id > head.entry {
                done = true;
                break;
            }
            kept.push_back(record);
            if kept.len() > keep {
                if let Some(oldest) = kept.pop_front() {
                    floor = oldest.id;
                }
            }
        }
        if done {
            return (kept, floor);
        }
        from.entry = through;
    }
}
