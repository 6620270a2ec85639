//! Bays, participants and tokens: the memory engine's [`DirectoryStore`].

use super::log::log_of;
use super::{BayState, MemoryStore};
use crate::model::{Bay, Participant};
use crate::store::log::LogEvent;
use crate::store::{Created, DirectoryStore, Principal, StoreError, Updated};
use crate::token::TokenHash;
use async_trait::async_trait;
use std::collections::HashMap;
use switchboard_protocol::ids::{BayId, ParticipantId};

/// A participant and its current token (`None` once revoked).
pub(super) struct ParticipantState {
    participant: Participant,
    token: Option<TokenHash>,
}

#[async_trait]
impl DirectoryStore for MemoryStore {
    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    async fn create_bay(&self, bay: Bay) -> Result<Created<Bay>, StoreError> {
        let mut st = self.state.lock();
        if st.bays.contains_key(&bay.id) {
            return Ok(Created::AlreadyExists);
        }
        st.bays.insert(
            bay.id.clone(),
            BayState {
                bay: bay.clone(),
                participants: HashMap::new(),
                conversations: HashMap::new(),
                polls: HashMap::new(),
                idempotency: HashMap::new(),
                webhooks: HashMap::new(),
                webhook_status: HashMap::new(),
                presence: HashMap::new(),
                drafts: HashMap::new(),
                published: HashMap::new(),
            },
        );
        Ok(Created::Created(bay))
    }

    async fn bay(&self, bay: &BayId) -> Result<Option<Bay>, StoreError> {
        Ok(self.state.lock().bays.get(bay).map(|b| b.bay.clone()))
    }

    async fn create_participant(
        &self,
        bay: &BayId,
        participant: Participant,
        token: TokenHash,
    ) -> Result<Created<Participant>, StoreError> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let Some(b) = st.bays.get_mut(bay) else {
            return Ok(Created::AlreadyExists);
        };
        if b.participants.contains_key(&participant.id) || st.tokens.contains_key(&token) {
            return Ok(Created::AlreadyExists);
        }
        st.tokens
            .insert(token.clone(), (bay.clone(), participant.id.clone()));
        b.participants.insert(
            participant.id.clone(),
            ParticipantState {
                participant: participant.clone(),
                token: Some(token),
            },
        );
        Ok(Created::Created(participant))
    }

    async fn participant(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<Option<Participant>, StoreError> {
        Ok(self
            .state
            .lock()
            .bays
            .get(bay)
            .and_then(|b| b.participants.get(participant))
            .map(|p| p.participant.clone()))
    }

    async fn participants(&self, bay: &BayId) -> Result<Vec<Participant>, StoreError> {
        let st = self.state.lock();
        let mut out: Vec<Participant> = st
            .bays
            .get(bay)
            .map(|b| {
                b.participants
                    .values()
                    .map(|p| p.participant.clone())
                    .collect()
            })
            .unwrap_or_default();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    async fn participants_in(
        &self,
        bay: &BayId,
        ids: &[ParticipantId],
    ) -> Result<Vec<Participant>, StoreError> {
        let st = self.state.lock();
        Ok(st
            .bays
            .get(bay)
            .map(|b| {
                ids.iter()
                    .filter_map(|id| b.participants.get(id).map(|p| p.participant.clone()))
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn set_token(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        token: Option<TokenHash>,
    ) -> Result<Updated<()>, StoreError> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let Some(b) = st.bays.get_mut(bay) else {
            return Ok(Updated::NotFound);
        };
        let Some(p) = b.participants.get_mut(participant) else {
            return Ok(Updated::NotFound);
        };
        let old = std::mem::replace(&mut p.token, token.clone());
        if let Some(new) = token {
            st.tokens.insert(new, (bay.clone(), participant.clone()));
        }
        if let Some(old) = old {
            st.tokens.remove(&old);
            log_of(&mut st.logs, bay).append(
                LogEvent::CredentialRevoked {
                    participant: participant.clone(),
                    token: old.id(),
                },
                &self.limits,
            );
        }
        Ok(Updated::Updated(()))
    }

    async fn authenticate(&self, token: &TokenHash) -> Result<Option<Principal>, StoreError> {
        let st = self.state.lock();
        let Some((bay, pid)) = st.tokens.get(token) else {
            return Ok(None);
        };
        Ok(st
            .bays
            .get(bay)
            .and_then(|b| b.participants.get(pid))
            .map(|p| Principal {
                bay: bay.clone(),
                participant: p.participant.clone(),
                token: token.id(),
            }))
    }
}
