//! The displacement channel: the memory engine's [`DisplacementStore`].

use super::*;
use crate::store::DisplacementStore;

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
