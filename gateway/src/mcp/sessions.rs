//! The MCP sessions of this node: which token opened each, where its
//! listening left off (one cursor, shared by its event stream and its
//! `wait_for_messages`), and its open event stream, if any.
//!
//! rmcp keeps the sessions themselves (and expires them after
//! `timing.mcp_session_idle` without a request); this table holds what
//! Switchboard adds to each. Entries idle for twice that long are dropped,
//! so a binding always outlives its session.

use crate::auth::Caller;
use crate::realtime::sse::SseSession;
use actix::Addr;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use switchboard_actors::token::TokenHash;

/// One session's binding.
struct Entry {
    /// The token that opened the session; the only one that may use it.
    token: TokenHash,
    /// Where the session's listening left off: the cursor the last
    /// `wait_for_messages` answered with, or the last position of its
    /// event stream (`None`: nothing yet, listening starts from now).
    cursor: Option<String>,
    /// The session's open `GET` event stream.
    stream: Option<Addr<SseSession>>,
    /// Whether a `GET` of the session may listen: false once
    /// `wait_for_messages` listened, or its stream was displaced (the SDKs
    /// reconnect a stream that ended, which would displace back in a loop).
    streams: bool,
    /// The last request of the session.
    seen: Instant,
}

/// Session id → binding, shared by every worker of the node.
pub struct Sessions {
    entries: Mutex<HashMap<String, Entry>>,
    idle: Duration,
}

impl Sessions {
    /// An empty table whose sessions expire after `idle` without a request.
    pub fn new(idle: Duration) -> Self {
        Sessions {
            entries: Mutex::new(HashMap::new()),
            idle,
        }
    }

    /// Records that `caller` opened session `id`, and drops the bindings
    /// of sessions long expired.
    pub fn bind(&self, id: &str, caller: &Caller) {
        let now = Instant::now();
        let keep = self.idle.saturating_mul(2);
        let mut entries = self.entries.lock();
        entries.retain(|_, e| now.duration_since(e.seen) < keep);
        entries.insert(
            id.to_owned(),
            Entry {
                token: caller.token_hash.clone(),
                cursor: None,
                stream: None,
                streams: true,
                seen: now,
            },
        );
    }

    /// Sessions `token` holds open on this node (bindings of sessions that
    /// made a request within the idle expiry).
    pub fn held_by(&self, token: &TokenHash) -> usize {
        let now = Instant::now();
        let entries = self.entries.lock();
        entries
            .values()
            .filter(|e| &e.token == token && now.duration_since(e.seen) < self.idle)
            .count()
    }

    /// Forgets session `id` (it was ended with `DELETE`).
    pub fn unbind(&self, id: &str) {
        self.entries.lock().remove(id);
    }

    /// Whether session `id` exists here and belongs to `token`; if so its
    /// use is noted. An unknown id and another token's are both `false`.
    pub fn touch(&self, id: &str, token: &TokenHash) -> bool {
        let mut entries = self.entries.lock();
        match entries.get_mut(id) {
            Some(e) if &e.token == token => {
                e.seen = Instant::now();
                true
            }
            _ => false,
        }
    }

    /// The listening position of session `id` (`None`: from now).
    pub fn cursor(&self, id: &str) -> Option<String> {
        self.entries.lock().get(id).and_then(|e| e.cursor.clone())
    }

    /// Moves session `id`'s listening position to `cursor`.
    pub fn set_cursor(&self, id: &str, cursor: String) {
        if let Some(e) = self.entries.lock().get_mut(id) {
            e.cursor = Some(cursor);
        }
    }

    /// Forgets session `id`'s listening position: its next call starts from now.
    pub fn clear_cursor(&self, id: &str) {
        if let Some(e) = self.entries.lock().get_mut(id) {
            e.cursor = None;
        }
    }

    /// Whether a `GET` of session `id` may open its event stream.
    pub fn may_stream(&self, id: &str) -> bool {
        self.entries.lock().get(id).is_some_and(|e| e.streams)
    }

    /// Takes session `id`'s open stream (for a newer one to take over).
    pub fn take_stream(&self, id: &str) -> Option<Addr<SseSession>> {
        self.entries
            .lock()
            .get_mut(id)
            .and_then(|e| e.stream.take())
    }

    /// Records `stream` as session `id`'s open stream.
    pub fn set_stream(&self, id: &str, stream: Addr<SseSession>) {
        if let Some(e) = self.entries.lock().get_mut(id) {
            e.stream = Some(stream);
        }
    }

    /// Session `id`'s stream `stream` ended at `cursor` (`None`: it never
    /// opened, or handed its position over already).
    pub fn stream_ended(&self, id: &str, stream: &Addr<SseSession>, cursor: Option<String>) {
        if let Some(e) = self.entries.lock().get_mut(id) {
            if e.stream.as_ref() == Some(stream) {
                e.stream = None;
                if cursor.is_some() {
                    e.cursor = cursor;
                }
            }
        }
    }

    /// From now on session `id` listens with `wait_for_messages`: a `GET`
    /// no longer opens a stream.
    /// The stream still open, if any, to be ended.
    pub fn stop_streaming(&self, id: &str) -> Option<Addr<SseSession>> {
        let mut entries = self.entries.lock();
        let e = entries.get_mut(id)?;
        e.streams = false;
        e.stream.take()
    }

    /// Session `id`'s stream was displaced: a `GET` no longer opens one
    /// (the stream records its position itself as it stops).
    pub fn stream_displaced(&self, id: &str) {
        if let Some(e) = self.entries.lock().get_mut(id) {
            e.streams = false;
        }
    }

    /// Number of bound sessions (for the gauges).
    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    /// Whether no session is bound.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
