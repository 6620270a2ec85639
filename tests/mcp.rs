//! `/api/mcp` (docs/mcp.md) against real gateways, driven by an
//! independent MCP client: the official Python SDK (`mcp` from PyPI),
//! through `tests/mcp/client.py`. Covered: the bearer token before any
//! session, the tool list with the BayChat CLI's schemas, every tool on
//! the REST code paths (checked against REST), the routing marker,
//! refusals as tool errors with their codes, a session held to its token,
//! `wait_for_messages` losing nothing between calls, the request budget
//! and idle expiry.

mod common;
// Only the upload helpers are used here.
#[allow(dead_code)]
#[path = "common/files.rs"]
mod files_common;

use common::*;
use serde_json::{json, Value};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

const BAY: &str = "b1";

/// One MCP session of the Python SDK, in a child process.
struct Mcp {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    /// The `initialize` answer (`ok`, `result`, `session`) or the error.
    connect: Value,
}

impl Mcp {
    /// Connects to `gw`'s endpoint with `token`.
    async fn connect(gw: &Gateway, token: &str) -> Mcp {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/client.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(gw.url("/api/mcp"))
            .arg(token)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("python3 with the mcp package (pip install mcp)");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut mcp = Mcp {
            child,
            stdin,
            lines,
            connect: Value::Null,
        };
        mcp.connect = mcp.read().await;
        mcp
    }

    async fn read(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(90), self.lines.next_line())
            .await
            .expect("the MCP client answers")
            .unwrap()
            .unwrap_or_else(|| "{\"ok\": false, \"error\": \"client exited\"}".to_owned());
        serde_json::from_str(&line).unwrap()
    }

    async fn send(&mut self, cmd: Value) -> Value {
        let line = format!("{cmd}\n");
        if self.stdin.write_all(line.as_bytes()).await.is_err() {
            return json!({"ok": false, "error": "client exited"});
        }
        self.read().await
    }

    /// Calls `tool`; `(text, structuredContent, isError)`. Panics on a
    /// JSON-RPC or transport error.
    async fn call(&mut self, tool: &str, args: Value) -> (String, Value, bool) {
        let a = self
            .send(json!({"op": "call", "tool": tool, "args": args}))
            .await;
        assert_eq!(a["ok"], true, "{tool}: {a}");
        let r = &a["result"];
        let text = r["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        (text, r["structuredContent"].clone(), r["isError"] == true)
    }

    /// Calls `tool` and expects success; its text.
    async fn ok(&mut self, tool: &str, args: Value) -> String {
        let (text, data, error) = self.call(tool, args).await;
        assert!(!error, "{tool} refused: {text} {data}");
        text
    }

    fn session(&self) -> String {
        self.connect["session"].as_str().unwrap().to_owned()
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// A gateway with the test world, and Rex (an agent of the group and the
/// DM) connected over MCP.
async fn setup(opts: Opts) -> (Gateway, World, Mcp) {
    let gw = Gateway::spawn_with(opts).await;
    let w = World::create(&gw, BAY).await;
    let rex = Mcp::connect(&gw, &w.rex).await;
    assert_eq!(rex.connect["ok"], true, "{}", rex.connect);
    (gw, w, rex)
}

/// A POST to the endpoint with the headers an MCP client sends, in
/// `session` when given.
fn mcp_post(gw: &Gateway, token: &str, session: Option<&str>) -> reqwest::RequestBuilder {
    let req = gw
        .http
        .post(gw.url("/api/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25");
    match session {
        Some(s) => req.header("mcp-session-id", s),
        None => req,
    }
}

/// A raw JSON-RPC POST to the endpoint (for what the SDK would not send).
async fn raw_post(gw: &Gateway, token: &str, session: Option<&str>, body: Value) -> u16 {
    let req = mcp_post(gw, token, session).json(&body);
    req.send().await.unwrap().status().as_u16()
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}})
}

#[tokio::test]
async fn a_bad_token_is_401_before_any_session() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    for token in ["bay_not-a-token-of-this-bay", "nonsense", ""] {
        let res = gw
            .http
            .post(gw.url("/api/mcp"))
            .header("authorization", format!("Bearer {token}"))
            .header("accept", "application/json, text/event-stream")
            .json(&initialize())
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), 401, "{token}");
        assert!(res.headers().get("mcp-session-id").is_none());
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["code"], "UNAUTHORIZED", "{body}");
    }
    // The SDK cannot connect with one either.
    let stranger = Mcp::connect(&gw, "bay_not-a-token-of-this-bay").await;
    assert_eq!(stranger.connect["ok"], false, "{}", stranger.connect);
    // A revoked token stops working for an open session too.
    let mut rex = Mcp::connect(&gw, &w.rex).await;
    assert_eq!(rex.connect["ok"], true, "{}", rex.connect);
    rex.ok("list_conversations", json!({})).await;
    gw.revoke_token(BAY, "rex").await;
    let a = rex
        .send(json!({"op": "call", "tool": "list_conversations", "args": {}}))
        .await;
    assert_eq!(a["ok"], false, "{a}");
}

#[tokio::test]
async fn the_tools_and_the_protocol_resource_are_listed() {
    let (_gw, _w, mut rex) = setup(Opts::default()).await;
    let info = &rex.connect["result"];
    assert_eq!(info["protocolVersion"], "2025-11-25", "{info}");
    assert_eq!(info["serverInfo"]["name"], "switchboard");

    let a = rex.send(json!({"op": "list_tools"})).await;
    assert_eq!(a["ok"], true, "{a}");
    let tools = a["result"]["tools"].as_array().unwrap().clone();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for name in [
        "list_conversations",
        "get_room_context",
        "get_conversation_summary",
        "get_messages",
        "send_message",
        "create_poll",
        "vote_in_poll",
        "set_typing",
        "react_to_message",
        "list_files",
        "get_file",
        "wait_for_messages",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    let schema =
        |name: &str| tools.iter().find(|t| t["name"] == name).unwrap()["inputSchema"].clone();
    assert_eq!(
        schema("send_message")["required"],
        json!(["conversationId", "content"])
    );
    assert_eq!(
        schema("vote_in_poll")["properties"]["optionIndexes"]["type"],
        "array"
    );
    assert_eq!(
        schema("create_poll")["required"],
        json!(["conversationId", "question", "options"])
    );
    let get_messages = tools.iter().find(|t| t["name"] == "get_messages").unwrap();
    assert!(get_messages["description"]
        .as_str()
        .unwrap()
        .contains("shouldRespond is the ONLY reply authorization"));

    let a = rex.send(json!({"op": "list_resources"})).await;
    assert_eq!(
        a["result"]["resources"][0]["uri"], "baychat://protocol",
        "{a}"
    );
    let a = rex
        .send(json!({"op": "read_resource", "uri": "baychat://protocol"}))
        .await;
    let text = a["result"]["contents"][0]["text"].as_str().unwrap();
    assert!(text.contains("shouldRespond"), "{text}");
    let a = rex
        .send(json!({"op": "read_resource", "uri": "baychat://nothing"}))
        .await;
    assert_eq!(a["ok"], false, "{a}");
}

#[tokio::test]
async fn reading_tools_answer_what_rest_answers_with_the_routing_marker() {
    let (gw, w, mut rex) = setup(Opts::default()).await;
    let (s, asked) = gw
        .post_message(&w.ana, "group", "@Rex can you check?")
        .await;
    assert_eq!(s, 201, "{asked}");
    let (s, aside) = gw.post_message(&w.ana, "group", "@Scout and you?").await;
    assert_eq!(s, 201, "{aside}");

    let text = rex.ok("list_conversations", json!({})).await;
    assert!(text.contains("group  [GROUP]  group"), "{text}");
    assert!(text.contains("dm  [DM]  dm"), "{text}");

    let text = rex
        .ok("get_room_context", json!({"conversationId": "group"}))
        .await;
    assert!(text.contains("Participants:"), "{text}");
    assert!(text.contains("Rex (agent) ← you"), "{text}");
    assert!(text.contains("Bay Brain (agent)"), "{text}");

    let (text, data, _) = rex
        .call("get_messages", json!({"conversationId": "group"}))
        .await;
    let (_, page) = gw.get(&w.rex, "/conversations/group/messages").await;
    assert_eq!(data["messages"], page["messages"], "the REST page");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    let first = format!("Ana (member) [{}]: @Rex can you check?", id_of(&asked));
    assert!(lines[0].contains(&first), "{text}");
    // The marker says what REST's shouldRespond says, message by message.
    for (line, m) in lines.iter().zip(page["messages"].as_array().unwrap()) {
        assert_eq!(
            line.ends_with("→ you should respond"),
            m["shouldRespond"] == true,
            "{line} vs {m}"
        );
    }
    assert!(lines[0].ends_with("  → you should respond"), "{text}");
    assert!(!lines[1].contains('→'), "{text}");

    let text = rex
        .ok(
            "get_messages",
            json!({"conversationId": "group", "limit": 1}),
        )
        .await;
    assert_eq!(text.lines().count(), 1, "{text}");

    let text = rex
        .ok(
            "get_conversation_summary",
            json!({"conversationId": "group"}),
        )
        .await;
    assert!(text.contains("No rolling summary yet"), "{text}");
    assert!(text.contains("untrusted context"), "{text}");
    assert!(
        text.contains("@Rex can you check?  → you should respond"),
        "{text}"
    );
}

#[tokio::test]
async fn writing_tools_take_the_rest_paths() {
    let (gw, w, mut rex) = setup(Opts::default()).await;
    let text = rex
        .ok(
            "send_message",
            json!({"conversationId": "group", "content": "On it, @Ana."}),
        )
        .await;
    let (_, page) = gw.get(&w.ana, "/conversations/group/messages").await;
    let sent = &page["messages"][0];
    assert_eq!(sent["content"], "On it, @Ana.");
    assert_eq!(sent["senderId"], "rex");
    let mid = id_of(sent);
    assert!(text.contains(&format!("Sent message {mid}")), "{text}");

    // A reply quoting it, refused outside its conversation.
    let (s, q) = gw.post_message(&w.ana, "dm", "private note").await;
    assert_eq!(s, 201);
    let (text, _, error) = rex
        .call(
            "send_message",
            json!({"conversationId": "group", "content": "re", "replyToMessageId": id_of(&q)}),
        )
        .await;
    assert!(error && text.starts_with("INVALID_REPLY_TARGET"), "{text}");

    let text = rex
        .ok(
            "react_to_message",
            json!({"conversationId": "group", "messageId": mid, "emoji": "👍"}),
        )
        .await;
    assert!(text.contains("Reacted 👍"), "{text}");
    let (_, page) = gw.get(&w.ana, "/conversations/group/messages").await;
    assert_eq!(page["messages"][0]["reactions"][0]["emoji"], "👍", "{page}");

    let text = rex
        .ok("set_typing", json!({"conversationId": "group"}))
        .await;
    assert!(text.starts_with("Typing shown"), "{text}");

    let (text, created, _) = rex
        .call(
            "create_poll",
            json!({"conversationId": "group", "question": "Lunch?", "options": ["Pizza", "Sushi"]}),
        )
        .await;
    let poll = created["pollId"].as_str().unwrap().to_owned();
    assert!(text.contains(&format!("Its id is {poll}")), "{text}");
    let text = rex
        .ok(
            "vote_in_poll",
            json!({"pollId": poll, "optionIndexes": [1]}),
        )
        .await;
    assert_eq!(
        text,
        "Voted for Sushi. The tally is now — Pizza: 0, Sushi: 1."
    );
    let (s, view) = gw.get(&w.rex, &format!("/polls/{poll}")).await;
    assert_eq!(s, 200);
    assert_eq!(view["poll"]["mine"], json!([1]), "{view}");
    let text = rex
        .ok("vote_in_poll", json!({"pollId": poll, "optionIndexes": []}))
        .await;
    assert!(text.starts_with("Vote withdrawn"), "{text}");

    // Files: a file sent over REST is listed by list_files and fetched
    // through the URL get_file mints; an unknown one is a tool error.
    let aid = files_common::uploaded(&gw, &w.ana, "notes.txt", b"launch notes").await;
    let (s, m) = gw
        .post_json(
            &w.ana,
            "/conversations/group/messages",
            json!({"content": "the notes", "attachments": [{"attachmentId": aid}]}),
        )
        .await;
    assert_eq!(s, 201, "{m}");
    let (text, data, error) = rex
        .call("list_files", json!({"conversationId": "group"}))
        .await;
    assert!(!error, "{text}");
    assert!(text.contains(&aid) && text.contains("notes.txt"), "{text}");
    assert_eq!(data["totals"]["files"], 1, "{data}");
    let (text, data, error) = rex
        .call(
            "get_file",
            json!({"conversationId": "group", "attachmentId": aid}),
        )
        .await;
    assert!(!error, "{text}");
    let url = data["attachmentUrl"].as_str().unwrap();
    assert!(text.contains(url), "{text}");
    let got = test_http().get(url).send().await.unwrap();
    assert_eq!(got.status().as_u16(), 200);
    assert_eq!(got.bytes().await.unwrap().as_ref(), b"launch notes");
    let (text, data, error) = rex
        .call(
            "get_file",
            json!({"conversationId": "group", "attachmentId": "a_none"}),
        )
        .await;
    assert!(error, "{text}");
    assert_eq!(data["error"]["code"], "NOT_FOUND");
}

#[tokio::test]
async fn send_message_sends_uploaded_files_as_rest_does() {
    let (gw, w, mut rex) = setup(Opts::default()).await;
    let first = files_common::uploaded(&gw, &w.rex, "plan.txt", b"the plan").await;
    let second = files_common::uploaded(&gw, &w.rex, "notes.txt", b"the notes").await;
    let (text, data, error) = rex
        .call(
            "send_message",
            json!({"conversationId": "group", "content": "Both files, @Ana.",
                   "attachments": [{"attachmentId": first}, {"attachmentId": second}]}),
        )
        .await;
    assert!(!error, "{text} {data}");
    let (_, page) = gw.get(&w.ana, "/conversations/group/messages").await;
    let sent = &page["messages"][0];
    assert_eq!(sent["content"], "Both files, @Ana.", "{page}");
    let ids: Vec<&str> = sent["metadata"]["attachments"]
        .as_array()
        .unwrap_or_else(|| panic!("{sent}"))
        .iter()
        .map(|a| a["attachmentId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![first.as_str(), second.as_str()], "{sent}");
    let (text, _, _) = rex
        .call("list_files", json!({"conversationId": "group"}))
        .await;
    assert!(
        text.contains("plan.txt") && text.contains("notes.txt"),
        "{text}"
    );

    // Refused as REST refuses: a card with files, a malformed list, a file
    // that is not the sender's.
    let card = json!({"type": "card.email", "payload": {"subject": "s", "body": "b"}});
    let third = files_common::uploaded(&gw, &w.rex, "more.txt", b"more").await;
    let (text, _, error) = rex
        .call(
            "send_message",
            json!({"conversationId": "group", "content": "x", "card": card,
                   "attachments": [{"attachmentId": third}]}),
        )
        .await;
    assert!(error && text.starts_with("CARD_WITH_ATTACHMENTS"), "{text}");
    let (text, _, error) = rex
        .call(
            "send_message",
            json!({"conversationId": "group", "content": "x", "attachments": []}),
        )
        .await;
    assert!(error && text.starts_with("INVALID_REQUEST"), "{text}");
    let anas = files_common::uploaded(&gw, &w.ana, "hers.txt", b"hers").await;
    let (text, _, error) = rex
        .call(
            "send_message",
            json!({"conversationId": "group", "content": "x",
                   "attachments": [{"attachmentId": anas}]}),
        )
        .await;
    assert!(error, "{text}");
    let (_, page) = gw.get(&w.ana, "/conversations/group/messages").await;
    assert_eq!(
        page["messages"][0]["content"], "Both files, @Ana.",
        "{page}"
    );
}

#[tokio::test]
async fn protocol_refusals_are_tool_errors_with_their_codes() {
    let (gw, _w, mut rex) = setup(Opts::default()).await;
    gw.create_conversation(BAY, "private", "GROUP", &["ana", "ben"])
        .await;
    for (tool, args, code) in [
        (
            "get_messages",
            json!({"conversationId": "private"}),
            "NOT_PARTICIPANT",
        ),
        (
            "get_room_context",
            json!({"conversationId": "private"}),
            "NOT_PARTICIPANT",
        ),
        (
            "get_conversation_summary",
            json!({"conversationId": "private"}),
            "NOT_PARTICIPANT",
        ),
        (
            "send_message",
            json!({"conversationId": "private", "content": "hi"}),
            "NOT_FOUND",
        ),
        (
            "set_typing",
            json!({"conversationId": "private"}),
            "NOT_FOUND",
        ),
        (
            "get_messages",
            json!({"conversationId": "nowhere"}),
            "NOT_PARTICIPANT",
        ),
        (
            "send_message",
            json!({"conversationId": "group", "content": "  "}),
            "INVALID_CONTENT",
        ),
        (
            "vote_in_poll",
            json!({"pollId": "poll_x", "optionIndexes": [0]}),
            "POLL_NOT_FOUND",
        ),
        (
            "create_poll",
            json!({"conversationId": "group", "question": "?", "options": ["one"]}),
            "INVALID_POLL",
        ),
        (
            "get_messages",
            json!({"conversationId": "group", "limit": 0}),
            "INVALID_REQUEST",
        ),
    ] {
        let (text, data, error) = rex.call(tool, args).await;
        assert!(error, "{tool}: {text}");
        assert!(text.starts_with(&format!("{code}:")), "{tool}: {text}");
        assert_eq!(data["error"]["code"], code, "{tool}");
    }
    // Nothing was written into the conversation Rex is not in.
    let (_, page) = gw.get(&_w.ana, "/conversations/private/messages").await;
    assert_eq!(page["messages"], json!([]));
    // An unknown tool is a protocol error, not a tool error.
    let a = rex
        .send(json!({"op": "call", "tool": "no_such_tool", "args": {}}))
        .await;
    assert_eq!(a["ok"], false, "{a}");
}

#[tokio::test]
async fn a_session_answers_only_the_token_that_opened_it() {
    let (gw, w, rex) = setup(Opts::default()).await;
    let session = rex.session();
    assert!(session.len() >= 16, "an unguessable id: {session}");
    let list = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"});
    // Brain's token with Rex's session id: refused as if it did not exist.
    assert_eq!(
        raw_post(&gw, &w.brain, Some(&session), list.clone()).await,
        404
    );
    assert_eq!(
        raw_post(&gw, &w.brain, Some("made-up-session"), list.clone()).await,
        404
    );
    // Rex's own token still uses it.
    assert_eq!(raw_post(&gw, &w.rex, Some(&session), list).await, 200);
    // And a bad token is 401 whatever session it names.
    assert_eq!(
        raw_post(&gw, "bay_wrong", Some(&session), initialize()).await,
        401
    );
}

#[tokio::test]
async fn wait_for_messages_loses_nothing_between_calls() {
    let (gw, w, mut rex) = setup(Opts::default()).await;
    // The first call starts the session's position (nothing yet).
    let (text, first, _) = rex.call("wait_for_messages", json!({"timeout": 0.5})).await;
    assert!(text.contains("nothing new"), "{text}");
    assert_eq!(first["events"], json!([]));

    // Posted while no call is held: the next call has them, in order.
    let mut posted = Vec::new();
    for content in ["one @Rex", "two", "three"] {
        let (s, m) = gw.post_message(&w.ana, "group", content).await;
        assert_eq!(s, 201);
        posted.push(id_of(&m));
    }
    let (s, dm) = gw.post_message(&w.ana, "dm", "in private").await;
    assert_eq!(s, 201);
    posted.push(id_of(&dm));
    let mut got = Vec::new();
    let mut text = String::new();
    while got.len() < posted.len() {
        let (t, data, error) = rex.call("wait_for_messages", json!({"timeout": 5})).await;
        assert!(!error, "{t}");
        for e in data["events"].as_array().unwrap() {
            if e["type"] == "message" {
                got.push(id_of(&e["message"]));
            }
        }
        text.push_str(&t);
        text.push('\n');
    }
    assert_eq!(got, posted, "{text}");
    assert!(text.contains("── group (group) ──"), "{text}");
    assert!(text.contains("── dm (dm) ──"), "{text}");
    assert!(
        text.contains(&format!(
            "Ana (member) [{}]: one @Rex  → you should respond",
            posted[0]
        )),
        "{text}"
    );

    // Posted while a call is held: it comes back with that call.
    let post = {
        let (http, url, token) = (
            gw.http.clone(),
            gw.url("/api/agent-api/conversations/group/messages"),
            w.ben.clone(),
        );
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(700)).await;
            let res = http
                .post(url)
                .bearer_auth(token)
                .json(&json!({"content": "held"}))
                .send()
                .await
                .unwrap();
            let m: Value = res.json().await.unwrap();
            id_of(&m)
        })
    };
    let (_, data, _) = rex.call("wait_for_messages", json!({"timeout": 20})).await;
    let held = post.await.unwrap();
    let ids: Vec<String> = data["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "message")
        .map(|e| id_of(&e["message"]))
        .collect();
    assert_eq!(ids, vec![held]);

    // Nothing is delivered twice.
    let (_, data, _) = rex.call("wait_for_messages", json!({"timeout": 0.5})).await;
    let again: Vec<&Value> = data["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "message")
        .collect();
    assert!(again.is_empty(), "{data}");

    let (text, _, error) = rex
        .call("wait_for_messages", json!({"timeout": "soon"}))
        .await;
    assert!(error && text.starts_with("INVALID_REQUEST"), "{text}");
}

#[tokio::test]
async fn tool_calls_draw_on_the_agent_budget() {
    let opts = Opts::default().env("SWITCHBOARD_LIMITS__AGENT_REQUESTS_PER_MINUTE", "3");
    let (_gw, _w, mut rex) = setup(opts).await;
    let mut refused = None;
    for i in 0..6 {
        let (text, _, error) = rex.call("list_conversations", json!({})).await;
        if error {
            refused = Some((i, text));
            break;
        }
    }
    let (i, text) = refused.expect("the budget runs out");
    assert_eq!(i, 2, "the opening and two calls fit a budget of 3: {text}");
    assert!(text.starts_with("RATE_LIMITED:"), "{text}");
    assert!(text.contains("retry in"), "{text}");
}

#[tokio::test]
async fn idle_sessions_expire() {
    let opts = Opts::default().env("SWITCHBOARD_TIMING__MCP_SESSION_IDLE", "1s");
    let (gw, w, mut rex) = setup(opts).await;
    let session = rex.session();
    rex.ok("list_conversations", json!({})).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let list = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"});
    assert_eq!(raw_post(&gw, &w.rex, Some(&session), list).await, 404);
    // A new session works.
    let mut again = Mcp::connect(&gw, &w.rex).await;
    assert_eq!(again.connect["ok"], true, "{}", again.connect);
    again.ok("list_conversations", json!({})).await;
}

#[tokio::test]
async fn a_newer_connection_of_the_token_ends_a_held_wait() {
    let (gw, w, mut rex) = setup(Opts::default()).await;
    rex.ok("wait_for_messages", json!({"timeout": 0.2})).await;
    let (addr, token) = (gw.addr.clone(), w.rex.clone());
    let socket = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let mut ws = ws_at(&addr, &token).await.unwrap();
        ws.hello(None).await;
        ws
    });
    let (text, data, error) = rex.call("wait_for_messages", json!({"timeout": 20})).await;
    assert!(error, "{text}");
    assert!(text.starts_with("DISPLACED:"), "{text}");
    assert_eq!(data["error"]["code"], "DISPLACED");
    let _ws = socket.await.unwrap();
    // What was posted meanwhile is still there for the next call.
    let (s, m) = gw.post_message(&w.ana, "group", "after the takeover").await;
    assert_eq!(s, 201);
    let (_, data, _) = rex.call("wait_for_messages", json!({"timeout": 5})).await;
    let ids: Vec<String> = data["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "message")
        .map(|e| id_of(&e["message"]))
        .collect();
    assert_eq!(ids, vec![id_of(&m)]);
}

#[tokio::test]
async fn a_suspended_agent_is_refused_before_any_session() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    let (s, b) = gw
        .admin(
            reqwest::Method::POST,
            &format!("/bays/{BAY}/participants/rex/suspend"),
            None,
        )
        .await;
    assert!(s < 300, "{s} {b}");
    let res = gw
        .http
        .post(gw.url("/api/mcp"))
        .bearer_auth(&w.rex)
        .header("accept", "application/json, text/event-stream")
        .json(&initialize())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 403);
    assert!(res.headers().get("mcp-session-id").is_none());
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["code"], "ACCOUNT_SUSPENDED", "{body}");
}

#[tokio::test]
async fn a_held_wait_shows_as_the_mcp_transport_in_the_console() {
    let (gw, _w, mut rex) = setup(Opts::default()).await;
    let transports = || async {
        let (_, view) = gw
            .admin(
                reqwest::Method::GET,
                &format!("/bays/{BAY}/conversations/group/view"),
                None,
            )
            .await;
        view["members"]
            .as_array()
            .and_then(|m| m.iter().find(|m| m["id"] == "rex"))
            .map(|m| m["transports"].clone())
            .unwrap_or_default()
    };
    tokio::select! {
        answered = rex.call("wait_for_messages", json!({"timeout": 15})) => {
            panic!("the wait ended before the console saw it: {answered:?}")
        }
        seen = common::eventually(Duration::from_secs(10), || async {
            transports().await == json!(["mcp"])
        }) => assert!(seen, "{}", transports().await),
    }
}

// ---- the session's event stream (`GET /api/mcp`), read by a real SSE
// ---- parser (`eventsource-stream`) over reqwest ----

/// Opens a session with a raw `initialize`; its id.
async fn raw_session(base: &str, token: &str) -> String {
    let res = test_http()
        .post(format!("{base}/api/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .json(&initialize())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    res.headers()["mcp-session-id"].to_str().unwrap().to_owned()
}

type SseEvents = futures_util::stream::BoxStream<
    'static,
    Result<eventsource_stream::Event, eventsource_stream::EventStreamError<reqwest::Error>>,
>;

/// `GET /api/mcp` of `session`; the events or the refusal's status.
async fn mcp_stream(
    base: &str,
    token: &str,
    session: &str,
    last_event_id: Option<&str>,
) -> Result<SseEvents, u16> {
    use eventsource_stream::Eventsource;
    use futures_util::StreamExt;
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let mut req = client
        .get(format!("{base}/api/mcp"))
        .bearer_auth(token)
        .header("accept", "text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-session-id", session);
    if let Some(id) = last_event_id {
        req = req.header("Last-Event-ID", id);
    }
    let res = req.send().await.unwrap();
    if res.status().as_u16() != 200 {
        return Err(res.status().as_u16());
    }
    Ok(res.bytes_stream().eventsource().boxed())
}

/// The next notification: `(sse id, method, params)`; `None` when the stream ended.
async fn next_note(events: &mut SseEvents) -> Option<(String, String, Value)> {
    use futures_util::StreamExt;
    let e = tokio::time::timeout(Duration::from_secs(30), events.next())
        .await
        .expect("a notification within 30 s")?
        .ok()?;
    assert_eq!(
        e.event, "message",
        "MCP clients read only message events: {e:?}"
    );
    let v: Value = serde_json::from_str(&e.data).unwrap();
    assert_eq!(v["jsonrpc"], "2.0", "{v}");
    assert!(v.get("id").is_none(), "a notification, not a request: {v}");
    Some((
        e.id,
        v["method"].as_str().unwrap().to_owned(),
        v["params"].clone(),
    ))
}

/// Reads until `n` event notifications: `(sse id, message id)` of each message.
async fn next_messages(events: &mut SseEvents, n: usize) -> Vec<(String, String)> {
    let mut out = Vec::new();
    while out.len() < n {
        let (id, method, params) = next_note(events).await.expect("the stream is open");
        if method == "notifications/baychat/event" {
            assert_eq!(
                params["cursor"],
                id.as_str(),
                "the id is the cursor: {params}"
            );
            if params["event"]["type"] == "message" {
                out.push((id, id_of(&params["event"]["message"])));
            }
        } else {
            assert_eq!(method, "notifications/baychat/cursor", "{params}");
        }
    }
    out
}

/// Reads until the `close` notification; its params.
async fn until_close(events: &mut SseEvents) -> Value {
    loop {
        let (_, method, params) = next_note(events).await.expect("a close before the end");
        if method == "notifications/baychat/close" {
            assert!(next_note(events).await.is_none(), "nothing after close");
            return params;
        }
    }
}

#[tokio::test]
async fn the_session_stream_carries_events_as_notifications_with_cursor_ids() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    let base = gw.url("");
    let session = raw_session(&base, &w.rex).await;
    let mut events = mcp_stream(&base, &w.rex, &session, None).await.unwrap();
    let (first, method, _) = next_note(&mut events).await.unwrap();
    assert_eq!(method, "notifications/baychat/cursor");
    assert!(!first.is_empty());
    let mut posted = Vec::new();
    for content in ["one @Rex", "two", "three"] {
        let (s, m) = gw.post_message(&w.ana, "group", content).await;
        assert_eq!(s, 201);
        posted.push(id_of(&m));
    }
    let got = next_messages(&mut events, 2).await;
    assert_eq!(
        got.iter().map(|g| g.1.clone()).collect::<Vec<_>>(),
        posted[..2]
    );
    drop(events);
    // Reconnecting with the id of the second resumes right after it.
    let mut events = mcp_stream(&base, &w.rex, &session, Some(&got[1].0))
        .await
        .unwrap();
    let again = next_messages(&mut events, 1).await;
    assert_eq!(again[0].1, posted[2]);
    let (s, m) = gw.post_message(&w.ana, "dm", "in private").await;
    assert_eq!(s, 201);
    assert_eq!(next_messages(&mut events, 1).await[0].1, id_of(&m));
}

#[tokio::test]
async fn a_stream_resumes_on_another_node_after_a_kill_9_without_loss_or_duplicates() {
    let redis = RedisServer::start(false);
    let opts = Opts::default().redis(&redis.url());
    let mut a = Gateway::spawn_with(opts.clone()).await;
    let b = Gateway::spawn_with(opts).await;
    let w = World::create(&a, BAY).await;
    let session = raw_session(&a.url(""), &w.rex).await;
    let mut events = mcp_stream(&a.url(""), &w.rex, &session, None)
        .await
        .unwrap();
    next_note(&mut events).await.unwrap();
    let mut posted = Vec::new();
    for content in ["one", "two"] {
        let (s, m) = a.post_message(&w.ana, "group", content).await;
        assert_eq!(s, 201);
        posted.push(id_of(&m));
    }
    let seen = next_messages(&mut events, 2).await;
    a.kill_now();
    for content in ["three", "four"] {
        let (s, m) = b.post_message(&w.ana, "group", content).await;
        assert_eq!(s, 201);
        posted.push(id_of(&m));
    }
    // The session died with node A; a new one on B resumes after "two".
    let other = raw_session(&b.url(""), &w.rex).await;
    let mut events = mcp_stream(&b.url(""), &w.rex, &other, Some(&seen[1].0))
        .await
        .unwrap();
    let rest = next_messages(&mut events, 2).await;
    assert_eq!(
        rest.iter().map(|g| g.1.clone()).collect::<Vec<_>>(),
        posted[2..]
    );
    // Nothing more: no duplicate follows.
    let quiet = tokio::time::timeout(Duration::from_secs(2), async {
        loop {
            let (_, method, params) = next_note(&mut events).await.unwrap();
            if method == "notifications/baychat/event" {
                return params;
            }
        }
    })
    .await;
    assert!(quiet.is_err(), "a duplicate: {quiet:?}");
    drop(events);
    // And from after "one", exactly two to four, once each.
    let third = raw_session(&b.url(""), &w.rex).await;
    let mut events = mcp_stream(&b.url(""), &w.rex, &third, Some(&seen[0].0))
        .await
        .unwrap();
    let all = next_messages(&mut events, 3).await;
    assert_eq!(
        all.iter().map(|g| g.1.clone()).collect::<Vec<_>>(),
        posted[1..]
    );
}

#[tokio::test]
async fn displacement_and_revocation_end_the_stream_with_a_close_notification() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    let base = gw.url("");
    let session = raw_session(&base, &w.rex).await;
    let mut events = mcp_stream(&base, &w.rex, &session, None).await.unwrap();
    next_note(&mut events).await.unwrap();
    let _ws = gw.ws_ready(&w.rex, None).await;
    let close = until_close(&mut events).await;
    assert_eq!(close["code"], "DISPLACED", "{close}");
    // The session does not stream again (an SDK's reconnect would
    // displace back): 405, and the socket stays.
    assert_eq!(
        mcp_stream(&base, &w.rex, &session, None).await.err(),
        Some(405)
    );
    let res = test_http()
        .get(format!("{base}/api/mcp"))
        .bearer_auth(&w.rex)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 405);
    assert_eq!(res.headers()["allow"], "POST, DELETE");
    drop(_ws);

    let session = raw_session(&base, &w.brain).await;
    let mut events = mcp_stream(&base, &w.brain, &session, None).await.unwrap();
    next_note(&mut events).await.unwrap();
    gw.revoke_token(BAY, "brain").await;
    let close = until_close(&mut events).await;
    assert_eq!(close["code"], "CREDENTIAL_REVOKED", "{close}");
    assert_eq!(
        mcp_stream(&base, &w.brain, &session, None).await.err(),
        Some(401)
    );
}

#[tokio::test]
async fn a_foreign_token_cannot_open_a_sessions_stream() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    let base = gw.url("");
    let session = raw_session(&base, &w.rex).await;
    let mut events = mcp_stream(&base, &w.rex, &session, None).await.unwrap();
    next_note(&mut events).await.unwrap();
    assert_eq!(
        mcp_stream(&base, &w.brain, &session, None).await.err(),
        Some(404)
    );
    // Rex's stream goes on, undisturbed.
    let (s, m) = gw.post_message(&w.ana, "dm", "still yours").await;
    assert_eq!(s, 201);
    assert_eq!(next_messages(&mut events, 1).await[0].1, id_of(&m));
}

#[tokio::test]
async fn the_python_sdk_receives_events_on_its_own_stream_as_notifications() {
    // The SDK opens the session's GET stream by itself after `initialize`;
    // the notifications reach its handlers with the cursor and the event.
    let (gw, w, mut rex) = setup(Opts::default()).await;
    // The stream listens from when it opened: its first `cursor` says so.
    let mut open = false;
    for _ in 0..150 {
        let notes = rex.send(json!({"op": "notifications"})).await["result"].clone();
        if notes
            .as_array()
            .is_some_and(|n| n.iter().any(|n| n["method"] == "cursor"))
        {
            open = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(open, "the SDK's stream never opened");
    let (s, m) = gw.post_message(&w.ana, "group", "hello @Rex").await;
    assert_eq!(s, 201);
    let want = id_of(&m);
    let has = |notes: &Value| {
        notes.as_array().is_some_and(|notes| {
            notes.iter().any(|n| {
                n["method"] == "event"
                    && n["params"]["event"]["type"] == "message"
                    && id_of(&n["params"]["event"]["message"]) == want
                    && n["params"]["cursor"]
                        .as_str()
                        .is_some_and(|c| !c.is_empty())
            })
        })
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let mut seen = Value::Null;
    while tokio::time::Instant::now() < deadline && !has(&seen) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        seen = rex.send(json!({"op": "notifications"})).await["result"].clone();
    }
    assert!(has(&seen), "no event notification for {want}: {seen}");
}

#[tokio::test]
async fn deleting_a_session_ends_it_with_204_for_its_own_token_only() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    let base = gw.url("");
    let session = raw_session(&base, &w.rex).await;
    let delete = |token: &str| {
        test_http()
            .delete(format!("{base}/api/mcp"))
            .bearer_auth(token.to_owned())
            .header("mcp-protocol-version", "2025-11-25")
            .header("mcp-session-id", session.clone())
            .send()
    };
    // Another token cannot end it.
    assert_eq!(delete(&w.brain).await.unwrap().status().as_u16(), 404);
    // Its own can: 204 (the SDKs expect 200 or 204), and then it is gone.
    assert_eq!(delete(&w.rex).await.unwrap().status().as_u16(), 204);
    let list = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"});
    assert_eq!(raw_post(&gw, &w.rex, Some(&session), list).await, 404);
}

/// A raw POST of `body` bytes with `content_type`; the status and the
/// body, which must be JSON.
async fn raw_bytes(
    gw: &Gateway,
    token: &str,
    session: Option<&str>,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, Value) {
    let req = mcp_post(gw, token, session).header("content-type", content_type);
    let res = req.body(body).send().await.unwrap();
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{status}: not JSON: {text}"));
    (status, body)
}

#[tokio::test]
async fn transport_refusals_are_json_and_bad_params_are_invalid_params() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    let session = raw_session(&gw.url(""), &w.rex).await;
    let s = Some(session.as_str());
    let json = "application/json";
    // Not JSON at all: JSON-RPC's parse error, no id.
    let (status, body) = raw_bytes(&gw, &w.rex, s, json, b"{\"jsonrpc\":".to_vec()).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!(-32700)),
        "{body}"
    );
    assert_eq!(body["id"], Value::Null);
    // JSON, but no JSON-RPC message: invalid request.
    let (status, body) = raw_bytes(&gw, &w.rex, s, json, b"{\"a\":1}".to_vec()).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!(-32600)),
        "{body}"
    );
    // A standard method with params of the wrong shape: invalid params
    // for that request id (not "method not found").
    for params in [
        json!({"name": 5}),
        json!({"name": "list_conversations", "arguments": [1]}),
        json!("x"),
    ] {
        let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params});
        let (status, body) = raw_bytes(&gw, &w.rex, s, json, call.to_string().into_bytes()).await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (200, &json!(-32602)),
            "{body}"
        );
        assert_eq!(body["id"], 7);
    }
    // The transport's own refusals carry the agent API's error body.
    let (status, body) = raw_bytes(&gw, &w.rex, s, "text/plain", b"{}".to_vec()).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (415, Some("UNSUPPORTED_MEDIA_TYPE")),
        "{body}"
    );
    let too_big = format!("{{\"x\":\"{}\"}}", "a".repeat(2 << 20)).into_bytes();
    let (status, body) = raw_bytes(&gw, &w.rex, s, json, too_big).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (413, Some("PAYLOAD_TOO_LARGE")),
        "{body}"
    );
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    let (status, body) = raw_bytes(&gw, &w.rex, None, json, list.into_bytes()).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("INVALID_REQUEST")),
        "{body}"
    );
    let res = gw
        .http
        .put(gw.url("/api/mcp"))
        .bearer_auth(&w.rex)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 405);
    assert_eq!(res.headers()["allow"], "GET, POST, DELETE");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["code"], "METHOD_NOT_ALLOWED", "{body}");
    // And the session still works afterwards.
    let call = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
        "params": {"name": "list_conversations", "arguments": {}}});
    let res = mcp_post(&gw, &w.rex, s).json(&call).send().await.unwrap();
    assert_eq!(res.status().as_u16(), 200);
    assert!(res.text().await.unwrap().contains("\"result\""));
}

#[tokio::test]
async fn a_token_holds_a_bounded_number_of_sessions_and_each_opening_draws_on_its_budget() {
    let opts = Opts::default().env("SWITCHBOARD_LIMITS__MAX_MCP_SESSIONS_PER_TOKEN", "2");
    let gw = Gateway::spawn_with(opts).await;
    let w = World::create(&gw, BAY).await;
    let base = gw.url("");
    let first = raw_session(&base, &w.rex).await;
    raw_session(&base, &w.rex).await;
    let (status, body) = raw_bytes(
        &gw,
        &w.rex,
        None,
        "application/json",
        initialize().to_string().into_bytes(),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (429, Some("RATE_LIMITED")),
        "{body}"
    );
    // Another token is not held to Rex's sessions.
    raw_session(&base, &w.brain).await;
    // Ending one makes room for the next.
    let res = mcp_post(&gw, &w.rex, Some(&first)).build().unwrap();
    let res = gw
        .http
        .delete(res.url().clone())
        .headers(res.headers().clone())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 204);
    raw_session(&base, &w.rex).await;

    // Each opening is a request on the agent budget (60/min by default).
    let opts = Opts::default().env("SWITCHBOARD_LIMITS__AGENT_REQUESTS_PER_MINUTE", "2");
    let gw = Gateway::spawn_with(opts).await;
    let w = World::create(&gw, BAY).await;
    let init = initialize().to_string();
    for _ in 0..2 {
        raw_session(&gw.url(""), &w.scout).await;
    }
    let (status, body) =
        raw_bytes(&gw, &w.scout, None, "application/json", init.into_bytes()).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (429, Some("RATE_LIMITED")),
        "{body}"
    );
}

#[tokio::test]
async fn a_sessions_stream_yields_to_a_listener_of_the_token_and_does_not_displace_it() {
    let opts = Opts::default()
        .env("SWITCHBOARD_TIMING__PRESENCE_INTERVAL", "300ms")
        .env("SWITCHBOARD_TIMING__PRESENCE_TICK", "200ms");
    let gw = Gateway::spawn_with(opts).await;
    let w = World::create(&gw, BAY).await;
    let base = gw.url("");
    let mut ws = gw.ws_ready(&w.rex, None).await;
    // Once the node's presence record shows the socket (another agent sees
    // Rex online) …
    let shown = eventually(Duration::from_secs(10), || async {
        let (_, agents) = gw.get(&w.brain, "/agents").await;
        agents["agents"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|a| a["id"] == "rex" && a["status"] == "online")
    })
    .await;
    assert!(shown, "the presence record shows the socket");
    // … an MCP client's own stream (which the SDKs open after
    // `initialize`) is refused …
    let session = raw_session(&base, &w.rex).await;
    assert_eq!(
        mcp_stream(&base, &w.rex, &session, None).await.err(),
        Some(405),
        "the stream yields to the WebSocket"
    );
    // … its tools still work, and the socket was never displaced.
    let list = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
    assert_eq!(raw_post(&gw, &w.rex, Some(&session), list).await, 200);
    let (status, _) = gw.post_message(&w.ana, "dm", "still there?").await;
    assert_eq!(status, 201);
    let (frame, _) = ws.until_frame("event", Duration::from_secs(5)).await;
    assert_eq!(
        frame["event"]["message"]["content"], "still there?",
        "{frame}"
    );
    // Without another listener the stream opens as before.
    let session = raw_session(&base, &w.scout).await;
    assert!(mcp_stream(&base, &w.scout, &session, None).await.is_ok());
}
