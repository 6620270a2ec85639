//! Connector agents: the Redis engine's [`ConnectorStore`]. The Bay's
//! connectors are one hash (participant → platform); each pending request
//! is a string with a TTL, taken by `GETDEL` so of two answers one wins.

use super::codec::{corrupt, decode, encode};
use super::keys::BayKeys;
use super::RedisStore;
use crate::store::{ConnectorStore, PendingRequest, StoreError};
use ::redis::cmd;
use async_trait::async_trait;
use std::collections::HashMap;
use std::time::Duration;
use switchboard_protocol::connector::Platform;
use switchboard_protocol::ids::{BayId, ParticipantId};

/// The platform a stored name names.
fn platform(doing: &'static str, key: &str, name: &str) -> Result<Platform, StoreError> {
    Platform::parse(name).ok_or_else(|| corrupt(doing, key, format!("bad platform {name:?}")))
}

#[async_trait]
impl ConnectorStore for RedisStore {
    async fn connectors(
        &self,
        bay: &BayId,
    ) -> Result<HashMap<ParticipantId, Platform>, StoreError> {
        let doing = "reading the connectors";
        let key = BayKeys::new(bay).connectors();
        let all: HashMap<String, String> =
            self.query(doing, &key, cmd("HGETALL").arg(&key)).await?;
        all.into_iter()
            .map(|(p, name)| Ok((ParticipantId(p), platform(doing, &key, &name)?)))
            .collect()
    }

    async fn connector(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<Option<Platform>, StoreError> {
        let doing = "reading a connector";
        let key = BayKeys::new(bay).connectors();
        let name: Option<String> = self
            .query(doing, &key, cmd("HGET").arg(&key).arg(participant.as_str()))
            .await?;
        name.map(|n| platform(doing, &key, &n)).transpose()
    }

    async fn set_connector(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        platform: Option<Platform>,
    ) -> Result<(), StoreError> {
        let doing = "marking a connector";
        let key = BayKeys::new(bay).connectors();
        let _: i64 = match platform {
            Some(p) => {
                self.query(
                    doing,
                    &key,
                    cmd("HSET")
                        .arg(&key)
                        .arg(participant.as_str())
                        .arg(p.as_str()),
                )
                .await?
            }
            None => {
                self.query(doing, &key, cmd("HDEL").arg(&key).arg(participant.as_str()))
                    .await?
            }
        };
        Ok(())
    }

    async fn open_request(
        &self,
        bay: &BayId,
        request: &PendingRequest,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let doing = "opening a connector request";
        let key = BayKeys::new(bay).connector_request(&request.connector, &request.id);
        let body = encode(doing, &key, request)?;
        let ms = ttl.as_millis().max(1) as u64;
        let () = self
            .query(
                doing,
                &key,
                cmd("SET").arg(&key).arg(body).arg("PX").arg(ms),
            )
            .await?;
        Ok(())
    }

    async fn take_request(
        &self,
        bay: &BayId,
        connector: &ParticipantId,
        id: &str,
    ) -> Result<Option<PendingRequest>, StoreError> {
        let doing = "taking a connector request";
        let key = BayKeys::new(bay).connector_request(connector, id);
        let body: Option<Vec<u8>> = self.query(doing, &key, cmd("GETDEL").arg(&key)).await?;
        body.map(|b| decode(doing, &key, &b)).transpose()
    }
}
