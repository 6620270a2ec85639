//! The listener: one loop per token that holds a transport, reconnects
//! and falls back, and hands the caller a stream of [`Update`]s. The
//! cursor, the dedupe window and the REST catch-up are the state every
//! transport session shares (`Ctx`, in `transport/mod.rs`).
//!
//! A background task runs the transports one session at a time (never two
//! at once: a second session of the token would displace the first,
//! protocol §11). It sends the caller items and checkpoints through one
//! bounded channel, in order; [`Listener::poll_next`] saves a checkpoint
//! when it reaches it, that is only after every item before it was handed
//! to the caller. That is what makes the stored cursor safe to resume
//! from after a crash.

use crate::backoff::Backoff;
use crate::config::{ListenerConfig, TransportChoice};
use crate::cursor_store::CursorStore;
use crate::error::ClientError;
use crate::rest::Client;
use crate::transport::{self, Ctx, Ended, Internal};
use crate::update::{Transport, Update};
use futures_util::Stream;
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// A stream of [`Update`]s for one token that loses nothing: see the crate
/// docs. Dropping it stops the connection.
pub struct Listener {
    rx: mpsc::Receiver<Internal>,
    store: Arc<dyn CursorStore>,
    task: JoinHandle<()>,
    done: bool,
}

impl Listener {
    /// Loads the checkpoint from `store` and starts listening (on the
    /// current tokio runtime) from its cursor, or from now without one.
    ///
    /// # Errors
    /// [`ClientError::Store`] when the store cannot be read or its
    /// checkpoint is corrupt ([`Checkpoint::check`](crate::Checkpoint::check)).
    pub fn start(
        client: Client,
        store: Arc<dyn CursorStore>,
        config: ListenerConfig,
    ) -> Result<Listener, ClientError> {
        let saved = store.load()?;
        if let Some(checkpoint) = &saved {
            checkpoint.check().map_err(|why| {
                ClientError::Store(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("the saved checkpoint is corrupt: {why}"),
                ))
            })?;
        }
        let (tx, rx) = mpsc::channel(config.buffer.max(1));
        let ctx = Ctx::new(client, config, tx, saved);
        Ok(Listener {
            rx,
            store,
            task: tokio::spawn(run(ctx)),
            done: false,
        })
    }

    /// The cursor saved last (what a restart resumes from).
    ///
    /// # Errors
    /// [`ClientError::Store`] when the store cannot be read.
    pub fn saved_cursor(&self) -> Result<Option<String>, ClientError> {
        Ok(self.store.load()?.map(|c| c.cursor))
    }
}

impl Stream for Listener {
    type Item = Result<Update, ClientError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if self.done {
                return Poll::Ready(None);
            }
            match self.rx.poll_recv(cx) {
                Poll::Ready(Some(Internal::Checkpoint(c))) => {
                    if let Err(e) = self.store.save(&c) {
                        self.done = true;
                        self.task.abort();
                        return Poll::Ready(Some(Err(ClientError::Store(e))));
                    }
                }
                Poll::Ready(Some(Internal::Item(item))) => {
                    if item.is_err() {
                        self.done = true;
                    }
                    return Poll::Ready(Some(item));
                }
                Poll::Ready(None) => {
                    self.done = true;
                    return Poll::Ready(None);
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The session loop: runs a transport until it ends, then decides what next.
async fn run(mut ctx: Ctx) {
    let choice = ctx.config.transport;
    let auto = choice == TransportChoice::Auto;
    let mut backoff = Backoff::new(ctx.config.backoff_initial, ctx.config.backoff_max);
    let mut fallback = Fallback::default();
    ctx.transport = first_transport(choice);
    loop {
        ctx.begin_session();
        let probe_at = fallback.probe_at(&ctx.config);
        let ended = match ctx.transport {
            Transport::WebSocket => transport::ws::run(&mut ctx).await,
            Transport::Updates => transport::updates::run(&mut ctx, probe_at).await,
            Transport::Sse => transport::sse::run(&mut ctx).await,
        };
        if ctx.connected {
            backoff.reset();
        }
        let failed = ctx.transport;
        match ended {
            Ended::Gone => return,
            Ended::Fatal(e) => {
                let _ = ctx.report(Err(e)).await;
                return;
            }
            Ended::Immediate => {}
            Ended::Probe => ctx.transport = Transport::WebSocket,
            Ended::Refused { reason } if auto => {
                let reason = format!("{reason}; moving to /updates");
                if fall_back(&mut ctx, &mut fallback, Instant::now(), reason)
                    .await
                    .is_err()
                {
                    return;
                }
            }
            Ended::Refused { reason } => {
                let delay = backoff.next_delay(None);
                if retrying(&ctx, failed, reason, delay).await.is_err() {
                    return;
                }
                tokio::time::sleep(delay).await;
            }
            Ended::Retry {
                retry_after,
                abnormal,
                reason,
            } => {
                let now = Instant::now();
                if auto
                    && abnormal
                    && ctx.transport == Transport::WebSocket
                    && fallback.too_many_breaks(now, &ctx.config)
                {
                    let reason = format!(
                        "{reason}; {} breaks within {:?}, moving to /updates",
                        ctx.config.abnormal_closes, ctx.config.abnormal_window
                    );
                    if fall_back(&mut ctx, &mut fallback, now, reason)
                        .await
                        .is_err()
                    {
                        return;
                    }
                    continue;
                }
                let delay = backoff.next_delay(retry_after);
                if retrying(&ctx, failed, reason, delay).await.is_err() {
                    return;
                }
                tokio::time::sleep(delay).await;
            }
        }
        if ctx.transport == Transport::WebSocket && ctx.connected {
            fallback.fell_back_at = None;
        }
    }
}

/// The transport a listener starts on: the WebSocket unless the choice
/// names another.
fn first_transport(choice: TransportChoice) -> Transport {
    match choice {
        TransportChoice::Auto | TransportChoice::Ws => Transport::WebSocket,
        TransportChoice::Updates => Transport::Updates,
        TransportChoice::Sse => Transport::Sse,
    }
}

/// With [`TransportChoice::Auto`]: when the WebSocket breaks too often to
/// keep, and when `/updates` gives way to a `/ws` probe.
#[derive(Default)]
struct Fallback {
    /// The abnormal ends of recent WebSocket sessions, oldest first, within
    /// [`ListenerConfig::abnormal_window`].
    breaks: VecDeque<Instant>,
    /// When the listener fell back to `/updates`; `None` on `/ws` (once a
    /// session there connected) or before any fall-back.
    fell_back_at: Option<Instant>,
}

impl Fallback {
    /// When an `/updates` session ends to probe `/ws` again
    /// ([`ListenerConfig::probe_interval`] after the fall-back).
    fn probe_at(&self, config: &ListenerConfig) -> Option<Instant> {
        self.fell_back_at.map(|at| at + config.probe_interval)
    }

    /// The listener moves to `/updates` at `now`.
    fn fell_back(&mut self, now: Instant) {
        self.fell_back_at = Some(now);
    }

    /// Counts a WebSocket break at `now`: true when
    /// [`ListenerConfig::abnormal_closes`] of them fell within
    /// [`ListenerConfig::abnormal_window`], and the count starts over.
    fn too_many_breaks(&mut self, now: Instant, config: &ListenerConfig) -> bool {
        self.breaks.push_back(now);
        while self
            .breaks
            .front()
            .is_some_and(|t| now.duration_since(*t) > config.abnormal_window)
        {
            self.breaks.pop_front();
        }
        if self.breaks.len() >= config.abnormal_closes {
            self.breaks.clear();
            return true;
        }
        false
    }
}

/// Moves the listener from the WebSocket to `/updates` at `now`, at once,
/// and tells the caller why (`reason`, [`Update::Retrying`] with no delay);
/// `Err` when the listener was dropped.
async fn fall_back(
    ctx: &mut Ctx,
    fallback: &mut Fallback,
    now: Instant,
    reason: String,
) -> Result<(), ()> {
    let failed = ctx.transport;
    ctx.transport = Transport::Updates;
    fallback.fell_back(now);
    retrying(ctx, failed, reason, Duration::ZERO).await
}

/// Tells the caller about a failed attempt ([`Update::Retrying`]); `Err`
/// when the listener was dropped.
async fn retrying(
    ctx: &Ctx,
    transport: Transport,
    reason: String,
    delay: Duration,
) -> Result<(), ()> {
    ctx.report(Ok(Update::Retrying {
        transport,
        reason,
        delay,
    }))
    .await
    .map_err(|_| ())
}
