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
use pin_project_lite::pin_project;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

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

/// The first bare answer in `buf`: where it starts and which it is.
fn find_bare(buf: &[u8]) -> Option<(usize, usize)> {
    BARE.iter()
        .enumerate()
        .filter_map(|(i, (head, ..))| memchr::memmem::find(buf, head).map(|at| (at, i)))
        .min()
}

pin_project! {
    /// A connection's socket, passing everything through except the
    /// dispatcher's bare 400 (see the module docs).
    pub struct JsonBadRequest<T> {
        #[pin]
        io: T,
        // Bytes read from the socket before it reached the dispatcher
        // (`realtime/front.rs`), returned by the first reads.
        read_ahead: Bytes,
        // The replacement answer and how much of it is written; written
        // before any later byte, flush or shutdown.
        pending: Vec<u8>,
        written: usize,
    }
}

impl<T> JsonBadRequest<T> {
    /// Wraps a freshly accepted socket.
    pub fn new(io: T) -> Self {
        Self::with_read_ahead(io, Bytes::new())
    }

    /// Wraps a socket from which `read_ahead` was read already: the
    /// dispatcher reads those bytes first.
    pub fn with_read_ahead(io: T, read_ahead: Bytes) -> Self {
        JsonBadRequest {
            io,
            read_ahead,
            pending: Vec::new(),
            written: 0,
        }
    }

    /// The socket itself, for a connection that leaves HTTP (a WebSocket),
    /// with any read-ahead bytes the dispatcher did not take (they come
    /// before the socket's).
    pub fn into_parts(self) -> (T, Bytes) {
        (self.io, self.read_ahead)
    }
}

impl<T: AsyncWrite> JsonBadRequest<T> {
    /// Writes what is left of the replacement answer.
    fn poll_pending(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut this = self.project();
        while *this.written < this.pending.len() {
            let n = ready!(this
                .io
                .as_mut()
                .poll_write(cx, &this.pending[*this.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *this.written += n;
        }
        Poll::Ready(Ok(()))
    }
}

/// Where the head that starts at `buf[0]` ends (after its blank line).
fn head_end(buf: &[u8]) -> Option<usize> {
    memchr::memmem::find(buf, b"\r\n\r\n").map(|i| i + 4)
}

impl<T: AsyncWrite> AsyncWrite for JsonBadRequest<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        ready!(self.as_mut().poll_pending(cx))?;
        let found = find_bare(buf);
        match found {
            // Answers before it go out first; the dispatcher then writes
            // the rest, which starts with the bare answer.
            Some((at, _)) if at > 0 => self.project().io.poll_write(cx, &buf[..at]),
            Some((_, which)) => match head_end(buf) {
                Some(end) => {
                    let this = self.as_mut().project();
                    *this.pending = json_answer(which);
                    *this.written = 0;
                    // The bare head counts as written; the replacement is
                    // written now or before the next write, flush or shutdown.
                    match self.poll_pending(cx) {
                        Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                        _ => Poll::Ready(Ok(end)),
                    }
                }
                None => self.project().io.poll_write(cx, buf),
            },
            None => self.project().io.poll_write(cx, buf),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.as_mut().poll_pending(cx))?;
        self.project().io.poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.as_mut().poll_pending(cx))?;
        self.project().io.poll_shutdown(cx)
    }
}

impl<T: AsyncRead> AsyncRead for JsonBadRequest<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.project();
        if !this.read_ahead.is_empty() {
            let n = this.read_ahead.len().min(buf.remaining());
            buf.put_slice(&this.read_ahead.split_to(n));
            return Poll::Ready(Ok(()));
        }
        this.io.poll_read(cx, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    async fn through(writes: &[&[u8]]) -> Vec<u8> {
        let mut out = JsonBadRequest::new(Vec::new());
        for w in writes {
            out.write_all(w).await.unwrap();
        }
        out.flush().await.unwrap();
        out.into_parts().0
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
