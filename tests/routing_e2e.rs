//! `shouldRespond` end to end: every path that delivers a message to an
//! agent (live WebSocket, `/updates`, REST polling) carries the same verdict
//! for that agent, and the verdict survives a replay after the policy and
//! the roster changed (protocol §4: the single signal an agent obeys).

mod common;

use common::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use reqwest::Method;
use serde_json::{json, Value};
use std::collections::HashMap;

const AGENTS: [&str; 3] = ["rex", "brain", "scout"];

fn verdicts(events: &[Value]) -> HashMap<String, bool> {
    events
        .iter()
        .filter(|e| e.get("conversationId").is_none_or(|c| c == "group"))
        .map(|e| {
            let m = if e.get("message").is_some() {
                &e["message"]
            } else {
                e
            };
            (
                m["id"].as_str().unwrap().to_owned(),
                m["shouldRespond"].as_bool().unwrap(),
            )
        })
        .collect()
}

async fn set_policy(gw: &Gateway, bay: &str, policy: Value) {
    set_policy_of(gw, bay, "group", policy).await
}

async fn set_policy_of(gw: &Gateway, bay: &str, conversation: &str, policy: Value) {
    let (s, b) = gw
        .admin(
            Method::PATCH,
            &format!("/bays/{bay}/conversations/{conversation}"),
            Some(json!({ "policy": policy })),
        )
        .await;
    assert_eq!(s, 200, "{b}");
}

/// Messages exercising mentions, plain names, replies and agent senders.
fn script() -> Vec<(&'static str, &'static str)> {
    vec![
        ("ana", "good morning everyone"),
        ("ana", "@Rex please review the PR"),
        ("ben", "Scout, can you find the RFC?"),
        ("rex", "@Bay Brain what do we know about this?"),
        ("brain", "@Scout and @Rex, over to you"),
        ("scout", "done, thanks Rex"),
        ("ana", "thanks all, @bay brain summarise please"),
        ("rex", "no mention here"),
    ]
}

#[tokio::test]
async fn verdicts_match_across_ws_updates_and_rest_and_survive_replay() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "rt").await;
    set_policy(
        &gw,
        "rt",
        json!({"agentReplyPolicy": "ORCHESTRATOR", "orchestratorId": "brain", "maxAgentRounds": 3}),
    )
    .await;
    let tokens: HashMap<&str, &str> = [
        ("ana", w.ana.as_str()),
        ("ben", w.ben.as_str()),
        ("rex", w.rex.as_str()),
        ("brain", w.brain.as_str()),
        ("scout", w.scout.as_str()),
    ]
    .into_iter()
    .collect();

    // /updates cursors for every agent; a live WebSocket for scout.
    let mut cursors = HashMap::new();
    for a in AGENTS {
        let (s, b) = gw.updates(tokens[a], None, "1").await;
        assert_eq!(s, 200);
        cursors.insert(a, b["cursor"].as_str().unwrap().to_owned());
    }
    let start = chrono_now(&gw, &w.ana).await;
    let mut ws_scout_live = gw.ws_ready(&w.scout, Some(&cursors["scout"])).await;
    let _ = ws_scout_live.read_batch().await;

    let mut posted = Vec::new();
    let mut last_id: Option<String> = None;
    for (i, (who, text)) in script().into_iter().enumerate() {
        let mut body = json!({ "content": text });
        // Make one human message a reply to an agent's message.
        if i == 6 {
            body["replyToMessageId"] = json!(last_id.clone().unwrap());
        }
        let (s, b) = gw
            .post_json(tokens[who], "/conversations/group/messages", body)
            .await;
        assert_eq!(s, 201, "{b}");
        last_id = Some(b["id"].as_str().unwrap().to_owned());
        posted.push(b["id"].as_str().unwrap().to_owned());
    }

    // Live WebSocket verdicts for scout.
    let mut ws_events = Vec::new();
    while ws_events.len() < posted.len() {
        let (events, _) = ws_scout_live.read_batch().await;
        ws_events.extend(events);
    }
    let via_ws_scout = verdicts(&ws_events);

    let mut first_seen: HashMap<&str, HashMap<String, bool>> = HashMap::new();
    for a in AGENTS {
        // /updates from the cursor taken before the posts.
        let mut events = Vec::new();
        let mut cursor = cursors[a].clone();
        while verdicts(&events).len() < posted.len() {
            let (s, b) = gw.updates(tokens[a], Some(&cursor), "5").await;
            assert_eq!(s, 200, "{b}");
            events.extend(b["events"].as_array().unwrap().iter().cloned());
            cursor = b["cursor"].as_str().unwrap().to_owned();
        }
        let via_updates = verdicts(&events);
        // REST polling with since.
        let (s, b) = gw
            .get(
                tokens[a],
                &format!("/conversations/group/messages?since={start}"),
            )
            .await;
        assert_eq!(s, 200, "{b}");
        let via_rest = verdicts(b["messages"].as_array().unwrap());
        assert_eq!(
            via_updates, via_rest,
            "agent {a}: /updates and REST disagree"
        );
        if a == "scout" {
            assert_eq!(
                via_updates, via_ws_scout,
                "scout: /updates and /ws disagree"
            );
        }
        assert_eq!(via_updates.len(), posted.len());
        first_seen.insert(a, via_updates);
    }

    // Expected verdicts under ORCHESTRATOR(brain), cap 3.
    let expect = |a: &str, i: usize| first_seen[a][&posted[i]];
    assert!(
        expect("brain", 0) && !expect("rex", 0) && !expect("scout", 0),
        "unaddressed human → orchestrator"
    );
    assert!(expect("rex", 1) && !expect("brain", 1), "@Rex → rex only");
    assert!(
        expect("brain", 2) && !expect("scout", 2),
        "plain name under ORCHESTRATOR → orchestrator"
    );
    assert!(
        expect("brain", 3) && !expect("rex", 3),
        "agent @mention → mentioned agent"
    );
    assert!(
        expect("scout", 4) && expect("rex", 4),
        "agent mentions two agents"
    );
    assert!(!expect("rex", 5), "agent writing a name addresses nobody");
    assert!(
        !expect("brain", 7) && !expect("rex", 7) && !expect("scout", 7),
        "agent message without mention"
    );

    // Change the policy and the roster, then replay from the old cursors.
    set_policy(
        &gw,
        "rt",
        json!({"agentReplyPolicy": "OPEN", "maxAgentRounds": 0}),
    )
    .await;
    let (s, _) = gw
        .admin(
            Method::DELETE,
            "/bays/rt/conversations/group/members/ben",
            None,
        )
        .await;
    assert_eq!(s, 204);
    for a in AGENTS {
        let mut events = Vec::new();
        let mut cursor = cursors[a].clone();
        while verdicts(&events).len() < posted.len() {
            let (_, b) = gw.updates(tokens[a], Some(&cursor), "5").await;
            events.extend(b["events"].as_array().unwrap().iter().cloned());
            cursor = b["cursor"].as_str().unwrap().to_owned();
        }
        assert_eq!(
            verdicts(&events),
            first_seen[a],
            "agent {a}: replay changed a verdict"
        );
    }
}

/// A server timestamp to poll `since`: the `createdAt` of a message posted
/// in the DM (not the group) right before the script.
async fn chrono_now(gw: &Gateway, ana: &str) -> String {
    let (s, b) = gw.post_message(ana, "dm", "marker").await;
    assert_eq!(s, 201);
    b["createdAt"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn round_cap_counts_exactly_with_two_concurrent_writers() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "cap").await;
    set_policy(
        &gw,
        "cap",
        json!({"agentReplyPolicy": "MENTIONS", "maxAgentRounds": 5}),
    )
    .await;
    // A human message resets the count; then two agents post 10 @mentions
    // each, concurrently. Exactly the first 4 agent messages (count 1..4)
    // may trigger anyone; from the 5th on every verdict is false.
    let (s, _) = gw.post_message(&w.ana, "group", "go").await;
    assert_eq!(s, 201);
    let a = {
        let gw = &gw;
        let rex = w.rex.clone();
        async move {
            let mut ids = Vec::new();
            for _ in 0..10 {
                ids.push(gw.post_message(&rex, "group", "@Scout ping").await.1);
            }
            ids
        }
    };
    let b = {
        let gw = &gw;
        let brain = w.brain.clone();
        async move {
            let mut ids = Vec::new();
            for _ in 0..10 {
                ids.push(gw.post_message(&brain, "group", "@Scout pong").await.1);
            }
            ids
        }
    };
    let (ra, rb) = tokio::join!(a, b);
    assert!(ra.iter().chain(rb.iter()).all(|m| m["id"].is_string()));
    let (s, page) = gw
        .get(&w.scout, "/conversations/group/messages?limit=50")
        .await;
    assert_eq!(s, 200);
    let msgs = page["messages"].as_array().unwrap();
    let agent_msgs: Vec<&Value> = msgs.iter().filter(|m| m["senderType"] == "AGENT").collect();
    assert_eq!(agent_msgs.len(), 20);
    let triggered: Vec<bool> = agent_msgs
        .iter()
        .map(|m| m["shouldRespond"].as_bool().unwrap())
        .collect();
    assert_eq!(triggered.iter().filter(|t| **t).count(), 4, "{triggered:?}");
    assert!(
        triggered[..4].iter().all(|t| *t),
        "the first four in log order trigger: {triggered:?}"
    );
    // A human message resets the count.
    gw.post_message(&w.ana, "group", "next round").await;
    let (_, m) = gw.post_message(&w.rex, "group", "@Scout again").await;
    let (_, page) = gw
        .get(&w.scout, "/conversations/group/messages?limit=1")
        .await;
    assert_eq!(page["messages"][0]["id"], m["id"]);
    assert_eq!(page["messages"][0]["shouldRespond"], true);
}

/// A policy body; the designated agent ("brain") only where the policy uses one.
fn policy_json(policy: &str, cap: u8) -> Value {
    let mut p = json!({"agentReplyPolicy": policy, "maxAgentRounds": cap});
    if matches!(policy, "DEDICATED" | "ORCHESTRATOR" | "ROUTER") {
        p["designatedAgentId"] = json!("brain");
    }
    p
}

/// `message.id` → `shouldRespond` of the events of `conversation`.
fn verdicts_in(events: &[Value], conversation: &str) -> HashMap<String, bool> {
    events
        .iter()
        .filter(|e| e["conversationId"] == conversation)
        .map(|e| {
            (
                e["message"]["id"].as_str().unwrap().to_owned(),
                e["message"]["shouldRespond"].as_bool().unwrap(),
            )
        })
        .collect()
}

#[test]
fn verdicts_survive_replay_for_random_scripts() {
    // Property: for random message scripts and a random policy change after
    // them, replaying from a pre-script cursor gives every agent exactly the
    // verdicts it saw before the change. Each case has a GROUP of its own,
    // so no round count carries over from an earlier case.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let gw = rt.block_on(Gateway::spawn());
    let w = rt.block_on(World::create(&gw, "prop"));
    let senders = [
        w.ana.clone(),
        w.ben.clone(),
        w.rex.clone(),
        w.brain.clone(),
        w.scout.clone(),
    ];
    let texts = [
        "hello",
        "@Rex look",
        "Scout?",
        "@Bay Brain and @Scout",
        "thanks Rex",
        "bay brain, any idea",
    ];
    let policies = ["MENTIONS", "DEDICATED", "ORCHESTRATOR", "ROUTER", "OPEN"];
    let case = std::cell::Cell::new(0usize);
    let mut runner = TestRunner::new(Config {
        cases: 32,
        ..Config::default()
    });
    runner
        .run(
            &(
                proptest::collection::vec((0usize..5, 0usize..6), 1..8),
                0usize..5,
                0usize..5,
                0u8..=5,
            ),
            |(script, before, after, cap)| {
                case.set(case.get() + 1);
                let room = format!("case-{}", case.get());
                rt.block_on(async {
                    gw.create_conversation(
                        "prop",
                        &room,
                        "GROUP",
                        &["ana", "ben", "rex", "brain", "scout"],
                    )
                    .await;
                    set_policy_of(&gw, "prop", &room, policy_json(policies[before], cap)).await;
                    let agents = [w.rex.clone(), w.brain.clone(), w.scout.clone()];
                    let cursors: Vec<String> =
                        futures_util::future::join_all(agents.iter().map(|t| async {
                            let (s, b) = gw.updates(t, None, "1").await;
                            assert_eq!(s, 200, "{b}");
                            b["cursor"].as_str().unwrap().to_owned()
                        }))
                        .await;
                    let mut posted = Vec::new();
                    for (who, text) in &script {
                        let (s, m) = gw.post_message(&senders[*who], &room, texts[*text]).await;
                        assert_eq!(s, 201, "{m}");
                        posted.push(m["id"].as_str().unwrap().to_owned());
                    }
                    let read = |token: String, cursor: String| {
                        let (gw, room) = (&gw, &room);
                        let n = script.len();
                        async move {
                            let mut events = Vec::new();
                            let mut c = cursor;
                            while events.len() < n {
                                let (_, b) = gw.updates(&token, Some(&c), "5").await;
                                events.extend(b["events"].as_array().unwrap().iter().cloned());
                                c = b["cursor"].as_str().unwrap().to_owned();
                            }
                            verdicts_in(&events, room)
                        }
                    };
                    let mut before_change = Vec::new();
                    for (t, c) in agents.iter().zip(&cursors) {
                        let seen = read(t.clone(), c.clone()).await;
                        let mut ids: Vec<&String> = seen.keys().collect();
                        ids.sort();
                        let mut want: Vec<&String> = posted.iter().collect();
                        want.sort();
                        prop_assert_eq!(ids, want, "every message of the case, once");
                        before_change.push(seen);
                    }
                    set_policy_of(&gw, "prop", &room, policy_json(policies[after], 5 - cap)).await;
                    for (i, (t, c)) in agents.iter().zip(&cursors).enumerate() {
                        let again = read(t.clone(), c.clone()).await;
                        prop_assert_eq!(&again, &before_change[i]);
                    }
                    Ok(())
                })
            },
        )
        .unwrap();
}
