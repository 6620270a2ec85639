//! `names`: plain-name addressing (protocol §4), [`addressed_by_name`] and
//! [`distinctive_words`], on arbitrary Unicode content and rosters (input
//! format: `roster.rs`).
//!
//! Properties:
//! - never panics; deterministic;
//! - every addressed id is an agent of the roster, listed once;
//! - the set of addressed ids does not depend on the roster's order;
//! - a multi-word agent name without `@`, written alone, addresses that
//!   agent (a whole multi-word name always addresses);
//! - distinctive words are non-empty, whitespace-free, at least 3
//!   characters with a letter, and deterministic.

use super::roster::{assert_agents, parse, set, DICT};
use switchboard_protocol::model::ParticipantKind;
use switchboard_protocol::routing::{addressed_by_name, distinctive_words};

#[test]
fn names() {
    crate::fuzz_target!("names", DICT, |input: &[u8]| {
        let (roster, content) = parse(input);
        let ids = addressed_by_name(&content, &roster);
        assert_eq!(ids, addressed_by_name(&content, &roster), "deterministic");
        assert_agents("addressed_by_name", &ids, &roster);
        if !ids.is_empty() {
            crate::deep();
        }
        let mut reversed = roster.clone();
        reversed.reverse();
        assert_eq!(
            set(&ids),
            set(&addressed_by_name(&content, &reversed)),
            "depends on roster order"
        );
        for m in roster.iter().filter(|m| m.kind == ParticipantKind::Agent) {
            let words = distinctive_words(&m.name, &roster);
            assert_eq!(words, distinctive_words(&m.name, &roster), "deterministic");
            for w in &words {
                assert!(w.chars().count() >= 3, "{w:?} of {:?}", m.name);
                assert!(w.chars().any(char::is_alphabetic), "{w:?} of {:?}", m.name);
                assert!(!w.chars().any(char::is_whitespace), "{w:?} of {:?}", m.name);
            }
            let name = m.name.trim();
            if !name.contains('@') && name.split_whitespace().nth(1).is_some() {
                let found = addressed_by_name(name, &roster);
                assert!(
                    found.contains(&m.id),
                    "{name:?} alone does not address agent {}; found {found:?}",
                    m.id
                );
            }
        }
        // Against a roster of one, the content is checked too.
        let _ = distinctive_words(&content, &roster);
    });
}
