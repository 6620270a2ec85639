//! `@Name` mention parsing (protocol §7).

use crate::ids::ParticipantId;
use crate::model::{ParticipantKind, RosterMember};

/// Resolves `@Name` mentions in `content` against the roster's agents:
/// case-insensitive, word-boundary-safe, longest name wins. Returns agent
/// ids in order of first appearance, without duplicates.
pub fn parse_mentions(content: &str, roster: &[RosterMember]) -> Vec<ParticipantId> {
    let mut agents: Vec<&RosterMember> = roster
        .iter()
        .filter(|m| m.kind == ParticipantKind::Agent && !m.name.is_empty())
        .collect();
    // Longest name first so "@Bay Brain" never resolves to "Bay".
    agents.sort_by_key(|m| std::cmp::Reverse(m.name.chars().count()));
    let lower = content.to_lowercase();
    let mut found = Vec::new();
    for (at, _) in lower.match_indices('@') {
        let before_ok = lower[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric() && c != '_' && c != '.');
        if !before_ok {
            continue;
        }
        let rest = &lower[at + 1..];
        for agent in &agents {
            let name = agent.name.to_lowercase();
            if rest.starts_with(&name)
                && rest[name.len()..]
                    .chars()
                    .next()
                    .is_none_or(|c| !c.is_alphanumeric() && c != '_')
            {
                if !found.contains(&agent.id) {
                    found.push(agent.id.clone());
                }
                break;
            }
        }
    }
    found
}
