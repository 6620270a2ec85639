//! A WebSocket served on its own socket, after the 101.
//!
//! actix-http's HTTP/1 dispatcher keeps an 8 KiB read buffer and an 8 KiB
//! write buffer for the life of every connection it serves, an upgraded one
//! included. Once the handshake is answered nothing of HTTP is left on a
//! WebSocket, so [`serve`] takes the socket over: the session reads its
//! frames through [`Inbound`] and encodes what it sends into its
//! [`Outbox`](super::outbound::Outbox), which [`serve`] writes as it fills.
//! An idle connection then holds no I/O buffer at all (BENCHMARKS.md,
//! "WebSockets on their own socket").
//!
//! The session actor runs inside this task, not in one of its own: one
//! wake-up per delivery. That also gives the backpressure `outbound`
//! describes: the actor is polled only once the socket accepted the
//! previous write. The read side is a second, nearly always idle task
//! (`inbound::pump`).

use super::inbound::{ClientClosing, Inbound};
use super::outbound::{slow_consumer_close, SharedOutbox};
use actix_web::web::Bytes;
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use switchboard_actors::session::Backlog;
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio::time::error::Elapsed;
use tokio::time::timeout;

/// A started session, ready to be driven: the actor (a future that ends when
/// it stops), the outbox it writes into, and the backlog its feed charges.
pub struct Running<F> {
    /// The actor; polling it runs its handlers.
    pub session: F,
    /// What the actor wrote and the socket has not taken yet.
    pub outbox: SharedOutbox,
    /// Abandoned by the feed when the client falls too far behind.
    pub backlog: Arc<Backlog>,
    /// The task handing the session the client's frames (`inbound::pump`),
    /// stopped with the connection.
    pub pump: JoinHandle<()>,
}

/// Aborts a task when dropped.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Serves one upgraded connection until either side ends it. `start` gets
/// the client's frames (read from `io`, after `early`: what the HTTP layer
/// read past the request head) and returns the running session. Returns when
/// the session stopped and its last frames are written (the write side is
/// then shut down, which the client reads as the TCP close after the close
/// frame), when a write fails (the client is gone), once the feed abandoned
/// the session and the slow-consumer close is written, or when the client
/// took nothing for `write_timeout`.
///
/// `write_timeout` bounds every write: while a write waits on a client that
/// does not read, its session does not run, so it sends no pings and cannot
/// notice missed pongs, and the feed's `Close` waits in its mailbox. A
/// client that took nothing for that long is dropped (without a close
/// frame: it is not reading) and its session and connection slot go with
/// it. A session the feed abandons meanwhile (the client fell past the
/// outbound queue limit) is dropped at once, its slot with it; the socket
/// is kept until the write ends or times out, and the close follows.
pub async fn serve<F>(
    io: TcpStream,
    early: Bytes,
    max_frame: usize,
    write_timeout: Duration,
    start: impl FnOnce(Inbound<OwnedReadHalf>) -> Running<F>,
) where
    F: Future<Output = ()> + Unpin,
{
    let (read, mut write) = io.into_split();
    let inbound = Inbound::new(read, &early, max_frame);
    let closing = inbound.closing();
    let Running {
        session,
        outbox,
        backlog,
        pump,
    } = start(inbound);
    // The read side goes with the connection, whichever way it ends.
    let _pump = AbortOnDrop(pump);
    drop(early);
    let mut session = Some(session);
    loop {
        if backlog.is_abandoned() {
            // What the outbox holds is dropped: the client resumes from its
            // last cursor. The session goes first, so its connection slot
            // is free even while the close waits on a client that stopped
            // reading.
            drop(session.take());
            let _ = timeout(write_timeout, write.write_all(&slow_consumer_close())).await;
            break;
        }
        let chunk = outbox.borrow_mut().take();
        // The client sent a close: nothing goes out until the session's
        // echo (which drops what was queued before it, see
        // `Outbox::close_now`), so a long replay page does not hold it up.
        let chunk = chunk.filter(|_| !closing.is_set() || outbox.borrow().is_closed());
        if let Some(bytes) = chunk {
            let written = write_frames(
                &mut write,
                &bytes,
                write_timeout,
                &backlog,
                &mut session,
                &closing,
            )
            .await;
            match written {
                Ok(Ok(())) => {
                    // Let the connection's read side run before the next
                    // chunk: on a fast path (a memory-engine replay to a
                    // client that keeps up) every write and every next
                    // page is ready at once, this task never waits, and
                    // the read task on the same thread would not see the
                    // client's close frame until the whole replay is out.
                    tokio::task::yield_now().await;
                    continue;
                }
                // The client is gone.
                Ok(Err(_)) => return,
                Err(_) => {
                    tracing::info!(
                        timeout_ms = write_timeout.as_millis() as u64,
                        "dropping a WebSocket whose client took no bytes within the write timeout"
                    );
                    return;
                }
            }
        }
        let Some(running) = session.as_mut() else {
            break;
        };
        if drive(running, &outbox, &backlog).await {
            // Its last frames are written on the next turn, then the loop ends.
            session = None;
        }
    }
    let _ = write.shutdown().await;
}

/// Most bytes of whole frames written at a time: between two writes the
/// task looks whether the client sent a close frame.
const WRITE_SLICE: usize = 16 * 1024;

/// Writes `bytes` (whole server frames) to the client, a few frames at a
/// time ([`WRITE_SLICE`]), each write within `write_timeout`. Stops at a
/// frame boundary once the client sent a close frame, unless `bytes` hold
/// the echo: the rest is what the client no longer wants (it resumes from
/// the last `cursor` frame it got).
///
/// # Errors
/// As [`write_chunk`].
async fn write_frames<F>(
    write: &mut OwnedWriteHalf,
    bytes: &[u8],
    write_timeout: Duration,
    backlog: &Backlog,
    session: &mut Option<F>,
    closing: &ClientClosing,
) -> Result<std::io::Result<()>, Elapsed> {
    let mut at = 0;
    let mut holds_echo = None;
    while at < bytes.len() {
        if closing.is_set() && !*holds_echo.get_or_insert_with(|| ends_with_close(bytes)) {
            break;
        }
        let end = slice_end(bytes, at);
        match write_chunk(write, &bytes[at..end], write_timeout, backlog, session).await {
            Ok(Ok(())) => at = end,
            failed => return failed,
        }
    }
    Ok(Ok(()))
}

/// Where the server frame starting at `buf[at]` ends. Server frames are
/// unmasked (RFC 6455 §5.2): a 2-byte header, then a 16- or 64-bit length
/// when the 7-bit one says 126 or 127. A header cut short ends at `buf`'s end.
fn frame_end(buf: &[u8], at: usize) -> usize {
    let b = &buf[at..];
    let (head, len) = match b.get(1).map(|l| l & 0x7f) {
        Some(126) if b.len() >= 4 => (4, u64::from(u16::from_be_bytes([b[2], b[3]]))),
        Some(127) if b.len() >= 10 => (
            10,
            u64::from_be_bytes([b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9]]),
        ),
        Some(n) if n < 126 => (2, u64::from(n)),
        _ => return buf.len(),
    };
    usize::try_from(len).map_or(buf.len(), |len| {
        (at + head).saturating_add(len).min(buf.len())
    })
}

/// The end of the whole frames from `at` that make up about
/// [`WRITE_SLICE`] bytes (at least one frame).
fn slice_end(buf: &[u8], at: usize) -> usize {
    let mut end = frame_end(buf, at);
    while end < buf.len() && end - at < WRITE_SLICE {
        end = frame_end(buf, end);
    }
    end
}

/// Whether the last frame of `buf` is a close frame.
fn ends_with_close(buf: &[u8]) -> bool {
    let mut at = 0;
    let mut last = 0;
    while at < buf.len() {
        last = at;
        at = frame_end(buf, at);
    }
    buf.get(last).is_some_and(|b| b & 0x0f == 0x8)
}

/// Writes `bytes` to the client within `write_timeout`. When the feed
/// abandons the session while the write waits on a client that stopped
/// reading, lets go of the session (and its connection slot) at once and
/// finishes the write.
///
/// # Errors
/// The outer `Err`: the client took nothing for `write_timeout`; the inner
/// one: the write failed (the client is gone).
async fn write_chunk<F>(
    write: &mut OwnedWriteHalf,
    bytes: &[u8],
    write_timeout: Duration,
    backlog: &Backlog,
    session: &mut Option<F>,
) -> Result<std::io::Result<()>, Elapsed> {
    let mut write_all = pin!(timeout(write_timeout, write.write_all(bytes)));
    tokio::select! {
        biased;
        res = &mut write_all => res,
        () = backlog.abandoned(), if session.is_some() => {
            // Blocked on a client that stopped reading: let go
            // of the session and its slot now. The write goes
            // on (cutting a frame short would corrupt the
            // stream) and the close follows it.
            drop(session.take());
            write_all.await
        }
    }
}

/// Runs the session actor until it stops (`true`), or until it has output
/// for the socket or the feed abandoned it (`false`): the actor is polled
/// only while the socket has taken everything before, which is the
/// backpressure of `outbound`.
async fn drive<F>(running: &mut F, outbox: &SharedOutbox, backlog: &Backlog) -> bool
where
    F: Future<Output = ()> + Unpin,
{
    std::future::poll_fn(|cx| {
        if Pin::new(&mut *running).poll(cx).is_ready() {
            return Poll::Ready(true);
        }
        if outbox.borrow().has_output() || backlog.is_abandoned() {
            Poll::Ready(false)
        } else {
            Poll::Pending
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_http::ws::{OpCode, Parser};
    use actix_web::web::BytesMut;

    #[test]
    fn writes_are_cut_at_frame_boundaries_and_a_trailing_close_is_seen() {
        let mut buf = BytesMut::new();
        let sizes = [10, 200, 70_000, 5, 20_000];
        for n in sizes {
            Parser::write_message(&mut buf, vec![b'x'; n], OpCode::Text, true, false);
        }
        let mut ends = Vec::new();
        let mut at = 0;
        while at < buf.len() {
            at = frame_end(&buf, at);
            ends.push(at);
        }
        // Headers of 2, 4, 10, 2 and 4 bytes.
        assert_eq!(ends, [12, 216, 70_226, 70_233, 90_237]);
        assert_eq!(slice_end(&buf, 0), 70_226, "whole frames, at least one");
        assert_eq!(slice_end(&buf, 70_226), 90_237);
        assert!(!ends_with_close(&buf));
        Parser::write_close(&mut buf, None, false);
        assert!(ends_with_close(&buf));
    }
}
