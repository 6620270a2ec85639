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

use super::inbound::FrameGuard;
use super::open::{observe_live_delivery, open_session, OpenFailure, Opened, Resume};
use super::outbound::Drained;
use crate::auth::authenticate;
use crate::auth::Caller;
use crate::connections::{ConnectionPermit, Transport};
use crate::error::{ApiError, Preamble, SessionEnd};
use crate::state::AppState;
use actix::prelude::*;
use actix_http::ws::HandshakeError;
use actix_web::error::PayloadError;
use actix_web::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use actix_web::http::StatusCode;
use actix_web::web::Bytes;
use actix_web::{get, web, HttpRequest, HttpResponse, ResponseError};
use actix_web_actors::ws::{self, CloseCode, CloseReason as WsCloseReason, ProtocolError};
use bytestring::ByteString;
use std::cell::RefCell;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchboard_actors::feed::{BayFeed, Detach};
use switchboard_actors::session::{
    Backlog, Close, CloseReason, Deliver, SessionCursor, SessionHandle, Watermark,
};
use switchboard_protocol::cursor::{EntryId, LogPosition};
use switchboard_protocol::error::{ErrorCode, WsClose};
use switchboard_protocol::event::Event;
use switchboard_protocol::frame::{ClientFrame, ServerFrame};
use switchboard_protocol::ids::SessionId;

/// The upgrade route. Authenticates before upgrading (401 JSON on a bad
/// credential, never a 101).
#[utoipa::path(
    operation_id = "openWebSocket",
    tag = "realtime",
    summary = "WebSocket: the /updates events and cursor, pushed",
    description = "A WebSocket upgrade (RFC 6455), not a JSON endpoint. The credential is checked before the upgrade: `Authorization: Bearer …`, or `?token=…` for clients that cannot set headers. After the 101 the client sends `{\"t\":\"hello\",\"resume\":<cursor|null>}` and the server answers `ready`, replays missed `event` frames, then streams `event` frames each batch followed by a `cursor` frame. The cursor is the same string `/updates` issues. Frames, close codes (4000 displaced, 4001 revoked, 4002 framing violation, 4003 going away) and resume rules: docs/websocket.md.",
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
async fn upgrade(
    state: web::Data<AppState>,
    req: HttpRequest,
    stream: web::Payload,
) -> Result<HttpResponse, actix_web::Error> {
    // Reached only by requests actix-http did not hand to the upgrade
    // service (no `Upgrade: websocket`): the handshake check refuses them
    // once the credential has been checked.
    refuse_if_draining(&state)?;
    let caller = authenticate(&req, true).await?;
    let mut response = match ws::handshake(&req) {
        Ok(response) => response,
        Err(err) => return Ok(handshake_refusal(err)),
    };
    let admitted = admit(&state, caller, req.peer_addr().map(|a| a.ip())).await?;
    Ok(response.streaming(admitted.into_stream(stream)))
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
        last_frame_at: Instant::now(),
        missed_pongs: 0,
        last_ping_at: Instant::now(),
        hello_timer: None,
        cursor_due: false,
        backlog: backlog.clone(),
        oversize: Default::default(),
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
    /// Starts the session over `input` (the bytes the client sends after
    /// the 101) and returns what it writes to the client: encoded frames,
    /// ending with the slow-consumer close if the feed abandons it
    /// ([`Drained`]). The actor runs only while this stream is polled.
    pub fn into_stream<S>(
        mut self,
        input: S,
    ) -> Drained<impl futures_util::Stream<Item = Result<Bytes, actix_web::Error>> + Unpin>
    where
        S: futures_util::Stream<Item = Result<Bytes, PayloadError>> + Unpin + 'static,
    {
        let max_frame = self.session.state.settings.limits.max_ws_frame_bytes;
        let codec = actix_http::ws::Codec::new().max_size(max_frame);
        let guarded = FrameGuard::new(input, max_frame);
        self.session.oversize = guarded.oversize_flag();
        let body = ws::WebsocketContext::with_codec(self.session, guarded, codec);
        Drained::new(body, self.backlog)
    }
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
    /// The entry of the last `cursor` frame sent.
    last_cursor_sent: Option<EntryId>,
}

/// A feed message received while the session was still opening.
enum Held {
    Deliver(Deliver),
    Watermark(Watermark),
}

/// The `cursor` frame of `pos`. Every session of a Bay that a batch
/// reaches names the same position, and an actix-web worker runs many
/// sessions: each worker thread renders a position's frame once and
/// shares the bytes.
fn cursor_frame(pos: LogPosition) -> ByteString {
    thread_local! {
        static LAST: RefCell<Option<(LogPosition, ByteString)>> = const { RefCell::new(None) };
    }
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if let Some((cached, frame)) = last.as_ref() {
            if *cached == pos {
                return frame.clone();
            }
        }
        let cursor = pos.encode();
        let frame = ByteString::from(ServerFrame::Cursor { cursor: &cursor }.to_json());
        *last = Some((pos, frame.clone()));
        frame
    })
}

/// One WebSocket connection of one token.
pub struct WsSession {
    state: AppState,
    caller: Caller,
    session: SessionId,
    phase: Phase,
    live: Option<Live>,
    /// Feed messages that arrived while [`Phase::Opening`], in order; the
    /// attach-before-replay rule needs them after the replay, not dropped.
    held: Vec<Held>,
    /// When the last `cursor` frame went out (for the idle cursor frame).
    last_frame_at: Instant,
    /// Pings sent without a pong since.
    missed_pongs: u32,
    /// When the last ping went out (or the session started).
    last_ping_at: Instant,
    /// The hello timeout (and drain watch), cancelled once `hello`
    /// arrives: every pending future is polled on each turn of the actor,
    /// i.e. on every delivery.
    hello_timer: Option<SpawnHandle>,
    /// Events were written after the last `cursor` frame and a flush of
    /// the cursor is scheduled for the end of this turn of the actor (see
    /// [`WsSession::cursor_after_batch`]).
    cursor_due: bool,
    /// Raised by the inbound [`FrameGuard`] when a frame declared more than the limit.
    oversize: Arc<std::sync::atomic::AtomicBool>,
    /// Live deliveries not yet handled; the feed abandons the session past
    /// `limits.max_outbound_queue_bytes` (see `outbound`).
    backlog: Arc<Backlog>,
    /// Holds this connection's admission slot until the session ends.
    _permit: ConnectionPermit,
}

impl WsSession {
    fn send(&mut self, frame: &ServerFrame<'_>, ctx: &mut ws::WebsocketContext<Self>) {
        self.write(frame.to_json(), ctx);
    }

    /// Writes one text frame.
    fn write(&mut self, text: String, ctx: &mut ws::WebsocketContext<Self>) {
        ctx.text(text);
    }

    /// Sends `reset`: the resume position is not addressable (the 409 of this transport).
    fn send_reset(&mut self, ctx: &mut ws::WebsocketContext<Self>) {
        metrics::counter!(crate::metrics::CURSOR_EXPIRED, "transport" => "ws").increment(1);
        self.send(&ServerFrame::Reset, ctx);
    }

    fn send_event(&mut self, event: &Event, ctx: &mut ws::WebsocketContext<Self>) {
        self.send(&ServerFrame::Event { event }, ctx);
    }

    /// Schedules one `cursor` frame after everything this turn of the
    /// actor writes. The actor context runs every queued mailbox message
    /// before its spawned futures, and the socket is written only after
    /// that, so all deliveries handled in one turn go out as one write
    /// closed by one `cursor` frame. The frame carries the position when it
    /// is written, which covers every event written before it (cursor rule 1).
    fn cursor_after_batch(&mut self, ctx: &mut ws::WebsocketContext<Self>) {
        if std::mem::replace(&mut self.cursor_due, true) {
            return;
        }
        ctx.spawn(actix::fut::ready(()).map(|(), act: &mut Self, ctx| {
            if act.cursor_due && act.phase == Phase::Live {
                act.send_cursor(ctx);
            }
        }));
    }

    /// Sends a `cursor` frame with the current position.
    fn send_cursor(&mut self, ctx: &mut ws::WebsocketContext<Self>) {
        self.cursor_due = false;
        let Some(live) = &mut self.live else { return };
        let pos = live.cursor.position();
        live.last_cursor_sent = Some(pos.entry);
        self.last_frame_at = Instant::now();
        ctx.text(cursor_frame(pos));
    }

    /// Sends an `error` frame with `close`'s code, then closes with its close code.
    fn close_with(&mut self, close: WsClose, message: &str, ctx: &mut ws::WebsocketContext<Self>) {
        if self.phase == Phase::Closing {
            return;
        }
        self.phase = Phase::Closing;
        self.send(
            &ServerFrame::Error {
                code: close,
                message,
            },
            ctx,
        );
        ctx.close(Some(WsCloseReason {
            code: CloseCode::Other(close.close_code()),
            description: Some(message.to_owned()),
        }));
        ctx.stop();
    }

    /// Ends the session as [`SessionEnd::of`] says for `reason`.
    fn end(&mut self, reason: CloseReason, ctx: &mut ws::WebsocketContext<Self>) {
        if self.phase == Phase::Closing {
            return;
        }
        let end = SessionEnd::of(reason);
        match end.preamble {
            Preamble::None => {}
            Preamble::Reset => self.send_reset(ctx),
            Preamble::Cursor => self.send_cursor(ctx),
        }
        self.close_with(end.ws, end.message, ctx);
    }

    fn violation(&mut self, message: &str, ctx: &mut ws::WebsocketContext<Self>) {
        self.close_with(WsClose::FramingViolation, message, ctx);
    }

    fn on_text(&mut self, text: &str, ctx: &mut ws::WebsocketContext<Self>) {
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
    fn on_hello(&mut self, resume: Option<String>, ctx: &mut ws::WebsocketContext<Self>) {
        self.phase = Phase::Opening;
        // An undecodable resume is "not addressable": ready, then reset.
        // An empty one means "no cursor", as on /updates.
        let parsed = Resume::parse(resume.as_deref());
        let handle = SessionHandle::of(&ctx.address(), self.backlog.clone());
        let fut = open_session(
            self.state.clone(),
            self.caller.clone(),
            self.session.clone(),
            handle,
            parsed.position(),
            usize::MAX,
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
        ctx: &mut ws::WebsocketContext<Self>,
    ) {
        if self.phase == Phase::Closing {
            // The connection ended while opening: let go of the feed.
            if let Ok(Opened { feed, .. }) = &res {
                self.detach_from(feed);
            }
            return;
        }
        self.send(
            &ServerFrame::Ready {
                cursor: resume.as_deref(),
            },
            ctx,
        );
        match res {
            Ok(Opened {
                feed,
                cursor,
                events,
                ..
            }) => {
                self.go_live(feed, cursor);
                if parsed == Resume::Unaddressable {
                    self.send_reset(ctx);
                }
                for replayed in &events {
                    self.send_event(&replayed.event, ctx);
                }
                self.send_cursor(ctx);
                self.release_held(ctx);
            }
            Err(OpenFailure::Expired { feed, cursor }) => {
                self.go_live(feed, cursor);
                self.send_reset(ctx);
                self.send_cursor(ctx);
                self.release_held(ctx);
            }
            Err(OpenFailure::Superseded { .. }) => self.end(CloseReason::Displaced, ctx),
            Err(OpenFailure::Revoked { feed }) => {
                self.detach_from(&feed);
                self.end(CloseReason::Revoked, ctx)
            }
            Err(OpenFailure::Failed(err)) => {
                let err = ApiError::from(err);
                self.close_with(err.ws_close(), &err.message, ctx)
            }
        }
    }

    /// Streams from `cursor` on, fed by `feed`.
    fn go_live(&mut self, feed: Addr<BayFeed>, cursor: SessionCursor) {
        self.live = Some(Live {
            feed,
            cursor,
            last_cursor_sent: None,
        });
        self.phase = Phase::Live;
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
    fn release_held(&mut self, ctx: &mut ws::WebsocketContext<Self>) {
        for held in std::mem::take(&mut self.held) {
            match held {
                Held::Deliver(msg) => self.deliver(msg, ctx),
                Held::Watermark(msg) => self.watermark(msg),
            }
        }
    }

    /// Sends a live batch (see [`Handler<Deliver>`]), then schedules one
    /// `cursor` frame for it.
    fn deliver(&mut self, msg: Deliver, ctx: &mut ws::WebsocketContext<Self>) {
        self.backlog.handled(msg.bytes);
        if self.phase != Phase::Live {
            return;
        }
        let Some(live) = &mut self.live else { return };
        observe_live_delivery(&msg.records, &live.cursor, Transport::Ws);
        // Frames come pre-rendered from the shared record (one serialization
        // per message and verdict, not one per session).
        let participant = &self.caller.principal.participant.id;
        let mut wrote = false;
        for record in msg.records.iter() {
            if live.cursor.admits(record) {
                if let Some(frame) = record.ws_event_frame(participant) {
                    ctx.text(frame);
                    wrote = true;
                }
            }
        }
        live.cursor.advance(msg.through);
        if wrote {
            self.cursor_after_batch(ctx);
        }
    }

    fn watermark(&mut self, msg: Watermark) {
        if let Some(live) = &mut self.live {
            live.cursor.advance(msg.through);
        }
    }
}

impl Actor for WsSession {
    type Context = ws::WebsocketContext<Self>;

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
        // One timer for the ping and the idle cursor frame: the actor polls
        // every pending timer on each turn, i.e. on every delivery. It ticks
        // at the shorter of the ping interval and a fifth of the idle cursor
        // interval (5 s at the defaults); a ping goes out on the first tick
        // at least one ping interval after the last (half a tick of slack
        // absorbs timer jitter).
        let ping_every = timing.ping_interval;
        let idle = timing.idle_cursor_interval;
        let tick = ping_every.min(idle / 5).max(Duration::from_millis(50));
        let missed_limit = timing.missed_pongs;
        ctx.run_interval(tick, move |act, ctx| {
            if act.last_ping_at.elapsed() + tick / 2 >= ping_every {
                if act.missed_pongs >= missed_limit {
                    tracing::info!(session = %act.session, "dropping connection after missed pongs");
                    act.phase = Phase::Closing;
                    ctx.stop();
                    return;
                }
                act.missed_pongs += 1;
                act.last_ping_at = Instant::now();
                ctx.ping(b"");
            }
            if act.phase == Phase::Live && act.last_frame_at.elapsed() >= idle {
                act.send_cursor(ctx);
            }
        });
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        if let Some(live) = &self.live {
            live.feed.do_send(Detach {
                session: self.session.clone(),
            });
        }
    }
}

impl StreamHandler<Result<ws::Message, ProtocolError>> for WsSession {
    fn handle(&mut self, item: Result<ws::Message, ProtocolError>, ctx: &mut Self::Context) {
        if self.phase == Phase::Closing {
            return;
        }
        match item {
            Ok(ws::Message::Text(text)) => self.on_text(&text, ctx),
            Ok(ws::Message::Binary(_)) => self.violation("binary frames are not allowed", ctx),
            Ok(ws::Message::Continuation(_)) => {
                self.violation("fragmented frames are not supported", ctx)
            }
            Ok(ws::Message::Ping(p)) => ctx.pong(&p),
            Ok(ws::Message::Pong(_)) => self.missed_pongs = 0,
            Ok(ws::Message::Close(reason)) => {
                self.phase = Phase::Closing;
                ctx.close(reason);
                ctx.stop();
            }
            Ok(ws::Message::Nop) => {}
            Err(ProtocolError::Overflow) => {
                self.close_with(WsClose::MessageTooBig, "frame exceeds the size limit", ctx)
            }
            Err(_) if self.oversize.load(std::sync::atomic::Ordering::Acquire) => {
                self.close_with(WsClose::MessageTooBig, "frame exceeds the size limit", ctx)
            }
            // A continuation with no message to continue, or a new message
            // inside one: fragmentation, which the framing contract excludes.
            Err(ProtocolError::ContinuationNotStarted | ProtocolError::ContinuationStarted) => {
                self.violation("fragmented frames are not supported", ctx)
            }
            // The decoder's one text error: the payload is not UTF-8, so
            // not a JSON frame either.
            Err(ProtocolError::Io(e))
                if e.kind() == std::io::ErrorKind::Other && e.to_string().contains("utf-8") =>
            {
                self.violation("text frame is not valid UTF-8", ctx)
            }
            Err(
                e @ (ProtocolError::UnmaskedFrame
                | ProtocolError::MaskedFrame
                | ProtocolError::InvalidOpcode(_)
                | ProtocolError::InvalidLength(_)
                | ProtocolError::BadOpCode
                // A fragmented control frame (RFC 6455 §5.5).
                | ProtocolError::ContinuationFragment(_)),
            ) => self.close_with(
                WsClose::ProtocolError,
                &format!("websocket protocol error: {e}"),
                ctx,
            ),
            // Reserved bits set without an extension (RFC 6455 §5.2): the
            // decoder reports it as invalid data.
            Err(ProtocolError::Io(e)) if e.kind() == std::io::ErrorKind::InvalidData => self
                .close_with(
                    WsClose::ProtocolError,
                    &format!("websocket protocol error: {e}"),
                    ctx,
                ),
            Err(e) => {
                tracing::debug!(session = %self.session, error = %e, "websocket protocol error");
                self.phase = Phase::Closing;
                ctx.stop();
            }
        }
    }
}

impl Handler<Deliver> for WsSession {
    type Result = ();

    fn handle(&mut self, msg: Deliver, ctx: &mut Self::Context) {
        if self.phase == Phase::Opening {
            // Still counted in the backlog: a replay that takes too long
            // while the room is busy ends as a slow consumer, as before.
            self.held.push(Held::Deliver(msg));
            return;
        }
        self.deliver(msg, ctx);
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
            // The response stream writes this close itself (see `outbound`):
            // the session stopped reading, so nothing queued here would be sent.
            CloseReason::TooSlow => {
                self.phase = Phase::Closing;
                ctx.stop();
            }
            reason => self.end(reason, ctx),
        }
    }
}
