//! The displacement channel: the Redis engine's [`DisplacementStore`],
//! a stream of session openings apart from the log (`sb:{bay}:openings`).

use super::codec::{corrupt, decode, encode, stream_entries};
use super::keys::BayKeys;
use super::{RedisStore, MAX_COUNT};
use crate::store::{DisplacementStore, Opening, StoreError, OPENINGS_KEPT};
use ::redis::{cmd, Value};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use switchboard_protocol::cursor::EntryId;
use switchboard_protocol::ids::{BayId, SessionId, TokenId};

/// An opening as `sb:{bay}:openings` stores it (its id is the entry's).
#[derive(Serialize, Deserialize)]
struct StoredOpening {
    token: TokenId,
    session: SessionId,
}

#[async_trait]
impl DisplacementStore for RedisStore {
    async fn open_session(
        &self,
        bay: &BayId,
        token: &TokenId,
        session: &SessionId,
    ) -> Result<EntryId, StoreError> {
        let doing = "announcing a session";
        let key = BayKeys::new(bay).openings();
        let json = encode(
            doing,
            &key,
            &StoredOpening {
                token: token.clone(),
                session: session.clone(),
            },
        )?;
        let id: String = self
            .query(
                doing,
                &key,
                cmd("XADD")
                    .arg(&key)
                    .arg("MAXLEN")
                    .arg("~")
                    .arg(OPENINGS_KEPT)
                    .arg("*")
                    .arg("o")
                    .arg(json),
            )
            .await?;
        id.parse().map_err(|e| corrupt(doing, &key, e))
    }

    async fn openings_head(&self, bay: &BayId) -> Result<EntryId, StoreError> {
        let doing = "reading the openings head";
        self.stream_head(doing, &BayKeys::new(bay).openings(), "o")
            .await
    }

    async fn read_openings(
        &self,
        bay: &BayId,
        after: EntryId,
        max: usize,
        block: Option<Duration>,
    ) -> Result<Vec<Opening>, StoreError> {
        let doing = "reading session openings";
        let key = BayKeys::new(bay).openings();
        let read = || async {
            let reply: Value = self
                .query(
                    doing,
                    &key,
                    cmd("XRANGE")
                        .arg(&key)
                        .arg(format!("({after}"))
                        .arg("+")
                        .arg("COUNT")
                        .arg(max.clamp(1, MAX_COUNT)),
                )
                .await?;
            stream_entries(doing, &key, &reply, "o")?
                .into_iter()
                .map(|(id, raw)| {
                    let stored: StoredOpening = decode(doing, &key, raw)?;
                    Ok(Opening {
                        id,
                        token: stored.token,
                        session: stored.session,
                    })
                })
                .collect::<Result<Vec<_>, StoreError>>()
        };
        let first = read().await?;
        match block.filter(|b| !b.is_zero()) {
            Some(block) if first.is_empty() => {
                if self.wait_for_entry(&key, after, block).await? {
                    read().await
                } else {
                    Ok(first)
                }
            }
            _ => Ok(first),
        }
    }
}
