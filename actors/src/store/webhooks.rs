//! Webhooks: URLs, sealed secrets, delivery positions and statuses.

use super::StoreError;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use switchboard_protocol::cursor::LogPosition;
use switchboard_protocol::ids::{BayId, ParticipantId};

/// A participant's webhook (protocol §11, webhook contract v2).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Webhook {
    /// Where deliveries go: an absolute `https` URL (or `http` when the
    /// node allows it), at most 2,048 characters, no userinfo.
    pub url: String,
    /// The signing secret sealed with the node's webhook key (base64 of
    /// nonce ‖ ciphertext), never the secret itself.
    pub sealed_secret: String,
    /// When it was set (RFC 3339).
    pub set_at: DateTime<Utc>,
}

/// How a participant's webhook deliveries are going (`/me.webhookStatus`).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookStatus {
    /// When the receiver last answered 2xx.
    pub last_delivered_at: Option<DateTime<Utc>>,
    /// The last failure, as text (`"HTTP 500"`, `"timed out"`, …).
    pub last_error: Option<String>,
    /// Since when deliveries have failed without a success; `None` when
    /// the last attempt succeeded.
    pub failing_since: Option<DateTime<Utc>>,
}

/// Webhooks (protocol §11, webhook contract v2): each participant's URL and
/// sealed secret, its delivery position in the log and its delivery status.
///
/// # Errors
///
/// Every method fails with [`StoreError::Unavailable`] when the backing
/// service cannot be reached and [`StoreError::Corrupt`] when a stored record
/// does not decode.
#[async_trait]
pub trait WebhookStore: Send + Sync + 'static {
    /// Sets (`Some`) or removes (`None`) `participant`'s webhook. Setting
    /// also sets its delivery position to `from` (deliveries start after
    /// it) and clears its status; removing forgets the webhook and its
    /// position but keeps the last status (why it stopped).
    async fn set_webhook(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        webhook: Option<(Webhook, LogPosition)>,
    ) -> Result<(), StoreError>;
    /// `participant`'s webhook, if set.
    async fn webhook(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<Option<Webhook>, StoreError>;
    /// Every participant with a webhook, in every Bay: what delivery
    /// workers are started for.
    async fn webhook_owners(&self) -> Result<Vec<(BayId, ParticipantId)>, StoreError>;
    /// Where `participant`'s deliveries stand: the log position after the
    /// last record handled (delivered or given up).
    async fn webhook_position(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<Option<LogPosition>, StoreError>;
    /// Moves the delivery position of the webhook `of`; a no-op when the
    /// participant's webhook is no longer `of` (removed or replaced: the
    /// new one starts from its own position).
    async fn set_webhook_position(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        of: &Webhook,
        position: &LogPosition,
    ) -> Result<(), StoreError>;
    /// The delivery status (default when none was recorded), kept after
    /// the webhook is removed.
    async fn webhook_status(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<WebhookStatus, StoreError>;
    /// Records the delivery status of the webhook `of`; a no-op when the
    /// participant's webhook is no longer `of`.
    async fn set_webhook_status(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        of: &Webhook,
        status: &WebhookStatus,
    ) -> Result<(), StoreError>;
    /// Removes the webhook `of` (its receiver answered 410), recording
    /// `status`; a no-op when the participant's webhook is no longer `of`,
    /// so a late 410 from a replaced URL never removes its successor.
    async fn disable_webhook(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        of: &Webhook,
        status: &WebhookStatus,
    ) -> Result<(), StoreError>;
}
