//! `ConversationActor`: one per live conversation per node; the write path.
//!
//! A post is validated (the sender must be a member; a reply target must be
//! in this conversation), routed once (protocol §4, §7: the verdicts are
//! stored with the message) and appended through the store, which applies
//! the round cap atomically with the append. Posts to one conversation on
//! one node are handled one at a time, so they reach the log in the order
//! they were accepted.
//!
//! The roster is read from the store on each post rather than cached: the
//! store is the only place that is current when other nodes change rosters.
//!
//! The actor also holds typing indicators (protocol §11: 5 s TTL,
//! self-expiring), which are ephemeral and never stored.

use crate::model::{roster, Participant, StoredMessage};
use crate::store::{NewMessage, Store, StoreError};
use actix::prelude::*;
use chrono::Utc;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchboard_protocol::event::{ReplyToView, SenderView, REPLY_PREVIEW_CHARS};
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId};
use switchboard_protocol::routing::{route, RouteInput};

/// The conversation actor. See the module docs.
pub struct ConversationActor {
    bay: BayId,
    id: ConversationId,
    store: Arc<dyn Store>,
    typing_ttl: Duration,
    idle_timeout: Duration,
    /// Participant → when their typing indicator expires.
    typing: HashMap<ParticipantId, Instant>,
    last_activity: Instant,
}

impl ConversationActor {
    /// Creates the actor for one conversation of `bay`.
    pub fn new(
        bay: BayId,
        id: ConversationId,
        store: Arc<dyn Store>,
        typing_ttl: Duration,
        idle_timeout: Duration,
    ) -> Self {
        ConversationActor {
            bay,
            id,
            store,
            typing_ttl,
            idle_timeout,
            typing: HashMap::new(),
            last_activity: Instant::now(),
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
            if now.duration_since(act.last_activity) >= act.idle_timeout && act.typing.is_empty() {
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
}

impl Handler<Post> for ConversationActor {
    // Atomic: posts of one conversation are appended in acceptance order,
    // so the log order matches the order senders were answered in.
    type Result = AtomicResponse<Self, Result<PostOutcome, StoreError>>;

    fn handle(&mut self, msg: Post, _: &mut Self::Context) -> Self::Result {
        self.last_activity = Instant::now();
        self.typing.remove(&msg.sender.id);
        let (store, bay, id) = (self.store.clone(), self.bay.clone(), self.id.clone());
        AtomicResponse::new(Box::pin(
            async move { post(&*store, &bay, &id, msg).await }.into_actor(self),
        ))
    }
}

async fn post(
    store: &dyn Store,
    bay: &BayId,
    id: &ConversationId,
    msg: Post,
) -> Result<PostOutcome, StoreError> {
    let Some(conversation) = store.conversation(bay, id).await? else {
        return Ok(PostOutcome::NotFound);
    };
    let Some(member) = conversation.member(&msg.sender.id) else {
        return Ok(PostOutcome::NotFound);
    };
    let reply_target = match &msg.reply_to {
        None => None,
        Some(target) => match store.message(bay, id, target).await? {
            Some(m) => Some(m),
            None => return Ok(PostOutcome::InvalidReplyTarget),
        },
    };
    // Only this conversation's members: a Bay may hold thousands of others.
    let participants = store
        .participants_in(bay, &conversation.member_ids())
        .await?;
    let roster = roster(&conversation, &participants);
    let routing = route(&RouteInput {
        conversation_type: conversation.kind,
        policy: &conversation.policy,
        roster: &roster,
        sender: &msg.sender.id,
        sender_kind: msg.sender.kind,
        content: &msg.content,
        reply_to_sender: reply_target.as_ref().map(|m| (&m.sender.id, m.sender.kind)),
    });
    let mut metadata = msg.metadata;
    if !routing.addressed_agents.is_empty() {
        let ids = serde_json::to_value(&routing.addressed_agents).unwrap_or_default();
        match &mut metadata {
            Some(serde_json::Value::Object(map)) => {
                map.insert("addressedAgents".into(), ids);
            }
            _ => metadata = Some(serde_json::json!({ "addressedAgents": ids })),
        }
    }
    let message = StoredMessage {
        id: MessageId(format!(
            "msg_{}",
            ulid::Ulid::new().to_string().to_ascii_lowercase()
        )),
        conversation_id: id.clone(),
        sender: SenderView {
            id: msg.sender.id.clone(),
            name: msg.sender.name.clone(),
            kind: msg.sender.kind,
            role: Some(member.role),
        },
        content: msg.content,
        created_at: Utc::now(),
        metadata,
        reply_to: reply_target.map(|m| ReplyToView {
            id: m.id,
            sender_id: m.sender.id,
            sender_type: m.sender.kind.sender_type(),
            preview: m.content.chars().take(REPLY_PREVIEW_CHARS).collect(),
        }),
        routing,
    };
    let appended = store
        .append_message(
            bay,
            NewMessage {
                conversation: conversation.reference(),
                message,
                round_cap: (!conversation.kind.is_direct())
                    .then_some(conversation.policy.max_agent_rounds),
            },
            msg.sender.kind,
        )
        .await?;
    Ok(PostOutcome::Posted(Box::new(appended.message)))
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
                let member = store
                    .conversation(&bay, &id)
                    .await?
                    .is_some_and(|c| c.member(&participant).is_some());
                Ok(member)
            }
            .into_actor(self)
            .map(move |res: Result<bool, StoreError>, act, _| {
                if !res? {
                    return Ok(TypingOutcome::NotFound);
                }
                act.typing
                    .insert(msg.participant, Instant::now() + act.typing_ttl);
                Ok(TypingOutcome::Started {
                    ttl: act.typing_ttl,
                })
            }),
        )
    }
}

/// Participants currently typing (indicators not yet expired).
#[derive(Message)]
#[rtype(result = "Vec<ParticipantId>")]
pub struct WhoIsTyping;

impl Handler<WhoIsTyping> for ConversationActor {
    type Result = Vec<ParticipantId>;

    fn handle(&mut self, _: WhoIsTyping, _: &mut Self::Context) -> Vec<ParticipantId> {
        let now = Instant::now();
        let mut ids: Vec<_> = self
            .typing
            .iter()
            .filter(|(_, until)| **until > now)
            .map(|(p, _)| p.clone())
            .collect();
        ids.sort();
        ids
    }
}
