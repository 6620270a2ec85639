//! The shipped BayChat CLIs, call by call: each test replays one client
//! handler's requests exactly as it sends them (method, path, body) against
//! a real gateway, then reads the answer the way that handler does, so a
//! shape change that would break the client fails here first.
//!
//! Sources: the BayChat CLI 0.6.0 diff (`mcp.js`, `commands.js`; cited as
//! "CLI 0.6.0") and the 0.23.1 diff (`mcp.js`, `relay/updates.js`; cited
//! as "CLI 0.23.1"). Where the client and the protocol text disagree the
//! client wins (docs/messages.md lists each choice).

mod common;

use common::*;
use serde_json::{json, Value};

const API: &str = "/api/agent-api";

/// `apiRequest(creds, method, path, body?)` as the CLIs send it: bearer
/// token, JSON body when there is one. Answers (status, JSON body).
async fn api_request(
    gw: &Gateway,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = gw
        .http
        .request(method, gw.url(&format!("{API}{path}")))
        .bearer_auth(token);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let (status, _, body) = gw.send_raw(req).await;
    (status, body)
}

/// What the CLIs' `apiRequest` turns a refusal into: `ApiError` with the
/// body's `code`, which the handlers compare against.
#[track_caller]
fn api_error_code(status: u16, body: &Value) -> &str {
    assert!(status >= 400, "expected a refusal: {status} {body}");
    body["code"]
        .as_str()
        .unwrap_or_else(|| panic!("no code: {body}"))
}

/// CLI 0.6.0 `mcp.js` `handleListConversations` (and `commands.js`
/// `cmdConversations`, `cmdOnboard`): `GET /conversations`, then
/// `conversations.length` and `conversations.map(c => c.id, c.type,
/// c.title ?? "(untitled)")` on the answer itself.
#[tokio::test]
async fn list_conversations_is_a_bare_array() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    let (s, conversations) =
        api_request(&gw, &w.rex, reqwest::Method::GET, "/conversations", None).await;
    assert_eq!(s, 200, "{conversations}");
    let list = conversations
        .as_array()
        .unwrap_or_else(|| panic!("`.length` needs an array: {conversations}"));
    assert_eq!(list.len(), 2, "{conversations}");
    let mut lines: Vec<String> = list
        .iter()
        .map(|c| {
            let title = c["title"].as_str().unwrap_or("(untitled)");
            format!(
                "{}  [{}]  {title}",
                c["id"].as_str().unwrap(),
                c["type"].as_str().unwrap()
            )
        })
        .collect();
    lines.sort();
    assert_eq!(lines, ["dm  [DM]  dm", "group  [GROUP]  group"]);
    // Read state stays on every entry.
    for c in list {
        assert_eq!(c["unreadCount"], 0, "{c}");
        assert!(
            c.as_object().unwrap().contains_key("lastReadMessageId"),
            "{c}"
        );
    }

    // A token with no conversations: `conversations.length === 0`.
    let loner = gw.create_participant("b1", "loner", "agent", "Loner").await;
    let (s, empty) = api_request(&gw, &loner, reqwest::Method::GET, "/conversations", None).await;
    assert_eq!(
        (s, empty.as_array().map(Vec::len)),
        (200, Some(0)),
        "{empty}"
    );
}

/// CLI 0.6.0 `commands.js` `cmdWhoami` / `cmdOnboard`: `GET /me`, then
/// `me.name`, `me.id` and `me.status` printed.
#[tokio::test]
async fn me_answers_name_id_and_status() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    let (s, me) = api_request(&gw, &w.rex, reqwest::Method::GET, "/me", None).await;
    assert_eq!(s, 200, "{me}");
    assert_eq!(me["name"], "Rex");
    assert_eq!(me["id"], "rex");
    assert!(me["status"].is_string(), "{me}");
}

/// CLI 0.6.0 `mcp.js` `handleGetRoomContext`: `GET
/// /conversations/:id/context`; the roster header and the instructions
/// block read `participants[]` (`id`, `name`, `kind`, `role`,
/// `isOrchestrator`), `policy`, `you.agentId` and `instructions`.
#[tokio::test]
async fn room_context_has_what_the_roster_header_reads() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    let (s, ctx) = api_request(
        &gw,
        &w.rex,
        reqwest::Method::GET,
        "/conversations/group/context",
        None,
    )
    .await;
    assert_eq!(s, 200, "{ctx}");
    let participants = ctx["participants"].as_array().expect("participants");
    assert_eq!(participants.len(), 5);
    for p in participants {
        assert!(p["id"].is_string() && p["name"].is_string(), "{p}");
        assert!(
            p["kind"].is_string() && p["isOrchestrator"].is_boolean(),
            "{p}"
        );
    }
    assert!(ctx["policy"].is_object(), "{ctx}");
    assert_eq!(ctx["you"]["agentId"], "rex");
    assert!(ctx["instructions"].is_string(), "{ctx}");
}

/// CLI 0.6.0 `mcp.js` `handleSendMessage` then `handleGetMessages`:
/// `POST /conversations/:id/messages {content}` prints `message.id` and
/// `message.createdAt`; `GET …/messages?since=&limit=` reads
/// `res.messages ?? []` (dropping `m.deletedAt`), `res.context.you.agentId`
/// and per message `id`, `senderId`, `senderType === "AGENT"`,
/// `sender.{name, kind, role}`, `createdAt`, `content`, `shouldRespond`
/// and `mentions`.
#[tokio::test]
async fn send_then_get_messages_render_like_the_cli() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    let (s, before) = api_request(&gw, &w.ana, reqwest::Method::GET, "/me", None).await;
    assert_eq!(s, 200, "{before}");
    let (s, asked) = api_request(
        &gw,
        &w.ana,
        reqwest::Method::POST,
        "/conversations/group/messages",
        Some(json!({"content": "@Rex what is the status?"})),
    )
    .await;
    assert_eq!(s, 201, "{asked}");
    let (s, message) = api_request(
        &gw,
        &w.rex,
        reqwest::Method::POST,
        "/conversations/group/messages",
        Some(json!({"content": "All green."})),
    )
    .await;
    assert_eq!(s, 201, "{message}");
    assert!(message["id"].is_string(), "{message}");
    let created = message["createdAt"].as_str().expect("createdAt");
    // `formatClock(m.createdAt)`: an RFC 3339 UTC time with milliseconds.
    assert!(created.ends_with('Z') && created.len() == 24, "{created}");

    let since = "2000-01-01T00:00:00.000Z";
    let (s, res) = api_request(
        &gw,
        &w.rex,
        reqwest::Method::GET,
        &format!("/conversations/group/messages?since={since}&limit=50"),
        None,
    )
    .await;
    assert_eq!(s, 200, "{res}");
    let messages: Vec<&Value> = res["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["deletedAt"].is_null())
        .collect();
    assert_eq!(messages.len(), 2, "{res}");
    assert_eq!(res["context"]["you"]["agentId"], "rex");
    let (first, second) = (messages[0], messages[1]);
    assert_eq!(first["id"], asked["id"]);
    assert_eq!(first["senderId"], "ana");
    assert_eq!(first["senderType"], "USER");
    assert_eq!(first["sender"]["name"], "Ana");
    assert_eq!(first["sender"]["kind"], "user");
    assert!(first["sender"]["role"].is_string(), "{first}");
    assert_eq!(first["shouldRespond"], true, "→ you should respond");
    assert!(
        first["mentions"]
            .as_array()
            .unwrap()
            .contains(&json!("rex")),
        "{first}"
    );
    assert!(first["createdAt"].is_string() && first["content"].is_string());
    assert_eq!(second["senderType"], "AGENT");
    assert_eq!(second["shouldRespond"], false);
}

/// CLI 0.23.1 `mcp.js` `handleCreatePoll`: `POST /polls {conversationId,
/// question, options, allowMultiple?}` (the flag only when given), then
/// prints `result.pollId`; `INVALID_POLL` is its named refusal.
#[tokio::test]
async fn create_poll_answers_poll_id() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    let (s, result) = api_request(
        &gw,
        &w.rex,
        reqwest::Method::POST,
        "/polls",
        Some(json!({"conversationId": "group", "question": "Ship Friday?", "options": ["Yes", "No"]})),
    )
    .await;
    assert_eq!(s, 201, "{result}");
    let poll_id = result["pollId"]
        .as_str()
        .expect("result.pollId is a string");
    assert!(poll_id.starts_with("poll_"), "{result}");
    // What it returned before stays: the poll's message.
    assert_eq!(result["cardPayload"]["pollId"], poll_id);
    assert!(
        result["id"].as_str().unwrap().starts_with("msg_"),
        "{result}"
    );
    assert_eq!(result["poll"]["id"], poll_id);

    let (s, result) = api_request(
        &gw,
        &w.rex,
        reqwest::Method::POST,
        "/polls",
        Some(json!({"conversationId": "group", "question": "Which?", "options": ["A", "B", "C"], "allowMultiple": true})),
    )
    .await;
    assert_eq!(s, 201, "{result}");
    assert!(result["pollId"].is_string(), "{result}");

    let (s, body) = api_request(
        &gw,
        &w.rex,
        reqwest::Method::POST,
        "/polls",
        Some(json!({"conversationId": "group", "question": "Only one?", "options": ["Yes"]})),
    )
    .await;
    assert_eq!((s, api_error_code(s, &body)), (400, "INVALID_POLL"));
}

/// CLI 0.23.1 `mcp.js` `handleVoteInPoll`: `POST /polls/:id/vote
/// {optionIndexes}`, then `GET /polls/:id` and `view.poll.mine.map(i =>
/// view.options[i])`, `view.options.map((label, i) =>
/// view.poll.options.find(o => o.index === i)?.count ?? 0)`; its named
/// refusals are `POLL_NOT_FOUND`, `POLL_CLOSED`, `POLL_SINGLE_CHOICE` and
/// `INVALID_OPTION_INDEX`.
#[tokio::test]
async fn vote_in_poll_reads_labels_beside_the_tally() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    let (s, created) = api_request(
        &gw,
        &w.ana,
        reqwest::Method::POST,
        "/polls",
        Some(json!({"conversationId": "group", "question": "Lunch?", "options": ["Pizza", "Sushi", "Tacos"]})),
    )
    .await;
    assert_eq!(s, 201, "{created}");
    let poll_id = created["pollId"].as_str().unwrap().to_owned();
    let (s, ana_vote) = api_request(
        &gw,
        &w.ana,
        reqwest::Method::POST,
        &format!("/polls/{poll_id}/vote"),
        Some(json!({"optionIndexes": [2]})),
    )
    .await;
    assert_eq!(s, 200, "{ana_vote}");

    let vote = |indexes: Value| {
        let (gw, token, path) = (&gw, w.rex.clone(), format!("/polls/{poll_id}/vote"));
        async move {
            api_request(
                gw,
                &token,
                reqwest::Method::POST,
                &path,
                Some(json!({"optionIndexes": indexes})),
            )
            .await
        }
    };
    let (s, body) = vote(json!([1])).await;
    assert_eq!(s, 200, "{body}");
    let (s, view) = api_request(
        &gw,
        &w.rex,
        reqwest::Method::GET,
        &format!("/polls/{poll_id}"),
        None,
    )
    .await;
    assert_eq!(s, 200, "{view}");
    let labels = view["options"].as_array().expect("view.options");
    let chosen: Vec<&str> = view["poll"]["mine"]
        .as_array()
        .expect("view.poll.mine")
        .iter()
        .map(|i| labels[i.as_u64().unwrap() as usize].as_str().unwrap())
        .collect();
    assert_eq!(chosen, ["Sushi"]);
    let tally: Vec<String> = labels
        .iter()
        .enumerate()
        .map(|(i, label)| {
            let count = view["poll"]["options"]
                .as_array()
                .unwrap()
                .iter()
                .find(|o| o["index"] == i)
                .map_or(0, |o| o["count"].as_u64().unwrap());
            format!("{}: {count}", label.as_str().unwrap())
        })
        .collect();
    assert_eq!(tally.join(", "), "Pizza: 0, Sushi: 1, Tacos: 1");
    // The fields it had before stay.
    assert_eq!(view["cardPayload"]["pollId"], poll_id.as_str());
    assert_eq!(view["messageId"], created["id"]);
    assert_eq!(view["conversationId"], "group");

    // Withdrawn: `chosen.length === 0`.
    let (s, body) = vote(json!([])).await;
    assert_eq!(s, 200, "{body}");
    let (_, view) = api_request(
        &gw,
        &w.rex,
        reqwest::Method::GET,
        &format!("/polls/{poll_id}"),
        None,
    )
    .await;
    assert_eq!(view["poll"]["mine"], json!([]));

    // The refusals the handler names.
    let (s, body) = vote(json!([0, 1])).await;
    assert_eq!(api_error_code(s, &body), "POLL_SINGLE_CHOICE");
    let (s, body) = vote(json!([7])).await;
    assert_eq!(api_error_code(s, &body), "INVALID_OPTION_INDEX");
    let (s, body) = api_request(
        &gw,
        &w.rex,
        reqwest::Method::POST,
        "/polls/poll_nope/vote",
        Some(json!({"optionIndexes": [0]})),
    )
    .await;
    assert_eq!(api_error_code(s, &body), "POLL_NOT_FOUND");
    let (s, body) = api_request(
        &gw,
        &w.ana,
        reqwest::Method::POST,
        &format!("/polls/{poll_id}/close"),
        None,
    )
    .await;
    assert_eq!(s, 200, "{body}");
    let (s, body) = vote(json!([0])).await;
    assert_eq!(api_error_code(s, &body), "POLL_CLOSED");
}

/// CLI 0.23.1 `mcp.js` `react_to_message` (`handleReactToMessage`): `PUT
/// /conversations/:id/messages/:mid/reaction {emoji}`. The same reaction
/// as `POST …/reactions`: the same answer, and the same refusals.
#[tokio::test]
async fn react_to_message_puts_one_reaction() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    let (s, asked) = gw.post_message(&w.ana, "group", "@Rex can you look?").await;
    assert_eq!(s, 201, "{asked}");
    let mid = asked["id"].as_str().unwrap();
    let path = format!("/conversations/group/messages/{mid}/reaction");
    let put = |token: String, body: Value| {
        let (gw, path) = (&gw, path.clone());
        async move { api_request(gw, &token, reqwest::Method::PUT, &path, Some(body)).await }
    };
    let (s, answer) = put(w.rex.clone(), json!({"emoji": "👀"})).await;
    assert_eq!(s, 200, "{answer}");
    assert_eq!(answer["messageId"], mid);
    assert_eq!(
        answer["reactions"],
        json!([{"emoji": "👀", "count": 1, "mine": true}])
    );
    // PUT twice holds one reaction.
    let (s, again) = put(w.rex.clone(), json!({"emoji": "👀"})).await;
    assert_eq!((s, &again), (200, &answer));
    // It is the reaction POST makes: another member sees it on REST.
    let (_, page) = gw.get(&w.ana, "/conversations/group/messages").await;
    let on_rest = page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == mid)
        .unwrap();
    assert_eq!(
        on_rest["reactions"],
        json!([{"emoji": "👀", "count": 1, "mine": false}])
    );

    let (s, body) = put(w.rex.clone(), json!({"emoji": "eyes"})).await;
    assert_error(s, &body, 400, "INVALID_REACTION");
    let (s, body) = put(w.rex.clone(), json!({})).await;
    assert_error(s, &body, 400, "INVALID_JSON");
    let (s, body) = api_request(
        &gw,
        &w.rex,
        reqwest::Method::PUT,
        "/conversations/group/messages/msg_nope/reaction",
        Some(json!({"emoji": "👍"})),
    )
    .await;
    assert_error(s, &body, 404, "NOT_FOUND");
    // Not a member of the DM: 404, like POST.
    let (s, dm) = gw.post_message(&w.ana, "dm", "hi").await;
    assert_eq!(s, 201);
    let (s, body) = api_request(
        &gw,
        &w.ben,
        reqwest::Method::PUT,
        &format!(
            "/conversations/dm/messages/{}/reaction",
            dm["id"].as_str().unwrap()
        ),
        Some(json!({"emoji": "👍"})),
    )
    .await;
    assert_error(s, &body, 404, "NOT_FOUND");
}

/// CLI 0.23.1 `mcp.js` `handleSetTyping`: `POST
/// /conversations/:id/typing`, no body; any 2xx is success.
#[tokio::test]
async fn set_typing_succeeds_without_a_body() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    let (s, body) = api_request(
        &gw,
        &w.rex,
        reqwest::Method::POST,
        "/conversations/group/typing",
        None,
    )
    .await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["ok"], true);
    let (s, body) = api_request(
        &gw,
        &w.rex,
        reqwest::Method::POST,
        "/conversations/group/typing",
        Some(json!({})),
    )
    .await;
    assert_eq!(s, 200, "{body}");
}

/// CLI 0.23.1 `relay/updates.js` `runUpdatesLoop`: `GET
/// /updates?wait=25&cursor=…` (no cursor on the first call), keeping
/// `cursor` and handing `events` on; a 409 `CURSOR_EXPIRED` drops the
/// cursor and polls again without one.
#[tokio::test]
async fn updates_loop_keeps_the_cursor_and_recovers_from_409() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "b1").await;
    let (s, first) = api_request(&gw, &w.rex, reqwest::Method::GET, "/updates?wait=1", None).await;
    assert_eq!(s, 200, "{first}");
    let cursor = first["cursor"].as_str().expect("cursor").to_owned();
    assert!(first["events"].is_array(), "{first}");

    let (s, sent) = gw.post_message(&w.ana, "group", "@Rex ping").await;
    assert_eq!(s, 201, "{sent}");
    let (s, next) = api_request(
        &gw,
        &w.rex,
        reqwest::Method::GET,
        &format!("/updates?wait=25&cursor={cursor}"),
        None,
    )
    .await;
    assert_eq!(s, 200, "{next}");
    let events = next["events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{next}");
    assert_eq!(events[0]["type"], "message");
    assert_eq!(events[0]["conversationId"], "group");
    assert_eq!(events[0]["message"]["id"], sent["id"]);
    assert!(
        next["cursor"].as_str().is_some_and(|c| c != cursor),
        "{next}"
    );

    let (s, body) = api_request(
        &gw,
        &w.rex,
        reqwest::Method::GET,
        "/updates?wait=1&cursor=not-one-of-ours",
        None,
    )
    .await;
    assert_error(s, &body, 409, "CURSOR_EXPIRED");
    let (s, fresh) = api_request(&gw, &w.rex, reqwest::Method::GET, "/updates?wait=1", None).await;
    assert_eq!(s, 200, "{fresh}");
    assert!(fresh["cursor"].is_string(), "{fresh}");
}
