//! Webhooks: URLs, positions, statuses: the memory engine's [`WebhookStore`].
//! Every change of a webhook is followed by a
//! [`LogEvent::WebhookChanged`] in the Bay's log, which wakes its idle
//! delivery worker.

use super::log::log_of;
use super::MemoryStore;
use crate::store::log::LogEvent;
use crate::store::{StoreError, Webhook, WebhookStatus, WebhookStore};
use async_trait::async_trait;
use switchboard_protocol::cursor::LogPosition;
use switchboard_protocol::ids::{BayId, ParticipantId};

/// A webhook with where its deliveries stand.
pub(super) struct WebhookState {
    webhook: Webhook,
    position: LogPosition,
}

#[async_trait]
impl WebhookStore for MemoryStore {
    async fn set_webhook(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        webhook: Option<(Webhook, LogPosition)>,
    ) -> Result<(), StoreError> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let Some(b) = st.bays.get_mut(bay) else {
            return Ok(());
        };
        match webhook {
            Some((webhook, position)) => {
                b.webhooks
                    .insert(participant.clone(), WebhookState { webhook, position });
                b.webhook_status.remove(participant);
            }
            None => {
                b.webhooks.remove(participant);
            }
        }
        log_of(&mut st.logs, bay).append(
            LogEvent::WebhookChanged {
                participant: participant.clone(),
            },
            &self.limits,
        );
        Ok(())
    }

    async fn webhook(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<Option<Webhook>, StoreError> {
        Ok(self.with_webhook(bay, participant, |w| w.webhook.clone()))
    }

    async fn webhook_owners(&self) -> Result<Vec<(BayId, ParticipantId)>, StoreError> {
        let st = self.state.lock();
        Ok(st
            .bays
            .iter()
            .flat_map(|(bay, b)| b.webhooks.keys().map(|p| (bay.clone(), p.clone())))
            .collect())
    }

    async fn webhook_position(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<Option<LogPosition>, StoreError> {
        Ok(self.with_webhook(bay, participant, |w| w.position.clone()))
    }

    async fn set_webhook_position(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        of: &Webhook,
        position: &LogPosition,
    ) -> Result<(), StoreError> {
        let mut st = self.state.lock();
        if let Some(w) = st
            .bays
            .get_mut(bay)
            .and_then(|b| b.webhooks.get_mut(participant))
            .filter(|w| &w.webhook == of)
        {
            w.position = position.clone();
        }
        Ok(())
    }

    async fn webhook_status(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<WebhookStatus, StoreError> {
        let st = self.state.lock();
        Ok(st
            .bays
            .get(bay)
            .and_then(|b| b.webhook_status.get(participant).cloned())
            .unwrap_or_default())
    }

    async fn set_webhook_status(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        of: &Webhook,
        status: &WebhookStatus,
    ) -> Result<(), StoreError> {
        let mut st = self.state.lock();
        if let Some(b) = st.bays.get_mut(bay) {
            if b.webhooks
                .get(participant)
                .is_some_and(|w| &w.webhook == of)
            {
                b.webhook_status.insert(participant.clone(), status.clone());
            }
        }
        Ok(())
    }

    async fn disable_webhook(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        of: &Webhook,
        status: &WebhookStatus,
    ) -> Result<(), StoreError> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        if let Some(b) = st.bays.get_mut(bay) {
            if b.webhooks
                .get(participant)
                .is_some_and(|w| &w.webhook == of)
            {
                b.webhooks.remove(participant);
                b.webhook_status.insert(participant.clone(), status.clone());
                log_of(&mut st.logs, bay).append(
                    LogEvent::WebhookChanged {
                        participant: participant.clone(),
                    },
                    &self.limits,
                );
            }
        }
        Ok(())
    }
}

impl MemoryStore {
    /// `f` of `participant`'s webhook in `bay`, if it has one.
    fn with_webhook<T>(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        f: impl FnOnce(&WebhookState) -> T,
    ) -> Option<T> {
        let st = self.state.lock();
        st.bays
            .get(bay)
            .and_then(|b| b.webhooks.get(participant))
            .map(f)
    }
}
