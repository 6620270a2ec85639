//! `GET /api/agent-api/updates?wait&cursor`: one held request covering
//! every conversation of the caller (protocol §11).
//!
//! Each call is a short-lived [`PollSession`] actor: it opens a session
//! (displacing any other connection of the token), answers at once when the
//! replay from `cursor` found events, and otherwise holds until the feed
//! pushes one, the wait ends, or the session is closed. The answer is always
//! `{cursor, events}`; the cursor covers every event returned. A call that a
//! session end answered (displaced, drain, slow consumer) says which in the
//! [`SESSION_END_HEADER`] header, so a client tells a displaced poll from
//! an idle one.

use super::open::{
    live_events, observe_live_delivery, open_session, unless_gone, OpenFailure, Opened, PageLimit,
    Resume,
};
use crate::auth::Caller;
use crate::connections::{ConnectionPermit, Transport};
use crate::error::{ApiError, SessionEnd};
use crate::held_polls::HeldPollPermit;
use crate::state::AppState;
use actix::prelude::*;
use actix_web::{get, web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use switchboard_actors::feed::{BayFeed, Detach};
use switchboard_actors::session::{
    Backlog, Close, CloseReason, Deliver, SessionCursor, SessionHandle, Watermark,
};
use switchboard_actors::store::log::LogRecord;
use switchboard_protocol::cursor::LogPosition;
use switchboard_protocol::error::{ErrorCode, WsClose, SESSION_END_HEADER};
use switchboard_protocol::event::Event;
use switchboard_protocol::ids::SessionId;
use tokio::sync::oneshot;

/// Most events one answer carries; the cursor then points past the last one
/// returned and the next call continues from there.
const MAX_EVENTS_PER_ANSWER: usize = 500;

/// The `/updates` answer (protocol §11): the same shape with or without events.
#[derive(Serialize, Debug)]
pub struct UpdatesBody {
    /// Opaque cursor covering every event of `events`. It may advance with
    /// no events (past entries addressed to others), so idle clients stay
    /// inside the replay buffer.
    pub cursor: String,
    /// In log order; often empty. A replay stops after 500 events and the
    /// next call continues from `cursor`.
    pub events: Vec<Event>,
    /// The session end that answered the call, sent as the
    /// [`SESSION_END_HEADER`] header (never in the body); `None` for an
    /// answer with events or at the end of the wait.
    #[serde(skip)]
    pub ended: Option<WsClose>,
}

/// The query of a `/updates` call (protocol §11).
#[derive(Deserialize)]
pub(crate) struct UpdatesQuery {
    /// Seconds to hold, as [`parse_wait`] reads it.
    wait: Option<String>,
    /// The cursor to resume after; absent: from now.
    cursor: Option<String>,
}

/// Parses `wait` (seconds): absent or unparsable → the default (25 s);
/// otherwise clamped to [min, max] (1–30 s), protocol §11.
pub fn parse_wait(raw: Option<&str>, default: Duration, min: Duration, max: Duration) -> Duration {
    raw.and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite())
        .map(|s| Duration::from_secs_f64(s.max(0.0).min(max.as_secs_f64())).clamp(min, max))
        .unwrap_or(default)
}

fn cursor_expired(message: &str) -> ApiError {
    metrics::counter!(crate::metrics::CURSOR_EXPIRED, "transport" => "updates").increment(1);
    ApiError::new(ErrorCode::CursorExpired, message)
}

/// The route. See the module docs.
#[utoipa::path(
    operation_id = "getUpdates",
    tag = "realtime",
    summary = "Long-poll every conversation of the caller",
    description = "Answers at once when events after `cursor` exist, otherwise holds up to `wait` seconds. The answer is always `{cursor, events}`; pass `cursor` to the next call. Without a cursor the call starts at now. One held call per token: a newer call (or WebSocket or SSE stream) of the same token ends this one with an empty answer carrying the header `Switchboard-Session-End: DISPLACED` (stop polling; do not loop); a draining node ends it the same way with `GOING_AWAY` (poll again, elsewhere). On 409 CURSOR_EXPIRED catch up over REST and call again without a cursor.",
    params(
        ("wait" = Option<String>, Query, description = "Seconds to hold, a number clamped to 1–30 (`0` holds 1 s, `99` holds 30 s); absent or unparsable: 25 (protocol §11). Any value is accepted"),
        ("cursor" = Option<String>, Query, description = "Opaque cursor from the previous answer or a WebSocket `cursor` frame; absent: start at now"),
    ),
    responses(
        (status = 200, description = "Events after `cursor` (possibly none) and the cursor covering them. An answer a session end gave (no events) also carries the header `Switchboard-Session-End`: `DISPLACED` (a newer connection of the token took over: stop, do not poll again in a loop), `GOING_AWAY` (the node drains: poll again with the cursor) or `SLOW_CONSUMER`; other answers never do", body = crate::openapi::schemas::Updates, headers(("Cache-Control" = String, description = "no-store"))),
        (status = 400, description = "INVALID_REQUEST: malformed query string", body = switchboard_protocol::error::ErrorBody),
        (status = 401, description = "UNAUTHORIZED: missing, unknown, rotated or revoked token (also ends a held call when the token is rotated)", body = switchboard_protocol::error::ErrorBody),
        (status = 409, description = "CURSOR_EXPIRED: the cursor fell out of the replay buffer, its log epoch ended, or this server never issued it", body = switchboard_protocol::error::ErrorBody),
        (status = 429, description = "UPDATES_RATE_LIMITED: the /updates bucket (20/min by default) is spent; RATE_LIMITED: too many open connections from this address", body = switchboard_protocol::error::ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 500, description = "INTERNAL", body = switchboard_protocol::error::ErrorBody),
        (status = 503, description = "UNAVAILABLE (the node is draining or full) or STORE_UNAVAILABLE", body = switchboard_protocol::error::ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[get("/updates")]
async fn updates(
    state: web::Data<AppState>,
    req: HttpRequest,
    caller: Caller,
    query: web::Query<UpdatesQuery>,
) -> Result<HttpResponse, ApiError> {
    let held = begin(state.get_ref(), caller, state.client_of(&req), &query).await?;
    Ok(ok(held.body().await?))
}

/// Starts one `/updates` call of `caller` from client address `peer`:
/// the route's, and that of a poll served off the HTTP dispatcher
/// (`realtime/front.rs`). Its answer is [`HeldPoll::body`], given to the
/// client with [`ok`].
///
/// # Errors
/// 503 while draining, 429 when the `/updates` bucket is spent, 409
/// CURSOR_EXPIRED for a cursor this server never issued, and those of
/// [`start`].
pub(crate) async fn begin(
    state: &AppState,
    caller: Caller,
    peer: Option<std::net::IpAddr>,
    query: &UpdatesQuery,
) -> Result<HeldPoll, ApiError> {
    if state.is_draining() {
        return Err(ApiError::new(
            ErrorCode::Unavailable,
            "this node is draining; retry on another",
        )
        .retry_after(Duration::from_secs(1)));
    }
    state.limits.check_updates(&caller.principal.token).await?;
    let t = &state.settings.timing;
    let wait = parse_wait(
        query.wait.as_deref(),
        t.updates_wait_default,
        t.updates_wait_min,
        t.updates_wait_max,
    );
    let resume = match Resume::parse(query.cursor.as_deref()) {
        Resume::Now => None,
        Resume::After(position) => Some(position),
        // A cursor this server never issued (another deployment's, or a
        // mangled one) gets the protocol's own recovery path: reset and
        // start over.
        Resume::Unaddressable => return Err(cursor_expired("cursor is not one this server issued; catch up over REST and call again without a cursor")),
    };
    start(
        state,
        peer,
        caller,
        resume,
        wait,
        switchboard_actors::session::Transport::Updates,
    )
}

/// The 200 of an answered `/updates` call: `body` as JSON, `Cache-Control:
/// no-store`, and [`SESSION_END_HEADER`] when a session end answered.
pub(crate) fn ok(body: UpdatesBody) -> HttpResponse {
    let mut res = HttpResponse::Ok();
    res.insert_header(("Cache-Control", "no-store"));
    if let Some(end) = body.ended {
        res.insert_header((SESSION_END_HEADER, end.as_str()));
    }
    res.json(body)
}

/// A started poll: all that a held call keeps while it waits (its
/// [`PollSession`] aside) is this, so nothing of the request or its checks
/// is held with it.
pub(crate) struct HeldPoll {
    answer: oneshot::Receiver<Result<UpdatesBody, ApiError>>,
    /// The call's slot among the address's held polls, until it answers.
    _held: HeldPollPermit,
}

impl HeldPoll {
    /// The poll's answer: events, the end of the wait, or a session end.
    ///
    /// # Errors
    /// 409 CURSOR_EXPIRED, 401 on revocation, 403 on suspension, and the
    /// other refusals of a session opening.
    pub(crate) async fn body(self) -> Result<UpdatesBody, ApiError> {
        self.answer
            .await
            .map_err(|_| ApiError::new(ErrorCode::Internal, "the poll ended without an answer"))?
    }
}

/// Admits a poll for `caller` (per IP, then per token) and starts its
/// [`PollSession`] from `resume` (`None`: from now) for at most `wait`, as
/// `/updates` does: it displaces the token's other connections, and
/// [`HeldPoll::body`] answers with the events since `resume` and the
/// cursor past them. Shared with the MCP tool `wait_for_messages`.
///
/// # Errors
/// 429 from admission.
pub(crate) fn start(
    state: &AppState,
    peer: Option<std::net::IpAddr>,
    caller: Caller,
    resume: Option<LogPosition>,
    wait: Duration,
    via: switchboard_actors::session::Transport,
) -> Result<HeldPoll, ApiError> {
    let held = state.held_polls.admit(peer)?;
    let permit = state
        .connections
        .admit(peer, &caller.principal.token, Transport::Updates)?;
    let (tx, rx) = oneshot::channel();
    PollSession {
        state: state.clone(),
        caller,
        session: SessionId(format!("poll_{}", ulid::Ulid::new())),
        resume,
        wait,
        via,
        reply: Some(tx),
        live: None,
        held: false,
        _permit: permit,
    }
    .start();
    Ok(HeldPoll {
        answer: rx,
        _held: held,
    })
}

/// Registers the route under `/api/agent-api`.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(updates);
}

struct Live {
    feed: Addr<BayFeed>,
    cursor: SessionCursor,
}

/// One held `/updates` call.
pub struct PollSession {
    state: AppState,
    caller: Caller,
    session: SessionId,
    resume: Option<LogPosition>,
    wait: Duration,
    /// What the presence record shows the call as: `updates`, or `mcp`
    /// for an MCP `wait_for_messages`.
    via: switchboard_actors::session::Transport,
    /// Taken when the answer is sent; `None` afterwards.
    reply: Option<oneshot::Sender<Result<UpdatesBody, ApiError>>>,
    /// Set once the session is attached and replayed.
    live: Option<Live>,
    /// Whether the call is held (attached, replayed, nothing to answer yet);
    /// counted in [`crate::metrics::HELD_POLLS`] while true.
    held: bool,
    /// Holds this call's admission slot until it ends.
    _permit: ConnectionPermit,
}

impl PollSession {
    fn answer(&mut self, result: Result<UpdatesBody, ApiError>, ctx: &mut Context<Self>) {
        if let Some(tx) = self.reply.take() {
            let _ = tx.send(result);
        }
        ctx.stop();
    }

    /// Answers as [`SessionEnd::of`] says for `reason`: at once with no
    /// events and `cursor`, or with its error.
    fn end(&mut self, reason: CloseReason, cursor: Option<String>, ctx: &mut Context<Self>) {
        let end = SessionEnd::of(reason);
        let answer = match end.updates {
            None => match cursor {
                Some(cursor) => Ok(UpdatesBody {
                    cursor,
                    events: Vec::new(),
                    ended: Some(end.ws),
                }),
                None => Err(ApiError::new(ErrorCode::Internal, "poll has no position")),
            },
            Some(err) => {
                if err.code == ErrorCode::CursorExpired {
                    metrics::counter!(crate::metrics::CURSOR_EXPIRED, "transport" => "updates")
                        .increment(1);
                }
                Err(err)
            }
        };
        self.answer(answer, ctx);
    }

    fn answer_events(&mut self, events: Vec<Event>, ctx: &mut Context<Self>) {
        match &self.live {
            Some(live) => {
                let cursor = live.cursor.position().encode();
                self.answer(
                    Ok(UpdatesBody {
                        cursor,
                        events,
                        ended: None,
                    }),
                    ctx,
                );
            }
            None => self.answer(
                Err(ApiError::new(ErrorCode::Internal, "poll has no position")),
                ctx,
            ),
        }
    }
}

impl PollSession {
    /// Opens the session (attach, then replay), unless the caller leaves first.
    fn open(&mut self, ctx: &mut Context<Self>) {
        // A poll loop ends a session between every two calls: its
        // participant stays present across the gaps (a rate-limit wait
        // included), not just for the WebSocket linger.
        let handle = SessionHandle::of(&ctx.address(), Backlog::unbounded())
            .lingering(self.state.settings.timing.presence_poll_linger)
            .via(self.via);
        let open = open_session(
            self.state.clone(),
            self.caller.clone(),
            self.session.clone(),
            handle,
            self.resume.clone(),
            PageLimit::events(MAX_EVENTS_PER_ANSWER),
        );
        let Some(tx) = self.reply.take() else {
            return ctx.stop();
        };
        // The opening stops if the caller drops its request meanwhile.
        let fut = async move {
            let mut tx = tx;
            let outcome = unless_gone(open, tx.closed()).await;
            outcome.map(|res| (res, tx))
        };
        ctx.wait(fut.into_actor(self).map(|outcome, act, ctx| {
            let Some((res, tx)) = outcome else {
                return ctx.stop();
            };
            act.reply = Some(tx);
            act.on_opened(res, ctx);
        }));
    }
}

impl PollSession {
    /// Answers at once (events, expiry, displacement, failure) or holds
    /// the call until an event or the end of its wait.
    fn on_opened(&mut self, res: Result<Opened, OpenFailure>, ctx: &mut Context<Self>) {
        match res {
            Ok(Opened {
                feed,
                cursor,
                events,
                rest,
            }) => {
                self.live = Some(Live { feed, cursor });
                if !events.is_empty() || rest.is_some() {
                    self.answer_events(events.into_iter().map(|r| r.event).collect(), ctx);
                    return;
                }
                ctx.run_later(self.wait, |act, ctx| act.answer_events(Vec::new(), ctx));
                self.held = true;
                metrics::gauge!(crate::metrics::HELD_POLLS).increment(1.0);
                // Stop holding for a client that went away.
                ctx.run_interval(Duration::from_millis(500), |act, ctx| {
                    if act.reply.as_ref().is_none_or(|tx| tx.is_closed()) {
                        ctx.stop();
                    }
                });
            }
            Err(OpenFailure::Expired { feed, cursor }) => {
                self.live = Some(Live { feed, cursor });
                self.answer(
                    Err(cursor_expired(
                        "cursor expired: it fell out of the replay buffer or the log was reset",
                    )),
                    ctx,
                );
            }
            Err(OpenFailure::Superseded { position }) => {
                // A newer call already displaced this one. The session has no
                // position of its own: answer with the caller's cursor (or,
                // without one, the feed's position).
                let cursor = self.resume.as_ref().unwrap_or(&position).encode();
                self.end(CloseReason::Displaced, Some(cursor), ctx);
            }
            Err(OpenFailure::Revoked { feed }) => {
                feed.do_send(Detach {
                    session: self.session.clone(),
                });
                self.end(CloseReason::Revoked, None, ctx);
            }
            Err(OpenFailure::Suspended { feed, suspension }) => {
                feed.do_send(Detach {
                    session: self.session.clone(),
                });
                self.end(CloseReason::Suspended(suspension), None, ctx);
            }
            Err(OpenFailure::Failed(err)) => self.answer(Err(err.into()), ctx),
        }
    }
}

impl Actor for PollSession {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.open(ctx);
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        if self.held {
            metrics::gauge!(crate::metrics::HELD_POLLS).decrement(1.0);
        }
        if let Some(live) = &self.live {
            live.feed.do_send(Detach {
                session: self.session.clone(),
            });
        }
        if let Some(tx) = self.reply.take() {
            let _ = tx.send(Err(ApiError::new(ErrorCode::Internal, "the poll stopped")));
        }
    }
}

impl Handler<Deliver> for PollSession {
    type Result = ();

    fn handle(&mut self, msg: Deliver, ctx: &mut Self::Context) {
        let Some(live) = &mut self.live else { return };
        // One answer carries at most MAX_EVENTS_PER_ANSWER events; when a
        // live batch holds more, the cursor stops at the last one returned
        // (not at the batch's end) so the next call picks up the rest.
        let mut through = msg.through;
        let mut records: &[std::sync::Arc<LogRecord>] = &msg.records;
        let mut new_messages = 0;
        for (i, r) in msg.records.iter().enumerate() {
            if live.cursor.is_new(r.id) && r.event.is_event() {
                new_messages += 1;
                if new_messages == MAX_EVENTS_PER_ANSWER {
                    if i + 1 < msg.records.len() {
                        records = &msg.records[..=i];
                        through = r.id;
                    }
                    break;
                }
            }
        }
        let events = live_events(
            records,
            &mut live.cursor,
            &self.caller.principal.participant.id,
        );
        observe_live_delivery(records, &live.cursor, Transport::Updates);
        live.cursor.advance(through);
        if !events.is_empty() {
            self.answer_events(events, ctx);
        }
    }
}

impl Handler<Watermark> for PollSession {
    type Result = ();

    fn handle(&mut self, msg: Watermark, _: &mut Self::Context) {
        if let Some(live) = &mut self.live {
            live.cursor.advance(msg.through);
        }
    }
}

impl Handler<Close> for PollSession {
    type Result = ();

    fn handle(&mut self, msg: Close, ctx: &mut Self::Context) {
        if msg.reason == CloseReason::Displaced {
            metrics::counter!(crate::metrics::DISPLACEMENTS, "transport" => "updates").increment(1);
        }
        let cursor = self.live.as_ref().map(|l| l.cursor.position().encode());
        self.end(msg.reason, cursor, ctx);
    }
}

#[cfg(test)]
mod tests {
    use super::parse_wait;
    use std::time::Duration;

    #[test]
    fn wait_is_clamped_and_defaults_to_25() {
        let (d, lo, hi) = (
            Duration::from_secs(25),
            Duration::from_secs(1),
            Duration::from_secs(30),
        );
        let w = |s: Option<&str>| parse_wait(s, d, lo, hi);
        assert_eq!(w(None), d);
        assert_eq!(w(Some("abc")), d);
        assert_eq!(w(Some("NaN")), d);
        assert_eq!(w(Some("0")), lo);
        assert_eq!(w(Some("-5")), lo);
        assert_eq!(w(Some("10")), Duration::from_secs(10));
        assert_eq!(w(Some("999")), hi);
        assert_eq!(w(Some("1e308")), hi);
    }
}
