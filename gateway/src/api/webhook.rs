//! Setting and removing a webhook (protocol §11: `POST /webhook`,
//! `DELETE /webhook`), for the agent itself and through the admin API.
//! Deliveries are `webhooks::dispatcher`'s; their contract is
//! docs/webhooks.md.

use crate::api::body::Object;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;
use crate::webhooks::destination::{check_url, resolve};
use crate::webhooks::signing::new_secret;
use actix_web::{delete, post, web, HttpResponse};
use serde::{Deserialize, Serialize};
use switchboard_actors::store::Webhook;
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use switchboard_protocol::ids::{BayId, ParticipantId};
use switchboard_protocol::model::ParticipantKind;
use utoipa::ToSchema;

/// Registers the agent routes under `/api/agent-api`.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(set_webhook).service(remove_webhook);
}

/// Body of `POST /webhook`.
#[derive(Deserialize, ToSchema)]
#[schema(examples(json!({"url": "https://agents.example.com/baychat"})))]
pub(crate) struct SetWebhook {
    /// Absolute `https` URL (`http` only where the node allows it), at
    /// most 2,048 characters, no userinfo; it must not resolve to a
    /// loopback, private, link-local or metadata address.
    pub(crate) url: String,
}

/// Answer of setting a webhook: the signing secret, shown this once.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WebhookSet {
    /// Where deliveries go.
    url: String,
    /// `whsec_…`: verify each delivery's `webhook-signature` with it
    /// (Standard Webhooks). Shown only here; setting the webhook again
    /// rotates it.
    secret: String,
    /// When it was set, RFC 3339 UTC.
    set_at: String,
}

/// Checks `url`, mints a secret and stores the webhook for `participant`,
/// delivering from the log's head on: the shared path of the agent and
/// admin routes.
pub(crate) async fn install(
    state: &AppState,
    bay: &BayId,
    participant: &ParticipantId,
    url: &str,
) -> Result<HttpResponse, ApiError> {
    let settings = &state.settings.webhooks;
    let checked = check_url(url, settings.allow_http)
        .map_err(|e| ApiError::new(e.error_code(), e.to_string()))?;
    resolve(&checked, settings.allow_private_destinations)
        .await
        .map_err(|e| ApiError::new(e.error_code(), e.to_string()))?;
    let secret = new_secret();
    let set_at = chrono::Utc::now();
    let head = state.store.log_head(bay).await?;
    let webhook = Webhook {
        url: checked.to_string(),
        sealed_secret: state.webhooks.seal(&secret),
        set_at,
    };
    state
        .store
        .set_webhook(bay, participant, Some((webhook.clone(), head)))
        .await?;
    Ok(HttpResponse::Ok().json(WebhookSet {
        url: webhook.url,
        secret,
        set_at: set_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    }))
}

fn agents_only(caller: &Caller) -> Result<(), ApiError> {
    if caller.principal.participant.kind != ParticipantKind::Agent {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "webhooks are for agents; a user token cannot set one",
        ));
    }
    Ok(())
}

/// `POST /webhook` `{url}` → 200 `{url, secret, setAt}`.
#[utoipa::path(
    operation_id = "setWebhook",
    tag = "agent",
    summary = "Set (or replace) your webhook",
    description = "Every event you would receive over `/ws` from now on is POSTed to `url` (protocol §11, webhook contract v2; see docs/webhooks.md), signed per Standard Webhooks with the `secret` returned here, shown this once. Setting it again replaces the URL, rotates the secret and delivers from now on. Agents only.",
    request_body = SetWebhook,
    responses(
        (status = 200, description = "Set; the signing secret is shown only here", body = WebhookSet),
        (status = 400, description = "INVALID_JSON, INVALID_WEBHOOK_URL (not an absolute https URL, userinfo, longer than 2,048, or the host does not resolve) or WEBHOOK_DESTINATION_FORBIDDEN (resolves to a loopback, private, link-local or metadata address)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: a user token", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE", body = ErrorBody),
        (status = 415, description = "UNSUPPORTED_MEDIA_TYPE", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[post("/webhook")]
async fn set_webhook(
    state: web::Data<AppState>,
    caller: Caller,
    body: Object<SetWebhook>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal).await?;
    agents_only(&caller)?;
    let p = &caller.principal;
    install(&state, &p.bay, &p.participant.id, &body.url).await
}

/// `DELETE /webhook` → 204.
#[utoipa::path(
    operation_id = "removeWebhook",
    tag = "agent",
    summary = "Remove your webhook",
    description = "Deliveries stop (one already in flight may still arrive). Removing when none is set also answers 204.",
    responses(
        (status = 204, description = "Removed"),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: a user token", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[delete("/webhook")]
async fn remove_webhook(
    state: web::Data<AppState>,
    caller: Caller,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal).await?;
    agents_only(&caller)?;
    let p = &caller.principal;
    state
        .store
        .set_webhook(&p.bay, &p.participant.id, None)
        .await?;
    Ok(HttpResponse::NoContent().finish())
}
