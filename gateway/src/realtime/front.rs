//! Where every HTTP connection starts: held `/updates` polls are served
//! straight from the socket, everything else by actix-http's dispatcher.
//!
//! A long-poll spends up to 30 s waiting (protocol §11, `/updates`). Inside
//! actix-http it would keep the dispatcher's 8 KiB read and write buffers,
//! the request head and the app's middleware futures for all that time:
//! about 31 KiB a poll against 11 KiB for an idle WebSocket. So a
//! connection's request head is first read here, into a buffer that grows
//! only as the head does, and decoded with actix-http's own h1 [`Codec`]
//! (the same parser and limits, and the same encoding of the answer). A
//! `GET` of [`UPDATES_PATH`] over HTTP/1.1 with no upgrade is served here
//! (after dropping the body some clients send with it) as the app's route
//! serves it ([`updates::answer`]): the
//! same authentication, checks, log line, metrics and `x-request-id`. Once
//! the head is read only the socket, the codec and the poll itself are
//! held, and the connection then waits for its next request the same way
//! (keep-alive).
//!
//! Any other request goes to the dispatcher together with the bytes read so
//! far ([`JsonBadRequest::with_read_ahead`]), and the dispatcher serves that
//! connection from then on, later polls on it included. Clients that only
//! poll (the seed CLIs' `listen`, SDK loops) keep the small path; one that
//! mixes posts and polls on one keep-alive connection pays the dispatcher's
//! cost for it, as before.

use super::updates::{self, UpdatesQuery};
use super::upgrade::{head_and_body, Socket};
use crate::auth::{authenticate_token, presented_token};
use crate::error::{invalid_query, ApiError};
use crate::malformed::{linger, JsonBadRequest};
use crate::middleware::body_deadline::body_timed_out;
use crate::middleware::request_log;
use crate::state::AppState;
use actix_codec::{Decoder, Encoder};
use actix_http::body::MessageBody;
use actix_http::h1::{Codec, Message, MessageType};
use actix_http::header::{HeaderName, HeaderValue};
use actix_http::{ConnectionType, Method, Protocol, Request, ServiceConfig, Version};
use actix_server::GracefulShutdownSignal;
use actix_service::Service;
use actix_web::{web, HttpResponse, ResponseError};
use bytes::BytesMut;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};
use switchboard_protocol::error::ErrorCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tracing::Instrument;

/// The route served here (protocol §11, `/updates`).
pub const UPDATES_PATH: &str = "/api/agent-api/updates";

/// How a poll's request line starts; a head that does not is not read
/// further here.
const POLL_LINE: &[u8] = b"GET /api/agent-api/updates";

/// The largest head read here (bytes). A longer one goes to the dispatcher,
/// which takes heads up to 32 KiB and answers longer ones with 431.
const MAX_HEAD: usize = 8 * 1024;

/// Bytes asked of the socket per read while a head arrives.
const READ_CHUNK: usize = 1024;

/// How long a new connection may take to send its first head: actix-http's
/// default, which the dispatcher (`lib.rs`) is given too.
pub const FIRST_HEAD_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a connection waits idle for its next request after an answer:
/// actix-http's default keep-alive, which the dispatcher is given too.
pub const KEEP_ALIVE: Duration = Duration::from_secs(5);

/// One worker's front: what every connection of the worker shares.
#[derive(Clone)]
pub struct Front {
    state: AppState,
    /// The codec's configuration: the worker's `date` header and keep-alive.
    config: ServiceConfig,
    /// The server's drain: idle connections close on it.
    shutdown: GracefulShutdownSignal,
}

/// What a connection sent next.
enum Next {
    /// A poll this module serves.
    Poll(Request),
    /// Anything else: the dispatcher's.
    Other,
    /// Part of a poll's head, and no more of it in time.
    TimedOut,
    /// Nothing (closed, idle past its time, or the server stops).
    Closed,
}

impl Front {
    /// The front of one worker. Build it on the worker's thread: the
    /// codec's date service runs there.
    pub fn new(state: AppState, local_addr: SocketAddr, shutdown: GracefulShutdownSignal) -> Self {
        let config = ServiceConfig::new(
            actix_http::KeepAlive::Timeout(KEEP_ALIVE),
            FIRST_HEAD_TIMEOUT,
            Duration::from_secs(1),
            false,
            Some(local_addr),
        );
        Front {
            state,
            config,
            shutdown,
        }
    }

    /// Serves one accepted connection (see the module docs); `http` is the
    /// worker's HTTP service, which takes over any request not served here.
    ///
    /// # Errors
    /// Only the dispatcher's, once it took over.
    pub async fn serve<H>(
        self,
        mut io: TcpStream,
        peer: Option<SocketAddr>,
        http: Rc<H>,
    ) -> Result<(), H::Error>
    where
        H: Service<(Socket, Protocol, Option<SocketAddr>), Response = ()>,
    {
        let mut buf = BytesMut::new();
        let mut codec = Codec::new(self.config.clone());
        let mut wait = FIRST_HEAD_TIMEOUT;
        loop {
            match self.next_request(&mut io, &mut buf, &mut codec, wait).await {
                Next::Closed => return Ok(()),
                Next::TimedOut => {
                    let late = ApiError::new(
                        ErrorCode::RequestTimeout,
                        "the request head did not arrive in time",
                    );
                    let _ = respond(&mut io, &mut codec, late.error_response(), true).await;
                    let _ = io.shutdown().await;
                    return Ok(());
                }
                Next::Other => {
                    let io = JsonBadRequest::with_read_ahead(io, buf.freeze());
                    // Boxed: the dispatcher's future is large, and a
                    // connection that only polls never needs it.
                    return Box::pin(http.call((io, Protocol::Http1, peer))).await;
                }
                Next::Poll(req) => {
                    if !matches!(codec.message_type(), MessageType::None) {
                        // Boxed, as is the refusal: this future lives as long
                        // as the connection, and most polls have no body (a
                        // lingering close alone holds an 8 KiB buffer).
                        let limit = self.state.settings.timing.request_body_timeout;
                        let discarded =
                            Box::pin(discard_body(&mut io, &mut buf, &mut codec, &req, limit))
                                .await;
                        if let Err(refused) = discarded {
                            Box::pin(refuse(io, codec, refused)).await;
                            return Ok(());
                        }
                    }
                    if buf.is_empty() {
                        // Lets the head's bytes go with the request.
                        buf = BytesMut::new();
                    }
                    let Some(res) = self.hold(req, peer, &mut io, &mut buf).await else {
                        return Ok(());
                    };
                    // A draining node ends the connection with its answer.
                    let close = self.state.is_draining();
                    match respond(&mut io, &mut codec, res, close).await {
                        Ok(true) => wait = KEEP_ALIVE,
                        _ => {
                            let _ = io.shutdown().await;
                            return Ok(());
                        }
                    }
                }
            }
        }
    }

    /// Reads until `buf` holds a complete head, or enough to tell it is no
    /// poll, for at most `wait`.
    async fn next_request(
        &self,
        io: &mut TcpStream,
        buf: &mut BytesMut,
        codec: &mut Codec,
        wait: Duration,
    ) -> Next {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match probe(buf, codec) {
                Some(Ok(req)) => return Next::Poll(req),
                Some(Err(())) => return Next::Other,
                None if buf.len() >= MAX_HEAD => return Next::Other,
                None => {}
            }
            buf.reserve(READ_CHUNK);
            let read = tokio::select! {
                read = tokio::time::timeout_at(deadline, io.read_buf(buf)) => read,
                () = self.shutdown.notified() => Ok(Ok(0)),
            };
            match read {
                Ok(Ok(n)) if n > 0 => {}
                // EOF, a broken socket, or the server stops.
                Ok(_) => return Next::Closed,
                // Part of a head but not all of it in time: answered as the
                // dispatcher answers a slow head (408, closing).
                Err(_) if !buf.is_empty() => return Next::TimedOut,
                // Nothing at all in time: closed without an answer, as nginx
                // does (actix-http would write an empty 408).
                Err(_) => return Next::Closed,
            }
        }
    }

    /// Serves one poll until its answer, watching the socket meanwhile:
    /// `None` when the client went away (the poll's session then ends, as
    /// a dropped request's does). Bytes a client pipelines meanwhile are
    /// kept in `buf` for the next request. Logged, counted and given an
    /// `x-request-id` as the app's route is.
    async fn hold(
        &self,
        req: Request,
        peer: Option<SocketAddr>,
        io: &mut TcpStream,
        buf: &mut BytesMut,
    ) -> Option<HttpResponse> {
        let state = &self.state;
        let started = Instant::now();
        let head = req.head();
        let id = request_log::request_id(&head.headers);
        let raw_query = head.uri.query().unwrap_or("");
        let logged_query = request_log::redact_query(raw_query);
        let client = state.client_ip(peer, &head.headers);
        let token = presented_token(&head.headers, raw_query, false);
        let query = web::Query::<UpdatesQuery>::from_query(raw_query);
        // Nothing of the head stays while the poll is held.
        drop(req);
        let client_label = client.map(|ip| ip.to_string()).unwrap_or_default();
        let span = tracing::info_span!("request", request_id = %id, method = %Method::GET, path = %UPDATES_PATH, client = %client_label);
        // The checks in a box of their own, freed before the wait: the
        // credential (the agent scope's order: before the query), then
        // the route's checks, then the start of the poll.
        let begin = Box::pin(
            async {
                let caller = authenticate_token(state, token).await?;
                let query = query.map_err(|e| invalid_query(&e))?;
                updates::begin(state, caller, client, &query).await
            }
            .instrument(span.clone()),
        );
        let mut unanswered = request_log::Unanswered::new(span.clone(), started, logged_query);
        let answer = match until_gone(io, buf, begin).await? {
            Ok(held) => until_gone(io, buf, held.body()).await?.map(updates::ok),
            Err(err) => Err(err),
        };
        unanswered.answered();
        let mut res = answer.unwrap_or_else(|err| err.error_response());
        if let Ok(v) = HeaderValue::from_str(&id) {
            res.headers_mut()
                .insert(HeaderName::from_static(request_log::REQUEST_ID), v);
        }
        span.in_scope(|| {
            request_log::finished(
                &Method::GET,
                UPDATES_PATH.to_owned(),
                res.status().as_u16(),
                started,
                unanswered.query(),
            )
        });
        Some(res)
    }
}

/// Runs `fut` while watching `io`: `None` as soon as the client closes or
/// the socket breaks. Bytes that arrive meanwhile (a pipelined request) are
/// added to `buf`, up to [`MAX_HEAD`].
async fn until_gone<F: std::future::Future>(
    io: &mut TcpStream,
    buf: &mut BytesMut,
    fut: F,
) -> Option<F::Output> {
    tokio::pin!(fut);
    loop {
        tokio::select! {
            out = &mut fut => return Some(out),
            ready = io.readable(), if buf.len() < MAX_HEAD => {
                ready.ok()?;
                // On the stack, not in this future: nothing is held for it.
                let mut chunk = [0u8; 1024];
                match io.try_read(&mut chunk) {
                    Ok(0) => return None,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => return None,
                }
            }
        }
    }
}

/// Answers `refused` and closes the connection: the rest of the request's
/// body goes unread, so the close lingers (see `malformed::linger`) lest
/// the client lose the answer to a reset.
async fn refuse(mut io: TcpStream, mut codec: Codec, refused: ApiError) {
    let _ = respond(&mut io, &mut codec, refused.error_response(), true).await;
    linger(io).await;
}

/// Largest body a poll may carry (bytes). A `GET` body has no meaning
/// (RFC 9110 §9.3.1) and `/updates` ignores it, but some clients send one
/// (`{}`, an empty chunked body); those are read and dropped. A longer one
/// is refused 413.
const MAX_POLL_BODY: usize = 64 * 1024;

/// Reads and drops the body the poll's head declared (its bytes already in
/// `buf` first), so that the connection can carry the next
/// request. A client that asked `Expect: 100-continue` is told to go on
/// first, unless its `Content-Length` is already past the cap. Errors,
/// each answered before the connection closes: `MALFORMED_REQUEST` (400)
/// for a chunked body that does not parse or a connection that ends
/// inside the body, `PAYLOAD_TOO_LARGE` (413) past [`MAX_POLL_BODY`], and
/// `REQUEST_TIMEOUT` (408) when the body has not ended `limit`
/// (`timing.request_body_timeout`) after the head, as for any route.
async fn discard_body(
    io: &mut TcpStream,
    buf: &mut BytesMut,
    codec: &mut Codec,
    req: &Request,
    limit: Duration,
) -> Result<(), ApiError> {
    let too_large = || {
        ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!("a GET of /updates takes no body; at most {MAX_POLL_BODY} bytes of one are read and dropped"),
        )
    };
    if req.head().expect() {
        let declared = req
            .head()
            .headers
            .get(actix_http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
        if declared.is_some_and(|n| n > MAX_POLL_BODY) {
            return Err(too_large());
        }
        io.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await
            .map_err(|_| ApiError::new(ErrorCode::MalformedRequest, "the connection ended"))?;
    }
    let deadline = tokio::time::Instant::now() + limit;
    let mut read = 0;
    loop {
        match codec.decode(buf) {
            Ok(Some(Message::Chunk(Some(chunk)))) => {
                read += chunk.len();
                if read > MAX_POLL_BODY {
                    return Err(too_large());
                }
            }
            Ok(Some(Message::Chunk(None))) => return Ok(()),
            Ok(Some(Message::Item(_))) | Err(_) => {
                return Err(ApiError::new(
                    ErrorCode::MalformedRequest,
                    "the request body is not valid HTTP/1.1 chunked encoding",
                ))
            }
            Ok(None) => {
                buf.reserve(READ_CHUNK);
                match tokio::time::timeout_at(deadline, io.read_buf(buf)).await {
                    Ok(Ok(n)) if n > 0 => {}
                    Ok(_) => {
                        return Err(ApiError::new(
                            ErrorCode::MalformedRequest,
                            "the connection ended inside the request body",
                        ))
                    }
                    Err(_) => return Err(body_timed_out(limit)),
                }
            }
        }
    }
}

/// Decodes the head at the start of `buf` if it is a poll's: `Some(Ok)`
/// with the request (its bytes taken from `buf`), `Some(Err)` when it is
/// not a poll or not valid (`buf` untouched), `None` while incomplete.
fn probe(buf: &mut BytesMut, codec: &mut Codec) -> Option<Result<Request, ()>> {
    let n = buf.len().min(POLL_LINE.len());
    if buf[..n] != POLL_LINE[..n] {
        return Some(Err(()));
    }
    match buf.get(POLL_LINE.len()) {
        None => return None,
        Some(b'?' | b' ') => {}
        Some(_) => return Some(Err(())),
    }
    // Decoded from a copy, so that the dispatcher can be handed the bytes
    // as they came when this is not a poll after all.
    let mut head = buf.clone();
    match codec.decode(&mut head) {
        Ok(None) => None,
        Ok(Some(Message::Item(req))) if is_poll(&req, codec) => {
            *buf = head;
            Some(Ok(req))
        }
        _ => Some(Err(())),
    }
}

/// A request this module serves: `GET` of exactly [`UPDATES_PATH`] over
/// HTTP/1.1, with no upgrade (a body, if any, is dropped by
/// [`discard_body`]).
fn is_poll(req: &Request, codec: &Codec) -> bool {
    let head = req.head();
    head.method == Method::GET
        && head.version == Version::HTTP_11
        && head.uri.path() == UPDATES_PATH
        && !codec.upgrade()
}

/// Writes `res` (marked as the connection's last when `close`); whether
/// the connection stays open for another request.
async fn respond(
    io: &mut TcpStream,
    codec: &mut Codec,
    res: HttpResponse,
    close: bool,
) -> std::io::Result<bool> {
    let (mut head, body) = head_and_body(res).await;
    if close {
        head.head_mut().set_connection_type(ConnectionType::Close);
    }
    let mut out = BytesMut::with_capacity(256 + body.len());
    codec.encode(Message::Item((head, body.size())), &mut out)?;
    if !body.is_empty() {
        codec.encode(Message::Chunk(Some(body)), &mut out)?;
    }
    codec.encode(Message::Chunk(None), &mut out)?;
    io.write_all(&out).await?;
    Ok(codec.keep_alive())
}
