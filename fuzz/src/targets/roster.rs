//! The input format of the routing targets (`mentions`, `names`, `route`):
//! roster lines, a `---` line, then the message content.
//!
//! ```text
//! A rex Rex
//! A brain Bay Brain
//! U ana Ana
//! ---
//! @Rex can you ask Bay Brain about the launch?
//! ```
//!
//! A roster line is `<A|U> <id> <display name…>` (`A` an agent, anything
//! else a user); lines without a space are skipped; a repeated id keeps its
//! first line (ids are unique in a real roster). Without a `---` line the
//! whole input is the content and the roster is the demo Bay's plus a few
//! awkward names.

use switchboard_protocol::ids::ParticipantId;
use switchboard_protocol::model::{ParticipantKind, Role, RosterMember};

/// Most roster lines read (a GROUP is large, but the scans are quadratic).
const MAX_MEMBERS: usize = 48;

pub(crate) fn member(id: &str, name: &str, kind: ParticipantKind) -> RosterMember {
    RosterMember {
        id: ParticipantId::from(id),
        name: name.to_owned(),
        kind,
        role: Role::Member,
        description: None,
    }
}

fn default_roster() -> Vec<RosterMember> {
    use ParticipantKind::{Agent, User};
    vec![
        member("ana", "Ana", User),
        member("ben", "Ben", User),
        member("rex", "Rex", Agent),
        member("brain", "Bay Brain", Agent),
        member("scout", "Scout", Agent),
        member("bay", "Bay", Agent),
        member("cpp", "C++ Bot", Agent),
        member("r2", "R2.D2 (beta)", Agent),
        member("zoe", "Zoë", Agent),
        member("rex2", "rex", Agent),
        member("rexsmith", "Rex Smith", User),
    ]
}

/// Splits an input into (roster, content).
pub(crate) fn parse(input: &[u8]) -> (Vec<RosterMember>, String) {
    let text = String::from_utf8_lossy(input);
    let Some((head, content)) = text
        .split_once("\n---\n")
        .or_else(|| text.strip_prefix("---\n").map(|c| ("", c)))
    else {
        return (default_roster(), text.into_owned());
    };
    let mut roster: Vec<RosterMember> = Vec::new();
    for line in head.lines() {
        let Some((kind, rest)) = line.split_once(' ') else {
            continue;
        };
        let (id, name) = rest.split_once(' ').unwrap_or((rest, ""));
        let kind = if kind == "A" {
            ParticipantKind::Agent
        } else {
            ParticipantKind::User
        };
        if roster.len() < MAX_MEMBERS && !roster.iter().any(|m| m.id.as_str() == id) {
            roster.push(member(id, name, kind));
        }
    }
    (roster, content.to_owned())
}

pub(crate) fn agent_ids(roster: &[RosterMember]) -> Vec<&ParticipantId> {
    roster
        .iter()
        .filter(|m| m.kind == ParticipantKind::Agent)
        .map(|m| &m.id)
        .collect()
}

/// Panics unless `ids` are distinct agents of `roster`.
pub(crate) fn assert_agents(what: &str, ids: &[ParticipantId], roster: &[RosterMember]) {
    let agents = agent_ids(roster);
    for (i, id) in ids.iter().enumerate() {
        assert!(
            agents.contains(&id),
            "{what}: {id} is not an agent of the roster"
        );
        assert!(!ids[..i].contains(id), "{what}: {id} listed twice");
    }
}

/// `ids` as a sorted set, for order-insensitive comparisons.
pub(crate) fn set(ids: &[ParticipantId]) -> Vec<ParticipantId> {
    let mut v = ids.to_vec();
    v.sort();
    v
}

/// Common dictionary of the routing targets.
pub(crate) const DICT: &[&[u8]] = &[
    b"@",
    b"@Rex",
    b"@rex",
    b"@REX",
    b"@Bay Brain",
    b"@Bay  Brain",
    b"@Bay\nBrain",
    b"Bay Brain",
    b"Bay",
    b"Scout",
    b"C++ Bot",
    b"@C++ Bot",
    b"R2.D2 (beta)",
    "Zoë".as_bytes(),
    "@ZOË".as_bytes(),
    b"'s",
    "’s".as_bytes(),
    b"-Bot",
    b".io",
    b"adam@",
    b"x.com/@",
    b"@@",
    b"(@",
    b")",
    b",",
    b"?",
    b"!",
    b".",
    b" ",
    b"\n",
    b"\n---\n",
    b"A x ",
    b"U y ",
    b"\nA ",
    b"\nU ",
    b"deploy",
    b"deployments",
    b"release",
    b"launch",
    b"the",
    b"bot",
    b"_",
];
