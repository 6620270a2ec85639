//! `ConversationActor`: one per live conversation per node; the write path.
//!
//! A post is validated (the sender must be a member; a reply target must be
//! in this conversation), routed once (protocol §4, §7: the verdicts are
//! stored with the message) and appended through the store, which applies
//! the round cap atomically with the append. Posts to one conversation on
//! one node are handled one at a time, so they reach the log in the order
//! they were accepted.
//!
//! The actor caches what routing needs: the conversation (roster, roles,
//! policy) at a revision, and its members' participant records. The store
//! refuses an append routed with another revision ([`AppendOutcome::Stale`],
//! checked in the same atomic step as the append), so a roster change made
//! on any node is never routed around: the actor reloads and routes again.
//! A sender the cached copy does not list is looked up again before the
//! 404, since it may have been added since (on any node).
//! A steady post therefore costs one store call, the append. Participant
//! records never change once created, so a reload fetches only new members.
//! Recent messages posted here are kept as reply targets, so a reply to
//! one of them needs no read either.
//!
//! The actor also holds typing indicators (protocol §11: 5 s TTL,
//! self-expiring), which are ephemeral and never stored.

mod amend;
mod draft;

pub use amend::{Action, Amend, AmendOutcome};
pub use draft::{AppendToDraft, DraftReply, DraftSettings, EndDraft, EndOutcome, Ending};

use crate::model::{roster, Conversation, Participant, StoredMessage};
use crate::store::{AppendOutcome, Budget, Idempotency, NewMessage, Store, StoreError};
use actix::prelude::*;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchboard_protocol::card::Card;
use switchboard_protocol::event::{ConversationRef, ReplyToView, SenderView, REPLY_PREVIEW_CHARS};
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId};
use switchboard_protocol::model::MessageState;
use switchboard_protocol::model::{ParticipantKind, Role, RosterMember};
use switchboard_protocol::poll::PollState;
use switchboard_protocol::routing::{route_with_names, NameIndex, RouteInput, Routing};
use switchboard_protocol::usage::Usage;

/// Attempts of a post whose routing went stale before giving up as contended.
const STALE_ATTEMPTS: usize = 8;
/// Messages posted here remembered as reply targets.
const RECENT_MESSAGES: usize = 256;

/// Longest a [`Post`] may take from its arrival: its wait for the posts
/// ahead of it in the conversation (they run one at a time) and its own
/// append. Past it the post is answered `Unavailable`; one that had not
/// reached the store yet, or was still queued there, is never stored. It
/// matches the store's command timeout, so with the store stuck each post
/// is answered about this long after it arrived, not this long after each
/// post ahead of it failed in turn. Posts that arrived before one of the
/// conversation's posts failed with the store are answered at once,
/// unsent: they waited behind it, and the store is in trouble.
pub const POST_DEADLINE: Duration = Duration::from_secs(5);

/// The conversation actor. See the module docs.
pub struct ConversationActor {
    bay: BayId,
    id: ConversationId,
    store: Arc<dyn Store>,
    typing_ttl: Duration,
    idle_timeout: Duration,
    /// Participant → when their typing indicator expires.
    typing: HashMap<ParticipantId, Instant>,
    /// Open drafts this actor has appended to or buffers appends for.
    drafts: HashMap<MessageId, draft::DraftBuffer>,
    draft_settings: DraftSettings,
    last_activity: Instant,
    /// What routing needs, shared with the post future. Only posts touch
    /// it and they run one at a time (`AtomicResponse`), so the lock is
    /// never contended; it is a mutex only because the future is `'static`.
    cache: Arc<Mutex<WriteCache>>,
}

/// The write path's cache. Invariant: `snapshot`, when set, was the
/// store's state at `snapshot.revision`; the append checks that it still is.
#[derive(Default)]
struct WriteCache {
    snapshot: Option<Arc<Snapshot>>,
    /// Participant records by id; they never change once created.
    participants: HashMap<ParticipantId, Participant>,
    /// Recently posted messages, newest last (reply targets).
    recent: VecDeque<ReplyTarget>,
    /// When a post last ended with the store failing (unreachable, timed
    /// out, or past [`POST_DEADLINE`]): the posts that had arrived by
    /// then waited behind it, and are answered at once, unsent.
    store_failed_at: Option<Instant>,
}

/// The conversation as routing sees it at one revision.
struct Snapshot {
    conversation: Conversation,
    revision: u64,
    roster: Vec<RosterMember>,
    /// The agent names of `roster`, compiled once for every post routed
    /// under this revision.
    names: NameIndex,
}

/// What a reply needs of the message it quotes.
#[derive(Clone)]
struct ReplyTarget {
    id: MessageId,
    sender: ParticipantId,
    sender_kind: ParticipantKind,
    content: String,
}

impl From<&StoredMessage> for ReplyTarget {
    fn from(m: &StoredMessage) -> Self {
        ReplyTarget {
            id: m.id.clone(),
            sender: m.sender.id.clone(),
            sender_kind: m.sender.kind,
            content: m.content.clone(),
        }
    }
}

impl ConversationActor {
    /// Creates the actor for one conversation of `bay`.
    pub fn new(
        bay: BayId,
        id: ConversationId,
        store: Arc<dyn Store>,
        typing_ttl: Duration,
        idle_timeout: Duration,
        draft_settings: DraftSettings,
    ) -> Self {
        ConversationActor {
            bay,
            id,
            store,
            typing_ttl,
            idle_timeout,
            typing: HashMap::new(),
            drafts: HashMap::new(),
            draft_settings,
            last_activity: Instant::now(),
            cache: Arc::default(),
        }
    }
}

impl Actor for ConversationActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let every = (self.idle_timeout / 4).max(Duration::from_millis(250));
        ctx.run_interval(every, |act, ctx| {
            let now = Instant::now();
            act.typing.retain(|_, until| *until > now);
            if now.duration_since(act.last_activity) >= act.idle_timeout
                && act.typing.is_empty()
                && act.drafts.values().all(|d| d.is_idle())
            {
                ctx.stop();
            }
        });
    }
}

/// Posts a message (protocol §7, `POST …/conversations/:id/messages`).
#[derive(Message)]
#[rtype(result = "Result<PostOutcome, StoreError>")]
pub struct Post {
    /// The authenticated caller; must be a member of the conversation.
    pub sender: Participant,
    /// 1..=max chars; checked by the gateway before posting.
    pub content: String,
    /// `replyToMessageId`: must name a message of this conversation, else
    /// [`PostOutcome::InvalidReplyTarget`].
    pub reply_to: Option<MessageId>,
    /// The client's metadata object. Callers strip server-only keys
    /// (`addressedAgents`) first; the actor writes its own.
    pub metadata: Option<serde_json::Value>,
    /// A validated card (protocol v1.11), stored with the message.
    pub card: Option<Card>,
    /// A new poll (protocol v1.12): the message becomes its `card.poll`
    /// message, and `content` should be the poll's plain-text fallback.
    pub poll: Option<PollState>,
    /// The sender's validated `usage` (token counts, model), stored with
    /// the message as sent.
    pub usage: Option<Usage>,
    /// The send's idempotency key, if the client gave one.
    pub idempotency: Option<Idempotency>,
    /// Open a draft (`"stream": true`): stored with state `streaming` and
    /// no routing; `content` may be empty. Routing runs at completion.
    pub stream: bool,
    /// The sender's request budget, for the append to take from (`None`
    /// when the caller counted the request itself).
    pub budget: Option<Budget>,
    /// When the caller sent the post: [`POST_DEADLINE`] counts from here.
    pub received: Instant,
}

/// Outcome of a [`Post`].
#[derive(Debug, Clone)]
pub enum PostOutcome {
    /// Stored and logged; `routing.suppressed` says whether the round cap applied.
    Posted(Box<StoredMessage>),
    /// No such conversation, or the sender is not a member (answered as 404
    /// so the id is never confirmed, protocol §7).
    NotFound,
    /// `replyToMessageId` is not a message of this conversation (400).
    InvalidReplyTarget,
    /// A retry of an idempotent send: nothing was stored; the first
    /// send's message as it is now (a tombstone if deleted since).
    Duplicate(Box<StoredMessage>),
    /// The idempotency key was used with another request (409).
    KeyReused,
    /// The post's [`Budget`] is spent; one call is back after this long
    /// (429). Nothing was stored.
    RateLimited(std::time::Duration),
}

impl Handler<Post> for ConversationActor {
    // Atomic: posts of one conversation are appended in acceptance order,
    // so the log order matches the order senders were answered in.
    type Result = AtomicResponse<Self, Result<PostOutcome, StoreError>>;

    fn handle(&mut self, msg: Post, _: &mut Self::Context) -> Self::Result {
        self.last_activity = Instant::now();
        self.typing.remove(&msg.sender.id);
        let (store, bay, id) = (self.store.clone(), self.bay.clone(), self.id.clone());
        let cache = self.cache.clone();
        let deadline = msg.received + POST_DEADLINE;
        let behind_a_failure = cache
            .lock()
            .store_failed_at
            .is_some_and(|failed| msg.received <= failed);
        AtomicResponse::new(Box::pin(
            async move {
                let unsent = |why: &str| StoreError::Unavailable {
                    doing: "posting a message",
                    cause: format!("not sent: {why}"),
                };
                if behind_a_failure {
                    return Err(unsent("it waited behind a post the store failed"));
                }
                if Instant::now() >= deadline {
                    return Err(unsent("its turn came past the deadline"));
                }
                let posting = post(&*store, &bay, &id, &cache, msg);
                let outcome = tokio::time::timeout_at(deadline.into(), posting)
                    .await
                    .unwrap_or_else(|_| {
                        Err(StoreError::Unavailable {
                            doing: "posting a message",
                            cause: format!(
                                "not answered within {} s of arrival (the store is slow or stuck)",
                                POST_DEADLINE.as_secs()
                            ),
                        })
                    });
                if matches!(outcome, Err(StoreError::Unavailable { .. })) {
                    cache.lock().store_failed_at = Some(Instant::now());
                }
                outcome
            }
            .into_actor(self),
        ))
    }
}

/// The cached snapshot (unless `fresh`), or a fresh one from the store
/// (`None`: no such conversation).
async fn snapshot(
    store: &dyn Store,
    bay: &BayId,
    id: &ConversationId,
    cache: &Mutex<WriteCache>,
    fresh: bool,
) -> Result<Option<Arc<Snapshot>>, StoreError> {
    if !fresh {
        if let Some(s) = &cache.lock().snapshot {
            return Ok(Some(s.clone()));
        }
    }
    let Some(loaded) = store.conversation_revisioned(bay, id).await? else {
        return Ok(None);
    };
    let missing: Vec<ParticipantId> = {
        let c = cache.lock();
        loaded
            .value
            .member_ids()
            .into_iter()
            .filter(|p| !c.participants.contains_key(p))
            .collect()
    };
    // Only this conversation's new members: a Bay may hold thousands of others.
    let fetched = store.participants_in(bay, &missing).await?;
    let mut c = cache.lock();
    for p in fetched {
        c.participants.insert(p.id.clone(), p);
    }
    let members: Vec<Participant> = loaded
        .value
        .members
        .iter()
        .filter_map(|m| c.participants.get(&m.participant).cloned())
        .collect();
    let roster = roster(&loaded.value, &members);
    let snapshot = Arc::new(Snapshot {
        names: NameIndex::new(&roster),
        roster,
        conversation: loaded.value,
        revision: loaded.revision,
    });
    c.snapshot = Some(snapshot.clone());
    Ok(Some(snapshot))
}

/// The message `target` names in this conversation, from the recent ones
/// posted here or else from the store.
async fn reply_target(
    store: &dyn Store,
    bay: &BayId,
    id: &ConversationId,
    cache: &Mutex<WriteCache>,
    target: &MessageId,
) -> Result<Option<ReplyTarget>, StoreError> {
    let cached = cache
        .lock()
        .recent
        .iter()
        .rev()
        .find(|m| &m.id == target)
        .cloned();
    if cached.is_some() {
        return Ok(cached);
    }
    Ok(store
        .message(bay, id, target)
        .await?
        .as_ref()
        .map(ReplyTarget::from))
}

/// Validates, routes and appends one post; see the module docs. Redone
/// from a fresh snapshot while the store finds the routing stale, up to
/// [`STALE_ATTEMPTS`] times.
async fn post(
    store: &dyn Store,
    bay: &BayId,
    id: &ConversationId,
    cache: &Mutex<WriteCache>,
    msg: Post,
) -> Result<PostOutcome, StoreError> {
    let reply_target = match checked_reply_target(store, bay, id, cache, &msg).await? {
        Ok(target) => target,
        Err(refused) => return Ok(refused),
    };
    let mut fresh = false;
    for _ in 0..STALE_ATTEMPTS {
        let Some(snap) = snapshot(store, bay, id, cache, fresh).await? else {
            return Ok(PostOutcome::NotFound);
        };
        let Some(member) = snap.conversation.member(&msg.sender.id) else {
            if fresh {
                return Ok(PostOutcome::NotFound);
            }
            // The cached copy may predate the sender's addition (made on
            // any node): only the store can refuse.
            fresh = true;
            continue;
        };
        let conversation = &snap.conversation;
        let message = compose(&msg, id, &snap, member.role, reply_target.as_ref());
        let outcome = store
            .append_message(
                bay,
                NewMessage {
                    conversation: conversation.reference(),
                    message,
                    round_cap: (!conversation.kind.is_direct())
                        .then_some(conversation.policy.max_agent_rounds),
                    revision: snap.revision,
                    idempotency: msg.idempotency.clone(),
                    budget: msg.budget.clone(),
                },
                msg.sender.kind,
            )
            .await?;
        match outcome {
            AppendOutcome::Appended(appended) => {
                remember_post(cache, &appended.message);
                return Ok(PostOutcome::Posted(Box::new(appended.message)));
            }
            // The roster or policy changed (on any node): route again.
            AppendOutcome::Stale => fresh = true,
            AppendOutcome::Duplicate(first) => return Ok(PostOutcome::Duplicate(first)),
            AppendOutcome::KeyReused => return Ok(PostOutcome::KeyReused),
            AppendOutcome::RateLimited(wait) => return Ok(PostOutcome::RateLimited(wait)),
        }
    }
    Err(StoreError::Unavailable {
        doing: "posting a message",
        cause: format!("conversation {id} kept changing under concurrent updates"),
    })
}

/// The message `msg.reply_to` names (`Ok(None)` when the post replies to
/// nothing), or the post's answer when it names no message of this
/// conversation: [`PostOutcome::InvalidReplyTarget`] for a member,
/// [`PostOutcome::NotFound`] for anyone else (a non-member learns nothing).
async fn checked_reply_target(
    store: &dyn Store,
    bay: &BayId,
    id: &ConversationId,
    cache: &Mutex<WriteCache>,
    msg: &Post,
) -> Result<Result<Option<ReplyTarget>, PostOutcome>, StoreError> {
    let Some(target) = &msg.reply_to else {
        return Ok(Ok(None));
    };
    if let Some(m) = reply_target(store, bay, id, cache, target).await? {
        return Ok(Ok(Some(m)));
    }
    // Not a message of this conversation, or of one the sender
    // cannot see: answered as a bad target only for members.
    let member = snapshot(store, bay, id, cache, true)
        .await?
        .is_some_and(|s| s.conversation.member(&msg.sender.id).is_some());
    Ok(Err(if member {
        PostOutcome::InvalidReplyTarget
    } else {
        PostOutcome::NotFound
    }))
}

/// The message `msg` posts under `snap`, with a new id: routed once
/// (protocol §4, §7), except a draft, which is routed at completion;
/// `role` is the sender's in the conversation.
fn compose(
    msg: &Post,
    id: &ConversationId,
    snap: &Snapshot,
    role: Role,
    reply_target: Option<&ReplyTarget>,
) -> StoredMessage {
    let conversation = &snap.conversation;
    let routing = if msg.stream {
        // A draft wakes nobody while it streams: routed at completion.
        Routing::default()
    } else {
        route_with_names(
            &RouteInput {
                conversation_type: conversation.kind,
                policy: &conversation.policy,
                roster: &snap.roster,
                sender: &msg.sender.id,
                sender_kind: msg.sender.kind,
                content: &msg.content,
                reply_to_sender: reply_target.map(|m| (&m.sender, m.sender_kind)),
            },
            &snap.names,
        )
    };
    let metadata = with_addressed_agents(msg.metadata.clone(), &routing);
    let mut message = StoredMessage::new(
        MessageId(format!(
            "msg_{}",
            ulid::Ulid::new().to_string().to_ascii_lowercase()
        )),
        id.clone(),
        SenderView {
            id: msg.sender.id.clone(),
            name: msg.sender.name.clone(),
            kind: msg.sender.kind,
            role: Some(role),
        },
        msg.content.clone(),
        metadata,
        reply_target.map(|m| ReplyToView {
            id: m.id.clone(),
            sender_id: m.sender.clone(),
            sender_type: m.sender_kind.sender_type(),
            preview: m.content.chars().take(REPLY_PREVIEW_CHARS).collect(),
        }),
        routing,
    );
    message.card = msg.card.clone();
    message.poll = msg.poll.clone();
    message.usage = msg.usage.clone();
    if msg.stream {
        message.state = MessageState::Streaming;
    }
    message
}

/// Keeps `message`, just posted here, as a reply target (the newest
/// [`RECENT_MESSAGES`]), so a reply to it needs no store read.
fn remember_post(cache: &Mutex<WriteCache>, message: &StoredMessage) {
    let mut c = cache.lock();
    c.recent.push_back(ReplyTarget::from(message));
    if c.recent.len() > RECENT_MESSAGES {
        c.recent.pop_front();
    }
}

/// `metadata` with `addressedAgents` set to the agents routing addressed
/// by plain name (protocol §4), when there are any: written by the server
/// only.
fn with_addressed_agents(
    mut metadata: Option<serde_json::Value>,
    routing: &Routing,
) -> Option<serde_json::Value> {
    if !routing.addressed_agents.is_empty() {
        let ids = serde_json::to_value(&routing.addressed_agents).unwrap_or_default();
        match &mut metadata {
            Some(serde_json::Value::Object(map)) => {
                map.insert("addressedAgents".into(), ids);
            }
            _ => metadata = Some(serde_json::json!({ "addressedAgents": ids })),
        }
    }
    metadata
}

/// Shows `participant` as typing for the TTL (protocol §11: 5 s, no stop call).
#[derive(Message)]
#[rtype(result = "Result<TypingOutcome, StoreError>")]
pub struct Typing {
    /// Who is typing; must be a member of the conversation.
    pub participant: ParticipantId,
}

/// Outcome of [`Typing`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypingOutcome {
    /// Recorded; expires after `ttl`.
    Started {
        /// How long the indicator lasts (`timing.typing_ttl`, 5 s by default).
        ttl: Duration,
        /// Whether the room should be told (`typing.started`): the
        /// participant had no live indicator here, or it had less than half
        /// its TTL left. A client renewing every second is announced about
        /// once per half TTL, not once per call.
        announce: bool,
        /// `{ id, type, title }` of the conversation.
        conversation: ConversationRef,
        /// How many members it has (rooms above
        /// `limits.presence_max_members` are not told).
        members: usize,
    },
    /// No such conversation or not a member (404, protocol §11).
    NotFound,
}

impl Handler<Typing> for ConversationActor {
    type Result = ResponseActFuture<Self, Result<TypingOutcome, StoreError>>;

    fn handle(&mut self, msg: Typing, _: &mut Self::Context) -> Self::Result {
        self.last_activity = Instant::now();
        let (store, bay, id) = (self.store.clone(), self.bay.clone(), self.id.clone());
        let participant = msg.participant.clone();
        Box::pin(
            async move {
                let room = store
                    .conversation(&bay, &id)
                    .await?
                    .filter(|c| c.member(&participant).is_some())
                    .map(|c| (c.reference(), c.members.len()));
                Ok(room)
            }
            .into_actor(self)
            .map(
                move |res: Result<Option<(ConversationRef, usize)>, StoreError>, act, _| {
                    let Some((conversation, members)) = res? else {
                        return Ok(TypingOutcome::NotFound);
                    };
                    let now = Instant::now();
                    let announce = act.typing.get(&msg.participant).is_none_or(|until| {
                        until.saturating_duration_since(now) < act.typing_ttl / 2
                    });
                    act.typing.insert(msg.participant, now + act.typing_ttl);
                    Ok(TypingOutcome::Started {
                        ttl: act.typing_ttl,
                        announce,
                        conversation,
                        members,
                    })
                },
            ),
        )
    }
}
