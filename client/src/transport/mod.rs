//! The transports, and the contract between them and the listener.
//!
//! One session of each transport ([`ws`], [`updates`], [`sse`]): each
//! `run` holds its connection until it ends and says how ([`Ended`]); the
//! listener's loop decides what comes next. What a session reads goes
//! through its [`Ctx`]: events to [`Ctx::deliver`], positions to
//! [`Ctx::on_cursor`], `reset` / 409 `CURSOR_EXPIRED` to [`Ctx::on_reset`],
//! which catches up over REST (`catch_up.rs`). The `Ctx` keeps the cursor,
//! the dedupe window and the per-conversation watermarks, and forwards
//! items and checkpoints to the listener's stream ([`Internal`]), in
//! order.
//!
//! The contract lives here, not in the listener, so the transports depend
//! on it alone and the listener depends on them.

mod catch_up;
pub mod sse;
pub mod updates;
pub mod ws;

use crate::config::ListenerConfig;
use crate::cursor_store::{Checkpoint, Delivered};
use crate::dedupe::{key_of, DedupeWindow};
use crate::error::ClientError;
use crate::rest::Client;
use crate::update::{Transport, Update};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
use tokio::sync::mpsc;

/// What a listener's task sends its stream, in order: items for the
/// caller, and checkpoints to save once the caller has taken every item
/// before them.
pub(crate) enum Internal {
    /// Handed to the caller; an `Err` is the last item.
    Item(Result<Update, ClientError>),
    /// Saved when the stream reaches it.
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
    /// The REST client: base URL, token, HTTP connections.
    pub client: Client,
    /// How the listener connects, retries and falls back.
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
    /// The state of a listener that starts from `saved` (`None`: from now,
    /// which is then its floor), its items going to `out`. The saved
    /// watermarks' message ids enter the dedupe window, so a catch-up does
    /// not hand them again.
    pub(crate) fn new(
        client: Client,
        config: ListenerConfig,
        out: mpsc::Sender<Internal>,
        saved: Option<Checkpoint>,
    ) -> Ctx {
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
        Ctx {
            client,
            dedupe,
            config,
            out,
            cursor: saved.map(|c| c.cursor),
            since,
            start,
            delivered,
            reset_pending: false,
            fresh: true,
            connected: false,
            transport: Transport::WebSocket,
            announced: None,
        }
    }

    /// A session of `self.transport` begins: nothing delivered, not
    /// connected yet.
    pub(crate) fn begin_session(&mut self) {
        self.fresh = true;
        self.connected = false;
    }

    /// Hands the caller an item outside any session's stream of events (a
    /// retry notice, the final error).
    ///
    /// # Errors
    /// [`Ended::Gone`] when the listener was dropped.
    pub(crate) async fn report(&self, item: Result<Update, ClientError>) -> Result<(), Ended> {
        self.out
            .send(Internal::Item(item))
            .await
            .map_err(|_| Ended::Gone)
    }

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
}

/// RFC 3339 UTC with milliseconds, as the server writes times.
fn wire_time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
