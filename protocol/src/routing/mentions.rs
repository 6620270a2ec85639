//! `@Name` mention parsing (protocol §7). The rules are documented on
//! [`parse_mentions`].

use super::text::{fold, Folded};
use crate::ids::ParticipantId;
use crate::model::{ParticipantKind, RosterMember};

/// What `@mentions` resolve against: every agent's folded whole name,
/// longest first (the sort is stable: equal lengths keep roster order), so
/// the first name that fits at an `@` is the longest. Agents whose name
/// folds to nothing are left out.
#[derive(Clone, Debug, Default)]
pub(crate) struct MentionNames(Vec<(Vec<char>, ParticipantId)>);

impl MentionNames {
    /// The names of `roster`'s agents (humans are ignored).
    pub(crate) fn new(roster: &[RosterMember]) -> Self {
        Self::from_folded(
            roster
                .iter()
                .filter(|m| m.kind == ParticipantKind::Agent)
                .map(|m| (fold(&m.name), m.id.clone())),
        )
    }

    /// The names of agents already folded (each with its id, in roster
    /// order), for a caller that folds them once for other uses too.
    pub(crate) fn from_folded(agents: impl Iterator<Item = (Vec<char>, ParticipantId)>) -> Self {
        let mut by_length: Vec<(Vec<char>, ParticipantId)> =
            agents.filter(|(name, _)| !name.is_empty()).collect();
        by_length.sort_by_key(|(name, _)| std::cmp::Reverse(name.len()));
        MentionNames(by_length)
    }
}

/// The mentions found in a text: resolved ids plus the folded spans
/// (`@` included) they occupy.
pub(crate) struct MentionScan {
    pub(crate) ids: Vec<ParticipantId>,
    pub(crate) spans: Vec<(usize, usize)>,
}

/// Scans an already-folded text for mentions (rules: [`parse_mentions`])
/// with the agent names of `names`.
pub(crate) fn scan_mentions(text: &Folded, names: &MentionNames) -> MentionScan {
    let agents = &names.0;
    let chars = text.chars();
    let mut scan = MentionScan {
        ids: Vec::new(),
        spans: Vec::new(),
    };
    let mut p = 0;
    while p < text.len() {
        if chars[p] != '@' || !text.mention_can_start(p) {
            p += 1;
            continue;
        }
        let start = p + 1;
        let hit = agents.iter().find(|(name, _)| {
            text.occurs_at(start, name) && text.boundary_after(start + name.len())
        });
        let Some((name, _)) = hit else {
            p += 1;
            continue;
        };
        for (other, member) in agents {
            if other == name && !scan.ids.contains(member) {
                scan.ids.push(member.clone());
            }
        }
        let end = start + name.len();
        scan.spans.push((p, end));
        p = end;
    }
    scan
}

/// Resolves `@Name` mentions in `content` against the roster's agents
/// (protocol §7). Returns agent ids in order of first appearance, without
/// duplicates.
///
/// The rules, in the order they are applied:
///
/// * **Agents only.** Names are resolved against the conversation's *agent*
///   participants; `@` + a human's name resolves to nothing (§7: "only
///   agents are mentionable"). A human name never shadows an agent name:
///   `@Rex Smith` resolves to an agent "Rex" even if a person is called
///   "Rex Smith".
/// * **Where an `@` may open a mention.** At the start of the text, or after
///   a character that is neither a word character (letter, digit, `_`) nor
///   part of an address (`. + - % @ / \ =`). So `adam@Rex`, `a.b@Rex`,
///   `x.com/@Rex` and `@@Rex` mention nobody, while `(@Rex)`, `"@Rex"`,
///   `cc:@Rex` and `—@Rex` do.
/// * **Name matching** is literal (no pattern syntax: `C++ Bot` and
///   `R2.D2 (beta)` match only themselves), case-insensitive on full Unicode
///   (`@ZOË` is "Zoë"), and any run of whitespace in the text matches the
///   single spaces of a multi-word name (`@Bay  Brain`).
/// * **Word boundary after the name.** When the name ends in a letter or
///   digit, the next character must not be one (`@Rexford` is not "Rex"),
///   nor a `-` or `.` that glues on another word (`@Rex-Bot`, `@Rex.io` are
///   not "Rex"). Any other punctuation ends the mention: `@Rex,` `@Rex?`
///   `@Rex!` `@Rex.` `@Rex:` `(@Rex)` — and **`@Rex's` / `@Rex’s` is a
///   mention of Rex**: the possessive is how people write "@Rex's review",
///   and no agent name is harmed by it.
/// * **Longest name wins.** At each `@`, names are tried longest first and
///   the first that fits (boundary included) is taken: `@Bay Brain` is
///   "Bay Brain", never "Bay"; `@Bay Brainstorm` is "Bay" (the longer name
///   does not end on a word boundary there).
/// * **Same name, several agents.** If two agents carry the same name (up to
///   case), a mention of it resolves to all of them, in roster order.
/// * The result lists agent ids in order of first appearance, without
///   duplicates. The mentioned text (`@` through the end of the name) is not
///   considered again by plain-name addressing.
pub fn parse_mentions(content: &str, roster: &[RosterMember]) -> Vec<ParticipantId> {
    scan_mentions(&Folded::new(content), &MentionNames::new(roster)).ids
}
