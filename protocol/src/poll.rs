//! Polls (protocol v1.12): `create_poll({ conversationId, question, options,
//! allowMultiple? })` and `vote_in_poll({ pollId, optionIndexes })`.
//!
//! A poll lives inside its `card.poll` message as a [`PollState`]; readers
//! get `cardPayload` from [`PollState::card_payload`], the tally from
//! [`PollState::view`] and the plain-text `content` from
//! [`PollState::fallback_content`]. Everything here is pure: whether the
//! poll exists, is in the caller's room (`POLL_NOT_FOUND`) or is closed
//! (`POLL_CLOSED`) is the caller's to decide, before [`PollState::cast`].
//!
//! Caps this crate sets (the protocol sets only two to ten answers):
//! question 1–[`MAX_QUESTION_CHARS`] chars, each answer
//! 1–[`MAX_OPTION_CHARS`] chars, both counted after trimming.

use crate::error::ErrorCode;
use crate::ids::ParticipantId;
use crate::model::SenderType;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use unicode_normalization::UnicodeNormalization;

/// Fewest answers a poll may offer (protocol v1.12: "two to ten answers").
pub const MIN_OPTIONS: usize = 2;
/// Most answers a poll may offer (protocol v1.12).
pub const MAX_OPTIONS: usize = 10;
/// Maximum characters of a trimmed `question` (this crate's cap).
pub const MAX_QUESTION_CHARS: usize = 500;
/// Maximum characters of one trimmed answer (this crate's cap).
pub const MAX_OPTION_CHARS: usize = 200;

/// Validates `create_poll`'s `question` and `options` (protocol v1.12) and
/// returns them trimmed, answers in the order given.
///
/// Refuses with 400 `INVALID_POLL` and a lowercase message: a blank
/// question or one above [`MAX_QUESTION_CHARS`]; fewer than [`MIN_OPTIONS`]
/// or more than [`MAX_OPTIONS`] answers; a blank answer or one above
/// [`MAX_OPTION_CHARS`]; two answers that are the same word. "The same"
/// compares trimmed, case-insensitively (Unicode lowercase) and with runs of
/// whitespace collapsed, so `Yes`, ` yes ` and `YES` collide, and so do
/// every canonically equivalent spelling of them (the key is
/// NFC(lowercase(NFD(answer))), see `answer_key`). Answers are
/// named by their zero-based wire index (`options[2]`).
pub fn validate_poll(
    question: &str,
    options: &[String],
) -> Result<(String, Vec<String>), (ErrorCode, String)> {
    let refuse = |m: String| Err((ErrorCode::InvalidPoll, m));
    let question = question.trim();
    if is_blank(question) {
        return refuse("question is blank".into());
    }
    if question.chars().count() > MAX_QUESTION_CHARS {
        return refuse(format!(
            "question is longer than {MAX_QUESTION_CHARS} characters"
        ));
    }
    if options.len() < MIN_OPTIONS {
        return refuse(format!(
            "a poll needs at least {MIN_OPTIONS} answers, got {}",
            options.len()
        ));
    }
    if options.len() > MAX_OPTIONS {
        return refuse(format!(
            "a poll takes at most {MAX_OPTIONS} answers, got {}",
            options.len()
        ));
    }
    let mut trimmed = Vec::with_capacity(options.len());
    let mut seen: Vec<String> = Vec::with_capacity(options.len());
    for (i, option) in options.iter().enumerate() {
        let option = option.trim();
        if is_blank(option) {
            return refuse(format!("options[{i}] is blank"));
        }
        if option.chars().count() > MAX_OPTION_CHARS {
            return refuse(format!(
                "options[{i}] is longer than {MAX_OPTION_CHARS} characters"
            ));
        }
        let key = answer_key(option);
        if let Some(j) = seen.iter().position(|k| *k == key) {
            return refuse(format!("options[{i}] is the same answer as options[{j}]"));
        }
        seen.push(key);
        trimmed.push(option.to_owned());
    }
    Ok((question.to_owned(), trimmed))
}

/// The key under which two answers count as "the same word":
/// NFC(lowercase(NFD(answer))) with runs of whitespace collapsed to one
/// space.
///
/// Decomposing first makes the key depend only on the canonical class of
/// the answer (`é` and `e\u{301}` alike); lowercasing the decomposed form
/// then lowers every base letter whatever marks follow it, and composing
/// last gives one spelling whatever composition the lowercase mapping
/// allows: `T\u{308}` (no precomposed form) and its lowercase `ẗ`
/// (U+1E97) both key as `ẗ`. This is Unicode's canonical caseless match
/// (Unicode 15, §3.13, D145) with lowercase in place of case folding, so
/// the documented rule stays "Unicode lowercase": `ß` and `SS` remain
/// different answers.
fn answer_key(answer: &str) -> String {
    let lowered = answer.nfd().collect::<String>().to_lowercase();
    lowered
        .nfc()
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether `text` shows nothing: only whitespace and invisible format
/// characters (zero-width spaces and joiners, word joiner, BOM).
fn is_blank(text: &str) -> bool {
    text.chars().all(|c| {
        c.is_whitespace() || matches!(c, '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}')
    })
}

/// One voter's current answers, stored inside [`PollState::votes`].
/// Invariant: `options` is sorted, without duplicates, non-empty and within
/// the poll's answers (an empty ballot is removed, not stored).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ballot {
    /// Who holds these answers; at most one ballot per voter.
    pub voter: ParticipantId,
    /// `USER` or `AGENT`: agents vote like anyone else and are shown as
    /// such (protocol v1.12).
    pub voter_type: SenderType,
    /// Zero-based answer indexes, ascending.
    pub options: Vec<u8>,
    /// When the ballot last changed; a repeated identical vote keeps it.
    pub at: DateTime<Utc>,
}

/// `metadata.type` of a poll's message (protocol v1.12).
pub const POLL_CARD_TYPE: &str = "card.poll";

/// A poll as stored inside its `card.poll` message (protocol v1.12).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PollState {
    /// The poll id (`pollId` of `cardPayload`, `id` of the tally).
    pub id: String,
    /// The trimmed question.
    pub question: String,
    /// The trimmed answers; index `i` on the wire is `options[i]`.
    /// Invariant: [`MIN_OPTIONS`]..=[`MAX_OPTIONS`] entries, as
    /// [`validate_poll`] returned them.
    pub options: Vec<String>,
    /// Whether a voter may hold several answers at once.
    pub allow_multiple: bool,
    /// Who created the poll (`askedBy` of `cardPayload`).
    pub asked_by: ParticipantId,
    /// A closed poll keeps its tally but takes no votes (409 `POLL_CLOSED`).
    pub closed: bool,
    /// Current ballots, ordered by when each last changed (a changed
    /// ballot moves to the end). Invariant: one per voter, none empty.
    pub votes: Vec<Ballot>,
}

/// The tally a reader sees as a message's `poll` (protocol v1.12).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(examples(json!({
    "id": "poll_01j9zq4k3x2v7w8y9z0a1b2c3d",
    "allowMultiple": false,
    "closed": false,
    "options": [{
        "index": 0,
        "count": 1,
        "voters": [{"id": "ana", "type": "USER", "at": "2026-09-21T10:00:00.000Z"}]
    }],
    "voterCount": 1,
    "mine": [0],
    "canVote": true
})))]
pub struct PollView {
    /// The poll id; what `vote_in_poll` takes as `pollId`.
    pub id: String,
    /// Whether a voter may hold several answers.
    pub allow_multiple: bool,
    /// Whether the poll stopped taking votes.
    pub closed: bool,
    /// Answers someone holds, by ascending `index`. An answer nobody chose
    /// is absent: read it as zero (protocol v1.12).
    pub options: Vec<PollOptionView>,
    /// Distinct voters holding at least one answer, not votes: a voter
    /// with three answers of a multi-choice poll counts once.
    pub voter_count: u32,
    /// Zero-based answers the READER holds, ascending; `[]` if none.
    pub mine: Vec<u8>,
    /// Whether the reader may vote now: allowed by the caller and the
    /// poll is open.
    pub can_vote: bool,
}

/// One answer of [`PollView::options`] (protocol v1.12).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PollOptionView {
    /// Zero-based answer index (the message text numbers from one).
    pub index: u8,
    /// Voters holding this answer; always `>= 1` (zero is absent).
    pub count: u32,
    /// Who holds it, in ballot order (oldest change first). Every vote is
    /// visible to the room: there is no anonymous mode (protocol v1.12).
    pub voters: Vec<VoterView>,
}

/// `{ id, type, at }` of one voter on one answer (protocol v1.12).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct VoterView {
    /// The voter's participant id.
    pub id: ParticipantId,
    /// `type` on the wire: `USER` or `AGENT`.
    #[serde(rename = "type")]
    pub kind: SenderType,
    /// When the voter's ballot last changed: RFC 3339 UTC with milliseconds.
    #[schema(format = DateTime)]
    pub at: String,
}

impl PollState {
    /// A new open poll without votes. Pass what [`validate_poll`] returned;
    /// `new` does not validate again.
    pub fn new(
        id: impl Into<String>,
        question: String,
        options: Vec<String>,
        allow_multiple: bool,
        asked_by: ParticipantId,
    ) -> Self {
        PollState {
            id: id.into(),
            question,
            options,
            allow_multiple,
            asked_by,
            closed: false,
            votes: Vec::new(),
        }
    }

    /// Validates `vote_in_poll`'s `optionIndexes` (protocol v1.12) and
    /// returns them as an ascending set for [`PollState::cast`]; `[]` (a
    /// withdrawal) is valid. Does not look at `closed`.
    ///
    /// Refusals, checked in this order: 400 `INVALID_OPTION_INDEX` for an
    /// index that is negative or not below the number of answers, then for
    /// an index given twice (the array is a set; a duplicate is a client bug,
    /// not a vote to fold silently); then 400 `POLL_SINGLE_CHOICE` for more
    /// than one index on a poll without `allowMultiple`.
    pub fn check_vote(&self, indexes: &[i64]) -> Result<Vec<u8>, (ErrorCode, String)> {
        let n = self.options.len();
        let mut set = Vec::with_capacity(indexes.len());
        for &i in indexes {
            if i < 0 || i >= n as i64 {
                return Err((
                    ErrorCode::InvalidOptionIndex,
                    format!(
                        "option index {i} is not offered: indexes count from 0 to {}",
                        n.saturating_sub(1)
                    ),
                ));
            }
        }
        for &i in indexes {
            // In range, so below MAX_OPTIONS and fits a u8.
            let i = i as u8;
            if set.contains(&i) {
                return Err((
                    ErrorCode::InvalidOptionIndex,
                    format!("option index {i} is given twice"),
                ));
            }
            set.push(i);
        }
        if set.len() > 1 && !self.allow_multiple {
            return Err((
                ErrorCode::PollSingleChoice,
                "this poll takes one answer: send a single option index".into(),
            ));
        }
        set.sort_unstable();
        Ok(set)
    }

    /// Sets `voter`'s complete answer set (protocol v1.12) and returns
    /// whether the state changed. `indexes` should come from
    /// [`PollState::check_vote`]; it is sorted and deduplicated again here
    /// and indexes the poll does not offer are dropped, so the invariants
    /// of [`Ballot`] hold whatever is passed.
    ///
    /// - empty: withdraws the ballot (no change if there was none);
    /// - the set the voter already holds: no change, `at` is kept;
    /// - otherwise: the ballot takes the new set, `voter_type` and `at`, and
    ///   moves to the end of [`PollState::votes`].
    ///
    /// Does not look at `closed`: the caller refuses with `POLL_CLOSED` first.
    pub fn cast(
        &mut self,
        voter: ParticipantId,
        voter_type: SenderType,
        mut indexes: Vec<u8>,
        at: DateTime<Utc>,
    ) -> bool {
        indexes.retain(|&i| usize::from(i) < self.options.len());
        indexes.sort_unstable();
        indexes.dedup();
        let existing = self.votes.iter().position(|b| b.voter == voter);
        match existing {
            Some(pos) if self.votes[pos].options == indexes => false,
            None if indexes.is_empty() => false,
            _ => {
                if let Some(pos) = existing {
                    self.votes.remove(pos);
                }
                if !indexes.is_empty() {
                    self.votes.push(Ballot {
                        voter,
                        voter_type,
                        options: indexes,
                        at,
                    });
                }
                true
            }
        }
    }

    /// Closes the poll; returns whether it was open. The tally is kept.
    pub fn close(&mut self) -> bool {
        !std::mem::replace(&mut self.closed, true)
    }

    /// The tally as `reader` sees it (protocol v1.12). `can_vote` is the
    /// caller's verdict on the reader (e.g. a member of the room); the view
    /// says `canVote: false` whatever it is once the poll is closed.
    pub fn view(&self, reader: &ParticipantId, can_vote: bool) -> PollView {
        let mut options: Vec<PollOptionView> = Vec::new();
        for index in 0..self.options.len() {
            let index = index as u8;
            let voters: Vec<VoterView> = self
                .votes
                .iter()
                .filter(|b| b.options.contains(&index))
                .map(|b| VoterView {
                    id: b.voter.clone(),
                    kind: b.voter_type,
                    at: b.at.to_rfc3339_opts(SecondsFormat::Millis, true),
                })
                .collect();
            if !voters.is_empty() {
                options.push(PollOptionView {
                    index,
                    count: voters.len() as u32,
                    voters,
                });
            }
        }
        let voter_count = self
            .votes
            .iter()
            .filter(|b| !b.options.is_empty())
            .map(|b| &b.voter)
            .collect::<HashSet<_>>()
            .len() as u32;
        let mine = self
            .votes
            .iter()
            .find(|b| &b.voter == reader)
            .map(|b| b.options.clone())
            .unwrap_or_default();
        PollView {
            id: self.id.clone(),
            allow_multiple: self.allow_multiple,
            closed: self.closed,
            options,
            voter_count,
            mine,
            can_vote: can_vote && !self.closed,
        }
    }

    /// `cardPayload` of the poll's message (protocol v1.12):
    /// `{ pollId, question, options: [string], askedBy, allowMultiple }`.
    pub fn card_payload(&self) -> serde_json::Value {
        serde_json::json!({
            "pollId": self.id,
            "question": self.question,
            "options": self.options,
            "askedBy": self.asked_by,
            "allowMultiple": self.allow_multiple,
        })
    }

    /// The message's plain-text `content` (protocol v1.12): the question,
    /// then one line per answer numbered from ONE for human readers
    /// (`1. Yes`), although the wire counts from zero.
    pub fn fallback_content(&self) -> String {
        let mut out = self.question.clone();
        for (i, option) in self.options.iter().enumerate() {
            out.push_str(&format!("\n{}. {option}", i + 1));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::json;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn poll(n: usize, allow_multiple: bool) -> PollState {
        let options = (0..n).map(|i| format!("answer {i}")).collect();
        PollState::new(
            "poll_1",
            "Lunch?".into(),
            options,
            allow_multiple,
            "ana".into(),
        )
    }

    fn t(s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 9, 21, 10, 0, s).unwrap()
    }

    /// (question, options, message fragment): every `INVALID_POLL` refusal.
    #[test]
    fn validate_poll_refusals() {
        let long_q = "q".repeat(MAX_QUESTION_CHARS + 1);
        let long_o = "o".repeat(MAX_OPTION_CHARS + 1);
        let eleven: Vec<String> = (0..11).map(|i| format!("a{i}")).collect();
        #[rustfmt::skip]
        let table: Vec<(&str, Vec<String>, &str)> = vec![
            ("", strings(&["a", "b"]), "question is blank"),
            (" \t\n", strings(&["a", "b"]), "question is blank"),
            (&long_q, strings(&["a", "b"]), "question is longer"),
            ("q", strings(&[]), "at least 2"),
            ("q", strings(&["only"]), "at least 2"),
            ("q", eleven, "at most 10"),
            ("q", strings(&["a", ""]), "options[1] is blank"),
            ("q", strings(&["  ", "b"]), "options[0] is blank"),
            ("q", vec!["a".into(), long_o], "options[1] is longer"),
            ("q", strings(&["Yes", "yes"]), "options[1] is the same answer as options[0]"),
            ("q", strings(&["Yes", "No", " YES "]), "options[2] is the same answer as options[0]"),
            ("q", strings(&["Ünïcode", "ünïCODE"]), "options[1] is the same"),
            ("q", strings(&["é", "e\u{301}"]), "options[1] is the same"),
            ("q", strings(&["T\u{308}", "\u{1E97}"]), "options[1] is the same"),
            ("q", strings(&["\u{1E97}", "T\u{308}"]), "options[1] is the same"),
            ("q", strings(&["J\u{30C}", "\u{1F0}"]), "options[1] is the same"),
            ("q", strings(&["W\u{30A}", "\u{1E98}"]), "options[1] is the same"),
            ("\u{200B}", strings(&["a", "b"]), "question is blank"),
            ("q", strings(&["a", "\u{200B}\u{FEFF}"]), "options[1] is blank"),
            ("q", strings(&["new  york", "New York"]), "options[1] is the same"),
        ];
        for (question, options, fragment) in table {
            let (code, message) = validate_poll(question, &options).expect_err(fragment);
            assert_eq!(code, ErrorCode::InvalidPoll, "{options:?}");
            assert!(message.contains(fragment), "{message} !~ {fragment}");
            assert_eq!(message, message.to_lowercase());
        }
    }

    #[test]
    fn validate_poll_trims_and_accepts_caps() {
        let q = "q".repeat(MAX_QUESTION_CHARS);
        let o = "o".repeat(MAX_OPTION_CHARS);
        let ten: Vec<String> = (0..MAX_OPTIONS).map(|i| format!("a{i}")).collect();
        type Validated = (String, Vec<String>);
        let table: Vec<(&str, Vec<String>, Validated)> = vec![
            (
                "  Lunch? ",
                strings(&[" Pizza", "Sushi  ", "Yes please"]),
                ("Lunch?".into(), strings(&["Pizza", "Sushi", "Yes please"])),
            ),
            (
                &q,
                vec![o.clone(), "b".into()],
                (q.clone(), vec![o, "b".into()]),
            ),
            ("q", ten.clone(), ("q".into(), ten)),
            // Different words that share letters are different answers.
            (
                "q",
                strings(&["yes", "yess"]),
                ("q".into(), strings(&["yes", "yess"])),
            ),
        ];
        for (question, options, expected) in table {
            assert_eq!(validate_poll(question, &options).unwrap(), expected);
        }
    }

    /// (allowMultiple, optionIndexes, code) on a three-answer poll.
    #[test]
    fn check_vote_refusals() {
        use ErrorCode::{InvalidOptionIndex as Index, PollSingleChoice as Single};
        #[rustfmt::skip]
        let table: Vec<(bool, Vec<i64>, ErrorCode)> = vec![
            (false, vec![3], Index),
            (false, vec![-1], Index),
            (false, vec![i64::MAX], Index),
            (false, vec![i64::MIN], Index),
            (true, vec![0, 256], Index),
            (true, vec![0, 3], Index),
            (true, vec![1, 1], Index),
            (false, vec![0, 0], Index),   // duplicate beats single-choice
            (false, vec![0, 7], Index),   // so does an unknown index
            (false, vec![0, 1], Single),
            (false, vec![2, 1, 0], Single),
        ];
        for (allow_multiple, indexes, code) in table {
            let p = poll(3, allow_multiple);
            let (got, message) = p.check_vote(&indexes).expect_err(&format!("{indexes:?}"));
            assert_eq!(got, code, "{allow_multiple} {indexes:?}: {message}");
            assert_eq!(message, message.to_lowercase());
        }
    }

    #[test]
    fn check_vote_accepts_sets() {
        let table: Vec<(bool, Vec<i64>, Vec<u8>)> = vec![
            (false, vec![], vec![]),
            (false, vec![2], vec![2]),
            (true, vec![], vec![]),
            (true, vec![2, 0], vec![0, 2]),
            (true, vec![0, 1, 2], vec![0, 1, 2]),
        ];
        for (allow_multiple, indexes, expected) in table {
            assert_eq!(
                poll(3, allow_multiple).check_vote(&indexes).unwrap(),
                expected
            );
        }
        // `closed` is the caller's: a closed poll still checks indexes.
        let mut p = poll(3, false);
        p.close();
        assert_eq!(p.check_vote(&[1]).unwrap(), vec![1]);
    }

    #[test]
    fn cast_change_withdraw_and_repeat() {
        let ana: ParticipantId = "ana".into();
        let mut p = poll(3, false);
        assert!(p.cast(ana.clone(), SenderType::User, vec![0], t(0)));
        // The same vote twice changes nothing, not even `at`.
        assert!(!p.cast(ana.clone(), SenderType::User, vec![0], t(5)));
        assert_eq!(p.votes[0].at, t(0));
        // A change replaces the answer and its time.
        assert!(p.cast(ana.clone(), SenderType::User, vec![2], t(9)));
        assert_eq!(p.votes.len(), 1);
        assert_eq!((p.votes[0].options.clone(), p.votes[0].at), (vec![2], t(9)));
        let v = p.view(&ana, true);
        assert_eq!(v.mine, vec![2]);
        assert_eq!(v.options.len(), 1);
        assert_eq!(v.options[0].index, 2);
        // Withdrawing removes the ballot; withdrawing again changes nothing.
        assert!(p.cast(ana.clone(), SenderType::User, vec![], t(10)));
        assert!(p.votes.is_empty());
        assert!(!p.cast(ana.clone(), SenderType::User, vec![], t(11)));
        let v = p.view(&ana, true);
        assert_eq!((v.options.len(), v.voter_count, v.mine.len()), (0, 0, 0));
        // Out-of-range and repeated indexes never reach a ballot.
        assert!(p.cast(ana.clone(), SenderType::User, vec![1, 9, 1], t(12)));
        assert_eq!(p.votes[0].options, vec![1]);
    }

    #[test]
    fn tally_multi_choice_distinct_voters_mine_and_order() {
        let (ana, rex, bob) = ("ana".into(), "rex".into(), ParticipantId::from("bob"));
        let mut p = poll(4, true);
        assert!(p.cast(ana, SenderType::User, vec![0, 2], t(1)));
        assert!(p.cast(rex, SenderType::Agent, vec![2], t(2)));
        assert!(p.cast(bob.clone(), SenderType::User, vec![2, 0, 1], t(3)));
        // Same set in another order is the same vote.
        assert!(!p.cast(bob.clone(), SenderType::User, vec![1, 2, 0], t(4)));

        let view = p.view(&bob, true);
        let wire = serde_json::to_value(&view).unwrap();
        let voter = |id: &str, kind: &str, s: u32| json!({ "id": id, "type": kind, "at": format!("2026-09-21T10:00:0{s}.000Z") });
        assert_eq!(
            wire,
            json!({
                "id": "poll_1",
                "allowMultiple": true,
                "closed": false,
                // Answer 3 was never chosen: absent, not a zero row.
                "options": [
                    { "index": 0, "count": 2, "voters": [voter("ana", "USER", 1), voter("bob", "USER", 3)] },
                    { "index": 1, "count": 1, "voters": [voter("bob", "USER", 3)] },
                    { "index": 2, "count": 3, "voters": [
                        voter("ana", "USER", 1), voter("rex", "AGENT", 2), voter("bob", "USER", 3)
                    ] },
                ],
                // Six votes, three voters.
                "voterCount": 3,
                "mine": [0, 1, 2],
                "canVote": true
            })
        );
        assert_eq!(serde_json::from_value::<PollView>(wire).unwrap(), view);

        // A changed ballot moves to the end: ana now follows bob.
        assert!(p.cast("ana".into(), SenderType::User, vec![2], t(5)));
        let view = p.view(&bob, true);
        let indexes: Vec<u8> = view.options.iter().map(|o| o.index).collect();
        assert_eq!(indexes, [0, 1, 2]);
        let ids: Vec<_> = view.options[2]
            .voters
            .iter()
            .map(|v| v.id.to_string())
            .collect();
        assert_eq!(ids, ["rex", "bob", "ana"]);
        assert_eq!(view.options[0].count, 1);
        // Someone who has not voted holds nothing.
        assert!(p.view(&"eve".into(), true).mine.is_empty());
    }

    #[test]
    fn can_vote_is_false_once_closed() {
        let ana: ParticipantId = "ana".into();
        let mut p = poll(2, false);
        p.cast(ana.clone(), SenderType::User, vec![1], t(0));
        #[rustfmt::skip]
        let table = [(false, true, true), (false, false, false), (true, true, false), (true, false, false)];
        for (closed, allowed, expected) in table {
            p.closed = closed;
            let v = p.view(&ana, allowed);
            assert_eq!((v.can_vote, v.closed), (expected, closed));
            // Closing keeps the tally.
            assert_eq!((v.voter_count, v.mine.clone()), (1, vec![1]));
        }
        p.closed = false;
        assert!(p.close());
        assert!(!p.close());
    }

    #[test]
    fn card_payload_fallback_and_storage() {
        let (q, options) = validate_poll(" Lunch? ", &strings(&["Pizza", " Sushi "])).unwrap();
        let mut p = PollState::new("poll_7", q, options, false, "rex".into());
        assert_eq!(
            p.card_payload(),
            json!({
                "pollId": "poll_7",
                "question": "Lunch?",
                "options": ["Pizza", "Sushi"],
                "askedBy": "rex",
                "allowMultiple": false
            })
        );
        assert_eq!(p.fallback_content(), "Lunch?\n1. Pizza\n2. Sushi");

        p.cast("ana".into(), SenderType::User, vec![1], t(0));
        let stored = serde_json::to_value(&p).unwrap();
        assert_eq!(stored["allowMultiple"], false);
        assert_eq!(stored["askedBy"], "rex");
        assert_eq!(stored["votes"][0]["voterType"], "USER");
        assert_eq!(serde_json::from_value::<PollState>(stored).unwrap(), p);
    }
}
