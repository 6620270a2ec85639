//! End-to-end tests of the Bay directory (protocol §9, §11): `GET /agents`
//! with presence (one node, and two nodes on one Redis), and
//! `POST /conversations` opening an AGENT_CHAT, against real `switchboard`
//! processes.

mod common;

use common::*;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Feeds refresh presence every `timing.presence_interval` (2 s), and a
/// record lives three intervals.
const PRESENCE_TTL: Duration = Duration::from_secs(6);
/// How long a participant may take to show offline: a record's life plus
/// a margin (on a live node it takes the linger, 2.5 s).
const OFFLINE_PATIENCE: Duration = Duration::from_secs(12);
/// A new session is published at once, not at the next tick.
const ONLINE_PATIENCE: Duration = Duration::from_secs(4);

/// The `/agents` answer for `token` on `gw`; asserts 200.
async fn agents(gw: &Gateway, token: &str) -> Value {
    let (s, b) = gw.get(token, "/agents").await;
    assert_eq!(s, 200, "{b}");
    b
}

/// `status` of `agent` in the `/agents` answer for `token` on `gw`.
async fn status_of(gw: &Gateway, token: &str, agent: &str) -> String {
    let b = agents(gw, token).await;
    b["agents"]
        .as_array()
        .unwrap_or_else(|| panic!("no agents array: {b}"))
        .iter()
        .find(|a| a["id"] == agent)
        .and_then(|a| a["status"].as_str())
        .unwrap_or_else(|| panic!("{agent} not listed: {b}"))
        .to_owned()
}

/// Waits until `agent` shows `want` on `gw` (asked as `token`).
async fn wait_for_status(gw: &Gateway, token: &str, agent: &str, want: &str, patience: Duration) {
    let shown = eventually(patience, || async {
        status_of(gw, token, agent).await == want
    })
    .await;
    assert!(
        shown,
        "{agent} did not show {want} within {patience:?}: {}",
        agents(gw, token).await
    );
}

fn agent(id: &str, name: &str, description: Value, status: &str) -> Value {
    json!({
        "id": id,
        "name": name,
        "description": description,
        "avatar": null,
        "status": status,
        "presence": status,
        "capabilities": [],
        "connector": null,
    })
}

// ---------------------------------------------------------------- GET /agents

#[tokio::test]
async fn agents_lists_exactly_the_other_agents_of_the_bay_with_exact_fields() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    let (s, b) = gw
        .admin(
            reqwest::Method::POST,
            "/bays/b1/participants",
            Some(json!({"id": "alpha", "kind": "agent", "name": "Alpha", "description": "Answers billing questions"})),
        )
        .await;
    assert_eq!(s, 201, "{b}");
    // Another Bay's agent never shows.
    gw.create_bay("b2").await;
    gw.create_participant("b2", "other", "agent", "Other").await;

    let listed = agents(&gw, &w.rex).await;
    assert_eq!(
        listed,
        json!({"agents": [
            agent("alpha", "Alpha", json!("Answers billing questions"), "offline"),
            agent("brain", "Bay Brain", Value::Null, "offline"),
            agent("scout", "Scout", Value::Null, "offline"),
        ]}),
        "sorted by id, without the caller, users or other Bays' agents"
    );

    let listed = agents(&gw, &w.scout).await;
    let ids: Vec<&str> = listed["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["alpha", "brain", "rex"]);

    // A user token sees every agent of its Bay.
    let listed = agents(&gw, &w.ana).await;
    let ids: Vec<&str> = listed["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["alpha", "brain", "rex", "scout"]);

    let res = gw
        .http
        .get(gw.url("/api/agent-api/agents"))
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let body: Value = res.json().await.unwrap();
    assert_error(status, &body, 401, "UNAUTHORIZED");
}

#[tokio::test]
async fn an_agent_with_an_open_ws_shows_online_then_offline_after_it_disconnects() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    assert_eq!(status_of(&gw, &w.rex, "brain").await, "offline");

    let ws = gw.ws_ready(&w.brain, None).await;
    wait_for_status(&gw, &w.rex, "brain", "online", ONLINE_PATIENCE).await;
    assert_eq!(status_of(&gw, &w.rex, "scout").await, "offline");
    // A user's session does not make anyone else online, and users are
    // not listed.
    let ana_ws = gw.ws_ready(&w.ana, None).await;
    let listed = agents(&gw, &w.rex).await;
    assert!(
        !listed["agents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["id"] == "ana"),
        "{listed}"
    );

    ws.close().await;
    wait_for_status(&gw, &w.rex, "brain", "offline", OFFLINE_PATIENCE).await;
    ana_ws.close().await;
}

#[tokio::test]
async fn an_updates_client_stays_online_between_its_polls() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;

    // Bay Brain polls in a loop with a gap between requests as long as
    // the requests themselves: half of the time it holds no session.
    let polling = Arc::new(AtomicBool::new(true));
    let poller = {
        let (addr, token, polling) = (gw.addr.clone(), w.brain.clone(), polling.clone());
        tokio::spawn(async move {
            let http = test_http();
            let mut cursor: Option<String> = None;
            while polling.load(Ordering::Relaxed) {
                let (s, body, _) = poll_at(&http, &addr, &token, cursor.as_deref(), "1")
                    .await
                    .expect("poll reached the server");
                assert_eq!(s, 200, "{body}");
                cursor = body["cursor"].as_str().map(str::to_owned);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    };
    wait_for_status(&gw, &w.rex, "brain", "online", ONLINE_PATIENCE).await;
    // Over more than two presence intervals it never shows offline.
    let until = tokio::time::Instant::now() + Duration::from_secs(12);
    while tokio::time::Instant::now() < until {
        assert_eq!(
            status_of(&gw, &w.rex, "brain").await,
            "online",
            "an /updates client flickered offline between two polls"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    polling.store(false, Ordering::Relaxed);
    poller.await.unwrap();
    wait_for_status(&gw, &w.rex, "brain", "offline", OFFLINE_PATIENCE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_on_one_node_shows_online_on_another() {
    let redis = RedisServer::start(false);
    let a = Gateway::spawn_with(Opts::default().redis(&redis.url())).await;
    let b = Gateway::spawn_with(Opts::default().redis(&redis.url())).await;
    let w = World::create(&a, "b1").await;
    assert_eq!(status_of(&b, &w.rex, "brain").await, "offline");

    let ws = a.ws_ready(&w.brain, None).await;
    wait_for_status(&b, &w.rex, "brain", "online", ONLINE_PATIENCE).await;
    // And an /updates client on node B shows on node A.
    let (s, body) = b.updates(&w.scout, None, "1").await;
    assert_eq!(s, 200, "{body}");
    wait_for_status(&a, &w.rex, "scout", "online", ONLINE_PATIENCE).await;

    ws.close().await;
    wait_for_status(&b, &w.rex, "brain", "offline", OFFLINE_PATIENCE).await;
    // Scout polled once and stopped: it goes offline too.
    wait_for_status(
        &a,
        &w.rex,
        "scout",
        "offline",
        PRESENCE_TTL + Duration::from_secs(5),
    )
    .await;
}

// ---------------------------------------------------------------- POST /conversations

/// `POST /conversations` as `token`.
async fn open_chat(gw: &Gateway, token: &str, body: Value) -> (u16, Value) {
    gw.post_json(token, "/conversations", body).await
}

/// Ids of the conversations `token` lists.
async fn conversation_ids(gw: &Gateway, token: &str) -> Vec<String> {
    let (s, b) = gw.get(token, "/conversations").await;
    assert_eq!(s, 200, "{b}");
    let mut ids: Vec<String> = b
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn an_agent_opens_an_agent_chat_with_one_user() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;

    let (s, created) = open_chat(
        &gw,
        &w.rex,
        json!({"title": "Refund for order 1042", "userIds": ["ben"]}),
    )
    .await;
    assert_eq!(s, 201, "{created}");
    let id = id_of(&created);
    assert!(id.starts_with("c_"), "{id}");
    assert_eq!(
        created,
        json!({
            "id": id,
            "type": "AGENT_CHAT",
            "title": "Refund for order 1042",
            "members": [
                {"participantId": "rex", "role": "member"},
                {"participantId": "ben", "role": "member"},
            ],
        })
    );
    assert!(conversation_ids(&gw, &w.rex).await.contains(&id));
    assert!(conversation_ids(&gw, &w.ben).await.contains(&id));
    assert!(!conversation_ids(&gw, &w.ana).await.contains(&id));
    let (s, context) = gw
        .get(&w.ben, &format!("/conversations/{id}/context"))
        .await;
    assert_eq!(s, 200, "{context}");
    assert_eq!(context["conversation"]["type"], "AGENT_CHAT", "{context}");

    // Without a title (absent or null).
    for (agent, body) in [
        (&w.brain, json!({"userIds": ["ben"]})),
        (&w.scout, json!({"title": null, "userIds": ["ben"]})),
    ] {
        let (s, other) = open_chat(&gw, agent, body).await;
        assert_eq!(s, 201, "{other}");
        assert_eq!(other["title"], Value::Null, "{other}");
        assert_ne!(id_of(&other), id);
    }
}

#[tokio::test]
async fn opening_an_agent_chat_refuses_users_and_anything_but_one_user_of_the_bay() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    gw.create_bay("b2").await;
    gw.create_participant("b2", "olga", "user", "Olga").await;
    let before = conversation_ids(&gw, &w.rex).await;

    // A user token: 403, whatever the body.
    let (s, b) = open_chat(&gw, &w.ana, json!({"userIds": ["ben"]})).await;
    assert_error(s, &b, 403, "FORBIDDEN");

    let mut messages = Vec::new();
    for (user_ids, what) in [
        (json!([]), "no id"),
        (json!(["ana", "ben"]), "two users"),
        (json!(["ana", "ana"]), "one user twice"),
        (json!(["brain"]), "an agent"),
        (json!(["rex"]), "the caller itself"),
        (json!(["nobody"]), "an unknown id"),
        (json!(["olga"]), "a user of another bay"),
    ] {
        let (s, b) = open_chat(&gw, &w.rex, json!({"userIds": user_ids})).await;
        assert_eq!(s, 400, "{what}: {b}");
        assert_error(s, &b, 400, "INVALID_REQUEST");
        messages.push((what, b["message"].as_str().unwrap().to_owned()));
    }
    // Another Bay's id is answered exactly like an unknown one.
    assert_eq!(messages[5].1, messages[6].1, "{messages:?}");

    for (body, code, what) in [
        (json!({}), "INVALID_JSON", "userIds missing"),
        (
            json!({"userIds": "ana"}),
            "INVALID_JSON",
            "userIds not a list",
        ),
        (
            json!({"title": "x".repeat(201), "userIds": ["ana"]}),
            "INVALID_REQUEST",
            "title of 201 characters",
        ),
        (
            json!({"title": "two\nlines", "userIds": ["ana"]}),
            "INVALID_REQUEST",
            "title with a line break",
        ),
    ] {
        let (s, b) = open_chat(&gw, &w.rex, body).await;
        assert_eq!(s, 400, "{what}: {b}");
        assert_error(s, &b, 400, code);
    }
    // A title of exactly 200 characters is fine.
    let (s, b) = open_chat(
        &gw,
        &w.rex,
        json!({"title": "x".repeat(200), "userIds": ["ana"]}),
    )
    .await;
    assert_eq!(s, 201, "{b}");

    // Nothing was created by the refusals.
    let after = conversation_ids(&gw, &w.rex).await;
    assert_eq!(after.len(), before.len() + 1, "{before:?} → {after:?}");
    assert_eq!(conversation_ids(&gw, &w.ana).await.len(), 3);
}

/// Reads `ws` frames until a `message` event of `conversation` arrives.
async fn next_message_in(ws: &mut Ws, conversation: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match ws.next_within(left).await {
            WsNext::Json(f)
                if f["t"] == "event" && f["event"]["conversationId"] == conversation =>
            {
                return f["event"].clone()
            }
            WsNext::Json(_) => continue,
            other => panic!("no message in {conversation}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_new_agent_chat_reaches_both_members_over_ws_and_updates() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;

    // Both members are connected before the conversation exists: Ben over
    // /ws, Rex with an /updates cursor from before.
    let mut ws = gw.ws_ready(&w.ben, None).await;
    let (s, first) = gw.updates(&w.rex, None, "1").await;
    assert_eq!(s, 200, "{first}");
    let mut cursor = first["cursor"].as_str().unwrap().to_owned();

    let (s, created) = open_chat(
        &gw,
        &w.rex,
        json!({"title": "Your order", "userIds": ["ben"]}),
    )
    .await;
    assert_eq!(s, 201, "{created}");
    let id = id_of(&created);

    // The agent's first message reaches the user's open socket.
    let (s, hello) = gw
        .post_message(&w.rex, &id, "Hi Ben, about your order")
        .await;
    assert_eq!(s, 201, "{hello}");
    let event = next_message_in(&mut ws, &id).await;
    assert_eq!(event["type"], "message", "{event}");
    assert_eq!(event["message"]["id"], hello["id"], "{event}");
    assert_eq!(
        event["conversation"],
        json!({"id": id, "type": "AGENT_CHAT", "title": "Your order"}),
    );

    // The user's reply reaches the agent's /updates, from the old cursor.
    let (s, reply) = gw.post_message(&w.ben, &id, "thanks").await;
    assert_eq!(s, 201, "{reply}");
    let mut seen: Vec<Value> = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while !seen.iter().any(|e| e["message"]["id"] == reply["id"]) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the reply did not reach /updates: {seen:?}"
        );
        let (s, body) = gw.updates(&w.rex, Some(&cursor), "5").await;
        assert_eq!(s, 200, "{body}");
        cursor = body["cursor"].as_str().unwrap().to_owned();
        seen.extend(body["events"].as_array().unwrap().iter().cloned());
    }
    let ids: Vec<&Value> = seen.iter().map(|e| &e["message"]["id"]).collect();
    assert_eq!(ids, [&hello["id"], &reply["id"]], "{seen:?}");
    let from_ben = seen
        .iter()
        .find(|e| e["message"]["id"] == reply["id"])
        .unwrap();
    assert_eq!(from_ben["conversation"]["type"], "AGENT_CHAT");
    assert_eq!(from_ben["message"]["shouldRespond"], true, "{from_ben}");
    ws.close().await;
}
