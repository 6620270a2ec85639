//! End-to-end tests of the agent REST API (protocol §2, §3, §5, §7, §11)
//! against a real `switchboard` process.

mod common;

use common::*;
use reqwest::Method;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const API: &str = "/api/agent-api";

/// Sorted keys of a JSON object.
fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .cloned()
        .collect();
    k.sort();
    k
}

fn ids(messages: &Value) -> Vec<String> {
    messages
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {messages}"))
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn post_ok(gw: &Gateway, token: &str, conversation: &str, content: &str) -> Value {
    let (s, b) = gw.post_message(token, conversation, content).await;
    assert_eq!(s, 201, "post {content:?}: {b}");
    b
}

/// Posts `n` messages alternating between the given tokens; returns their ids in order.
async fn post_many(gw: &Gateway, tokens: &[&str], conversation: &str, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    for i in 0..n {
        let b = post_ok(gw, tokens[i % tokens.len()], conversation, &format!("m{i}")).await;
        out.push(b["id"].as_str().unwrap().to_owned());
    }
    out
}

/// `GET …/messages?{query}` as `token`; asserts 200 and the response shape.
async fn messages(gw: &Gateway, token: &str, conversation: &str, query: &str) -> Value {
    let (s, b) = gw
        .get(
            token,
            &format!("/conversations/{conversation}/messages{query}"),
        )
        .await;
    assert_eq!(s, 200, "messages{query}: {b}");
    assert_eq!(keys(&b), ["context", "messages", "nextCursor"], "{b}");
    b
}

// ---------------------------------------------------------------- identity

#[tokio::test]
async fn me_returns_the_callers_identity_and_protocol_version() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;

    let (s, me) = gw.get(&w.brain, "/me").await;
    assert_eq!(s, 200, "{me}");
    assert_eq!(me["id"], "brain");
    assert_eq!(me["name"], "Bay Brain");
    assert_eq!(me["kind"], "agent");
    assert!(me["status"].as_str().is_some_and(|s| !s.is_empty()), "{me}");
    assert_eq!(me["protocolVersion"], "1.12");

    let (s, me) = gw.get(&w.ana, "/me").await;
    assert_eq!(s, 200, "{me}");
    assert_eq!(me["id"], "ana");
    assert_eq!(me["name"], "Ana");
    assert_eq!(me["kind"], "user");
    assert_eq!(me["protocolVersion"], "1.12");
}

#[tokio::test]
async fn missing_garbage_or_unknown_tokens_get_401_json() {
    let gw = Gateway::spawn().await;
    let _w = World::create(&gw, "b1").await;
    let unknown = "bay_ThisIsWellFormedButWasNeverIssued0";
    let routes: [(Method, &str, Option<Value>); 6] = [
        (Method::GET, "/me", None),
        (Method::GET, "/conversations", None),
        (Method::GET, "/conversations/group/context", None),
        (Method::GET, "/conversations/group/messages", None),
        (
            Method::POST,
            "/conversations/group/messages",
            Some(json!({"content": "hi"})),
        ),
        (Method::POST, "/conversations/group/typing", None),
    ];
    let auths: Vec<Option<String>> = vec![
        None,
        Some("Bearer garbage".into()),
        Some("Bearer ".into()),
        Some(format!("Bearer {unknown}")),
        Some("Basic YW5hOmFuYQ==".into()),
        Some("bay_ThisIsWellFormedButHasNoScheme00".into()),
    ];
    for (method, path, body) in &routes {
        for auth in &auths {
            let mut req = gw
                .http
                .request(method.clone(), gw.url(&format!("{API}{path}")));
            if let Some(a) = auth {
                req = req.header("Authorization", a.as_str());
            }
            if let Some(b) = body {
                req = req.json(b);
            }
            let (s, _, b) = gw.send_raw(req).await;
            assert_error(s, &b, 401, "UNAUTHORIZED");
        }
    }
    // Authentication comes first: a stranger learns nothing from body validation.
    let url = gw.url(&format!("{API}/conversations/group/messages"));
    let bodies: [(&str, String); 4] = [
        ("application/json", "{".into()),
        ("text/plain", r#"{"content":"hi"}"#.into()),
        ("application/json", r#"{"content":""}"#.into()),
        (
            "application/json",
            json!({"content": "x".repeat(300 * 1024)}).to_string(),
        ),
    ];
    for (ct, body) in bodies {
        for auth in [None, Some(format!("Bearer {unknown}"))] {
            let mut req = gw
                .http
                .post(&url)
                .header("Content-Type", ct)
                .body(body.clone());
            if let Some(a) = &auth {
                req = req.header("Authorization", a.as_str());
            }
            let (s, _, b) = gw.send_raw(req).await;
            assert_error(s, &b, 401, "UNAUTHORIZED");
        }
    }
}

#[tokio::test]
async fn conversations_lists_exactly_the_callers_conversations() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    let list = |token: String| {
        let gw = &gw;
        async move {
            let (s, b) = gw.get(&token, "/conversations").await;
            assert_eq!(s, 200, "{b}");
            let mut items = b.as_array().unwrap().clone();
            items.sort_by_key(|c| c["id"].as_str().unwrap().to_owned());
            items
        }
    };

    let rex = list(w.rex.clone()).await;
    assert_eq!(rex.len(), 2, "{rex:?}");
    assert_eq!(rex[0]["id"], "dm");
    assert_eq!(rex[0]["type"], "DM");
    assert_eq!(rex[0]["title"], "dm");
    assert_eq!(rex[1]["id"], "group");
    assert_eq!(rex[1]["type"], "GROUP");
    assert_eq!(rex[1]["title"], "group");

    let brain = list(w.brain.clone()).await;
    assert_eq!(brain.len(), 1, "{brain:?}");
    assert_eq!(brain[0]["id"], "group");

    let ben = list(w.ben.clone()).await;
    assert_eq!(ben.len(), 1, "{ben:?}");
    assert_eq!(ben[0]["id"], "group");
}

// ---------------------------------------------------------------- context

/// A Bay whose agents have descriptions (and a user who was given one, which must never show).
async fn described_world(gw: &Gateway) {
    gw.create_bay("d").await;
    for (id, kind, name, description) in [
        ("ana", "user", "Ana", Some("private note about Ana")),
        ("rex", "agent", "Rex", Some("Reviews code")),
        ("scout", "agent", "Scout", None),
    ] {
        let mut body = json!({"id": id, "kind": kind, "name": name});
        if let Some(d) = description {
            body["description"] = json!(d);
        }
        let (s, b) = gw
            .admin(Method::POST, "/bays/d/participants", Some(body))
            .await;
        assert_eq!(s, 201, "{b}");
    }
    let (s, b) = gw
        .admin(
            Method::POST,
            "/bays/d/conversations",
            Some(json!({
                "id": "room", "type": "GROUP", "title": "Ops Room",
                "members": ["ana", "rex", "scout"], "admins": ["ana"],
            })),
        )
        .await;
    assert_eq!(s, 201, "{b}");
}

#[tokio::test]
async fn group_context_envelope_has_exactly_the_documented_fields() {
    let gw = Gateway::spawn().await;
    described_world(&gw).await;
    let (s, b) = gw
        .admin(Method::POST, "/bays/d/participants/rex/token", None)
        .await;
    assert_eq!(s, 201, "{b}");
    let rex = b["token"].as_str().unwrap().to_owned();

    let (s, ctx) = gw.get(&rex, "/conversations/room/context").await;
    assert_eq!(s, 200, "{ctx}");
    assert_eq!(
        keys(&ctx),
        [
            "conversation",
            "instructions",
            "participants",
            "policy",
            "you"
        ]
    );
    assert_eq!(
        ctx["conversation"],
        json!({"id": "room", "type": "GROUP", "title": "Ops Room"})
    );
    assert_eq!(
        ctx["participants"],
        json!([
            {"id": "ana", "name": "Ana", "kind": "user", "role": "admin",
             "isOrchestrator": false, "description": null},
            {"id": "rex", "name": "Rex", "kind": "agent", "role": "member",
             "isOrchestrator": false, "description": "Reviews code"},
            {"id": "scout", "name": "Scout", "kind": "agent", "role": "member",
             "isOrchestrator": false, "description": null},
        ])
    );
    assert_eq!(
        keys(&ctx["policy"]),
        [
            "agentReplyPolicy",
            "designatedAgentId",
            "effectiveRule",
            "maxAgentRounds",
            "policyApplies"
        ]
    );
    assert_eq!(ctx["policy"]["agentReplyPolicy"], "MENTIONS");
    assert_eq!(ctx["policy"]["designatedAgentId"], Value::Null);
    assert_eq!(ctx["policy"]["maxAgentRounds"], 2);
    assert_eq!(ctx["policy"]["policyApplies"], true);
    let rule = ctx["policy"]["effectiveRule"].as_str().unwrap();
    assert!(!rule.is_empty() && rule != "EVERY_USER_MESSAGE", "{rule}");
    assert_eq!(
        ctx["you"],
        json!({"agentId": "rex", "isOrchestrator": false})
    );
    let text = ctx["instructions"].as_str().unwrap();
    assert!(
        text.contains("\"Rex\""),
        "instructions must name the reader: {text}"
    );
    assert!(text.contains("Ops Room"), "{text}");
    assert!(
        !text.contains("private note"),
        "a user's description leaked: {text}"
    );
}

#[tokio::test]
async fn dm_context_says_policy_does_not_apply() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    let (s, ctx) = gw.get(&w.rex, "/conversations/dm/context").await;
    assert_eq!(s, 200, "{ctx}");
    assert_eq!(
        ctx["conversation"],
        json!({"id": "dm", "type": "DM", "title": "dm"})
    );
    assert_eq!(ctx["policy"]["policyApplies"], false);
    assert_eq!(ctx["policy"]["effectiveRule"], "EVERY_USER_MESSAGE");
    assert_eq!(ctx["policy"]["designatedAgentId"], Value::Null);
    assert_eq!(
        ctx["you"],
        json!({"agentId": "rex", "isOrchestrator": false})
    );
    let roster: Vec<_> = ctx["participants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(roster, ["ana", "rex"]);
    assert!(ctx["participants"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["isOrchestrator"] == false));
}

#[tokio::test]
async fn instructions_are_written_for_each_reader() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    let (_, rex) = gw.get(&w.rex, "/conversations/group/context").await;
    let (_, brain) = gw.get(&w.brain, "/conversations/group/context").await;
    let rex_text = rex["instructions"].as_str().unwrap();
    let brain_text = brain["instructions"].as_str().unwrap();
    assert!(rex_text.contains("You are \"Rex\""), "{rex_text}");
    assert!(brain_text.contains("You are \"Bay Brain\""), "{brain_text}");
    assert_ne!(rex_text, brain_text);
    assert_eq!(brain["you"]["agentId"], "brain");
    // The roster itself is the same for both readers.
    assert_eq!(rex["participants"], brain["participants"]);
}

// ---------------------------------------------------------------- reading

#[tokio::test]
async fn since_returns_strictly_newer_messages_in_ascending_order() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    let mut posted = Vec::new();
    for (i, t) in [&w.ana, &w.rex, &w.ben, &w.brain, &w.ana]
        .iter()
        .enumerate()
    {
        posted.push(post_ok(&gw, t, "group", &format!("m{i}")).await);
    }
    let all_ids: Vec<String> = posted
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect();

    let since = posted[1]["createdAt"].as_str().unwrap();
    let b = messages(&gw, &w.scout, "group", &format!("?since={}", urlenc(since))).await;
    assert_eq!(ids(&b["messages"]), all_ids[2..].to_vec());
    assert_eq!(b["nextCursor"], Value::Null);

    let b = messages(&gw, &w.scout, "group", "?since=2000-01-01T00:00:00Z").await;
    assert_eq!(ids(&b["messages"]), all_ids);

    let last = posted[4]["createdAt"].as_str().unwrap();
    let b = messages(&gw, &w.scout, "group", &format!("?since={}", urlenc(last))).await;
    assert_eq!(ids(&b["messages"]), Vec::<String>::new());

    // Ascending by createdAt as well as by position.
    let b = messages(&gw, &w.scout, "group", "?since=2000-01-01T00:00:00Z").await;
    let stamps: Vec<&str> = b["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["createdAt"].as_str().unwrap())
        .collect();
    let mut sorted = stamps.clone();
    sorted.sort();
    assert_eq!(stamps, sorted);
    // A `since` with an offset means the same instant.
    let b = messages(
        &gw,
        &w.scout,
        "group",
        &format!("?since={}&limit=2", urlenc("2000-01-01T02:00:00+02:00")),
    )
    .await;
    assert_eq!(ids(&b["messages"]), all_ids[..2].to_vec());
}

fn urlenc(s: &str) -> String {
    s.replace('+', "%2B").replace(':', "%3A")
}

#[tokio::test]
async fn without_parameters_the_newest_page_is_returned_ascending() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    let all = post_many(&gw, &[&w.ana, &w.rex], "group", 55).await;
    let b = messages(&gw, &w.brain, "group", "").await;
    assert_eq!(
        ids(&b["messages"]),
        all[5..].to_vec(),
        "newest 50, oldest first"
    );
    assert_eq!(b["nextCursor"], json!(all[5]));
    // The same page from a DM with few messages has no cursor.
    let dm = post_many(&gw, &[&w.ana], "dm", 3).await;
    let b = messages(&gw, &w.rex, "dm", "").await;
    assert_eq!(ids(&b["messages"]), dm);
    assert_eq!(b["nextCursor"], Value::Null);
}

#[tokio::test]
async fn cursor_paging_walks_back_through_history_exactly_once() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    let all = post_many(&gw, &[&w.ana, &w.rex, &w.ben], "group", 23).await;

    for limit in [1usize, 5, 7, 22, 23, 200] {
        let mut seen: Vec<String> = Vec::new();
        let mut pages = 0;
        let mut cursor: Option<String> = None;
        loop {
            let q = match &cursor {
                None => format!("?limit={limit}"),
                Some(c) => format!("?limit={limit}&cursor={c}"),
            };
            let b = messages(&gw, &w.scout, "group", &q).await;
            let page = ids(&b["messages"]);
            assert!(page.len() <= limit, "limit {limit}: page of {}", page.len());
            assert!(!page.is_empty(), "limit {limit}: empty page");
            // Each page is ascending and sits right before what we have seen.
            let mut next = page.clone();
            next.extend(seen);
            seen = next;
            pages += 1;
            assert!(pages <= 30, "paging does not terminate");
            match &b["nextCursor"] {
                Value::Null => break,
                Value::String(c) => {
                    assert_eq!(c, &page[0], "nextCursor names the page's oldest message");
                    cursor = Some(c.clone());
                }
                other => panic!("nextCursor {other}"),
            }
        }
        assert_eq!(
            seen, all,
            "limit {limit}: every message exactly once, in order"
        );
        assert_eq!(pages, all.len().div_ceil(limit), "limit {limit}");
    }
}

#[tokio::test]
async fn invalid_limit_since_or_cursor_is_a_400_json_error() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    post_many(&gw, &[&w.ana], "group", 2).await;
    let (_, other) = gw.post_message(&w.ana, "dm", "in the dm").await;
    for q in [
        "limit=0",
        "limit=201",
        "limit=-1",
        "limit=abc",
        "limit=1.5",
        "limit=",
        "since=yesterday",
        "since=12345",
        "since=2026-13-01T00:00:00Z",
        "since=",
        "since=2026-01-01T00:00:00Z&limit=0",
    ] {
        let (s, b) = gw
            .get(&w.rex, &format!("/conversations/group/messages?{q}"))
            .await;
        assert_eq!(s, 400, "{q}: {b}");
        assert_eq!(keys(&b), ["code", "error", "message"], "{q}: {b}");
        assert!(
            b["code"].as_str().unwrap().starts_with("INVALID_"),
            "{q}: {b}"
        );
    }
    // A cursor that names no message of this conversation (including one of another conversation).
    for c in ["msg_nope", other["id"].as_str().unwrap()] {
        let (s, b) = gw
            .get(&w.rex, &format!("/conversations/group/messages?cursor={c}"))
            .await;
        assert_error(s, &b, 400, "INVALID_CURSOR");
    }
    // The bounds themselves are fine.
    for q in ["limit=1", "limit=200"] {
        messages(&gw, &w.rex, "group", &format!("?{q}")).await;
    }
}

#[tokio::test]
async fn polled_messages_are_enriched_for_the_reader() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    let posted = post_ok(&gw, &w.ana, "group", "hi @Rex and @Bay Brain, see Rexford").await;
    let b = messages(&gw, &w.rex, "group", "").await;
    let m = &b["messages"][0];
    for field in [
        "id",
        "senderId",
        "senderType",
        "content",
        "createdAt",
        "sender",
        "mentions",
        "replyTo",
        "shouldRespond",
    ] {
        assert!(m.get(field).is_some(), "missing {field}: {m}");
    }
    assert_eq!(m["id"], posted["id"]);
    assert_eq!(m["senderId"], "ana");
    assert_eq!(m["senderType"], "USER");
    assert_eq!(m["content"], "hi @Rex and @Bay Brain, see Rexford");
    assert_eq!(
        m["sender"],
        json!({"id": "ana", "name": "Ana", "kind": "user", "role": "member"})
    );
    let mentions: BTreeSet<&str> = m["mentions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(mentions, BTreeSet::from(["brain", "rex"]));
    assert_eq!(m["replyTo"], Value::Null);
    assert_eq!(m["shouldRespond"], true);
    let created = m["createdAt"].as_str().unwrap();
    assert!(
        created.ends_with('Z') && created.contains('T') && created.len() >= 20,
        "{created}"
    );
    // The envelope is the same one /context returns.
    let (_, ctx) = gw.get(&w.rex, "/conversations/group/context").await;
    assert_eq!(b["context"], ctx);
    // An agent's own message: AGENT sender, its role, never a prompt to itself.
    post_ok(&gw, &w.rex, "group", "on it").await;
    let b = messages(&gw, &w.rex, "group", "").await;
    let own = &b["messages"][1];
    assert_eq!(own["senderType"], "AGENT");
    assert_eq!(
        own["sender"],
        json!({"id": "rex", "name": "Rex", "kind": "agent", "role": "member"})
    );
    assert_eq!(own["shouldRespond"], false);
}

#[tokio::test]
async fn a_sender_who_left_resolves_with_a_null_role() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    post_ok(&gw, &w.ben, "group", "I am leaving").await;
    post_ok(&gw, &w.ana, "group", "bye Ben").await;
    gw.remove_member("b1", "group", "ben").await;

    let b = messages(&gw, &w.rex, "group", "").await;
    assert_eq!(
        b["messages"][0]["sender"],
        json!({"id": "ben", "name": "Ben", "kind": "user", "role": null})
    );
    assert_eq!(b["messages"][0]["senderId"], "ben");
    assert_eq!(
        b["messages"][1]["sender"],
        json!({"id": "ana", "name": "Ana", "kind": "user", "role": "member"})
    );
    assert!(
        !b["context"]["participants"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["id"] == "ben"),
        "ben is off the roster"
    );
    // Having left, ben can no longer read or write here.
    let (s, body) = gw.get(&w.ben, "/conversations/group/messages").await;
    assert_error(s, &body, 403, "NOT_PARTICIPANT");
    let (s, body) = gw.post_message(&w.ben, "group", "still here?").await;
    assert_error(s, &body, 404, "NOT_FOUND");
}

// ---------------------------------------------------------------- sending

#[tokio::test]
async fn a_sent_message_comes_back_201_in_the_get_shape() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    let (s, posted) = gw
        .post_json(
            &w.rex,
            "/conversations/group/messages",
            json!({"content": "hello @Scout", "metadata": {"k": "v"}}),
        )
        .await;
    assert_eq!(s, 201, "{posted}");
    assert_eq!(posted["content"], "hello @Scout");
    assert_eq!(posted["senderId"], "rex");
    assert_eq!(posted["mentions"], json!(["scout"]));
    assert_eq!(posted["shouldRespond"], false);
    assert_eq!(posted["metadata"]["k"], "v");
    let b = messages(&gw, &w.rex, "group", "").await;
    assert_eq!(b["messages"].as_array().unwrap().len(), 1);
    assert_eq!(b["messages"][0], posted, "POST answer equals the GET entry");
}

#[tokio::test]
async fn reply_to_quotes_the_target_with_an_80_char_preview() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    // 100 characters, several of them multi-byte.
    let long: String = "é🦀ab".repeat(25);
    assert_eq!(long.chars().count(), 100);
    let target = post_ok(&gw, &w.ana, "group", &long).await;
    let (s, reply) = gw
        .post_json(
            &w.rex,
            "/conversations/group/messages",
            json!({"content": "answering", "replyToMessageId": target["id"]}),
        )
        .await;
    assert_eq!(s, 201, "{reply}");
    let expected = json!({
        "id": target["id"],
        "senderId": "ana",
        "senderType": "USER",
        "preview": long.chars().take(80).collect::<String>(),
    });
    assert_eq!(reply["replyTo"], expected);
    let b = messages(&gw, &w.scout, "group", "").await;
    assert_eq!(b["messages"][1]["replyTo"], expected);
    assert_eq!(b["messages"][0]["replyTo"], Value::Null);

    // A short target is quoted whole; an agent target has senderType AGENT.
    let (s, reply2) = gw
        .post_json(
            &w.ana,
            "/conversations/group/messages",
            json!({"content": "thanks", "replyToMessageId": reply["id"]}),
        )
        .await;
    assert_eq!(s, 201, "{reply2}");
    assert_eq!(
        reply2["replyTo"],
        json!({"id": reply["id"], "senderId": "rex", "senderType": "AGENT", "preview": "answering"})
    );
}

#[tokio::test]
async fn a_reply_target_outside_the_conversation_is_refused() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    let in_dm = post_ok(&gw, &w.ana, "dm", "private").await;
    for target in [in_dm["id"].clone(), json!("msg_does_not_exist")] {
        let (s, b) = gw
            .post_json(
                &w.rex,
                "/conversations/group/messages",
                json!({"content": "re", "replyToMessageId": target}),
            )
            .await;
        assert_error(s, &b, 400, "INVALID_REPLY_TARGET");
    }
    let b = messages(&gw, &w.rex, "group", "").await;
    assert_eq!(b["messages"], json!([]), "nothing was stored");
}

#[tokio::test]
async fn content_must_be_one_to_32000_characters() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    let exactly: String = format!("{}{}🦀", "é".repeat(16_000), "a".repeat(15_999));
    assert_eq!(exactly.chars().count(), 32_000);
    assert!(exactly.len() > 32_000, "more bytes than chars");
    let over_ascii = "a".repeat(32_001);
    let over_multibyte = "é".repeat(32_001);
    for bad in [
        json!(""),
        json!("   "),
        json!(" \n\t \u{3000}"),
        json!(over_ascii),
        json!(over_multibyte),
        json!(5),
        json!(null),
        json!(["a"]),
    ] {
        let (s, b) = gw
            .post_json(
                &w.rex,
                "/conversations/group/messages",
                json!({"content": bad}),
            )
            .await;
        let shown: String = bad.to_string().chars().take(20).collect();
        assert_eq!(s, 400, "{shown}: {b}");
        assert_eq!(b["code"], "INVALID_CONTENT", "{shown}: {b}");
        assert_error(s, &b, 400, "INVALID_CONTENT");
    }
    let b = messages(&gw, &w.rex, "group", "").await;
    assert_eq!(b["messages"], json!([]), "rejections store nothing");

    let (s, posted) = gw.post_message(&w.rex, "group", &exactly).await;
    assert_eq!(s, 201, "exactly 32,000 chars: {}", posted["message"]);
    let b = messages(&gw, &w.ana, "group", "").await;
    assert_eq!(b["messages"][0]["content"].as_str().unwrap(), exactly);
}

#[tokio::test]
async fn malformed_bodies_get_json_errors() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    let url = gw.url(&format!("{API}/conversations/group/messages"));

    for raw in ["{", "not json", "{\"content\": }", ""] {
        let req = gw
            .http
            .post(&url)
            .bearer_auth(&w.rex)
            .header("Content-Type", "application/json")
            .body(raw);
        let (s, _, b) = gw.send_raw(req).await;
        assert_error(s, &b, 400, "INVALID_JSON");
    }
    // Valid JSON without the required field.
    let (s, b) = gw
        .post_json(
            &w.rex,
            "/conversations/group/messages",
            json!({"text": "hi"}),
        )
        .await;
    assert_error(s, &b, 400, "INVALID_JSON");

    for ct in ["text/plain", "application/x-www-form-urlencoded"] {
        let req = gw
            .http
            .post(&url)
            .bearer_auth(&w.rex)
            .header("Content-Type", ct)
            .body(r#"{"content":"hi"}"#);
        let (s, _, b) = gw.send_raw(req).await;
        assert_error(s, &b, 415, "UNSUPPORTED_MEDIA_TYPE");
    }

    // A key given twice: refused, not the last one silently kept.
    for raw in [
        r#"{"content":"a","content":"b"}"#,
        r#"{"content":"a","metadata":{"k":1,"k":2}}"#,
    ] {
        let req = gw
            .http
            .post(&url)
            .bearer_auth(&w.rex)
            .header("Content-Type", "application/json")
            .body(raw);
        let (s, _, b) = gw.send_raw(req).await;
        assert_error(s, &b, 400, "INVALID_JSON");
        assert!(
            b["message"].as_str().unwrap().contains("duplicate key"),
            "{b}"
        );
    }

    // 600 KB: above the 512 KiB default body limit.
    let huge = json!({"content": "x".repeat(600 * 1024)}).to_string();
    let req = gw
        .http
        .post(&url)
        .bearer_auth(&w.rex)
        .header("Content-Type", "application/json")
        .body(huge);
    let (s, _, b) = gw.send_raw(req).await;
    assert_error(s, &b, 413, "PAYLOAD_TOO_LARGE");

    let b = messages(&gw, &w.rex, "group", "").await;
    assert_eq!(b["messages"], json!([]), "nothing was stored");
}

// ------------------------------------------------------- access control

/// (status, body) of the four conversation routes for `token` on `conversation`.
async fn four_routes(gw: &Gateway, token: &str, conversation: &str) -> Vec<(u16, Value)> {
    let mut out = Vec::new();
    out.push(
        gw.get(token, &format!("/conversations/{conversation}/context"))
            .await,
    );
    out.push(
        gw.get(token, &format!("/conversations/{conversation}/messages"))
            .await,
    );
    out.push(gw.post_message(token, conversation, "let me in").await);
    out.push(
        gw.post_json(
            token,
            &format!("/conversations/{conversation}/typing"),
            json!({}),
        )
        .await,
    );
    out
}

#[tokio::test]
async fn non_participants_get_403_on_reads_and_404_on_writes_like_unknown_ids() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    post_ok(&gw, &w.ana, "dm", "secret").await;
    for token in [&w.brain, &w.ben] {
        let member_of_none = four_routes(&gw, token, "dm").await;
        let (s, b) = &member_of_none[0];
        assert_error(*s, b, 403, "NOT_PARTICIPANT");
        let (s, b) = &member_of_none[1];
        assert_error(*s, b, 403, "NOT_PARTICIPANT");
        let (s, b) = &member_of_none[2];
        assert_error(*s, b, 404, "NOT_FOUND");
        let (s, b) = &member_of_none[3];
        assert_error(*s, b, 404, "NOT_FOUND");

        let unknown = four_routes(&gw, token, "no-such-conversation").await;
        assert_eq!(
            member_of_none, unknown,
            "a non-member conversation must be indistinguishable from an unknown id"
        );
    }
    // Nothing leaked into the DM.
    let b = messages(&gw, &w.rex, "dm", "").await;
    assert_eq!(ids(&b["messages"]).len(), 1);
}

#[tokio::test]
async fn another_bays_conversations_behave_exactly_like_unknown_ids() {
    let gw = Gateway::spawn().await;
    let one = World::create(&gw, "one").await;
    let two = World::create(&gw, "two").await;
    // A conversation only Bay "two" has, with members whose ids exist in Bay "one" too.
    gw.create_conversation("two", "only-two", "GROUP", &["ana", "rex"])
        .await;
    post_ok(&gw, &two.ana, "only-two", "bay two only").await;

    let foreign = four_routes(&gw, &one.rex, "only-two").await;
    let unknown = four_routes(&gw, &one.rex, "no-such-conversation").await;
    assert_eq!(foreign, unknown);
    let (s, b) = &foreign[0];
    assert_error(*s, b, 403, "NOT_PARTICIPANT");

    // Same conversation id "group" in both Bays: separate namespaces.
    let a = post_ok(&gw, &one.ana, "group", "hello from bay one").await;
    let b2 = post_ok(&gw, &two.ana, "group", "hello from bay two").await;
    let m1 = messages(&gw, &one.rex, "group", "").await;
    let m2 = messages(&gw, &two.rex, "group", "").await;
    assert_eq!(ids(&m1["messages"]), [a["id"].as_str().unwrap()]);
    assert_eq!(ids(&m2["messages"]), [b2["id"].as_str().unwrap()]);
    assert_eq!(m1["messages"][0]["content"], "hello from bay one");
    assert_eq!(m2["messages"][0]["content"], "hello from bay two");
    // A reply target from the other Bay's "group" is not a message of this one.
    let (s, body) = gw
        .post_json(
            &one.rex,
            "/conversations/group/messages",
            json!({"content": "re", "replyToMessageId": b2["id"]}),
        )
        .await;
    assert_error(s, &body, 400, "INVALID_REPLY_TARGET");
    // Each Bay lists only its own conversations.
    let (_, list) = gw.get(&one.ana, "/conversations").await;
    assert_eq!(list.as_array().unwrap().len(), 2, "{list}");
}

#[tokio::test]
async fn typing_answers_ok_with_the_configured_ttl_for_members_only() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    for (token, conversation) in [(&w.rex, "group"), (&w.rex, "dm"), (&w.ana, "dm")] {
        let req = gw
            .http
            .post(gw.url(&format!("{API}/conversations/{conversation}/typing")))
            .bearer_auth(token);
        let (s, _, b) = gw.send_raw(req).await;
        assert_eq!(s, 200, "{b}");
        assert_eq!(b, json!({"ok": true, "ttlMs": 5000}));
    }
    // Scout is not in the DM: no indicator, and the id is not confirmed.
    let (s, b) = gw
        .post_json(&w.scout, "/conversations/dm/typing", json!({}))
        .await;
    assert_error(s, &b, 404, "NOT_FOUND");
    // The TTL is the setting's, not a constant.
    let gw =
        Gateway::spawn_with(Opts::default().env("SWITCHBOARD_TIMING__TYPING_TTL", "1500ms")).await;
    let w = World::create(&gw, "b1").await;
    let (s, b) = gw
        .post_json(&w.rex, "/conversations/dm/typing", json!({}))
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b, json!({"ok": true, "ttlMs": 1500}));
}

/// A typing indicator lives for its TTL and then expires on its own (no
/// stop call, protocol §11). Indicators are not fanned out; what shows one
/// is that it keeps its conversation's actor alive past the actor's idle
/// timeout (`switchboard_actors{kind="conversation"}`) until it expires.
#[tokio::test]
async fn a_typing_indicator_keeps_its_conversation_until_its_ttl_expires() {
    let ttl = Duration::from_secs(6);
    let gw = Gateway::spawn_with(
        Opts::default()
            .env("SWITCHBOARD_TIMING__ACTOR_IDLE_TIMEOUT", "1s")
            .env("SWITCHBOARD_TIMING__TYPING_TTL", "6s"),
    )
    .await;
    let w = World::create(&gw, "b1").await;
    let gauge = "switchboard_actors{kind=\"conversation\"}";
    // Start from no conversation actor at all: they stop after 1 s idle.
    assert!(
        eventually(Duration::from_secs(20), || async {
            gw.metric(gauge).await == 0.0
        })
        .await,
        "conversation actors did not go idle"
    );
    // Control: a post alone keeps the actor only for the idle timeout.
    let started = Instant::now();
    post_ok(&gw, &w.ana, "group", "no typing here").await;
    assert!(
        eventually(Duration::from_secs(20), || async {
            gw.metric(gauge).await == 0.0
        })
        .await,
        "the idle conversation actor did not stop"
    );
    assert!(
        started.elapsed() < ttl,
        "idle stop took {:?}",
        started.elapsed()
    );

    let started = Instant::now();
    let (s, b) = gw
        .post_json(&w.rex, "/conversations/dm/typing", json!({}))
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(gw.metric(gauge).await, 1.0);
    assert!(
        eventually(Duration::from_secs(30), || async {
            gw.metric(gauge).await == 0.0
        })
        .await,
        "the typing indicator never expired"
    );
    // Timed from before the request: the indicator cannot have started
    // earlier, so this lower bound holds on any machine.
    assert!(
        started.elapsed() >= ttl,
        "the conversation stopped {:?} after typing, before the {ttl:?} TTL",
        started.elapsed()
    );
}

#[tokio::test]
async fn the_agent_budget_answers_429_with_retry_after() {
    let gw = Gateway::spawn_with(
        Opts::default().env("SWITCHBOARD_LIMITS__AGENT_REQUESTS_PER_MINUTE", "5"),
    )
    .await;
    let w = World::create(&gw, "b1").await;
    let paths = [
        "/me",
        "/conversations",
        "/conversations/group/context",
        "/conversations/group/messages",
        "/me",
    ];
    for p in paths {
        let (s, b) = gw.get(&w.rex, p).await;
        assert_eq!(s, 200, "{p}: {b}");
    }
    for attempt in 0..2 {
        let req = gw
            .http
            .get(gw.url(&format!("{API}/me")))
            .bearer_auth(&w.rex);
        let (s, headers, b) = gw.send_raw(req).await;
        assert_error(s, &b, 429, "RATE_LIMITED");
        let retry: u64 = headers
            .get("retry-after")
            .unwrap_or_else(|| panic!("attempt {attempt}: no Retry-After"))
            .to_str()
            .unwrap()
            .parse()
            .expect("Retry-After in whole seconds");
        assert!((1..=60).contains(&retry), "Retry-After {retry}");
    }
    // Sends draw on the same budget.
    let (s, b) = gw.post_message(&w.rex, "group", "hi").await;
    assert_error(s, &b, 429, "RATE_LIMITED");
    // The budget is per token.
    let (s, b) = gw.get(&w.brain, "/me").await;
    assert_eq!(s, 200, "{b}");
}

/// A send counts once against the budget whether the append takes it (a
/// stored post; with Redis the append script takes it) or the send is
/// refused before the append (a bad body, not a member): the same bucket
/// as every other call, and a refused send stores nothing.
#[tokio::test]
async fn every_send_counts_once_against_the_budget() {
    let gw = Gateway::spawn_with(
        Opts::default().env("SWITCHBOARD_LIMITS__AGENT_REQUESTS_PER_MINUTE", "4"),
    )
    .await;
    let w = World::create(&gw, "b1").await;
    let (s, b) = gw.post_message(&w.rex, "group", "counted").await;
    assert_eq!(s, 201, "{b}");
    let (s, b) = gw
        .post_json(
            &w.rex,
            "/conversations/group/messages",
            json!({"content": "   "}),
        )
        .await;
    assert_error(s, &b, 400, "INVALID_CONTENT");
    let (s, b) = gw.post_message(&w.rex, "no-such-room", "x").await;
    assert_eq!(s, 404, "{b}");
    let (s, b) = gw.get(&w.rex, "/me").await;
    assert_eq!(s, 200, "{b}");
    // Four calls: spent, for sends and everything else alike.
    let (s, b) = gw.post_message(&w.rex, "group", "refused").await;
    assert_error(s, &b, 429, "RATE_LIMITED");
    let (s, b) = gw
        .post_json(
            &w.rex,
            "/conversations/group/messages",
            json!({"content": "   "}),
        )
        .await;
    assert_error(s, &b, 429, "RATE_LIMITED");
    let (s, b) = gw.get(&w.rex, "/me").await;
    assert_error(s, &b, 429, "RATE_LIMITED");
    let (s, b) = gw.get(&w.ana, "/conversations/group/messages").await;
    assert_eq!(s, 200, "{b}");
    let texts: Vec<&str> = b["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert!(texts.contains(&"counted"), "{texts:?}");
    assert!(!texts.contains(&"refused"), "{texts:?}");
}

/// Human (`bay_u_`) tokens have the same two buckets as agents, per token:
/// the `/updates` bucket (which WebSocket connects also draw on) and the
/// budget every other agent API call draws on.
#[tokio::test]
async fn human_tokens_are_rate_limited_like_agents_per_token() {
    let gw = Gateway::spawn_with(
        Opts::default()
            .env("SWITCHBOARD_LIMITS__AGENT_REQUESTS_PER_MINUTE", "3")
            .env("SWITCHBOARD_LIMITS__UPDATES_PER_MINUTE", "2"),
    )
    .await;
    let w = World::create(&gw, "b1").await;
    assert!(w.ana.starts_with("bay_u_") && w.ben.starts_with("bay_u_"));
    post_ok(&gw, &w.ana, "group", "one").await;
    let (s, b) = gw.get(&w.ana, "/me").await;
    assert_eq!(s, 200, "{b}");
    post_ok(&gw, &w.ana, "group", "three").await;
    for attempt in 0..2 {
        let req = gw
            .http
            .post(gw.url(&format!("{API}/conversations/group/messages")))
            .bearer_auth(&w.ana)
            .json(&json!({"content": "four"}));
        let (s, headers, b) = gw.send_raw(req).await;
        assert_error(s, &b, 429, "RATE_LIMITED");
        let retry: u64 = headers
            .get("retry-after")
            .unwrap_or_else(|| panic!("attempt {attempt}: no Retry-After"))
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        // 3 a minute: the next call is at most 20 s away.
        assert!((1..=20).contains(&retry), "Retry-After {retry}");
    }
    // Per token: the other human still posts.
    post_ok(&gw, &w.ben, "group", "ben is fine").await;

    // The /updates bucket, shared with WebSocket connects.
    let (s, b, _) = gw.updates_full(&w.ben, None, Some("1")).await;
    assert_eq!(s, 200, "{b}");
    let mut ws = gw
        .ws_try(WsAuth::Header(&w.ben))
        .await
        .unwrap_or_else(|e| panic!("second connect refused: {e:?}"));
    ws.hello(None).await;
    assert_eq!(ws.next_json().await["t"], "ready");
    ws.close().await;
    let (s, b, headers) = gw.updates_full(&w.ben, None, Some("1")).await;
    assert_error(s, &b, 429, "UPDATES_RATE_LIMITED");
    assert!(headers.contains_key("retry-after"), "{headers:?}");
    match gw.ws_try_full(WsAuth::Header(&w.ben)).await {
        Ok(_) => panic!("a third connect in a minute was upgraded"),
        Err((s, retry, b)) => {
            assert_error(s, &b, 429, "UPDATES_RATE_LIMITED");
            assert!(retry.is_some(), "no Retry-After");
        }
    }
}

// ---------------------------------------------------------------- routing

#[tokio::test]
async fn should_respond_in_a_dm_and_on_a_group_mention() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;

    let human = post_ok(&gw, &w.ana, "dm", "can you check the build").await;
    let own = post_ok(&gw, &w.rex, "dm", "checking").await;
    let rex_view = messages(&gw, &w.rex, "dm", "").await;
    assert_eq!(rex_view["messages"][0]["id"], human["id"]);
    assert_eq!(
        rex_view["messages"][0]["shouldRespond"], true,
        "DM human message"
    );
    assert_eq!(rex_view["messages"][1]["id"], own["id"]);
    assert_eq!(
        rex_view["messages"][1]["shouldRespond"], false,
        "own message"
    );
    assert_eq!(own["shouldRespond"], false);

    let m = post_ok(&gw, &w.ana, "group", "@Rex please review").await;
    assert_eq!(m["mentions"], json!(["rex"]));
    for (token, expected) in [(&w.rex, true), (&w.brain, false), (&w.scout, false)] {
        let b = messages(&gw, token, "group", "").await;
        assert_eq!(b["messages"][0]["id"], m["id"]);
        assert_eq!(
            b["messages"][0]["shouldRespond"], expected,
            "{}",
            b["context"]["you"]
        );
    }
    // An unaddressed group message under MENTIONS routes to nobody.
    post_ok(&gw, &w.ben, "group", "morning all").await;
    for token in [&w.rex, &w.brain, &w.scout] {
        let b = messages(&gw, token, "group", "").await;
        assert_eq!(b["messages"][1]["shouldRespond"], false);
    }
}

#[tokio::test]
async fn unknown_routes_are_404_json() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    for path in [
        "/nope",
        "/api/agent-api/nope",
        "/api/agent-api/conversations/group/nope",
        "/api/agent-api/",
        "/api",
    ] {
        let req = gw.http.get(gw.url(path)).bearer_auth(&w.rex);
        let (s, headers, b) = gw.send_raw(req).await;
        assert_error(s, &b, 404, "NOT_FOUND");
        assert!(
            headers
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("application/json")),
            "{path}: {headers:?}"
        );
    }
    // A known path with the wrong method still answers with the JSON error body.
    let req = gw
        .http
        .delete(gw.url("/api/agent-api/me"))
        .bearer_auth(&w.rex);
    let (s, _, b) = gw.send_raw(req).await;
    assert!(s == 404 || s == 405, "{s}: {b}");
    assert_eq!(keys(&b), ["code", "error", "message"], "{b}");
}

#[tokio::test]
async fn senders_cannot_plant_server_authored_metadata() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    // No agent named: a sender-supplied addressedAgents must not survive.
    let (s, m) = gw
        .post_json(
            &w.ana,
            "/conversations/group/messages",
            json!({"content": "hello all", "metadata": {"addressedAgents": ["scout"], "x": 1}}),
        )
        .await;
    assert_eq!(s, 201, "{m}");
    assert_eq!(m["metadata"], json!({"x": 1}));
    // An agent naming another in prose addresses nobody, whatever it claims.
    let (s, m) = gw
        .post_json(
            &w.rex,
            "/conversations/group/messages",
            json!({"content": "Scout knows", "metadata": {"addressedAgents": ["scout"]}}),
        )
        .await;
    assert_eq!(s, 201, "{m}");
    assert!(m["metadata"].get("addressedAgents").is_none(), "{m}");
    // A person naming an agent: the server's own resolution is what is stored.
    let (s, m) = gw
        .post_json(
            &w.ana,
            "/conversations/group/messages",
            json!({"content": "Rex, are you there?", "metadata": {"addressedAgents": ["scout"]}}),
        )
        .await;
    assert_eq!(s, 201, "{m}");
    assert_eq!(m["metadata"]["addressedAgents"], json!(["rex"]));
    let b = messages(&gw, &w.scout, "group", "").await;
    for msg in b["messages"].as_array().unwrap() {
        assert_eq!(msg["shouldRespond"], false, "{msg}");
        assert_ne!(
            msg["metadata"]["addressedAgents"],
            json!(["scout"]),
            "{msg}"
        );
    }
}

/// The write path caches each conversation's roster; a member added after
/// the conversation was used must still be able to post at once, and one
/// removed must be refused at once, with no other traffic in between.
#[tokio::test]
async fn roster_changes_apply_to_sends_at_once_after_the_conversation_was_used() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    let zed = gw.create_participant("b1", "zed", "user", "Zed").await;
    // Warm the conversation's write path.
    post_ok(&gw, &w.ana, "group", "warm").await;
    let (s, b) = gw.post_message(&zed, "group", "before joining").await;
    assert_error(s, &b, 404, "NOT_FOUND");

    gw.add_member("b1", "group", "zed").await;
    let (s, b) = gw.post_message(&zed, "group", "just added").await;
    assert_eq!(s, 201, "an added member is refused by a stale cache: {b}");

    gw.remove_member("b1", "group", "zed").await;
    let (s, b) = gw.post_message(&zed, "group", "just removed").await;
    assert_error(s, &b, 404, "NOT_FOUND");
    // The members who stayed post as before.
    post_ok(&gw, &w.ana, "group", "still here").await;
}

/// `usage` on a send (protocol §11): validated, stored with the message,
/// shown on REST, part of the idempotency fingerprint, and gone with the
/// content when the message is deleted.
#[tokio::test]
async fn usage_is_validated_stored_and_shown() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    let usage = json!({"model": "deepseek-chat", "inputTokens": 812, "outputTokens": 64});
    let send = |body: Value, key: Option<&'static str>| {
        let (gw, token) = (&gw, w.rex.clone());
        async move {
            let mut req = gw
                .http
                .post(gw.url(&format!("{API}/conversations/group/messages")))
                .bearer_auth(token)
                .json(&body);
            if let Some(key) = key {
                req = req.header("Idempotency-Key", key);
            }
            let (s, _, b) = gw.send_raw(req).await;
            (s, b)
        }
    };
    let (s, sent) = send(json!({"content": "done", "usage": usage}), Some("k-1")).await;
    assert_eq!(s, 201, "{sent}");
    assert_eq!(sent["usage"], usage);
    let (_, page) = gw.get(&w.ana, "/conversations/group/messages").await;
    let shown = &page["messages"][0];
    assert_eq!(
        (&shown["id"], &shown["usage"]),
        (&sent["id"], &usage),
        "{page}"
    );
    // A message sent without it shows `null`.
    let (s, plain) = send(json!({"content": "plain"}), None).await;
    assert_eq!((s, &plain["usage"]), (201, &Value::Null), "{plain}");

    // The fingerprint covers it: the same key with other usage is refused,
    // with the same usage it replays the first message.
    let other = json!({"model": "deepseek-chat", "inputTokens": 813, "outputTokens": 64});
    let (s, body) = send(json!({"content": "done", "usage": other}), Some("k-1")).await;
    assert_error(s, &body, 409, "IDEMPOTENCY_KEY_REUSED");
    let (s, body) = send(json!({"content": "done"}), Some("k-1")).await;
    assert_error(s, &body, 409, "IDEMPOTENCY_KEY_REUSED");
    let (s, again) = send(json!({"content": "done", "usage": usage}), Some("k-1")).await;
    assert_eq!((s, &again["id"]), (201, &sent["id"]), "{again}");

    // Bad shapes: 400 naming the field, nothing stored.
    for (bad, field) in [
        (json!("812 tokens"), "usage"),
        (json!([812]), "usage"),
        (json!({"inputTokens": -1}), "usage.inputTokens"),
        (json!({"outputTokens": "64"}), "usage.outputTokens"),
        (json!({"inputTokens": 1.5}), "usage.inputTokens"),
        (json!({"model": 4}), "usage.model"),
    ] {
        let (s, body) = send(json!({"content": "x", "usage": bad}), None).await;
        assert_error(s, &body, 400, "INVALID_REQUEST");
        assert!(body["message"].as_str().unwrap().contains(field), "{body}");
    }
    let (_, page) = gw.get(&w.ana, "/conversations/group/messages").await;
    assert_eq!(page["messages"].as_array().unwrap().len(), 2, "{page}");

    // Deleting removes it with the content.
    let mid = sent["id"].as_str().unwrap();
    let res = gw
        .http
        .delete(gw.url(&format!("{API}/conversations/group/messages/{mid}")))
        .bearer_auth(&w.rex)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 204);
    let (_, page) = gw.get(&w.ana, "/conversations/group/messages").await;
    assert_eq!(page["messages"][0]["usage"], Value::Null, "{page}");
}
