//! Plain-name addressing (protocol §4, "Being named counts as being
//! addressed"). The rules are documented on [`addressed_by_name`] and
//! [`distinctive_words`].

use super::mentions::{scan_mentions, MentionNames};
use super::text::{fold, is_significant, Folded};
use crate::ids::ParticipantId;
use crate::model::{ParticipantKind, RosterMember};

/// Words that never make a name word distinctive: English function words
/// and the generic words agent names are built from ("… Bot", "… Agent",
/// "… (beta)"). Compared after lower-casing. Words under 3 characters are
/// excluded by length anyway.
pub(crate) const NAME_STOP_WORDS: &[&str] = &[
    // function words
    "the",
    "and",
    "for",
    "with",
    "from",
    "into",
    "onto",
    "about",
    "that",
    "this",
    "these",
    "those",
    "you",
    "your",
    "yours",
    "our",
    "ours",
    "are",
    "was",
    "were",
    "not",
    "but",
    "all",
    "any",
    "can",
    "could",
    "will",
    "would",
    "has",
    "have",
    "had",
    "who",
    "what",
    "when",
    "where",
    "why",
    "how",
    "its",
    "his",
    "her",
    "hers",
    "him",
    "she",
    "they",
    "them",
    "one",
    "two",
    "new",
    "old",
    "out",
    "off",
    "yes",
    "hey",
    "please",
    "thanks",
    "there",
    "here",
    // generic agent-name words
    "bot",
    "bots",
    "agent",
    "agents",
    "assistant",
    "assist",
    "helper",
    "help",
    "team",
    "group",
    "chat",
    "beta",
    "alpha",
    "preview",
    "test",
    "mini",
    "lite",
    "pro",
    "plus",
];

/// Splits a name into its words: on whitespace, `-`, `_` and `/`, then trims
/// leading non-word characters and trailing ones other than `+` and `#`
/// (so `(beta)` → `beta`, while `C++` and `C#` keep their symbols). `.` is
/// kept inside a word: `R2.D2` is one word. Returned folded (lower-cased).
fn name_words(name: &str) -> Vec<String> {
    let folded: String = fold(name).into_iter().collect();
    let mut out: Vec<String> = Vec::new();
    for raw in folded.split([' ', '-', '_', '/']) {
        let w = raw
            .trim_start_matches(|c: char| !super::text::is_word_char(c))
            .trim_end_matches(|c: char| !super::text::is_word_char(c) && c != '+' && c != '#');
        if !w.is_empty() && !out.iter().any(|o| o == w) {
            out.push(w.to_owned());
        }
    }
    out
}

/// The distinctive words of an agent's name in a room (protocol §4 lets a
/// human address an agent by "a whole name or any distinctive word of it").
///
/// A word of the name (see below for how a name is split) is distinctive
/// when **all** of these hold:
///
/// 1. it is at least **3 characters** long and contains a letter
///    (`R2`, `AI`, `42` never are);
/// 2. it is not a **stop-word**: an English function word (`the`, `and`,
///    `you`, …) or a generic agent-name word (`bot`, `agent`, `assistant`,
///    `helper`, `team`, `beta`, `pro`, …);
/// 3. it is **not carried by every agent** of a room that has two or more
///    agents. A word all agents share (typically the Bay's brand prefix:
///    "Acme Support", "Acme Sales") cannot tell them apart and mostly shows
///    up in ordinary prose ("the Acme invoice"). Address such agents by a
///    whole name or an `@mention`. A word shared by *some* agents stays
///    distinctive and addresses all of them (§4: "ALL of them are
///    addressed").
///
/// Splitting: on whitespace, `-`, `_` and `/`; leading punctuation and
/// trailing punctuation other than `+`/`#` is trimmed, `.` inside a word is
/// kept. So "Müller-Bot" → `müller` (`bot` is a stop-word), "C++ Bot" →
/// `c++`, "R2.D2 (beta)" → `r2.d2`, "Bay Brain" → `bay`, `brain`.
///
/// Returns folded (lower-cased) words, in name order. `roster` is the
/// conversation's roster (humans are ignored).
pub fn distinctive_words(agent_name: &str, roster: &[RosterMember]) -> Vec<String> {
    let all: Vec<Vec<String>> = roster
        .iter()
        .filter(|m| m.kind == ParticipantKind::Agent && !fold(&m.name).is_empty())
        .map(|m| name_words(&m.name))
        .collect();
    distinctive_in(&name_words(agent_name), &shared_by_all(&all))
}

/// The words every agent carries (rule 3), when there are two or more
/// agents; none otherwise. One pass over the agents, so a room's
/// distinctive words cost time linear in its agents, not quadratic.
fn shared_by_all(all_agents: &[Vec<String>]) -> Vec<&str> {
    let [first, rest @ ..] = all_agents else {
        return Vec::new();
    };
    if rest.is_empty() {
        return Vec::new();
    }
    let mut shared: Vec<&str> = first.iter().map(String::as_str).collect();
    for words in rest {
        shared.retain(|s| words.iter().any(|w| w == s));
        if shared.is_empty() {
            break;
        }
    }
    shared
}

/// The words of `words` that pass rules 1 and 2 and are not in `shared`
/// (rule 3, from [`shared_by_all`]).
fn distinctive_in(words: &[String], shared: &[&str]) -> Vec<String> {
    words
        .iter()
        .filter(|w| is_significant(w, NAME_STOP_WORDS))
        .filter(|w| !shared.contains(&w.as_str()))
        .cloned()
        .collect()
}

/// Whether an agent's whole name can address it without `@`: always for a
/// multi-word name; for a one-word name, under the length/letter/stop-word
/// tests of a distinctive word (so an agent named "Bot" or "AI" is not
/// addressed by every "the bot" / "AI" in prose). The "shared by every
/// agent" test does not apply to whole names.
fn whole_name_addresses(folded_name: &[char]) -> bool {
    if folded_name.contains(&' ') {
        return true;
    }
    let s: String = folded_name.iter().collect();
    is_significant(&s, NAME_STOP_WORDS)
}

/// The agent names of a roster, folded and split once: what scanning a
/// message for `@mentions` and plain names needs. Building it costs time
/// linear in the roster's agents; a conversation that routes many posts
/// under one roster builds it once and passes it to
/// [`super::route_with_names`].
#[derive(Clone, Debug, Default)]
pub struct NameIndex {
    /// Every agent's folded whole name, for `@mentions`.
    pub(crate) mentions: MentionNames,
    /// The phrases that address an agent without `@`, in roster order.
    phrases: Vec<Phrase>,
}

#[derive(Clone, Debug)]
struct Phrase {
    chars: Vec<char>,
    member: ParticipantId,
    whole: bool,
}

impl NameIndex {
    /// The index of `roster`'s agents (humans are ignored).
    pub fn new(roster: &[RosterMember]) -> Self {
        // Each agent with its folded name, folded once.
        let agents: Vec<(&RosterMember, Vec<char>)> = roster
            .iter()
            .filter(|m| m.kind == ParticipantKind::Agent)
            .map(|m| (m, fold(&m.name)))
            .filter(|(_, whole)| !whole.is_empty())
            .collect();
        let all_words: Vec<Vec<String>> = agents.iter().map(|(m, _)| name_words(&m.name)).collect();
        let shared = shared_by_all(&all_words);
        let mut phrases: Vec<Phrase> = Vec::new();
        for ((member, whole), words) in agents.iter().zip(&all_words) {
            if whole_name_addresses(whole) {
                phrases.push(Phrase {
                    chars: whole.clone(),
                    member: member.id.clone(),
                    whole: true,
                });
            }
            for w in distinctive_in(words, &shared) {
                let chars: Vec<char> = w.chars().collect();
                if chars != *whole {
                    phrases.push(Phrase {
                        chars,
                        member: member.id.clone(),
                        whole: false,
                    });
                }
            }
        }
        let mentions =
            MentionNames::from_folded(agents.into_iter().map(|(m, whole)| (whole, m.id.clone())));
        NameIndex { mentions, phrases }
    }
}

/// Scans folded text for plain names, skipping `masked` folded spans (the
/// `@mentions`).
pub(crate) fn scan_plain_names(
    text: &Folded,
    names: &NameIndex,
    masked: &[(usize, usize)],
) -> Vec<ParticipantId> {
    let phrases = &names.phrases;
    let mut found: Vec<ParticipantId> = Vec::new();
    let mut p = 0;
    'scan: while p < text.len() {
        for &(s, e) in masked {
            if s <= p && p < e {
                p = e;
                continue 'scan;
            }
        }
        if text.chars()[p] == ' ' || !text.starts_char(p) || !text.boundary_before(p) {
            p += 1;
            continue;
        }
        let first = text.chars()[p];
        let fits: Vec<&Phrase> = phrases
            .iter()
            .filter(|ph| {
                let end = p + ph.chars.len();
                ph.chars.first() == Some(&first)
                    && text.occurs_at(p, &ph.chars)
                    && text.boundary_after(end)
                    && !masked.iter().any(|&(s, e)| s < end && p < e)
            })
            .collect();
        let Some(longest) = fits.iter().map(|ph| ph.chars.len()).max() else {
            p += 1;
            continue;
        };
        let best: Vec<&&Phrase> = fits.iter().filter(|ph| ph.chars.len() == longest).collect();
        // A whole name beats the same text as a word of other names: "Bay"
        // addresses the agent "Bay", not also "Bay Brain".
        let any_whole = best.iter().any(|ph| ph.whole);
        for ph in best {
            if (ph.whole || !any_whole) && !found.contains(&ph.member) {
                found.push(ph.member.clone());
            }
        }
        p += longest;
    }
    // Ids in order of first appearance; agents hit at the same place appear
    // in roster order.
    found
}

/// Agents a **human** addresses by plain name, without `@` (protocol §4).
/// The gateway copies the result into `message.metadata.addressedAgents`.
///
/// * A phrase addresses an agent when it is the agent's **whole name**
///   (always for a multi-word name; a one-word name must pass the
///   length/letter/stop-word tests of a distinctive word, so agents named
///   "Bot" or "AI" are not addressed by every "the bot" in prose) or one of
///   its [`distinctive_words`].
/// * Matching is case-insensitive (full Unicode lower-casing) and
///   word-boundary-safe on both sides, with the same boundary rules as
///   [`super::parse_mentions`]: `rexford` is not "Rex", `t-rex` and
///   `adam@rex.com` are not "Rex", `Rex's` and `Rex,` are.
/// * At each position the **longest** fitting phrase wins ("Bay Brain, …"
///   is "Bay Brain", not also "Bay"); a **whole name beats a word** of the
///   same text ("Bay, …" is the agent "Bay" even though `bay` is also a
///   word of "Bay Brain"); a word several agents share addresses **all** of
///   them ("claude" → "Claude Code" and "Claude Desktop").
/// * Text that is an `@mention` (the `@` and the mentioned name) is skipped,
///   so `@Bay Brain` never also plain-addresses "Bay" or "Brain"; an
///   unresolved `@Word` is never a plain name either (`@` is not a left
///   boundary).
/// * Returns ids in order of first appearance, without duplicates.
///
/// This function does not check the sender: callers apply it to human
/// messages only ("an agent writing another agent's name is narrating").
pub fn addressed_by_name(content: &str, roster: &[RosterMember]) -> Vec<ParticipantId> {
    let text = Folded::new(content);
    let names = NameIndex::new(roster);
    let mentions = scan_mentions(&text, &names.mentions);
    scan_plain_names(&text, &names, &mentions.spans)
}
