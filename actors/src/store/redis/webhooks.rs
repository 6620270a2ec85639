//! Webhooks: URLs, positions, statuses: the Redis engine's
//! [`WebhookStore`]. A webhook's position and status are only written
//! while it is still the participant's (`webhooks/set_if.lua`,
//! `webhooks/disable.lua`); the cross-Bay index of owners is written
//! after the Bay's own keys. Every change of a webhook is followed by a
//! [`LogEvent::WebhookChanged`] control entry in the Bay's log, which
//! wakes its idle delivery worker on whichever node it runs.

use super::codec::{corrupt, decode, encode};
use super::keys::{self, BayKeys};
use super::lua::{lua_params, LuaScript};
use super::RedisStore;
use crate::store::log::LogEvent;
use crate::store::{LogStore, StoreError, Webhook, WebhookStatus, WebhookStore};
use ::redis::cmd;
use async_trait::async_trait;
use std::sync::LazyLock;
use switchboard_protocol::cursor::LogPosition;
use switchboard_protocol::ids::{BayId, ParticipantId};

/// `set_webhook`'s script (KEYS: [`WebhookKeys`]; ARGV: [`SetWebhookArgs`]).
static SET_WEBHOOK: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("webhooks/set.lua")]));

/// Writes a position or status of a webhook that is still the
/// participant's (KEYS: [`SetIfWebhookKeys`]; ARGV: [`SetIfWebhookArgs`]).
static SET_IF_WEBHOOK: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("webhooks/set_if.lua")]));

/// `disable_webhook`'s script (KEYS: [`WebhookKeys`]; ARGV:
/// [`DisableWebhookArgs`]).
static DISABLE_WEBHOOK: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("webhooks/disable.lua")]));

lua_params! {
    /// KEYS of `webhooks/set.lua` and `webhooks/disable.lua`, each the
    /// [`BayKeys`] key of the same name.
    struct WebhookKeys of String { webhooks, webhook_positions, webhook_status }
}

impl WebhookKeys {
    fn new(bay: &BayId) -> Self {
        let k = BayKeys::new(bay);
        WebhookKeys {
            webhooks: k.webhooks(),
            webhook_positions: k.webhook_positions(),
            webhook_status: k.webhook_status(),
        }
    }
}

lua_params! {
    /// ARGV of `webhooks/set.lua`: the owner, the webhook's JSON (`''`
    /// removes it) and the delivery position to start at.
    struct SetWebhookArgs<'a> of &'a str { participant_id, webhook, position }
}

lua_params! {
    /// KEYS of `webhooks/set_if.lua`: the webhooks hash and the hash to
    /// write (positions or status).
    struct SetIfWebhookKeys<'a> of &'a str { webhooks, target }
}

lua_params! {
    /// ARGV of `webhooks/set_if.lua`: the owner, the JSON of the webhook
    /// the writer works for, and the value to write.
    struct SetIfWebhookArgs<'a> of &'a str { participant_id, webhook, value }
}

lua_params! {
    /// ARGV of `webhooks/disable.lua`: the owner, the JSON of the webhook
    /// to remove and the status JSON to record.
    struct DisableWebhookArgs<'a> of &'a str { participant_id, webhook, status }
}

impl RedisStore {
    /// Writes `value` under `participant` in the hash `target` (the
    /// positions or the statuses) if the participant's webhook is still
    /// `of`, in one script: a worker of a removed or replaced webhook never
    /// moves its successor's position or status.
    async fn set_if_webhook(
        &self,
        doing: &'static str,
        bay: &BayId,
        participant: &ParticipantId,
        of: &Webhook,
        target: &str,
        value: &str,
    ) -> Result<(), StoreError> {
        let hooks = BayKeys::new(bay).webhooks();
        let keys = SetIfWebhookKeys {
            webhooks: &hooks,
            target,
        };
        let args = SetIfWebhookArgs {
            participant_id: participant.as_str(),
            webhook: &encode(doing, &hooks, of)?,
            value,
        };
        let _: i64 = self
            .invoke(doing, &SET_IF_WEBHOOK, &keys.in_order(), &args.in_order())
            .await?;
        Ok(())
    }

    /// Logs that `participant`'s webhook changed, after the change itself:
    /// its delivery worker wakes on the entry (a crash in between leaves
    /// the worker to notice at its next periodic check).
    async fn webhook_changed(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<(), StoreError> {
        let event = LogEvent::WebhookChanged {
            participant: participant.clone(),
        };
        self.append_control(bay, event).await.map(drop)
    }
}

#[async_trait]
impl WebhookStore for RedisStore {
    async fn set_webhook(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        webhook: Option<(Webhook, LogPosition)>,
    ) -> Result<(), StoreError> {
        let doing = "setting a webhook";
        let keys = WebhookKeys::new(bay);
        let owner = format!("{bay} {participant}");
        let owners = keys::webhook_owners();
        let (json, from) = match &webhook {
            Some((hook, from)) => (encode(doing, &keys.webhooks, hook)?, from.encode()),
            None => (String::new(), String::new()),
        };
        let args = SetWebhookArgs {
            participant_id: participant.as_str(),
            webhook: &json,
            position: &from,
        };
        let _: i64 = self
            .invoke(doing, &SET_WEBHOOK, &keys.in_order(), &args.in_order())
            .await?;
        self.webhook_changed(bay, participant).await?;
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
        let target = BayKeys::new(bay).webhook_positions();
        self.set_if_webhook(doing, bay, participant, of, &target, &position.encode())
            .await
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
        let target = BayKeys::new(bay).webhook_status();
        let value = encode(doing, &target, status)?;
        self.set_if_webhook(doing, bay, participant, of, &target, &value)
            .await
    }

    async fn disable_webhook(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        of: &Webhook,
        status: &WebhookStatus,
    ) -> Result<(), StoreError> {
        let doing = "disabling a webhook";
        let keys = WebhookKeys::new(bay);
        let args = DisableWebhookArgs {
            participant_id: participant.as_str(),
            webhook: &encode(doing, &keys.webhooks, of)?,
            status: &encode(doing, &keys.webhook_status, status)?,
        };
        let removed: i64 = self
            .invoke(doing, &DISABLE_WEBHOOK, &keys.in_order(), &args.in_order())
            .await?;
        if removed == 1 {
            self.webhook_changed(bay, participant).await?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::redis::lua::bound;

    #[test]
    fn scripts_bind_their_keys_and_args_in_order() {
        let set = include_str!("webhooks/set.lua");
        assert_eq!(bound(set, "KEYS"), WebhookKeys::NAMES);
        assert_eq!(bound(set, "ARGV"), SetWebhookArgs::NAMES);
        let set_if = include_str!("webhooks/set_if.lua");
        assert_eq!(bound(set_if, "KEYS"), SetIfWebhookKeys::NAMES);
        assert_eq!(bound(set_if, "ARGV"), SetIfWebhookArgs::NAMES);
        let disable = include_str!("webhooks/disable.lua");
        assert_eq!(bound(disable, "KEYS"), WebhookKeys::NAMES);
        assert_eq!(bound(disable, "ARGV"), DisableWebhookArgs::NAMES);
    }
}
