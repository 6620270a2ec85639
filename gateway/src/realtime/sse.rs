//! `GET /api/agent-api/events`: the events of `/updates` and `/ws` as
//! Server-Sent Events (`text/event-stream`, WHATWG HTML §9.2).
//!
//! Stream grammar, one block per event, blank-line separated:
//!
//! ```text
//! id: <cursor after this event>
//! data: <the event object, exactly as /updates and /ws carry it>
//!
//! id: <cursor>
//! event: cursor
//! data: {"cursor":"<cursor>"}
//!
//! : heartbeat
//! ```
//!
//! Unnamed events (`message` to a browser's `EventSource`) carry the event
//! JSON; every event kind `/ws` carries flows through unchanged, since the
//! payload is the session's own projection of the log record. The named
//! events are the stream's control frames: `cursor` (once right after the
//! replay of every stream that opens, even an empty replay, and after each
//! page of a long one: see [`stream_page`]; then whenever
//! the position moved past the last `id:` without an event, checked at each
//! heartbeat),
//! `reset` (the resume position is not addressable: catch up over REST; the
//! stream continues from now) and `close` (`{code, message}` with the codes
//! of `/ws`'s `error` frame, right before the server ends the stream).
//!
//! Resume: the `Last-Event-ID` header (what `EventSource` sends on its own
//! reconnects) or else `?cursor=` resumes exactly like `hello.resume` on
//! `/ws`. A comment heartbeat goes out every `timing.sse_heartbeat`.
//!
//! A stream is a session like the others: it displaces (and is displaced
//! by) any `/ws` or `/updates` of the same token, draws on the `/updates`
//! connect bucket, and is ended by the feed on rotation, drain or reset
//! ([`SessionEnd::of`] maps each end, as for the other transports).
//! Backpressure: bytes the client has not read count against
//! `limits.max_outbound_queue_bytes`; past it the feed gives up on the
//! session and the stream ends with `SLOW_CONSUMER` after what it already
//! holds (resume with the last id, nothing is lost).

use super::open::{
    continue_replay, observe_live_delivery, open_session, stream_page, unless_gone, OpenFailure,
    Opened, ReplayPage, ReplayRest, Replayed, Resume,
};
use crate::auth::authenticate;
use crate::auth::Caller;
use crate::connections::{ConnectionPermit, Transport};
use crate::error::{ApiError, Preamble, SessionEnd};
use crate::mcp::stream::{Handover, McpStream};
use crate::state::AppState;
use actix::prelude::*;
use actix_web::web::Bytes;
use actix_web::{get, web, HttpRequest, HttpResponse};
use futures_util::Stream;
use serde::Deserialize;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use switchboard_actors::feed::{BayFeed, Detach};
use switchboard_actors::session::{
    Backlog, Close, CloseReason, Deliver, SessionCursor, SessionHandle, Watermark,
};
use switchboard_protocol::cursor::{EntryId, LogPosition};
use switchboard_protocol::error::{ErrorCode, WsClose};
use switchboard_protocol::event::Event;
use switchboard_protocol::ids::SessionId;
use tokio::sync::{mpsc, oneshot};

/// The header `EventSource` sends on reconnect with the last `id:` it saw.
pub const LAST_EVENT_ID: &str = "Last-Event-ID";

#[derive(Deserialize)]
struct EventsQuery {
    cursor: Option<String>,
}

/// The route. See the module docs.
#[utoipa::path(
    operation_id = "streamEvents",
    tag = "realtime",
    summary = "Server-Sent Events: the /updates events and cursor, pushed",
    description = "A `text/event-stream` of the same events `/updates` and `/ws` carry. Each event is `id: <cursor after it>` and `data: <event JSON>`; named events: `cursor` (`{cursor}`, a position past entries addressed to others, also sent after the replay and when idle), `reset` (the resume position is not addressable: catch up over REST; the stream continues from now) and `close` (`{code, message}` with the codes of the WebSocket `error` frame, e.g. DISPLACED, CREDENTIAL_REVOKED, GOING_AWAY, just before the server ends the stream). A comment heartbeat every 20 s. Resume with the `Last-Event-ID` header (sent by EventSource on reconnect) or `?cursor=`; without either the stream starts at now. One session per token across /ws, /events and /updates. Details: docs/sse.md.",
    params(
        ("cursor" = Option<String>, Query, description = "Opaque cursor to resume after (from an `id:`, a WebSocket `cursor` frame or an `/updates` answer); `Last-Event-ID` wins when both are present"),
        ("Last-Event-ID" = Option<String>, Header, description = "The last `id:` the client saw; resumes after it"),
    ),
    responses(
        (status = 200, description = "The event stream (`text/event-stream`); it ends after a `close` event", content_type = "text/event-stream", body = crate::openapi::schemas::SseEvent, headers(("Cache-Control" = String, description = "no-store"), ("X-Accel-Buffering" = String, description = "`no`: proxies must not buffer the stream"))),
        (status = 400, description = "INVALID_REQUEST: malformed query string", body = switchboard_protocol::error::ErrorBody),
        (status = 401, description = "UNAUTHORIZED: missing, unknown, rotated or revoked token", body = switchboard_protocol::error::ErrorBody),
        (status = 429, description = "UPDATES_RATE_LIMITED: connecting faster than the connect bucket (the /updates bucket, 20/min by default) allows; RATE_LIMITED: too many open connections from this address", body = switchboard_protocol::error::ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 500, description = "INTERNAL", body = switchboard_protocol::error::ErrorBody),
        (status = 503, description = "UNAVAILABLE: the node is draining or full; STORE_UNAVAILABLE: the store cannot be reached", body = switchboard_protocol::error::ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = []), ("agent_token_query" = [])),
)]
#[get("/events")]
async fn stream_events(
    state: web::Data<AppState>,
    req: HttpRequest,
    query: web::Query<EventsQuery>,
) -> Result<HttpResponse, ApiError> {
    if state.is_draining() {
        return Err(ApiError::new(
            ErrorCode::Unavailable,
            "this node is draining; connect to another",
        )
        .retry_after(Duration::from_secs(1)));
    }
    let caller = authenticate(&req, true).await?;
    // The header is newer than the query: EventSource keeps the URL (and its
    // ?cursor=) across reconnects and adds the header.
    let resume = resume_of(
        req.headers().get(LAST_EVENT_ID).map(|v| v.as_bytes()),
        query.cursor.as_deref(),
    );
    serve(state.get_ref(), state.client_of(&req), caller, resume, None).await
}

/// Opens a stream for `caller` (authenticated already) from `resume`, as
/// `/events` does: drawn on the `/updates` connect bucket, admitted per IP
/// and node, displacing the token's other connections. `mcp`: the stream
/// of an MCP session (`GET /api/mcp`), every block a JSON-RPC
/// notification; `None` for `/events`.
///
/// # Errors
/// 503 while draining, 429 from the bucket or admission, and the refusals
/// of a session opening (401 revoked, 403 suspended, 503 store).
pub(crate) async fn serve(
    state: &AppState,
    peer: Option<std::net::IpAddr>,
    caller: Caller,
    resume: Resume,
    mcp: Option<McpStream>,
) -> Result<HttpResponse, ApiError> {
    if state.is_draining() {
        return Err(ApiError::new(
            ErrorCode::Unavailable,
            "this node is draining; connect to another",
        )
        .retry_after(Duration::from_secs(1)));
    }
    state.limits.check_updates(&caller.principal.token).await?;
    let permit = state
        .connections
        .admit(peer, &caller.principal.token, Transport::Sse)?;
    let backlog = Backlog::bounded(state.settings.limits.max_outbound_queue_bytes);
    let (tx, rx) = mpsc::unbounded_channel();
    let (opened_tx, opened_rx) = oneshot::channel();
    SseSession {
        state: state.clone(),
        caller,
        session: SessionId(format!("sse_{}", ulid::Ulid::new())),
        resume,
        out: tx,
        opened: Some(opened_tx),
        live: None,
        backlog: backlog.clone(),
        ended: false,
        mcp,
        _permit: permit,
    }
    .start();
    opened_rx
        .await
        .map_err(|_| ApiError::new(ErrorCode::Internal, "the stream ended before it opened"))??;
    Ok(HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("Cache-Control", "no-store"))
        // nginx buffers proxied responses unless told otherwise.
        .insert_header(("X-Accel-Buffering", "no"))
        .streaming(Outbound { rx, backlog }))
}

/// Where a stream resumes: the `Last-Event-ID` header when it is present
/// and not blank, else `?cursor=`. A header that is not visible ASCII (a
/// cursor never is: cursors are base64url) is an unreadable cursor like any
/// other, answered with `reset`, never silently ignored (which would
/// start the stream at now, or at an older `?cursor=`, without telling).
pub(crate) fn resume_of(header: Option<&[u8]>, query: Option<&str>) -> Resume {
    match header {
        Some(raw) if !raw.iter().all(u8::is_ascii_whitespace) => match std::str::from_utf8(raw) {
            Ok(text) if text.is_ascii() => Resume::parse(Some(text)),
            _ => Resume::Unaddressable,
        },
        _ => Resume::parse(query),
    }
}

/// Registers the route under `/api/agent-api`.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(stream_events);
}

/// Bytes for the response, and the backlog bytes they settle once written.
struct Chunk {
    bytes: Bytes,
    /// What the feed charged for the records in `bytes`; given back to the
    /// [`Backlog`] when the response takes the chunk.
    credit: usize,
    /// Told when the response takes this chunk, i.e. once it took every
    /// chunk before it: a replay reads its next page then.
    taken: Option<oneshot::Sender<()>>,
}

/// The response body: the session's chunks as the HTTP layer takes them.
/// The HTTP layer polls only while the socket accepts bytes, so `credit`
/// comes back at the pace the client reads (the backpressure signal).
struct Outbound {
    rx: mpsc::UnboundedReceiver<Chunk>,
    backlog: Arc<Backlog>,
}

impl Stream for Outbound {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Option<Self::Item>> {
        loop {
            match self.rx.poll_recv(cx) {
                Poll::Ready(Some(chunk)) => {
                    self.backlog.handled(chunk.credit);
                    if let Some(taken) = chunk.taken {
                        let _ = taken.send(());
                    }
                    if chunk.bytes.is_empty() {
                        continue;
                    }
                    return Poll::Ready(Some(Ok(chunk.bytes)));
                }
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl Drop for Outbound {
    fn drop(&mut self) {
        // Whatever is still queued will never be written.
        while let Ok(chunk) = self.rx.try_recv() {
            self.backlog.handled(chunk.credit);
        }
    }
}

struct Live {
    feed: Addr<BayFeed>,
    cursor: SessionCursor,
    /// The entry of the last `id:` written.
    last_id: Option<EntryId>,
}

/// One `GET /events` stream of one token.
pub struct SseSession {
    state: AppState,
    caller: Caller,
    session: SessionId,
    resume: Resume,
    /// Chunks for the response body; closed (dropped) when the session ends.
    out: mpsc::UnboundedSender<Chunk>,
    /// Told once whether the stream opened (`Ok`) or which HTTP error to
    /// answer instead; `None` afterwards.
    opened: Option<oneshot::Sender<Result<(), ApiError>>>,
    live: Option<Live>,
    backlog: Arc<Backlog>,
    /// Set once the `close` event went out: nothing follows it.
    ended: bool,
    /// The MCP session this is the stream of (`GET /api/mcp`), if any.
    mcp: Option<McpStream>,
    /// Holds this connection's admission slot until the session ends.
    _permit: ConnectionPermit,
}

/// One SSE block: optional `id:` and `event:` lines, then `data:`. `data`
/// is single-line JSON, so it needs no splitting into several `data:` lines.
fn block(id: Option<&str>, event: Option<&str>, data: &str) -> String {
    let mut out = String::with_capacity(data.len() + 64);
    if let Some(id) = id {
        out.push_str("id: ");
        out.push_str(id);
        out.push('\n');
    }
    if let Some(event) = event {
        out.push_str("event: ");
        out.push_str(event);
        out.push('\n');
    }
    out.push_str("data: ");
    out.push_str(data);
    out.push_str("\n\n");
    out
}

fn event_json(event: &Event) -> String {
    // Events are plain structs with string keys: serializing cannot fail.
    serde_json::to_string(event).expect("events always serialize")
}

impl SseSession {
    fn write(&mut self, text: String, credit: usize, ctx: &mut Context<Self>) {
        let chunk = Chunk {
            bytes: Bytes::from(text),
            credit,
            taken: None,
        };
        if let Err(mpsc::error::SendError(chunk)) = self.out.send(chunk) {
            // The client went away.
            self.backlog.handled(chunk.credit);
            ctx.stop();
        }
    }

    /// The cursor naming `entry` in the session's log epoch.
    fn position(&self, entry: EntryId) -> Option<LogPosition> {
        let live = self.live.as_ref()?;
        Some(LogPosition {
            epoch: live.cursor.position().epoch,
            entry,
        })
    }

    /// Renders events, each with the cursor after it: the entry it came
    /// from (every earlier entry addressed to the session was written
    /// before it: the feed and the replay go in log order), and for the
    /// last one `through` (the batch's end).
    fn render(&mut self, events: &[Replayed], through: EntryId) -> String {
        let mut out = String::new();
        for (i, r) in events.iter().enumerate() {
            let entry = if i + 1 == events.len() {
                through
            } else {
                r.entry
            };
            let Some(pos) = self.position(entry) else {
                break;
            };
            let id = pos.encode();
            match &self.mcp {
                None => out.push_str(&block(Some(&id), None, &event_json(&r.event))),
                Some(mcp) => out.push_str(&mcp.event(&id, &r.event)),
            }
        }
        if let (Some(live), Some(last)) = (self.live.as_mut(), events.last()) {
            live.last_id = Some(through.max(last.entry));
        }
        out
    }

    /// Writes a `cursor` event when the position moved past the last `id:`.
    fn write_cursor(&mut self, force: bool, ctx: &mut Context<Self>) {
        let Some(live) = &mut self.live else { return };
        let pos = live.cursor.position();
        if !force && live.last_id.is_some_and(|last| last >= pos.entry) {
            return;
        }
        live.last_id = Some(pos.entry);
        let cursor = pos.encode();
        let data = serde_json::json!({ "cursor": cursor });
        let text = self.control(Some(&cursor), "cursor", data);
        self.write(text, 0, ctx);
    }

    /// Writes `reset`: the resume position is not addressable (the 409 of
    /// this transport); its `id:` is the head the stream continues from.
    fn write_reset(&mut self, ctx: &mut Context<Self>) {
        metrics::counter!(crate::metrics::CURSOR_EXPIRED, "transport" => "sse").increment(1);
        let Some(live) = &mut self.live else { return };
        let pos = live.cursor.position();
        live.last_id = Some(pos.entry);
        let cursor = pos.encode();
        let data = serde_json::json!({
            "cursor": cursor,
            "message": "the resume cursor is not addressable; catch up over REST",
        });
        let text = self.control(Some(&cursor), "reset", data);
        self.write(text, 0, ctx);
    }

    /// Writes the `close` event and ends the stream.
    fn close_with(&mut self, code: WsClose, message: &str, ctx: &mut Context<Self>) {
        if self.ended {
            return;
        }
        self.ended = true;
        let data = serde_json::json!({ "code": code, "message": message });
        let text = self.control(None, "close", data);
        self.write(text, 0, ctx);
        ctx.stop();
    }

    /// A control block (`cursor`, `reset`, `close`): a named SSE event on
    /// `/events`, a notification on an MCP stream.
    fn control(&self, id: Option<&str>, name: &str, data: serde_json::Value) -> String {
        match &self.mcp {
            None => block(id, Some(name), &data.to_string()),
            Some(mcp) => mcp.control(id, name, data),
        }
    }

    /// Ends the session as [`SessionEnd::of`] says for `reason`.
    fn end(&mut self, reason: CloseReason, ctx: &mut Context<Self>) {
        if self.ended {
            return;
        }
        let end = SessionEnd::of(reason);
        match end.preamble {
            Preamble::None => {}
            Preamble::Reset => self.write_reset(ctx),
            Preamble::Cursor => self.write_cursor(true, ctx),
        }
        self.close_with(end.ws, end.message, ctx);
    }

    fn opened(&mut self, result: Result<(), ApiError>) {
        if let Some(tx) = self.opened.take() {
            let _ = tx.send(result);
        }
    }

    fn on_open(&mut self, res: Result<Opened, OpenFailure>, ctx: &mut Context<Self>) {
        match res {
            Ok(Opened {
                feed,
                cursor,
                events,
                rest,
            }) => {
                self.live = Some(Live {
                    feed,
                    cursor,
                    last_id: None,
                });
                self.opened(Ok(()));
                if self.resume == Resume::Unaddressable {
                    self.write_reset(ctx);
                }
                self.write_page(&events, rest, ctx);
            }
            Err(OpenFailure::Expired { feed, cursor }) => {
                self.live = Some(Live {
                    feed,
                    cursor,
                    last_id: None,
                });
                self.opened(Ok(()));
                self.write_reset(ctx);
                // Nothing is replayed after a reset: the replay is over.
                self.write_cursor(true, ctx);
            }
            Err(OpenFailure::Superseded { .. }) => {
                self.opened(Ok(()));
                self.end(CloseReason::Displaced, ctx);
            }
            Err(OpenFailure::Revoked { feed }) => {
                feed.do_send(Detach {
                    session: self.session.clone(),
                });
                self.opened(Err(SessionEnd::of(CloseReason::Revoked)
                    .updates
                    .unwrap_or_else(ApiError::unauthorized)));
                ctx.stop();
            }
            Err(OpenFailure::Suspended { feed, suspension }) => {
                feed.do_send(Detach {
                    session: self.session.clone(),
                });
                self.opened(Err(ApiError::suspended(suspension)));
                ctx.stop();
            }
            Err(OpenFailure::Failed(err)) => {
                self.opened(Err(err.into()));
                ctx.stop();
            }
        }
    }
}

impl SseSession {
    /// Writes a page of the replay and a `cursor` event after it (always,
    /// even when the last event's `id:` already names the position: a
    /// client knows the page, and after the last one the replay, is over;
    /// also the first position of a stream started at now). Then reads the
    /// next page, if any.
    fn write_page(
        &mut self,
        events: &[Replayed],
        rest: Option<ReplayRest>,
        ctx: &mut Context<Self>,
    ) {
        let Some(live) = &self.live else { return };
        let through = live.cursor.entry();
        let text = self.render(events, through);
        if !text.is_empty() {
            self.write(text, 0, ctx);
        }
        self.write_cursor(true, ctx);
        if let Some(rest) = rest {
            self.read_next_page(rest, ctx);
        }
    }

    /// Reads the replay's next page once the response took everything
    /// written so far. The session waits meanwhile (`ctx.wait`): the
    /// feed's live deliveries stay in its mailbox until the replay is over.
    fn read_next_page(&mut self, rest: ReplayRest, ctx: &mut Context<Self>) {
        let Some(live) = &self.live else { return };
        let (taken, on_taken) = oneshot::channel();
        let marker = Chunk {
            bytes: Bytes::new(),
            credit: 0,
            taken: Some(taken),
        };
        if self.out.send(marker).is_err() {
            return ctx.stop();
        }
        let next = continue_replay(self.state.clone(), rest, live.cursor.clone());
        let fut = async move {
            // An error: the response was dropped, the client is gone.
            on_taken.await.ok()?;
            Some(next.await)
        };
        ctx.wait(fut.into_actor(self).map(|res, act, ctx| match res {
            None => ctx.stop(),
            Some(Ok(ReplayPage {
                cursor,
                events,
                rest,
            })) => {
                if let Some(live) = &mut act.live {
                    live.cursor = cursor;
                }
                act.write_page(&events, rest, ctx);
            }
            Some(Err(OpenFailure::Expired { feed, cursor })) => {
                act.live = Some(Live {
                    feed,
                    cursor,
                    last_id: None,
                });
                act.write_reset(ctx);
                act.write_cursor(true, ctx);
            }
            Some(Err(OpenFailure::Failed(err))) => {
                let err = ApiError::from(err);
                act.close_with(err.ws_close(), &err.message, ctx);
            }
            // Only an opening is superseded or revoked; the feed ends a
            // live session for those with a `Close`.
            Some(Err(
                OpenFailure::Superseded { .. }
                | OpenFailure::Revoked { .. }
                | OpenFailure::Suspended { .. },
            )) => {}
        }));
    }
}

impl Actor for SseSession {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        if let Some(mcp) = &self.mcp {
            mcp.started(ctx.address());
        }
        let transport = if self.mcp.is_some() {
            switchboard_actors::session::Transport::Mcp
        } else {
            switchboard_actors::session::Transport::Sse
        };
        let handle = SessionHandle::of(&ctx.address(), self.backlog.clone()).via(transport);
        let fut = open_session(
            self.state.clone(),
            self.caller.clone(),
            self.session.clone(),
            handle,
            self.resume.position(),
            stream_page(&self.state),
        );
        // The opening stops if the client drops the response meanwhile.
        let out = self.out.clone();
        let fut = async move { unless_gone(fut, out.closed()).await };
        ctx.wait(fut.into_actor(self).map(|res, act, ctx| match res {
            Some(res) => act.on_open(res, ctx),
            None => ctx.stop(),
        }));
        let timing = &self.state.settings.timing;
        ctx.run_interval(timing.sse_heartbeat, |act, ctx| {
            if act.ended {
                return;
            }
            act.write_cursor(false, ctx);
            act.write(": heartbeat\n\n".to_owned(), 0, ctx);
        });
        // Stop promptly for a client that went away (detach, free the slot).
        ctx.run_interval(Duration::from_millis(500), |act, ctx| {
            if act.out.is_closed() {
                ctx.stop();
            }
        });
    }

    fn stopped(&mut self, ctx: &mut Self::Context) {
        if let Some(mcp) = &self.mcp {
            let cursor = self.live.as_ref().map(|l| l.cursor.position().encode());
            mcp.stopped(&ctx.address(), cursor);
        }
        if let Some(live) = &self.live {
            live.feed.do_send(Detach {
                session: self.session.clone(),
            });
        }
        self.opened(Err(ApiError::new(
            ErrorCode::Internal,
            "the stream stopped before it opened",
        )));
    }
}

impl Handler<Deliver> for SseSession {
    type Result = ();

    fn handle(&mut self, msg: Deliver, ctx: &mut Self::Context) {
        let Some(live) = &mut self.live else {
            self.backlog.handled(msg.bytes);
            return;
        };
        if self.ended {
            self.backlog.handled(msg.bytes);
            return;
        }
        let participant = &self.caller.principal.participant.id;
        let events: Vec<Replayed> = msg
            .records
            .iter()
            .filter(|r| live.cursor.admits(r))
            .filter_map(|r| {
                r.event_for(participant)
                    .map(|event| Replayed { entry: r.id, event })
            })
            .collect();
        observe_live_delivery(&msg.records, &live.cursor, Transport::Sse);
        live.cursor.advance(msg.through);
        if events.is_empty() {
            self.backlog.handled(msg.bytes);
            return;
        }
        let text = self.render(&events, msg.through);
        self.write(text, msg.bytes, ctx);
    }
}

impl Handler<Watermark> for SseSession {
    type Result = ();

    fn handle(&mut self, msg: Watermark, _: &mut Self::Context) {
        if let Some(live) = &mut self.live {
            live.cursor.advance(msg.through);
        }
    }
}

impl Handler<Close> for SseSession {
    type Result = ();

    fn handle(&mut self, msg: Close, ctx: &mut Self::Context) {
        if msg.reason == CloseReason::Displaced {
            metrics::counter!(crate::metrics::DISPLACEMENTS, "transport" => "sse").increment(1);
            if let Some(mcp) = &self.mcp {
                mcp.displaced();
            }
        }
        self.end(msg.reason, ctx);
    }
}

impl Handler<Handover> for SseSession {
    type Result = Option<String>;

    /// Ends the stream quietly after a final `cursor`, detached from the
    /// feed before answering, so the listener taking over attaches after
    /// it (the feed's mailbox keeps the order) and displaces nothing.
    fn handle(&mut self, _: Handover, ctx: &mut Self::Context) -> Option<String> {
        if self.ended {
            return None;
        }
        self.write_cursor(true, ctx);
        self.ended = true;
        let live = self.live.take()?;
        live.feed.do_send(Detach {
            session: self.session.clone(),
        });
        ctx.stop();
        Some(live.cursor.position().encode())
    }
}

#[cfg(test)]
mod tests {
    use super::{block, resume_of, Resume};

    #[test]
    fn an_unreadable_last_event_id_is_unaddressable_and_wins_over_the_query() {
        assert_eq!(
            resume_of(Some("curs\u{f6}r".as_bytes()), None),
            Resume::Unaddressable
        );
        assert_eq!(resume_of(Some(&[0xff, 0xfe]), None), Resume::Unaddressable);
        assert_eq!(
            resume_of(Some(b"\xc3\xa9"), Some("also-bad")),
            Resume::Unaddressable
        );
        assert_eq!(resume_of(Some(b"  "), None), Resume::Now);
        assert_eq!(resume_of(None, None), Resume::Now);
        assert_eq!(resume_of(Some(b"nope"), None), Resume::Unaddressable);
    }

    #[test]
    fn blocks_are_id_event_data_and_a_blank_line() {
        assert_eq!(
            block(Some("c1"), None, r#"{"type":"message"}"#),
            "id: c1\ndata: {\"type\":\"message\"}\n\n"
        );
        assert_eq!(
            block(Some("c2"), Some("cursor"), r#"{"cursor":"c2"}"#),
            "id: c2\nevent: cursor\ndata: {\"cursor\":\"c2\"}\n\n"
        );
        assert_eq!(
            block(None, Some("close"), "{}"),
            "event: close\ndata: {}\n\n"
        );
    }
}
