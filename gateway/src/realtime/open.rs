//! Opening a session for a transport: the gateway's side of
//! [`switchboard_actors::open`], which attaches before replaying and
//! projects the replay. Here: the caller and the node's state go in, and
//! what goes wrong comes back as an [`ApiError`] (its HTTP answer or close
//! code). Also the live-delivery metrics every transport records.

use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;
use std::time::Duration;
pub use switchboard_actors::open::{
    live_events, project, OpenFailure, Opened, PageLimit, ReplayPage, ReplayRest, Replayed, Resume,
};
use switchboard_actors::open::{Node, OpenError, OpenRequest};
use switchboard_actors::session::{SessionCursor, SessionHandle};
use switchboard_actors::store::log::{LogEvent, LogRecord};
use switchboard_protocol::cursor::LogPosition;
use switchboard_protocol::error::ErrorCode;
use switchboard_protocol::ids::SessionId;

impl From<OpenError> for ApiError {
    fn from(err: OpenError) -> Self {
        match err {
            OpenError::Store(e) => e.into(),
            OpenError::FeedUnreachable(e) => e.into(),
            OpenError::NotReady => ApiError::new(
                ErrorCode::StoreUnavailable,
                "the store is unavailable; retry later",
            )
            .retry_after(Duration::from_secs(1)),
            OpenError::ShuttingDown => {
                ApiError::new(ErrorCode::Unavailable, "the node is shutting down")
            }
        }
    }
}

/// Opens a session for `caller` (see [`switchboard_actors::open::open_session`]).
/// `resume` is `None` for "start at now". The first page of the replay
/// holds at most `limit`; [`continue_replay`] reads the rest.
///
/// # Errors
///
/// [`OpenFailure`]: an expired cursor, a newer connection of the token, a
/// credential revoked meanwhile, or store / feed trouble
/// ([`OpenFailure::Failed`]; `ApiError::from` gives its answer: 503 with
/// `Retry-After` while the feed cannot load its index).
pub async fn open_session(
    state: AppState,
    caller: Caller,
    session: SessionId,
    handle: SessionHandle,
    resume: Option<LogPosition>,
    limit: PageLimit,
) -> Result<Opened, OpenFailure> {
    let req = OpenRequest {
        principal: caller.principal,
        token_hash: caller.token_hash,
        session,
        handle,
        resume,
        limit,
    };
    switchboard_actors::open::open_session(node(&state), req).await
}

/// The page size of a streaming transport's replay (`/ws`, `/events`):
/// about `limits.max_outbound_queue_bytes` of events, the most a live
/// session may have queued too.
pub fn stream_page(state: &AppState) -> PageLimit {
    PageLimit::bytes(state.settings.limits.max_outbound_queue_bytes)
}

/// Reads the next page of a streaming transport's replay (see
/// [`switchboard_actors::open::continue_replay`] and [`stream_page`]).
///
/// # Errors
///
/// [`OpenFailure::Expired`] when the log no longer reaches the replay's
/// position, [`OpenFailure::Failed`] for store trouble.
pub async fn continue_replay(
    state: AppState,
    rest: ReplayRest,
    cursor: SessionCursor,
) -> Result<ReplayPage, OpenFailure> {
    let limit = stream_page(&state);
    switchboard_actors::open::continue_replay(node(&state), rest, cursor, limit).await
}

fn node(state: &AppState) -> Node<'_> {
    Node {
        store: &state.store,
        registry: &state.registry,
        replay_slots: &state.replay_slots,
    }
}

/// The delivery metrics of one transport, looked up once: a labelled
/// `counter!` / `histogram!` call hashes its key and searches the
/// recorder's registry, which per delivery would cost more than the
/// update itself. Looked up on first use, after `serve` installed the
/// recorder (a global the process sets once).
struct DeliveryMetrics {
    delivered: metrics::Counter,
    latency: metrics::Histogram,
}

fn delivery_metrics(transport: crate::connections::Transport) -> &'static DeliveryMetrics {
    use crate::connections::Transport;
    static BY_TRANSPORT: std::sync::OnceLock<[DeliveryMetrics; 3]> = std::sync::OnceLock::new();
    let all = BY_TRANSPORT.get_or_init(|| {
        [Transport::Ws, Transport::Updates, Transport::Sse].map(|t| DeliveryMetrics {
            delivered: metrics::counter!(crate::metrics::EVENTS_DELIVERED, "transport" => t.label()),
            latency: metrics::histogram!(crate::metrics::DELIVERY_SECONDS, "transport" => t.label()),
        })
    });
    match transport {
        Transport::Ws => &all[0],
        Transport::Updates => &all[1],
        Transport::Sse => &all[2],
    }
}

/// Records delivery metrics for the live records a session is about to
/// write, once per batch: `switchboard_events_delivered_total` grows by
/// the batch's events, and the publish-to-deliver latency histogram gets
/// one sample, the age of the batch's oldest message (`createdAt` → now;
/// the batch's worst). Replayed events are not recorded: their age is the
/// client's absence, not the gateway's latency.
pub fn observe_live_delivery(
    records: &[std::sync::Arc<LogRecord>],
    cursor: &SessionCursor,
    transport: crate::connections::Transport,
) {
    let mut delivered = 0u64;
    let mut oldest = None;
    for r in records.iter().filter(|r| cursor.is_new(r.id)) {
        match &r.event {
            LogEvent::Message { message, .. } => {
                delivered += 1;
                oldest = Some(
                    oldest.map_or(message.created_at, |o: chrono::DateTime<chrono::Utc>| {
                        o.min(message.created_at)
                    }),
                );
            }
            LogEvent::Change { .. }
            | LogEvent::Presence { .. }
            | LogEvent::SummaryRequested { .. }
            | LogEvent::ConnectorRequest { .. } => delivered += 1,
            LogEvent::Roster { .. }
            | LogEvent::CredentialRevoked { .. }
            | LogEvent::Suspension { .. }
            | LogEvent::ConnectorAnswered { .. }
            | LogEvent::WebhookChanged { .. }
            | LogEvent::Canary { .. } => {}
        }
    }
    if delivered == 0 {
        return;
    }
    let metrics = delivery_metrics(transport);
    metrics.delivered.increment(delivered);
    if let Some(created) = oldest {
        let age = (chrono::Utc::now() - created).to_std().unwrap_or_default();
        metrics.latency.record(age.as_secs_f64());
    }
}

/// Runs `open` unless `gone` (the caller leaving: its request or response
/// body dropped) finishes first; `None` then, and `open` is dropped with
/// the work it was doing. Under a reconnect storm a client that timed out
/// must not leave an opening running for nobody, holding its admission
/// and replay slots while its retry queues behind it.
pub async fn unless_gone<T>(
    open: impl std::future::Future<Output = T>,
    gone: impl std::future::Future,
) -> Option<T> {
    let open = std::pin::pin!(open);
    let gone = std::pin::pin!(gone);
    match futures_util::future::select(open, gone).await {
        futures_util::future::Either::Left((res, _)) => Some(res),
        futures_util::future::Either::Right(_) => None,
    }
}
