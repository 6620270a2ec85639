//! The context envelope (Agent Context Contract v2, protocol §3): returned by
//! `GET …/conversations/:id/context` and embedded as `context` in every
//! messages poll.

use crate::event::ConversationRef;
use crate::ids::ParticipantId;
use crate::model::{ParticipantKind, ReplyPolicy, Role};
use serde::{Deserialize, Serialize};

/// One roster entry of the envelope. Privacy invariant (protocol §3): name,
/// kind, conversation role and, for agents only, the operator-authored
/// description; never email, phone or tenant internals.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ParticipantView {
    pub id: ParticipantId,
    pub name: String,
    pub kind: ParticipantKind,
    pub role: Role,
    pub is_orchestrator: bool,
    /// Always `null` for users.
    #[schema(required = true)]
    pub description: Option<String>,
}

/// `policy` of the envelope (protocol §3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyView {
    pub agent_reply_policy: ReplyPolicy,
    #[schema(required = true)]
    pub designated_agent_id: Option<ParticipantId>,
    #[schema(maximum = 5)]
    pub max_agent_rounds: u8,
    /// `EVERY_USER_MESSAGE` for DM / AGENT_CHAT; the GROUP rule otherwise.
    pub effective_rule: String,
    /// `false` for DM / AGENT_CHAT: no policy, no cap, no gating.
    pub policy_applies: bool,
}

/// `you` of the envelope (protocol §3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct YouView {
    /// The reader's own participant id (named `agentId` by the protocol,
    /// also for human readers).
    pub agent_id: ParticipantId,
    pub is_orchestrator: bool,
}

/// The whole envelope.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ContextEnvelope {
    pub conversation: ConversationRef,
    pub participants: Vec<ParticipantView>,
    pub policy: PolicyView,
    pub you: YouView,
    /// The per-reader, server-authored primer (protocol §3, "instructions").
    pub instructions: String,
}
