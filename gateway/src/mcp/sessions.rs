//! The MCP sessions of this node: which token opened each, and where its
//! `wait_for_messages` left off.
//!
//! rmcp keeps the sessions themselves (and expires them after
//! `timing.mcp_session_idle` without a request); this table holds what
//! Switchboard adds to each. Entries idle for twice that long are dropped,
//! so a binding always outlives its session.

use crate::auth::Caller;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use switchboard_actors::token::TokenHash;

/// One session's binding.
struct Entry {
    /// The token that opened the session; the only one that may use it.
    token: TokenHash,
    /// The cursor the last `wait_for_messages` answered with (`None`:
    /// none yet, the next call starts from now).
    cursor: Option<String>,
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
                seen: now,
            },
        );
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

    /// Number of bound sessions (for the gauges).
    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    /// Whether no session is bound.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
