//! `poll`: the bodies of `create_poll` (`CreatePoll`: `question`,
//! `options`, `allowMultiple`) and `vote_in_poll` (`VoteBody`:
//! `optionIndexes`), through the public validation and tally layer of
//! protocol/src/poll.rs: [`validate_poll`], [`PollState::check_vote`],
//! [`PollState::cast`], [`PollState::close`] and [`PollState::view`].
//!
//! Input: JSON `{question, options, allowMultiple, votes: [{voter, type,
//! optionIndexes, raw, close}]}`; fields of the wrong type are read as
//! absent, so every mutation still drives the code. Properties:
//! - nothing panics; `validate_poll` is deterministic and idempotent
//!   (validating its output gives the same output);
//! - an accepted poll has a trimmed, non-blank question of at most 500
//!   chars and 2–10 trimmed, non-blank answers of at most 200 chars, no two
//!   alike; a refusal is `INVALID_POLL` with a lowercase message;
//! - the lowercase spelling of an accepted answer is "the same answer"
//!   (documented: the comparison is case-insensitive), including answers
//!   whose lowercase composes differently (finding 2 of docs/fuzzing.md,
//!   fixed; [`TOLERATE_NFC_BEFORE_LOWERCASE`]);
//! - `check_vote` returns an ascending set of offered indexes, one index
//!   unless `allowMultiple`, or `INVALID_OPTION_INDEX` / `POLL_SINGLE_CHOICE`;
//! - after any sequence of casts (checked sets, or raw indexes that `cast`
//!   must sanitize itself) the ballots keep their invariants: one per
//!   voter, none empty, ascending, deduplicated, in range;
//! - `view`: `voterCount` equals the distinct voters with a ballot; `mine`
//!   is the reader's ballot (a subset of the offered indexes); each option
//!   is listed once, ascending, with `count == voters.len() >= 1`, and the
//!   counts add up to the ballots' sizes; `canVote` is false once closed;
//! - `PollState` survives a serde round trip (it is stored in the message).

use chrono::{DateTime, TimeZone, Utc};
use serde_json::Value;
use std::collections::HashSet;
use switchboard_protocol::error::ErrorCode;
use switchboard_protocol::ids::ParticipantId;
use switchboard_protocol::model::SenderType;
use switchboard_protocol::poll::{
    validate_poll, PollState, MAX_OPTIONS, MAX_OPTION_CHARS, MAX_QUESTION_CHARS, MIN_OPTIONS,
};
use unicode_normalization::UnicodeNormalization;

const DICT: &[&[u8]] = &[
    b"\"question\"",
    b"\"options\"",
    b"\"allowMultiple\"",
    b"\"votes\"",
    b"\"voter\"",
    b"\"type\"",
    b"\"AGENT\"",
    b"\"USER\"",
    b"\"optionIndexes\"",
    b"\"raw\"",
    b"\"close\"",
    b"true",
    b"false",
    b"null",
    b"-1",
    b"9",
    b"10",
    b"255",
    b"256",
    b"4294967296",
    b"-9223372036854775808",
    b"9223372036854775807",
    b"1e3",
    b"[0,0]",
    b"[]",
    b"\"Yes\"",
    b"\" yes \"",
    b"\"YES\"",
    b"\"e\\u0301\"",
    "\"é\"".as_bytes(),
    b"\"\\u200b\"",
    b"\"new  york\"",
    b"\"ana\"",
    b"\"rex\"",
    b",",
    b"[",
    b"]",
];

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|s| {
                    s.as_str()
                        .map(str::to_owned)
                        .unwrap_or_else(|| s.to_string())
                })
                .collect()
        })
        .unwrap_or_default()
}

fn indexes(v: Option<&Value>) -> Vec<i64> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default()
}

fn at(step: usize) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(1_758_448_800_000 + step as i64 * 1_001)
        .single()
        .expect("a valid instant")
}

fn check_validated(question: &str, options: &[String]) -> Option<(String, Vec<String>)> {
    let result = validate_poll(question, options);
    assert_eq!(result, validate_poll(question, options), "deterministic");
    match result {
        Err((code, message)) => {
            assert_eq!(code, ErrorCode::InvalidPoll, "{message}");
            assert_eq!(message, message.to_lowercase(), "message not lowercase");
            None
        }
        Ok((q, opts)) => {
            assert_eq!(q, q.trim());
            assert!(!q.is_empty() && q.chars().count() <= MAX_QUESTION_CHARS);
            assert!((MIN_OPTIONS..=MAX_OPTIONS).contains(&opts.len()));
            assert_eq!(opts.len(), options.len());
            for (o, given) in opts.iter().zip(options) {
                assert_eq!(o, given.trim());
                assert!(!o.is_empty() && o.chars().count() <= MAX_OPTION_CHARS);
            }
            assert_eq!(
                validate_poll(&q, &opts),
                Ok((q.clone(), opts.clone())),
                "validating the validated poll changes it"
            );
            // Case-insensitive: an answer's lowercase spelling collides with it.
            if opts.len() < MAX_OPTIONS {
                for (i, o) in opts.iter().enumerate() {
                    let lower = o.to_lowercase();
                    if lower.chars().count() > MAX_OPTION_CHARS {
                        continue;
                    }
                    let mut more = opts.clone();
                    more.push(lower.clone());
                    if TOLERATE_NFC_BEFORE_LOWERCASE && lowercase_denormalizes(o) {
                        continue;
                    }
                    if let Ok(accepted) = validate_poll(&q, &more) {
                        panic!(
                            "options[{i}] {o:?} and its lowercase {lower:?} are both accepted: {accepted:?}"
                        );
                    }
                }
            }
            Some((q, opts))
        }
    }
}

/// Finding 2 of docs/fuzzing.md (fixed): `validate_poll`
/// (protocol/src/poll.rs) composed an answer (NFC) *before* lowercasing it,
/// and lowercasing can undo the composition: `T\u{308}` has no precomposed
/// form, so its key was `t\u{308}`, while its own lowercase spelling
/// composes to `ẗ` (U+1E97) and keyed as `ẗ`; both were accepted side by
/// side. The key is now NFC(lowercase(NFD(answer))). With this `false`
/// every accepted answer's lowercase spelling must collide with it; set it
/// back to `true` only to tolerate a regression while it is being fixed.
const TOLERATE_NFC_BEFORE_LOWERCASE: bool = false;

/// Whether lowercasing the NFC form of `answer` leaves it not in NFC (the
/// case finding 2 mishandled).
fn lowercase_denormalizes(answer: &str) -> bool {
    let key = answer.nfc().collect::<String>().to_lowercase();
    key.nfc().collect::<String>() != key
}

/// Finding 2 stays fixed (see [`TOLERATE_NFC_BEFORE_LOWERCASE`]): an
/// answer and its lowercase spelling collide even where lowercasing the
/// composed form leaves it uncomposed.
#[test]
fn lowercase_after_nfc_collides() {
    for (upper, composed) in [
        ("T\u{308}", "\u{1E97}"),
        ("J\u{30C}", "\u{1F0}"),
        ("W\u{30A}", "\u{1E98}"),
        ("Y\u{30A}", "\u{1E99}"),
    ] {
        assert!(lowercase_denormalizes(upper), "{upper:?}");
        for options in [
            vec![upper.to_owned(), composed.to_owned()],
            vec![composed.to_owned(), upper.to_owned()],
        ] {
            let (code, message) = validate_poll("q", &options)
                .expect_err("an answer and its lowercase spelling are the same answer");
            assert_eq!(code, ErrorCode::InvalidPoll);
            assert!(message.contains("is the same answer as"), "{message}");
        }
    }
}

fn check_ballots(poll: &PollState) {
    let mut voters = HashSet::new();
    for b in &poll.votes {
        assert!(voters.insert(&b.voter), "two ballots for {:?}", b.voter);
        assert!(!b.options.is_empty(), "empty ballot stored");
        assert!(
            b.options.windows(2).all(|w| w[0] < w[1]),
            "ballot {:?}",
            b.options
        );
        assert!(b
            .options
            .iter()
            .all(|&i| usize::from(i) < poll.options.len()));
    }
}

fn check_view(poll: &PollState, reader: &ParticipantId, can_vote: bool) {
    let view = poll.view(reader, can_vote);
    let ballots: HashSet<&ParticipantId> = poll.votes.iter().map(|b| &b.voter).collect();
    assert_eq!(view.voter_count as usize, ballots.len(), "voterCount");
    let mine = poll
        .votes
        .iter()
        .find(|b| &b.voter == reader)
        .map(|b| b.options.clone())
        .unwrap_or_default();
    assert_eq!(view.mine, mine, "mine");
    assert!(view
        .mine
        .iter()
        .all(|&i| usize::from(i) < poll.options.len()));
    assert!(view.options.windows(2).all(|w| w[0].index < w[1].index));
    let mut total = 0usize;
    for o in &view.options {
        assert!(usize::from(o.index) < poll.options.len());
        assert_eq!(o.count as usize, o.voters.len());
        assert!(o.count >= 1);
        total += o.voters.len();
    }
    assert_eq!(
        total,
        poll.votes.iter().map(|b| b.options.len()).sum::<usize>()
    );
    assert_eq!(view.can_vote, can_vote && !poll.closed);
    assert_eq!(view.allow_multiple, poll.allow_multiple);
    assert_eq!(view.id, poll.id);
}

#[test]
fn poll() {
    crate::fuzz_target!("poll", DICT, |input: &[u8]| {
        let Ok(body) = serde_json::from_slice::<Value>(input) else {
            return;
        };
        let question = body
            .get("question")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let options = strings(body.get("options"));
        let allow_multiple = body
            .get("allowMultiple")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let Some((q, opts)) = check_validated(question, &options) else {
            return;
        };
        crate::deep();
        let mut poll = PollState::new("poll_1", q, opts, allow_multiple, "ana".into());
        let votes = body
            .get("votes")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut readers: Vec<ParticipantId> = vec!["ana".into(), "nobody".into()];
        for (step, vote) in votes.iter().enumerate() {
            if vote.get("close").and_then(Value::as_bool) == Some(true) {
                let was_open = !poll.closed;
                assert_eq!(poll.close(), was_open);
                continue;
            }
            let voter: ParticipantId = vote
                .get("voter")
                .and_then(Value::as_str)
                .unwrap_or("rex")
                .into();
            let kind = match vote.get("type").and_then(Value::as_str) {
                Some("AGENT") => SenderType::Agent,
                _ => SenderType::User,
            };
            let wanted = indexes(vote.get("optionIndexes"));
            let checked = poll.check_vote(&wanted);
            match &checked {
                Ok(set) => {
                    assert!(set.windows(2).all(|w| w[0] < w[1]), "{set:?}");
                    assert!(set.iter().all(|&i| usize::from(i) < poll.options.len()));
                    assert!(set.len() <= 1 || poll.allow_multiple);
                    assert_eq!(set.len(), wanted.len());
                }
                Err((code, message)) => {
                    assert!(
                        matches!(
                            code,
                            ErrorCode::InvalidOptionIndex | ErrorCode::PollSingleChoice
                        ),
                        "{code:?}: {message}"
                    );
                }
            }
            let cast = if vote.get("raw").and_then(Value::as_bool) == Some(true) {
                // What cast must survive on its own: unchecked indexes.
                Some(wanted.iter().map(|&i| i as u8).collect::<Vec<u8>>())
            } else {
                checked.ok()
            };
            if let Some(set) = cast {
                let before = poll.clone();
                let changed = poll.cast(voter.clone(), kind, set, at(step));
                assert_eq!(changed, before != poll, "cast's answer vs the state");
                check_ballots(&poll);
            }
            if !readers.contains(&voter) {
                readers.push(voter);
            }
        }
        for (i, reader) in readers.iter().enumerate() {
            check_view(&poll, reader, i % 2 == 0);
        }
        let wire = serde_json::to_string(&poll).expect("a poll serializes");
        let back: PollState = serde_json::from_str(&wire).expect("a poll deserializes");
        assert_eq!(back, poll, "serde round trip");
        assert_eq!(
            poll.card_payload()["options"],
            serde_json::to_value(&poll.options).expect("strings")
        );
    });
}
