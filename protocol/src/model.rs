//! Enumerations and small records that appear on the wire: participant kinds,
//! conversation types, roles and the reply policy (protocol §3, §4).

use crate::ids::ParticipantId;
use serde::{Deserialize, Serialize};

/// `kind` of a participant (protocol §3): `user` (a human) or `agent`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ParticipantKind {
    /// A human; holds a `bay_u_…` token (protocol §2). Never mentionable
    /// (protocol §7) and never a respondent.
    User,
    /// An AI agent; holds a `bay_…` token (protocol §2). The only kind
    /// routing can choose to respond.
    Agent,
}

impl ParticipantKind {
    /// The `senderType` a message from this kind carries (`USER` / `AGENT`).
    pub fn sender_type(self) -> SenderType {
        match self {
            ParticipantKind::User => SenderType::User,
            ParticipantKind::Agent => SenderType::Agent,
        }
    }
}

/// `senderType` of a message (protocol §5, §11): `USER` or `AGENT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum SenderType {
    /// `USER`: sent by a human.
    User,
    /// `AGENT`: sent by an agent; counts toward the round cap (protocol §4).
    Agent,
}

impl SenderType {
    /// The participant kind that sends with this type.
    pub fn kind(self) -> ParticipantKind {
        match self {
            SenderType::User => ParticipantKind::User,
            SenderType::Agent => ParticipantKind::Agent,
        }
    }
}

/// `conversation.type` (protocol §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ConversationType {
    /// `DM`: a direct conversation. No policy, cap or mention gating: every
    /// agent answers every human message (protocol §3).
    #[serde(rename = "DM")]
    Dm,
    /// `AGENT_CHAT`: a direct chat of an agent with one user (BayChat opens
    /// it with `POST /conversations`, protocol §11); direct like `DM`.
    AgentChat,
    /// `GROUP`: the only type its [`Policy`] governs (protocol §4).
    Group,
}

impl ConversationType {
    /// Direct conversations (`DM`, `AGENT_CHAT`) have no reply policy, no
    /// orchestrator, no round cap and no mention gating (protocol §3).
    pub fn is_direct(self) -> bool {
        !matches!(self, ConversationType::Group)
    }
}

/// A member's role in one conversation (protocol §3: `member` / `admin`).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default, utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// `member`: an ordinary member; the default.
    #[default]
    Member,
    /// `admin`: set at creation (`admins`) or when added. Shown in rosters
    /// and primers; routing does not read it.
    Admin,
}

/// `policy.agentReplyPolicy` of a GROUP (protocol §4).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default, utoipa::ToSchema,
)]
#[serde(rename_all = "UPPERCASE")]
pub enum ReplyPolicy {
    /// Agents answer only when addressed: `@mentioned`, named by a human or
    /// replied to by a human. The default.
    #[default]
    Mentions,
    /// The designated agent answers every unaddressed human message; other
    /// agents only when addressed.
    Dedicated,
    /// The orchestrator (the designated agent) answers unaddressed human
    /// messages and delegates by `@mention`; a plain name routes to it, not
    /// to the named agent (protocol §4 table).
    Orchestrator,
    /// The built-in router picks agents for each unaddressed human message;
    /// the designated agent is the fallback when it picks none.
    Router,
    /// Every agent may answer every human message (permission, not
    /// obligation); agent messages still trigger only their `@mentions`.
    Open,
}

/// Default of `policy.maxAgentRounds` (protocol §4, "Round caps").
pub const DEFAULT_MAX_AGENT_ROUNDS: u8 = 2;
/// Upper bound of `policy.maxAgentRounds` (protocol §4: 0–5).
pub const MAX_AGENT_ROUNDS_LIMIT: u8 = 5;

/// A conversation's stored reply policy. Only GROUP conversations apply it
/// (protocol §3: `policyApplies` is false for DM / AGENT_CHAT).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    /// Which of the five rules governs the group.
    #[serde(default)]
    #[schema(required = true)]
    pub agent_reply_policy: ReplyPolicy,
    /// DEDICATED: the designated agent; ORCHESTRATOR: the orchestrator;
    /// ROUTER: the fallback agent. Ignored by MENTIONS and OPEN.
    #[serde(default)]
    #[schema(required = true)]
    pub designated_agent_id: Option<ParticipantId>,
    /// Round cap, 0–5 (protocol §4). Invariant: never above [`MAX_AGENT_ROUNDS_LIMIT`].
    #[serde(default = "default_rounds")]
    #[schema(required = true, maximum = 5)]
    pub max_agent_rounds: u8,
    /// The Bay's custom group rules, appended verbatim to `instructions` (protocol §3, part 8).
    #[serde(default)]
    #[schema(required = true)]
    pub rules: Option<String>,
}

fn default_rounds() -> u8 {
    DEFAULT_MAX_AGENT_ROUNDS
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            agent_reply_policy: ReplyPolicy::Mentions,
            designated_agent_id: None,
            max_agent_rounds: DEFAULT_MAX_AGENT_ROUNDS,
            rules: None,
        }
    }
}

/// One roster entry as routing and the context envelope see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RosterMember {
    /// The member's participant id. Invariant: unique within one roster.
    pub id: ParticipantId,
    /// Display name; what `@mentions` and plain names are matched against
    /// (case-insensitive, longest name wins, protocol §7).
    pub name: String,
    /// Only `agent` members can be mentioned or chosen to respond.
    pub kind: ParticipantKind,
    /// The member's role in this conversation.
    pub role: Role,
    /// What an agent is FOR (its operator's one-liner); always `None` for users.
    #[schema(required = true)]
    pub description: Option<String>,
}

/// Where a message stands in its life. Most messages are `complete` from
/// the start; a message sent with `"stream": true` is a draft that its
/// author appends to (`streaming`) until it completes, is cancelled by a
/// member, or fails (its author went away).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum MessageState {
    /// Final: routed, delivered as `message` or `message.completed`.
    #[default]
    Complete,
    /// An open draft: appends are accepted; nobody is asked to respond yet.
    Streaming,
    /// A member cancelled the draft; its text stays as it was.
    Cancelled,
    /// The draft was abandoned (its author held no session and appended
    /// nothing for `timing.draft_orphan_timeout`).
    Failed,
}

impl MessageState {
    /// Whether this is the default state (omitted from stored records).
    pub fn is_complete(&self) -> bool {
        *self == MessageState::Complete
    }

    /// The wire name: `complete`, `streaming`, `cancelled` or `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageState::Complete => "complete",
            MessageState::Streaming => "streaming",
            MessageState::Cancelled => "cancelled",
            MessageState::Failed => "failed",
        }
    }
}
