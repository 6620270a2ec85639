//! Activity presence records: the memory engine's [`PresenceStore`].

use super::log::log_of;
use super::{now_ms, BayState, MemoryStore};
use crate::store::log::LogEvent;
use crate::store::{ParticipantPresence, PresenceChange, PresenceStore, Published, StoreError};
use async_trait::async_trait;
use std::time::Duration;
use switchboard_protocol::ids::{BayId, ParticipantId};
use switchboard_protocol::presence::PresenceState;

/// Forgets `b`'s expired presence records; an expiry is a change of the
/// records, so it moves the version.
fn expire_records(b: &mut BayState) {
    let now = now_ms();
    let before = b.presence.len();
    b.presence.retain(|_, (_, until)| *until > now);
    if b.presence.len() != before {
        b.presence_version += 1;
    }
}

#[async_trait]
impl PresenceStore for MemoryStore {
    async fn set_presence(
        &self,
        bay: &BayId,
        node: &str,
        entries: Vec<ParticipantPresence>,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let until = now_ms() + ttl.as_millis() as u64;
        let mut st = self.state.lock();
        if let Some(b) = st.bays.get_mut(bay) {
            b.presence.insert(node.into(), (entries, until));
            b.presence_version += 1;
        }
        Ok(())
    }

    async fn presence_records(&self, bay: &BayId) -> Result<Vec<ParticipantPresence>, StoreError> {
        let mut st = self.state.lock();
        let Some(b) = st.bays.get_mut(bay) else {
            return Ok(Vec::new());
        };
        expire_records(b);
        Ok(b.presence
            .iter()
            .flat_map(|(node, (entries, _))| {
                entries.iter().map(|e| ParticipantPresence {
                    node: node.clone(),
                    ..e.clone()
                })
            })
            .collect())
    }

    async fn presence_version(&self, bay: &BayId) -> Result<Option<u64>, StoreError> {
        let mut st = self.state.lock();
        Ok(st.bays.get_mut(bay).map(|b| {
            expire_records(b);
            b.presence_version
        }))
    }

    async fn published_presence(
        &self,
        bay: &BayId,
    ) -> Result<Vec<(ParticipantId, PresenceState)>, StoreError> {
        let st = self.state.lock();
        let mut out: Vec<(ParticipantId, PresenceState)> = st
            .bays
            .get(bay)
            .map(|b| b.published.iter().map(|(p, s)| (p.clone(), *s)).collect())
            .unwrap_or_default();
        out.sort();
        Ok(out)
    }

    async fn publish_presence(
        &self,
        bay: &BayId,
        changes: &[PresenceChange],
    ) -> Result<Published, StoreError> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let Some(b) = st.bays.get_mut(bay) else {
            return Ok(Published::Conflict);
        };
        let current = |p: &ParticipantId| {
            b.published
                .get(p)
                .copied()
                .unwrap_or(PresenceState::Offline)
        };
        if changes.iter().any(|c| current(&c.participant) != c.from) {
            return Ok(Published::Conflict);
        }
        let log = log_of(&mut st.logs, bay);
        let mut ids = Vec::with_capacity(changes.len());
        for c in changes {
            if c.to == PresenceState::Offline {
                b.published.remove(&c.participant);
            } else {
                b.published.insert(c.participant.clone(), c.to);
            }
            ids.push(log.append(
                LogEvent::Presence {
                    participant: c.participant.clone(),
                    state: c.to,
                    at: c.at,
                },
                &self.limits,
            ));
        }
        Ok(Published::Logged(ids))
    }
}
