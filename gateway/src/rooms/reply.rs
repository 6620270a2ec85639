//! REPLY: `POST /r/{cap} {author, body, client_id, reply_to?}` → 201 with
//! the message (docs/rooms.md, "REPLY"), and the write of the GET-only
//! send (`read.rs` parses it). The post goes through the conversation
//! actor as the author's participant ([`super::authors`]), so it is routed
//! like any human message and reaches the Bay's members on every transport.
//!
//! `client_id` is required and scoped to the room: an identical retry
//! answers the first message (200), a changed one (another author, body or
//! reply target) is 409 IDEMPOTENCY_KEY_REUSED, and a retry of a message
//! deleted since is 410 MESSAGE_DELETED (never sent again). Like every
//! idempotency key here, it is remembered for the replay window.

use super::view::{self, RoomMessage};
use super::Opened;
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::http::StatusCode;
use actix_web::{post, web, HttpRequest, HttpResponse};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use switchboard_actors::conversation::{Post, PostOutcome};
use switchboard_actors::model::{Participant, StoredMessage};
use switchboard_actors::store::{Idempotency, Room};
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use switchboard_protocol::ids::MessageId;
use utoipa::ToSchema;

/// Longest `client_id`, in bytes (printable ASCII).
pub const MAX_CLIENT_ID: usize = 255;

/// Body of a REPLY.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RoomReplyBody {
    /// Your display name, 1–200 characters (unverified).
    pub author: String,
    /// The text, 1 to `limits.max_content_chars` characters.
    pub body: String,
    /// Your unique id for this message: retries reuse it.
    pub client_id: String,
    /// The decimal id of a message of this room to reply to.
    pub reply_to: Option<String>,
}

/// Checks a message text, named `field` in the refusal: not blank, at
/// most `limits.max_content_chars`, and no control character but line
/// breaks (LF, CR) and tabs.
///
/// # Errors
/// 400 INVALID_CONTENT.
pub fn check_body(state: &AppState, field: &str, body: &str) -> Result<(), ApiError> {
    let max = state.settings.limits.max_content_chars;
    if body.trim().is_empty() || body.chars().count() > max {
        return Err(ApiError::new(
            ErrorCode::InvalidContent,
            format!("{field} must be 1 to {max} characters and not blank"),
        ));
    }
    if body
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
    {
        return Err(ApiError::new(
            ErrorCode::InvalidContent,
            format!("{field} must not contain control characters other than line breaks and tabs"),
        ));
    }
    Ok(())
}

fn check_client_id(id: &str) -> Result<(), ApiError> {
    let printable = id.bytes().all(|b| (0x20..0x7f).contains(&b));
    if id.is_empty() || id.len() > MAX_CLIENT_ID || !printable {
        return Err(ApiError::new(
            ErrorCode::InvalidIdempotencyKey,
            "client_id is required: 1 to 255 printable ascii characters",
        ));
    }
    Ok(())
}

/// SHA-256 (hex) of the parts, each length-prefixed.
fn digest(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p);
    }
    hex::encode(h.finalize())
}

/// Posts `text` in `room` as `sender` through the conversation actor.
///
/// # Errors
/// 503 when the store or the actor cannot be reached.
pub async fn post_as(
    state: &AppState,
    room: &Room,
    sender: Participant,
    text: String,
    reply_to: Option<MessageId>,
    idempotency: Option<Idempotency>,
) -> Result<StoredMessage, ApiError> {
    match post_outcome(state, room, sender, text, reply_to, idempotency).await? {
        PostOutcome::Posted(m) => Ok(*m),
        _ => Err(ApiError::new(
            ErrorCode::Internal,
            "the post was not stored",
        )),
    }
}

async fn post_outcome(
    state: &AppState,
    room: &Room,
    sender: Participant,
    content: String,
    reply_to: Option<MessageId>,
    idempotency: Option<Idempotency>,
) -> Result<PostOutcome, ApiError> {
    Ok(state
        .registry
        .conversation(&room.bay, &room.conversation)
        .send(Post {
            sender,
            content,
            reply_to,
            metadata: None,
            card: None,
            poll: None,
            usage: None,
            idempotency,
            stream: false,
            budget: None,
            received: std::time::Instant::now(),
        })
        .await??)
}

/// What a send asks for, checked.
pub struct Send {
    /// The author's display name.
    pub author: String,
    /// The text.
    pub body: String,
    /// The client's id of the message.
    pub client_id: String,
    /// The decimal id replied to, as sent.
    pub reply_to: Option<String>,
}

/// Sends for `link`: 201 and the message, or 200 and the first message
/// for an identical retry.
///
/// # Errors
/// 403 for a link that cannot send; 400 INVALID_CONTENT /
/// INVALID_IDEMPOTENCY_KEY / INVALID_REQUEST (author) /
/// INVALID_REPLY_TARGET; 409 IDEMPOTENCY_KEY_REUSED; 410 MESSAGE_DELETED;
/// 429 with `Retry-After`; 503.
pub async fn send(
    state: &AppState,
    link: &Opened,
    send: Send,
) -> Result<(StatusCode, RoomMessage), ApiError> {
    link.require("send")?;
    super::authors::check_author(&send.author)?;
    check_body(state, "body", &send.body)?;
    check_client_id(&send.client_id)?;
    let reply_to = match &send.reply_to {
        None => None,
        Some(wire) => Some(view::message_id(wire).ok_or_else(bad_target)?),
    };
    state.rooms.write(&link.room)?;
    let room = &link.room;
    let sender =
        super::authors::author(state, room, &send.author, state.settings.rooms.max_authors).await?;
    let idempotency = Idempotency {
        key: digest(&[
            b"room",
            room.conversation.0.as_bytes(),
            send.client_id.as_bytes(),
        ]),
        fingerprint: digest(&[
            send.author.trim().as_bytes(),
            send.body.as_bytes(),
            send.reply_to.as_deref().unwrap_or("").as_bytes(),
        ]),
    };
    let outcome = post_outcome(state, room, sender, send.body, reply_to, Some(idempotency)).await?;
    let (status, message) = match outcome {
        PostOutcome::Posted(m) => {
            metrics::counter!(crate::metrics::MESSAGES_ACCEPTED).increment(1);
            (StatusCode::CREATED, *m)
        }
        PostOutcome::Duplicate(first) if first.is_deleted() => {
            return Err(ApiError::new(
                ErrorCode::MessageDeleted,
                "the message this client_id created was removed; it is not sent again",
            ))
        }
        PostOutcome::Duplicate(first) => (StatusCode::OK, *first),
        PostOutcome::KeyReused => {
            return Err(ApiError::new(
                ErrorCode::IdempotencyKeyReused,
                "this client_id was used for a different message",
            ))
        }
        PostOutcome::NotFound => return Err(ApiError::not_found()),
        PostOutcome::InvalidReplyTarget => return Err(bad_target()),
        PostOutcome::RateLimited(wait) => return Err(crate::ratelimit::agent_limited(wait)),
    };
    let shown = view::render(
        &*state.store,
        &room.bay,
        room.brief.as_ref(),
        std::slice::from_ref(&message),
        &HashMap::new(),
    )
    .await?
    .pop()
    .ok_or_else(|| ApiError::new(ErrorCode::Internal, "the message cannot be shown"))?;
    Ok((status, shown))
}

fn bad_target() -> ApiError {
    ApiError::new(
        ErrorCode::InvalidReplyTarget,
        "reply_to is not the id of a message of this room",
    )
}

/// `POST /r/{cap}`.
#[utoipa::path(
    operation_id = "replyInRoom",
    tag = "rooms",
    summary = "Send a message in a room",
    description = "Posts as `author` (an unverified display name). `client_id` is required: an identical retry answers the first message with 200, a changed retry is 409 IDEMPOTENCY_KEY_REUSED, a retry of a removed message is 410 MESSAGE_DELETED. The answer carries no cursor. The post reaches the Bay's members like a person's message (mentions wake agents).",
    params(("cap" = String, Path, description = "The link's capability")),
    request_body = RoomReplyBody,
    responses(
        (status = 201, description = "Sent", body = RoomMessage),
        (status = 200, description = "An identical retry: the first message", body = RoomMessage),
        (status = 400, description = "INVALID_JSON, INVALID_REQUEST, INVALID_CONTENT, INVALID_IDEMPOTENCY_KEY or INVALID_REPLY_TARGET", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: the link cannot send; BAY_SUSPENDED, ACCOUNT_SUSPENDED (the author) AUTHOR_REMOVED (an operator removed the author) or ROOM_AUTHORS_FULL (a new author past `rooms.max_authors`)", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown link", body = ErrorBody),
        (status = 409, description = "IDEMPOTENCY_KEY_REUSED", body = ErrorBody),
        (status = 410, description = "MESSAGE_DELETED or ROOM_EXPIRED", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 503, description = "STORE_UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
)]
#[post("/r/{cap}")]
pub async fn reply(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Json<RoomReplyBody>,
    _req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let link = super::open(&state, &path).await?;
    let b = body.into_inner();
    let (status, message) = send(
        &state,
        &link,
        Send {
            author: b.author,
            body: b.body,
            client_id: b.client_id,
            reply_to: b.reply_to,
        },
    )
    .await?;
    Ok(HttpResponse::build(status).json(message))
}
