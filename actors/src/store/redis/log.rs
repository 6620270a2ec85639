//! The Bay's event log (replay buffer): the Redis engine's [`LogStore`].

use super::*;
use crate::store::LogStore;

#[async_trait]
impl LogStore for RedisStore {
    async fn log_head(&self, bay: &BayId) -> Result<LogPosition, StoreError> {
        let doing = "reading the log head";
        let k = BayKeys::new(bay);
        let (log, epoch, meta) = (k.log(), k.epoch(), k.log_meta());
        let reply: Value = self
            .invoke(
                doing,
                &scripts::LOG_HEAD,
                &[&log, &epoch, &meta],
                &[&epoch_candidate()],
            )
            .await?;
        let [current, last] = array(doing, &log, &reply)? else {
            return Err(corrupt(doing, &log, "head script gave a malformed reply"));
        };
        Ok(LogPosition {
            epoch: Epoch(text(doing, &epoch, current)?.to_owned()),
            entry: entry_id(doing, &log, last)?,
        })
    }

    async fn read_log(
        &self,
        bay: &BayId,
        after: &LogPosition,
        max: usize,
        block: Option<Duration>,
    ) -> Result<Replay, StoreError> {
        // A blocking read (a feed's tail) costs one XREAD per batch when the
        // entries chain on from `after`; anything else takes the full read.
        if let Some(block) = block.filter(|b| !b.is_zero()) {
            if let Some(replay) = self.tail_once(bay, after, max, block).await? {
                return Ok(replay);
            }
        }
        self.read_once(bay, after, max).await
    }

    async fn append_control(&self, bay: &BayId, event: LogEvent) -> Result<EntryId, StoreError> {
        let doing = "appending a control entry";
        let k = BayKeys::new(bay);
        let (log, epoch, meta, rosters) = (k.log(), k.epoch(), k.log_meta(), k.rosters());
        let json = encode(doing, &log, &event)?;
        let reply = self
            .invoke_status(
                doing,
                &scripts::APPEND_EVENT,
                &[&log, &epoch, &meta, &rosters],
                &[
                    &epoch_candidate(),
                    &self.window_ms(),
                    &self.max_entries(),
                    &json,
                ],
            )
            .await?;
        match reply.as_slice() {
            [_, id] => entry_id(doing, &log, id),
            _ => Err(corrupt(doing, &log, "append script gave a malformed reply")),
        }
    }

    async fn roster_changes(
        &self,
        bay: &BayId,
        after: &LogPosition,
    ) -> Result<Vec<RosterChange>, StoreError> {
        let doing = "reading roster changes";
        let key = BayKeys::new(bay).rosters();
        let reply: Value = self
            .query(
                doing,
                &key,
                cmd("XRANGE")
                    .arg(&key)
                    .arg(format!("({}", after.entry))
                    .arg("+"),
            )
            .await?;
        stream_entries(doing, &key, &reply, "r")?
            .into_iter()
            .map(|(at, raw)| {
                let stored: StoredRosterChange = decode(doing, &key, raw)?;
                Ok(RosterChange {
                    at,
                    conversation: stored.conversation,
                    before: stored.before,
                    after: stored.after,
                })
            })
            .collect()
    }
}
