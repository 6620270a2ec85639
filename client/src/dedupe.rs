//! The bounded window of event keys already handed to the caller.
//!
//! Delivery is at-least-once across reconnects and REST catch-ups
//! (protocol §11: "dedupe on `message.id`"); the window drops the copies.
//! It remembers the last `capacity` keys, oldest forgotten first, so its
//! memory stays bounded on a stream that runs for months.

use std::collections::{HashSet, VecDeque};

/// Keys of delivered events, at most `capacity` of them.
pub struct DedupeWindow {
    capacity: usize,
    /// Invariant: holds exactly the keys of `order`.
    seen: HashSet<String>,
    order: VecDeque<String>,
}

impl DedupeWindow {
    /// A window remembering `capacity` keys (at least 1).
    pub fn new(capacity: usize) -> Self {
        DedupeWindow {
            capacity: capacity.max(1),
            seen: HashSet::new(),
            order: VecDeque::new(),
        }
    }

    /// Records `key`; false when it is already in the window (a duplicate).
    pub fn insert(&mut self, key: String) -> bool {
        if self.seen.contains(&key) {
            return false;
        }
        if self.order.len() == self.capacity {
            if let Some(old) = self.order.pop_front() {
                self.seen.remove(&old);
            }
        }
        self.seen.insert(key.clone());
        self.order.push_back(key);
        true
    }
}

/// The dedupe key of an event: `message.id` for `message` events (the
/// protocol's key), the whole event for every other kind (applying one of
/// those twice is harmless, but the caller should not see it twice).
pub fn key_of(raw: &serde_json::Value) -> String {
    if raw["type"] == "message" {
        if let Some(id) = raw["message"]["id"].as_str() {
            return format!("message:{id}");
        }
    }
    // serde_json's maps are ordered by key: equal events give equal text.
    format!("event:{raw}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn drops_repeats_and_forgets_the_oldest_past_capacity() {
        let mut w = DedupeWindow::new(2);
        assert!(w.insert("a".into()));
        assert!(!w.insert("a".into()));
        assert!(w.insert("b".into()));
        assert!(w.insert("c".into()));
        assert!(w.insert("a".into()), "a was forgotten");
        assert!(!w.insert("c".into()));
    }

    #[test]
    fn messages_key_on_their_id_other_events_on_their_content() {
        let m = json!({"type":"message","message":{"id":"m1","content":"x"}});
        let m2 = json!({"type":"message","message":{"id":"m1","content":"edited"}});
        assert_eq!(key_of(&m), key_of(&m2));
        let r = json!({"type":"reaction.added","messageId":"m1","count":1});
        let r2 = json!({"type":"reaction.added","messageId":"m1","count":2});
        assert_ne!(key_of(&r), key_of(&r2));
    }
}
