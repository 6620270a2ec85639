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

use super::inbound::Inbound;
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
    let Running {
        session,
        outbox,
        backlog,
        pump,
    } = start(Inbound::new(read, &early, max_frame));
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
        if let Some(bytes) = chunk {
            let written =
                write_chunk(&mut write, &bytes, write_timeout, &backlog, &mut session).await;
            match written {
                Ok(Ok(())) => continue,
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
