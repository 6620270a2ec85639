//! `wait_for_messages {timeout?}`: listening without a local relay.
//!
//! A call is one held poll, the same as `GET /updates` (it displaces the
//! token's other connections, and is displaced by them), from the cursor
//! the session's previous call answered with. The session keeps that
//! cursor, so whatever was routed to the caller between two calls comes
//! with the next one: nothing is lost, however long the agent took. The
//! first call of a session starts from now, or where the session's event
//! stream left off: it takes over the session's listening from the stream
//! (see [`super::stream`]), so the two never displace each other.
//!
//! A cursor that fell out of the replay window is a tool error
//! `CURSOR_EXPIRED`; the session's position is reset so the next call
//! listens from now, after the agent caught up with `get_messages`.

use super::calls::Answer;
use super::{render, CallScope};
use crate::error::ApiError;
use crate::realtime::updates::start;
use serde_json::{json, Value};
use std::time::Duration;
use switchboard_actors::open::Resume;
use switchboard_protocol::error::ErrorCode;

/// Longest hold (the mailbox convention of 50 s: under common proxy and
/// client timeouts of 60 s).
pub const MAX_WAIT: Duration = Duration::from_secs(50);
/// Hold when `timeout` is absent.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(25);

/// `timeout` in seconds: absent → [`DEFAULT_WAIT`]; a number from 0 up,
/// capped at [`MAX_WAIT`].
fn timeout(args: &Value) -> Result<Duration, ApiError> {
    match &args["timeout"] {
        Value::Null => Ok(DEFAULT_WAIT),
        v => v
            .as_f64()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(|s| Duration::from_secs_f64(s.min(MAX_WAIT.as_secs_f64())))
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::InvalidRequest,
                    "timeout must be a number of seconds from 0 to 50",
                )
            }),
    }
}

/// Runs one `wait_for_messages` for `scope`'s caller in `session`.
pub async fn wait(
    scope: &CallScope,
    session: Option<&str>,
    args: &Value,
) -> Result<Answer, ApiError> {
    let wait = timeout(args)?;
    if scope.state.is_draining() {
        return Err(ApiError::new(
            ErrorCode::Unavailable,
            "this node is draining; connect to another",
        )
        .retry_after(Duration::from_secs(1)));
    }
    let sessions = &scope.state.mcp.sessions;
    if let Some(s) = session {
        // One listener per session: the wait takes over from the session's
        // event stream, at its position, without displacing it.
        super::stream::hand_over(sessions, s, sessions.stop_streaming(s)).await;
    }
    let resume = match session.and_then(|s| sessions.cursor(s)) {
        None => None,
        Some(cursor) => match Resume::parse(Some(&cursor)) {
            Resume::After(position) => Some(position),
            Resume::Now | Resume::Unaddressable => None,
        },
    };
    let started = start(
        &scope.state,
        scope.peer,
        scope.caller.clone(),
        resume,
        wait,
        switchboard_actors::session::Transport::Mcp,
    );
    let answer = match started {
        Ok(held) => held.body().await,
        Err(e) => Err(e),
    };
    let body = match answer {
        Ok(body) => body,
        Err(e) if e.code == ErrorCode::CursorExpired => {
            if let Some(s) = session {
                sessions.clear_cursor(s);
            }
            return Err(ApiError::new(
                ErrorCode::CursorExpired,
                "events since your previous call are no longer held; catch up with get_messages, \
                 then call wait_for_messages again (it listens from now)",
            ));
        }
        Err(e) => return Err(e),
    };
    if let Some(s) = session {
        sessions.set_cursor(s, body.cursor.clone());
    }
    if let Some(end) = body.ended {
        // Displaced (another listener of this token took over), or the
        // node is draining: a refusal with the session end's code, as
        // `/updates` names it in its header.
        return Ok(Answer {
            text: format!(
                "{}: this listener was ended (another connection of this agent took over, or the \
                 node is going away); nothing was lost, call again once it is the only listener",
                end.as_str()
            ),
            data: json!({"error": {"code": end.as_str()}, "cursor": body.cursor}),
            error: true,
        });
    }
    let events: Vec<Value> = body
        .events
        .iter()
        .filter_map(|e| serde_json::to_value(e).ok())
        .collect();
    let reader = scope.caller.principal.participant.id.as_str();
    let text = if events.is_empty() {
        "(nothing new — call wait_for_messages again)".to_owned()
    } else {
        render::events(&events, reader)
    };
    Ok(Answer::ok(
        text,
        json!({"cursor": body.cursor, "events": events}),
    ))
}
