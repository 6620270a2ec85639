//! The Bay's event log (replay buffer): the memory engine's [`LogStore`],
//! and the in-memory [`Log`] of each Bay (entries, roster changes, head,
//! trimming; its displacement channel is read in `displacement.rs`).

use super::{now_ms, MemoryLimits, MemoryStore};
use crate::model::Conversation;
use crate::store::log::{LogEvent, LogRecord};
use crate::store::{LogStore, Opening, Replay, RosterChange, StoreError};
use async_trait::async_trait;
use rand::Rng;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use switchboard_protocol::cursor::{EntryId, Epoch, LogPosition};
use switchboard_protocol::ids::{BayId, ParticipantId};
use tokio::sync::watch;

/// One Bay's event log (the replay buffer) and its displacement channel.
pub(super) struct Log {
    epoch: Epoch,
    entries: VecDeque<Arc<LogRecord>>,
    /// The roster changes among `entries`, oldest first, trimmed with them.
    rosters: VecDeque<RosterChange>,
    /// Id of the newest entry ever appended (the head).
    last: EntryId,
    /// Id of the newest entry trimmed away. A cursor below it is expired.
    max_deleted: EntryId,
    /// Wakes tails when `last` moves.
    head_tx: watch::Sender<EntryId>,
    /// The displacement channel: the newest
    /// [`OPENINGS_KEPT`](crate::store::OPENINGS_KEPT) openings.
    pub(super) openings: VecDeque<Opening>,
    /// Wakes openings tails with the newest opening's id.
    pub(super) openings_tx: watch::Sender<EntryId>,
}

impl Log {
    fn new() -> Self {
        let epoch: String = rand::rng()
            .sample_iter(rand::distr::Alphanumeric)
            .take(10)
            .map(|c| (c as char).to_ascii_lowercase())
            .collect();
        Log {
            epoch: Epoch(epoch),
            entries: VecDeque::new(),
            rosters: VecDeque::new(),
            last: EntryId::ZERO,
            max_deleted: EntryId::ZERO,
            head_tx: watch::channel(EntryId::ZERO).0,
            openings: VecDeque::new(),
            openings_tx: watch::channel(EntryId::ZERO).0,
        }
    }

    /// Appends `event` at the next id (the clock's ms, or one after the
    /// head), trims, and wakes tails.
    pub(super) fn append(&mut self, event: LogEvent, limits: &MemoryLimits) -> EntryId {
        let now = now_ms();
        let id = if now > self.last.ms {
            EntryId::new(now, 0)
        } else {
            self.last.next()
        };
        self.entries.push_back(Arc::new(LogRecord::new(id, event)));
        self.last = id;
        self.trim(now, limits);
        self.head_tx.send_replace(id);
        id
    }

    /// Drops entries older than the replay window (like Redis `XTRIM MINID`)
    /// and beyond the entry cap (like `MAXLEN`).
    fn trim(&mut self, now: u64, limits: &MemoryLimits) {
        let min_ms = now.saturating_sub(limits.replay_window.as_millis() as u64);
        while let Some(front) = self.entries.front() {
            if front.id.ms < min_ms || self.entries.len() > limits.max_entries {
                self.max_deleted = front.id;
                self.entries.pop_front();
            } else {
                break;
            }
        }
        while self
            .rosters
            .front()
            .is_some_and(|r| r.at <= self.max_deleted)
        {
            self.rosters.pop_front();
        }
    }

    /// Appends a `Roster` entry for `after` and remembers who was a member
    /// `before` it.
    pub(super) fn append_roster(
        &mut self,
        before: Vec<ParticipantId>,
        after: &Conversation,
        limits: &MemoryLimits,
    ) -> EntryId {
        let at = self.append(LogEvent::roster(after), limits);
        // The append may have trimmed; an entry it just wrote never is.
        self.rosters.push_back(RosterChange {
            at,
            conversation: after.id.clone(),
            before,
            after: after.member_ids(),
        });
        at
    }

    /// The entries after `after` (at most `max`), or why there are none
    /// to give: `EpochChanged` for another epoch, `Expired` for a cursor
    /// trimmed past or beyond the head.
    fn read(&self, after: &LogPosition, max: usize) -> Replay {
        if after.epoch != self.epoch {
            return Replay::EpochChanged;
        }
        if after.entry < self.max_deleted || after.entry > self.last {
            return Replay::Expired;
        }
        let start = self.entries.partition_point(|r| r.id <= after.entry);
        let records: Vec<_> = self.entries.iter().skip(start).take(max).cloned().collect();
        Replay::page(records, max, after.entry, self.last)
    }
}

/// The log of `bay`, created on first touch.
pub(super) fn log_of<'a>(logs: &'a mut HashMap<BayId, Log>, bay: &BayId) -> &'a mut Log {
    logs.entry(bay.clone()).or_insert_with(Log::new)
}

#[async_trait]
impl LogStore for MemoryStore {
    async fn log_head(&self, bay: &BayId) -> Result<LogPosition, StoreError> {
        let mut st = self.state.lock();
        let log = log_of(&mut st.logs, bay);
        Ok(LogPosition {
            epoch: log.epoch.clone(),
            entry: log.last,
        })
    }

    async fn read_log(
        &self,
        bay: &BayId,
        after: &LogPosition,
        max: usize,
        block: Option<Duration>,
    ) -> Result<Replay, StoreError> {
        let (replay, mut head_rx) = {
            let mut st = self.state.lock();
            let log = log_of(&mut st.logs, bay);
            (log.read(after, max), log.head_tx.subscribe())
        };
        let Some(block) = block else {
            return Ok(replay);
        };
        match &replay {
            Replay::Records { records, .. } if records.is_empty() => {}
            _ => return Ok(replay),
        }
        head_rx.mark_unchanged();
        let deadline = tokio::time::Instant::now() + block;
        loop {
            match tokio::time::timeout_at(deadline, head_rx.changed()).await {
                Ok(Ok(())) => {
                    if *head_rx.borrow_and_update() > after.entry {
                        let mut st = self.state.lock();
                        return Ok(log_of(&mut st.logs, bay).read(after, max));
                    }
                }
                // Timed out, or the log was dropped: report what we had.
                Ok(Err(_)) | Err(_) => return Ok(replay),
            }
        }
    }

    async fn append_control(&self, bay: &BayId, event: LogEvent) -> Result<EntryId, StoreError> {
        let mut st = self.state.lock();
        Ok(log_of(&mut st.logs, bay).append(event, &self.limits))
    }

    async fn roster_changes(
        &self,
        bay: &BayId,
        after: &LogPosition,
    ) -> Result<Vec<RosterChange>, StoreError> {
        let mut st = self.state.lock();
        let log = log_of(&mut st.logs, bay);
        if log.epoch != after.epoch {
            return Ok(Vec::new());
        }
        let start = log.rosters.partition_point(|r| r.at <= after.entry);
        Ok(log.rosters.iter().skip(start).cloned().collect())
    }
}
