//! `POST /rooms {name, visibility?, brief?}` → 201 `{room, links: {owner,
//! guest, reader}}`: a new room, which is a new Bay holding one GROUP
//! conversation, with one capability per role. Open to anyone (per-IP
//! bucket `rooms.create_per_hour` / `rooms.create_burst`) unless
//! `rooms.admin_only_creation`; the admin token is always accepted and
//! draws on no bucket.

use super::limits::RoomLimits;
use super::view::RoomView;
use super::{link_url, mint_capability, Opened};
use crate::error::ApiError;
use crate::provision::{self, check_text, NewConversation, NewParticipant, MAX_NAME_CHARS};
use crate::state::AppState;
use actix_web::http::header::AUTHORIZATION;
use actix_web::{post, web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use switchboard_actors::model::Conversation;
use switchboard_actors::store::{
    now_ms, BriefChange, Created, Room, RoomLink, RoomRole, SecretHash, Visibility,
};
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use switchboard_protocol::model::{ConversationType, ParticipantKind};
use utoipa::ToSchema;

/// Id of the participant that owns a created room: the owner link's
/// deletions and the initial brief are made as it.
pub const OWNER_ID: &str = "p_room_owner";
/// The owner participant's display name (the brief's author).
pub const OWNER_NAME: &str = "room";

/// Body of `POST /rooms`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewRoom {
    /// Display name, 1–200 characters.
    name: String,
    /// `public` or `private` (the default).
    #[schema(value_type = Option<String>)]
    visibility: Option<Visibility>,
    /// Text of the room's first message, pinned as its brief.
    brief: Option<String>,
}

/// The three capability URLs of a new room.
#[derive(Serialize, ToSchema)]
pub struct RoomLinks {
    /// Every operation, deletions included.
    pub owner: String,
    /// Read, listen, history, send, pin, unpin, react.
    pub guest: String,
    /// Read, listen, history.
    pub reader: String,
}

/// `POST /rooms` answer.
#[derive(Serialize, ToSchema)]
pub struct RoomCreated {
    /// The room as the owner link sees it.
    pub room: RoomView,
    /// Full URLs, `<public base URL>/r/<capability>`.
    pub links: RoomLinks,
}

/// What the request's `Authorization` header presents.
enum Presented {
    /// No bearer token: an anonymous creator.
    Nothing,
    /// The configured admin token (compared as SHA-256 digests, in
    /// constant time).
    Admin,
    /// Some other bearer token, or any when no admin token is configured.
    Wrong,
}

fn presented(state: &AppState, req: &HttpRequest) -> Presented {
    let Some(token) = req
        .headers()
        .get(AUTHORIZATION)
        .map(|v| v.to_str().ok().and_then(|v| v.strip_prefix("Bearer ")))
    else {
        return Presented::Nothing;
    };
    let matches = |expected: &String, t: &str| {
        let p = hex::encode(Sha256::digest(t.trim().as_bytes()));
        bool::from(p.as_bytes().ct_eq(expected.as_bytes()))
    };
    match (&state.admin_token_hash, token) {
        (Some(expected), Some(t)) if matches(expected, t) => Presented::Admin,
        _ => Presented::Wrong,
    }
}

/// Who may create: the admin always, drawing on no bucket; a request
/// presenting any other credential is 401 before any bucket is looked at
/// (a bad token is a bad token, whether or not the bucket is empty);
/// anonymous callers unless admin-only, within their IP's bucket.
fn admit(state: &AppState, limits: &RoomLimits, req: &HttpRequest) -> Result<(), ApiError> {
    match presented(state, req) {
        Presented::Admin => return Ok(()),
        Presented::Wrong => return Err(ApiError::unauthorized()),
        Presented::Nothing => {}
    }
    if state.settings.rooms.admin_only_creation {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "rooms are created by the operator here (admin token required)",
        ));
    }
    limits.create(state.client_of(req))
}

/// `POST /rooms`.
#[utoipa::path(
    operation_id = "createRoom",
    tag = "rooms",
    summary = "Create a room shared by link",
    description = "Creates a room (a new Bay with one GROUP conversation) and three capability links: owner, guest and reader. Each link is `<public base URL>/r/<capability>` with a capability of 128 random bits (22 url-safe characters); keep them private. Open to anyone within `rooms.create_per_hour` per IP (burst `rooms.create_burst`) unless `rooms.admin_only_creation`; the admin token is always accepted. `brief`, when given, is posted as the first message and pinned.",
    request_body = NewRoom,
    responses(
        (status = 201, description = "The room and its links", body = RoomCreated),
        (status = 400, description = "INVALID_JSON or INVALID_REQUEST", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED: an Authorization header that is not the admin token", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: creation is admin-only", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 503, description = "STORE_UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
)]
#[post("/rooms")]
pub async fn create_room(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Json<NewRoom>,
) -> Result<HttpResponse, ApiError> {
    admit(&state, &state.rooms, &req)?;
    let body = body.into_inner();
    check_text("name", &body.name, MAX_NAME_CHARS, true)?;
    if let Some(brief) = &body.brief {
        super::reply::check_body(&state, "brief", brief)?;
    }
    let name = body.name.trim().to_owned();
    let conversation = provision_room(&state, &name).await?;
    let bay = provision_bay_of(&conversation)?;
    let room = Room {
        bay: bay.clone(),
        conversation: conversation.id.clone(),
        name,
        visibility: body.visibility.unwrap_or_default(),
        created_at_ms: now_ms(),
        brief: None,
        metadata_revision: 1,
        last_activity_ms: 0,
    };
    let Created::Created(mut room) = state.store.create_room(room).await? else {
        return Err(ApiError::new(ErrorCode::AlreadyExists, "the room exists"));
    };
    let base = super::base(&state, &req);
    let mut urls = Vec::new();
    for role in [RoomRole::Owner, RoomRole::Guest, RoomRole::Reader] {
        urls.push(link_url(&base, &store_link(&state, &room, role).await?));
    }
    if let Some(text) = body.brief {
        let owner = state
            .store
            .participant(
                &bay,
                &switchboard_protocol::ids::ParticipantId(OWNER_ID.into()),
            )
            .await?
            .ok_or_else(ApiError::not_found)?;
        let message = super::reply::post_as(&state, &room, owner, text, None, None).await?;
        if let switchboard_actors::store::Updated::Updated(r) = state
            .store
            .set_brief(&bay, &room.conversation, BriefChange::Pin(message.id))
            .await?
        {
            room = r;
        }
    }
    let owner = Opened {
        room,
        role: RoomRole::Owner,
        capability: String::new(),
    };
    let [owner_url, guest, reader] = <[String; 3]>::try_from(urls)
        .map_err(|_| ApiError::new(ErrorCode::Internal, "links were not minted"))?;
    Ok(HttpResponse::Created().json(RoomCreated {
        room: RoomView::of(&owner, &state.settings.rooms),
        links: RoomLinks {
            owner: owner_url,
            guest,
            reader,
        },
    }))
}

/// The Bay a provisioned conversation lives in (its id is the Bay's, see
/// [`provision_room`]).
fn provision_bay_of(c: &Conversation) -> Result<switchboard_protocol::ids::BayId, ApiError> {
    c.id.0
        .strip_prefix("c_")
        .map(|rest| switchboard_protocol::ids::BayId(format!("b_{rest}")))
        .ok_or_else(|| ApiError::new(ErrorCode::Internal, "unexpected room id"))
}

/// A new Bay `b_<ulid>` with the owner participant and one GROUP
/// conversation `c_<same ulid>` titled `name`, the owner its admin.
async fn provision_room(state: &AppState, name: &str) -> Result<Conversation, ApiError> {
    let ulid = ulid::Ulid::new().to_string().to_ascii_lowercase();
    let bay =
        provision::create_bay(&*state.store, Some(format!("b_{ulid}")), name.to_owned()).await?;
    provision::create_participant(
        &*state.store,
        &bay.id,
        NewParticipant {
            id: Some(OWNER_ID.to_owned()),
            kind: ParticipantKind::User,
            name: OWNER_NAME.to_owned(),
            description: None,
            connector: None,
            token: None,
        },
    )
    .await?;
    provision::create_conversation(
        &*state.store,
        &bay.id,
        NewConversation {
            id: Some(format!("c_{ulid}")),
            kind: ConversationType::Group,
            title: Some(name.to_owned()),
            members: vec![OWNER_ID.to_owned()],
            admins: vec![OWNER_ID.to_owned()],
            policy: None,
        },
    )
    .await
}

/// Mints and stores one capability for `role` in `room`; returns it.
///
/// # Errors
/// 503 when the store is down.
pub async fn store_link(state: &AppState, room: &Room, role: RoomRole) -> Result<String, ApiError> {
    loop {
        let capability = mint_capability();
        let link = RoomLink {
            bay: room.bay.clone(),
            conversation: room.conversation.clone(),
            role,
        };
        if let Created::Created(()) = state
            .store
            .create_room_link(&SecretHash::of(&capability), link)
            .await?
        {
            return Ok(capability);
        }
    }
}
