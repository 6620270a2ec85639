//! Webhooks: URLs, positions, statuses: the Redis engine's [`WebhookStore`].

use super::*;
use crate::store::WebhookStore;

#[async_trait]
impl WebhookStore for RedisStore {
    async fn set_webhook(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        webhook: Option<(Webhook, LogPosition)>,
    ) -> Result<(), StoreError> {
        let doing = "setting a webhook";
        let k = BayKeys::new(bay);
        let (hooks, positions, status) = (k.webhooks(), k.webhook_positions(), k.webhook_status());
        let owner = format!("{bay} {participant}");
        let owners = keys::webhook_owners();
        let (json, from) = match &webhook {
            Some((hook, from)) => (encode(doing, &hooks, hook)?, from.encode()),
            None => (String::new(), String::new()),
        };
        let _: i64 = self
            .invoke(
                doing,
                &scripts::SET_WEBHOOK,
                &[&hooks, &positions, &status],
                &[participant.as_str(), &json, &from],
            )
            .await?;
        // The cross-Bay index lives in another slot: written after the
        // Bay's own keys, and readers check the Bay's hash.
        let index = match webhook {
            Some(_) => cmd("SADD"),
            None => cmd("SREM"),
        };
        let _: i64 = self
            .query(doing, &owners, index.clone().arg(&owners).arg(&owner))
            .await?;
        Ok(())
    }

    async fn webhook(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<Option<Webhook>, StoreError> {
        let doing = "reading a webhook";
        let key = BayKeys::new(bay).webhooks();
        let raw: Option<Vec<u8>> = self
            .query(doing, &key, cmd("HGET").arg(&key).arg(participant.as_str()))
            .await?;
        raw.map(|r| decode(doing, &key, &r)).transpose()
    }

    async fn webhook_owners(&self) -> Result<Vec<(BayId, ParticipantId)>, StoreError> {
        let doing = "listing webhooks";
        let key = keys::webhook_owners();
        let raw: Vec<String> = self.query(doing, &key, cmd("SMEMBERS").arg(&key)).await?;
        Ok(raw
            .iter()
            .filter_map(|o| o.split_once(' '))
            .map(|(b, p)| (BayId(b.to_owned()), ParticipantId(p.to_owned())))
            .collect())
    }

    async fn webhook_position(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<Option<LogPosition>, StoreError> {
        let doing = "reading a webhook position";
        let key = BayKeys::new(bay).webhook_positions();
        let raw: Option<String> = self
            .query(doing, &key, cmd("HGET").arg(&key).arg(participant.as_str()))
            .await?;
        raw.map(|r| LogPosition::decode(&r).map_err(|e| corrupt(doing, &key, e)))
            .transpose()
    }

    async fn set_webhook_position(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        of: &Webhook,
        position: &LogPosition,
    ) -> Result<(), StoreError> {
        let doing = "moving a webhook position";
        let k = BayKeys::new(bay);
        let (hooks, positions) = (k.webhooks(), k.webhook_positions());
        let _: i64 = self
            .invoke(
                doing,
                &scripts::SET_IF_WEBHOOK,
                &[&hooks, &positions],
                &[
                    participant.as_str(),
                    &encode(doing, &hooks, of)?,
                    &position.encode(),
                ],
            )
            .await?;
        Ok(())
    }

    async fn webhook_status(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<WebhookStatus, StoreError> {
        let doing = "reading a webhook status";
        let key = BayKeys::new(bay).webhook_status();
        let raw: Option<Vec<u8>> = self
            .query(doing, &key, cmd("HGET").arg(&key).arg(participant.as_str()))
            .await?;
        Ok(raw
            .map(|r| decode(doing, &key, &r))
            .transpose()?
            .unwrap_or_default())
    }

    async fn set_webhook_status(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        of: &Webhook,
        status: &WebhookStatus,
    ) -> Result<(), StoreError> {
        let doing = "recording a webhook status";
        let k = BayKeys::new(bay);
        let (hooks, key) = (k.webhooks(), k.webhook_status());
        let _: i64 = self
            .invoke(
                doing,
                &scripts::SET_IF_WEBHOOK,
                &[&hooks, &key],
                &[
                    participant.as_str(),
                    &encode(doing, &hooks, of)?,
                    &encode(doing, &key, status)?,
                ],
            )
            .await?;
        Ok(())
    }

    async fn disable_webhook(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        of: &Webhook,
        status: &WebhookStatus,
    ) -> Result<(), StoreError> {
        let doing = "disabling a webhook";
        let k = BayKeys::new(bay);
        let (hooks, positions, key) = (k.webhooks(), k.webhook_positions(), k.webhook_status());
        let removed: i64 = self
            .invoke(
                doing,
                &scripts::DISABLE_WEBHOOK,
                &[&hooks, &positions, &key],
                &[
                    participant.as_str(),
                    &encode(doing, &hooks, of)?,
                    &encode(doing, &key, status)?,
                ],
            )
            .await?;
        if removed == 1 {
            let owners = keys::webhook_owners();
            let _: i64 = self
                .query(
                    doing,
                    &owners,
                    cmd("SREM").arg(&owners).arg(format!("{bay} {participant}")),
                )
                .await?;
        }
        Ok(())
    }
}
