//! The node directory: the memory engine's [`NodeStore`] (one node, but
//! the same expiry rule as Redis).

use super::{now_ms, MemoryStore};
use crate::store::{NodeRecord, NodeStore, StoreError};
use async_trait::async_trait;
use std::time::Duration;

#[async_trait]
impl NodeStore for MemoryStore {
    async fn report_node(&self, record: &NodeRecord, ttl: Duration) -> Result<(), StoreError> {
        let until = now_ms() + ttl.as_millis() as u64;
        let mut st = self.state.lock();
        st.nodes.insert(record.id.clone(), (record.clone(), until));
        Ok(())
    }

    async fn nodes(&self) -> Result<Vec<NodeRecord>, StoreError> {
        let now = now_ms();
        let mut st = self.state.lock();
        st.nodes.retain(|_, (_, until)| *until > now);
        let mut out: Vec<NodeRecord> = st.nodes.values().map(|(r, _)| r.clone()).collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }
}
