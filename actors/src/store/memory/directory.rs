//! Bays, participants and tokens: the memory engine's [`DirectoryStore`],
//! with the credentials channel kept in process ([`Credentials`]), written
//! under the same lock as the change it announces.

use super::log::log_of;
use super::{now_ms, BayState, MemoryStore};
use crate::model::{Bay, Participant};
use crate::store::log::LogEvent;
use crate::store::{
    Created, CredentialChange, CredentialChangeKind, CredentialsRead, DirectoryStore, Principal,
    StoreError, Suspension, Updated, CREDENTIAL_CHANGES_KEPT,
};
use crate::token::TokenHash;
use async_trait::async_trait;
use std::collections::{HashMap, VecDeque};
use std::time::Duration;
use switchboard_protocol::cursor::EntryId;
use switchboard_protocol::ids::{BayId, ParticipantId};
use tokio::sync::watch;

/// The credentials channel: the newest changes (at most
/// [`CREDENTIAL_CHANGES_KEPT`]), the newest id dropped from it, and the
/// newest id for readers to wait on.
pub(super) struct Credentials {
    changes: VecDeque<CredentialChange>,
    trimmed: EntryId,
    head: watch::Sender<EntryId>,
}

impl Default for Credentials {
    fn default() -> Self {
        Credentials {
            changes: VecDeque::new(),
            trimmed: EntryId::ZERO,
            head: watch::Sender::new(EntryId::ZERO),
        }
    }
}

impl Credentials {
    /// Publishes a change of `bay` (`participant`'s, or the Bay's).
    fn publish(
        &mut self,
        bay: &BayId,
        participant: Option<&ParticipantId>,
        kind: CredentialChangeKind,
    ) {
        let last = *self.head.borrow();
        let now = now_ms();
        let id = if now > last.ms {
            EntryId::new(now, 0)
        } else {
            last.next()
        };
        self.changes.push_back(CredentialChange {
            id,
            bay: bay.clone(),
            participant: participant.cloned(),
            kind,
        });
        if self.changes.len() > CREDENTIAL_CHANGES_KEPT {
            if let Some(gone) = self.changes.pop_front() {
                self.trimmed = gone.id;
            }
        }
        self.head.send_replace(id);
    }

    /// The changes after `after` (at most `max`), `Lost` when some of them
    /// were dropped, or a receiver to wait on when there are none yet.
    fn after(
        &self,
        after: EntryId,
        max: usize,
    ) -> Result<CredentialsRead, watch::Receiver<EntryId>> {
        if after < self.trimmed {
            return Ok(CredentialsRead::Lost);
        }
        let start = self.changes.partition_point(|c| c.id <= after);
        let found: Vec<CredentialChange> =
            self.changes.iter().skip(start).take(max).cloned().collect();
        if found.is_empty() {
            let mut rx = self.head.subscribe();
            rx.mark_unchanged();
            Err(rx)
        } else {
            Ok(CredentialsRead::Changes(found))
        }
    }
}

/// A participant, its current token (`None` once revoked) and whether an
/// operator suspended it.
pub(super) struct ParticipantState {
    participant: Participant,
    token: Option<TokenHash>,
    suspended: bool,
}

#[async_trait]
impl DirectoryStore for MemoryStore {
    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    async fn bays(&self) -> Result<Vec<Bay>, StoreError> {
        let mut out: Vec<Bay> = self
            .state
            .lock()
            .bays
            .values()
            .map(|b| b.bay.clone())
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
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
                presence_version: 0,
                drafts: HashMap::new(),
                published: HashMap::new(),
                budgets: HashMap::new(),
                suspended: false,
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
                suspended: false,
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
            st.credentials
                .publish(bay, Some(participant), CredentialChangeKind::Revoked);
        }
        Ok(Updated::Updated(()))
    }

    async fn set_suspended(
        &self,
        bay: &BayId,
        participant: Option<&ParticipantId>,
        suspended: bool,
    ) -> Result<Updated<bool>, StoreError> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let Some(b) = st.bays.get_mut(bay) else {
            return Ok(Updated::NotFound);
        };
        let flag = match participant {
            None => &mut b.suspended,
            Some(pid) => match b.participants.get_mut(pid) {
                Some(p) => &mut p.suspended,
                None => return Ok(Updated::NotFound),
            },
        };
        if *flag == suspended {
            return Ok(Updated::Updated(false));
        }
        *flag = suspended;
        log_of(&mut st.logs, bay).append(
            LogEvent::Suspension {
                participant: participant.cloned(),
                suspended,
            },
            &self.limits,
        );
        let kind = if suspended {
            CredentialChangeKind::Suspended
        } else {
            CredentialChangeKind::Reinstated
        };
        st.credentials.publish(bay, participant, kind);
        Ok(Updated::Updated(true))
    }

    async fn suspended(
        &self,
        bay: &BayId,
        participant: Option<&ParticipantId>,
    ) -> Result<bool, StoreError> {
        let st = self.state.lock();
        let Some(b) = st.bays.get(bay) else {
            return Ok(false);
        };
        Ok(match participant {
            None => b.suspended,
            Some(pid) => b.participants.get(pid).is_some_and(|p| p.suspended),
        })
    }

    async fn authenticate(&self, token: &TokenHash) -> Result<Option<Principal>, StoreError> {
        let st = self.state.lock();
        let Some((bay, pid)) = st.tokens.get(token) else {
            return Ok(None);
        };
        Ok(st.bays.get(bay).and_then(|b| {
            b.participants.get(pid).map(|p| Principal {
                bay: bay.clone(),
                participant: p.participant.clone(),
                token: token.id(),
                suspended: Suspension::of(p.suspended, b.suspended),
            })
        }))
    }

    async fn credentials_head(&self) -> Result<EntryId, StoreError> {
        Ok(*self.state.lock().credentials.head.borrow())
    }

    async fn read_credentials(
        &self,
        after: EntryId,
        max: usize,
        block: Option<Duration>,
    ) -> Result<CredentialsRead, StoreError> {
        let max = max.max(1);
        let mut rx = match self.state.lock().credentials.after(after, max) {
            Ok(read) => return Ok(read),
            Err(rx) => rx,
        };
        let Some(block) = block else {
            return Ok(CredentialsRead::Changes(Vec::new()));
        };
        let deadline = tokio::time::Instant::now() + block;
        loop {
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {
                    if *rx.borrow_and_update() > after {
                        let read = self.state.lock().credentials.after(after, max);
                        return Ok(read.unwrap_or(CredentialsRead::Changes(Vec::new())));
                    }
                }
                Ok(Err(_)) | Err(_) => return Ok(CredentialsRead::Changes(Vec::new())),
            }
        }
    }
}
