//! The JSON answer to a request actix-http cannot parse.
//!
//! A request line or header that is not HTTP/1.1 (a control byte in a
//! header, a request line without a version, bad chunked framing) fails in
//! actix-http's h1 decoder, before any route or middleware runs; the
//! dispatcher then answers `400 Bad Request` with an empty body and closes
//! the connection, and offers no hook to change that answer. Every other
//! error of this gateway carries the JSON error body, so [`JsonBadRequest`]
//! wraps each connection's socket and, on the way out, swaps that one
//! answer for a 400 with the body of [`ErrorCode::MalformedRequest`].
//!
//! A request head too large to parse (more headers than the decoder
//! takes) gets the dispatcher's empty 431 the same way ([`BARE_431`]),
//! swapped for a 431 with the same JSON code, and a head that does not
//! arrive in time its empty 408 ([`BARE_408`]), swapped for a 408 with
//! `REQUEST_TIMEOUT`.
//!
//! The dispatcher's answer is recognised by its exact head
//! ([`BARE_400`], [`BARE_431`], [`BARE_408`]). No answer of the app starts
//! so: every 400, 408 and 431 the app writes has a JSON body, and no body the app writes holds a raw CRLF
//! (JSON escapes line breaks). WebSocket upgrades take the socket back out
//! of the wrapper ([`JsonBadRequest::into_parts`]), so frames never pass
//! through it. Should the socket accept only part of a write that ends
//! inside that head, the rest arrives in a later write the wrapper does
//! not recognise, and the client gets actix's empty 400: the same status,
//! only without the body.

use bytes::Bytes;
use futures_util::task::AtomicWaker;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{ready, Context, Poll};
use std::time::Duration;
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

/// How actix-http's h1 dispatcher starts its answer to a request it could
/// not parse (`Response::bad_request()` with an empty body).
pub const BARE_400: &[u8] = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n";

/// How it starts its answer to a request head too large to parse (more
/// than 96 headers, or a head past its buffer): 431, also empty.
pub const BARE_431: &[u8] =
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n";

/// How it starts its answer to a request head that did not arrive within
/// the client request timeout (5 s): 408, also empty.
pub const BARE_408: &[u8] = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\n";

/// The dispatcher's bare answers, each with its status line and the code
/// and message of the JSON body that replaces it.
const BARE: [(&[u8], &str, ErrorCode, &str); 3] = [
    (
        BARE_400,
        "400 Bad Request",
        ErrorCode::MalformedRequest,
        "the request line or headers are not valid HTTP/1.1",
    ),
    (
        BARE_431,
        "431 Request Header Fields Too Large",
        ErrorCode::MalformedRequest,
        "the request head has too many or too large headers",
    ),
    (
        BARE_408,
        "408 Request Timeout",
        ErrorCode::RequestTimeout,
        "the request head did not arrive in time",
    ),
];

/// What the client gets instead of `BARE[i]`: the same status, with the
/// JSON error body, closing the connection as the dispatcher does.
fn json_answer(i: usize) -> Vec<u8> {
    let (_, status, code, message) = BARE[i];
    let body = serde_json::to_vec(&ErrorBody::new(code, message)).unwrap_or_default();
    let mut out = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    out
}

/// The 400 answer (tests).
#[cfg(test)]
fn json_400() -> Vec<u8> {
    json_answer(0)
}

/// How every bare answer starts: a 4xx status line.
const BARE_START: &[u8] = b"HTTP/1.1 4";

/// The first bare answer in `buf`: where it starts and which it is.
///
/// Every answer the dispatcher writes passes here, so `buf` is scanned
/// once, for [`BARE_START`] with a searcher built once, and only where that
/// occurs is it compared with each bare head.
fn find_bare(buf: &[u8]) -> Option<(usize, usize)> {
    static START: OnceLock<memchr::memmem::Finder<'static>> = OnceLock::new();
    START
        .get_or_init(|| memchr::memmem::Finder::new(BARE_START))
        .find_iter(buf)
        .find_map(|at| {
            BARE.iter()
                .position(|(head, ..)| buf[at..].starts_with(head))
                .map(|i| (at, i))
        })
}

/// What [`JsonBadRequest`] wraps: a socket (or, in tests, its stand-in)
/// it can hand to a task of its own to close ([`Drop`]).
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send + 'static {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Io for T {}

/// A connection's socket, passing everything through except the
/// dispatcher's bare 400 (see the module docs).
///
/// After a swapped error answer the dispatcher drops the socket (it never
/// calls shutdown after a parse error). Closing it then with bytes of the
/// client's still unread would make the kernel send a reset, and a client
/// still writing a request too large to take (a 300 KB header) would lose
/// the answer already sent. So the socket closes in a task of its own: a
/// FIN after the answer, then what the client still sends is read and
/// dropped until it closes, for up to [`LINGER`] and [`MAX_LINGER_BYTES`]
/// ("lingering close", as nginx does).
pub struct JsonBadRequest<T: Io> {
    // `None` only once taken apart (`into_parts`) or dropped.
    io: Option<T>,
    // Bytes read from the socket before it reached the dispatcher
    // (`realtime/front.rs`), returned by the first reads.
    read_ahead: Bytes,
    // The replacement answer and how much of it is written; written
    // before any later byte, flush or shutdown.
    pending: Vec<u8>,
    written: usize,
    // Set once an answer was swapped: the socket lingers when dropped.
    linger: bool,
    // Set by the app to end reading (see [`EndAfterAnswer`]).
    end_reading: EndAfterAnswer,
}

/// A connection's switch, set by the app, that ends its reading once the
/// answer in the making is out: the next read of the socket's wrapper
/// reports end of stream, so actix-http writes what it holds and closes
/// (the socket lingers as after a swapped answer). For a refusal that
/// leaves the request's body unread, which actix-http would otherwise
/// read on to its end to discard. Reached from a request through
/// `HttpRequest::conn_data` (the server puts it there on connect).
#[derive(Clone, Default)]
pub struct EndAfterAnswer(Arc<EndReading>);

/// The switch, and the dispatcher's last read waiting on the socket: an
/// idle socket would not wake it otherwise.
#[derive(Default)]
pub struct EndReading {
    set: AtomicBool,
    reader: AtomicWaker,
}

impl EndAfterAnswer {
    /// Ends the connection's reading (see the type's docs).
    pub fn set(&self) {
        self.0.set.store(true, Ordering::Release);
        self.0.reader.wake();
    }

    /// Whether it is set; else `cx` is woken when it is.
    fn poll_set(&self, cx: &Context<'_>) -> bool {
        self.0.reader.register(cx.waker());
        self.0.set.load(Ordering::Acquire)
    }
}

/// Longest a socket lingers after an error answer (see [`JsonBadRequest`]).
const LINGER: Duration = Duration::from_secs(2);

/// Most bytes a lingering socket reads and drops before it closes as is.
const MAX_LINGER_BYTES: usize = 4 << 20;

impl<T: Io> JsonBadRequest<T> {
    /// Wraps a freshly accepted socket.
    pub fn new(io: T) -> Self {
        Self::with_read_ahead(io, Bytes::new())
    }

    /// Wraps a socket from which `read_ahead` was read already: the
    /// dispatcher reads those bytes first.
    pub fn with_read_ahead(io: T, read_ahead: Bytes) -> Self {
        JsonBadRequest {
            io: Some(io),
            read_ahead,
            pending: Vec::new(),
            written: 0,
            linger: false,
            end_reading: EndAfterAnswer::default(),
        }
    }

    /// This connection's [`EndAfterAnswer`].
    pub fn end_after_answer(&self) -> EndAfterAnswer {
        self.end_reading.clone()
    }

    /// The socket itself, for a connection that leaves HTTP (a WebSocket),
    /// with any read-ahead bytes the dispatcher did not take (they come
    /// before the socket's).
    pub fn into_parts(mut self) -> (T, Bytes) {
        let io = self.io.take().expect("a socket not yet taken apart");
        (io, std::mem::take(&mut self.read_ahead))
    }

    fn io(&mut self) -> Pin<&mut T> {
        Pin::new(self.io.as_mut().expect("a socket not yet taken apart"))
    }

    /// Writes what is left of the replacement answer.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.pending.len() {
            let from = self.written;
            let io = Pin::new(self.io.as_mut().expect("a socket not yet taken apart"));
            let n = ready!(io.poll_write(cx, &self.pending[from..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: Io> Drop for JsonBadRequest<T> {
    fn drop(&mut self) {
        let Some(io) = self.io.take() else { return };
        if !self.linger {
            return;
        }
        // Outside a runtime (nothing to run the task) it closes at once.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(linger(io));
        }
    }
}

/// Sends a FIN, then reads and drops what the peer sends until it closes,
/// [`LINGER`] passes or [`MAX_LINGER_BYTES`] were read; then closes. For a
/// connection answered before its request was read to the end: closing it
/// with unread bytes would make the kernel send a reset, and the client
/// could lose the answer ("lingering close", as nginx does).
pub async fn linger<T: Io>(mut io: T) {
    let _ = tokio::time::timeout(LINGER, async {
        let _ = io.shutdown().await;
        let mut scratch = [0u8; 8192];
        let mut drained = 0;
        while drained < MAX_LINGER_BYTES {
            match io.read(&mut scratch).await {
                Ok(n) if n > 0 => drained += n,
                _ => break,
            }
        }
    })
    .await;
}

/// Where the head that starts at `buf[0]` ends (after its blank line).
fn head_end(buf: &[u8]) -> Option<usize> {
    memchr::memmem::find(buf, b"\r\n\r\n").map(|i| i + 4)
}

impl<T: Io> AsyncWrite for JsonBadRequest<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        match find_bare(buf) {
            // Answers before it go out first; the dispatcher then writes
            // the rest, which starts with the bare answer.
            Some((at, _)) if at > 0 => this.io().poll_write(cx, &buf[..at]),
            Some((_, which)) => match head_end(buf) {
                Some(end) => {
                    this.pending = json_answer(which);
                    this.written = 0;
                    this.linger = true;
                    // The bare head counts as written; the replacement is
                    // written now or before the next write, flush or shutdown.
                    match this.poll_pending(cx) {
                        Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                        _ => Poll::Ready(Ok(end)),
                    }
                }
                None => this.io().poll_write(cx, buf),
            },
            None => this.io().poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        this.io().poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        this.io().poll_shutdown(cx)
    }
}

impl<T: Io> AsyncRead for JsonBadRequest<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.end_reading.poll_set(cx) {
            // End of stream, as far as the dispatcher knows.
            this.linger = true;
            return Poll::Ready(Ok(()));
        }
        if !this.read_ahead.is_empty() {
            let n = this.read_ahead.len().min(buf.remaining());
            buf.put_slice(&this.read_ahead.split_to(n));
            return Poll::Ready(Ok(()));
        }
        this.io().poll_read(cx, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    async fn through(writes: &[&[u8]]) -> Vec<u8> {
        let mut out = JsonBadRequest::new(tokio::io::join(tokio::io::empty(), Vec::new()));
        for w in writes {
            out.write_all(w).await.unwrap();
        }
        out.flush().await.unwrap();
        out.into_parts().0.into_inner().1
    }

    #[test]
    fn every_bare_answer_starts_as_the_scan_expects() {
        for (head, ..) in BARE {
            assert!(head.starts_with(BARE_START));
        }
        // The first bare head wins, after a JSON 4xx that is not one.
        let json_404 = b"HTTP/1.1 404 Not Found\r\ncontent-length: 2\r\n\r\n{}";
        let buf = [&json_404[..], BARE_431, BARE_408].concat();
        assert_eq!(find_bare(&buf), Some((json_404.len(), 1)));
        assert_eq!(find_bare(json_404), None);
    }

    #[tokio::test]
    async fn the_bare_400_gets_the_json_body_and_the_rest_passes() {
        let bare = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\ndate: x\r\n\r\n";
        assert_eq!(through(&[bare]).await, json_400());
        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}";
        let both = [&ok[..], &bare[..]].concat();
        assert_eq!(through(&[&both]).await, [&ok[..], &json_400()].concat());
        let json = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 9\r\n\r\n{\"a\":\"b\"}";
        assert_eq!(through(&[json]).await, json.to_vec());
        let text = String::from_utf8(json_400()).unwrap();
        let body = text.split("\r\n\r\n").nth(1).unwrap();
        let parsed: ErrorBody = serde_json::from_str(body).unwrap();
        assert_eq!(parsed.code, "MALFORMED_REQUEST");
        assert!(text.contains(&format!("content-length: {}\r\n", body.len())));
    }
}
