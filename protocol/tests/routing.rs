//! Routing rules (protocol §3, §4, §7, §11): a table of cases, each asserting
//! exact id lists, plus `should_respond`, round-cap, `policy_view`,
//! `instructions` and property tests.

use proptest::prelude::*;
use switchboard_protocol::event::ConversationRef;
use switchboard_protocol::ids::{ConversationId, ParticipantId};
use switchboard_protocol::model::{
    ConversationType, ParticipantKind, Policy, ReplyPolicy, Role, RosterMember,
};
use switchboard_protocol::routing::{
    addressed_by_name, distinctive_words, effective_rule, instructions, is_delegator,
    is_orchestrator, parse_mentions, policy_view, round_cap_reached, route, router_picks,
    RouteInput, Routing,
};

use ConversationType::{AgentChat, Dm, Group};
use ParticipantKind::{Agent, User};
use ReplyPolicy::{Dedicated, Mentions, Open, Orchestrator, Router};

// ---------------------------------------------------------------- rosters

fn pid(s: &str) -> ParticipantId {
    ParticipantId::from(s)
}

fn agent(id: &str, name: &str, description: &str) -> RosterMember {
    RosterMember {
        id: pid(id),
        name: name.into(),
        kind: Agent,
        role: Role::Member,
        description: Some(description.into()),
    }
}

fn user(id: &str, name: &str, role: Role) -> RosterMember {
    RosterMember {
        id: pid(id),
        name: name.into(),
        kind: User,
        role,
        description: None,
    }
}

/// Names chosen to stress mention parsing: prefixes, multi-word, regex
/// metacharacters, Unicode.
fn names_roster() -> Vec<RosterMember> {
    vec![
        user("ana", "Ana", Role::Admin),
        user("manuel", "Manuel", Role::Member),
        agent("rex", "Rex", "Reviews pull requests"),
        agent("rexford", "Rexford", "Books travel"),
        agent("bay", "Bay", "General questions about this Bay"),
        agent("brain", "Bay Brain", "Remembers decisions"),
        agent("cpp", "C++ Bot", "Compiler errors"),
        agent("r2", "R2.D2 (beta)", "Astromech repairs"),
        agent("zoe", "Zoë", "Translates documents"),
        agent("muller", "Müller-Bot", "Invoices and billing"),
    ]
}

/// A working team for the policy cases.
fn team_roster() -> Vec<RosterMember> {
    vec![
        user("ana", "Ana", Role::Admin),
        user("bob", "Bob", Role::Member),
        agent("orch", "Conductor", "Coordinates the team"),
        agent(
            "deploy",
            "Deploy Daemon",
            "Ships releases to production and rolls back deployments",
        ),
        agent(
            "docs",
            "Doc Writer",
            "Writes documentation and release notes",
        ),
        agent("claude", "Claude", "General purpose reasoning"),
    ]
}

#[derive(Clone, Copy, Debug)]
enum R {
    /// [`names_roster`]
    Names,
    /// [`team_roster`]
    Team,
    /// Two agents sharing the word "Claude" plus Codex.
    Twins,
    /// Two agents sharing the brand word "Acme" (and nothing else).
    Acme,
    /// Two agents with the same name up to case.
    Echo,
    /// A DM: Ana and Rex.
    Dm1,
    /// A direct conversation with two agents.
    Dm2,
}

fn roster(r: R) -> Vec<RosterMember> {
    let ana = || user("ana", "Ana", Role::Admin);
    match r {
        R::Names => names_roster(),
        R::Team => team_roster(),
        R::Twins => vec![
            ana(),
            agent("code", "Claude Code", "Writes code in a terminal"),
            agent("desk", "Claude Desktop", "Works with desktop files"),
            agent("codex", "Codex", "Refactors"),
        ],
        R::Acme => vec![
            ana(),
            agent("sup", "Acme Support", "Login problems"),
            agent("sales", "Acme Sales", "Quotes and pricing"),
        ],
        R::Echo => vec![
            ana(),
            agent("e1", "Echo", "Repeats things"),
            agent("e2", "ECHO", "Repeats louder"),
        ],
        R::Dm1 => vec![ana(), agent("rex", "Rex", "Reviews pull requests")],
        R::Dm2 => vec![
            ana(),
            agent("rex", "Rex", "Reviews pull requests"),
            agent("zoe", "Zoë", "Translates documents"),
        ],
    }
}

// ---------------------------------------------------------------- the table

#[derive(Clone, Copy, Debug)]
struct Case {
    name: &'static str,
    roster: R,
    conv: ConversationType,
    policy: ReplyPolicy,
    designated: Option<&'static str>,
    /// Looked up in the roster for its kind.
    sender: &'static str,
    content: &'static str,
    /// Sender of the replied-to message and its kind.
    reply_to: Option<(&'static str, ParticipantKind)>,
    mentions: &'static [&'static str],
    addressed: &'static [&'static str],
    respondents: &'static [&'static str],
    picks: &'static [&'static str],
}

/// Defaults: the names roster, a GROUP under MENTIONS, Ana (a human) sends.
const M: Case = Case {
    name: "",
    roster: R::Names,
    conv: Group,
    policy: Mentions,
    designated: None,
    sender: "ana",
    content: "",
    reply_to: None,
    mentions: &[],
    addressed: &[],
    respondents: &[],
    picks: &[],
};

/// Team roster, GROUP, DEDICATED with Claude designated.
const DED: Case = Case {
    roster: R::Team,
    policy: Dedicated,
    designated: Some("claude"),
    ..M
};
/// Team roster, GROUP, ORCHESTRATOR with Conductor as orchestrator.
const ORC: Case = Case {
    roster: R::Team,
    policy: Orchestrator,
    designated: Some("orch"),
    ..M
};
/// Team roster, GROUP, ROUTER with Claude as the fallback.
const ROU: Case = Case {
    roster: R::Team,
    policy: Router,
    designated: Some("claude"),
    ..M
};
/// Team roster, GROUP, OPEN.
const OPN: Case = Case {
    roster: R::Team,
    policy: Open,
    ..M
};
const ALL_TEAM_AGENTS: &[&str] = &["orch", "deploy", "docs", "claude"];

const CASES: &[Case] = &[
    // ---- @mentions (§7) ------------------------------------------------
    Case {
        name: "mention: plain @Name",
        content: "@Rex can you review this?",
        mentions: &["rex"],
        respondents: &["rex"],
        ..M
    },
    Case {
        name: "mention: lower-case",
        content: "@rex lowercase works",
        mentions: &["rex"],
        respondents: &["rex"],
        ..M
    },
    Case {
        name: "mention: upper-case",
        content: "@REXFORD please book it",
        mentions: &["rexford"],
        respondents: &["rexford"],
        ..M
    },
    Case {
        name: "mention: @Rexford is not Rex",
        content: "ping @Rexford now",
        mentions: &["rexford"],
        respondents: &["rexford"],
        ..M
    },
    Case {
        name: "mention: email-like adam@Rex",
        content: "write to adam@Rex today",
        ..M
    },
    Case {
        name: "mention: dotted email and URL handle",
        content: "a.b@rex or x.com/@rex",
        ..M
    },
    Case {
        name: "mention: longest name wins",
        content: "@Bay Brain remember this",
        mentions: &["brain"],
        respondents: &["brain"],
        ..M
    },
    Case {
        name: "mention: shorter name alone",
        content: "@Bay what's up",
        mentions: &["bay"],
        respondents: &["bay"],
        ..M
    },
    Case {
        name: "mention: longer name fails boundary, shorter wins",
        content: "@Bay Brainstorm with me",
        mentions: &["bay"],
        respondents: &["bay"],
        ..M
    },
    Case {
        name: "mention: regex metachar C++",
        content: "@C++ Bot why does this template fail",
        mentions: &["cpp"],
        respondents: &["cpp"],
        ..M
    },
    Case {
        name: "mention: regex metachars . ( )",
        content: "@R2.D2 (beta) fix the hyperdrive",
        mentions: &["r2"],
        respondents: &["r2"],
        ..M
    },
    Case {
        name: "mention: '.' is literal, not any-char",
        content: "@R2xD2 (beta) fix",
        ..M
    },
    Case {
        name: "mention: '+' is literal, not repetition",
        content: "@C+ Bot hello",
        ..M
    },
    Case {
        name: "mention: Unicode name",
        content: "@Zoë traduis ça",
        mentions: &["zoe"],
        respondents: &["zoe"],
        ..M
    },
    Case {
        name: "mention: Unicode case-insensitive",
        content: "@ZOË translate",
        mentions: &["zoe"],
        respondents: &["zoe"],
        ..M
    },
    Case {
        name: "mention: Unicode + hyphen, lower-case",
        content: "@müller-bot send the invoice",
        mentions: &["muller"],
        respondents: &["muller"],
        ..M
    },
    Case {
        name: "mention: comma after",
        content: "@Rex, thoughts?",
        mentions: &["rex"],
        respondents: &["rex"],
        ..M
    },
    Case {
        name: "mention: question mark after, end of text",
        content: "thoughts @Rex?",
        mentions: &["rex"],
        respondents: &["rex"],
        ..M
    },
    Case {
        name: "mention: possessive 's counts",
        content: "@Rex's review is late",
        mentions: &["rex"],
        respondents: &["rex"],
        ..M
    },
    Case {
        name: "mention: curly possessive counts",
        content: "@Rex’s review",
        mentions: &["rex"],
        respondents: &["rex"],
        ..M
    },
    Case {
        name: "mention: the whole text",
        content: "@Rex",
        mentions: &["rex"],
        respondents: &["rex"],
        ..M
    },
    Case {
        name: "mention: at the very end",
        content: "ask @Rex",
        mentions: &["rex"],
        respondents: &["rex"],
        ..M
    },
    Case {
        name: "mention: a human resolves to nothing",
        content: "@Manuel can you check",
        ..M
    },
    Case {
        name: "mention: order of appearance, deduped",
        content: "@Zoë and @Rex, then @zoë again",
        mentions: &["zoe", "rex"],
        respondents: &["rex", "zoe"],
        ..M
    },
    Case {
        name: "mention: hyphen glues a longer handle",
        content: "@Rex-Bot is not a thing",
        ..M
    },
    Case {
        name: "mention: underscore glues",
        content: "@Rex_bot",
        ..M
    },
    Case {
        name: "mention: digit glues",
        content: "@Rex2 hi",
        ..M
    },
    Case {
        name: "mention: brackets and quotes around",
        content: "(@Rex) and \"@Zoë\"",
        mentions: &["rex", "zoe"],
        respondents: &["rex", "zoe"],
        ..M
    },
    Case {
        name: "mention: multi-word with two spaces",
        content: "@Bay  Brain two spaces",
        mentions: &["brain"],
        respondents: &["brain"],
        ..M
    },
    Case {
        name: "mention: multi-word across a newline",
        content: "@Bay\nBrain newline",
        mentions: &["brain"],
        respondents: &["brain"],
        ..M
    },
    Case {
        name: "mention: double @",
        content: "@@Rex",
        ..M
    },
    Case {
        name: "mention: dot glues a domain",
        content: "@Rex.io is a domain",
        ..M
    },
    Case {
        name: "mention: full stop after",
        content: "end of sentence @Rex.",
        mentions: &["rex"],
        respondents: &["rex"],
        ..M
    },
    Case {
        name: "mention: glued second @ is email-like",
        content: "@Rex@Zoë",
        mentions: &["rex"],
        respondents: &["rex"],
        ..M
    },
    // ---- plain names (§4), human senders ---------------------------------
    Case {
        name: "plain: name opens the message",
        content: "Rex, can you look at this?",
        addressed: &["rex"],
        respondents: &["rex"],
        ..M
    },
    Case {
        name: "plain: longer one-word name",
        content: "rexford please book",
        addressed: &["rexford"],
        respondents: &["rexford"],
        ..M
    },
    Case {
        name: "plain: whole multi-word name, longest wins",
        content: "Bay Brain, what did we decide?",
        addressed: &["brain"],
        respondents: &["brain"],
        ..M
    },
    Case {
        name: "plain: whole name beats a word of another name",
        content: "bay, status?",
        addressed: &["bay"],
        respondents: &["bay"],
        ..M
    },
    Case {
        name: "plain: distinctive word of a name",
        content: "my brain hurts",
        addressed: &["brain"],
        respondents: &["brain"],
        ..M
    },
    Case {
        name: "plain: stop-word 'bot' addresses nobody",
        content: "ask the bot about it",
        ..M
    },
    Case {
        name: "plain: Unicode word of a hyphenated name",
        content: "Müller, the invoice",
        addressed: &["muller"],
        respondents: &["muller"],
        ..M
    },
    Case {
        name: "plain: Unicode upper-case",
        content: "ZOË?",
        addressed: &["zoe"],
        respondents: &["zoe"],
        ..M
    },
    Case {
        name: "plain: word with symbols (c++)",
        content: "c++ question for you",
        addressed: &["cpp"],
        respondents: &["cpp"],
        ..M
    },
    Case {
        name: "plain: dotted word (r2.d2)",
        content: "r2.d2, status report",
        addressed: &["r2"],
        respondents: &["r2"],
        ..M
    },
    Case {
        name: "plain: two names",
        content: "Rex and Zoë, both of you",
        addressed: &["rex", "zoe"],
        respondents: &["rex", "zoe"],
        ..M
    },
    Case {
        name: "plain: order of appearance vs roster order",
        content: "Zoë and Rex",
        addressed: &["zoe", "rex"],
        respondents: &["rex", "zoe"],
        ..M
    },
    Case {
        name: "plain: hyphen-joined word is not the name",
        content: "a t-rex is a dinosaur",
        ..M
    },
    Case {
        name: "plain: plural is not the name",
        content: "the rexes are here",
        ..M
    },
    Case {
        name: "plain: email domain is not the name",
        content: "mail adam@rex.com",
        ..M
    },
    Case {
        name: "plain: mention and name together",
        content: "@Rex and Zoë",
        mentions: &["rex"],
        addressed: &["zoe"],
        respondents: &["rex", "zoe"],
        ..M
    },
    Case {
        name: "plain: mentioned text is not counted again",
        content: "@Bay Brain",
        mentions: &["brain"],
        respondents: &["brain"],
        ..M
    },
    Case {
        name: "plain: possessive",
        content: "Rex's idea is good",
        addressed: &["rex"],
        respondents: &["rex"],
        ..M
    },
    Case {
        name: "plain: dotted file name is not the name",
        content: "edit foo.rex config",
        ..M
    },
    Case {
        name: "plain: at the very end, upper-case",
        content: "Hello REX",
        addressed: &["rex"],
        respondents: &["rex"],
        ..M
    },
    Case {
        name: "plain: agent writing a name addresses nobody",
        sender: "zoe",
        content: "Rex, take a look",
        ..M
    },
    Case {
        name: "plain: agent @mention still routes",
        sender: "zoe",
        content: "@Rex take a look",
        mentions: &["rex"],
        respondents: &["rex"],
        ..M
    },
    Case {
        name: "plain: mention Rexford, name Rex",
        content: "@Rexford and rex",
        mentions: &["rexford"],
        addressed: &["rex"],
        respondents: &["rex", "rexford"],
        ..M
    },
    // ---- ambiguous / shared names ------------------------------------------
    Case {
        name: "ambiguous: shared word addresses all its agents",
        roster: R::Twins,
        content: "claude, is the deploy green?",
        addressed: &["code", "desk"],
        respondents: &["code", "desk"],
        ..M
    },
    Case {
        name: "ambiguous: whole name picks one",
        roster: R::Twins,
        content: "Claude Code, run it",
        addressed: &["code"],
        respondents: &["code"],
        ..M
    },
    Case {
        name: "ambiguous: the other distinctive word",
        roster: R::Twins,
        content: "desktop please",
        addressed: &["desk"],
        respondents: &["desk"],
        ..M
    },
    Case {
        name: "ambiguous: @ with the whole name",
        roster: R::Twins,
        content: "@Claude Code run",
        mentions: &["code"],
        respondents: &["code"],
        ..M
    },
    Case {
        name: "ambiguous: @ with a partial name mentions nobody",
        roster: R::Twins,
        content: "@Claude hi",
        ..M
    },
    Case {
        name: "ambiguous: word shared by every agent is not distinctive",
        roster: R::Acme,
        content: "the acme invoice is wrong",
        ..M
    },
    Case {
        name: "ambiguous: the unshared word addresses",
        roster: R::Acme,
        content: "support, my login fails",
        addressed: &["sup"],
        respondents: &["sup"],
        ..M
    },
    Case {
        name: "ambiguous: whole name with the shared word",
        roster: R::Acme,
        content: "Acme Sales, a quote please",
        addressed: &["sales"],
        respondents: &["sales"],
        ..M
    },
    Case {
        name: "ambiguous: same name mentions both",
        roster: R::Echo,
        content: "@Echo hi",
        mentions: &["e1", "e2"],
        respondents: &["e1", "e2"],
        ..M
    },
    Case {
        name: "ambiguous: same name plain addresses both",
        roster: R::Echo,
        content: "echo, hi",
        addressed: &["e1", "e2"],
        respondents: &["e1", "e2"],
        ..M
    },
    // ---- replies (§11) -----------------------------------------------------
    Case {
        name: "reply: human to agent addresses it",
        content: "thoughts?",
        reply_to: Some(("rex", Agent)),
        respondents: &["rex"],
        ..M
    },
    Case {
        name: "reply: agent to agent addresses nobody",
        sender: "zoe",
        content: "agreed",
        reply_to: Some(("rex", Agent)),
        ..M
    },
    Case {
        name: "reply: human to human addresses nobody",
        content: "agreed",
        reply_to: Some(("manuel", User)),
        ..M
    },
    Case {
        name: "reply: to an agent that left",
        content: "still there?",
        reply_to: Some(("ghost", Agent)),
        ..M
    },
    Case {
        name: "reply: plus a mention",
        content: "@Zoë too",
        reply_to: Some(("rex", Agent)),
        mentions: &["zoe"],
        respondents: &["rex", "zoe"],
        ..M
    },
    Case {
        name: "reply: agent to human addresses nobody",
        sender: "rex",
        content: "sure",
        reply_to: Some(("ana", User)),
        ..M
    },
    // ---- never yourself (§4) -----------------------------------------------
    Case {
        name: "self: agent mentioning itself",
        sender: "rex",
        content: "@Rex note to self",
        mentions: &["rex"],
        ..M
    },
    Case {
        name: "self: OPEN, agent mentions itself and another",
        policy: Open,
        sender: "rex",
        content: "@Rex @Zoë",
        mentions: &["rex", "zoe"],
        respondents: &["zoe"],
        ..M
    },
    Case {
        name: "self: DM agent mentioning itself",
        roster: R::Dm1,
        conv: Dm,
        sender: "rex",
        content: "@Rex",
        mentions: &["rex"],
        ..M
    },
    Case {
        name: "self: human reply to its own agent message by that agent",
        sender: "rex",
        content: "follow-up",
        reply_to: Some(("rex", Agent)),
        ..M
    },
    // ---- direct conversations (§3) -----------------------------------------
    Case {
        name: "direct: DM human message, every agent",
        roster: R::Dm1,
        conv: Dm,
        content: "hello",
        respondents: &["rex"],
        ..M
    },
    Case {
        name: "direct: AGENT_CHAT human message",
        roster: R::Dm1,
        conv: AgentChat,
        content: "hello",
        respondents: &["rex"],
        ..M
    },
    Case {
        name: "direct: agent message triggers nobody",
        roster: R::Dm1,
        conv: Dm,
        sender: "rex",
        content: "done",
        ..M
    },
    Case {
        name: "direct: agent @mention still routes",
        roster: R::Dm2,
        conv: AgentChat,
        sender: "rex",
        content: "@Zoë check this",
        mentions: &["zoe"],
        respondents: &["zoe"],
        ..M
    },
    Case {
        name: "direct: plain name is recorded",
        roster: R::Dm1,
        conv: Dm,
        content: "Rex?",
        addressed: &["rex"],
        respondents: &["rex"],
        ..M
    },
    Case {
        name: "direct: no gating by mention",
        roster: R::Dm2,
        conv: AgentChat,
        content: "@Zoë only",
        mentions: &["zoe"],
        respondents: &["rex", "zoe"],
        ..M
    },
    Case {
        name: "direct: stored group policy is ignored",
        roster: R::Dm2,
        conv: Dm,
        policy: Dedicated,
        designated: Some("zoe"),
        content: "hi",
        respondents: &["rex", "zoe"],
        ..M
    },
    // ---- MENTIONS in a team ------------------------------------------------
    Case {
        name: "MENTIONS: unaddressed human message",
        roster: R::Team,
        content: "hello everyone",
        ..M
    },
    Case {
        name: "MENTIONS: human names an agent",
        roster: R::Team,
        content: "Claude?",
        addressed: &["claude"],
        respondents: &["claude"],
        ..M
    },
    // ---- DEDICATED -----------------------------------------------------------
    Case {
        name: "DEDICATED: unaddressed goes to the designated",
        content: "what's up, everyone",
        respondents: &["claude"],
        ..DED
    },
    Case {
        name: "DEDICATED: @mention goes only to the mentioned",
        content: "@Deploy Daemon ship it",
        mentions: &["deploy"],
        respondents: &["deploy"],
        ..DED
    },
    Case {
        name: "DEDICATED: plain name routes like a mention",
        content: "deploy daemon, ship it",
        addressed: &["deploy"],
        respondents: &["deploy"],
        ..DED
    },
    Case {
        name: "DEDICATED: @human is unaddressed",
        content: "@Bob see this",
        respondents: &["claude"],
        ..DED
    },
    Case {
        name: "DEDICATED: agent message triggers nobody",
        sender: "deploy",
        content: "finished",
        ..DED
    },
    Case {
        name: "DEDICATED: agent @mention routes",
        sender: "deploy",
        content: "@Claude finished",
        mentions: &["claude"],
        respondents: &["claude"],
        ..DED
    },
    Case {
        name: "DEDICATED: human reply to another agent",
        content: "and the changelog?",
        reply_to: Some(("docs", Agent)),
        respondents: &["docs"],
        ..DED
    },
    Case {
        name: "DEDICATED: designated not in the room",
        designated: Some("ghost"),
        content: "hi",
        ..DED
    },
    Case {
        name: "DEDICATED: designated is a human",
        designated: Some("bob"),
        content: "hi",
        ..DED
    },
    Case {
        name: "DEDICATED: two mentions, roster order",
        content: "@Claude and @Doc Writer",
        mentions: &["claude", "docs"],
        respondents: &["docs", "claude"],
        ..DED
    },
    Case {
        name: "DEDICATED: designated sends, agent messages need a mention",
        sender: "claude",
        content: "here you go",
        ..DED
    },
    // ---- ORCHESTRATOR ----------------------------------------------------------
    Case {
        name: "ORCHESTRATOR: unaddressed goes to the orchestrator",
        content: "status?",
        respondents: &["orch"],
        ..ORC
    },
    Case {
        name: "ORCHESTRATOR: plain name goes to the orchestrator, name kept as hint",
        content: "Claude, summarise",
        addressed: &["claude"],
        respondents: &["orch"],
        ..ORC
    },
    Case {
        name: "ORCHESTRATOR: @mention of a specialist",
        content: "@Claude summarise",
        mentions: &["claude"],
        respondents: &["claude"],
        ..ORC
    },
    Case {
        name: "ORCHESTRATOR: mention both",
        content: "@Conductor and @Claude",
        mentions: &["orch", "claude"],
        respondents: &["orch", "claude"],
        ..ORC
    },
    Case {
        name: "ORCHESTRATOR: human reply to a specialist",
        content: "roll it back",
        reply_to: Some(("deploy", Agent)),
        respondents: &["deploy"],
        ..ORC
    },
    // §4 table, ORCHESTRATOR: a human writing an agent's name "routes to
    // the orchestrator, exactly as an unaddressed message does"; the reply
    // still addresses its agent (§11: "as strongly as an @mention").
    Case {
        name: "ORCHESTRATOR: reply plus plain name",
        content: "Claude too",
        reply_to: Some(("deploy", Agent)),
        addressed: &["claude"],
        respondents: &["orch", "deploy"],
        ..ORC
    },
    // §4: "A structured @mention is unaffected in every policy"; the plain
    // name beside it still routes to the orchestrator (§4 table).
    Case {
        name: "ORCHESTRATOR: mention plus plain name",
        content: "@Deploy Daemon ship it, Claude can check",
        mentions: &["deploy"],
        addressed: &["claude"],
        respondents: &["orch", "deploy"],
        ..ORC
    },
    Case {
        name: "ORCHESTRATOR: orchestrator delegates",
        sender: "orch",
        content: "@Deploy Daemon please ship",
        mentions: &["deploy"],
        respondents: &["deploy"],
        ..ORC
    },
    Case {
        name: "ORCHESTRATOR: specialist names orchestrator, no @",
        sender: "deploy",
        content: "done, Conductor",
        ..ORC
    },
    Case {
        name: "ORCHESTRATOR: specialist hands back",
        sender: "deploy",
        content: "@Conductor done",
        mentions: &["orch"],
        respondents: &["orch"],
        ..ORC
    },
    Case {
        name: "ORCHESTRATOR: orchestrator missing works like MENTIONS",
        designated: Some("ghost"),
        content: "status?",
        ..ORC
    },
    Case {
        name: "ORCHESTRATOR: naming the orchestrator",
        content: "conductor?",
        addressed: &["orch"],
        respondents: &["orch"],
        ..ORC
    },
    Case {
        name: "ORCHESTRATOR: reply to the orchestrator",
        sender: "bob",
        content: "ok",
        reply_to: Some(("orch", Agent)),
        respondents: &["orch"],
        ..ORC
    },
    Case {
        name: "ORCHESTRATOR: @human only is unaddressed",
        content: "@Bob look",
        respondents: &["orch"],
        ..ORC
    },
    // ---- ROUTER ----------------------------------------------------------------
    // §4 ("An automatic router picks which agent(s) answer each human
    // message; if it picks no one, a fallback agent answers") defines no
    // scoring: these cases follow the rule documented in docs/routing.md
    // (keyword overlap of name and description, highest score wins, ties pick
    // all), whose general properties `router_*` below check on random rosters.
    Case {
        name: "ROUTER: picks by description",
        content: "please roll back the production release",
        respondents: &["deploy"],
        picks: &["deploy"],
        ..ROU
    },
    Case {
        name: "ROUTER: picks the best score",
        content: "write the release notes",
        respondents: &["docs"],
        picks: &["docs"],
        ..ROU
    },
    Case {
        name: "ROUTER: no pick, fallback answers",
        content: "what's for lunch?",
        respondents: &["claude"],
        ..ROU
    },
    Case {
        name: "ROUTER: tie picks all tied",
        content: "notes about production",
        respondents: &["deploy", "docs"],
        picks: &["deploy", "docs"],
        ..ROU
    },
    Case {
        name: "ROUTER: @mention bypasses the router",
        content: "@Claude hi",
        mentions: &["claude"],
        respondents: &["claude"],
        ..ROU
    },
    Case {
        name: "ROUTER: plain name bypasses the router",
        content: "deploy daemon?",
        addressed: &["deploy"],
        respondents: &["deploy"],
        ..ROU
    },
    Case {
        name: "ROUTER: agent message never routed",
        sender: "deploy",
        content: "release notes are ready",
        ..ROU
    },
    Case {
        name: "ROUTER: no pick, no fallback",
        designated: None,
        content: "what's for lunch?",
        ..ROU
    },
    Case {
        name: "ROUTER: prefix match, tie",
        content: "coordinate the reasoning",
        respondents: &["orch", "claude"],
        picks: &["orch", "claude"],
        ..ROU
    },
    Case {
        name: "ROUTER: human reply bypasses the router",
        content: "more please",
        reply_to: Some(("docs", Agent)),
        respondents: &["docs"],
        ..ROU
    },
    Case {
        name: "ROUTER: fallback can be picked",
        content: "deeper reasoning",
        respondents: &["claude"],
        picks: &["claude"],
        ..ROU
    },
    // ---- OPEN --------------------------------------------------------------------
    Case {
        name: "OPEN: every agent for a human message",
        content: "morning all",
        respondents: ALL_TEAM_AGENTS,
        ..OPN
    },
    Case {
        name: "OPEN: agent message triggers nobody",
        sender: "docs",
        content: "done",
        ..OPN
    },
    Case {
        name: "OPEN: agent @mention routes",
        sender: "docs",
        content: "@Claude check",
        mentions: &["claude"],
        respondents: &["claude"],
        ..OPN
    },
    Case {
        name: "OPEN: a human @mention does not narrow",
        content: "@Claude only you",
        mentions: &["claude"],
        respondents: ALL_TEAM_AGENTS,
        ..OPN
    },
    Case {
        name: "OPEN: human reply",
        sender: "bob",
        content: "why?",
        reply_to: Some(("docs", Agent)),
        respondents: ALL_TEAM_AGENTS,
        ..OPN
    },
];

fn ids(list: &[&str]) -> Vec<ParticipantId> {
    list.iter().map(|s| pid(s)).collect()
}

fn run(case: &Case) -> (Routing, ParticipantId) {
    let roster = roster(case.roster);
    let sender = pid(case.sender);
    let sender_kind = roster
        .iter()
        .find(|m| m.id == sender)
        .map_or(User, |m| m.kind);
    let policy = Policy {
        agent_reply_policy: case.policy,
        designated_agent_id: case.designated.map(pid),
        ..Policy::default()
    };
    let reply_id = case.reply_to.map(|(id, kind)| (pid(id), kind));
    let routing = route(&RouteInput {
        conversation_type: case.conv,
        policy: &policy,
        roster: &roster,
        sender: &sender,
        sender_kind,
        content: case.content,
        reply_to_sender: reply_id.as_ref().map(|(id, kind)| (id, *kind)),
    });
    (routing, sender)
}

#[test]
fn routing_table() {
    assert!(CASES.len() >= 60, "only {} cases", CASES.len());
    let mut failures = Vec::new();
    for case in CASES {
        let (got, sender) = run(case);
        let want = (
            ids(case.mentions),
            ids(case.addressed),
            ids(case.respondents),
            ids(case.picks),
        );
        let have = (
            got.mentions.clone(),
            got.addressed_agents.clone(),
            got.respondents.clone(),
            got.router_picks.clone(),
        );
        if want != have {
            failures.push(format!(
                "{}: content {:?}\n   want (mentions, addressed, respondents, picks) = {:?}\n   have {:?}",
                case.name, case.content, want, have
            ));
        }
        // Invariants every case must also satisfy.
        assert!(!got.suppressed, "{}: route never suppresses", case.name);
        assert!(
            !got.respondents.contains(&sender),
            "{}: sender responds",
            case.name
        );
        for r in &got.respondents {
            assert!(got.should_respond(r, &sender), "{}: {r}", case.name);
        }
        let replied = case
            .reply_to
            .filter(|(id, kind)| {
                *kind == Agent
                    && roster(case.roster)
                        .iter()
                        .any(|m| m.id.as_str() == *id && m.kind == Agent)
                    && roster(case.roster)
                        .iter()
                        .any(|m| m.id == sender && m.kind == User)
            })
            .map(|(id, _)| pid(id));
        assert_eq!(
            got.replied_to_agent, replied,
            "{}: replied_to_agent",
            case.name
        );
    }
    assert!(
        failures.is_empty(),
        "{} failing cases:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn table_case_names_are_unique() {
    let mut names: Vec<&str> = CASES.iter().map(|c| c.name).collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len());
}

// ---------------------------------------------------------------- pieces

#[test]
fn parse_mentions_agrees_with_route() {
    let roster = names_roster();
    assert_eq!(
        parse_mentions("@Zoë, @Bay Brain and @C++ Bot", &roster),
        ids(&["zoe", "brain", "cpp"])
    );
    assert_eq!(parse_mentions("", &roster), ids(&[]));
    assert_eq!(parse_mentions("@", &roster), ids(&[]));
    assert_eq!(parse_mentions("@Ana hi", &roster), ids(&[]));
}

#[test]
fn addressed_by_name_skips_mentions() {
    let roster = names_roster();
    assert_eq!(addressed_by_name("@Rex and rex", &roster), ids(&["rex"]));
    assert_eq!(addressed_by_name("@Rex only", &roster), ids(&[]));
    assert_eq!(addressed_by_name("Manuel, Ana", &roster), ids(&[]));
}

#[test]
fn distinctive_words_rules() {
    let roster = names_roster();
    assert_eq!(
        distinctive_words("Bay Brain", &roster),
        vec!["bay", "brain"]
    );
    assert_eq!(distinctive_words("C++ Bot", &roster), vec!["c++"]);
    assert_eq!(distinctive_words("R2.D2 (beta)", &roster), vec!["r2.d2"]);
    assert_eq!(distinctive_words("Müller-Bot", &roster), vec!["müller"]);
    assert_eq!(
        distinctive_words("The AI Agent", &roster),
        Vec::<String>::new()
    );
    let acme = roster_of(R::Acme);
    assert_eq!(distinctive_words("Acme Support", &acme), vec!["support"]);
    // One agent alone: nothing to share the word with.
    let solo = vec![agent("sup", "Acme Support", "x")];
    assert_eq!(
        distinctive_words("Acme Support", &solo),
        vec!["acme", "support"]
    );
}

fn roster_of(r: R) -> Vec<RosterMember> {
    roster(r)
}

#[test]
fn router_picks_excludes_the_sender() {
    let roster = team_roster();
    assert_eq!(
        router_picks("release notes", &roster, &pid("docs")),
        ids(&["deploy"])
    );
    assert_eq!(
        router_picks("release notes", &roster, &pid("ana")),
        ids(&["docs"])
    );
    assert_eq!(router_picks("", &roster, &pid("ana")), ids(&[]));
}

// ---------------------------------------------------------------- verdicts and the cap

#[test]
fn should_respond_never_for_the_sender() {
    let r = Routing {
        respondents: ids(&["rex", "zoe"]),
        ..Routing::default()
    };
    assert!(r.should_respond(&pid("zoe"), &pid("rex")));
    assert!(!r.should_respond(&pid("rex"), &pid("rex")));
    assert!(!r.should_respond(&pid("bay"), &pid("rex")));
}

#[test]
fn suppressed_silences_everyone_even_mentioned() {
    let r = Routing {
        mentions: ids(&["rex"]),
        respondents: ids(&["rex", "zoe"]),
        suppressed: true,
        ..Routing::default()
    };
    for who in ["rex", "zoe", "bay", "ana"] {
        assert!(!r.should_respond(&pid(who), &pid("brain")), "{who}");
    }
}

#[test]
fn round_cap_zero_suppresses_every_agent_message() {
    assert!(round_cap_reached(Group, Agent, 1, 0));
    assert!(!round_cap_reached(Group, User, 1, 0));
    // The store marks it, and then nobody answers the @mention.
    let mut r = route(&RouteInput {
        conversation_type: Group,
        policy: &Policy {
            max_agent_rounds: 0,
            ..Policy::default()
        },
        roster: &names_roster(),
        sender: &pid("zoe"),
        sender_kind: Agent,
        content: "@Rex please",
        reply_to_sender: None,
    });
    assert_eq!(r.respondents, ids(&["rex"]));
    r.suppressed = round_cap_reached(Group, Agent, 1, 0);
    assert!(!r.should_respond(&pid("rex"), &pid("zoe")));
}

/// docs/routing.md, "Round caps": §4's "after that many consecutive agent
/// replies … no agent auto-responds" read with the count including the
/// message at hand. Cap N lets agent messages 1..N-1 of a chain route and
/// suppresses the N-th on; caps 0 and 1 both suppress the first (after 0 or
/// after 1 agent reply, no agent-triggered reply is left). Humans and
/// direct conversations are never suppressed.
#[test]
fn round_cap_n_suppresses_from_the_nth_agent_message_and_zero_equals_one() {
    for cap in 0..=5u8 {
        for n in 1..=12u32 {
            let expected = n >= u32::from(cap.max(1));
            assert_eq!(
                round_cap_reached(Group, Agent, n, cap),
                expected,
                "cap {cap}, message {n}"
            );
            assert!(!round_cap_reached(Group, User, n, cap));
            assert!(!round_cap_reached(Dm, Agent, n, cap));
        }
    }
    for n in 1..=12 {
        assert_eq!(
            round_cap_reached(Group, Agent, n, 0),
            round_cap_reached(Group, Agent, n, 1)
        );
    }
}

#[test]
fn round_cap_five_suppresses_from_the_fifth_agent_message() {
    for n in 1..=4 {
        assert!(!round_cap_reached(Group, Agent, n, 5), "{n}");
    }
    assert!(round_cap_reached(Group, Agent, 5, 5));
    assert!(round_cap_reached(Group, Agent, 6, 5));
    // Clamped to the protocol's 0-5.
    assert!(round_cap_reached(Group, Agent, 5, 9));
    // Default cap 2.
    assert!(!round_cap_reached(Group, Agent, 1, 2));
    assert!(round_cap_reached(Group, Agent, 2, 2));
}

#[test]
fn round_cap_never_applies_to_direct_or_humans() {
    assert!(!round_cap_reached(Dm, Agent, 50, 0));
    assert!(!round_cap_reached(AgentChat, Agent, 50, 0));
    assert!(!round_cap_reached(Group, User, 50, 0));
}

#[test]
fn stored_routing_json_is_stable_and_backward_compatible() {
    let old = r#"{"mentions":["rex"],"respondents":["rex"]}"#;
    let r: Routing = serde_json::from_str(old).unwrap();
    assert_eq!(r.mentions, ids(&["rex"]));
    assert!(r.addressed_agents.is_empty() && r.router_picks.is_empty());
    assert_eq!(r.replied_to_agent, None);
    assert!(!r.suppressed);
    let empty: Routing = serde_json::from_str("{}").unwrap();
    assert_eq!(empty, Routing::default());
    let full = Routing {
        mentions: ids(&["a"]),
        addressed_agents: ids(&["b"]),
        respondents: ids(&["a", "b"]),
        suppressed: true,
        router_picks: ids(&["c"]),
        replied_to_agent: Some(pid("b")),
    };
    let json = serde_json::to_value(&full).unwrap();
    assert_eq!(json["addressedAgents"], serde_json::json!(["b"]));
    assert_eq!(json["routerPicks"], serde_json::json!(["c"]));
    assert_eq!(json["repliedToAgent"], serde_json::json!("b"));
    assert_eq!(serde_json::from_value::<Routing>(json).unwrap(), full);
}

#[test]
fn verdict_survives_roster_and_policy_changes() {
    // Routed under DEDICATED; the stored Routing alone decides later.
    let case = CASES
        .iter()
        .find(|c| c.name == "DEDICATED: unaddressed goes to the designated")
        .unwrap();
    let (r, sender) = run(case);
    let stored = serde_json::to_string(&r).unwrap();
    let replayed: Routing = serde_json::from_str(&stored).unwrap();
    assert!(replayed.should_respond(&pid("claude"), &sender));
    assert!(!replayed.should_respond(&pid("docs"), &sender));
}

// ---------------------------------------------------------------- policy_view

fn policy(p: ReplyPolicy, designated: Option<&str>) -> Policy {
    Policy {
        agent_reply_policy: p,
        designated_agent_id: designated.map(pid),
        ..Policy::default()
    }
}

#[test]
fn policy_view_direct() {
    for conv in [Dm, AgentChat] {
        let v = policy_view(conv, &policy(Dedicated, Some("rex")));
        assert!(!v.policy_applies);
        assert_eq!(v.effective_rule, "EVERY_USER_MESSAGE");
        assert_eq!(v.designated_agent_id, None);
    }
}

#[test]
fn policy_view_group_rules() {
    let table: &[(ReplyPolicy, Option<&str>, &str, Option<&str>)] = &[
        (Mentions, None, "MENTIONS_ONLY", None),
        (Mentions, Some("rex"), "MENTIONS_ONLY", None),
        (Dedicated, Some("rex"), "DEDICATED_AGENT", Some("rex")),
        (Dedicated, None, "MENTIONS_ONLY", None),
        (
            Orchestrator,
            Some("rex"),
            "ORCHESTRATOR_DELEGATES",
            Some("rex"),
        ),
        (Orchestrator, None, "MENTIONS_ONLY", None),
        (Router, Some("rex"), "ROUTER_WITH_FALLBACK", Some("rex")),
        (Router, None, "ROUTER_NO_FALLBACK", None),
        (Open, Some("rex"), "OPEN_ALL_AGENTS", None),
    ];
    for (p, d, rule, shown) in table {
        let v = policy_view(Group, &policy(*p, *d));
        assert!(v.policy_applies);
        assert_eq!(v.agent_reply_policy, *p);
        assert_eq!(v.effective_rule, *rule, "{p:?} {d:?}");
        assert_eq!(v.designated_agent_id, shown.map(pid), "{p:?} {d:?}");
    }
    assert_eq!(effective_rule::DEDICATED_AGENT, "DEDICATED_AGENT");
    let capped = Policy {
        max_agent_rounds: 9,
        ..Policy::default()
    };
    assert_eq!(policy_view(Group, &capped).max_agent_rounds, 5);
}

#[test]
fn orchestrator_and_delegator_flags() {
    let orc = policy(Orchestrator, Some("orch"));
    let ded = policy(Dedicated, Some("claude"));
    assert!(is_orchestrator(Group, &orc, &pid("orch")));
    assert!(!is_orchestrator(Dm, &orc, &pid("orch")));
    assert!(!is_orchestrator(Group, &ded, &pid("claude")));
    assert!(is_delegator(Group, &orc, &pid("orch")));
    assert!(is_delegator(Group, &ded, &pid("claude")));
    assert!(!is_delegator(Group, &ded, &pid("docs")));
    assert!(!is_delegator(
        Group,
        &policy(Router, Some("claude")),
        &pid("claude")
    ));
}

// ---------------------------------------------------------------- instructions

fn conv(kind: ConversationType, title: Option<&str>) -> ConversationRef {
    ConversationRef {
        id: ConversationId::from("c1"),
        kind,
        title: title.map(str::to_owned),
    }
}

fn team_text(reader: &str, p: &Policy) -> String {
    instructions(
        &pid(reader),
        &conv(Group, Some("Release Room")),
        p,
        &team_roster(),
    )
}

/// Byte offset of `needle`, failing loudly.
fn at(text: &str, needle: &str) -> usize {
    text.find(needle)
        .unwrap_or_else(|| panic!("{needle:?} not in:\n{text}"))
}

#[test]
fn instructions_parts_in_protocol_order() {
    let p = Policy {
        rules: Some("Be kind.".into()),
        ..policy(Orchestrator, Some("orch"))
    };
    let t = team_text("orch", &p);
    let order = [
        "You are \"Conductor\", an agent in the \"Release Room\" group chat.",
        "Participants:",
        "You are this room's orchestrator.",
        "Reply policy: ORCHESTRATOR.",
        "Agents you can call:",
        "Guardrail:",
        "Round cap: 2.",
        "Group rules from this Bay, verbatim:\nBe kind.",
    ];
    assert!(t.starts_with(order[0]), "{t}");
    let positions: Vec<usize> = order.iter().map(|n| at(&t, n)).collect();
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "{positions:?}\n{t}"
    );
    assert!(t.ends_with("Be kind."));
}

#[test]
fn instructions_custom_rules_verbatim() {
    let rules = "  No emojis.\n\n* Keep it *short* — {really}. @Claude is $pecial\n";
    let p = Policy {
        rules: Some(rules.into()),
        ..policy(Mentions, None)
    };
    let t = team_text("docs", &p);
    assert!(
        t.ends_with(&format!("Group rules from this Bay, verbatim:\n{rules}")),
        "{t}"
    );
    // Blank rules and absent rules add nothing.
    for r in [None, Some("   ".to_owned())] {
        let p = Policy {
            rules: r,
            ..policy(Mentions, None)
        };
        assert!(!team_text("docs", &p).contains("Group rules"));
    }
}

#[test]
fn instructions_roster_tags_the_orchestrator_and_the_reader() {
    let t = team_text("docs", &policy(Orchestrator, Some("orch")));
    let lines: Vec<&str> = t.lines().filter(|l| l.starts_with("- ")).collect();
    assert_eq!(
        lines,
        vec![
            "- \"Ana\" (person, admin)",
            "- \"Bob\" (person, member)",
            "- \"Conductor\" (agent, member) [orchestrator] — for: Coordinates the team",
            "- \"Deploy Daemon\" (agent, member) — for: Ships releases to production and rolls back deployments",
            "- \"Doc Writer\" (agent, member) (you) — for: Writes documentation and release notes",
            "- \"Claude\" (agent, member) — for: General purpose reasoning",
        ]
    );
    assert!(t.contains("The orchestrator is \"Conductor\"."));
    assert_eq!(t.matches("[orchestrator]").count(), 1);
}

#[test]
fn instructions_no_orchestrator_tag_outside_orchestrator_policy() {
    for p in [
        policy(Dedicated, Some("claude")),
        policy(Mentions, Some("orch")),
        policy(Orchestrator, Some("ghost")),
    ] {
        let t = team_text("docs", &p);
        assert!(!t.contains("[orchestrator]"), "{t}");
        assert!(t.contains("This room has no orchestrator."), "{t}");
    }
}

#[test]
fn instructions_callable_agents_only_for_delegators() {
    let orc = policy(Orchestrator, Some("orch"));
    let ded = policy(Dedicated, Some("claude"));
    let t = team_text("orch", &orc);
    assert!(t.contains(
        "Agents you can call: @Deploy Daemon (Ships releases to production and rolls back deployments), \
         @Doc Writer (Writes documentation and release notes), @Claude (General purpose reasoning)."
    ), "{t}");
    assert!(!t.contains("@Conductor"), "never lists itself: {t}");
    let t = team_text("claude", &ded);
    assert!(
        t.contains("Agents you can call: @Conductor (Coordinates the team), @Deploy Daemon"),
        "{t}"
    );
    assert!(!t.contains("@Claude ("));
    // Everyone else: no list.
    for (reader, p) in [
        ("docs", &orc),
        ("docs", &ded),
        ("ana", &orc),
        ("ana", &ded),
        ("claude", &policy(Router, Some("claude"))),
        ("claude", &policy(Open, None)),
        ("claude", &policy(Mentions, Some("claude"))),
    ] {
        assert!(
            !team_text(reader, p).contains("Agents you can call"),
            "{reader} {p:?}"
        );
    }
}

#[test]
fn instructions_policy_differs_for_designated_and_others() {
    let ded = policy(Dedicated, Some("claude"));
    assert!(team_text("claude", &ded).contains("You are the designated agent"));
    assert!(team_text("docs", &ded)
        .contains("\"Claude\" answers messages from people that address no particular agent"));
    let orc = policy(Orchestrator, Some("orch"));
    assert!(team_text("orch", &orc).contains("metadata.addressedAgents"));
    let specialist = team_text("deploy", &orc);
    assert!(specialist.contains("You are a specialist"));
    assert!(specialist.contains("Being named without \"@\" does not authorize you to reply"));
    let rou = policy(Router, Some("claude"));
    assert!(team_text("claude", &rou).contains("you answer as the fallback agent"));
    assert!(team_text("docs", &rou).contains("\"Claude\" answers as the fallback"));
    assert!(team_text("docs", &policy(Router, None)).contains("no agent answers"));
    assert!(team_text("docs", &policy(Open, None)).contains("permission, not obligation"));
    assert!(
        team_text("docs", &policy(Mentions, None)).contains("Reply policy: MENTIONS. Answer only")
    );
    assert!(team_text("docs", &policy(Dedicated, None))
        .contains("Reply policy: DEDICATED, but its designated agent is not in this room"));
}

#[test]
fn instructions_round_cap_is_live() {
    for (cap, needle) in [
        (
            0,
            "Round cap: 0. A message from an agent never triggers another agent",
        ),
        (1, "Round cap: 1. After 1 agent message"),
        (5, "Round cap: 5. After 5 consecutive agent messages"),
    ] {
        let p = Policy {
            max_agent_rounds: cap,
            ..policy(Mentions, None)
        };
        assert!(team_text("docs", &p).contains(needle), "{cap}");
    }
}

#[test]
fn instructions_direct_conversation() {
    let p = Policy {
        rules: Some("Group-only rule".into()),
        max_agent_rounds: 0,
        ..policy(Orchestrator, Some("rex"))
    };
    let r = roster(R::Dm1);
    let t = instructions(&pid("rex"), &conv(Dm, None), &p, &r);
    assert!(
        t.starts_with("You are \"Rex\", an agent in a direct message."),
        "{t}"
    );
    for needle in [
        "There is no orchestrator in a direct conversation.",
        "no reply policy, no round cap and no @mention gating",
        "every agent answers every human message",
        "There is no round cap in a direct conversation.",
    ] {
        assert!(t.contains(needle), "{needle}\n{t}");
    }
    for absent in [
        "Reply policy:",
        "Round cap:",
        "Agents you can call",
        "[orchestrator]",
        "Group-only rule",
    ] {
        assert!(!t.contains(absent), "{absent}\n{t}");
    }
    let t = instructions(&pid("ana"), &conv(AgentChat, Some("Ana + Rex")), &p, &r);
    assert!(
        t.starts_with("You are \"Ana\", a person in the \"Ana + Rex\" agent chat."),
        "{t}"
    );
    assert!(t.contains("every agent answers every human message, including each one you send"));
}

#[test]
fn instructions_for_a_human_reader() {
    let t = team_text("ana", &policy(Orchestrator, Some("orch")));
    assert!(t.starts_with("You are \"Ana\", a person in the \"Release Room\" group chat."));
    assert!(t.contains("\"Conductor\" answers your messages"));
    assert!(t.contains("- \"Ana\" (person, admin) (you)"));
    assert!(
        !t.contains("you should respond"),
        "agent guardrail shown to a person: {t}"
    );
    let t = team_text("bob", &policy(Router, Some("claude")));
    assert!(t.contains("when it picks no one, \"Claude\" answers"));
}

#[test]
fn instructions_untitled_and_unknown_reader() {
    let t = instructions(
        &pid("docs"),
        &conv(Group, None),
        &Policy::default(),
        &team_roster(),
    );
    assert!(t.starts_with("You are \"Doc Writer\", an agent in an untitled group chat."));
    let t = instructions(
        &pid("ghost"),
        &conv(Group, Some("X")),
        &Policy::default(),
        &team_roster(),
    );
    assert!(t.starts_with("You (participant ghost) are not on the roster of the \"X\" group chat"));
}

#[test]
fn instructions_are_deterministic_and_never_describe_users() {
    let mut r = team_roster();
    r[0].description = Some("secret phone 555".into());
    let p = policy(Dedicated, Some("claude"));
    let a = instructions(&pid("claude"), &conv(Group, Some("T")), &p, &r);
    let b = instructions(&pid("claude"), &conv(Group, Some("T")), &p, &r);
    assert_eq!(a, b);
    assert!(!a.contains("555"));
}

// ---------------------------------------------------------------- properties

const NAME_POOL: &[&str] = &[
    "Rex",
    "Rexford",
    "Bay",
    "Bay Brain",
    "C++ Bot",
    "R2.D2 (beta)",
    "Zoë",
    "Müller-Bot",
    "Ana",
    "Echo",
    "echo",
    "Claude Code",
    "Claude",
    "",
];

fn arb_roster() -> impl Strategy<Value = Vec<RosterMember>> {
    prop::collection::vec(
        (
            0..NAME_POOL.len(),
            any::<bool>(),
            prop::option::of("[a-z ]{0,20}"),
        ),
        0..7,
    )
    .prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, (n, is_agent, desc))| RosterMember {
                id: pid(&format!("p{i}")),
                name: NAME_POOL[n].into(),
                kind: if is_agent { Agent } else { User },
                role: Role::Member,
                description: desc,
            })
            .collect()
    })
}

fn arb_content() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("@".to_owned()),
        Just(" ".to_owned()),
        Just("'s".to_owned()),
        Just("-".to_owned()),
        Just(".".to_owned()),
        Just("İ".to_owned()),
        prop::sample::select(NAME_POOL).prop_map(str::to_owned),
        "[a-zA-Z0-9ëü+()@.,!? \n]{0,6}",
        any::<String>(),
    ];
    prop::collection::vec(piece, 0..10).prop_map(|v| v.concat())
}

/// Content whose upper- and lower-case forms have the same word boundaries
/// (arbitrary Unicode does not: some characters change length or class).
fn arb_ascii_content() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        prop::sample::select(NAME_POOL).prop_map(str::to_owned),
        "[a-zA-Z0-9ëüËÜ+()@.,'!? \n-]{0,6}",
    ];
    prop::collection::vec(piece, 0..10).prop_map(|v| v.concat())
}

fn arb_policy() -> impl Strategy<Value = (ConversationType, Policy)> {
    (
        prop::sample::select(vec![Dm, AgentChat, Group]),
        prop::sample::select(vec![Mentions, Dedicated, Orchestrator, Router, Open]),
        prop::option::of(0usize..8),
        0u8..=5,
    )
        .prop_map(|(c, p, d, cap)| {
            (
                c,
                Policy {
                    agent_reply_policy: p,
                    designated_agent_id: d.map(|i| pid(&format!("p{i}"))),
                    max_agent_rounds: cap,
                    rules: None,
                },
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn sender_never_responds_and_suppression_silences_all(
        roster in arb_roster(),
        content in arb_content(),
        (conv_type, policy) in arb_policy(),
        sender_idx in 0usize..8,
        sender_is_agent in any::<bool>(),
        reply in prop::option::of((0usize..8, any::<bool>())),
    ) {
        let sender = pid(&format!("p{sender_idx}"));
        let sender_kind = roster
            .iter()
            .find(|m| m.id == sender)
            .map_or(if sender_is_agent { Agent } else { User }, |m| m.kind);
        let reply_ids = reply.map(|(i, a)| (pid(&format!("p{i}")), if a { Agent } else { User }));
        let routing = route(&RouteInput {
            conversation_type: conv_type,
            policy: &policy,
            roster: &roster,
            sender: &sender,
            sender_kind,
            content: &content,
            reply_to_sender: reply_ids.as_ref().map(|(id, k)| (id, *k)),
        });
        prop_assert!(!routing.respondents.contains(&sender));
        prop_assert!(!routing.should_respond(&sender, &sender));
        let agents: Vec<&ParticipantId> =
            roster.iter().filter(|m| m.kind == Agent).map(|m| &m.id).collect();
        for list in [&routing.mentions, &routing.addressed_agents, &routing.respondents, &routing.router_picks] {
            for id in list.iter() {
                prop_assert!(agents.contains(&id), "{} is not an agent", id);
            }
            let mut d = list.clone();
            d.sort();
            d.dedup();
            prop_assert_eq!(d.len(), list.len());
        }
        if sender_kind == Agent {
            prop_assert!(routing.addressed_agents.is_empty());
            prop_assert!(routing.router_picks.is_empty());
        }
        let suppressed = Routing { suppressed: true, ..routing.clone() };
        for m in &roster {
            prop_assert!(!suppressed.should_respond(&m.id, &sender));
        }
        // Instructions never panic on arbitrary rosters and readers.
        let conversation = ConversationRef { id: ConversationId::from("c"), kind: conv_type, title: None };
        let _ = instructions(&sender, &conversation, &policy, &roster);
    }

    #[test]
    fn mentions_are_case_insensitive(content in arb_ascii_content(), roster in arb_roster()) {
        prop_assert_eq!(
            parse_mentions(&content.to_uppercase(), &roster),
            parse_mentions(&content.to_lowercase(), &roster)
        );
    }
}

// ---------------------------------------------------------------- ROUTER properties (docs/routing.md)

/// Topic words with no prefix relation between them, so each hits only itself.
const TOPICS: &[&str] = &[
    "deploy", "billing", "travel", "compiler", "security", "database", "network", "design",
    "kernel", "garden", "music", "weather",
];
/// Words that never count (stop-words and filler).
const FILLER: &[&str] = &[
    "the", "please", "need", "question", "and", "can", "you", "help",
];
const NAMES: &[&str] = &["Ava", "Bix", "Cyd", "Dex", "Eli"];

/// 2–5 agents named from [`NAMES`], each described by 1–4 [`TOPICS`], and
/// a human sender.
fn router_roster() -> impl Strategy<Value = Vec<RosterMember>> {
    proptest::collection::vec(proptest::collection::vec(0..TOPICS.len(), 1..5), 2..6).prop_map(
        |descs| {
            let mut r = vec![user("ana", "Ana", Role::Admin)];
            for (i, d) in descs.iter().enumerate() {
                let words: Vec<&str> = d.iter().map(|&t| TOPICS[t]).collect();
                r.push(agent(&format!("a{i}"), NAMES[i], &words.join(" ")));
            }
            r
        },
    )
}

/// A message of topic and filler words.
fn router_message() -> impl Strategy<Value = Vec<&'static str>> {
    proptest::collection::vec(
        prop_oneof![
            proptest::sample::select(TOPICS),
            proptest::sample::select(FILLER)
        ],
        0..7,
    )
}

/// The distinct words of `m`'s description.
fn description_words(m: &RosterMember) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for w in m.description.as_deref().unwrap_or("").split(' ') {
        if !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Picks are agents of the roster other than the sender, in roster
    /// order, without duplicates.
    #[test]
    fn router_picks_only_other_agents_in_roster_order(
        roster in router_roster(),
        words in router_message(),
        sender in 0usize..3,
    ) {
        let sender = roster[sender].id.clone();
        let picks = router_picks(&words.join(" "), &roster, &sender);
        let agents_in_order: Vec<ParticipantId> = roster
            .iter()
            .filter(|m| m.kind == Agent && m.id != sender)
            .map(|m| m.id.clone())
            .filter(|id| picks.contains(id))
            .collect();
        prop_assert_eq!(picks, agents_in_order);
    }

    /// Neither case nor word order nor repeating a word changes the picks.
    #[test]
    fn router_ignores_case_order_and_repetition(
        roster in router_roster(),
        words in router_message(),
    ) {
        let ana = pid("ana");
        let picks = router_picks(&words.join(" "), &roster, &ana);
        let upper = words.join(" ").to_uppercase();
        prop_assert_eq!(&router_picks(&upper, &roster, &ana), &picks);
        let reversed: Vec<&str> = words.iter().rev().copied().collect();
        prop_assert_eq!(&router_picks(&reversed.join(" "), &roster, &ana), &picks);
        let doubled = format!("{} {}", words.join(" "), words.join(" "));
        prop_assert_eq!(&router_picks(&doubled, &roster, &ana), &picks);
    }

    /// A message of filler words only picks nobody (then the fallback answers).
    #[test]
    fn router_picks_nobody_without_a_keyword(
        roster in router_roster(),
        filler in proptest::collection::vec(proptest::sample::select(FILLER), 0..6),
    ) {
        prop_assert!(router_picks(&filler.join(" "), &roster, &pid("ana")).is_empty());
    }

    /// A word of exactly one agent's description, added to a message that
    /// picked nobody, picks exactly that agent.
    #[test]
    fn router_picks_the_one_agent_a_distinct_word_names(
        roster in router_roster(),
        filler in proptest::collection::vec(proptest::sample::select(FILLER), 0..4),
    ) {
        let agents: Vec<&RosterMember> = roster.iter().filter(|m| m.kind == Agent).collect();
        for a in &agents {
            for w in description_words(a) {
                let others_have = agents
                    .iter()
                    .any(|o| o.id != a.id && description_words(o).contains(&w));
                if others_have {
                    continue;
                }
                let message = format!("{} {w}", filler.join(" "));
                prop_assert_eq!(
                    router_picks(&message, &roster, &pid("ana")),
                    vec![a.id.clone()],
                    "{}", message
                );
            }
        }
    }

    /// A word every agent's description has tells nobody apart: adding it
    /// to a message never changes the picks.
    #[test]
    fn router_ignores_a_keyword_every_agent_shares(
        roster in router_roster(),
        words in router_message(),
    ) {
        let mut roster = roster;
        for m in roster.iter_mut().filter(|m| m.kind == Agent) {
            let d = m.description.take().unwrap_or_default();
            m.description = Some(format!("{d} widgets"));
        }
        let ana = pid("ana");
        let picks = router_picks(&words.join(" "), &roster, &ana);
        let with_shared = format!("{} widgets", words.join(" "));
        prop_assert_eq!(router_picks(&with_shared, &roster, &ana), picks);
    }

    /// The highest score wins and ties pick all tied: an agent whose topics
    /// the message hits more often than any other's is the only pick, and
    /// two agents with the same description are picked together.
    #[test]
    fn router_picks_the_best_score_and_every_tie(
        roster in router_roster(),
        words in router_message(),
    ) {
        let ana = pid("ana");
        let mut roster = roster;
        // A twin of the first agent: same description, another name.
        let first = roster[1].clone();
        roster.push(agent("twin", "Fay", first.description.as_deref().unwrap()));
        let picks = router_picks(&words.join(" "), &roster, &ana);
        prop_assert_eq!(picks.contains(&first.id), picks.contains(&pid("twin")));
        // Every topic of the first agent: it (and its twin) score highest.
        let all = description_words(&first).join(" ");
        let picks = router_picks(&all, &roster, &ana);
        let score = |m: &RosterMember| {
            description_words(m)
                .iter()
                .filter(|w| description_words(&first).contains(w))
                .count()
        };
        let best = roster.iter().filter(|m| m.kind == Agent).map(score).max().unwrap();
        let expected: Vec<ParticipantId> = roster
            .iter()
            .filter(|m| m.kind == Agent && score(m) == best)
            .map(|m| m.id.clone())
            .collect();
        // Words every agent shares are dropped before scoring: only check
        // when the first agent has a word some agent lacks.
        let shared_by_all = description_words(&first).iter().all(|w| {
            roster
                .iter()
                .filter(|m| m.kind == Agent)
                .all(|m| description_words(m).contains(w))
        });
        if !shared_by_all {
            prop_assert!(picks.contains(&first.id) && picks.contains(&pid("twin")), "{:?}", picks);
            prop_assert!(picks.iter().all(|p| expected.contains(p)), "{:?} vs {:?}", picks, expected);
        }
    }
}
