//! `GET /conversations/{id}/messages/wait`: holds until a message the
//! caller did not send arrives. The wait is registered with the Bay's feed
//! before the history is read, so nothing falls between two calls.

use crate::api::views::RestMessage;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::{get, web, HttpResponse};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use switchboard_actors::feed::WaitForMessage;
use switchboard_actors::model::StoredMessage;
use switchboard_actors::store::log::LogRecord;
use switchboard_protocol::error::{ErrorBody, ErrorCode, WsClose, SESSION_END_HEADER};
use switchboard_protocol::ids::{BayId, ConversationId, MessageId};
use switchboard_protocol::model::MessageState;
use tokio::sync::oneshot;
use utoipa::{IntoParams, ToSchema};

/// Longest `GET …/messages/wait` hold (the agent mailbox's 50 s cap).
pub const MAX_WAIT: Duration = Duration::from_secs(50);
/// How often a wait re-reads the store as well, so even a wait registered
/// while the Bay's feed was still loading ends within this.
const WAIT_RECHECK: Duration = Duration::from_secs(5);

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct WaitQuery {
    /// A message id of this conversation: wait for a message after it.
    /// Absent: after the newest message now.
    after: Option<String>,
    /// Seconds to hold, an integer 1–50; absent:
    /// `timing.message_wait_default` (25 s by default).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 50)]
    timeout: Option<String>,
}

/// Answer of `GET …/messages/wait`.
#[derive(Serialize, ToSchema)]
pub(crate) struct WaitAnswer {
    /// The first message after `after` that the caller did not send, or
    /// none at the timeout.
    messages: Vec<RestMessage>,
}

/// Counts a wait in [`crate::metrics::WAITS_HELD`] while it lives.
struct HeldWait;

impl HeldWait {
    fn new() -> Self {
        metrics::gauge!(crate::metrics::WAITS_HELD).increment(1.0);
        HeldWait
    }
}

impl Drop for HeldWait {
    fn drop(&mut self) {
        metrics::gauge!(crate::metrics::WAITS_HELD).decrement(1.0);
    }
}

/// The first message after `after` (a `createdAt`) in `id` that `me` did
/// not send and that is not a tombstone.
async fn first_reply(
    state: &AppState,
    caller: &Caller,
    id: &ConversationId,
    after: chrono::DateTime<chrono::Utc>,
) -> Result<Option<StoredMessage>, ApiError> {
    const PAGE: usize = 200;
    let (bay, me) = (&caller.principal.bay, &caller.principal.participant.id);
    let mut since = after;
    loop {
        let page = state.store.messages_since(bay, id, since, PAGE).await?;
        let full = page.len() == PAGE;
        if let Some(last) = page.last() {
            since = last.created_at;
        }
        if let Some(found) = page
            .into_iter()
            .find(|m| &m.sender.id != me && !m.is_deleted() && m.state == MessageState::Complete)
        {
            return Ok(Some(found));
        }
        if !full {
            return Ok(None);
        }
    }
}

/// `GET /conversations/{id}/messages/wait?after=&timeout=` → the first
/// later message the caller did not send, or `[]` at the timeout.
#[utoipa::path(
    operation_id = "waitForMessage",
    tag = "agent",
    summary = "Wait for the next message someone else sends",
    description = "Holds the request until a message the caller did not send arrives after `after` (or answers at once when one already has), else answers `{\"messages\": []}` after `timeout` seconds (1–50; absent: `timing.message_wait_default`, 25 by default). The wait is registered before the history is read, so nothing falls between two calls: call again with `after` = the message you got. Tombstones and open drafts are skipped: a streamed reply is returned once it completes (at its opening time in the history).",
    params(("id" = String, Path, description = "Conversation id"), WaitQuery),
    responses(
        (status = 200, description = "Zero or one message. A wait a draining node ended early (no message) carries the header `Switchboard-Session-End: GOING_AWAY`: call again, on another node", body = WaitAnswer),
        (status = 400, description = "INVALID_REQUEST (bad `timeout`) or INVALID_CURSOR (`after` names no message of this conversation)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "NOT_PARTICIPANT: not a member (also for unknown ids)", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[get("/conversations/{id}/messages/wait")]
pub(super) async fn wait_for_message(
    state: web::Data<AppState>,
    req: actix_web::HttpRequest,
    caller: Caller,
    path: web::Path<String>,
    query: web::Query<WaitQuery>,
) -> Result<HttpResponse, ApiError> {
    if state.is_draining() {
        return Err(ApiError::new(
            ErrorCode::Unavailable,
            "this node is draining; retry on another",
        )
        .retry_after(Duration::from_secs(1)));
    }
    state.limits.check_agent(&caller.principal).await?;
    // Counted with /updates per client IP until the answer is built.
    let _held = state.held_polls.admit(state.client_of(&req))?;
    let timeout = wait_timeout(
        query.timeout.as_deref(),
        state.settings.timing.message_wait_default,
    )?;
    let (bay, me) = (&caller.principal.bay, &caller.principal.participant.id);
    let id = ConversationId(path.into_inner());
    state
        .store
        .conversation(bay, &id)
        .await?
        .filter(|c| c.member(me).is_some())
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::NotParticipant,
                "you are not a participant of this conversation",
            )
        })?;
    // Register first, read second: a message appended after the read
    // reaches the waiter (see `WaitForMessage`).
    let rx = register(&state, &caller, &id).await?;
    let after = wait_start(&state, bay, &id, query.after.as_deref()).await?;
    // Counted once the history had nothing and the wait really holds,
    // until the answer is written.
    let mut held = None;
    let found = hold(&state, &caller, &id, after, timeout, rx, &mut held).await?;
    let mut found: Vec<StoredMessage> = found.into_iter().collect();
    crate::api::views::refresh_previews(&*state.store, bay, &id, &mut found).await?;
    let messages = found
        .iter()
        .map(|m| RestMessage::of(m, me, m.sender.clone()))
        .collect();
    let mut res = HttpResponse::Ok();
    if state.is_draining() {
        // Ended early by the drain, as a held /updates: call again, on
        // another node.
        res.insert_header((SESSION_END_HEADER, WsClose::GoingAway.as_str()));
    }
    Ok(res.json(WaitAnswer { messages }))
}

/// The hold `timeout` asks for, in whole seconds: `default`
/// (`timing.message_wait_default`, 25 s) when absent.
///
/// # Errors
/// 400 INVALID_REQUEST unless an integer from 1 to [`MAX_WAIT`] (50 s).
fn wait_timeout(raw: Option<&str>, default: Duration) -> Result<Duration, ApiError> {
    match raw {
        None => Ok(default),
        Some(raw) => raw
            .parse::<u64>()
            .ok()
            .filter(|s| (1..=MAX_WAIT.as_secs()).contains(s))
            .map(Duration::from_secs)
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::InvalidRequest,
                    "timeout must be an integer from 1 to 50 (seconds)",
                )
            }),
    }
}

/// Registers the caller's wait in `id` with the Bay's feed
/// ([`WaitForMessage`]): the receiver gets the log record of the next
/// message someone else appends, or closes when the feed goes away.
///
/// # Errors
/// 503 when the feed cannot be reached, asked twice: it may stop (idle)
/// between the lookup and the send.
async fn register(
    state: &AppState,
    caller: &Caller,
    id: &ConversationId,
) -> Result<oneshot::Receiver<Arc<LogRecord>>, ApiError> {
    let attempt = || {
        let (tx, rx) = oneshot::channel();
        let sent = state
            .registry
            .feed(&caller.principal.bay)
            .send(WaitForMessage {
                conversation: id.clone(),
                excluding: caller.principal.participant.id.clone(),
                reply: tx,
            });
        async move { sent.await.map(|()| rx) }
    };
    // The feed may stop (idle) between lookup and send: ask again once.
    let rx = match attempt().await {
        Ok(rx) => Ok(rx),
        Err(_) => attempt().await,
    }?;
    Ok(rx)
}

/// The `createdAt` a wait starts after: that of the message `after` names,
/// or without one of the newest message now (the beginning of time in an
/// empty conversation).
///
/// # Errors
/// 400 INVALID_CURSOR when `after` names no message of the conversation;
/// 503 when the store is down.
async fn wait_start(
    state: &AppState,
    bay: &BayId,
    id: &ConversationId,
    after: Option<&str>,
) -> Result<chrono::DateTime<chrono::Utc>, ApiError> {
    Ok(match after {
        Some(mid) => {
            state
                .store
                .message(bay, id, &MessageId(mid.to_owned()))
                .await?
                .ok_or_else(|| {
                    ApiError::new(
                        ErrorCode::InvalidCursor,
                        "after names no message of this conversation",
                    )
                })?
                .created_at
        }
        None => state
            .store
            .messages_before(bay, id, None, 1)
            .await?
            .0
            .pop()
            .map_or(chrono::DateTime::<chrono::Utc>::MIN_UTC, |m| m.created_at),
    })
}

/// Reads the history for a reply after `after` ([`first_reply`]) and,
/// while there is none, holds until `timeout` passes: woken by the feed
/// through `rx` (then registered anew before reading again), and reading
/// again at least every [`WAIT_RECHECK`]. Once it really holds it is
/// counted in [`crate::metrics::WAITS_HELD`], through `held`, which the
/// caller keeps until it answered.
///
/// # Errors
/// 503 when the store or the feed cannot be reached.
async fn hold(
    state: &AppState,
    caller: &Caller,
    id: &ConversationId,
    after: chrono::DateTime<chrono::Utc>,
    timeout: Duration,
    mut rx: oneshot::Receiver<Arc<LogRecord>>,
    held: &mut Option<HeldWait>,
) -> Result<Option<StoredMessage>, ApiError> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(m) = first_reply(state, caller, id, after).await? {
            return Ok(Some(m));
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return Ok(None);
        }
        let recheck = (now + WAIT_RECHECK).min(deadline);
        held.get_or_insert_with(HeldWait::new);
        let woken = tokio::select! {
            woken = tokio::time::timeout_at(recheck, &mut rx) => woken.is_ok(),
            // A draining node answers held waits at once (empty), so the
            // client asks again on another node before this one stops.
            () = state.drain_started() => return Ok(None),
        };
        if woken {
            // Woken, or released because the caller's token was revoked or
            // suspended, or the feed went away: the token must still work
            // before anything is read for it.
            crate::auth::recheck(state, caller).await?;
            rx = register(state, caller, id).await?;
        }
    }
}
