//! `route`: who should respond (protocol §3, §4, §7): [`compute_route`] (`routing::route`),
//! [`router_picks`] and [`instructions`], for every reply policy, GROUP and
//! DM, with each of the first roster members (and a stranger) as sender, on
//! arbitrary Unicode content and rosters (input format: `roster.rs`). The
//! content doubles as the policy's custom rules.
//!
//! Properties:
//! - nothing panics; `route` is deterministic;
//! - `respondents` are distinct agents of the roster, in roster order,
//!   never the sender, and `should_respond(sender, sender)` is false;
//! - `mentions` is exactly [`parse_mentions`]; `addressedAgents` is exactly
//!   [`addressed_by_name`] for a human sender and empty for an agent;
//! - every mentioned agent other than the sender responds (mentions win in
//!   every policy, for every sender);
//! - an agent's message reaches exactly the agents it mentions;
//! - a human's message in a DM reaches every agent but the sender;
//! - router picks are distinct agents other than the sender, only under
//!   ROUTER, and [`router_picks`] agrees with the stored picks;
//! - `instructions` ends with the custom rules verbatim in a GROUP when they
//!   are not blank.

use super::roster::{assert_agents, member, parse, DICT};
use switchboard_protocol::event::ConversationRef;
use switchboard_protocol::ids::{ConversationId, ParticipantId};
use switchboard_protocol::model::{ConversationType, ParticipantKind, Policy, ReplyPolicy};
use switchboard_protocol::routing::{
    addressed_by_name, instructions, parse_mentions, route as compute_route, router_picks,
    RouteInput,
};

const POLICIES: [ReplyPolicy; 5] = [
    ReplyPolicy::Mentions,
    ReplyPolicy::Dedicated,
    ReplyPolicy::Orchestrator,
    ReplyPolicy::Router,
    ReplyPolicy::Open,
];

#[test]
fn route() {
    crate::fuzz_target!("route", DICT, |input: &[u8]| {
        let (roster, content) = parse(input);
        let h = crate::fnv1a(input) as usize;
        let agents: Vec<&ParticipantId> = super::roster::agent_ids(&roster);
        let designated = (!agents.is_empty()).then(|| agents[h % agents.len()].clone());
        let mentions = parse_mentions(&content, &roster);
        let named = addressed_by_name(&content, &roster);
        let stranger = member("stranger", "Stranger", ParticipantKind::User);
        let senders: Vec<_> = roster.iter().take(5).chain([&stranger]).collect();
        let reply_to = roster
            .get((h >> 8) % (roster.len() + 1))
            .map(|m| (&m.id, m.kind));
        for policy_kind in POLICIES {
            let policy = Policy {
                agent_reply_policy: policy_kind,
                designated_agent_id: designated.clone(),
                max_agent_rounds: (h % 7) as u8,
                rules: Some(content.clone()),
            };
            for kind in [ConversationType::Group, ConversationType::Dm] {
                for sender in &senders {
                    let input = RouteInput {
                        conversation_type: kind,
                        policy: &policy,
                        roster: &roster,
                        sender: &sender.id,
                        sender_kind: sender.kind,
                        content: &content,
                        reply_to_sender: reply_to,
                    };
                    let r = compute_route(&input);
                    assert_eq!(r, compute_route(&input), "deterministic");
                    let human = sender.kind == ParticipantKind::User;
                    if !r.respondents.is_empty() && sender.id.as_str() != "stranger" {
                        crate::deep();
                    }
                    assert_agents("respondents", &r.respondents, &roster);
                    assert_agents("router_picks", &r.router_picks, &roster);
                    let positions: Vec<usize> = r
                        .respondents
                        .iter()
                        .map(|id| roster.iter().position(|m| &m.id == id).expect("member"))
                        .collect();
                    assert!(positions.windows(2).all(|w| w[0] < w[1]), "roster order");
                    assert!(!r.respondents.contains(&sender.id), "the sender responds");
                    assert!(!r.should_respond(&sender.id, &sender.id));
                    assert!(!r.suppressed);
                    assert_eq!(r.mentions, mentions, "mentions");
                    if human {
                        assert_eq!(r.addressed_agents, named, "addressedAgents");
                    } else {
                        assert!(r.addressed_agents.is_empty(), "an agent addresses by name");
                    }
                    for id in &r.mentions {
                        if id != &sender.id {
                            assert!(r.respondents.contains(id), "mentioned {id} not asked");
                        }
                    }
                    if !human {
                        let expected: Vec<&ParticipantId> = roster
                            .iter()
                            .map(|m| &m.id)
                            .filter(|id| *id != &sender.id && mentions.contains(id))
                            .collect();
                        assert_eq!(
                            r.respondents.iter().collect::<Vec<_>>(),
                            expected,
                            "agent message"
                        );
                    } else if kind == ConversationType::Dm {
                        let expected: Vec<&ParticipantId> = agents
                            .iter()
                            .copied()
                            .filter(|id| *id != &sender.id)
                            .collect();
                        assert_eq!(r.respondents.iter().collect::<Vec<_>>(), expected, "DM");
                    }
                    assert!(!r.router_picks.contains(&sender.id));
                    if !r.router_picks.is_empty() {
                        assert!(human && kind == ConversationType::Group);
                        assert_eq!(policy_kind, ReplyPolicy::Router);
                        assert_eq!(r.router_picks, router_picks(&content, &roster, &sender.id));
                    }
                }
                let conversation = ConversationRef {
                    id: ConversationId::from("launch"),
                    kind,
                    title: Some(content.chars().take(200).collect()),
                };
                for reader in senders.iter().take(3) {
                    let text = instructions(&reader.id, &conversation, &policy, &roster);
                    if kind == ConversationType::Group && !content.trim().is_empty() {
                        assert!(
                            text.ends_with(&content),
                            "rules are not verbatim at the end"
                        );
                    }
                }
            }
        }
        let picks = router_picks(&content, &roster, &ParticipantId::from("stranger"));
        assert_agents("router_picks", &picks, &roster);
    });
}
