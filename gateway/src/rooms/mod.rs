//! Rooms by link: the room protocol (docs/rooms.md) as a second front
//! door on the same engine. A room is a conversation of a Bay; a
//! capability URL `<public base URL>/r/<capability>` grants one role in
//! it. A room's messages are the conversation's messages, its changes the
//! Bay's log entries, so a link's posts reach the Bay's members on every
//! transport and their posts appear on the link.
//!
//! - [`create`]: `POST /rooms` (a new Bay with one conversation and three links);
//! - [`links`]: `POST /api/admin/bays/{bay}/conversations/{cid}/links` (share a Bay conversation);
//! - [`read`]: `GET /r/{cap}`: READ, FOLLOW ([`follow`]), history and the GET-only send;
//! - [`reply`]: `POST /r/{cap}` (and the GET-only send's write);
//! - [`pins`], [`reactions`], [`moderation`]: the brief, reactions, owner deletion;
//! - [`view`]: the protocol's message and room shapes; [`text`]: the protocol text;
//! - [`authors`]: the participant behind each link author's name;
//! - [`limits`]: the per-IP and per-room buckets and the FOLLOW cap.

pub mod authors;
pub mod create;
pub mod follow;
pub mod limits;
pub mod links;
pub mod moderation;
pub mod pins;
pub mod reactions;
pub mod read;
pub mod reply;
pub mod text;
pub mod view;

use crate::error::ApiError;
use crate::state::AppState;
use actix_web::{web, HttpRequest};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use switchboard_actors::store::{now_ms, Room, RoomRole, SecretHash, Suspension};
use switchboard_protocol::error::ErrorCode;

/// Registers the public routes (`/rooms`, `/r/{cap}…`): no token, the
/// capability in the path is the credential.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(create::create_room)
        .service(read::read_room)
        .service(reply::reply)
        .service(pins::pin)
        .service(pins::unpin)
        .service(reactions::react)
        .service(reactions::unreact)
        .service(moderation::delete_message);
}

/// Registers the operator's route inside the admin API's scope.
pub fn admin_routes(cfg: &mut web::ServiceConfig) {
    cfg.service(links::share);
}

/// Random bytes in a capability: 128 bits, 22 url-safe characters.
const CAPABILITY_BYTES: usize = 16;

/// A room's activity is written at most once per this many ms: reads keep
/// a room alive for 30 days, so a minute's precision is plenty and a
/// FOLLOW loop costs no write per call.
const TOUCH_EVERY_MS: u64 = 60_000;

/// Mints a capability: 128 random bits, base64url without padding (22 chars).
pub fn mint_capability() -> String {
    URL_SAFE_NO_PAD.encode(rand::random::<[u8; CAPABILITY_BYTES]>())
}

/// A link's full URL: `<base>/r/<capability>`.
pub fn link_url(base: &str, capability: &str) -> String {
    format!("{base}/r/{capability}")
}

/// The operations a role permits (the protocol's `allowed_operations`).
pub fn allowed_operations(role: RoomRole) -> &'static [&'static str] {
    match role {
        RoomRole::Owner => &[
            "read", "listen", "history", "send", "pin", "unpin", "react", "delete",
        ],
        RoomRole::Guest => &["read", "listen", "history", "send", "pin", "unpin", "react"],
        RoomRole::Reader => &["read", "listen", "history"],
    }
}

/// A capability resolved: its room (as read now), its role and itself.
#[derive(Clone, Debug)]
pub struct Opened {
    /// The room.
    pub room: Room,
    /// The role the capability grants.
    pub role: RoomRole,
    /// The capability as presented (to fill this link's URLs in).
    pub capability: String,
}

impl Opened {
    /// Whether the role permits `operation` (one of [`allowed_operations`]).
    pub fn may(&self, operation: &str) -> bool {
        allowed_operations(self.role).contains(&operation)
    }

    /// 403 FORBIDDEN unless the role permits `operation`.
    ///
    /// # Errors
    /// 403 FORBIDDEN naming the role.
    pub fn require(&self, operation: &str) -> Result<(), ApiError> {
        if self.may(operation) {
            return Ok(());
        }
        Err(ApiError::new(
            ErrorCode::Forbidden,
            format!("a {} link does not permit {operation}", self.role.as_str()),
        ))
    }
}

/// Whether `cap` looks like a capability this server mints (url-safe,
/// 22–64 characters): anything else is unknown without a store read.
fn well_formed(cap: &str) -> bool {
    (22..=64).contains(&cap.len())
        && cap
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Resolves a capability to its room and role, and records the
/// authorized access as the room's activity.
///
/// # Errors
/// 404 NOT_FOUND for an unknown capability; 403 BAY_SUSPENDED while an
/// operator suspended the room's Bay; 410 ROOM_EXPIRED once the
/// room was inactive for `rooms.inactivity_timeout` + `rooms.expiry_grace`;
/// 503 when the store is down.
pub async fn open(state: &AppState, cap: &str) -> Result<Opened, ApiError> {
    let unknown = || ApiError::new(ErrorCode::NotFound, "no room has this link");
    if !well_formed(cap) {
        return Err(unknown());
    }
    let link = state
        .store
        .room_link(&SecretHash::of(cap))
        .await?
        .ok_or_else(unknown)?;
    let room = state
        .store
        .room(&link.bay, &link.conversation)
        .await?
        .ok_or_else(unknown)?;
    // A suspended Bay refuses its rooms' links like its tokens: every
    // request, reads included, until an operator reinstates it.
    if state.store.suspended(&room.bay, None).await? {
        return Err(ApiError::suspended(Suspension::Bay));
    }
    let rooms = &state.settings.rooms;
    let lifetime = (rooms.inactivity_timeout + rooms.expiry_grace).as_millis() as u64;
    let now = now_ms();
    if now > room.last_activity_ms.saturating_add(lifetime) {
        return Err(ApiError::new(
            ErrorCode::RoomExpired,
            "this room expired after its inactivity timeout",
        ));
    }
    // Written at most once a minute, or four times per lifetime when the
    // lifetime is shorter (tests), so reads really keep the room alive.
    if now.saturating_sub(room.last_activity_ms) >= TOUCH_EVERY_MS.min(lifetime / 4) {
        state
            .store
            .touch_room(&room.bay, &room.conversation, now)
            .await?;
    }
    Ok(Opened {
        room,
        role: link.role,
        capability: cap.to_owned(),
    })
}

/// The base URL links are built on (`public_url`, else the request's).
pub fn base(state: &AppState, req: &HttpRequest) -> String {
    crate::api::pairing::base_url(state, req)
}
