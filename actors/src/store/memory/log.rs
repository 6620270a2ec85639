//! The Bay's event log (replay buffer): the memory engine's [`LogStore`].

use super::*;
use crate::store::LogStore;

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
