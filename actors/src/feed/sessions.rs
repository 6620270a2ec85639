//! The attached sessions of a feed, each in a slot, with the delivery
//! state the fan-out keeps per session ([`Attachment`]). A table of its
//! own: its invariant (the id index and the slots agree) holds whatever
//! the actor does with the sessions.

use crate::session::SessionHandle;
use crate::store::log::LogRecord;
use std::collections::HashMap;
use std::sync::Arc;
use switchboard_protocol::cursor::EntryId;
use switchboard_protocol::ids::{ParticipantId, SessionId, TokenId};

/// One attached session and where its deliveries stand.
pub(super) struct Attachment {
    pub(super) session: SessionId,
    pub(super) participant: ParticipantId,
    pub(super) token: TokenId,
    /// Id of this session's [`Opening`](crate::store::Opening): the
    /// newest one per token wins.
    pub(super) opened_at: EntryId,
    pub(super) handle: SessionHandle,
    /// The last `through` this session was sent.
    pub(super) last_sent: EntryId,
    /// Records addressed to this session not yet sent to it; empty
    /// between rounds (its capacity is reused).
    pub(super) pending: Vec<Arc<LogRecord>>,
    /// Listed in the feed's `outgoing` (so `pending` goes out).
    pub(super) queued: bool,
    /// Sent a `Deliver` since the last watermark tick.
    pub(super) delivered: bool,
}

/// The attached sessions, each in a slot: the fan-out reaches a session
/// by its slot (listed in `by_participant`), so a delivery costs no
/// session-id hashing or cloning.
#[derive(Default)]
pub(super) struct Sessions {
    slots: Vec<Option<Attachment>>,
    /// Free slots, reused first.
    free: Vec<usize>,
    /// Invariant: `ids[id] = i` exactly when `slots[i]` holds `id`'s attachment.
    ids: HashMap<SessionId, usize>,
}

impl Sessions {
    /// Stores `att` (keyed by `att.session`); returns its slot.
    pub(super) fn insert(&mut self, att: Attachment) -> usize {
        let id = att.session.clone();
        self.remove(&id);
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot] = Some(att);
                slot
            }
            None => {
                self.slots.push(Some(att));
                self.slots.len() - 1
            }
        };
        self.ids.insert(id, slot);
        slot
    }

    pub(super) fn get(&self, id: &SessionId) -> Option<&Attachment> {
        self.ids.get(id).and_then(|&i| self.slots[i].as_ref())
    }

    /// Removes `id`'s attachment; returns it with the slot it held.
    pub(super) fn remove(&mut self, id: &SessionId) -> Option<(usize, Attachment)> {
        let slot = self.ids.remove(id)?;
        let att = self.slots[slot].take()?;
        self.free.push(slot);
        Some((slot, att))
    }

    pub(super) fn at(&self, slot: usize) -> Option<&Attachment> {
        self.slots.get(slot).and_then(Option::as_ref)
    }

    pub(super) fn at_mut(&mut self, slot: usize) -> Option<&mut Attachment> {
        self.slots.get_mut(slot).and_then(Option::as_mut)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    pub(super) fn keys(&self) -> impl Iterator<Item = &SessionId> {
        self.ids.keys()
    }

    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut Attachment> {
        self.slots.iter_mut().flatten()
    }
}

/// Removes `session` from `key`'s list in `map`, and the list once it is
/// empty, so `by_participant` and `by_token` list only attached sessions.
pub(super) fn remove_from<K: std::hash::Hash + Eq, V: PartialEq>(
    map: &mut HashMap<K, Vec<V>>,
    key: &K,
    session: &V,
) {
    if let Some(list) = map.get_mut(key) {
        list.retain(|s| s != session);
        if list.is_empty() {
            map.remove(key);
        }
    }
}
