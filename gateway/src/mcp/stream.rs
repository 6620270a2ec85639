//! `GET /api/mcp` of a session: its standalone SSE stream, carrying the
//! events routed to the agent as MCP notifications (docs/mcp.md,
//! "Listening").
//!
//! rmcp's own standalone stream carries only what the server sends
//! through the session, with rmcp's event ids, and it neither lets a
//! handler set those ids nor hands it `Last-Event-ID`. So the gate serves
//! this `GET` itself, with the machinery of `/events`
//! ([`crate::realtime::sse`]): the same session with the feed, the same
//! replay from the store's replay buffer, the same cursors as `id:`, so a
//! reconnect with `Last-Event-ID` resumes exactly after the last event
//! seen, on any node. POST and DELETE stay rmcp's.
//!
//! Every block is one JSON-RPC notification (rmcp's message types), with
//! no `event:` line (an MCP client reads only `message` events):
//!
//! ```text
//! id: <cursor after this event>
//! data: {"jsonrpc":"2.0","method":"notifications/baychat/event","params":{"cursor":"<cursor>","event":{…}}}
//!
//! id: <cursor>
//! data: {"jsonrpc":"2.0","method":"notifications/baychat/cursor","params":{"cursor":"<cursor>"}}
//!
//! data: {"jsonrpc":"2.0","method":"notifications/baychat/close","params":{"code":"DISPLACED","message":"…"}}
//! ```
//!
//! `reset` (`{cursor, message}`) is the fourth, as on `/events`.
//!
//! One listener per session: the session's stream and its
//! `wait_for_messages` share one cursor and never displace each other.
//! The first `wait_for_messages` of a session takes over its listening
//! (the stream ends after a final `cursor`, and the wait continues from
//! it); from then on a `GET` of the session is `405 METHOD_NOT_ALLOWED`,
//! as it is after the stream was displaced: the SDKs reconnect a stream
//! that ended, which would otherwise displace back in a loop.
//!
//! The SDKs open this stream by themselves after `initialize`, so an agent
//! that only wanted the tools would displace its own listener (`/ws`,
//! `/updates`, `/events`). The stream therefore yields: while another
//! connection of the token holds a session (on any node, as the presence
//! records say; they lag by up to `timing.presence_interval`), a `GET` is
//! `405` and the SDK goes on without a stream. `wait_for_messages` does
//! not yield: calling it is asking to listen here.

use super::sessions::Sessions;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::realtime::sse::{self, resume_of, SseSession, LAST_EVENT_ID};
use crate::state::AppState;
use actix::{Addr, Message};
use actix_web::{HttpRequest, HttpResponse};
use rmcp::model::{CustomNotification, ServerJsonRpcMessage, ServerNotification};
use serde_json::{json, Value};
use std::sync::Arc;
use switchboard_actors::open::Resume;
use switchboard_actors::session::Transport;
use switchboard_protocol::error::ErrorCode;
use switchboard_protocol::event::Event;

/// The method of the notification carrying one routed event.
pub const EVENT_METHOD: &str = "notifications/baychat/event";

/// The prefix of the control notifications: `…/cursor`, `…/reset`, `…/close`.
pub const METHOD_PREFIX: &str = "notifications/baychat/";

/// Asks an open stream to end and give its position to the listener
/// taking over (a `wait_for_messages` of its session, or a newer stream of
/// it): the cursor after the last event it wrote, `None` when it never
/// opened.
pub struct Handover;

impl Message for Handover {
    type Result = Option<String>;
}

/// What makes an [`SseSession`] the stream of an MCP session.
pub struct McpStream {
    /// The MCP session id.
    session: String,
    sessions: Arc<Sessions>,
}

/// One SSE block: optional `id:`, then the notification as `data:`.
fn notification(id: Option<&str>, method: &str, params: Value) -> String {
    let message = ServerJsonRpcMessage::notification(ServerNotification::CustomNotification(
        CustomNotification::new(method, Some(params)),
    ));
    // Plain strings and JSON values: serializing cannot fail.
    let data = serde_json::to_string(&message).expect("notifications always serialize");
    let mut out = String::with_capacity(data.len() + 64);
    if let Some(id) = id {
        out.push_str("id: ");
        out.push_str(id);
        out.push('\n');
    }
    out.push_str("data: ");
    out.push_str(&data);
    out.push_str("\n\n");
    out
}

impl McpStream {
    /// The block of one routed event, `id` being the cursor after it.
    pub fn event(&self, id: &str, event: &Event) -> String {
        notification(
            Some(id),
            EVENT_METHOD,
            json!({"cursor": id, "event": event}),
        )
    }

    /// The block of control frame `name` (`cursor`, `reset`, `close`) with
    /// `/events`'s data as its params.
    pub fn control(&self, id: Option<&str>, name: &str, data: Value) -> String {
        notification(id, &format!("{METHOD_PREFIX}{name}"), data)
    }

    /// The stream started: it is the session's (a handover reaches it).
    pub fn started(&self, stream: Addr<SseSession>) {
        self.sessions.set_stream(&self.session, stream);
    }

    /// The stream stopped at `cursor`: the session's next listener
    /// continues from there.
    pub fn stopped(&self, stream: &Addr<SseSession>, cursor: Option<String>) {
        self.sessions.stream_ended(&self.session, stream, cursor);
    }

    /// Another connection of the token displaced the stream.
    pub fn displaced(&self) {
        self.sessions.stream_displaced(&self.session);
    }
}

/// Ends session `id`'s stream, if one is open, and records its position
/// as the session's; what a listener taking over resumes from.
pub async fn hand_over(sessions: &Sessions, id: &str, stream: Option<Addr<SseSession>>) {
    let Some(stream) = stream else { return };
    if let Ok(Some(cursor)) = stream.send(Handover).await {
        sessions.set_cursor(id, cursor);
    }
}

/// Serves `GET /api/mcp` of session `id` (bound to `caller`, checked by
/// the gate): the session's event stream, resuming after `Last-Event-ID`,
/// else where the session's listening left off, else from now.
///
/// # Errors
/// 405 METHOD_NOT_ALLOWED when the session listens with
/// `wait_for_messages` or its stream was displaced; otherwise those of
/// `/events` (429, 503, 401, 403).
pub async fn open(
    state: &AppState,
    req: &HttpRequest,
    caller: Caller,
    id: &str,
) -> Result<HttpResponse, ApiError> {
    let sessions = state.mcp.sessions.clone();
    if !sessions.may_stream(id) {
        return Err(ApiError::new(
            ErrorCode::MethodNotAllowed,
            "this session no longer streams events (wait_for_messages took over its listening, \
             or another connection of this agent displaced its stream); open a new session to \
             stream again",
        ));
    }
    if another_listener(state, &caller).await? {
        return Err(ApiError::new(
            ErrorCode::MethodNotAllowed,
            "another connection of this agent is listening (/ws, /updates or /events); this \
             session does not stream events, so it does not displace that listener (call \
             wait_for_messages to listen here instead)",
        ));
    }
    // A newer stream of the session (a reconnect) takes over from the old one.
    hand_over(&sessions, id, sessions.take_stream(id)).await;
    let resume = match resume_of(req.headers().get(LAST_EVENT_ID).map(|v| v.as_bytes()), None) {
        Resume::Now => Resume::parse(sessions.cursor(id).as_deref()),
        given => given,
    };
    let mcp = McpStream {
        session: id.to_owned(),
        sessions,
    };
    sse::serve(state, state.client_of(req), caller, resume, Some(mcp)).await
}

/// Whether a connection of `caller`'s token other than an MCP session's
/// holds a session on some node now (the presence records).
///
/// # Errors
/// 503 when the store cannot be read.
async fn another_listener(state: &AppState, caller: &Caller) -> Result<bool, ApiError> {
    let me = &caller.principal.participant.id;
    let records = state.store.presence_records(&caller.principal.bay).await?;
    Ok(records.iter().any(|r| {
        &r.participant == me && r.session && r.transports.iter().any(|t| *t != Transport::Mcp)
    }))
}

#[cfg(test)]
mod tests {
    use super::notification;
    use serde_json::{json, Value};

    #[test]
    fn blocks_are_an_id_and_one_notification() {
        let block = notification(
            Some("c1"),
            "notifications/baychat/cursor",
            json!({"cursor": "c1"}),
        );
        let (head, data) = block.split_once("data: ").unwrap();
        assert_eq!(head, "id: c1\n");
        assert!(data.ends_with("\n\n"));
        let v: Value = serde_json::from_str(data.trim_end()).unwrap();
        assert_eq!(
            v,
            json!({"jsonrpc": "2.0", "method": "notifications/baychat/cursor", "params": {"cursor": "c1"}})
        );
        assert!(!notification(None, "m", json!({})).contains("id:"));
    }
}
