//! Routing: who should answer a message (protocol §3, §4, §7, §11).
//!
//! Routing runs once, at write time, and its outcome ([`Routing`]) is stored
//! with the message, so every path that later delivers the message (`/ws`,
//! `/updates`, REST polls, replays after a roster or policy change) gives
//! each recipient the verdict it would have seen live: the verdict is
//! [`Routing::should_respond`], which reads only the stored `respondents`
//! list and `suppressed` flag — never the roster or the policy.
//!
//! # How a message is addressed
//!
//! Three things can address an agent:
//!
//! * an **`@mention`** in the content ([`parse_mentions`], §7) — from any
//!   sender, in every conversation type and every policy ("@mentions always
//!   win", §4; "Mentions win in every reply policy and for every sender",
//!   §7);
//! * a **plain name** without `@` ([`addressed_by_name`], §4) — only when a
//!   *human* writes it; an agent writing a name is narrating and addresses
//!   nobody. The ids are stored in [`Routing::addressed_agents`] (the gateway
//!   copies them into `message.metadata.addressedAgents`);
//! * a **reply** (§11): a *human* replying to an agent's message addresses
//!   that agent as strongly as an `@mention`; an agent replying to an agent
//!   addresses nobody ("quoting another agent is conversation, not
//!   delegation"). The replied-to agent must still be an agent member.
//!
//! A human message that none of the three addresses is **unaddressed**.
//! (`@Manuel`, naming a human, resolves to nothing, so it is unaddressed.)
//!
//! # Who responds ([`route`])
//!
//! | Conversation / policy | Human message | Agent message |
//! |---|---|---|
//! | `DM`, `AGENT_CHAT` (§3) | every agent | `@mentioned` agents |
//! | GROUP `MENTIONS` | mentioned, named and replied-to agents | mentioned |
//! | GROUP `DEDICATED` | addressed agents; the designated agent when unaddressed | mentioned |
//! | GROUP `ORCHESTRATOR` | mentioned and replied-to agents; the orchestrator when the message is unaddressed or names an agent without `@` (§4 table: a plain name routes to the orchestrator) | mentioned |
//! | GROUP `ROUTER` | addressed agents; when unaddressed, the [`router_picks`], or the designated fallback agent when it picks none | mentioned |
//! | GROUP `OPEN` | every agent | mentioned |
//!
//! Decisions worth calling out (the ones §4 leaves open are in
//! `docs/routing.md`, with the properties the tests check):
//!
//! * **Direct conversations** have no policy, no cap and no gating: every
//!   agent answers every human message. An agent message there triggers
//!   only the agents it `@mentions`, because §7 makes mentions win "for
//!   every sender" and otherwise "an agent message with no mentions
//!   triggers nobody".
//! * **ORCHESTRATOR and replies.** A human replying to a *specialist's*
//!   message routes to that specialist, not to the orchestrator: §11 says a
//!   reply addresses the agent "as strongly as an `@mention`", and a
//!   structured `@mention` "is unaffected in every policy". Only a plain
//!   name is demoted to a hint there.
//! * **DEDICATED / ORCHESTRATOR with no usable designated agent** (unset,
//!   not a member, or not an agent) behave as MENTIONS; ROUTER with none
//!   simply has no fallback.
//! * **Never yourself** (§4): the sender is never in `respondents`, even
//!   when it `@mentions` itself (it still appears in `mentions`, the literal
//!   record).
//! * `respondents` is listed in **roster order**, without duplicates;
//!   `mentions` and `addressed_agents` in order of first appearance.
//!
//! # The round cap
//!
//! The round cap (§4, "Round caps") is the one input routing cannot know
//! alone: it depends on the messages before this one, possibly accepted by
//! another gateway node. The store decides it atomically with the append:
//! for an **agent-sent message in a GROUP**, when the number of consecutive
//! agent messages since the last human message, **including this one**,
//! reaches `maxAgentRounds`, it sets [`Routing::suppressed`] — see
//! [`round_cap_reached`] for the exact predicate. With cap `0` every agent
//! message is suppressed; with cap `5` the fifth consecutive agent message
//! (and every later one) is. Suppression overrides mentions: a suppressed
//! message has `shouldRespond = false` for everyone. Human messages and
//! direct conversations are never suppressed.

use crate::context::PolicyView;
use crate::ids::ParticipantId;
use crate::model::{
    ConversationType, ParticipantKind, Policy, ReplyPolicy, RosterMember, MAX_AGENT_ROUNDS_LIMIT,
};
use serde::{Deserialize, Serialize};

mod instructions;
mod mentions;
mod names;
mod router;
mod text;

pub use instructions::{instructions, AroundRoster, Primer, RosterParagraph, YOU_MARK};
pub use mentions::parse_mentions;
pub use names::{addressed_by_name, distinctive_words, NameIndex};
pub use router::router_picks;

/// Everything routing needs to know about one new message.
#[derive(Clone, Debug)]
pub struct RouteInput<'a> {
    /// `DM` / `AGENT_CHAT` skip the policy entirely (protocol §3).
    pub conversation_type: ConversationType,
    /// The conversation's stored policy; its designated agent counts only
    /// when it is an agent member of `roster`.
    pub policy: &'a Policy,
    /// The conversation's current members (humans and agents).
    pub roster: &'a [RosterMember],
    /// Who sent the message; never among the respondents (protocol §4).
    pub sender: &'a ParticipantId,
    /// Plain names and replies address agents only when a `user` sends them.
    pub sender_kind: ParticipantKind,
    /// The message text, scanned for `@mentions` and plain names.
    pub content: &'a str,
    /// Sender of the message this one replies to (`replyToMessageId`), if any.
    pub reply_to_sender: Option<(&'a ParticipantId, ParticipantKind)>,
}

/// The routing facts stored with a message. Every field defaults when
/// absent, so JSON stored by older versions still parses.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Routing {
    /// Agent ids literally `@mentioned` (the message's `mentions`, §7), in
    /// order of first appearance. May include the sender.
    #[serde(default)]
    pub mentions: Vec<ParticipantId>,
    /// Agent ids a human addressed by plain name (`metadata.addressedAgents`,
    /// §4), in order of first appearance. Always empty for agent senders.
    /// Under ORCHESTRATOR these are a hint to the orchestrator, not routes.
    #[serde(default)]
    pub addressed_agents: Vec<ParticipantId>,
    /// Agents that should respond before the round cap is applied, in roster
    /// order. Never contains the sender.
    #[serde(default)]
    pub respondents: Vec<ParticipantId>,
    /// Set by the store when the round cap suppresses every agent (§4; see
    /// [`round_cap_reached`]).
    #[serde(default)]
    pub suppressed: bool,
    /// ROUTER policy only: the agents the built-in router picked for an
    /// unaddressed human message ([`router_picks`]). Empty when the router
    /// did not run or picked no one (then the fallback, if any, is in
    /// `respondents`).
    #[serde(default)]
    pub router_picks: Vec<ParticipantId>,
    /// The agent a human addressed by replying to its message (§11), if any.
    /// Informational; it is already in `respondents` where it applies.
    #[serde(default)]
    pub replied_to_agent: Option<ParticipantId>,
}

impl Routing {
    /// The verdict for `recipient` (protocol §4: the single signal an agent
    /// obeys). Never true for the message's own sender, never true when the
    /// round cap suppressed the message. Reads only stored fields, so a
    /// replay gives the verdict the recipient saw live.
    pub fn should_respond(&self, recipient: &ParticipantId, sender: &ParticipantId) -> bool {
        !self.suppressed && recipient != sender && self.respondents.contains(recipient)
    }
}

/// The round-cap predicate the store applies at append time (§4): `true`
/// when this message must be stored with `suppressed = true`.
///
/// `consecutive_agent_messages` counts the agent messages since the last
/// human message, **including the message being appended**. Only
/// agent-sent messages in a GROUP can be suppressed; `max_agent_rounds` is
/// clamped to [`MAX_AGENT_ROUNDS_LIMIT`].
///
/// * cap 0: every agent message is suppressed (agents never trigger agents);
/// * cap 2 (default): a human asks, agent A answers and `@mentions` B (count
///   1, B responds), B answers `@mentioning` A (count 2, suppressed);
/// * cap 5: messages 1–4 of a chain route normally, the 5th is suppressed.
pub fn round_cap_reached(
    conversation_type: ConversationType,
    sender_kind: ParticipantKind,
    consecutive_agent_messages: u32,
    max_agent_rounds: u8,
) -> bool {
    !conversation_type.is_direct()
        && sender_kind == ParticipantKind::Agent
        && consecutive_agent_messages >= u32::from(max_agent_rounds.min(MAX_AGENT_ROUNDS_LIMIT))
}

/// The policy as it actually operates in a room: the configured policy with
/// its designated agent resolved against the roster.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Effective<'a> {
    /// `DM` / `AGENT_CHAT`: no policy at all.
    Direct,
    /// MENTIONS, or DEDICATED / ORCHESTRATOR without a usable designated agent.
    Mentions,
    Dedicated(&'a RosterMember),
    Orchestrator(&'a RosterMember),
    /// ROUTER, with its fallback agent if usable.
    Router(Option<&'a RosterMember>),
    Open,
}

pub(crate) fn effective<'a>(
    conversation_type: ConversationType,
    policy: &Policy,
    roster: &'a [RosterMember],
) -> Effective<'a> {
    if conversation_type.is_direct() {
        return Effective::Direct;
    }
    let designated = policy.designated_agent_id.as_ref().and_then(|id| {
        roster
            .iter()
            .find(|m| &m.id == id && m.kind == ParticipantKind::Agent)
    });
    match policy.agent_reply_policy {
        ReplyPolicy::Mentions => Effective::Mentions,
        ReplyPolicy::Dedicated => designated.map_or(Effective::Mentions, Effective::Dedicated),
        ReplyPolicy::Orchestrator => {
            designated.map_or(Effective::Mentions, Effective::Orchestrator)
        }
        ReplyPolicy::Router => Effective::Router(designated),
        ReplyPolicy::Open => Effective::Open,
    }
}

/// Computes the routing facts of a message, round cap excluded (the store
/// sets [`Routing::suppressed`]). See the [module docs](self) for the rules.
pub fn route(input: &RouteInput<'_>) -> Routing {
    route_with_names(input, &NameIndex::new(input.roster))
}

/// [`route`] with the roster's [`NameIndex`] built beforehand: `names`
/// must be the index of `input.roster`.
pub fn route_with_names(input: &RouteInput<'_>, names: &NameIndex) -> Routing {
    let text = text::Folded::new(input.content);
    let scan = mentions::scan_mentions(&text, &names.mentions);
    let human = input.sender_kind == ParticipantKind::User;
    let is_agent_member = |id: &ParticipantId| {
        input
            .roster
            .iter()
            .any(|m| &m.id == id && m.kind == ParticipantKind::Agent)
    };

    // §4: plain names count for human senders only.
    let addressed_agents = if human {
        names::scan_plain_names(&text, names, &scan.spans)
    } else {
        Vec::new()
    };
    // §11: a human replying to an agent's message addresses that agent.
    let replied_to_agent = match input.reply_to_sender {
        Some((id, ParticipantKind::Agent)) if human && is_agent_member(id) => Some(id.clone()),
        _ => None,
    };

    // @mentions win in every policy, for every sender (§4, §7).
    let mut chosen: Vec<ParticipantId> = scan.ids.clone();
    let mut picks = Vec::new();
    if human {
        picks = chosen_by_policy(input, &addressed_agents, &replied_to_agent, &mut chosen);
    }
    let respondents = respondents(input, &chosen);

    Routing {
        mentions: scan.ids,
        addressed_agents,
        respondents,
        suppressed: false,
        router_picks: picks,
        replied_to_agent,
    }
}

/// What the conversation's policy adds to `chosen` for a **human**
/// message (§3, §4 table): every agent (direct, open), the named and
/// replied-to agents (`addressed_agents`, `replied_to_agent`), and for an
/// unaddressed message the designated agent, the orchestrator or the
/// router's picks. `chosen` holds the `@mentioned` agents on entry (a
/// message with none of the three is unaddressed). Returns the router's
/// picks (empty under other policies).
fn chosen_by_policy(
    input: &RouteInput<'_>,
    addressed_agents: &[ParticipantId],
    replied_to_agent: &Option<ParticipantId>,
    chosen: &mut Vec<ParticipantId>,
) -> Vec<ParticipantId> {
    let unaddressed =
        chosen.is_empty() && addressed_agents.is_empty() && replied_to_agent.is_none();
    let mut picks = Vec::new();
    let all_agents = || {
        input
            .roster
            .iter()
            .filter(|m| m.kind == ParticipantKind::Agent)
            .map(|m| m.id.clone())
    };
    let named_or_replied = addressed_agents
        .iter()
        .cloned()
        .chain(replied_to_agent.clone());
    match effective(input.conversation_type, input.policy, input.roster) {
        // §3: every agent answers every human message.
        Effective::Direct | Effective::Open => chosen.extend(all_agents()),
        Effective::Mentions => chosen.extend(named_or_replied),
        Effective::Dedicated(designated) => {
            chosen.extend(named_or_replied);
            if unaddressed {
                chosen.push(designated.id.clone());
            }
        }
        Effective::Orchestrator(orchestrator) => {
            // §4 table: a plain name "routes to the orchestrator, exactly
            // as an unaddressed message does", also beside a mention or
            // a reply; the names stay a hint in `addressed_agents`. A
            // reply is a structured address (§11).
            chosen.extend(replied_to_agent.clone());
            if unaddressed || !addressed_agents.is_empty() {
                chosen.push(orchestrator.id.clone());
            }
        }
        Effective::Router(fallback) => {
            chosen.extend(named_or_replied);
            if unaddressed {
                picks = router_picks(input.content, input.roster, input.sender);
                if picks.is_empty() {
                    chosen.extend(fallback.map(|m| m.id.clone()));
                } else {
                    chosen.extend(picks.iter().cloned());
                }
            }
        }
    }
    picks
}

/// The agents that answer, out of `chosen`: in roster order, agents only,
/// never the sender (§4), each once.
fn respondents(input: &RouteInput<'_>, chosen: &[ParticipantId]) -> Vec<ParticipantId> {
    let mut respondents: Vec<ParticipantId> = Vec::new();
    for m in input.roster {
        if m.kind == ParticipantKind::Agent
            && &m.id != input.sender
            && chosen.contains(&m.id)
            && !respondents.contains(&m.id)
        {
            respondents.push(m.id.clone());
        }
    }
    respondents
}

/// The values of [`PolicyView::effective_rule`] (protocol §3).
pub mod effective_rule {
    /// `DM` / `AGENT_CHAT`: every agent answers every human message; no
    /// policy, no cap, no gating (protocol §3).
    pub const EVERY_USER_MESSAGE: &str = "EVERY_USER_MESSAGE";
    /// GROUP MENTIONS — and DEDICATED / ORCHESTRATOR without a designated
    /// agent: agents answer only when `@mentioned`, named by a human, or
    /// replied to by a human.
    pub const MENTIONS_ONLY: &str = "MENTIONS_ONLY";
    /// GROUP DEDICATED: the designated agent answers every unaddressed human
    /// message; the others answer only when addressed.
    pub const DEDICATED_AGENT: &str = "DEDICATED_AGENT";
    /// GROUP ORCHESTRATOR: the orchestrator answers unaddressed human
    /// messages and ones that only name an agent, and delegates by
    /// `@mention`; specialists answer only an `@mention` or a human reply.
    pub const ORCHESTRATOR_DELEGATES: &str = "ORCHESTRATOR_DELEGATES";
    /// GROUP ROUTER with a fallback agent: the built-in router picks agents
    /// for unaddressed human messages; the fallback answers when it picks none.
    pub const ROUTER_WITH_FALLBACK: &str = "ROUTER_WITH_FALLBACK";
    /// GROUP ROUTER without a fallback agent: when the router picks no one,
    /// nobody answers.
    pub const ROUTER_NO_FALLBACK: &str = "ROUTER_NO_FALLBACK";
    /// GROUP OPEN: every agent may answer every human message.
    pub const OPEN_ALL_AGENTS: &str = "OPEN_ALL_AGENTS";
}

/// The envelope's `policy` view (protocol §3).
///
/// * `DM` / `AGENT_CHAT`: `policyApplies = false`, `effectiveRule =
///   EVERY_USER_MESSAGE`, no designated agent.
/// * GROUP: `policyApplies = true` and `effectiveRule` one of the
///   [`effective_rule`] constants: MENTIONS → `MENTIONS_ONLY`; DEDICATED →
///   `DEDICATED_AGENT`; ORCHESTRATOR → `ORCHESTRATOR_DELEGATES`; ROUTER →
///   `ROUTER_WITH_FALLBACK` (or `ROUTER_NO_FALLBACK` when no agent is
///   designated); OPEN → `OPEN_ALL_AGENTS`. DEDICATED and ORCHESTRATOR with
///   no designated agent report `MENTIONS_ONLY`, which is how they route.
///   `designatedAgentId` is `null` under MENTIONS and OPEN, which ignore it.
///
/// This view sees only the stored policy, not the roster: a designated agent
/// that has left the room is still reported (routing treats it as absent).
/// `maxAgentRounds` is clamped to 0–5.
pub fn policy_view(conversation_type: ConversationType, policy: &Policy) -> PolicyView {
    let max_agent_rounds = policy.max_agent_rounds.min(MAX_AGENT_ROUNDS_LIMIT);
    if conversation_type.is_direct() {
        return PolicyView {
            agent_reply_policy: policy.agent_reply_policy,
            designated_agent_id: None,
            max_agent_rounds,
            effective_rule: effective_rule::EVERY_USER_MESSAGE.into(),
            policy_applies: false,
        };
    }
    let designated = policy.designated_agent_id.is_some();
    let (rule, keeps_designated) = match policy.agent_reply_policy {
        ReplyPolicy::Mentions => (effective_rule::MENTIONS_ONLY, false),
        ReplyPolicy::Dedicated if designated => (effective_rule::DEDICATED_AGENT, true),
        ReplyPolicy::Orchestrator if designated => (effective_rule::ORCHESTRATOR_DELEGATES, true),
        ReplyPolicy::Dedicated | ReplyPolicy::Orchestrator => {
            (effective_rule::MENTIONS_ONLY, false)
        }
        ReplyPolicy::Router if designated => (effective_rule::ROUTER_WITH_FALLBACK, true),
        ReplyPolicy::Router => (effective_rule::ROUTER_NO_FALLBACK, false),
        ReplyPolicy::Open => (effective_rule::OPEN_ALL_AGENTS, false),
    };
    PolicyView {
        agent_reply_policy: policy.agent_reply_policy,
        designated_agent_id: if keeps_designated {
            policy.designated_agent_id.clone()
        } else {
            None
        },
        max_agent_rounds,
        effective_rule: rule.into(),
        policy_applies: true,
    }
}

/// Whether `participant` is the orchestrator of a conversation (GROUP,
/// ORCHESTRATOR policy, designated agent; protocol §8).
pub fn is_orchestrator(
    conversation_type: ConversationType,
    policy: &Policy,
    participant: &ParticipantId,
) -> bool {
    !conversation_type.is_direct()
        && policy.agent_reply_policy == ReplyPolicy::Orchestrator
        && policy.designated_agent_id.as_ref() == Some(participant)
}

/// Whether `participant` is the room's delegator (protocol §3, part 5 of
/// `instructions`): the orchestrator, or the DEDICATED designated agent.
/// Delegators get the list of agents they can call.
pub fn is_delegator(
    conversation_type: ConversationType,
    policy: &Policy,
    participant: &ParticipantId,
) -> bool {
    !conversation_type.is_direct()
        && matches!(
            policy.agent_reply_policy,
            ReplyPolicy::Orchestrator | ReplyPolicy::Dedicated
        )
        && policy.designated_agent_id.as_ref() == Some(participant)
}
