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
    /// The member's participant id.
    pub id: ParticipantId,
    /// Exact roster display name: the text to `@mention` (protocol §7).
    pub name: String,
    /// `user` or `agent`; only agents are mentionable.
    pub kind: ParticipantKind,
    /// `member` or `admin` in this conversation.
    pub role: Role,
    /// `true` only for the orchestrator of an ORCHESTRATOR group; at most
    /// one member has it.
    pub is_orchestrator: bool,
    /// Always `null` for users.
    #[schema(required = true)]
    pub description: Option<String>,
}

/// `policy` of the envelope (protocol §3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyView {
    /// The stored policy, echoed even where it does not apply (DM /
    /// AGENT_CHAT); `effectiveRule` says what actually governs.
    pub agent_reply_policy: ReplyPolicy,
    /// The designated agent (DEDICATED), orchestrator (ORCHESTRATOR) or
    /// fallback (ROUTER); `null` for the other policies and in direct
    /// conversations.
    #[schema(required = true)]
    pub designated_agent_id: Option<ParticipantId>,
    /// Round cap, 0–5 (protocol §4, "Round caps"): consecutive agent
    /// messages after which no agent auto-responds until a human speaks.
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
    /// Whether the reader is this room's orchestrator (protocol §8).
    pub is_orchestrator: bool,
}

/// The whole envelope.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ContextEnvelope {
    /// `{ id, type, title }` of the conversation.
    pub conversation: ConversationRef,
    /// The current roster, in roster order, each member once.
    pub participants: Vec<ParticipantView>,
    /// The reply policy as it operates in this conversation.
    pub policy: PolicyView,
    /// The reader's own identity in this conversation.
    pub you: YouView,
    /// The per-reader, server-authored primer (protocol §3, "instructions").
    pub instructions: String,
}
