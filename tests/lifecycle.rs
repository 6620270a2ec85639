//! Everything after send, end to end against a real gateway process:
//! idempotent sends, edits, deletes, reactions, polls, cards, read state
//! and waiting for a reply, and the events they send over `/ws`,
//! `/updates` and replay. Runs on the memory engine, and on Redis with
//! `SWITCHBOARD_TEST_STORE=redis`; the two-node idempotency test always
//! runs on Redis.

mod common;

use common::{assert_error, Gateway, Opts, RedisServer, World};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const API: &str = "/api/agent-api";

/// `(status, body, headers)` of a request with `token`.
async fn call(
    gw: &Gateway,
    method: reqwest::Method,
    token: &str,
    path: &str,
    body: Option<Value>,
    headers: &[(&str, &str)],
) -> (u16, Value, reqwest::header::HeaderMap) {
    let mut req = gw
        .http
        .request(method, gw.url(&format!("{API}{path}")))
        .bearer_auth(token);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    (status, res.json().await.unwrap_or(Value::Null), headers)
}

async fn patch(gw: &Gateway, token: &str, path: &str, body: Value) -> (u16, Value) {
    let (s, b, _) = call(gw, reqwest::Method::PATCH, token, path, Some(body), &[]).await;
    (s, b)
}

async fn delete(gw: &Gateway, token: &str, path: &str) -> (u16, Value) {
    let (s, b, _) = call(gw, reqwest::Method::DELETE, token, path, None, &[]).await;
    (s, b)
}

/// Posts `content` to `conversation` and returns the new message's id.
async fn posted(gw: &Gateway, token: &str, conversation: &str, content: &str) -> String {
    let (s, b) = gw.post_message(token, conversation, content).await;
    assert_eq!(s, 201, "{b}");
    b["id"].as_str().unwrap().to_owned()
}

/// The `type`s of `events`, with the message id each is about.
fn kinds(events: &[Value]) -> Vec<(String, String)> {
    events
        .iter()
        .map(|e| {
            let id = e["message"]["id"]
                .as_str()
                .or(e["messageId"].as_str())
                .or(e["lastReadMessageId"].as_str())
                .unwrap_or("")
                .to_owned();
            (e["type"].as_str().unwrap().to_owned(), id)
        })
        .collect()
}

/// Reads `/updates` from `cursor` until `n` events have come; returns
/// them and the last cursor.
async fn updates_until(gw: &Gateway, token: &str, cursor: &str, n: usize) -> (Vec<Value>, String) {
    let mut events = Vec::new();
    let mut cursor = cursor.to_owned();
    let deadline = Instant::now() + Duration::from_secs(20);
    while events.len() < n {
        assert!(Instant::now() < deadline, "only {events:?}");
        let (s, b) = gw.updates(token, Some(&cursor), "2").await;
        assert_eq!(s, 200, "{b}");
        events.extend(b["events"].as_array().unwrap().iter().cloned());
        cursor = b["cursor"].as_str().unwrap().to_owned();
    }
    (events, cursor)
}

/// Reads WebSocket event frames until `n` have come.
async fn ws_events(ws: &mut common::Ws, n: usize) -> Vec<Value> {
    let mut events = Vec::new();
    while events.len() < n {
        let (batch, _) = ws.read_batch().await;
        events.extend(batch);
    }
    events
}

/// The message `id` as `GET …/messages` shows it to `token`.
async fn rest_message(gw: &Gateway, token: &str, conversation: &str, id: &str) -> Value {
    let (s, b) = gw
        .get(token, &format!("/conversations/{conversation}/messages"))
        .await;
    assert_eq!(s, 200, "{b}");
    b["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == id)
        .unwrap_or_else(|| panic!("{id} not in {b}"))
        .clone()
}

#[tokio::test]
async fn edits_deletes_and_reactions_reach_ws_updates_and_replay_in_order() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "life").await;
    let (_, start) = gw.updates(&w.brain, None, "1").await;
    let start = start["cursor"].as_str().unwrap().to_owned();
    let mut rex = gw.ws_ready(&w.rex, None).await;

    let m = posted(&gw, &w.ana, "group", "first draft").await;
    let (s, edited) = patch(
        &gw,
        &w.ana,
        &format!("/conversations/group/messages/{m}"),
        json!({"content": "final text @Scout"}),
    )
    .await;
    assert_eq!(s, 200, "{edited}");
    assert_eq!(edited["content"], "final text @Scout");
    assert!(edited["editedAt"].is_string(), "{edited}");
    let react = |token: String, emoji: &'static str| {
        let (gw, m) = (&gw, m.clone());
        async move {
            gw.post_json(
                &token,
                &format!("/conversations/group/messages/{m}/reactions"),
                json!({ "emoji": emoji }),
            )
            .await
        }
    };
    let (s, b) = react(w.rex.clone(), "👍").await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(
        b["reactions"],
        json!([{"emoji": "👍", "count": 1, "mine": true}])
    );
    let (s, b) = react(w.ben.clone(), "👍").await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(
        b["reactions"],
        json!([{"emoji": "👍", "count": 2, "mine": true}])
    );
    // The same reaction again changes nothing and sends no event.
    let (s, b) = react(w.ben.clone(), "👍").await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["reactions"][0]["count"], 2);
    let (s, b) = delete(
        &gw,
        &w.rex,
        &format!("/conversations/group/messages/{m}/reactions/%F0%9F%91%8D"),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(
        b["reactions"],
        json!([{"emoji": "👍", "count": 1, "mine": false}])
    );
    let (s, b) = delete(&gw, &w.ana, &format!("/conversations/group/messages/{m}")).await;
    assert_eq!(s, 204, "{b}");

    // A poll and a read marker: every event type passes the same way.
    let (s, poll_msg) = gw
        .post_json(
            &w.ben,
            "/polls",
            json!({"conversationId": "group", "question": "Ship?", "options": ["Yes", "No"]}),
        )
        .await;
    assert_eq!(s, 201, "{poll_msg}");
    let poll_msg_id = poll_msg["id"].as_str().unwrap().to_owned();
    let poll_id = poll_msg["cardPayload"]["pollId"].as_str().unwrap();
    let (s, b) = gw
        .post_json(
            &w.rex,
            &format!("/polls/{poll_id}/vote"),
            json!({"optionIndexes": [0]}),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    let (s, b) = gw
        .post_json(
            &w.scout,
            "/conversations/group/read",
            json!({"upTo": poll_msg_id}),
        )
        .await;
    assert_eq!(s, 200, "{b}");

    let mut expected: Vec<(String, String)> = [
        "message",
        "message.updated",
        "reaction.added",
        "reaction.added",
        "reaction.removed",
        "message.deleted",
    ]
    .iter()
    .map(|k| (k.to_string(), m.clone()))
    .collect();
    for kind in ["message", "poll.updated", "read.updated"] {
        expected.push((kind.to_string(), poll_msg_id.clone()));
    }

    // Live over /ws.
    let live = ws_events(&mut rex, expected.len()).await;
    assert_eq!(kinds(&live), expected, "{live:?}");
    let updated = &live[1];
    assert_eq!(updated["conversationId"], "group");
    assert_eq!(updated["conversation"]["id"], "group");
    assert_eq!(updated["message"]["content"], "final text @Scout");
    // An edit is not routed: no verdict, the mentions as sent.
    assert!(
        updated["message"].get("shouldRespond").is_none(),
        "{updated}"
    );
    assert_eq!(updated["message"]["mentions"], json!([]));
    assert_eq!(live[3]["count"], 2);
    assert_eq!(live[3]["participantId"], "ben");
    assert_eq!(live[4]["count"], 1);
    assert_eq!(live[5]["deletedBy"], "ana");

    // Over /updates, from a cursor taken before it all.
    let (polled, _) = updates_until(&gw, &w.brain, &start, expected.len()).await;
    assert_eq!(kinds(&polled), expected, "{polled:?}");
    // Identical events, but for each reader's own `mine` in a poll tally.
    let without_mine = |events: &[Value]| -> Vec<Value> {
        events
            .iter()
            .map(|e| {
                let mut e = e.clone();
                if let Some(poll) = e.get_mut("poll") {
                    poll.as_object_mut().unwrap().remove("mine");
                }
                e
            })
            .collect()
    };
    assert_eq!(without_mine(&polled), without_mine(&live));
    assert_eq!(live[7]["poll"]["mine"], json!([0]), "Rex voted");
    assert_eq!(polled[7]["poll"]["mine"], json!([]), "Brain did not");
    assert_eq!(live[7]["poll"]["voterCount"], 1);
    assert_eq!(live[8]["participantId"], "scout");

    // Replayed to a WebSocket resuming from that cursor.
    let mut scout = gw.ws_ready(&w.scout, Some(&start)).await;
    let replayed = ws_events(&mut scout, expected.len()).await;
    assert_eq!(kinds(&replayed), expected, "{replayed:?}");
    assert_eq!(without_mine(&replayed), without_mine(&live));

    // REST shows the tombstone.
    let rest = rest_message(&gw, &w.rex, "group", &m).await;
    assert_eq!(rest["content"], "");
    assert!(rest["deletedAt"].is_string(), "{rest}");
    assert_eq!(rest["reactions"], json!([]));
    assert_eq!(rest["shouldRespond"], false);
    // Changing a tombstone is refused; deleting it again is a no-op.
    let (s, b) = patch(
        &gw,
        &w.ana,
        &format!("/conversations/group/messages/{m}"),
        json!({"content": "back"}),
    )
    .await;
    assert_error(s, &b, 410, "MESSAGE_DELETED");
    let (s, b) = react(w.rex.clone(), "🎉").await;
    assert_error(s, &b, 410, "MESSAGE_DELETED");
    let (s, _) = delete(&gw, &w.ana, &format!("/conversations/group/messages/{m}")).await;
    assert_eq!(s, 204);
    rex.close().await;
    scout.close().await;
}

#[tokio::test]
async fn an_edit_wakes_nobody_and_a_reply_quotes_the_current_text() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "edit").await;
    // Scout's socket is open before the post and has taken it, so what
    // follows is only what the edit produces ("now" at a socket's opening
    // is the feed's position, which may trail a post that just answered).
    let mut scout = gw.ws_ready(&w.scout, None).await;
    let m = posted(&gw, &w.ben, "group", "lunch plans").await;
    let first = ws_events(&mut scout, 1).await;
    assert_eq!(kinds(&first), [("message".into(), m.clone())]);
    let (s, b) = patch(
        &gw,
        &w.ben,
        &format!("/conversations/group/messages/{m}"),
        json!({"content": "@Scout lunch plans?"}),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    // The REST verdict stays as sent: the edit's mention routes nobody.
    assert_eq!(b["shouldRespond"], false, "{b}");
    assert_eq!(b["mentions"], json!([]), "{b}");
    let events = ws_events(&mut scout, 1).await;
    assert_eq!(kinds(&events), [("message.updated".into(), m.clone())]);
    let rest = rest_message(&gw, &w.scout, "group", &m).await;
    assert_eq!(rest["shouldRespond"], false, "{rest}");
    // A reply quotes the edited text, and "" once the message is deleted.
    let (s, reply) = gw
        .post_json(
            &w.ana,
            "/conversations/group/messages",
            json!({"content": "yes", "replyToMessageId": m}),
        )
        .await;
    assert_eq!(s, 201, "{reply}");
    assert_eq!(reply["replyTo"]["preview"], "@Scout lunch plans?");
    let (s, _) = delete(&gw, &w.ben, &format!("/conversations/group/messages/{m}")).await;
    assert_eq!(s, 204);
    let (s, reply) = gw
        .post_json(
            &w.ana,
            "/conversations/group/messages",
            json!({"content": "still yes", "replyToMessageId": m}),
        )
        .await;
    assert_eq!(s, 201, "{reply}");
    assert_eq!(reply["replyTo"]["preview"], "");
    scout.close().await;
}

#[tokio::test]
async fn who_may_change_a_message() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "perm").await;
    let (s, b) = gw
        .admin(
            reqwest::Method::POST,
            "/bays/perm/conversations/group/members",
            Some(json!({"participantId": "brain", "role": "admin"})),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    let m = posted(&gw, &w.ana, "group", "hello").await;
    let path = format!("/conversations/group/messages/{m}");
    // Another member may not edit or delete it.
    let (s, b) = patch(&gw, &w.ben, &path, json!({"content": "mine now"})).await;
    assert_error(s, &b, 403, "FORBIDDEN");
    let (s, b) = delete(&gw, &w.ben, &path).await;
    assert_error(s, &b, 403, "FORBIDDEN");
    // A non-member cannot tell the message exists.
    let dm = posted(&gw, &w.ana, "dm", "private").await;
    let (s, b) = patch(
        &gw,
        &w.ben,
        &format!("/conversations/dm/messages/{dm}"),
        json!({"content": "x"}),
    )
    .await;
    assert_error(s, &b, 404, "NOT_FOUND");
    let (s, b) = delete(&gw, &w.ben, &format!("/conversations/dm/messages/{dm}")).await;
    assert_error(s, &b, 404, "NOT_FOUND");
    let (s, b) = patch(
        &gw,
        &w.ana,
        "/conversations/group/messages/msg_nope",
        json!({"content": "x"}),
    )
    .await;
    assert_error(s, &b, 404, "NOT_FOUND");
    // Bad edits are refused like bad sends.
    let (s, b) = patch(&gw, &w.ana, &path, json!({"content": "  "})).await;
    assert_error(s, &b, 400, "INVALID_CONTENT");
    let (s, b) = gw
        .post_json(
            &w.ana,
            &format!("{}/reactions", path.trim_start_matches(API)),
            json!({"emoji": "thumbs up"}),
        )
        .await;
    assert_error(s, &b, 400, "INVALID_REACTION");
    // An admin may delete anyone's message.
    let (s, b) = delete(&gw, &w.brain, &path).await;
    assert_eq!(s, 204, "{b}");
    let rest = rest_message(&gw, &w.ana, "group", &m).await;
    assert!(rest["deletedAt"].is_string(), "{rest}");
}

#[tokio::test]
async fn idempotent_sends_store_once_and_refuse_a_changed_retry() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "idem").await;
    let send = |token: String, body: Value, key: Option<&'static str>| {
        let gw = &gw;
        async move {
            let headers: Vec<(&str, &str)> =
                key.map(|k| ("Idempotency-Key", k)).into_iter().collect();
            call(
                gw,
                reqwest::Method::POST,
                &token,
                "/conversations/group/messages",
                Some(body),
                &headers,
            )
            .await
        }
    };
    let (s, first, h) = send(w.rex.clone(), json!({"content": "done @Ana"}), Some("k-1")).await;
    assert_eq!(s, 201, "{first}");
    assert!(h.get("idempotent-replayed").is_none());
    let (s, again, h) = send(w.rex.clone(), json!({"content": "done @Ana"}), Some("k-1")).await;
    assert_eq!(s, 201, "{again}");
    assert_eq!(h.get("idempotent-replayed").unwrap(), "true");
    assert_eq!(again["id"], first["id"]);
    assert_eq!(again["createdAt"], first["createdAt"]);
    // A quoted structured-field string is the same key.
    let (s, quoted, _) = send(
        w.rex.clone(),
        json!({"content": "done @Ana"}),
        Some("\"k-1\""),
    )
    .await;
    assert_eq!(s, 201, "{quoted}");
    assert_eq!(quoted["id"], first["id"]);
    // `clientId` is the same key as the header.
    let (s, alias, _) = send(
        w.rex.clone(),
        json!({"content": "done @Ana", "clientId": "k-1"}),
        None,
    )
    .await;
    assert_eq!(s, 201, "{alias}");
    assert_eq!(alias["id"], first["id"]);
    // The same key with another body is refused, and nothing is stored.
    let (s, b, _) = send(w.rex.clone(), json!({"content": "other"}), Some("k-1")).await;
    assert_error(s, &b, 409, "IDEMPOTENCY_KEY_REUSED");
    // Keys are the sender's own: Scout's k-1 is another key.
    let (s, theirs, _) = send(
        w.scout.clone(),
        json!({"content": "done @Ana"}),
        Some("k-1"),
    )
    .await;
    assert_eq!(s, 201, "{theirs}");
    assert_ne!(theirs["id"], first["id"]);
    let (s, b, _) = send(
        w.rex.clone(),
        json!({"content": "x", "clientId": "a"}),
        Some("b"),
    )
    .await;
    assert_error(s, &b, 400, "INVALID_IDEMPOTENCY_KEY");
    let long = "k".repeat(256);
    let (s, b) = gw
        .post_json(
            &w.rex,
            "/conversations/group/messages",
            json!({"content": "x", "clientId": long}),
        )
        .await;
    assert_error(s, &b, 400, "INVALID_IDEMPOTENCY_KEY");

    // Concurrent duplicates store one message.
    let sends = (0..8).map(|_| send(w.rex.clone(), json!({"content": "race"}), Some("k-race")));
    let answers = futures_util::future::join_all(sends).await;
    let ids: std::collections::HashSet<String> = answers
        .iter()
        .map(|(s, b, _)| {
            assert_eq!(*s, 201, "{b}");
            b["id"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(ids.len(), 1, "{answers:?}");

    let (_, page) = gw.get(&w.ana, "/conversations/group/messages").await;
    let contents: Vec<&str> = page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents, ["done @Ana", "done @Ana", "race"], "{page}");

    // A retry whose message was deleted since is never recreated.
    let id = first["id"].as_str().unwrap();
    let (s, _) = delete(&gw, &w.rex, &format!("/conversations/group/messages/{id}")).await;
    assert_eq!(s, 204);
    let (s, b, _) = send(w.rex.clone(), json!({"content": "done @Ana"}), Some("k-1")).await;
    assert_error(s, &b, 410, "MESSAGE_DELETED");
}

#[tokio::test]
async fn an_idempotent_retry_on_another_node_returns_the_first_message() {
    let redis = RedisServer::start(false);
    let a = Gateway::spawn_with(Opts::default().redis(&redis.url())).await;
    let b = Gateway::spawn_with(Opts::default().redis(&redis.url())).await;
    let w = World::create(&a, "twonode").await;
    let body = json!({"content": "ship it", "clientId": "retry-1"});
    let (s, first) = a
        .post_json(&w.rex, "/conversations/group/messages", body.clone())
        .await;
    assert_eq!(s, 201, "{first}");
    let (s, again) = b
        .post_json(&w.rex, "/conversations/group/messages", body)
        .await;
    assert_eq!(s, 201, "{again}");
    assert_eq!(again["id"], first["id"]);
    let (s, b_body) = b
        .post_json(
            &w.rex,
            "/conversations/group/messages",
            json!({"content": "changed", "clientId": "retry-1"}),
        )
        .await;
    assert_error(s, &b_body, 409, "IDEMPOTENCY_KEY_REUSED");
    let (_, page) = b.get(&w.ana, "/conversations/group/messages").await;
    assert_eq!(page["messages"].as_array().unwrap().len(), 1, "{page}");
}

#[tokio::test]
async fn polls_vote_close_and_send_the_tally() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "polls").await;
    let mut ana = gw.ws_ready(&w.ana, None).await;
    let (s, msg) = gw
        .post_json(
            &w.ben,
            "/polls",
            json!({"conversationId": "group", "question": "Lunch?", "options": ["Pizza", "Sushi", "Salad"]}),
        )
        .await;
    assert_eq!(s, 201, "{msg}");
    assert_eq!(msg["metadata"]["type"], "card.poll");
    assert_eq!(msg["content"], "Lunch?\n1. Pizza\n2. Sushi\n3. Salad");
    let poll_id = msg["cardPayload"]["pollId"].as_str().unwrap().to_owned();
    assert_eq!(
        msg["cardPayload"],
        json!({"pollId": poll_id, "question": "Lunch?", "options": ["Pizza", "Sushi", "Salad"], "askedBy": "ben", "allowMultiple": false})
    );
    assert_eq!(msg["poll"]["voterCount"], 0);
    let vote = |token: String, indexes: Value| {
        let (gw, poll_id) = (&gw, poll_id.clone());
        async move {
            gw.post_json(
                &token,
                &format!("/polls/{poll_id}/vote"),
                json!({ "optionIndexes": indexes }),
            )
            .await
        }
    };
    let (s, b) = vote(w.rex.clone(), json!([1])).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["poll"]["mine"], json!([1]));
    assert_eq!(b["poll"]["canVote"], true);
    let (s, b) = vote(w.ana.clone(), json!([1])).await;
    assert_eq!(s, 200, "{b}");
    let (s, b) = vote(w.ana.clone(), json!([0])).await;
    assert_eq!(s, 200, "{b}");
    let (s, b) = vote(w.ana.clone(), json!([0])).await;
    assert_eq!(s, 200, "the same vote again: {b}");
    let options = &b["poll"]["options"];
    assert_eq!(
        options.as_array().unwrap().len(),
        2,
        "absent answers are zero: {b}"
    );
    assert_eq!(options[0]["index"], 0);
    assert_eq!(options[0]["count"], 1);
    assert_eq!(options[0]["voters"][0]["id"], "ana");
    assert_eq!(options[0]["voters"][0]["type"], "USER");
    assert_eq!(options[1]["index"], 1);
    assert_eq!(options[1]["voters"][0]["type"], "AGENT");
    assert_eq!(b["poll"]["voterCount"], 2);

    // Refusals, as a table: (who, path suffix, body, status, code).
    let table: Vec<(&str, &str, Value, u16, &str)> = vec![
        (
            &w.rex,
            "vote",
            json!({"optionIndexes": [0, 1]}),
            400,
            "POLL_SINGLE_CHOICE",
        ),
        (
            &w.rex,
            "vote",
            json!({"optionIndexes": [3]}),
            400,
            "INVALID_OPTION_INDEX",
        ),
        (
            &w.rex,
            "vote",
            json!({"optionIndexes": [-1]}),
            400,
            "INVALID_OPTION_INDEX",
        ),
        (&w.rex, "close", json!({}), 403, "FORBIDDEN"),
    ];
    for (who, action, body, status, code) in table {
        let (s, b) = gw
            .post_json(who, &format!("/polls/{poll_id}/{action}"), body.clone())
            .await;
        assert_error(s, &b, status, code);
    }
    let (s, b) = gw
        .post_json(&w.ben, &format!("/polls/{poll_id}/close"), json!({}))
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["poll"]["closed"], true);
    assert_eq!(b["poll"]["canVote"], false);
    let (s, b) = vote(w.rex.clone(), json!([2])).await;
    assert_error(s, &b, 409, "POLL_CLOSED");

    // Every change reached the room as poll.updated with the new tally.
    let events = ws_events(&mut ana, 5).await;
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "message",
            "poll.updated",
            "poll.updated",
            "poll.updated",
            "poll.updated"
        ],
        "{events:?}"
    );
    assert_eq!(events[0]["message"]["metadata"]["type"], "card.poll");
    assert!(events[0]["message"].get("cardPayload").is_none());
    assert_eq!(
        events[2]["poll"]["mine"],
        json!([1]),
        "ana's view of her own vote"
    );
    assert_eq!(events[3]["poll"]["mine"], json!([0]));
    assert_eq!(events[4]["poll"]["closed"], true);

    // GET shows the same; other Bays and non-members cannot tell it exists.
    let (s, b) = gw.get(&w.rex, &format!("/polls/{poll_id}")).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["poll"]["mine"], json!([1]));
    assert_eq!(b["cardPayload"]["pollId"], poll_id.as_str());
    let (s, b) = gw.get(&w.rex, "/polls/poll_nope").await;
    assert_error(s, &b, 404, "POLL_NOT_FOUND");
    let (s, dm_poll) = gw
        .post_json(
            &w.ana,
            "/polls",
            json!({"conversationId": "dm", "question": "Tea?", "options": ["Yes", "No"]}),
        )
        .await;
    assert_eq!(s, 201, "{dm_poll}");
    let dm_poll_id = dm_poll["cardPayload"]["pollId"].as_str().unwrap();
    let (s, b) = gw.get(&w.ben, &format!("/polls/{dm_poll_id}")).await;
    assert_error(s, &b, 404, "POLL_NOT_FOUND");
    let (s, b) = gw
        .post_json(
            &w.ben,
            &format!("/polls/{dm_poll_id}/vote"),
            json!({"optionIndexes": [0]}),
        )
        .await;
    assert_error(s, &b, 404, "POLL_NOT_FOUND");
    ana.close().await;
}

#[tokio::test]
async fn poll_creation_refusals() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "pollbad").await;
    let table: Vec<(Value, u16, &str)> = vec![
        (
            json!({"conversationId": "group", "question": "Q?", "options": ["one"]}),
            400,
            "INVALID_POLL",
        ),
        (
            json!({"conversationId": "group", "question": "Q?", "options": ["a","b","c","d","e","f","g","h","i","j","k"]}),
            400,
            "INVALID_POLL",
        ),
        (
            json!({"conversationId": "group", "question": "Q?", "options": ["Yes", " yes "]}),
            400,
            "INVALID_POLL",
        ),
        (
            json!({"conversationId": "group", "question": "  ", "options": ["a", "b"]}),
            400,
            "INVALID_POLL",
        ),
        (
            json!({"conversationId": "group", "question": "Q?", "options": ["a", ""]}),
            400,
            "INVALID_POLL",
        ),
        (
            json!({"conversationId": "group", "question": "Q?"}),
            400,
            "INVALID_JSON",
        ),
        (
            json!({"conversationId": "nope", "question": "Q?", "options": ["a", "b"]}),
            404,
            "NOT_FOUND",
        ),
    ];
    for (body, status, code) in table {
        let (s, b) = gw.post_json(&w.rex, "/polls", body.clone()).await;
        assert_error(s, &b, status, code);
    }
    let (_, page) = gw.get(&w.ana, "/conversations/group/messages").await;
    assert_eq!(page["messages"], json!([]), "nothing stored");
}

#[tokio::test]
async fn cards_are_sent_strictly_and_refused_by_name() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "cards").await;
    let send = |body: Value| gw.post_json(&w.rex, "/conversations/group/messages", body);
    let table: Vec<(Value, &str, &str)> = vec![
        (
            json!({"content": "x", "card": {"type": "card.calendar", "payload": {"title": "Sync"}}, "attachments": [{"attachmentId": "a"}]}),
            "CARD_WITH_ATTACHMENTS",
            "",
        ),
        (
            json!({"content": "x", "card": {"type": "card.decision", "payload": {}}}),
            "CARD_TYPE_NOT_SENDABLE",
            "type",
        ),
        (
            json!({"content": "x", "card": {"type": "card.calendar", "payload": {"location": "Room 1"}}}),
            "INVALID_CARD_PAYLOAD",
            "title",
        ),
        (
            json!({"content": "x", "card": {"type": "card.calendar", "payload": {"title": "Sync", "start": "tomorrow"}}}),
            "INVALID_CARD_PAYLOAD",
            "start",
        ),
        (
            json!({"content": "x", "card": {"type": "card.email", "payload": {"subject": "Hi", "colour": "red"}}}),
            "INVALID_CARD_PAYLOAD",
            "colour",
        ),
    ];
    for (body, code, field) in table {
        let (s, b) = send(body.clone()).await;
        assert_error(s, &b, 400, code);
        assert!(
            b["message"].as_str().unwrap().contains(field),
            "{body} → {b}"
        );
    }
    let (s, b) = send(json!({
        "content": "Sync at 10",
        "card": {"type": "card.calendar", "payload": {"title": "Sync", "start": "2026-12-02T10:00:00Z", "end": "2026-12-02T10:30:00Z"}},
        "metadata": {"type": "card.poll", "runId": "r1"}
    }))
    .await;
    assert_eq!(s, 201, "{b}");
    assert_eq!(
        b["metadata"],
        json!({"type": "card.calendar", "runId": "r1"})
    );
    assert_eq!(
        b["cardPayload"],
        json!({"title": "Sync", "start": "2026-12-02T10:00:00Z", "end": "2026-12-02T10:30:00Z"})
    );
    let rest = rest_message(&gw, &w.ana, "group", b["id"].as_str().unwrap()).await;
    assert_eq!(rest["cardPayload"], b["cardPayload"]);
    let (_, page) = gw.get(&w.ana, "/conversations/group/messages").await;
    assert_eq!(
        page["messages"].as_array().unwrap().len(),
        1,
        "refusals stored nothing"
    );
}

#[tokio::test]
async fn read_markers_move_forward_and_count_unread() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "reads").await;
    let unread = |token: String| {
        let gw = &gw;
        async move {
            let (s, b) = gw.get(&token, "/conversations").await;
            assert_eq!(s, 200, "{b}");
            let c = b
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["id"] == "group")
                .unwrap()
                .clone();
            (
                c["unreadCount"].as_u64().unwrap(),
                c["lastReadMessageId"].clone(),
            )
        }
    };
    assert_eq!(unread(w.rex.clone()).await, (0, Value::Null));
    let m1 = posted(&gw, &w.ana, "group", "one").await;
    let m2 = posted(&gw, &w.ana, "group", "two").await;
    let m3 = posted(&gw, &w.ana, "group", "three").await;
    assert_eq!(unread(w.rex.clone()).await, (3, Value::Null));
    // The poster has read everything up to its own message.
    assert_eq!(unread(w.ana.clone()).await, (0, json!(m3)));
    let mut ana = gw.ws_ready(&w.ana, None).await;
    let (s, b) = gw
        .post_json(&w.rex, "/conversations/group/read", json!({"upTo": m2}))
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b, json!({"lastReadMessageId": m2, "unreadCount": 1}));
    // Backwards is a no-op.
    let (s, b) = gw
        .post_json(&w.rex, "/conversations/group/read", json!({"upTo": m1}))
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b, json!({"lastReadMessageId": m2, "unreadCount": 1}));
    assert_eq!(unread(w.rex.clone()).await, (1, json!(m2)));
    let (s, b) = gw
        .post_json(
            &w.rex,
            "/conversations/group/read",
            json!({"upTo": "msg_nope"}),
        )
        .await;
    assert_error(s, &b, 400, "INVALID_REQUEST");
    let (s, b) = gw
        .post_json(&w.ben, "/conversations/dm/read", json!({"upTo": m1}))
        .await;
    assert_error(s, &b, 404, "NOT_FOUND");
    // One read.updated reached the room: the forward move only.
    let events = ws_events(&mut ana, 1).await;
    assert_eq!(kinds(&events), [("read.updated".into(), m2.clone())]);
    assert_eq!(events[0]["participantId"], "rex");
    let posted_after = posted(&gw, &w.ben, "group", "four").await;
    let next = ws_events(&mut ana, 1).await;
    assert_eq!(
        kinds(&next),
        [("message".into(), posted_after)],
        "no second read.updated"
    );
    ana.close().await;
}

/// The value of an unlabelled metric (0 when absent).
async fn metric(gw: &Gateway, name: &str) -> f64 {
    let text = gw
        .http
        .get(gw.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

#[tokio::test]
async fn waiting_for_a_reply_answers_at_once_when_held_and_at_the_timeout() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "wait").await;
    let asked = posted(&gw, &w.rex, "group", "anyone?").await;
    let wait_path = format!("/conversations/group/messages/wait?after={asked}&timeout=20");

    // Held: the caller's own message does not end the wait; Ana's does.
    let held = {
        let gw_http = gw.http.clone();
        let url = gw.url(&format!("{API}{wait_path}"));
        let token = w.rex.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let res = gw_http.get(url).bearer_auth(token).send().await.unwrap();
            let status = res.status().as_u16();
            (
                status,
                res.json::<Value>().await.unwrap(),
                started.elapsed(),
            )
        })
    };
    // Post only once the wait is registered (the held-waits gauge says so),
    // so the answer must come through the held path, not the first read.
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            metric(&gw, "switchboard_message_waits_held").await == 1.0
        })
        .await,
        "the wait was never held"
    );
    posted(&gw, &w.rex, "group", "still me").await;
    let answer = posted(&gw, &w.ana, "group", "me!").await;
    let (s, b, took) = held.await.unwrap();
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["messages"].as_array().unwrap().len(), 1, "{b}");
    assert_eq!(b["messages"][0]["id"], answer.as_str());
    assert!(
        took < Duration::from_secs(15),
        "answered when Ana posted, not at the timeout"
    );

    // Already there: answered at once, with the first later message.
    let (s, b) = gw.get(&w.rex, &wait_path).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["messages"][0]["id"], answer.as_str());

    // Nothing after: [] at the timeout.
    let (s, b) = gw
        .get(
            &w.rex,
            &format!("/conversations/group/messages/wait?after={answer}&timeout=1"),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b, json!({"messages": []}));

    let (s, b) = gw
        .get(
            &w.rex,
            "/conversations/group/messages/wait?after=msg_nope&timeout=1",
        )
        .await;
    assert_error(s, &b, 400, "INVALID_CURSOR");
    let (s, b) = gw
        .get(&w.rex, "/conversations/group/messages/wait?timeout=51")
        .await;
    assert_error(s, &b, 400, "INVALID_REQUEST");
    let (s, b) = gw
        .get(&w.ben, "/conversations/dm/messages/wait?timeout=1")
        .await;
    assert_error(s, &b, 403, "NOT_PARTICIPANT");
}
