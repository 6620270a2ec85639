//! The built-in deterministic router of the ROUTER policy (protocol §4:
//! "An automatic router picks which agent(s) answer each human message; if
//! it picks no one, a fallback agent answers"). The rule is documented on
//! [`router_picks`].

use super::names::NAME_STOP_WORDS;
use super::text::{is_significant, word_tokens};
use crate::ids::ParticipantId;
use crate::model::{ParticipantKind, RosterMember};

/// Words the router ignores on top of [`NAME_STOP_WORDS`]: words of requests
/// and of agent descriptions that say nothing about the topic.
const ROUTER_STOP_WORDS: &[&str] = &[
    "should",
    "does",
    "did",
    "doing",
    "done",
    "been",
    "being",
    "than",
    "then",
    "also",
    "just",
    "like",
    "need",
    "needs",
    "want",
    "wants",
    "get",
    "got",
    "gets",
    "make",
    "made",
    "makes",
    "let",
    "use",
    "uses",
    "used",
    "using",
    "know",
    "thing",
    "things",
    "some",
    "something",
    "anything",
    "everything",
    "anyone",
    "someone",
    "everyone",
    "today",
    "now",
    "hello",
    "thank",
    "okay",
    "which",
    "whom",
    "whose",
    "their",
    "theirs",
    "there",
    "very",
    "more",
    "most",
    "much",
    "many",
    "each",
    "every",
    "other",
    "only",
    "own",
    "same",
    "such",
    "too",
    "handles",
    "handle",
    "answers",
    "answer",
    "question",
    "questions",
    "helps",
    "request",
    "requests",
    "general",
    "stuff",
];

fn is_keyword(word: &str) -> bool {
    is_significant(word, NAME_STOP_WORDS) && !ROUTER_STOP_WORDS.contains(&word)
}

/// Whether a message word hits a keyword: equal, or — when both are at least
/// 4 characters — one is a prefix of the other (`deploy` ~ `deployments`,
/// `write` ~ `writes`, `rolls` ~ `roll`).
fn hits(word: &str, keyword: &str) -> bool {
    if word == keyword {
        return true;
    }
    let (wl, kl) = (word.chars().count(), keyword.chars().count());
    wl.min(kl) >= 4 && (word.starts_with(keyword) || keyword.starts_with(word))
}

fn keywords(member: &RosterMember) -> Vec<String> {
    let mut text = member.name.clone();
    if let Some(d) = &member.description {
        text.push(' ');
        text.push_str(d);
    }
    let mut out: Vec<String> = Vec::new();
    for w in word_tokens(&text) {
        if is_keyword(&w) && !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

/// The ROUTER policy's picks for an unaddressed human message. Pure and
/// deterministic; the caller decides *when* it runs (GROUP + ROUTER, human
/// sender, no `@mention`, plain name or reply addressing anyone).
///
/// The rule:
///
/// 1. **Candidates** are the roster's agents except `sender`.
/// 2. **Tokens.** Text is lower-cased and split into runs of letters, digits
///    and `_`. A token counts when it has at least 3 characters, a letter,
///    and is not a stop-word (English function words, generic agent-name
///    words such as `bot`/`agent`, and filler such as `need`, `question`,
///    `handles`).
/// 3. **Keywords** of a candidate are the counting tokens of its name and
///    its description. A keyword that **every** candidate has (when there
///    are two or more) is dropped: it cannot tell them apart.
/// 4. A message token **hits** a keyword when they are equal, or when both
///    are at least 4 characters long and one is a prefix of the other
///    (`deploy` ~ `deployments`, `roll` ~ `rolls`).
/// 5. A candidate's **score** is the number of its distinct keywords hit by
///    any message token.
/// 6. The **picks** are every candidate with the highest score, if that
///    score is at least 1 — ties pick all tied agents — in roster order. No
///    hit → no pick, and the caller falls back to the designated agent.
pub fn router_picks(
    content: &str,
    roster: &[RosterMember],
    sender: &ParticipantId,
) -> Vec<ParticipantId> {
    let candidates: Vec<&RosterMember> = roster
        .iter()
        .filter(|m| m.kind == ParticipantKind::Agent && &m.id != sender)
        .collect();
    let mut kw: Vec<Vec<String>> = candidates.iter().map(|m| keywords(m)).collect();
    if kw.len() >= 2 {
        let common: Vec<String> = kw[0]
            .iter()
            .filter(|k| kw.iter().all(|ks| ks.contains(k)))
            .cloned()
            .collect();
        for ks in &mut kw {
            ks.retain(|k| !common.contains(k));
        }
    }
    let words: Vec<String> = word_tokens(content)
        .into_iter()
        .filter(|w| is_keyword(w))
        .collect();
    let scores: Vec<usize> = kw
        .iter()
        .map(|ks| {
            ks.iter()
                .filter(|k| words.iter().any(|w| hits(w, k)))
                .count()
        })
        .collect();
    let best = scores.iter().copied().max().unwrap_or(0);
    if best == 0 {
        return Vec::new();
    }
    candidates
        .iter()
        .zip(&scores)
        .filter(|(_, &s)| s == best)
        .map(|(m, _)| m.id.clone())
        .collect()
}
