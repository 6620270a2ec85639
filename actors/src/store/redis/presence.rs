//! Activity presence records: the Redis engine's [`PresenceStore`].

use super::*;
use crate::store::PresenceStore;

#[async_trait]
impl PresenceStore for RedisStore {
    async fn set_presence(
        &self,
        bay: &BayId,
        node: &str,
        entries: &[ParticipantPresence],
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let doing = "recording presence";
        let key = BayKeys::new(bay).presence();
        let until = Utc::now().timestamp_millis() + ttl.as_millis() as i64;
        let now = crate::store::now_ms();
        let value = encode(
            doing,
            &key,
            &Presence {
                until,
                online: entries
                    .iter()
                    .filter(|e| e.present_at(now))
                    .map(|e| e.participant.clone())
                    .collect(),
                entries: Some(entries.to_vec()),
            },
        )?;
        let _: i64 = self
            .query(doing, &key, cmd("HSET").arg(&key).arg(node).arg(value))
            .await?;
        Ok(())
    }

    async fn presence_records(&self, bay: &BayId) -> Result<Vec<ParticipantPresence>, StoreError> {
        let doing = "reading presence";
        let key = BayKeys::new(bay).presence();
        let raw: Vec<(String, Vec<u8>)> = self.query(doing, &key, cmd("HGETALL").arg(&key)).await?;
        let now = Utc::now().timestamp_millis();
        let mut out = Vec::new();
        let mut expired = Vec::new();
        for (node, value) in raw {
            let p: Presence = decode(doing, &key, &value)?;
            if p.until <= now {
                expired.push(node);
                continue;
            }
            match p.entries {
                Some(entries) => out.extend(entries),
                None => out.extend(p.online.into_iter().map(|participant| ParticipantPresence {
                    session: true,
                    ..ParticipantPresence::new(participant)
                })),
            }
        }
        // Node ids are new at every start: drop the records of nodes gone
        // for good, so the hash does not grow with every restart.
        if !expired.is_empty() {
            let _: i64 = self
                .query(doing, &key, cmd("HDEL").arg(&key).arg(&expired))
                .await?;
        }
        Ok(out)
    }

    async fn published_presence(
        &self,
        bay: &BayId,
    ) -> Result<Vec<(ParticipantId, PresenceState)>, StoreError> {
        let doing = "reading published presence";
        let key = BayKeys::new(bay).presence_states();
        let raw: Vec<(String, String)> = self.query(doing, &key, cmd("HGETALL").arg(&key)).await?;
        let mut out = raw
            .into_iter()
            .map(|(p, state)| {
                let state = PresenceState::parse(&state)
                    .ok_or_else(|| corrupt(doing, &key, format!("unknown state {state:?}")))?;
                Ok((ParticipantId(p), state))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        out.sort();
        Ok(out)
    }

    async fn publish_presence(
        &self,
        bay: &BayId,
        changes: &[PresenceChange],
    ) -> Result<Published, StoreError> {
        if changes.is_empty() {
            return Ok(Published::Logged(Vec::new()));
        }
        let doing = "publishing presence";
        let k = BayKeys::new(bay);
        let (log, epoch, meta, rosters, states) = (
            k.log(),
            k.epoch(),
            k.log_meta(),
            k.rosters(),
            k.presence_states(),
        );
        let mut args = vec![epoch_candidate(), self.window_ms(), self.max_entries()];
        for c in changes {
            args.push(c.participant.as_str().to_owned());
            args.push(c.from.as_str().to_owned());
            args.push(c.to.as_str().to_owned());
            args.push(encode(
                doing,
                &log,
                &LogEvent::Presence {
                    participant: c.participant.clone(),
                    state: c.to,
                    at: c.at,
                },
            )?);
        }
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let reply = self
            .invoke_status(
                doing,
                &scripts::PUBLISH_PRESENCE,
                &[&log, &epoch, &meta, &rosters, &states],
                &argv,
            )
            .await?;
        match status(doing, &log, &reply)? {
            ScriptStatus::Ok => reply[1..]
                .iter()
                .map(|id| entry_id(doing, &log, id))
                .collect::<Result<Vec<_>, _>>()
                .map(Published::Logged),
            ScriptStatus::Conflict => Ok(Published::Conflict),
            other => Err(corrupt(doing, &log, format!("script said {other:?}"))),
        }
    }
}
