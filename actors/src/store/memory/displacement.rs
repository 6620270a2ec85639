//! The displacement channel: the memory engine's [`DisplacementStore`],
//! kept in each Bay's [`Log`] apart from its entries.

use super::log::{log_of, Log};
use super::{now_ms, MemoryStore};
use crate::store::{DisplacementStore, Opening, StoreError, OPENINGS_KEPT};
use async_trait::async_trait;
use std::time::Duration;
use switchboard_protocol::cursor::EntryId;
use switchboard_protocol::ids::{BayId, SessionId, TokenId};
use tokio::sync::watch;

#[async_trait]
impl DisplacementStore for MemoryStore {
    async fn open_session(
        &self,
        bay: &BayId,
        token: &TokenId,
        session: &SessionId,
    ) -> Result<EntryId, StoreError> {
        let mut st = self.state.lock();
        Ok(log_of(&mut st.logs, bay).open(token, session))
    }

    async fn openings_head(&self, bay: &BayId) -> Result<EntryId, StoreError> {
        let mut st = self.state.lock();
        let head = *log_of(&mut st.logs, bay).openings_tx.borrow();
        Ok(head)
    }

    async fn read_openings(
        &self,
        bay: &BayId,
        after: EntryId,
        max: usize,
        block: Option<Duration>,
    ) -> Result<Vec<Opening>, StoreError> {
        let mut rx = match self.openings_or_wait(bay, after, max) {
            Ok(found) => return Ok(found),
            Err(rx) => rx,
        };
        let Some(block) = block else {
            return Ok(Vec::new());
        };
        let deadline = tokio::time::Instant::now() + block;
        loop {
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {
                    if *rx.borrow_and_update() > after {
                        return Ok(self.openings_or_wait(bay, after, max).unwrap_or_default());
                    }
                }
                Ok(Err(_)) | Err(_) => return Ok(Vec::new()),
            }
        }
    }
}

impl Log {
    /// Announces a session of `token`: the newest opening, at the next
    /// id of the channel; the oldest beyond [`OPENINGS_KEPT`] goes.
    fn open(&mut self, token: &TokenId, session: &SessionId) -> EntryId {
        let last = *self.openings_tx.borrow();
        let now = now_ms();
        let id = if now > last.ms {
            EntryId::new(now, 0)
        } else {
            last.next()
        };
        self.openings.push_back(Opening {
            id,
            token: token.clone(),
            session: session.clone(),
        });
        if self.openings.len() > OPENINGS_KEPT {
            self.openings.pop_front();
        }
        self.openings_tx.send_replace(id);
        id
    }

    /// The openings after `after`, oldest first, at most `max`.
    fn openings_after(&self, after: EntryId, max: usize) -> Vec<Opening> {
        let start = self.openings.partition_point(|o| o.id <= after);
        self.openings
            .iter()
            .skip(start)
            .take(max)
            .cloned()
            .collect()
    }
}

impl MemoryStore {
    /// Openings after `after`, or a receiver to wait on when there are none.
    fn openings_or_wait(
        &self,
        bay: &BayId,
        after: EntryId,
        max: usize,
    ) -> Result<Vec<Opening>, watch::Receiver<EntryId>> {
        let mut st = self.state.lock();
        let log = log_of(&mut st.logs, bay);
        let found = log.openings_after(after, max);
        if found.is_empty() {
            let mut rx = log.openings_tx.subscribe();
            rx.mark_unchanged();
            Err(rx)
        } else {
            Ok(found)
        }
    }
}
