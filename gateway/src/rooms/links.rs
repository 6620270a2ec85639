//! Sharing a Bay conversation by link: `POST
//! /api/admin/bays/{bay}/conversations/{cid}/links {role: guest|reader}`
//! → 201 `{url}` (behind the admin token). The conversation becomes a room
//! (created on the first link, private, named after its title); each call
//! mints another capability. Link posts reach the Bay's members like a
//! person's message, and members' posts show on the link under their names.

use super::create::store_link;
use super::link_url;
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::{post, web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use switchboard_actors::store::{now_ms, Created, Room, RoomRole, Visibility};
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use switchboard_protocol::ids::{BayId, ConversationId};
use switchboard_protocol::model::ConversationType;
use utoipa::ToSchema;

/// Body of the share call.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RoomShareBody {
    /// `guest` (may send, pin, react) or `reader`.
    #[schema(pattern = "^(guest|reader)$")]
    pub role: String,
}

/// The new link.
#[derive(Serialize, ToSchema)]
pub struct RoomShareLink {
    /// `<public base URL>/r/<capability>`; keep it private.
    pub url: String,
}

/// `POST /api/admin/bays/{bay}/conversations/{cid}/links`.
#[utoipa::path(
    operation_id = "shareConversation",
    tag = "admin",
    summary = "Share a conversation by link",
    description = "Mints a capability link to a GROUP conversation with role `guest` or `reader` (the room protocol, docs/rooms.md). The first link makes the conversation a private room named after its title. Link authors appear to the Bay's members as people (their posts are routed like a human's message); members' posts appear on the link under their names.",
    params(
        ("bay" = String, Path, description = "Bay id"),
        ("cid" = String, Path, description = "Conversation id"),
    ),
    request_body = RoomShareBody,
    responses(
        (status = 201, description = "The link", body = RoomShareLink),
        (status = 400, description = "INVALID_REQUEST: bad role, or not a GROUP conversation", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 404, description = "NOT_FOUND", body = ErrorBody),
    ),
    security(("admin_token" = [])),
)]
#[post("/bays/{bay}/conversations/{cid}/links")]
pub async fn share(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Json<RoomShareBody>,
) -> Result<HttpResponse, ApiError> {
    let role = match body.role.as_str() {
        "guest" => RoomRole::Guest,
        "reader" => RoomRole::Reader,
        _ => {
            return Err(ApiError::new(
                ErrorCode::InvalidRequest,
                "role must be guest or reader",
            ))
        }
    };
    let (bay, cid) = path.into_inner();
    let (bay, cid) = (BayId(bay), ConversationId(cid));
    let conversation = state
        .store
        .conversation(&bay, &cid)
        .await?
        .ok_or_else(ApiError::not_found)?;
    if conversation.kind != ConversationType::Group {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "only GROUP conversations can be shared by link",
        ));
    }
    let now = now_ms();
    let room = Room {
        bay: bay.clone(),
        conversation: cid.clone(),
        name: conversation.title.clone().unwrap_or_else(|| cid.0.clone()),
        visibility: Visibility::Private,
        created_at_ms: now,
        brief: None,
        metadata_revision: 1,
        last_activity_ms: now,
    };
    let room = match state.store.create_room(room).await? {
        Created::Created(room) => room,
        Created::AlreadyExists => {
            // Sharing again counts as activity.
            state.store.touch_room(&bay, &cid, now).await?;
            state
                .store
                .room(&bay, &cid)
                .await?
                .ok_or_else(ApiError::not_found)?
        }
    };
    let capability = store_link(&state, &room, role).await?;
    Ok(HttpResponse::Created().json(RoomShareLink {
        url: link_url(&super::base(&state, &req), &capability),
    }))
}
