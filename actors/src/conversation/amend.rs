//! Changes to a message after it was sent: edits, deletes, reactions,
//! votes and closing a poll. They run on the conversation actor, one at a
//! time with its posts, and are checked against the cached roster at a
//! revision exactly like a post: the store refuses a change authorized with
//! a revision that moved on ([`Changed::Stale`]), and one made from an
//! older version of the message ([`Changed::Conflict`]), so a removed
//! member, a demoted admin or a concurrent change on another node is never
//! overwritten.
//!
//! An edit never re-runs routing: `mentions` and every `shouldRespond` stay
//! as they were sent, so a mention added by an edit wakes nobody.

use super::{snapshot, ConversationActor, WriteCache, STALE_ATTEMPTS};
use crate::model::{Participant, Reaction, StoredMessage};
use crate::store::log::Change;
use crate::store::{Changed, MessageChange, Store, StoreError};
use actix::prelude::*;
use chrono::{DateTime, SubsecRound, Utc};
use parking_lot::Mutex;
use std::time::Instant;
use switchboard_protocol::error::ErrorCode;
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId};
use switchboard_protocol::model::Role;

/// Different emoji one message may hold: reactions are a room's quick
/// answers, not storage.
pub const MAX_REACTIONS: usize = 50;

/// What to do to a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Replace the content (the sender only): `message.updated`.
    Edit {
        /// The new text, validated like a send's.
        content: String,
    },
    /// Make it a tombstone (the sender or a conversation admin): `message.deleted`.
    Delete,
    /// Add the caller's reaction: `reaction.added`.
    React {
        /// One emoji.
        emoji: String,
    },
    /// Take the caller's reaction back: `reaction.removed`.
    Unreact {
        /// The emoji reacted with.
        emoji: String,
    },
    /// Cast, change or withdraw (empty) the caller's vote: `poll.updated`
    /// (protocol v1.12: the complete set of answers, zero-based).
    Vote {
        /// Answer indexes as sent; validated against the poll.
        indexes: Vec<i64>,
    },
    /// Close the poll (its creator or a conversation admin): `poll.updated`.
    ClosePoll,
}

/// Changes a message of this conversation.
#[derive(Message)]
#[rtype(result = "Result<AmendOutcome, StoreError>")]
pub struct Amend {
    /// Who asks; must be a member of the conversation.
    pub by: Participant,
    /// The message to change.
    pub message: MessageId,
    /// What to do.
    pub action: Action,
}

/// Outcome of an [`Amend`].
#[derive(Debug, Clone)]
pub enum AmendOutcome {
    /// Changed and logged; the message after the change.
    Changed(Box<StoredMessage>),
    /// Nothing to change (same reaction twice, the same vote again, an
    /// already deleted message deleted again); the message as it is.
    Unchanged(Box<StoredMessage>),
    /// No such conversation or message, or the caller is not a member
    /// (404; `POLL_NOT_FOUND` for poll actions, protocol v1.12).
    NotFound,
    /// A member who may not do this (edit another's message; delete or
    /// close another's poll without being admin): 403.
    Forbidden,
    /// The message was deleted: 410 `MESSAGE_DELETED`.
    Deleted,
    /// Refused with a named code (`POLL_CLOSED`, `POLL_SINGLE_CHOICE`,
    /// `INVALID_OPTION_INDEX`, `INVALID_REQUEST`) and a lowercase message.
    Refused(ErrorCode, String),
}

impl Handler<Amend> for ConversationActor {
    // Atomic with posts, so this node applies changes in acceptance order.
    type Result = AtomicResponse<Self, Result<AmendOutcome, StoreError>>;

    fn handle(&mut self, msg: Amend, _: &mut Self::Context) -> Self::Result {
        self.last_activity = Instant::now();
        let (store, bay, id) = (self.store.clone(), self.bay.clone(), self.id.clone());
        let cache = self.cache.clone();
        AtomicResponse::new(Box::pin(
            async move { amend(&*store, &bay, &id, &cache, msg).await }.into_actor(self),
        ))
    }
}

async fn amend(
    store: &dyn Store,
    bay: &BayId,
    id: &ConversationId,
    cache: &Mutex<WriteCache>,
    msg: Amend,
) -> Result<AmendOutcome, StoreError> {
    let mut fresh = false;
    for _ in 0..STALE_ATTEMPTS {
        let Some(snap) = snapshot(store, bay, id, cache, fresh).await? else {
            return Ok(AmendOutcome::NotFound);
        };
        let Some(member) = snap.conversation.member(&msg.by.id) else {
            if fresh {
                return Ok(AmendOutcome::NotFound);
            }
            fresh = true;
            continue;
        };
        let Some(current) = store.message(bay, id, &msg.message).await? else {
            return Ok(AmendOutcome::NotFound);
        };
        let (next, change) = match apply(&msg, member.role, &current) {
            Ok(Some(done)) => done,
            Ok(None) => return Ok(AmendOutcome::Unchanged(Box::new(current))),
            Err(refused) => return Ok(refused),
        };
        let outcome = store
            .change_message(
                bay,
                MessageChange {
                    conversation: snap.conversation.reference(),
                    revision: snap.revision,
                    message: next.clone(),
                    change,
                },
            )
            .await?;
        match outcome {
            Changed::Changed(_) => {
                remember_change(cache, &next);
                return Ok(AmendOutcome::Changed(Box::new(next)));
            }
            Changed::NotFound => return Ok(AmendOutcome::NotFound),
            // Membership or roles moved on (on any node): check again.
            Changed::Stale => fresh = true,
            // The message changed under us (on any node): redo from it.
            Changed::Conflict => {}
        }
    }
    Err(StoreError::Unavailable {
        doing: "changing a message",
        cause: format!(
            "message {} kept changing under concurrent updates",
            msg.message
        ),
    })
}

/// Keeps the reply-target cache in step: a reply quotes the current text,
/// and `""` once the message is deleted (protocol §11, v1.6).
fn remember_change(cache: &Mutex<WriteCache>, message: &StoredMessage) {
    let mut c = cache.lock();
    if let Some(target) = c.recent.iter_mut().find(|t| t.id == message.id) {
        target.content = message.content.clone();
    }
}

/// What one action makes of the message: the change to log, `None` when
/// nothing changes, or the refusal.
type Applied = Result<Option<Change>, AmendOutcome>;

/// The message after `msg.action` and what to log, `None` when nothing
/// changes, or the refusal.
fn apply(
    msg: &Amend,
    role: Role,
    current: &StoredMessage,
) -> Result<Option<(StoredMessage, Change)>, AmendOutcome> {
    let by = &msg.by.id;
    let is_sender = &current.sender.id == by;
    let now = Utc::now().trunc_subsecs(3);
    let mut next = current.clone();
    next.version = current.version + 1;
    if current.is_deleted() {
        return match msg.action {
            Action::Delete => Ok(None),
            Action::Vote { .. } | Action::ClosePoll => Err(AmendOutcome::NotFound),
            _ => Err(AmendOutcome::Deleted),
        };
    }
    if current.is_streaming() && matches!(msg.action, Action::Edit { .. } | Action::Delete) {
        return Err(AmendOutcome::Refused(
            ErrorCode::InvalidRequest,
            "an open draft cannot be edited or deleted: complete or cancel it first".into(),
        ));
    }
    let change = match &msg.action {
        Action::Edit { content } => edit(&mut next, is_sender, content, now),
        Action::Delete => delete(&mut next, by, is_sender || role == Role::Admin, now),
        Action::React { emoji } => react(&mut next, by, emoji),
        Action::Unreact { emoji } => unreact(&mut next, by, emoji),
        Action::Vote { indexes } => vote(&mut next, &msg.by, indexes, now),
        Action::ClosePoll => close_poll(&mut next, by, role),
    }?;
    Ok(change.map(|change| (next, change)))
}

/// Replaces the text of `next` (its sender only; a poll's text is the
/// poll's). The same text again changes nothing.
fn edit(next: &mut StoredMessage, is_sender: bool, content: &str, now: DateTime<Utc>) -> Applied {
    if !is_sender {
        return Err(AmendOutcome::Forbidden);
    }
    if next.poll.is_some() {
        return Err(AmendOutcome::Refused(
            ErrorCode::InvalidRequest,
            "a poll's text is generated from the poll and cannot be edited".into(),
        ));
    }
    if next.content == content {
        return Ok(None);
    }
    next.content = content.to_owned();
    next.edited_at = Some(now);
    Ok(Some(Change::Edited {
        message: next.clone(),
    }))
}

/// Makes `next` a tombstone, when `by` may (`allowed`: its sender or a
/// conversation admin).
fn delete(
    next: &mut StoredMessage,
    by: &ParticipantId,
    allowed: bool,
    now: DateTime<Utc>,
) -> Applied {
    if !allowed {
        return Err(AmendOutcome::Forbidden);
    }
    next.tombstone(now);
    Ok(Some(Change::Deleted {
        message: next.id.clone(),
        at: now,
        by: by.clone(),
    }))
}

/// Adds `by`'s `emoji` to `next`: nothing if they hold it already, refused
/// when it would be one kind more than [`MAX_REACTIONS`].
fn react(next: &mut StoredMessage, by: &ParticipantId, emoji: &str) -> Applied {
    let kinds = next.reactions.len();
    let count = match next.reactions.iter_mut().find(|r| r.emoji == emoji) {
        Some(r) if r.by.contains(by) => return Ok(None),
        Some(r) => {
            r.by.push(by.clone());
            r.by.len()
        }
        None if kinds >= MAX_REACTIONS => {
            return Err(AmendOutcome::Refused(
                ErrorCode::InvalidReaction,
                format!("a message holds at most {MAX_REACTIONS} different reactions"),
            ));
        }
        None => {
            next.reactions.push(Reaction {
                emoji: emoji.to_owned(),
                by: vec![by.clone()],
            });
            1
        }
    };
    Ok(Some(Change::Reaction {
        message: next.id.clone(),
        emoji: emoji.to_owned(),
        participant: by.clone(),
        count: count as u32,
        added: true,
    }))
}

/// Takes `by`'s `emoji` off `next` (nothing if they do not hold it); an
/// emoji nobody holds any more goes.
fn unreact(next: &mut StoredMessage, by: &ParticipantId, emoji: &str) -> Applied {
    let Some(at) = next
        .reactions
        .iter()
        .position(|r| r.emoji == emoji && r.by.contains(by))
    else {
        return Ok(None);
    };
    next.reactions[at].by.retain(|p| p != by);
    let count = next.reactions[at].by.len();
    if count == 0 {
        next.reactions.remove(at);
    }
    Ok(Some(Change::Reaction {
        message: next.id.clone(),
        emoji: emoji.to_owned(),
        participant: by.clone(),
        count: count as u32,
        added: false,
    }))
}

/// Casts, changes or withdraws `voter`'s vote on the poll of `next`
/// (protocol v1.12): `indexes` are checked against the poll; the same vote
/// again changes nothing.
fn vote(
    next: &mut StoredMessage,
    voter: &Participant,
    indexes: &[i64],
    now: DateTime<Utc>,
) -> Applied {
    let Some(poll) = next.poll.as_mut() else {
        return Err(AmendOutcome::NotFound);
    };
    if poll.closed {
        return Err(AmendOutcome::Refused(
            ErrorCode::PollClosed,
            "the poll is closed".into(),
        ));
    }
    let set = poll
        .check_vote(indexes)
        .map_err(|(code, message)| AmendOutcome::Refused(code, message))?;
    if !poll.cast(voter.id.clone(), voter.kind.sender_type(), set, now) {
        return Ok(None);
    }
    Ok(Some(Change::Poll {
        message: next.id.clone(),
        poll: poll.clone(),
    }))
}

/// Closes the poll of `next`, when `by` asked it or is a conversation
/// admin; closing it again changes nothing.
fn close_poll(next: &mut StoredMessage, by: &ParticipantId, role: Role) -> Applied {
    let Some(poll) = next.poll.as_mut() else {
        return Err(AmendOutcome::NotFound);
    };
    if &poll.asked_by != by && role != Role::Admin {
        return Err(AmendOutcome::Forbidden);
    }
    if !poll.close() {
        return Ok(None);
    }
    Ok(Some(Change::Poll {
        message: next.id.clone(),
        poll: poll.clone(),
    }))
}
