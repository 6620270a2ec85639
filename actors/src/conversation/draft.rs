//! Streaming replies on the conversation actor: appends to an open draft,
//! gathered per flush window, and the draft's end (complete, cancel, fail).
//!
//! An append is answered only once its window is stored, so an accepted
//! append survives a crash of any node; the window's appends cost one store
//! write ([`DraftStore::append_draft`]) and reach members as one `message.delta`.
//! Appends carry the `offset` (in Unicode scalar values) at which their
//! text starts, as the author believes it: an exact repeat is a no-op, a
//! gap or a disagreeing overlap is refused with the draft's length, so an
//! author that lost track resumes from what the gateway holds.
//!
//! The actor caches each draft's text and version after its own writes;
//! appends through another node (or a reaction) move the stored version on,
//! and the store then answers `Conflict`: the actor reads the draft again
//! and judges the window's appends against it.
//!
//! Completion routes the final text once (protocol §4, §7: mentions,
//! `shouldRespond`, the round cap) and stores it with the round step in one
//! atomic write ([`DraftStore::close_draft`]); a draft wakes nobody before.
//!
//! [`DraftStore::append_draft`]: crate::store::DraftStore::append_draft
//! [`DraftStore::close_draft`]: crate::store::DraftStore::close_draft

use super::{snapshot, ConversationActor, Snapshot, WriteCache, STALE_ATTEMPTS};
use crate::model::{Participant, StoredMessage};
use crate::store::log::Change;
use crate::store::{
    Changed, DraftAppend, DraftAppended, MessageChange, RoundStep, Store, StoreError,
};
use actix::prelude::*;
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchboard_protocol::error::ErrorCode;
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId};
use switchboard_protocol::model::MessageState;
use switchboard_protocol::routing::{route, RouteInput};
use tokio::sync::oneshot;

/// Tunables of streaming drafts.
#[derive(Clone, Copy, Debug)]
pub struct DraftSettings {
    /// How long appends are gathered before one store write
    /// (`timing.draft_flush_interval`, 40 ms by default).
    pub flush_interval: Duration,
    /// The longest a draft may grow, in Unicode scalar values
    /// (`limits.max_content_chars`).
    pub max_chars: usize,
}

/// Appends text to an open draft: the author only.
#[derive(Message)]
#[rtype(result = "Result<DraftReply, StoreError>")]
pub struct AppendToDraft {
    /// Who asks; must be the draft's author.
    pub by: ParticipantId,
    /// The draft.
    pub message: MessageId,
    /// Where `text` starts, in Unicode scalar values.
    pub offset: u64,
    /// The text; not empty (the gateway checks).
    pub text: String,
}

/// Outcome of an [`AppendToDraft`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DraftReply {
    /// Stored (or an exact repeat of stored text): the draft's length and
    /// version now.
    Accepted {
        /// The draft's length, in Unicode scalar values.
        length: u64,
        /// The draft's version.
        version: u64,
    },
    /// `offset` lies beyond the draft's `length` (409 `APPEND_GAP`).
    Gap {
        /// The draft's length.
        length: u64,
    },
    /// The text overlaps stored text and disagrees with it (409
    /// `APPEND_CONFLICT`).
    Overlap {
        /// The draft's length.
        length: u64,
    },
    /// The draft would grow past the content limit (400 `INVALID_CONTENT`).
    TooLong {
        /// The draft's length.
        length: u64,
    },
    /// The message is not an open draft (409 `DRAFT_CLOSED`).
    Closed {
        /// Where it stands.
        state: MessageState,
    },
    /// No such message, or the caller is not a member (404).
    NotFound,
    /// A member who is not the author (403).
    Forbidden,
}

/// How a draft ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The author finalizes it, optionally replacing its text.
    Complete {
        /// The final text instead of the streamed one (validated by the
        /// gateway); `None` keeps the streamed text.
        content: Option<String>,
    },
    /// A member stops it.
    Cancel,
    /// The orphan sweep gives it up, if it is still at `version` (so an
    /// append that raced the sweep wins).
    Fail {
        /// The version the sweep judged.
        version: u64,
        /// Why, lowercase text.
        reason: String,
    },
}

/// Ends an open draft.
#[derive(Message)]
#[rtype(result = "Result<EndOutcome, StoreError>")]
pub struct EndDraft {
    /// Who asks: the author (complete), any member (cancel), or the sweep
    /// (fail: the author's record).
    pub by: Participant,
    /// The draft.
    pub message: MessageId,
    /// How it ends.
    pub ending: Ending,
}

/// Outcome of an [`EndDraft`].
#[derive(Debug, Clone)]
pub enum EndOutcome {
    /// Ended and logged; the message as stored now.
    Ended(Box<StoredMessage>),
    /// It had ended already (or, for a sweep, moved on); the message as it is.
    NotOpen(Box<StoredMessage>),
    /// No such message, or the caller is not a member (404).
    NotFound,
    /// Completing another member's draft (403).
    Forbidden,
    /// Refused with a named code (`INVALID_CONTENT`: nothing to complete).
    Refused(ErrorCode, String),
}

/// A draft as this actor last stored or read it.
#[derive(Clone)]
struct Base {
    text: String,
    chars: u64,
    version: u64,
    author: ParticipantId,
}

/// One append waiting for its window.
struct Pending {
    by: ParticipantId,
    offset: u64,
    text: String,
    reply: oneshot::Sender<Result<DraftReply, StoreError>>,
}

/// The actor's state of one draft.
#[derive(Default)]
pub(super) struct DraftBuffer {
    base: Option<Base>,
    pending: Vec<Pending>,
    scheduled: bool,
}

impl DraftBuffer {
    /// Nothing waits for a window: the actor may stop.
    pub(super) fn is_idle(&self) -> bool {
        self.pending.is_empty() && !self.scheduled
    }
}

impl Handler<AppendToDraft> for ConversationActor {
    type Result = ResponseFuture<Result<DraftReply, StoreError>>;

    fn handle(&mut self, msg: AppendToDraft, ctx: &mut Self::Context) -> Self::Result {
        self.last_activity = Instant::now();
        let (tx, rx) = oneshot::channel();
        let buffer = self.drafts.entry(msg.message.clone()).or_default();
        // The author check needs the draft: made at flush time, with it.
        buffer.pending.push(Pending {
            by: msg.by,
            offset: msg.offset,
            text: msg.text,
            reply: tx,
        });
        if !buffer.scheduled {
            buffer.scheduled = true;
            let id = msg.message.clone();
            ctx.run_later(self.draft_settings.flush_interval, move |act, ctx| {
                act.flush(id, ctx)
            });
        }
        Box::pin(async move {
            rx.await.unwrap_or_else(|_| {
                Err(StoreError::Unavailable {
                    doing: "appending to a draft",
                    cause: "the conversation actor stopped".into(),
                })
            })
        })
    }
}

impl ConversationActor {
    /// Stores the window's appends of draft `id` (one write) and answers
    /// them. The actor handles nothing else meanwhile, so a completion
    /// or another window never interleaves with it.
    fn flush(&mut self, id: MessageId, ctx: &mut Context<Self>) {
        let Some(buffer) = self.drafts.get_mut(&id) else {
            return;
        };
        buffer.scheduled = false;
        let pending = std::mem::take(&mut buffer.pending);
        let base = buffer.base.take();
        let (store, bay, conv) = (self.store.clone(), self.bay.clone(), self.id.clone());
        let (cache, max) = (self.cache.clone(), self.draft_settings.max_chars);
        let job = async move {
            let run = Window {
                store: &*store,
                bay: &bay,
                conversation: &conv,
                cache: &cache,
                max_chars: max,
            };
            run.store(&id, base, pending).await
        };
        ctx.wait(job.into_actor(self).map(|(id, base), act, _| match base {
            Some(base) => act.drafts.entry(id).or_default().base = Some(base),
            None => {
                if act.drafts.get(&id).is_some_and(|b| b.pending.is_empty()) {
                    act.drafts.remove(&id);
                }
            }
        }));
    }
}

/// What one flush or ending works with.
struct Window<'a> {
    store: &'a dyn Store,
    bay: &'a BayId,
    conversation: &'a ConversationId,
    cache: &'a Mutex<WriteCache>,
    max_chars: usize,
}

/// How one append fares against a draft's text.
enum Judged {
    /// Adds this text (possibly empty: an exact repeat).
    Adds(String),
    Refused(DraftReply),
}

/// Judges an append of `text` at `offset` against the draft text `current`
/// (`chars` long): see the module docs.
fn judge(current: &str, chars: u64, offset: u64, text: &str) -> Judged {
    if offset > chars {
        return Judged::Refused(DraftReply::Gap { length: chars });
    }
    // The stored text from `offset` on, compared with the append's start.
    let start = byte_at(current, offset);
    let stored = &current[start..];
    if text.len() <= stored.len() {
        return if stored.starts_with(text) {
            Judged::Adds(String::new())
        } else {
            Judged::Refused(DraftReply::Overlap { length: chars })
        };
    }
    match text.strip_prefix(stored) {
        Some(rest) => Judged::Adds(rest.to_owned()),
        None => Judged::Refused(DraftReply::Overlap { length: chars }),
    }
}

/// Byte index of the `chars`-th Unicode scalar value of `s` (its length
/// when `chars` reaches the end).
fn byte_at(s: &str, chars: u64) -> usize {
    s.char_indices()
        .nth(chars as usize)
        .map_or(s.len(), |(i, _)| i)
}

impl Window<'_> {
    /// Reads draft `id` afresh: `Err` with the reply every append gets
    /// when it is not an open draft.
    async fn load(&self, id: &MessageId) -> Result<Result<Base, DraftReply>, StoreError> {
        let Some(m) = self.store.message(self.bay, self.conversation, id).await? else {
            return Ok(Err(DraftReply::NotFound));
        };
        if !m.is_streaming() {
            return Ok(Err(DraftReply::Closed { state: m.state }));
        }
        Ok(Ok(Base {
            chars: m.length(),
            text: m.content,
            version: m.version,
            author: m.sender.id,
        }))
    }

    /// Stores `pending` (one write, redone from a fresh read on conflict)
    /// and answers each; gives back the draft as stored, if still open.
    async fn store(
        &self,
        id: &MessageId,
        mut base: Option<Base>,
        pending: Vec<Pending>,
    ) -> (MessageId, Option<Base>) {
        // Concurrent requests may arrive out of order: judge a window's
        // appends in offset order (stable, so repeats keep theirs).
        let mut pending = pending;
        pending.sort_by_key(|p| p.offset);
        let asks: Vec<Ask> = pending
            .iter()
            .map(|p| Ask {
                by: p.by.clone(),
                offset: p.offset,
                text: p.text.clone(),
            })
            .collect();
        let mut replies = self.settle(id, &mut base, &asks).await;
        if replies.len() != pending.len() {
            replies = asks
                .iter()
                .map(|_| {
                    Err(StoreError::Unavailable {
                        doing: "appending to a draft",
                        cause: format!("draft {id} kept changing under concurrent appends"),
                    })
                })
                .collect();
        }
        for (p, r) in pending.into_iter().zip(replies) {
            let _ = p.reply.send(r);
        }
        (id.clone(), base)
    }

    /// Judges `asks` against draft `id` and stores the text they add in
    /// one write, until that write lands or a refusal stands on fresh
    /// reads: each append's answer, in order, or none when
    /// [`STALE_ATTEMPTS`] ran out. `base` is the draft as this actor knows
    /// it, before and after (`None`: read it afresh).
    async fn settle(&self, id: &MessageId, base: &mut Option<Base>, asks: &[Ask]) -> Vec<Answer> {
        let mut fresh_roster = false;
        for _ in 0..STALE_ATTEMPTS {
            let (snap, current, fresh) = match self.read(id, base, fresh_roster).await {
                Ok(read) => read,
                Err(answer) => return each(asks.len(), &answer),
            };
            let (added, judged) = self.judge_all(&current, asks, &snap.conversation);
            if refuses(&judged) && !(fresh && fresh_roster) {
                // The cached draft or roster may be behind (appends through
                // another node, a member added there): only fresh reads
                // may refuse.
                fresh_roster = true;
                continue;
            }
            if added.is_empty() {
                *base = Some(current);
                return judged;
            }
            match self.write(id, &snap, current, added, judged).await {
                Written::Answered(replies, next) => {
                    *base = next;
                    return replies;
                }
                // Membership may have changed (on any node): check again.
                Written::Stale(current) => {
                    fresh_roster = true;
                    *base = Some(current);
                }
                // Moved on (another node, a reaction, its end): read again.
                Written::Moved => *base = None,
            }
        }
        Vec::new()
    }

    /// What a window is judged against: the conversation (read afresh when
    /// `fresh_roster`) and the draft, taken from `base` when cached, else
    /// read from the store (the `bool` says it was). `Err` with the answer
    /// every append gets when either is gone or cannot be read; `base` is
    /// left as it was when the conversation is.
    async fn read(
        &self,
        id: &MessageId,
        base: &mut Option<Base>,
        fresh_roster: bool,
    ) -> Result<(Arc<Snapshot>, Base, bool), Answer> {
        let snap = match snapshot(
            self.store,
            self.bay,
            self.conversation,
            self.cache,
            fresh_roster,
        )
        .await
        {
            Ok(Some(snap)) => snap,
            Ok(None) => return Err(Ok(DraftReply::NotFound)),
            Err(e) => return Err(Err(e)),
        };
        let fresh = base.is_none();
        let current = match base.take() {
            Some(b) => b,
            None => match self.load(id).await {
                Ok(Ok(b)) => b,
                Ok(Err(reply)) => return Err(Ok(reply)),
                Err(e) => return Err(Err(e)),
            },
        };
        Ok((snap, current, fresh))
    }

    /// Appends `added`, the text of the window's appends (answered
    /// `judged` against `current` under `snap`), to draft `id` in one store
    /// write, and says how it fared: accepted appends then get the draft's
    /// length and version after the write.
    async fn write(
        &self,
        id: &MessageId,
        snap: &Snapshot,
        current: Base,
        added: String,
        judged: Vec<Answer>,
    ) -> Written {
        let outcome = self
            .store
            .append_draft(
                self.bay,
                DraftAppend {
                    conversation: snap.conversation.reference(),
                    message: id.clone(),
                    revision: snap.revision,
                    version: current.version,
                    offset: current.chars,
                    text: added.clone(),
                },
            )
            .await;
        match outcome {
            Ok(DraftAppended::Appended { version, .. }) => {
                let mut next = current;
                next.chars += added.chars().count() as u64;
                next.text.push_str(&added);
                next.version = version;
                let replies = judged
                    .into_iter()
                    .map(|r| {
                        r.map(|r| match r {
                            DraftReply::Accepted { .. } => DraftReply::Accepted {
                                length: next.chars,
                                version,
                            },
                            other => other,
                        })
                    })
                    .collect();
                Written::Answered(replies, Some(next))
            }
            Ok(DraftAppended::Stale) => Written::Stale(current),
            Ok(DraftAppended::Conflict) | Ok(DraftAppended::Closed) => Written::Moved,
            Ok(DraftAppended::NotFound) => {
                Written::Answered(each(judged.len(), &Ok(DraftReply::NotFound)), None)
            }
            Err(e) => Written::Answered(each(judged.len(), &Err(e)), None),
        }
    }

    /// Judges the window's appends in order against `current`: the text
    /// they add together and each one's reply (`Accepted` replies get the
    /// final length and version once stored).
    fn judge_all(
        &self,
        current: &Base,
        asks: &[Ask],
        conversation: &crate::model::Conversation,
    ) -> (String, Vec<Result<DraftReply, StoreError>>) {
        let mut text = current.text.clone();
        let mut chars = current.chars;
        let mut added = String::new();
        let mut replies = Vec::with_capacity(asks.len());
        for ask in asks {
            // A non-member learns nothing, not even that the draft exists.
            if conversation.member(&ask.by).is_none() {
                replies.push(Ok(DraftReply::NotFound));
                continue;
            }
            if ask.by != current.author {
                replies.push(Ok(DraftReply::Forbidden));
                continue;
            }
            let reply = match judge(&text, chars, ask.offset, &ask.text) {
                Judged::Refused(r) => r,
                Judged::Adds(more) => {
                    let n = more.chars().count() as u64;
                    if chars + n > self.max_chars as u64 {
                        DraftReply::TooLong { length: chars }
                    } else {
                        text.push_str(&more);
                        added.push_str(&more);
                        chars += n;
                        DraftReply::Accepted {
                            length: chars,
                            version: current.version,
                        }
                    }
                }
            };
            replies.push(Ok(reply));
        }
        (added, replies)
    }
}

/// An append as judged: who, where, what.
struct Ask {
    by: ParticipantId,
    offset: u64,
    text: String,
}

/// One append's answer.
type Answer = Result<DraftReply, StoreError>;

/// How one store write of a window's text fared.
enum Written {
    /// Every append has its answer; the draft as stored now, if still open.
    Answered(Vec<Answer>, Option<Base>),
    /// The roster moved on (on any node): judge again against a fresh one;
    /// the draft as read stands.
    Stale(Base),
    /// The draft moved on (another node, a reaction, its end): read it
    /// again.
    Moved,
}

/// Whether a window's answers hold a refusal a stale cache could explain
/// (a gap, an overlap, not the author, not a member): only fresh reads may
/// refuse.
fn refuses(judged: &[Answer]) -> bool {
    judged.iter().any(|r| {
        matches!(
            r,
            Ok(DraftReply::Gap { .. }
                | DraftReply::Overlap { .. }
                | DraftReply::Forbidden
                | DraftReply::NotFound)
        )
    })
}

/// The same answer for each of a window's `n` appends: the window was
/// refused or failed as a whole.
fn each(n: usize, answer: &Answer) -> Vec<Answer> {
    (0..n)
        .map(|_| match answer {
            Ok(r) => Ok(r.clone()),
            Err(e) => Err(again(e)),
        })
        .collect()
}

/// A copy of `e` for each append of a window that failed with it.
fn again(e: &StoreError) -> StoreError {
    match e {
        StoreError::Unavailable { doing, cause } => StoreError::Unavailable {
            doing,
            cause: cause.clone(),
        },
        StoreError::Corrupt { doing, cause } => StoreError::Corrupt {
            doing,
            cause: cause.clone(),
        },
    }
}

impl Handler<EndDraft> for ConversationActor {
    type Result = AtomicResponse<Self, Result<EndOutcome, StoreError>>;

    fn handle(&mut self, msg: EndDraft, _: &mut Self::Context) -> Self::Result {
        self.last_activity = Instant::now();
        // Appends waiting for their window are stored first: they were
        // accepted before the end was asked for.
        let buffer = self.drafts.remove(&msg.message).unwrap_or_default();
        let (store, bay, id) = (self.store.clone(), self.bay.clone(), self.id.clone());
        let (cache, max) = (self.cache.clone(), self.draft_settings.max_chars);
        AtomicResponse::new(Box::pin(
            async move {
                let run = Window {
                    store: &*store,
                    bay: &bay,
                    conversation: &id,
                    cache: &cache,
                    max_chars: max,
                };
                if !buffer.pending.is_empty() {
                    run.store(&msg.message, buffer.base, buffer.pending).await;
                }
                run.end(msg).await
            }
            .into_actor(self),
        ))
    }
}

impl Window<'_> {
    /// Ends draft `msg.message` as `msg.ending` says, in one store write
    /// with the round step of a completion; redone while the roster or the
    /// draft moves on under it, up to [`STALE_ATTEMPTS`] times.
    async fn end(&self, msg: EndDraft) -> Result<EndOutcome, StoreError> {
        let mut fresh = false;
        for _ in 0..STALE_ATTEMPTS {
            let Some(snap) =
                snapshot(self.store, self.bay, self.conversation, self.cache, fresh).await?
            else {
                return Ok(EndOutcome::NotFound);
            };
            let is_sweep = matches!(msg.ending, Ending::Fail { .. });
            if !is_sweep && snap.conversation.member(&msg.by.id).is_none() {
                if fresh {
                    return Ok(EndOutcome::NotFound);
                }
                fresh = true;
                continue;
            }
            let Some(current) = self
                .store
                .message(self.bay, self.conversation, &msg.message)
                .await?
            else {
                return Ok(EndOutcome::NotFound);
            };
            if !current.is_streaming() {
                return Ok(EndOutcome::NotOpen(Box::new(current)));
            }
            let (next, change, round) = match closing(&msg, &snap, current) {
                Ok(closing) => closing,
                Err(outcome) => return Ok(outcome),
            };
            let outcome = self
                .store
                .close_draft(
                    self.bay,
                    MessageChange {
                        conversation: snap.conversation.reference(),
                        revision: snap.revision,
                        message: next.clone(),
                        change,
                    },
                    round,
                )
                .await?;
            match outcome {
                Changed::Changed(_) => {
                    // The round cap was applied by the store: read back.
                    let stored = self
                        .store
                        .message(self.bay, self.conversation, &msg.message)
                        .await?
                        .unwrap_or(next);
                    return Ok(EndOutcome::Ended(Box::new(stored)));
                }
                Changed::NotFound => return Ok(EndOutcome::NotFound),
                Changed::Stale => fresh = true,
                Changed::Conflict => {}
            }
        }
        Err(StoreError::Unavailable {
            doing: "ending a draft",
            cause: format!(
                "draft {} kept changing under concurrent updates",
                msg.message
            ),
        })
    }
}

/// A draft's end as it is stored: the message after it, what to log, and
/// the round step a completion takes (the store applies the round cap).
type Closing = (StoredMessage, Change, Option<RoundStep>);

/// The end `msg.ending` makes of the open draft `current` under `snap`, at
/// the next version; or the answer when it cannot end so (see
/// [`complete`]; a sweep whose version the draft has moved past finds it
/// not open).
fn closing(msg: &EndDraft, snap: &Snapshot, current: StoredMessage) -> Result<Closing, EndOutcome> {
    let mut next = current.clone();
    next.version = current.version + 1;
    match &msg.ending {
        Ending::Complete { content } => {
            complete(&msg.by.id, content.as_deref(), snap, &current, next)
        }
        Ending::Cancel => {
            next.state = MessageState::Cancelled;
            let change = Change::Cancelled {
                message: next.id.clone(),
                author: current.sender.id.clone(),
                by: msg.by.id.clone(),
                length: next.length(),
                version: next.version,
            };
            Ok((next, change, None))
        }
        Ending::Fail { version, reason } => {
            if current.version != *version {
                return Err(EndOutcome::NotOpen(Box::new(current)));
            }
            next.state = MessageState::Failed;
            let change = Change::Failed {
                message: next.id.clone(),
                reason: reason.clone(),
                length: next.length(),
                version: next.version,
            };
            Ok((next, change, None))
        }
    }
}

/// Completes draft `next` (`current` at its next version) for `by`, who
/// must be its author: `content` replaces the streamed text when given,
/// and the final text must not be blank. Routed once, on the final text
/// (protocol §4, §7: mentions, `shouldRespond`), and a round step outside
/// direct conversations (the round cap).
fn complete(
    by: &ParticipantId,
    content: Option<&str>,
    snap: &Snapshot,
    current: &StoredMessage,
    mut next: StoredMessage,
) -> Result<Closing, EndOutcome> {
    if &current.sender.id != by {
        return Err(EndOutcome::Forbidden);
    }
    if let Some(content) = content {
        next.content = content.to_owned();
    }
    if next.content.trim().is_empty() {
        return Err(EndOutcome::Refused(
            ErrorCode::InvalidContent,
            "the draft is empty: complete it with content".into(),
        ));
    }
    let reply_sender = current
        .reply_to
        .as_ref()
        .map(|r| (r.sender_id.clone(), r.sender_type.kind()));
    let conversation = &snap.conversation;
    next.routing = route(&RouteInput {
        conversation_type: conversation.kind,
        policy: &conversation.policy,
        roster: &snap.roster,
        sender: &current.sender.id,
        sender_kind: current.sender.kind,
        content: &next.content,
        reply_to_sender: reply_sender.as_ref().map(|(p, k)| (p, *k)),
    });
    next.metadata = super::with_addressed_agents(next.metadata, &next.routing);
    next.state = MessageState::Complete;
    let round = RoundStep {
        sender: current.sender.kind,
        cap: (!conversation.kind.is_direct()).then_some(conversation.policy.max_agent_rounds),
    };
    let change = Change::Completed {
        message: next.clone(),
    };
    Ok((next, change, Some(round)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adds(current: &str, offset: u64, text: &str) -> Option<String> {
        match judge(current, current.chars().count() as u64, offset, text) {
            Judged::Adds(s) => Some(s),
            Judged::Refused(_) => None,
        }
    }

    #[test]
    fn appends_at_the_end_add_their_text() {
        assert_eq!(adds("héllo", 5, " wörld").as_deref(), Some(" wörld"));
        assert_eq!(adds("", 0, "a").as_deref(), Some("a"));
    }

    #[test]
    fn an_exact_repeat_adds_nothing() {
        assert_eq!(adds("héllo wörld", 5, " wörld").as_deref(), Some(""));
        assert_eq!(adds("héllo wörld", 0, "hé").as_deref(), Some(""));
    }

    #[test]
    fn an_agreeing_overlap_adds_the_rest() {
        assert_eq!(adds("héllo wö", 5, " wörld").as_deref(), Some("rld"));
    }

    #[test]
    fn a_gap_and_a_disagreeing_overlap_are_refused_with_the_length() {
        let gap = judge("héllo", 5, 7, "x");
        assert!(matches!(
            gap,
            Judged::Refused(DraftReply::Gap { length: 5 })
        ));
        let clash = judge("héllo", 5, 3, "LOX");
        assert!(matches!(
            clash,
            Judged::Refused(DraftReply::Overlap { length: 5 })
        ));
        let inside = judge("héllo", 5, 1, "a");
        assert!(matches!(
            inside,
            Judged::Refused(DraftReply::Overlap { length: 5 })
        ));
    }
}
