//! A WebSocket served on its own socket, after the 101.
//!
//! actix-http's HTTP/1 dispatcher keeps an 8 KiB read buffer and an 8 KiB
//! write buffer for the life of every connection it serves, an upgraded one
//! included, and polls a response stream through its body machinery on
//! every write. Once the handshake is answered nothing of HTTP is left on a
//! WebSocket, so [`serve`] takes the socket over: [`SocketReader`] reads
//! into a stack buffer and hands on only the bytes that arrived, and the
//! session's frames are written straight to the socket. An idle connection
//! then holds no I/O buffer at all (BENCHMARKS.md, "WebSockets on their
//! own socket").
//!
//! Backpressure is unchanged: the session actor runs only while its output
//! stream is polled, and [`serve`] polls it only once the socket accepted
//! the previous write, so a client that stops reading stalls its actor and
//! the feed abandons the session on its backlog (see `outbound`).

use actix_web::error::PayloadError;
use actix_web::web::Bytes;
use futures_util::{Stream, StreamExt};
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::TcpStream;

/// Largest read from the socket in one call, bytes. A client sends small
/// frames (`hello`, pongs); a larger frame arrives over several reads.
const READ_CHUNK: usize = 4096;

/// The client's bytes, as the WebSocket decoder consumes them: each read is
/// one chunk of exactly what arrived (nothing is kept between reads).
pub struct SocketReader {
    io: OwnedReadHalf,
    /// Bytes read with the handshake that belong to the WebSocket.
    early: Option<Bytes>,
}

impl SocketReader {
    /// Reads `io`, after `early` (what the HTTP layer had read past the
    /// request head; usually nothing). `early` must not share the HTTP
    /// layer's 8 KiB read buffer, or that buffer is kept.
    pub fn new(io: OwnedReadHalf, early: Bytes) -> Self {
        SocketReader {
            io,
            early: (!early.is_empty()).then_some(early),
        }
    }
}

impl Stream for SocketReader {
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(early) = self.early.take() {
            return Poll::Ready(Some(Ok(early)));
        }
        let mut buf = [0u8; READ_CHUNK];
        let mut read = ReadBuf::new(&mut buf);
        match Pin::new(&mut self.io).poll_read(cx, &mut read) {
            Poll::Ready(Ok(())) if read.filled().is_empty() => Poll::Ready(None),
            Poll::Ready(Ok(())) => Poll::Ready(Some(Ok(Bytes::copy_from_slice(read.filled())))),
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(PayloadError::Io(e)))),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Serves one upgraded connection until either side ends it: `start` gets
/// the reader of `io` and returns the session's output (encoded frames),
/// which is written to `io` as it comes. Returns when the output ends (the
/// session stopped; the write side is then shut down, which the client
/// reads as the TCP close after the close frame) or a write fails (the
/// client is gone).
pub async fn serve<O, E>(io: TcpStream, early: Bytes, start: impl FnOnce(SocketReader) -> O)
where
    O: Stream<Item = Result<Bytes, E>> + Unpin,
{
    let (read, mut write) = io.into_split();
    let mut output = start(SocketReader::new(read, early));
    while let Some(chunk) = output.next().await {
        let Ok(bytes) = chunk else { break };
        if write.write_all(&bytes).await.is_err() {
            return;
        }
    }
    let _ = write.shutdown().await;
}
