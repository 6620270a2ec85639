//! The node directory: the Redis engine's [`NodeStore`], one hash
//! (`sb:nodes`) of node id → JSON `{until, record}`.

use super::codec::{decode, encode};
use super::keys;
use super::RedisStore;
use crate::store::{NodeRecord, NodeStore, StoreError};
use ::redis::cmd;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// One node's field of `sb:nodes`.
#[derive(Serialize, Deserialize)]
struct Entry {
    /// Unix ms after which the record no longer counts.
    until: u64,
    record: NodeRecord,
}

#[async_trait]
impl NodeStore for RedisStore {
    async fn report_node(&self, record: &NodeRecord, ttl: Duration) -> Result<(), StoreError> {
        let doing = "reporting the node";
        let key = keys::nodes();
        let until = crate::store::now_ms() + ttl.as_millis() as u64;
        let value = encode(
            doing,
            &key,
            &Entry {
                until,
                record: record.clone(),
            },
        )?;
        let _: i64 = self
            .query(
                doing,
                &key,
                cmd("HSET").arg(&key).arg(&record.id).arg(value),
            )
            .await?;
        Ok(())
    }

    async fn nodes(&self) -> Result<Vec<NodeRecord>, StoreError> {
        let doing = "reading the node directory";
        let key = keys::nodes();
        let raw: Vec<(String, Vec<u8>)> = self.query(doing, &key, cmd("HGETALL").arg(&key)).await?;
        let now = crate::store::now_ms();
        let mut out = Vec::new();
        let mut expired = Vec::new();
        for (node, value) in raw {
            let entry: Entry = decode(doing, &key, &value)?;
            if entry.until <= now {
                expired.push(node);
            } else {
                out.push(entry.record);
            }
        }
        // Node ids are new at every start: forget the stopped ones so the
        // hash does not grow with every restart.
        if !expired.is_empty() {
            let _: i64 = self
                .query(doing, &key, cmd("HDEL").arg(&key).arg(&expired))
                .await?;
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }
}
