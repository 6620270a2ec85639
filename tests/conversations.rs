//! End-to-end tests of the rules a conversation keeps (docs/conversations.md):
//! a DM or AGENT_CHAT keeps its two members, a DEDICATED room keeps its
//! designated agent, `POST /conversations` gives a pair one AGENT_CHAT
//! (also across two nodes on one Redis), a blank title is no title, and
//! `unreadCount` leaves deleted messages out; against real `switchboard`
//! processes.

mod common;

use common::*;
use reqwest::Method;
use serde_json::{json, Value};

const BAY: &str = "cv";

/// The admin API's view of conversation `cid`, through a no-op PATCH.
async fn admin_view(gw: &Gateway, cid: &str) -> Value {
    let (s, c) = gw
        .admin(
            Method::PATCH,
            &format!("/bays/{BAY}/conversations/{cid}"),
            Some(json!({})),
        )
        .await;
    assert_eq!(s, 200, "{c}");
    c
}

fn member_ids(c: &Value) -> Vec<String> {
    c["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["participantId"].as_str().unwrap().to_owned())
        .collect()
}

async fn delete_member(gw: &Gateway, cid: &str, pid: &str) -> (u16, Value) {
    gw.admin(
        Method::DELETE,
        &format!("/bays/{BAY}/conversations/{cid}/members/{pid}"),
        None,
    )
    .await
}

#[tokio::test]
async fn a_dm_and_an_agent_chat_keep_exactly_their_two_members() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    gw.create_conversation(BAY, "chat", "AGENT_CHAT", &["ben", "rex"])
        .await;
    for (cid, pid) in [
        ("dm", "ana"),
        ("dm", "rex"),
        ("chat", "ben"),
        ("chat", "rex"),
    ] {
        let (s, b) = delete_member(&gw, cid, pid).await;
        assert_error(s, &b, 409, "DIRECT_MEMBERS_FIXED");
    }
    // Twice over: the first refusal changed nothing.
    let (s, b) = delete_member(&gw, "dm", "ana").await;
    assert_error(s, &b, 409, "DIRECT_MEMBERS_FIXED");
    let (s, b) = gw
        .admin(
            Method::POST,
            &format!("/bays/{BAY}/conversations/dm/members"),
            Some(json!({"participantId": "brain"})),
        )
        .await;
    assert_error(s, &b, 409, "DIRECT_MEMBERS_FIXED");
    assert_eq!(member_ids(&admin_view(&gw, "dm").await), ["ana", "rex"]);
    assert_eq!(member_ids(&admin_view(&gw, "chat").await), ["ben", "rex"]);
    // Both still talk there.
    assert_eq!(gw.post_message(&w.ana, "dm", "still here").await.0, 201);
    assert_eq!(gw.post_message(&w.rex, "dm", "me too").await.0, 201);
    // A role may still change, and a non-member is still 404.
    let (s, c) = gw
        .admin(
            Method::POST,
            &format!("/bays/{BAY}/conversations/dm/members"),
            Some(json!({"participantId": "ana", "role": "admin"})),
        )
        .await;
    assert_eq!(s, 200, "{c}");
    let (s, b) = delete_member(&gw, "dm", "ben").await;
    assert_error(s, &b, 404, "NOT_FOUND");
}

#[tokio::test]
async fn a_dedicated_rooms_designated_agent_stays_until_the_policy_changes() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    let (s, b) = gw
        .admin(
            Method::PATCH,
            &format!("/bays/{BAY}/conversations/group"),
            Some(
                json!({"policy": {"agentReplyPolicy": "DEDICATED", "designatedAgentId": "brain"}}),
            ),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    let (s, b) = delete_member(&gw, "group", "brain").await;
    assert_error(s, &b, 409, "MEMBER_IS_DESIGNATED_AGENT");
    let view = admin_view(&gw, "group").await;
    assert!(member_ids(&view).contains(&"brain".to_owned()), "{view}");
    let (_, ctx) = gw.get(&w.ana, "/conversations/group/context").await;
    assert_eq!(ctx["policy"]["designatedAgentId"], "brain", "{ctx}");
    // Another member goes as before.
    let (s, b) = delete_member(&gw, "group", "scout").await;
    assert_eq!(s, 204, "{b}");
    // Once the policy names another agent, the former one may leave.
    let (s, b) = gw
        .admin(
            Method::PATCH,
            &format!("/bays/{BAY}/conversations/group"),
            Some(json!({"policy": {"designatedAgentId": "rex"}})),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    let (s, b) = delete_member(&gw, "group", "brain").await;
    assert_eq!(s, 204, "{b}");
    let (s, b) = delete_member(&gw, "group", "rex").await;
    assert_error(s, &b, 409, "MEMBER_IS_DESIGNATED_AGENT");
}

#[tokio::test]
async fn an_agent_gets_one_agent_chat_per_user() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    let (s, first) = gw
        .post_json(
            &w.rex,
            "/conversations",
            json!({"title": "Refunds", "userIds": ["ben"]}),
        )
        .await;
    assert_eq!(s, 201, "{first}");
    for body in [
        json!({"userIds": ["ben"]}),
        json!({"title": "Another title", "userIds": ["ben"]}),
    ] {
        let (s, again) = gw.post_json(&w.rex, "/conversations", body).await;
        assert_eq!(s, 200, "{again}");
        assert_eq!(again, first, "the same room, its title kept");
    }
    // Another user, or another agent with the same user: another room.
    let (s, other_user) = gw
        .post_json(&w.rex, "/conversations", json!({"userIds": ["ana"]}))
        .await;
    assert_eq!(s, 201, "{other_user}");
    let (s, other_agent) = gw
        .post_json(&w.scout, "/conversations", json!({"userIds": ["ben"]}))
        .await;
    assert_eq!(s, 201, "{other_agent}");
    let ids = [id_of(&first), id_of(&other_user), id_of(&other_agent)];
    assert!(
        ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2],
        "{ids:?}"
    );
    let (_, listed) = gw.get(&w.ben, "/conversations").await;
    let chats = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["type"] == "AGENT_CHAT")
        .count();
    assert_eq!(chats, 2, "{listed}");
}

/// The store both nodes share: one Redis, whatever `SWITCHBOARD_TEST_STORE` says.
#[tokio::test]
async fn concurrent_first_calls_on_two_nodes_make_one_agent_chat() {
    let redis = RedisServer::start(false);
    let a = Gateway::spawn_with(Opts::default().redis(&redis.url())).await;
    let b = Gateway::spawn_with(Opts::default().redis(&redis.url())).await;
    let w = World::create(&a, BAY).await;
    let calls = (0..8).map(|i| {
        let (gw, token) = (if i % 2 == 0 { &a } else { &b }, &w.rex);
        async move {
            gw.post_json(token, "/conversations", json!({"userIds": ["ana"]}))
                .await
        }
    });
    let answers = futures_util::future::join_all(calls).await;
    let created = answers.iter().filter(|(s, _)| *s == 201).count();
    assert_eq!(created, 1, "{answers:?}");
    assert!(
        answers.iter().all(|(s, _)| *s == 200 || *s == 201),
        "{answers:?}"
    );
    let id = id_of(&answers[0].1);
    assert!(answers.iter().all(|(_, c)| id_of(c) == id), "{answers:?}");
}

#[tokio::test]
async fn a_blank_title_is_stored_as_none() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    let (s, chat) = gw
        .post_json(
            &w.rex,
            "/conversations",
            json!({"title": "", "userIds": ["ben"]}),
        )
        .await;
    assert_eq!(s, 201, "{chat}");
    assert_eq!(chat["title"], Value::Null, "{chat}");
    let (s, c) = gw
        .admin(
            Method::POST,
            &format!("/bays/{BAY}/conversations"),
            Some(
                json!({"id": "blank", "type": "GROUP", "title": "  \u{3000} ", "members": ["ana"]}),
            ),
        )
        .await;
    assert_eq!(s, 201, "{c}");
    assert_eq!(c["title"], Value::Null, "{c}");
    let (s, c) = gw
        .admin(
            Method::PATCH,
            &format!("/bays/{BAY}/conversations/group"),
            Some(json!({"title": " "})),
        )
        .await;
    assert_eq!(s, 200, "{c}");
    assert_eq!(c["title"], Value::Null, "{c}");
    let (_, listed) = gw.get(&w.ana, "/conversations").await;
    for c in listed.as_array().unwrap() {
        if c["id"] == "blank" || c["id"] == "group" {
            assert_eq!(c["title"], Value::Null, "{c}");
        }
    }
}

/// `unreadCount` of `cid` in `token`'s `GET /conversations`.
async fn unread(gw: &Gateway, token: &str, cid: &str) -> u64 {
    let (s, listed) = gw.get(token, "/conversations").await;
    assert_eq!(s, 200, "{listed}");
    listed
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == cid)
        .and_then(|c| c["unreadCount"].as_u64())
        .unwrap_or_else(|| panic!("{cid} in {listed}"))
}

#[tokio::test]
async fn unread_count_leaves_deleted_messages_out() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    // Rex reads up to his own message; then Ana posts three.
    let (s, own) = gw.post_message(&w.rex, "dm", "hello").await;
    assert_eq!(s, 201, "{own}");
    let mut posted = Vec::new();
    for text in ["one", "two", "three"] {
        let (s, m) = gw.post_message(&w.ana, "dm", text).await;
        assert_eq!(s, 201, "{m}");
        posted.push(id_of(&m));
    }
    assert_eq!(unread(&gw, &w.rex, "dm").await, 3);
    let res = gw
        .http
        .delete(gw.url(&format!(
            "/api/agent-api/conversations/dm/messages/{}",
            posted[1]
        )))
        .bearer_auth(&w.ana)
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "{}", res.status());
    assert_eq!(
        unread(&gw, &w.rex, "dm").await,
        2,
        "the tombstone is not unread"
    );
    // A deletion before the marker changes nothing after it.
    let (s, b) = gw
        .post_json(&w.rex, "/conversations/dm/read", json!({"upTo": posted[0]}))
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(unread(&gw, &w.rex, "dm").await, 1);
    let res = gw
        .http
        .delete(gw.url(&format!(
            "/api/agent-api/conversations/dm/messages/{}",
            id_of(&own)
        )))
        .bearer_auth(&w.rex)
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "{}", res.status());
    assert_eq!(unread(&gw, &w.rex, "dm").await, 1);
}
