//! The participant behind a link author's name. The protocol's `author` is
//! an unverified display name; each distinct name is one participant of
//! the room's Bay (`p_link_` + 24 hex digits of the name's SHA-256, kind
//! `user`, a token nobody holds) and a member of the room's conversation.
//! So a link post is routed like a human's message (mentions wake agents,
//! `shouldRespond` is set), Bay members see the author's name, and
//! reactions count per author.
//!
//! An operator governs authors like any participant: a suspended author
//! may read but not write, and an author removed from the conversation
//! stays out (its writes are refused) until an operator adds it back.

use super::view::LINK_AUTHOR_PREFIX;
use crate::error::ApiError;
use crate::provision::{check_text, MAX_NAME_CHARS};
use crate::state::AppState;
use sha2::{Digest, Sha256};
use switchboard_actors::model::{Member, Participant};
use switchboard_actors::store::{Created, Room, RoomAuthor, Suspension, Updated};
use switchboard_actors::token::TokenHash;
use switchboard_protocol::error::ErrorCode;
use switchboard_protocol::ids::ParticipantId;
use switchboard_protocol::model::{ParticipantKind, Role};

/// The participant id of author `name` (trimmed).
pub fn author_id(name: &str) -> ParticipantId {
    let digest = hex::encode(Sha256::digest(name.trim().as_bytes()));
    ParticipantId(format!("{LINK_AUTHOR_PREFIX}{}", &digest[..24]))
}

/// Whether `c` changes the direction of the text around it (embeddings,
/// overrides, isolates): in a name it could make the name display as
/// another's.
fn bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// Checks an author name: 1–200 characters, not blank, without control
/// characters (line breaks and NUL included) or bidi embeddings,
/// overrides and isolates (U+202A–U+202E, U+2066–U+2069).
///
/// # Errors
/// 400 INVALID_REQUEST naming `author`.
pub fn check_author(name: &str) -> Result<(), ApiError> {
    check_text("author", name, MAX_NAME_CHARS, true)?;
    if name.chars().any(bidi_control) {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "author must not contain bidi embedding, override or isolate characters",
        ));
    }
    Ok(())
}

/// 403 ACCOUNT_SUSPENDED when an operator suspended participant `id` of
/// `bay` (an unknown participant is not suspended).
///
/// # Errors
/// 403 ACCOUNT_SUSPENDED; 503 when the store is down.
pub async fn refuse_suspended(
    state: &AppState,
    bay: &switchboard_protocol::ids::BayId,
    id: &ParticipantId,
) -> Result<(), ApiError> {
    if state.store.suspended(bay, Some(id)).await? {
        return Err(ApiError::suspended(Suspension::Participant));
    }
    Ok(())
}

fn removed() -> ApiError {
    ApiError::new(
        ErrorCode::AuthorRemoved,
        "an operator removed this author from the room; it writes again once an operator adds it back",
    )
}

/// The participant for author `name` in `room`, for a write: created,
/// counted among the room's authors and added to the conversation on its
/// first write (each step idempotent, so concurrent first writes on
/// several nodes agree).
///
/// Refused: an author an operator suspended (403 ACCOUNT_SUSPENDED); one
/// an operator removed from the conversation after it joined (403
/// AUTHOR_REMOVED, until an operator adds it back: it is never re-added by
/// its own write); a new author once the room counts `max` (403
/// ROOM_AUTHORS_FULL).
///
/// # Errors
/// 400 for a bad name; the 403s above; 404 when the room's conversation
/// is gone; 503 when the store is down.
pub async fn author(
    state: &AppState,
    room: &Room,
    name: &str,
    max: u32,
) -> Result<Participant, ApiError> {
    check_author(name)?;
    let id = author_id(name);
    let bay = &room.bay;
    refuse_suspended(state, bay, &id).await?;
    let conversation = state
        .store
        .conversation(bay, &room.conversation)
        .await?
        .ok_or_else(ApiError::not_found)?;
    let member = conversation.member(&id).is_some();
    // A member is always counted (an author from before the count, or one
    // an operator added); anyone else within the cap.
    let cap = if member { u32::MAX } else { max };
    let standing = state
        .store
        .admit_room_author(bay, &room.conversation, &id, cap)
        .await?;
    match standing {
        RoomAuthor::Full => {
            return Err(ApiError::new(
                ErrorCode::RoomAuthorsFull,
                format!("this room has its {max} authors; only they can write in it"),
            ))
        }
        RoomAuthor::Joined if !member => return Err(removed()),
        _ => {}
    }
    let participant = match state.store.participant(bay, &id).await? {
        Some(p) => p,
        None => {
            let fresh = Participant {
                id: id.clone(),
                kind: ParticipantKind::User,
                name: name.trim().to_owned(),
                description: None,
            };
            // A token nobody holds: link authors never authenticate.
            let token = TokenHash::of(&super::mint_capability());
            match state.store.create_participant(bay, fresh, token).await? {
                Created::Created(p) => p,
                Created::AlreadyExists => state
                    .store
                    .participant(bay, &id)
                    .await?
                    .ok_or_else(ApiError::not_found)?,
            }
        }
    };
    if !member {
        let member = Member {
            participant: id.clone(),
            role: Role::Member,
        };
        if let Updated::NotFound = state
            .store
            .upsert_member(bay, &room.conversation, member)
            .await?
        {
            // Nothing changed: a concurrent first write added it already,
            // unless the conversation is gone.
            let again = state.store.conversation(bay, &room.conversation).await?;
            if again.is_none_or(|c| c.member(&id).is_none()) {
                return Err(ApiError::not_found());
            }
        }
    }
    if standing != RoomAuthor::Joined {
        state
            .store
            .room_author_joined(bay, &room.conversation, &id)
            .await?;
    }
    Ok(participant)
}
