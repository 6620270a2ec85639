//! Routing: who should answer a message (protocol §3, §4, §7).
//!
//! Routing runs once, at write time, and its outcome ([`Routing`]) is stored
//! with the message, so every path that later delivers the message (`/ws`,
//! `/updates`, REST polls, replays after a roster or policy change) gives
//! each recipient the verdict it would have seen live.
//!
//! The round cap is the one input routing cannot know alone: it depends on
//! the messages before this one, possibly accepted by another gateway node.
//! The store decides it atomically with the append and reports it as
//! [`Routing::suppressed`].

use crate::context::PolicyView;
use crate::ids::ParticipantId;
use crate::model::{ConversationType, ParticipantKind, Policy, ReplyPolicy, RosterMember};
use serde::{Deserialize, Serialize};

mod mentions;

pub use mentions::parse_mentions;

/// Everything routing needs to know about one new message.
#[derive(Clone, Debug)]
pub struct RouteInput<'a> {
    pub conversation_type: ConversationType,
    pub policy: &'a Policy,
    /// The conversation's current members (humans and agents).
    pub roster: &'a [RosterMember],
    pub sender: &'a ParticipantId,
    pub sender_kind: ParticipantKind,
    pub content: &'a str,
    /// Sender of the message this one replies to (`replyToMessageId`), if any.
    pub reply_to_sender: Option<(&'a ParticipantId, ParticipantKind)>,
}

/// The routing facts stored with a message.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Routing {
    /// Agent ids literally @mentioned (the message's `mentions`).
    pub mentions: Vec<ParticipantId>,
    /// Agent ids a human addressed by plain name (`metadata.addressedAgents`).
    #[serde(default)]
    pub addressed_agents: Vec<ParticipantId>,
    /// Agents that should respond before the round cap is applied.
    pub respondents: Vec<ParticipantId>,
    /// Set by the store when the round cap suppresses every agent (protocol §4).
    #[serde(default)]
    pub suppressed: bool,
}

impl Routing {
    /// The verdict for `recipient` (protocol §4: the single signal an agent
    /// obeys). Never true for the message's own sender, never true when the
    /// round cap suppressed the message.
    pub fn should_respond(&self, recipient: &ParticipantId, sender: &ParticipantId) -> bool {
        !self.suppressed && recipient != sender && self.respondents.contains(recipient)
    }
}

/// Computes the routing facts of a message, round cap excluded.
pub fn route(input: &RouteInput<'_>) -> Routing {
    let mentions = parse_mentions(input.content, input.roster);
    let agents = || {
        input
            .roster
            .iter()
            .filter(|m| m.kind == ParticipantKind::Agent && &m.id != input.sender)
    };
    let human = input.sender_kind == ParticipantKind::User;
    let mut respondents: Vec<ParticipantId> = if input.conversation_type.is_direct() {
        // Protocol §3: every agent answers every human message.
        if human {
            agents().map(|m| m.id.clone()).collect()
        } else {
            Vec::new()
        }
    } else {
        Vec::new()
    };
    for id in &mentions {
        if id != input.sender && !respondents.contains(id) {
            respondents.push(id.clone());
        }
    }
    Routing {
        mentions,
        addressed_agents: Vec::new(),
        respondents,
        suppressed: false,
    }
}

/// The envelope's `policy` view (protocol §3).
pub fn policy_view(conversation_type: ConversationType, policy: &Policy) -> PolicyView {
    if conversation_type.is_direct() {
        return PolicyView {
            agent_reply_policy: policy.agent_reply_policy,
            designated_agent_id: None,
            max_agent_rounds: policy.max_agent_rounds,
            effective_rule: "EVERY_USER_MESSAGE".into(),
            policy_applies: false,
        };
    }
    let rule = match policy.agent_reply_policy {
        ReplyPolicy::Mentions => "MENTIONS_ONLY",
        ReplyPolicy::Dedicated => "DEDICATED_AGENT",
        ReplyPolicy::Orchestrator => "ORCHESTRATOR",
        ReplyPolicy::Router => "ROUTER",
        ReplyPolicy::Open => "OPEN",
    };
    PolicyView {
        agent_reply_policy: policy.agent_reply_policy,
        designated_agent_id: policy.designated_agent_id.clone(),
        max_agent_rounds: policy.max_agent_rounds,
        effective_rule: rule.into(),
        policy_applies: true,
    }
}

/// Whether `participant` is the orchestrator of a conversation (ORCHESTRATOR
/// policy, designated agent).
pub fn is_orchestrator(
    conversation_type: ConversationType,
    policy: &Policy,
    participant: &ParticipantId,
) -> bool {
    !conversation_type.is_direct()
        && policy.agent_reply_policy == ReplyPolicy::Orchestrator
        && policy.designated_agent_id.as_ref() == Some(participant)
}
