//! `mentions`: `@Name` parsing (protocol §7), [`parse_mentions`], on
//! arbitrary Unicode content and rosters (input format: `roster.rs`).
//!
//! Properties:
//! - never panics; deterministic;
//! - every id is an agent of the roster, listed once;
//! - the set of ids does not depend on the roster's order (longest name
//!   wins, and names of the same length can only both match when they fold
//!   to the same text, which then means every agent of that name);
//! - `hi @<name>` mentions every agent whose name folds to something.

use super::roster::{assert_agents, parse, set, DICT};
use switchboard_protocol::model::ParticipantKind;
use switchboard_protocol::routing::parse_mentions;

#[test]
fn mentions() {
    crate::fuzz_target!("mentions", DICT, |input: &[u8]| {
        let (roster, content) = parse(input);
        let ids = parse_mentions(&content, &roster);
        assert_eq!(ids, parse_mentions(&content, &roster), "deterministic");
        assert_agents("parse_mentions", &ids, &roster);
        if !ids.is_empty() {
            crate::deep();
        }
        let mut reversed = roster.clone();
        reversed.reverse();
        assert_eq!(
            set(&ids),
            set(&parse_mentions(&content, &reversed)),
            "depends on roster order"
        );
        for m in roster.iter().filter(|m| m.kind == ParticipantKind::Agent) {
            let name = m.name.trim();
            if name.is_empty() {
                continue;
            }
            let text = format!("hi @{name}");
            let found = parse_mentions(&text, &roster);
            assert!(
                found.contains(&m.id),
                "{text:?} does not mention agent {} ({:?}); found {found:?}",
                m.id,
                m.name
            );
        }
    });
}
