//! The operator console's webhook health, under `/api/admin` (behind the
//! admin gate): each agent of a Bay with its webhook, last delivery,
//! last error, failing-since and backlog, as one answer
//! (`GET /bays/{bay}/webhooks`) or live (`GET /bays/{bay}/webhooks/live`,
//! Server-Sent Events).
//!
//! The live stream sends a `webhooks` event (`{webhooks}`, as the plain
//! route answers) at once and again whenever the answer changes. It reads
//! the answer again when something may have changed it: the Bay's feed
//! read new log entries (the backlogs grow), a delivery worker of this
//! node recorded a status ([`Dispatcher::status_changes`]), or
//! [`REFRESH`] passed (a worker on another node delivers for the agent:
//! its statuses reach this node only through the store). Reads are at
//! least [`SPACING`] apart, so a busy Bay costs one read per spacing.
//!
//! [`Dispatcher::status_changes`]: crate::webhooks::dispatcher::Dispatcher::status_changes

use crate::error::ApiError;
use crate::state::AppState;
use actix_web::web::Bytes;
use actix_web::{get, web, HttpResponse};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::convert::Infallible;
use std::time::{Duration, Instant};
use switchboard_actors::feed::WatchHead;
use switchboard_actors::store::log::LogEvent;
use switchboard_actors::store::Replay;
use switchboard_protocol::cursor::EntryId;
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use switchboard_protocol::ids::{BayId, ConversationId, ParticipantId};
use switchboard_protocol::model::ParticipantKind;
use tokio::sync::{broadcast, watch};

/// The most log entries a webhook's backlog count reads; beyond it the
/// answer says `backlogCapped`.
pub const BACKLOG_SCAN: usize = 1000;
/// The live stream reads the statuses again at least this often.
pub const REFRESH: Duration = Duration::from_secs(2);
/// The live stream reads at most once per this long.
pub const SPACING: Duration = Duration::from_millis(250);
/// Between two comment heartbeats when nothing changed.
const HEARTBEAT: Duration = Duration::from_secs(15);

/// Registers the routes (inside the admin scope).
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(webhooks).service(webhooks_live);
}

/// Every agent of `bay` with its webhook health (see [`webhooks`]); 404
/// for an unknown Bay.
pub(crate) async fn webhooks_json(state: &AppState, bay: &BayId) -> Result<Vec<Value>, ApiError> {
    state
        .store
        .bay(bay)
        .await?
        .ok_or_else(ApiError::not_found)?;
    let mut out = Vec::new();
    for agent in state.store.participants(bay).await? {
        if agent.kind != ParticipantKind::Agent {
            continue;
        }
        let hook = state.store.webhook(bay, &agent.id).await?;
        let status = state.store.webhook_status(bay, &agent.id).await?;
        let (backlog, capped) = match &hook {
            Some(_) => backlog(state, bay, &agent.id).await?,
            None => (0, false),
        };
        out.push(json!({
            "agent": agent.id, "name": agent.name,
            "url": hook.as_ref().map(|h| &h.url),
            "setAt": hook.as_ref().map(|h| h.set_at),
            "lastDeliveredAt": status.last_delivered_at,
            "lastError": status.last_error,
            "failingSince": status.failing_since,
            "backlog": backlog, "backlogCapped": capped,
        }));
    }
    Ok(out)
}

/// `GET /bays/{bay}/webhooks` → 200 `{webhooks: [...]}`: every agent of
/// the Bay with its webhook (if any), last delivery, last error,
/// failing-since and backlog (records after its delivery position that
/// are addressed to it, counted up to [`BACKLOG_SCAN`] log entries).
#[utoipa::path(
    operation_id = "adminWebhooks",
    tag = "admin",
    summary = "Webhook health of a Bay's agents",
    params(("bay" = String, Path, description = "Bay id")),
    responses(
        (status = 200, description = "`{webhooks: [{agent, name, url, setAt, lastDeliveredAt, lastError, failingSince, backlog, backlogCapped}]}`", body = serde_json::Value),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown Bay, or the admin API is disabled", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[get("/bays/{bay}/webhooks")]
async fn webhooks(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let bay = BayId(path.into_inner());
    let out = webhooks_json(&state, &bay).await?;
    Ok(HttpResponse::Ok().json(json!({ "webhooks": out })))
}

/// Records after `agent`'s delivery position addressed to it (messages
/// and changes of its conversations), and whether the count stopped at
/// [`BACKLOG_SCAN`] entries.
async fn backlog(
    state: &AppState,
    bay: &BayId,
    agent: &ParticipantId,
) -> Result<(usize, bool), ApiError> {
    let Some(position) = state.store.webhook_position(bay, agent).await? else {
        return Ok((0, false));
    };
    let mine: HashSet<ConversationId> = state
        .store
        .conversations_of(bay, agent)
        .await?
        .into_iter()
        .map(|c| c.id)
        .collect();
    match state
        .store
        .read_log(bay, &position, BACKLOG_SCAN, None)
        .await?
    {
        Replay::Records { records, .. } => {
            let n = records
                .iter()
                .filter(|r| match &r.event {
                    LogEvent::Message { conversation, .. }
                    | LogEvent::Change { conversation, .. } => mine.contains(&conversation.id),
                    _ => false,
                })
                .count();
            Ok((n, records.len() >= BACKLOG_SCAN))
        }
        // Its position left the replay buffer: everything it missed is gone
        // from the log, the worker skips ahead.
        Replay::Expired | Replay::EpochChanged => Ok((0, false)),
    }
}

/// One SSE block.
fn block(name: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

/// What the live stream watches, and what it sent last.
struct Watch {
    state: AppState,
    bay: BayId,
    /// The head of the Bay's feed here; `None` while no feed runs (looked
    /// for again at each refresh).
    head: Option<watch::Receiver<EntryId>>,
    statuses: broadcast::Receiver<BayId>,
    /// The answer sent last (`None` before the first).
    sent: Option<Vec<Value>>,
    /// When the last block (event or heartbeat) went out.
    last_out: Instant,
    /// When the statuses were last read.
    last_read: Option<Instant>,
}

impl Watch {
    async fn watch_head(&self) -> Option<watch::Receiver<EntryId>> {
        self.state
            .registry
            .feed(&self.bay)
            .send(WatchHead)
            .await
            .ok()
    }

    /// Waits until something may have changed the answer. `false` ends
    /// the stream (the node drains).
    async fn wait(&mut self) -> bool {
        let head_moved = async {
            match &mut self.head {
                Some(rx) => rx.changed().await.is_ok(),
                None => std::future::pending().await,
            }
        };
        let bay = &self.bay;
        let status = async {
            loop {
                match self.statuses.recv().await {
                    Ok(b) if b != *bay => continue,
                    // A missed notice may have been this Bay's.
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => return,
                    // The dispatcher is gone (never while the node runs).
                    Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
                }
            }
        };
        tokio::select! {
            moved = head_moved => if !moved { self.head = None },
            _ = status => {}
            _ = tokio::time::sleep(REFRESH) => {
                if self.head.is_none() {
                    self.head = self.watch_head().await;
                }
            }
            _ = self.state.drain_started() => return false,
        }
        true
    }

    /// The next block: the answer when it changed, a heartbeat when
    /// nothing went out for [`HEARTBEAT`]. `None` ends the stream.
    async fn next(&mut self) -> Option<Bytes> {
        loop {
            if self.sent.is_some() && !self.wait().await {
                return None;
            }
            if let Some(at) = self.last_read {
                let since = at.elapsed();
                if since < SPACING {
                    tokio::time::sleep(SPACING - since).await;
                }
            }
            self.last_read = Some(Instant::now());
            match webhooks_json(&self.state, &self.bay).await {
                Ok(now) if self.sent.as_ref() != Some(&now) => {
                    let out = block("webhooks", &json!({ "webhooks": now }));
                    self.sent = Some(now);
                    self.last_out = Instant::now();
                    return Some(out);
                }
                Ok(_) => {}
                // Kept open: the store may come back; the page says why.
                Err(err) => {
                    self.sent.get_or_insert_with(Vec::new);
                    self.last_out = Instant::now();
                    return Some(block("error", &json!({ "message": err.to_string() })));
                }
            }
            if self.last_out.elapsed() >= HEARTBEAT {
                self.last_out = Instant::now();
                return Some(Bytes::from_static(b": heartbeat\n\n"));
            }
        }
    }
}

/// `GET /bays/{bay}/webhooks/live`: see the module docs.
#[utoipa::path(
    operation_id = "adminWebhooksLive",
    tag = "admin",
    summary = "Webhook health of a Bay's agents, live (SSE)",
    description = "A `text/event-stream` of `webhooks` events, each `{webhooks}` as `GET /bays/{bay}/webhooks` answers it: one at once, then one whenever the answer changes (a delivery succeeds or fails, the backlog moves). Send the admin token in the `Authorization` header.",
    params(("bay" = String, Path, description = "Bay id")),
    responses(
        (status = 200, description = "The event stream", content_type = "text/event-stream", body = crate::openapi::schemas::WebhooksLiveEvent),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown Bay, or the admin API is disabled", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE, or UNAVAILABLE while the node drains", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[get("/bays/{bay}/webhooks/live")]
async fn webhooks_live(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    if state.is_draining() {
        return Err(ApiError::new(
            ErrorCode::Unavailable,
            "the node is draining",
        ));
    }
    let bay = BayId(path.into_inner());
    state
        .store
        .bay(&bay)
        .await?
        .ok_or_else(ApiError::not_found)?;
    // Subscribe before the first read: nothing after it goes unnoticed.
    let statuses = state.webhooks.status_changes();
    let mut watch = Watch {
        state: state.get_ref().clone(),
        bay,
        head: None,
        statuses,
        sent: None,
        last_out: Instant::now(),
        last_read: None,
    };
    watch.head = watch.watch_head().await;
    let stream = futures_util::stream::unfold(watch, |mut watch| async move {
        let next = watch.next().await?;
        Some((Ok::<_, Infallible>(next), watch))
    });
    Ok(HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("Cache-Control", "no-store"))
        .insert_header(("X-Accel-Buffering", "no"))
        .streaming(stream))
}
