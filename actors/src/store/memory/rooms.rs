//! Room records and capabilities: the memory engine's [`RoomStore`].

use super::MemoryStore;
use crate::store::rooms::{BriefChange, Room, RoomAuthor, RoomLink, RoomStore};
use crate::store::{Created, SecretHash, StoreError, Updated};
use async_trait::async_trait;
use std::collections::HashMap;
use switchboard_protocol::ids::{BayId, ConversationId, ParticipantId};

/// The area's state, inside the store's one lock.
#[derive(Default)]
pub(super) struct RoomState {
    /// (Bay, conversation) → its room.
    rooms: HashMap<(BayId, ConversationId), Room>,
    /// Capability hash → what it opens.
    links: HashMap<SecretHash, RoomLink>,
    /// (Bay, conversation) → its link authors, each with whether it joined.
    authors: HashMap<(BayId, ConversationId), HashMap<ParticipantId, bool>>,
}

fn key(bay: &BayId, conversation: &ConversationId) -> (BayId, ConversationId) {
    (bay.clone(), conversation.clone())
}

#[async_trait]
impl RoomStore for MemoryStore {
    async fn create_room(&self, room: Room) -> Result<Created<Room>, StoreError> {
        let mut st = self.state.lock();
        let k = key(&room.bay, &room.conversation);
        if st.rooms.rooms.contains_key(&k) {
            return Ok(Created::AlreadyExists);
        }
        let room = Room {
            metadata_revision: 1,
            last_activity_ms: room.created_at_ms,
            ..room
        };
        st.rooms.rooms.insert(k, room.clone());
        Ok(Created::Created(room))
    }

    async fn room(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
    ) -> Result<Option<Room>, StoreError> {
        Ok(self
            .state
            .lock()
            .rooms
            .rooms
            .get(&key(bay, conversation))
            .cloned())
    }

    async fn create_room_link(
        &self,
        capability: &SecretHash,
        link: RoomLink,
    ) -> Result<Created<()>, StoreError> {
        let mut st = self.state.lock();
        if st.rooms.links.contains_key(capability) {
            return Ok(Created::AlreadyExists);
        }
        st.rooms.links.insert(capability.clone(), link);
        Ok(Created::Created(()))
    }

    async fn room_link(&self, capability: &SecretHash) -> Result<Option<RoomLink>, StoreError> {
        Ok(self.state.lock().rooms.links.get(capability).cloned())
    }

    async fn set_brief(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        change: BriefChange,
    ) -> Result<Updated<Room>, StoreError> {
        let mut st = self.state.lock();
        let Some(room) = st.rooms.rooms.get_mut(&key(bay, conversation)) else {
            return Ok(Updated::NotFound);
        };
        let brief = match change {
            BriefChange::Pin(id) => Some(id),
            BriefChange::Unpin(id) if room.brief.as_ref() == Some(&id) => None,
            BriefChange::Unpin(_) => room.brief.clone(),
        };
        if brief != room.brief {
            room.brief = brief;
            room.metadata_revision += 1;
        }
        Ok(Updated::Updated(room.clone()))
    }

    async fn rename_room(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        name: &str,
    ) -> Result<Updated<Room>, StoreError> {
        let mut st = self.state.lock();
        let Some(room) = st.rooms.rooms.get_mut(&key(bay, conversation)) else {
            return Ok(Updated::NotFound);
        };
        if room.name != name {
            name.clone_into(&mut room.name);
            room.metadata_revision += 1;
        }
        Ok(Updated::Updated(room.clone()))
    }

    async fn touch_room(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        at_ms: u64,
    ) -> Result<(), StoreError> {
        if let Some(room) = self
            .state
            .lock()
            .rooms
            .rooms
            .get_mut(&key(bay, conversation))
        {
            room.last_activity_ms = room.last_activity_ms.max(at_ms);
        }
        Ok(())
    }

    async fn admit_room_author(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        author: &ParticipantId,
        max: u32,
    ) -> Result<RoomAuthor, StoreError> {
        let mut st = self.state.lock();
        let authors = st.rooms.authors.entry(key(bay, conversation)).or_default();
        Ok(match authors.get(author) {
            Some(true) => RoomAuthor::Joined,
            Some(false) => RoomAuthor::Pending,
            None if authors.len() >= max as usize => RoomAuthor::Full,
            None => {
                authors.insert(author.clone(), false);
                RoomAuthor::New
            }
        })
    }

    async fn room_author_joined(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        author: &ParticipantId,
    ) -> Result<(), StoreError> {
        self.state
            .lock()
            .rooms
            .authors
            .entry(key(bay, conversation))
            .or_default()
            .insert(author.clone(), true);
        Ok(())
    }
}
