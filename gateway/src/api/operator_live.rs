//! `GET /api/admin/bays/{bay}/conversations/{cid}/live`: one
//! conversation's activity as Server-Sent Events, for the operator
//! console (behind the admin gate; the console reads it with `fetch`, so
//! the token travels in the `Authorization` header, never in the URL).
//!
//! The stream rides on the node's feed of the Bay: it subscribes to the
//! feed's head ([`WatchHead`]) and, each time the head moves, reads the
//! log after its own position and sends what concerns the conversation.
//! So it holds no blocking read of its own and sees the log in the order
//! every session does. Events, each `event: <name>` + `data: <JSON>`:
//!
//! - `view`: first, the whole view ([`super::operator::view_json`]);
//! - `message`: a message posted, edited or completed (the console's
//!   message shape; replaces one with the same id);
//! - `delta` `{id, offset, text}`: a streaming draft grew;
//! - `ended` `{id, state}`: a draft was `cancelled` or `failed`, or a
//!   message `deleted`;
//! - `typing` `{participant, until}`, `presence` `{participant, state}`,
//!   `roster` `{members}`, `change` `{what, message}` (reactions, votes,
//!   read markers);
//! - `sessions` `{members: [{id, transports, sessions, webhook}]}`: the
//!   members' ways in changed (a session opened or closed on some node, a
//!   webhook set, removed, failing or recovered;
//!   [`super::operator_sessions::member_sessions`]). Read again after each
//!   `presence` event and every [`SESSIONS_REFRESH`]: presence records
//!   are not logged, so only reading them shows a second transport of a
//!   member already online;
//! - `reset`: the stream fell out of the replay buffer; reload the view.
//!
//! A comment heartbeat after 15 s without a block; the stream ends when
//! the node drains.
//!
//! `GET /api/admin/nodes/live` is the node directory the same way: a
//! `nodes` event (`{nodes, self}`, as `GET /nodes` answers) at once and
//! after every report interval.

use super::operator::{conversation_of, message_json, view_json};
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::web::Bytes;
use actix_web::{get, web, HttpResponse};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::convert::Infallible;
use std::time::Duration;
use switchboard_actors::feed::WatchHead;
use switchboard_actors::store::log::{Change, LogEvent, LogRecord};
use switchboard_actors::store::Replay;
use switchboard_protocol::cursor::{EntryId, LogPosition};
use switchboard_protocol::error::ErrorBody;
use switchboard_protocol::ids::{BayId, ConversationId, ParticipantId};

/// Between two comment heartbeats (keeps proxies from closing the stream).
const HEARTBEAT: Duration = Duration::from_secs(15);
/// How often the stream reads the members' sessions again.
pub const SESSIONS_REFRESH: Duration = Duration::from_secs(1);
/// Log entries read per step.
const PAGE: usize = 256;

/// Registers the route (inside the admin scope).
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(live).service(nodes_live);
}

/// One SSE block.
fn block(name: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

/// What the stream follows, and where it is in the Bay's log.
struct Follow {
    state: AppState,
    bay: BayId,
    cid: ConversationId,
    members: HashSet<ParticipantId>,
    position: LogPosition,
    head: tokio::sync::watch::Receiver<EntryId>,
    /// Blocks ready to go out, oldest first.
    queued: std::collections::VecDeque<Bytes>,
    /// The members' sessions as last sent (the view's, at first).
    sessions: Vec<Value>,
    /// A `presence` event went out since the sessions were last read.
    sessions_due: bool,
    /// When the last block went out.
    last_out: std::time::Instant,
    /// When the members' sessions were last read.
    sessions_read: std::time::Instant,
}

impl Follow {
    /// The event of `record` for the console, if it concerns the conversation.
    fn event_of(&mut self, record: &LogRecord) -> Option<Bytes> {
        match &record.event {
            LogEvent::Message {
                conversation,
                message,
            } if conversation.id == self.cid => Some(block("message", &message_json(message))),
            LogEvent::Change {
                conversation,
                change,
            } if conversation.id == self.cid => Some(change_block(change)),
            LogEvent::Roster {
                conversation,
                members,
            } if conversation.id == self.cid => {
                self.members = members.iter().cloned().collect();
                Some(block("roster", &json!({ "members": members })))
            }
            LogEvent::Presence {
                participant, state, ..
            } if self.members.contains(participant) => {
                self.sessions_due = true;
                Some(block(
                    "presence",
                    &json!({ "participant": participant, "state": state }),
                ))
            }
            _ => None,
        }
    }

    /// Reads what the log holds after the position and queues its events.
    async fn catch_up(&mut self) -> Result<(), ApiError> {
        loop {
            match self
                .state
                .store
                .read_log(&self.bay, &self.position, PAGE, None)
                .await?
            {
                Replay::Records { records, through } => {
                    for r in &records {
                        if let Some(b) = self.event_of(r) {
                            self.queued.push_back(b);
                        }
                    }
                    self.position.entry = through;
                    if records.len() < PAGE {
                        return Ok(());
                    }
                }
                Replay::Expired | Replay::EpochChanged => {
                    self.position = self.state.store.log_head(&self.bay).await?;
                    self.queued.push_back(block("reset", &json!({})));
                    return Ok(());
                }
            }
        }
    }

    /// Queues a `sessions` event when the members' sessions changed.
    async fn check_sessions(&mut self) -> Result<(), ApiError> {
        let mut ids: Vec<ParticipantId> = self.members.iter().cloned().collect();
        ids.sort();
        let now = super::operator_sessions::member_sessions(&self.state, &self.bay, &ids).await?;
        if now != self.sessions {
            self.queued
                .push_back(block("sessions", &json!({ "members": now })));
            self.sessions = now;
        }
        Ok(())
    }

    /// The next block: queued ones first, then whatever the head's next
    /// move or a sessions check brings, or a heartbeat. `None` ends the
    /// stream.
    async fn next(&mut self) -> Option<Bytes> {
        loop {
            if let Some(b) = self.queued.pop_front() {
                self.last_out = std::time::Instant::now();
                return Some(b);
            }
            if self.last_out.elapsed() >= HEARTBEAT {
                self.last_out = std::time::Instant::now();
                return Some(Bytes::from_static(b": heartbeat\n\n"));
            }
            tokio::select! {
                changed = self.head.changed() => {
                    // The feed stopped (its Bay went idle on this node, or
                    // the node stops): end, the console reconnects.
                    changed.ok()?;
                    if self.catch_up().await.is_err() {
                        return None;
                    }
                }
                _ = tokio::time::sleep(SESSIONS_REFRESH) => {}
                _ = self.state.drain_started() => return None,
            }
            // Due on a busy Bay too, whose head moves more often than this.
            if self.sessions_read.elapsed() >= SESSIONS_REFRESH {
                self.sessions_due = true;
            }
            // A store hiccup skips one check; the next refresh tries again.
            if std::mem::take(&mut self.sessions_due) {
                self.sessions_read = std::time::Instant::now();
                if self.check_sessions().await.is_err() {
                    self.sessions_due = true;
                }
            }
        }
    }
}

fn change_block(change: &Change) -> Bytes {
    match change {
        Change::Edited { message } | Change::Completed { message } => {
            block("message", &message_json(message))
        }
        Change::Delta {
            message,
            offset,
            text,
            ..
        } => block(
            "delta",
            &json!({ "id": message, "offset": offset, "text": text }),
        ),
        Change::Deleted { message, .. } => {
            block("ended", &json!({ "id": message, "state": "deleted" }))
        }
        Change::Cancelled { message, .. } => {
            block("ended", &json!({ "id": message, "state": "cancelled" }))
        }
        Change::Failed { message, .. } => {
            block("ended", &json!({ "id": message, "state": "failed" }))
        }
        Change::Typing { participant, until } => block(
            "typing",
            &json!({ "participant": participant, "until": until }),
        ),
        Change::Reaction { message, .. } => {
            block("change", &json!({ "what": "reaction", "message": message }))
        }
        Change::Poll { message, .. } => {
            block("change", &json!({ "what": "poll", "message": message }))
        }
        Change::Read { message, .. } => {
            block("change", &json!({ "what": "read", "message": message }))
        }
    }
}

/// The route. See the module docs.
#[utoipa::path(
    operation_id = "adminConversationLive",
    tag = "admin",
    summary = "A conversation's activity, live (SSE)",
    description = "A `text/event-stream`: first `view` (the whole view, as `…/view` answers it), then `message`, `delta`, `ended`, `typing`, `presence`, `roster`, `change`, `sessions` and `reset` events as they are logged. Send the admin token in the `Authorization` header (read the stream with `fetch`).",
    params(
        ("bay" = String, Path, description = "Bay id"),
        ("cid" = String, Path, description = "Conversation id"),
    ),
    responses(
        (status = 200, description = "The event stream", content_type = "text/event-stream", body = crate::openapi::schemas::ConversationLiveEvent),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown Bay or conversation, or the admin API is disabled", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE, or UNAVAILABLE while the node drains", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[get("/bays/{bay}/conversations/{cid}/live")]
async fn live(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    if state.is_draining() {
        return Err(ApiError::new(
            switchboard_protocol::error::ErrorCode::Unavailable,
            "the node is draining",
        ));
    }
    let (bay, cid) = path.into_inner();
    let (bay, cid) = (BayId(bay), ConversationId(cid));
    let c = conversation_of(&state, &bay, &cid).await?;
    // Subscribe before reading the head: nothing logged after the
    // position can then go unnoticed.
    let head = state
        .registry
        .feed(&bay)
        .send(WatchHead)
        .await
        .map_err(|_| {
            ApiError::new(
                switchboard_protocol::error::ErrorCode::Unavailable,
                "the Bay's feed is not running",
            )
        })?;
    let position = state.store.log_head(&bay).await?;
    let view = view_json(&state, &bay, &c).await?;
    let mut ids: Vec<&Value> = view["members"].as_array().into_iter().flatten().collect();
    ids.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    let sessions: Vec<Value> = ids
        .into_iter()
        .map(|m| json!({"id": m["id"], "transports": m["transports"], "sessions": m["sessions"], "webhook": m["webhook"]}))
        .collect();
    let follow = Follow {
        state: state.get_ref().clone(),
        members: c.members.iter().map(|m| m.participant.clone()).collect(),
        bay,
        cid,
        position,
        head,
        queued: [block("view", &view)].into(),
        sessions,
        sessions_due: false,
        last_out: std::time::Instant::now(),
        sessions_read: std::time::Instant::now(),
    };
    let stream = futures_util::stream::unfold(follow, |mut follow| async move {
        let next = follow.next().await?;
        Some((Ok::<_, Infallible>(next), follow))
    });
    Ok(HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("Cache-Control", "no-store"))
        .insert_header(("X-Accel-Buffering", "no"))
        .streaming(stream))
}

/// `GET /nodes/live`: the node directory as a stream. See the module docs.
#[utoipa::path(
    operation_id = "adminNodesLive",
    tag = "admin",
    summary = "Live gateway nodes, as a stream (SSE)",
    description = "A `text/event-stream` of `nodes` events, each `{nodes, self}` as `GET /nodes` answers it: one at once, then one per report interval (2 s). Send the admin token in the `Authorization` header.",
    responses(
        (status = 200, description = "The event stream", content_type = "text/event-stream", body = crate::openapi::schemas::NodesLiveEvent),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: the admin API is disabled", body = ErrorBody),
    ),
    security(("admin_token" = [])),
)]
#[get("/nodes/live")]
async fn nodes_live(state: web::Data<AppState>) -> HttpResponse {
    let state = state.get_ref().clone();
    let stream = futures_util::stream::unfold(true, move |first| {
        let state = state.clone();
        async move {
            if !first {
                tokio::select! {
                    _ = tokio::time::sleep(crate::ops::node_report::REPORT_INTERVAL) => {}
                    _ = state.drain_started() => return None,
                }
            }
            let block = match state.store.nodes().await {
                Ok(nodes) => block(
                    "nodes",
                    &json!({ "nodes": nodes, "self": switchboard_actors::node::id() }),
                ),
                // Kept open: the store may come back; the page says why.
                Err(err) => block("error", &json!({ "message": err.to_string() })),
            };
            Some((Ok::<_, Infallible>(block), false))
        }
    });
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("Cache-Control", "no-store"))
        .insert_header(("X-Accel-Buffering", "no"))
        .streaming(stream)
}
