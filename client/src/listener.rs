//! The listener: one loop per token that holds a transport, keeps the
//! cursor, dedupes, reconnects and falls back, and hands the caller a
//! stream of [`Update`]s.
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
use crate::cursor_store::Delivered;
use crate::cursor_store::{Checkpoint, CursorStore};
use crate::dedupe::{key_of, DedupeWindow};
use crate::error::ClientError;
use crate::rest::Client;
use crate::transport;
use crate::update::{Transport, Update};
use futures_util::Stream;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use switchboard_protocol::event::Event;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// What the task sends the stream.
pub(crate) enum Internal {
    Item(Result<Update, ClientError>),
    Checkpoint(Checkpoint),
}

/// How one transport session ended, and what the loop does next.
pub(crate) enum Ended {
    /// Reconnect after a backoff delay, at least `retry_after`. `abnormal`:
    /// the connection broke (no close frame, an error, a 5xx), which counts
    /// towards falling back from the WebSocket. `reason` is what the
    /// caller is told ([`Update::Retrying`]).
    Retry {
        retry_after: Option<Duration>,
        abnormal: bool,
        reason: String,
    },
    /// Reconnect at once (the node drains: resume elsewhere).
    Immediate,
    /// The WebSocket cannot be had here: the upgrade was refused (a 4xx
    /// other than 401 and 429).
    Refused { reason: String },
    /// `/updates` ran for the probe interval: try `/ws` again.
    Probe,
    /// Stop, yielding this error.
    Fatal(ClientError),
    /// The listener was dropped.
    Gone,
}

impl Ended {
    /// The connection broke (no answer, an I/O error, a 5xx, a stream cut).
    pub(crate) fn broke(reason: String) -> Ended {
        Ended::Retry {
            retry_after: None,
            abnormal: true,
            reason,
        }
    }
}

/// An error answer to a listener's HTTP call (`/updates`, `/events`, the
/// REST catch-up) at `url`: 401 stops; a 4xx that no retry changes (every
/// 4xx but 408, 409, 425 and 429: a wrong base URL's 404, a proxy's 403)
/// stops with a message naming the URL; 429, 5xx and the rest retry.
pub(crate) fn http_refusal(url: &str, err: ClientError) -> Ended {
    let terminal = err.is_terminal();
    match err {
        ClientError::Api {
            status,
            code,
            message,
            ..
        } if terminal => Ended::Fatal(not_healing(url, status, code, message)),
        _ if terminal => Ended::Fatal(err),
        ClientError::Api {
            status,
            code,
            message,
            retry_after,
        } => Ended::Retry {
            retry_after,
            abnormal: !(status == 429 || status == 503),
            reason: format!("GET {url}: {status} {code}: {message}"),
        },
        other => Ended::broke(format!("GET {url}: {}", crate::error::chain(&other))),
    }
}

/// The terminal error of a 4xx that retrying will not change, with a
/// message that names the URL and, for 404, the usual cause.
pub(crate) fn not_healing(url: &str, status: u16, code: String, message: String) -> ClientError {
    let hint = if status == 404 {
        ": check the base URL (scheme://host:port of a Switchboard gateway, without /api/agent-api)"
    } else {
        ""
    };
    let message = if message.is_empty() {
        format!("GET {url} answered {status}{hint}")
    } else {
        format!("GET {url} answered {status} ({message}){hint}")
    };
    ClientError::Api {
        status,
        code,
        message,
        retry_after: None,
    }
}

/// A listener's state shared by the transports.
pub(crate) struct Ctx {
    pub client: Client,
    pub config: ListenerConfig,
    out: mpsc::Sender<Internal>,
    /// The newest cursor received (ahead of the saved one while items wait
    /// in the channel); `None` to start at now.
    pub cursor: Option<String>,
    /// Client clock minus the margin at the last cursor, never before
    /// `start`: where a catch-up starts in a conversation without a
    /// watermark in `delivered`.
    since: chrono::DateTime<chrono::Utc>,
    /// When the listener first started at now ([`Checkpoint::start`]).
    start: Option<chrono::DateTime<chrono::Utc>>,
    /// Per conversation, the newest message handed to the caller and the
    /// ids of that millisecond ([`Checkpoint::delivered`]).
    delivered: HashMap<String, (chrono::DateTime<chrono::Utc>, Vec<String>)>,
    dedupe: DedupeWindow,
    /// A reset happened and the cursor was dropped: the next fresh session
    /// catches up over REST again before delivering anything (it starts at
    /// now, so the gap since the last catch-up is REST's to fill).
    reset_pending: bool,
    /// The current session delivered nothing and sent no cursor yet.
    fresh: bool,
    /// The current session reached the server (a `ready`, an answer).
    pub connected: bool,
    /// The transport of the current session.
    pub transport: Transport,
    announced: Option<Transport>,
}

impl Ctx {
    async fn send(&mut self, item: Internal) -> Result<(), Ended> {
        self.out.send(item).await.map_err(|_| Ended::Gone)
    }

    /// The first delivery or cursor of a session: announce the transport,
    /// and after a reset catch up before anything the session carries.
    async fn session_started(&mut self) -> Result<(), Ended> {
        if !self.fresh {
            return Ok(());
        }
        self.fresh = false;
        self.connected = true;
        if self.announced != Some(self.transport) {
            self.announced = Some(self.transport);
            self.send(Internal::Item(Ok(Update::TransportChanged(self.transport))))
                .await?;
        }
        if self.reset_pending {
            self.catch_up(false).await?;
        }
        Ok(())
    }

    /// Hands one event object to the caller, unless the window saw it.
    pub async fn deliver(&mut self, raw: Value) -> Result<(), Ended> {
        self.session_started().await?;
        if !self.dedupe.insert(key_of(&raw)) {
            return Ok(());
        }
        self.took(&raw);
        self.send(Internal::Item(Ok(Update::from_raw(raw)))).await
    }

    /// Records that the caller is handed `raw`: a `message` or
    /// `message.completed` moves its conversation's watermark (and marks
    /// the message id seen, so a REST catch-up does not hand it again).
    fn took(&mut self, raw: &Value) {
        if raw["type"] != "message" && raw["type"] != "message.completed" {
            return;
        }
        let (Some(conversation), Some(id), Some(at)) = (
            raw["conversationId"].as_str(),
            raw["message"]["id"].as_str(),
            raw["message"]["createdAt"]
                .as_str()
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok()),
        ) else {
            return;
        };
        if raw["type"] != "message" {
            self.dedupe.insert(format!("message:{id}"));
        }
        let at = at.with_timezone(&chrono::Utc);
        let mark = self
            .delivered
            .entry(conversation.to_owned())
            .or_insert_with(|| (at, Vec::new()));
        if at > mark.0 {
            *mark = (at, Vec::new());
        }
        if at == mark.0 && !mark.1.iter().any(|i| i == id) {
            mark.1.push(id.to_owned());
        }
    }

    /// A position past everything delivered so far: remember it, and have
    /// it saved once the caller has taken what came before.
    pub async fn on_cursor(&mut self, cursor: String) -> Result<(), Ended> {
        self.session_started().await?;
        self.reset_pending = false;
        if cursor.is_empty() || self.cursor.as_deref() == Some(cursor.as_str()) {
            return Ok(());
        }
        self.cursor = Some(cursor.clone());
        self.since = self.floored(chrono::Utc::now() - self.margin());
        let checkpoint = self.checkpoint(cursor);
        self.send(Internal::Checkpoint(checkpoint)).await
    }

    /// `t`, or the listener's start when `t` is earlier.
    fn floored(&self, t: chrono::DateTime<chrono::Utc>) -> chrono::DateTime<chrono::Utc> {
        self.start.map_or(t, |start| t.max(start))
    }

    /// What to save with `cursor`: built when the cursor arrives, after
    /// every item before it went into the channel, and saved when the
    /// caller reached it, so the watermarks cover exactly what it took.
    fn checkpoint(&self, cursor: String) -> Checkpoint {
        Checkpoint {
            cursor,
            since: wire_time(self.since),
            start: self.start.map(wire_time),
            delivered: self
                .delivered
                .iter()
                .map(|(conversation, (at, ids))| {
                    (
                        conversation.clone(),
                        Delivered {
                            at: wire_time(*at),
                            ids: ids.clone(),
                        },
                    )
                })
                .collect::<BTreeMap<_, _>>(),
        }
    }

    /// `reset` / 409 `CURSOR_EXPIRED`: the cursor is not addressable.
    /// Catches up over REST, then continues without a cursor.
    pub async fn on_reset(&mut self) -> Result<(), Ended> {
        self.session_started().await?;
        self.catch_up(true).await?;
        self.cursor = None;
        self.reset_pending = true;
        Ok(())
    }

    fn margin(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.config.catch_up_margin).unwrap_or(chrono::Duration::MAX)
    }

    /// Reads every conversation's messages over REST and delivers those
    /// the caller has not taken, as `message` events, conversation by
    /// conversation in ascending order: in a conversation with a watermark
    /// strictly after it (same-millisecond messages told apart by id),
    /// elsewhere from `since`.
    async fn catch_up(&mut self, reset: bool) -> Result<(), Ended> {
        let since = wire_time(self.since);
        self.send(Internal::Item(Ok(Update::CatchUp {
            since: since.clone(),
            reset,
        })))
        .await?;
        let started = self.floored(chrono::Utc::now() - self.margin());
        let conversations = self
            .client
            .conversations()
            .await
            .map_err(|e| http_refusal(&self.client.url("/conversations"), e))?;
        for conversation in conversations["conversations"]
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            let Some(id) = conversation["id"].as_str() else {
                continue;
            };
            let mark = self.delivered.get(id).cloned();
            // `?since=` is exclusive: a millisecond earlier brings back the
            // watermark's own millisecond, whose other messages may be new.
            let from = match &mark {
                Some((at, _)) => wire_time(*at - chrono::Duration::milliseconds(1)),
                None => since.clone(),
            };
            let messages = match self.client.messages_since(id, &from).await {
                Ok(m) => m,
                // Left (or removed from) the conversation since the list.
                Err(ClientError::Api {
                    status: 403 | 404, ..
                }) => continue,
                Err(e) => {
                    let url = self.client.url(&format!("/conversations/{id}/messages"));
                    return Err(http_refusal(&url, e));
                }
            };
            for message in messages {
                if let Some((at, ids)) = &mark {
                    let created = message["createdAt"]
                        .as_str()
                        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                        .map(|t| t.with_timezone(&chrono::Utc));
                    let taken = match created {
                        Some(c) => {
                            c < *at
                                || (c == *at
                                    && ids
                                        .iter()
                                        .any(|i| Some(i.as_str()) == message["id"].as_str()))
                        }
                        None => false,
                    };
                    if taken {
                        continue;
                    }
                }
                let Some(raw) = recovered_event(&conversation, &message) else {
                    continue;
                };
                if !self.dedupe.insert(key_of(&raw)) {
                    continue;
                }
                let Ok(event) = serde_json::from_value::<Event>(raw.clone()) else {
                    continue;
                };
                self.took(&raw);
                self.send(Internal::Item(Ok(Update::Recovered {
                    event: Box::new(event),
                    raw,
                })))
                .await?;
            }
        }
        self.since = started;
        Ok(())
    }
}

/// The `message` event a REST message stands for (protocol §11: the REST
/// shape is the event's `message` plus fields events leave out), or `None`
/// for a tombstone.
fn recovered_event(conversation: &Value, message: &Value) -> Option<Value> {
    if !message["deletedAt"].is_null() {
        return None;
    }
    let mut view = serde_json::Map::new();
    for field in [
        "id",
        "senderId",
        "senderType",
        "content",
        "createdAt",
        "metadata",
        "sender",
        "mentions",
        "replyTo",
        "shouldRespond",
    ] {
        view.insert(field.to_owned(), message[field].clone());
    }
    Some(json!({
        "type": "message",
        "conversationId": conversation["id"],
        "message": view,
        "conversation": {
            "id": conversation["id"],
            "type": conversation["type"],
            "title": conversation["title"],
        },
    }))
}

/// RFC 3339 UTC with milliseconds, as the server writes times.
fn wire_time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

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
    /// checkpoint is corrupt ([`Checkpoint::check`]).
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
        let time = |t: &str| {
            chrono::DateTime::parse_from_rfc3339(t)
                .ok()
                .map(|t| t.with_timezone(&chrono::Utc))
        };
        let now = chrono::Utc::now();
        let since = saved.as_ref().and_then(|c| time(&c.since)).unwrap_or(now);
        // No checkpoint: this listener starts at now, and that is its floor.
        let start = match &saved {
            None => Some(now),
            Some(c) => c.start.as_deref().and_then(time),
        };
        let mut dedupe = DedupeWindow::new(config.dedupe_capacity);
        let mut delivered = HashMap::new();
        for (conversation, mark) in saved.as_ref().map(|c| &c.delivered).into_iter().flatten() {
            let Some(at) = time(&mark.at) else { continue };
            for id in &mark.ids {
                dedupe.insert(format!("message:{id}"));
            }
            delivered.insert(conversation.clone(), (at, mark.ids.clone()));
        }
        let (tx, rx) = mpsc::channel(config.buffer.max(1));
        let ctx = Ctx {
            client,
            dedupe,
            config,
            out: tx,
            cursor: saved.map(|c| c.cursor),
            since,
            start,
            delivered,
            reset_pending: false,
            fresh: true,
            connected: false,
            transport: Transport::WebSocket,
            announced: None,
        };
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
    let mut backoff = Backoff::new(ctx.config.backoff_initial, ctx.config.backoff_max);
    let mut abnormal: VecDeque<Instant> = VecDeque::new();
    ctx.transport = match choice {
        TransportChoice::Auto | TransportChoice::Ws => Transport::WebSocket,
        TransportChoice::Updates => Transport::Updates,
        TransportChoice::Sse => Transport::Sse,
    };
    // When `Auto` fell back to /updates.
    let mut fell_back_at: Option<Instant> = None;
    loop {
        ctx.fresh = true;
        ctx.connected = false;
        let probe_at = fell_back_at.map(|at| at + ctx.config.probe_interval);
        let ended = match ctx.transport {
            Transport::WebSocket => transport::ws::run(&mut ctx).await,
            Transport::Updates => transport::updates::run(&mut ctx, probe_at).await,
            Transport::Sse => transport::sse::run(&mut ctx).await,
        };
        if ctx.connected {
            backoff.reset();
        }
        let auto = choice == TransportChoice::Auto;
        let failed = ctx.transport;
        match ended {
            Ended::Gone => return,
            Ended::Fatal(e) => {
                let _ = ctx.out.send(Internal::Item(Err(e))).await;
                return;
            }
            Ended::Immediate => {}
            Ended::Probe => ctx.transport = Transport::WebSocket,
            Ended::Refused { reason } if auto => {
                ctx.transport = Transport::Updates;
                fell_back_at = Some(Instant::now());
                let reason = format!("{reason}; moving to /updates");
                if retrying(&ctx, failed, reason, Duration::ZERO)
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
                abnormal: broke,
                reason,
            } => {
                if auto && broke && ctx.transport == Transport::WebSocket {
                    let now = Instant::now();
                    abnormal.push_back(now);
                    while abnormal
                        .front()
                        .is_some_and(|t| now.duration_since(*t) > ctx.config.abnormal_window)
                    {
                        abnormal.pop_front();
                    }
                    if abnormal.len() >= ctx.config.abnormal_closes {
                        abnormal.clear();
                        ctx.transport = Transport::Updates;
                        fell_back_at = Some(now);
                        let reason = format!(
                            "{reason}; {} breaks within {:?}, moving to /updates",
                            ctx.config.abnormal_closes, ctx.config.abnormal_window
                        );
                        if retrying(&ctx, failed, reason, Duration::ZERO)
                            .await
                            .is_err()
                        {
                            return;
                        }
                        continue;
                    }
                }
                let delay = backoff.next_delay(retry_after);
                if retrying(&ctx, failed, reason, delay).await.is_err() {
                    return;
                }
                tokio::time::sleep(delay).await;
            }
        }
        if ctx.transport == Transport::WebSocket && ctx.connected {
            fell_back_at = None;
        }
    }
}

/// Tells the caller about a failed attempt ([`Update::Retrying`]); `Err`
/// when the listener was dropped.
async fn retrying(
    ctx: &Ctx,
    transport: Transport,
    reason: String,
    delay: Duration,
) -> Result<(), ()> {
    ctx.out
        .send(Internal::Item(Ok(Update::Retrying {
            transport,
            reason,
            delay,
        })))
        .await
        .map_err(|_| ())
}

#[cfg(test)]
mod tests {
    use super::recovered_event;
    use serde_json::json;
    use switchboard_protocol::event::Event;

    #[test]
    fn a_rest_message_becomes_the_message_event() {
        let conversation = json!({"id":"c1","type":"GROUP","title":"Room","role":"member"});
        let message = json!({"conversationId":"c1","id":"msg_1","senderId":"ana","senderType":"USER",
            "content":"hi","createdAt":"2026-12-01T00:00:00.000Z","metadata":null,
            "sender":{"id":"ana","name":"Ana","kind":"user","role":"member"},"mentions":[],
            "replyTo":null,"shouldRespond":false,"editedAt":null,"deletedAt":null,
            "reactions":[],"cardPayload":null,"poll":null});
        let raw = recovered_event(&conversation, &message).unwrap();
        let event: Event = serde_json::from_value(raw.clone()).unwrap();
        assert_eq!(event.conversation_id().map(|c| c.0.as_str()), Some("c1"));
        assert!(raw["message"].get("reactions").is_none());
        let mut deleted = message.clone();
        deleted["deletedAt"] = json!("2026-12-01T00:00:01.000Z");
        assert!(recovered_event(&conversation, &deleted).is_none());
    }
}
