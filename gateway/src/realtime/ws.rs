//! `GET /api/agent-api/ws`: the same events as `/updates` over a WebSocket
//! (protocol §11).
//!
//! Frame grammar: the client sends `{"t":"hello","resume":<cursor|null>}`
//! first (within the hello timeout); the server answers `ready`, replays
//! what the client missed as `event` frames, then a `cursor` frame, and
//! from then on streams `event` frames. One `cursor` frame closes each
//! flushed batch: every delivery handled before the socket's next write
//! shares it, so a burst of events costs one cursor, not one per event.
//! An idle `cursor` frame follows every ~25 s of silence. Every close the server
//! initiates is a [`WsClose`] (its code and close code), preceded by an
//! `error` frame; how a session end maps to it is [`SessionEnd::of`].

use super::inbound::{pump, ClientMessage, FromClient, InboundError, Tick};
use super::open::{
    continue_replay, observe_live_delivery, open_session, stream_page, OpenFailure, Opened,
    ReplayPage, ReplayRest, Replayed, Resume,
};
use super::outbound::{flushed, Outbox, SharedOutbox};
use super::socket::{self, Running};
use crate::auth::authenticate;
use crate::auth::Caller;
use crate::connections::{ConnectionPermit, Transport};
use crate::error::{ApiError, Preamble, SessionEnd};
use crate::state::AppState;
use actix::prelude::*;
use actix_http::ws::{CloseCode, CloseReason as WsCloseReason, HandshakeError};
use actix_web::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use actix_web::http::StatusCode;
use actix_web::web::Bytes;
use actix_web::{get, web, HttpRequest, HttpResponse, ResponseError};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchboard_actors::feed::{BayFeed, Detach};
use switchboard_actors::session::{
    Backlog, Close, CloseReason, Deliver, SessionCursor, SessionHandle, Watermark,
};
use switchboard_protocol::error::{ErrorCode, WsClose};
use switchboard_protocol::frame::{ClientFrame, ServerFrame};
use switchboard_protocol::ids::SessionId;

/// The upgrade route. Authenticates before upgrading (401 JSON on a bad
/// credential, never a 101).
#[utoipa::path(
    operation_id = "openWebSocket",
    tag = "realtime",
    summary = "WebSocket: the /updates events and cursor, pushed",
    description = "A WebSocket upgrade (RFC 6455), not a JSON endpoint. The credential is checked before the upgrade: `Authorization: Bearer …`, or `?token=…` for clients that cannot set headers. After the 101 the client sends `{\"t\":\"hello\",\"resume\":<cursor|null>}` and the server answers `ready`, replays missed `event` frames, then streams `event` frames each batch followed by a `cursor` frame. The cursor is the same string `/updates` issues. Frames, close codes (4000 displaced, 4001 revoked, 4002 framing violation, 4003 going away, 4004 suspended; RFC 6455 1002, 1007, 1008, 1009) and resume rules: docs/websocket.md.",
    params(
        ("Upgrade" = String, Header, description = "`websocket`"),
        ("Connection" = String, Header, description = "`Upgrade`"),
        ("Sec-WebSocket-Key" = String, Header, description = "RFC 6455 handshake key"),
        ("Sec-WebSocket-Version" = String, Header, description = "`13`"),
    ),
    responses(
        (status = 101, description = "Switching Protocols: the connection is now a WebSocket speaking the frames of docs/websocket.md"),
        (status = 400, description = "INVALID_REQUEST: not a valid WebSocket handshake (e.g. no `Upgrade: websocket`, no `Sec-WebSocket-Key`); checked after the credential, and costs none of the connect bucket", body = switchboard_protocol::error::ErrorBody),
        (status = 404, description = "NOT_FOUND: a WebSocket upgrade aimed at any other path", body = switchboard_protocol::error::ErrorBody),
        (status = 426, description = "INVALID_REQUEST: a `Sec-WebSocket-Version` other than 13", body = switchboard_protocol::error::ErrorBody, headers(("Sec-WebSocket-Version" = String, description = "`13`"))),
        (status = 401, description = "UNAUTHORIZED: missing, unknown, rotated or revoked token; no upgrade happens", body = switchboard_protocol::error::ErrorBody),
        (status = 429, description = "UPDATES_RATE_LIMITED: connecting faster than the connect bucket (the /updates bucket, 20/min by default) allows; RATE_LIMITED: too many open connections from this address", body = switchboard_protocol::error::ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 500, description = "INTERNAL", body = switchboard_protocol::error::ErrorBody),
        (status = 503, description = "UNAVAILABLE: the node is draining or full; STORE_UNAVAILABLE: the store cannot be reached", body = switchboard_protocol::error::ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = []), ("agent_token_query" = [])),
)]
#[get("/ws")]
async fn upgrade(state: web::Data<AppState>, req: HttpRequest) -> Result<HttpResponse, ApiError> {
    // Every request with `Upgrade: websocket` goes to the upgrade service
    // (`upgrade.rs`) with its connection, unless a body comes with it; what
    // reaches this route is not a handshake this node can serve. The usual
    // checks still come first, in their order.
    refuse_if_draining(&state)?;
    authenticate(&req, true).await?;
    let refusal = match actix_http::ws::handshake(req.head()) {
        Err(err) => handshake_refusal(err),
        Ok(_) => ApiError::new(
            ErrorCode::InvalidRequest,
            "not a valid WebSocket handshake: it carries a body",
        )
        .error_response(),
    };
    Ok(refusal)
}

/// A WebSocket this node admitted, before its 101: the session actor, not
/// yet started.
pub struct Admitted {
    session: WsSession,
    backlog: Arc<Backlog>,
}

/// The first check before a 101: a draining node takes no new sessions.
///
/// # Errors
/// 503 UNAVAILABLE with `Retry-After: 1` while the node drains.
pub fn refuse_if_draining(state: &AppState) -> Result<(), ApiError> {
    if state.is_draining() {
        return Err(ApiError::new(
            ErrorCode::Unavailable,
            "this node is draining; connect to another",
        )
        .retry_after(Duration::from_secs(1)));
    }
    Ok(())
}

/// The checks after the credential and the handshake, before a 101: the
/// connection caps admit `caller` from `peer` (429 RATE_LIMITED / 503
/// UNAVAILABLE), then the connect bucket allows it (429
/// UPDATES_RATE_LIMITED). A refused or malformed handshake never reaches
/// here, so it costs the client none of its connect allowance.
///
/// # Errors
/// The [`ApiError`] of the first check that fails.
pub async fn admit(
    state: &AppState,
    caller: Caller,
    peer: Option<IpAddr>,
) -> Result<Admitted, ApiError> {
    let permit = state
        .connections
        .admit(peer, &caller.principal.token, Transport::Ws)?;
    let backlog = Backlog::bounded(state.settings.limits.max_outbound_queue_bytes);
    state.limits.check_updates(&caller.principal.token).await?;
    let session = WsSession {
        state: state.clone(),
        caller,
        session: SessionId(format!("ws_{}", ulid::Ulid::new())),
        phase: Phase::AwaitingHello,
        live: None,
        held: Vec::new(),
        outbox: Outbox::shared(),
        missed_pongs: 0,
        last_ping_at: Instant::now(),
        hello_timer: None,
        backlog: backlog.clone(),
        _permit: permit,
    };
    Ok(Admitted { session, backlog })
}

/// The answer to a request that is not a valid WebSocket handshake: the
/// status RFC 6455 and actix give it (400; 405 with `Allow: GET` for
/// another method; 426 with `Sec-WebSocket-Version: 13` for another
/// version) and the agent API's JSON error body.
pub fn handshake_refusal(err: HandshakeError) -> HttpResponse {
    let plain = err.error_response();
    let code = if plain.status() == StatusCode::METHOD_NOT_ALLOWED {
        ErrorCode::MethodNotAllowed
    } else {
        ErrorCode::InvalidRequest
    };
    let mut res =
        ApiError::new(code, format!("not a valid WebSocket handshake: {err}")).error_response();
    *res.status_mut() = plain.status();
    for (name, value) in plain.headers() {
        if name != CONTENT_TYPE && name != CONTENT_LENGTH {
            res.headers_mut().insert(name.clone(), value.clone());
        }
    }
    res
}

impl Admitted {
    /// Serves the session on `io`, the upgraded connection (`early`: the
    /// bytes read past the request head), until either side ends it (see
    /// [`socket::serve`]).
    pub async fn serve(self, io: tokio::net::TcpStream, early: Bytes) {
        let max_frame = self.session.state.settings.limits.max_ws_frame_bytes;
        let timing = &self.session.state.settings.timing;
        let tick = tick_interval(timing);
        // As long as a client that misses its pongs keeps its connection: a
        // write that waits longer means no ping could go out meanwhile.
        let write_timeout = timing.ping_interval * timing.missed_pongs;
        socket::serve(io, early, max_frame, write_timeout, |inbound| {
            let outbox = self.session.outbox.clone();
            let ctx = actix::Context::new();
            let pump = actix_rt::spawn(pump(inbound, ctx.address(), tick));
            Running {
                session: ctx.into_future(self.session),
                outbox,
                backlog: self.backlog,
                pump,
            }
        })
        .await;
    }
}

/// How often a session checks its ping and idle cursor frame: the shorter
/// of the ping interval and a fifth of the idle cursor interval (5 s at the
/// defaults), at least 50 ms. A ping goes out on the first tick at least one
/// ping interval after the last (half a tick of slack absorbs timer jitter).
fn tick_interval(timing: &switchboard_config::Timing) -> Duration {
    timing
        .ping_interval
        .min(timing.idle_cursor_interval / 5)
        .max(Duration::from_millis(50))
}

/// Registers the route under `/api/agent-api`.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(upgrade);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Nothing is sent until `hello` arrives (protocol §11).
    AwaitingHello,
    /// `hello` received; attaching and replaying. The connection is still
    /// read (a client that leaves stops the opening) and live records that
    /// arrive meanwhile are held until the replay has been sent.
    Opening,
    /// Streaming.
    Live,
    /// A close was sent; ignore everything else.
    Closing,
}

struct Live {
    feed: Addr<BayFeed>,
    cursor: SessionCursor,
}

/// A feed message received while the session was still opening.
enum Held {
    Deliver(Deliver),
    Watermark(Watermark),
}

/// One WebSocket connection of one token. It runs inside its socket's task
/// (see `socket`) and writes its frames into its [`Outbox`].
pub struct WsSession {
    state: AppState,
    caller: Caller,
    session: SessionId,
    phase: Phase,
    live: Option<Live>,
    /// Feed messages that arrived while [`Phase::Opening`], in order; the
    /// attach-before-replay rule needs them after the replay, not dropped.
    held: Vec<Held>,
    /// Frames written and not yet taken by the socket.
    outbox: SharedOutbox,
    /// Pings sent without a pong since.
    missed_pongs: u32,
    /// When the last ping went out (or the session started).
    last_ping_at: Instant,
    /// The hello timeout (and drain watch), cancelled once `hello`
    /// arrives: every pending future is polled on each turn of the actor,
    /// i.e. on every delivery.
    hello_timer: Option<SpawnHandle>,
    /// Live deliveries not yet handled; the feed abandons the session past
    /// `limits.max_outbound_queue_bytes` (see `outbound`).
    backlog: Arc<Backlog>,
    /// Holds this connection's admission slot until the session ends.
    _permit: ConnectionPermit,
}

impl WsSession {
    fn send(&mut self, frame: &ServerFrame<'_>) {
        self.outbox.borrow_mut().text(frame.to_json().as_bytes());
    }

    /// Sends `reset`: the resume position is not addressable (the 409 of this transport).
    fn send_reset(&mut self) {
        metrics::counter!(crate::metrics::CURSOR_EXPIRED, "transport" => "ws").increment(1);
        self.send(&ServerFrame::Reset);
    }

    /// Sends a `cursor` frame with the current position now.
    fn send_cursor(&mut self) {
        if let Some(live) = &self.live {
            self.outbox.borrow_mut().cursor(live.cursor.entry());
        }
    }

    /// Sends an `error` frame with `close`'s code, then closes with its close code.
    fn close_with(&mut self, close: WsClose, message: &str, ctx: &mut Context<Self>) {
        if self.phase == Phase::Closing {
            return;
        }
        self.phase = Phase::Closing;
        self.send(&ServerFrame::Error {
            code: close,
            message,
        });
        self.outbox.borrow_mut().close(Some(WsCloseReason {
            code: CloseCode::Other(close.close_code()),
            description: Some(message.to_owned()),
        }));
        ctx.stop();
    }

    /// Ends the session as [`SessionEnd::of`] says for `reason`.
    fn end(&mut self, reason: CloseReason, ctx: &mut Context<Self>) {
        if self.phase == Phase::Closing {
            return;
        }
        let end = SessionEnd::of(reason);
        match end.preamble {
            Preamble::None => {}
            Preamble::Reset => self.send_reset(),
            Preamble::Cursor => self.send_cursor(),
        }
        self.close_with(end.ws, end.message, ctx);
    }

    fn violation(&mut self, message: &str, ctx: &mut Context<Self>) {
        self.close_with(WsClose::FramingViolation, message, ctx);
    }

    fn on_text(&mut self, text: &str, ctx: &mut Context<Self>) {
        let frame: ClientFrame = match serde_json::from_str(text) {
            Ok(f) => f,
            Err(e) => return self.violation(&format!("invalid frame: {e}"), ctx),
        };
        match (frame, self.phase) {
            (ClientFrame::Hello { resume }, Phase::AwaitingHello) => {
                if let Some(timer) = self.hello_timer.take() {
                    ctx.cancel_future(timer);
                }
                self.on_hello(resume, ctx)
            }
            (ClientFrame::Hello { .. }, _) => self.violation("hello was already received", ctx),
        }
    }

    /// Opens the session (attach, then replay) and answers `ready`.
    fn on_hello(&mut self, resume: Option<String>, ctx: &mut Context<Self>) {
        self.phase = Phase::Opening;
        // An undecodable resume is "not addressable": ready, then reset.
        // An empty one means "no cursor", as on /updates.
        let parsed = Resume::parse(resume.as_deref());
        let handle = SessionHandle::of(&ctx.address(), self.backlog.clone())
            .via(switchboard_actors::session::Transport::Ws);
        let fut = open_session(
            self.state.clone(),
            self.caller.clone(),
            self.session.clone(),
            handle,
            parsed.position(),
            stream_page(&self.state),
        );
        // Spawned, not awaited with `ctx.wait`: the connection keeps being
        // read, so a client that gives up mid-opening (a reconnect storm
        // after a node restart) stops this actor and its opening at once
        // instead of holding a replay slot and a socket for nothing. What
        // the feed sends meanwhile is held (see `held`).
        ctx.spawn(
            fut.into_actor(self)
                .map(move |res, act, ctx| act.on_opened(res, resume, parsed, ctx)),
        );
    }

    /// What follows the opening: `ready`, then the replay and a `cursor`
    /// frame, a `reset`, or the close that ends the session.
    fn on_opened(
        &mut self,
        res: Result<Opened, OpenFailure>,
        resume: Option<String>,
        parsed: Resume,
        ctx: &mut Context<Self>,
    ) {
        if self.phase == Phase::Closing {
            // The connection ended while opening: let go of the feed.
            if let Ok(Opened { feed, .. }) = &res {
                self.detach_from(feed);
            }
            return;
        }
        self.send(&ServerFrame::Ready {
            cursor: resume.as_deref(),
        });
        match res {
            Ok(Opened {
                feed,
                cursor,
                events,
                rest,
            }) => {
                self.attach_live(feed, cursor);
                if parsed == Resume::Unaddressable {
                    self.send_reset();
                }
                self.send_page(events, rest, ctx);
            }
            Err(failure) => self.on_replay_failed(failure, ctx),
        }
    }

    /// Sends a page of the replay and its `cursor` frame. Live records stay
    /// held until the last page: the next is read once the socket took
    /// this one, so a resume from far back holds one page, not the log.
    fn send_page(
        &mut self,
        events: Vec<Replayed>,
        rest: Option<ReplayRest>,
        ctx: &mut Context<Self>,
    ) {
        for replayed in &events {
            self.send(&ServerFrame::Event {
                event: &replayed.event,
            });
        }
        self.send_cursor();
        match rest {
            Some(rest) => self.read_next_page(rest, ctx),
            None => self.go_live(),
        }
    }

    /// Reads the replay's next page once the socket took the last one.
    fn read_next_page(&mut self, rest: ReplayRest, ctx: &mut Context<Self>) {
        let Some(live) = &self.live else { return };
        let flushed = flushed(self.outbox.clone());
        let next = continue_replay(self.state.clone(), rest, live.cursor.clone());
        let fut = async move {
            flushed.await;
            next.await
        };
        ctx.spawn(fut.into_actor(self).map(|res, act, ctx| {
            if act.phase == Phase::Closing {
                return;
            }
            match res {
                Ok(ReplayPage {
                    cursor,
                    events,
                    rest,
                }) => {
                    if let Some(live) = &mut act.live {
                        live.cursor = cursor;
                    }
                    act.send_page(events, rest, ctx)
                }
                Err(failure) => act.on_replay_failed(failure, ctx),
            }
        }));
    }

    /// A replay that could not start or go on: `reset` (the log no longer
    /// reaches the position) or the close that ends the session.
    fn on_replay_failed(&mut self, failure: OpenFailure, ctx: &mut Context<Self>) {
        match failure {
            OpenFailure::Expired { feed, cursor } => {
                self.attach_live(feed, cursor);
                self.send_reset();
                self.send_cursor();
                self.go_live();
            }
            OpenFailure::Superseded { .. } => self.end(CloseReason::Displaced, ctx),
            OpenFailure::Revoked { feed } => {
                self.detach_from(&feed);
                self.end(CloseReason::Revoked, ctx)
            }
            OpenFailure::Suspended { feed, suspension } => {
                self.detach_from(&feed);
                self.end(CloseReason::Suspended(suspension), ctx)
            }
            OpenFailure::Failed(err) => {
                let err = ApiError::from(err);
                self.close_with(err.ws_close(), &err.message, ctx)
            }
        }
    }

    /// Attached to `feed` at `cursor`; live records are still held until
    /// [`Self::go_live`].
    fn attach_live(&mut self, feed: Addr<BayFeed>, cursor: SessionCursor) {
        self.outbox.borrow_mut().go_live(cursor.position().epoch);
        self.live = Some(Live { feed, cursor });
    }

    /// The replay is over: stream, starting with what was held meanwhile.
    fn go_live(&mut self) {
        self.phase = Phase::Live;
        self.release_held();
    }

    /// Tells `feed` this session is gone.
    fn detach_from(&self, feed: &Addr<BayFeed>) {
        feed.do_send(Detach {
            session: self.session.clone(),
        });
    }
}

impl WsSession {
    /// Handles, in arrival order, what the feed sent while the session was
    /// opening (the session cursor drops what the replay already sent).
    fn release_held(&mut self) {
        for held in std::mem::take(&mut self.held) {
            match held {
                Held::Deliver(msg) => self.deliver(msg),
                Held::Watermark(msg) => self.watermark(msg),
            }
        }
    }

    /// Writes a live batch (see [`Handler<Deliver>`]). The `cursor` frame
    /// that covers it closes the socket's next write (see `outbound`), so
    /// every delivery handled before that write shares one.
    fn deliver(&mut self, msg: Deliver) {
        self.backlog.handled(msg.bytes);
        if self.phase != Phase::Live {
            return;
        }
        let Some(live) = &mut self.live else { return };
        observe_live_delivery(&msg.records, &live.cursor, Transport::Ws);
        // Frames come pre-rendered from the shared record (one serialization
        // per message and verdict, not one per session).
        let participant = &self.caller.principal.participant.id;
        let mut outbox = self.outbox.borrow_mut();
        let mut wrote = false;
        for record in msg.records.iter() {
            if live.cursor.admits(record) {
                if let Some(frame) = record.ws_event_frame(participant) {
                    outbox.text(frame.as_bytes());
                    wrote = true;
                }
            }
        }
        live.cursor.advance(msg.through);
        let through = live.cursor.entry();
        if wrote {
            outbox.cursor_after(through);
        } else {
            outbox.advance(through);
        }
    }

    fn watermark(&mut self, msg: Watermark) {
        if let Some(live) = &mut self.live {
            live.cursor.advance(msg.through);
            self.outbox.borrow_mut().advance(live.cursor.entry());
        }
    }
}

impl Actor for WsSession {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let timing = self.state.settings.timing.clone();
        // Until `hello`: the hello timeout, or a drain. A drain reaches the
        // sessions through their feeds, and this one has none yet.
        let hello_timeout = tokio::time::sleep(timing.hello_timeout);
        let drain = self.state.drain_started();
        let waiting = async move {
            tokio::select! {
                () = hello_timeout => false,
                () = drain => true,
            }
        };
        let hello = ctx.spawn(waiting.into_actor(self).map(|draining, act, ctx| {
            if act.phase != Phase::AwaitingHello {
                return;
            }
            if draining {
                act.end(CloseReason::Draining, ctx);
            } else {
                act.close_with(
                    WsClose::HelloTimeout,
                    "no hello frame within the hello timeout",
                    ctx,
                );
            }
        }));
        self.hello_timer = Some(hello);
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        if let Some(live) = &self.live {
            live.feed.do_send(Detach {
                session: self.session.clone(),
            });
        }
    }
}

impl Handler<Tick> for WsSession {
    type Result = ();

    /// The ping (and the missed-pong check) and the idle cursor frame.
    fn handle(&mut self, _: Tick, ctx: &mut Self::Context) {
        let timing = &self.state.settings.timing;
        let tick = tick_interval(timing);
        if self.last_ping_at.elapsed() + tick / 2 >= timing.ping_interval {
            if self.missed_pongs >= timing.missed_pongs {
                tracing::info!(session = %self.session, "dropping connection after missed pongs");
                self.phase = Phase::Closing;
                ctx.stop();
                return;
            }
            self.missed_pongs += 1;
            self.last_ping_at = Instant::now();
            self.outbox.borrow_mut().ping();
        }
        let last_cursor_at = self.outbox.borrow().last_cursor_at();
        if self.phase == Phase::Live && last_cursor_at.elapsed() >= timing.idle_cursor_interval {
            self.send_cursor();
        }
    }
}

impl Handler<FromClient> for WsSession {
    type Result = ();

    fn handle(&mut self, FromClient(item): FromClient, ctx: &mut Self::Context) {
        let Some(item) = item else {
            // The client's frames ended: the connection is over.
            self.phase = Phase::Closing;
            ctx.stop();
            return;
        };
        if self.phase == Phase::Closing {
            return;
        }
        match item {
            Ok(ClientMessage::Text(text)) => self.on_text(&text, ctx),
            Ok(ClientMessage::Binary) => self.violation("binary frames are not allowed", ctx),
            Ok(ClientMessage::Ping(payload)) => self.outbox.borrow_mut().pong(&payload),
            Ok(ClientMessage::Pong) => self.missed_pongs = 0,
            Ok(ClientMessage::Close(reason)) => {
                // Echo the client's close (RFC 6455 §5.5.1), instead of
                // anything still queued: "as soon as practical".
                self.phase = Phase::Closing;
                self.outbox.borrow_mut().close_now(reason);
                ctx.stop();
            }
            Err(InboundError::TooBig) => {
                self.close_with(WsClose::MessageTooBig, "frame exceeds the size limit", ctx)
            }
            Err(InboundError::MessageTooBig) => self.close_with(
                WsClose::MessageTooBig,
                "message exceeds the size limit",
                ctx,
            ),
            // RFC 6455 §8.1, §7.4.1: 1007 for data not of the message's type.
            Err(InboundError::NotUtf8) => {
                tracing::debug!(session = %self.session, "client sent text that is not UTF-8");
                self.close_with(WsClose::InvalidPayload, "text is not valid UTF-8", ctx)
            }
            // Unmasked frames, unknown opcodes, bad lengths, a fragmented
            // control frame (RFC 6455 §5.5), reserved bits set without an
            // extension (§5.2), a stray or interleaved continuation (§5.4),
            // a close code §7.4 does not allow. The client's fault, not the
            // server's: logged at debug.
            Err(InboundError::Protocol(e)) => {
                tracing::debug!(session = %self.session, error = %e, "client broke the websocket protocol");
                self.close_with(
                    WsClose::ProtocolError,
                    &format!("websocket protocol error: {e}"),
                    ctx,
                )
            }
            Err(InboundError::BadLength) => self.close_with(
                WsClose::ProtocolError,
                "websocket protocol error: a 64-bit payload length must have its most significant bit clear (RFC 6455 §5.2)",
                ctx,
            ),
            Err(InboundError::BadCloseCode(code)) => {
                tracing::debug!(session = %self.session, code, "client closed with a code it may not send");
                self.close_with(
                    WsClose::ProtocolError,
                    &format!("websocket protocol error: close code {code} is not one a client may send (RFC 6455 §7.4)"),
                    ctx,
                )
            }
            Err(InboundError::Read(e)) => {
                tracing::debug!(session = %self.session, error = %e, "websocket read failed");
                self.phase = Phase::Closing;
                ctx.stop();
            }
        }
    }
}

impl Handler<Deliver> for WsSession {
    type Result = ();

    fn handle(&mut self, msg: Deliver, _: &mut Self::Context) {
        if self.phase == Phase::Opening {
            // Still counted in the backlog: a replay that takes too long
            // while the room is busy ends as a slow consumer, as before.
            self.held.push(Held::Deliver(msg));
            return;
        }
        self.deliver(msg);
    }
}

impl Handler<Watermark> for WsSession {
    type Result = ();

    fn handle(&mut self, msg: Watermark, _: &mut Self::Context) {
        if self.phase == Phase::Opening {
            self.held.push(Held::Watermark(msg));
            return;
        }
        self.watermark(msg);
    }
}

impl Handler<Close> for WsSession {
    type Result = ();

    fn handle(&mut self, msg: Close, ctx: &mut Self::Context) {
        if msg.reason == CloseReason::Displaced {
            metrics::counter!(crate::metrics::DISPLACEMENTS, "transport" => "ws").increment(1);
        }
        match msg.reason {
            // The socket's task writes this close itself (see `outbound`):
            // the client stopped reading, so nothing queued here would reach it.
            CloseReason::TooSlow => {
                self.phase = Phase::Closing;
                ctx.stop();
            }
            reason => self.end(reason, ctx),
        }
    }
}
