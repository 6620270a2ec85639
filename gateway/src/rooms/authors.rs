//! The participant behind a link author's name. The protocol's `author` is
//! an unverified display name; each distinct name is one participant of
//! the room's Bay (`p_link_` + 24 hex digits of the name's SHA-256, kind
//! `user`, a token nobody holds) and a member of the room's conversation.
//! So a link post is routed like a human's message (mentions wake agents,
//! `shouldRespond` is set), Bay members see the author's name, and
//! reactions count per author.

use super::view::LINK_AUTHOR_PREFIX;
use crate::error::ApiError;
use crate::provision::{check_text, MAX_NAME_CHARS};
use crate::state::AppState;
use sha2::{Digest, Sha256};
use switchboard_actors::model::{Member, Participant};
use switchboard_actors::store::{Created, Room, Updated};
use switchboard_actors::token::TokenHash;
use switchboard_protocol::ids::ParticipantId;
use switchboard_protocol::model::{ParticipantKind, Role};

/// The participant id of author `name` (trimmed).
pub fn author_id(name: &str) -> ParticipantId {
    let digest = hex::encode(Sha256::digest(name.trim().as_bytes()));
    ParticipantId(format!("{LINK_AUTHOR_PREFIX}{}", &digest[..24]))
}

/// Checks an author name: 1–200 characters, not blank.
///
/// # Errors
/// 400 INVALID_REQUEST naming `author`.
pub fn check_author(name: &str) -> Result<(), ApiError> {
    check_text("author", name, MAX_NAME_CHARS, true)
}

/// The participant for author `name` in `room`, created and added to the
/// conversation on first use (each step idempotent, so concurrent first
/// posts on several nodes agree).
///
/// # Errors
/// 400 for a bad name; 404 when the room's conversation is gone; 503 when
/// the store is down.
pub async fn author(state: &AppState, room: &Room, name: &str) -> Result<Participant, ApiError> {
    check_author(name)?;
    let id = author_id(name);
    let bay = &room.bay;
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
    let conversation = state
        .store
        .conversation(bay, &room.conversation)
        .await?
        .ok_or_else(ApiError::not_found)?;
    if conversation.member(&id).is_none() {
        let member = Member {
            participant: id,
            role: Role::Member,
        };
        if let Updated::NotFound = state
            .store
            .upsert_member(bay, &room.conversation, member)
            .await?
        {
            return Err(ApiError::not_found());
        }
    }
    Ok(participant)
}
