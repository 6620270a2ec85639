//! Room records and capabilities: the Redis engine's [`RoomStore`].
//!
//! A room is one hash in its Bay's slot (`sb:{bay}:room:<cid>`: the
//! record as created, the brief, the metadata revision and the last
//! activity as separate fields, so a pin and a read never overwrite each
//! other); its changes are scripts (`rooms/*.lua`) on that one key. A
//! capability is one string key written with `NX`. No operation touches
//! two slots, so all of it works on Redis Cluster.

use super::codec::{bytes, corrupt, decode, encode, status, ScriptStatus};
use super::keys::{self, BayKeys};
use super::lua::LuaScript;
use super::RedisStore;
use crate::store::rooms::{BriefChange, Room, RoomAuthor, RoomLink, RoomStore};
use crate::store::{Created, SecretHash, StoreError, Updated};
use ::redis::{cmd, Value};
use async_trait::async_trait;
use std::sync::LazyLock;
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId};

/// Stores a room unless its conversation has one (KEYS: the room; ARGV:
/// JSON, creation ms).
static CREATE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("rooms/create.lua")]));

/// Pins or unpins (KEYS: the room; ARGV: `pin`|`unpin`, message id).
static BRIEF: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("rooms/brief.lua")]));

/// Renames (KEYS: the room; ARGV: the name).
static RENAME: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("rooms/rename.lua")]));

/// Moves the last activity forward (KEYS: the room; ARGV: ms).
static TOUCH: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("rooms/touch.lua")]));

/// Counts a link author under the cap (KEYS: the room's authors; ARGV:
/// the author, the cap).
static AUTHOR: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[include_str!("rooms/author.lua")]));

/// A reply value as text (`None` for nil / false).
fn text(doing: &'static str, key: &str, v: &Value) -> Result<Option<String>, StoreError> {
    match v {
        Value::Nil | Value::Boolean(false) => Ok(None),
        Value::Int(n) => Ok(Some(n.to_string())),
        other => Ok(Some(
            String::from_utf8(bytes(doing, key, other)?.to_vec())
                .map_err(|e| corrupt(doing, key, e.to_string()))?,
        )),
    }
}

fn number(doing: &'static str, key: &str, raw: Option<String>) -> Result<u64, StoreError> {
    raw.unwrap_or_default()
        .parse()
        .map_err(|e: std::num::ParseIntError| corrupt(doing, key, e.to_string()))
}

#[async_trait]
impl RoomStore for RedisStore {
    async fn create_room(&self, room: Room) -> Result<Created<Room>, StoreError> {
        const DOING: &str = "creating a room";
        let key = BayKeys::new(&room.bay).room(&room.conversation);
        let room = Room {
            brief: None,
            metadata_revision: 1,
            last_activity_ms: room.created_at_ms,
            ..room
        };
        let json = encode(DOING, &key, &room)?;
        let reply = self
            .invoke_status(
                DOING,
                &CREATE,
                &[&key],
                &[&json, &room.created_at_ms.to_string()],
            )
            .await?;
        Ok(match status(DOING, &key, &reply)? {
            ScriptStatus::Ok => Created::Created(room),
            ScriptStatus::Exists => Created::AlreadyExists,
            other => return Err(corrupt(DOING, &key, format!("script said {other:?}"))),
        })
    }

    async fn room(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
    ) -> Result<Option<Room>, StoreError> {
        const DOING: &str = "reading a room";
        let key = BayKeys::new(bay).room(conversation);
        let fields: Vec<Value> = self
            .query(
                DOING,
                &key,
                cmd("HMGET")
                    .arg(&key)
                    .arg("r")
                    .arg("brief")
                    .arg("mrev")
                    .arg("a")
                    .arg("name"),
            )
            .await?;
        let [r, brief, mrev, a, name] = fields.as_slice() else {
            return Err(corrupt(DOING, &key, "HMGET answered the wrong count"));
        };
        let Some(r) = text(DOING, &key, r)? else {
            return Ok(None);
        };
        let mut room: Room = decode(DOING, &key, r.as_bytes())?;
        room.brief = text(DOING, &key, brief)?.map(MessageId);
        room.metadata_revision = number(DOING, &key, text(DOING, &key, mrev)?)?;
        room.last_activity_ms = number(DOING, &key, text(DOING, &key, a)?)?;
        if let Some(name) = text(DOING, &key, name)? {
            room.name = name;
        }
        Ok(Some(room))
    }

    async fn create_room_link(
        &self,
        capability: &SecretHash,
        link: RoomLink,
    ) -> Result<Created<()>, StoreError> {
        const DOING: &str = "storing a room link";
        let key = keys::room_link(capability);
        let json = encode(DOING, &key, &link)?;
        let set: Option<String> = self
            .query(DOING, &key, cmd("SET").arg(&key).arg(json).arg("NX"))
            .await?;
        Ok(match set {
            Some(_) => Created::Created(()),
            None => Created::AlreadyExists,
        })
    }

    async fn room_link(&self, capability: &SecretHash) -> Result<Option<RoomLink>, StoreError> {
        const DOING: &str = "reading a room link";
        let key = keys::room_link(capability);
        let raw: Option<Vec<u8>> = self.query(DOING, &key, cmd("GET").arg(&key)).await?;
        raw.map(|r| decode(DOING, &key, &r)).transpose()
    }

    async fn set_brief(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        change: BriefChange,
    ) -> Result<Updated<Room>, StoreError> {
        const DOING: &str = "changing a room's brief";
        let key = BayKeys::new(bay).room(conversation);
        let (op, id) = match &change {
            BriefChange::Pin(id) => ("pin", id),
            BriefChange::Unpin(id) => ("unpin", id),
        };
        let reply = self
            .invoke_status(DOING, &BRIEF, &[&key], &[op, &id.0])
            .await?;
        match status(DOING, &key, &reply)? {
            ScriptStatus::Ok => {}
            ScriptStatus::Missing => return Ok(Updated::NotFound),
            other => return Err(corrupt(DOING, &key, format!("script said {other:?}"))),
        }
        // The record's other fields as they are now (the change is done).
        match self.room(bay, conversation).await? {
            Some(room) => Ok(Updated::Updated(room)),
            None => Ok(Updated::NotFound),
        }
    }

    async fn rename_room(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        name: &str,
    ) -> Result<Updated<Room>, StoreError> {
        const DOING: &str = "renaming a room";
        let key = BayKeys::new(bay).room(conversation);
        let reply = self.invoke_status(DOING, &RENAME, &[&key], &[name]).await?;
        match status(DOING, &key, &reply)? {
            ScriptStatus::Ok => {}
            ScriptStatus::Missing => return Ok(Updated::NotFound),
            other => return Err(corrupt(DOING, &key, format!("script said {other:?}"))),
        }
        match self.room(bay, conversation).await? {
            Some(room) => Ok(Updated::Updated(room)),
            None => Ok(Updated::NotFound),
        }
    }

    async fn touch_room(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        at_ms: u64,
    ) -> Result<(), StoreError> {
        const DOING: &str = "recording a room's activity";
        let key = BayKeys::new(bay).room(conversation);
        self.invoke_status(DOING, &TOUCH, &[&key], &[&at_ms.to_string()])
            .await?;
        Ok(())
    }

    async fn admit_room_author(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        author: &ParticipantId,
        max: u32,
    ) -> Result<RoomAuthor, StoreError> {
        const DOING: &str = "counting a room's author";
        let key = BayKeys::new(bay).room_authors(conversation);
        let reply = self
            .invoke_status(DOING, &AUTHOR, &[&key], &[&author.0, &max.to_string()])
            .await?;
        let first = text(DOING, &key, reply.first().unwrap_or(&Value::Nil))?;
        if first.as_deref() == Some("full") {
            return Ok(RoomAuthor::Full);
        }
        let second = text(DOING, &key, reply.get(1).unwrap_or(&Value::Nil))?;
        match (first.as_deref(), second.as_deref()) {
            (Some("ok"), Some("new")) => Ok(RoomAuthor::New),
            (Some("ok"), Some("pending")) => Ok(RoomAuthor::Pending),
            (Some("ok"), Some("joined")) => Ok(RoomAuthor::Joined),
            other => Err(corrupt(DOING, &key, format!("script said {other:?}"))),
        }
    }

    async fn room_author_joined(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        author: &ParticipantId,
    ) -> Result<(), StoreError> {
        const DOING: &str = "recording a room author's joining";
        let key = BayKeys::new(bay).room_authors(conversation);
        let _: i64 = self
            .query(DOING, &key, cmd("HSET").arg(&key).arg(&author.0).arg("1"))
            .await?;
        Ok(())
    }
}
