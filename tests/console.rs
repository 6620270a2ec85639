//! The operator console's API and page, over real HTTP: the node
//! directory, a conversation's view and live stream (messages as they are
//! posted, presence as sessions come and go), posting as a member with
//! each recipient's `shouldRespond`, webhook health, and the page's
//! assets served from the binary. Runs on memory and, with
//! `SWITCHBOARD_TEST_STORE=redis`, on Redis (two nodes share one there).

mod common;

use common::sse::stream_http;
use common::{assert_error, eventually, Gateway, Opts, RedisServer, World, ADMIN_TOKEN};
use eventsource_stream::{Event, Eventsource};
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::time::Duration;

async fn admin_get(gw: &Gateway, path: &str) -> (u16, Value) {
    let res = gw
        .http
        .get(gw.url(&format!("/api/admin{path}")))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

async fn post_as(gw: &Gateway, conversation: &str, body: Value) -> (u16, Value) {
    let res = gw
        .http
        .post(gw.url(&format!(
            "/api/admin/bays/acme/conversations/{conversation}/messages"
        )))
        .bearer_auth(ADMIN_TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

type Events =
    BoxStream<'static, Result<Event, eventsource_stream::EventStreamError<reqwest::Error>>>;

async fn open_stream(gw: &Gateway, path: &str) -> Events {
    let res = stream_http()
        .get(gw.url(&format!("/api/admin{path}")))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    res.bytes_stream().eventsource().boxed()
}

/// The next event named `name` and its data, skipping others.
async fn until(events: &mut Events, name: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let next = tokio::time::timeout_at(deadline, events.next())
            .await
            .unwrap_or_else(|_| panic!("no {name} event"))
            .expect("stream ended")
            .expect("stream failed");
        if std::env::var_os("CONSOLE_TEST_TRACE").is_some() {
            eprintln!("{}: {}", next.event, next.data);
        }
        if next.event == name {
            let data: Value = serde_json::from_str(&next.data).unwrap();
            if pred(&data) {
                return data;
            }
        }
    }
}

#[tokio::test]
async fn the_node_directory_lists_this_node_with_its_connections() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "acme").await;
    let ws = gw.ws_ready(&w.rex, None).await;
    let listed = eventually(Duration::from_secs(10), || async {
        let (status, body) = admin_get(&gw, "/nodes").await;
        status == 200
            && body["nodes"].as_array().is_some_and(|nodes| {
                nodes.iter().any(|n| {
                    n["id"] == body["self"]
                        && n["connections"]["ws"] == 1
                        && n["bays"].as_array().unwrap().contains(&json!("acme"))
                        && n["version"] == env!("CARGO_PKG_VERSION")
                        && n["canaryMs"].as_f64().is_some()
                })
            })
    })
    .await;
    assert!(listed, "{}", admin_get(&gw, "/nodes").await.1);
    // The stream form: a `nodes` event at once.
    let mut events = open_stream(&gw, "/nodes/live").await;
    let first = until(&mut events, "nodes", |_| true).await;
    assert!(!first["nodes"].as_array().unwrap().is_empty(), "{first}");
    ws.close().await;
    // Without the admin token: 401, as every admin route.
    let res = gw
        .http
        .get(gw.url("/api/admin/nodes"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
}

#[tokio::test]
async fn two_nodes_on_one_redis_both_appear() {
    if std::env::var("SWITCHBOARD_TEST_STORE").as_deref() != Ok("redis") {
        return; // one node per memory store: nothing to share
    }
    let redis = RedisServer::start(false);
    let a = Gateway::spawn_with(Opts::default().redis(&redis.url())).await;
    let _b = Gateway::spawn_with(Opts::default().redis(&redis.url())).await;
    let both = eventually(Duration::from_secs(10), || async {
        admin_get(&a, "/nodes").await.1["nodes"]
            .as_array()
            .is_some_and(|n| n.len() == 2)
    })
    .await;
    assert!(both, "{}", admin_get(&a, "/nodes").await.1);
}

#[tokio::test]
async fn posting_as_a_member_shows_each_recipients_verdict() {
    let gw = Gateway::spawn().await;
    let _w = World::create(&gw, "acme").await;
    let (status, body) = post_as(&gw, "group", json!({"as": "ana", "content": "@Rex ping"})).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["message"]["sender"]["id"], "ana");
    let verdicts: Vec<(String, bool)> = body["recipients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_owned(),
                r["shouldRespond"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        verdicts,
        vec![
            ("ben".into(), false),
            ("rex".into(), true),
            ("brain".into(), false),
            ("scout".into(), false)
        ]
    );
    // The message is really there, in the view.
    let (_, view) = admin_get(&gw, "/bays/acme/conversations/group/view").await;
    assert_eq!(view["messages"][0]["content"], "@Rex ping", "{view}");
    assert_eq!(view["members"].as_array().unwrap().len(), 5);

    // Refusals: a non-member, an unknown participant, a blank text, no token.
    let (s, b) = post_as(&gw, "dm", json!({"as": "ben", "content": "hi"})).await;
    assert_error(s, &b, 404, "NOT_FOUND");
    let (s, b) = post_as(&gw, "group", json!({"as": "nobody", "content": "hi"})).await;
    assert_error(s, &b, 404, "NOT_FOUND");
    let (s, b) = post_as(&gw, "group", json!({"as": "ana", "content": "  "})).await;
    assert_error(s, &b, 400, "INVALID_CONTENT");
    let (s, b) = post_as(&gw, "group", json!({"as": "ana", "text": "x"})).await;
    assert_error(s, &b, 400, "INVALID_JSON");
    let res = gw
        .http
        .post(gw.url("/api/admin/bays/acme/conversations/group/messages"))
        .json(&json!({"as": "ana", "content": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    let res = gw
        .http
        .post(gw.url("/api/admin/bays/acme/participants/ben/suspend"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success());
    let (s, b) = post_as(&gw, "group", json!({"as": "ben", "content": "hi"})).await;
    assert_error(s, &b, 403, "ACCOUNT_SUSPENDED");
    let (_, view) = admin_get(&gw, "/bays/acme/conversations/group/view").await;
    assert_eq!(
        view["messages"].as_array().unwrap().len(),
        1,
        "nothing else stored"
    );
}

#[tokio::test]
async fn the_live_stream_carries_messages_drafts_and_presence() {
    let gw = Gateway::spawn_with(
        Opts::default()
            .env("SWITCHBOARD_TIMING__PRESENCE_LINGER", "300ms")
            .env("SWITCHBOARD_TIMING__PRESENCE_TICK", "100ms"),
    )
    .await;
    let w = World::create(&gw, "acme").await;
    let mut events = open_stream(&gw, "/bays/acme/conversations/group/live").await;
    let view = until(&mut events, "view", |_| true).await;
    assert_eq!(view["conversation"]["id"], "group");

    let (status, sent) = gw.post_message(&w.ana, "group", "hello operators").await;
    assert_eq!(status, 201, "{sent}");
    let seen = until(&mut events, "message", |m| {
        m["content"] == "hello operators"
    })
    .await;
    assert_eq!(seen["id"], sent["id"]);
    assert_eq!(seen["sender"]["id"], "ana");

    // A message of another conversation does not reach this stream.
    gw.post_message(&w.ana, "dm", "private").await;

    // A streaming draft: opened, then grown by a delta.
    let (status, draft) = gw
        .post_json(
            &w.rex,
            "/conversations/group/messages",
            json!({"content": "thinking", "stream": true}),
        )
        .await;
    assert_eq!(status, 201, "{draft}");
    let opened = until(&mut events, "message", |m| m["id"] == draft["id"]).await;
    assert_eq!(opened["streaming"], true);
    let path = format!(
        "/conversations/group/messages/{}/append",
        draft["id"].as_str().unwrap()
    );
    let (status, body) = gw
        .post_json(&w.rex, &path, json!({"offset": 8, "text": " hard"}))
        .await;
    assert_eq!(status, 200, "{body}");
    let delta = until(&mut events, "delta", |d| d["id"] == draft["id"]).await;
    assert_eq!(delta["text"], " hard");

    // Presence: Scout connects (online), then its socket closes (offline).
    let ws = gw.ws_ready(&w.scout, None).await;
    until(&mut events, "presence", |p| {
        p["participant"] == "scout" && p["state"] == "online"
    })
    .await;
    ws.close().await;
    until(&mut events, "presence", |p| {
        p["participant"] == "scout" && p["state"] == "offline"
    })
    .await;

    let (s, b) = admin_get(&gw, "/bays/acme/conversations/nope/live").await;
    assert_error(s, &b, 404, "NOT_FOUND");
}

#[tokio::test]
async fn webhook_health_shows_the_failing_agent_and_its_backlog() {
    let gw = Gateway::spawn_with(
        Opts::default()
            .env("SWITCHBOARD_WEBHOOKS__ALLOW_HTTP", "true")
            .env("SWITCHBOARD_WEBHOOKS__ALLOW_PRIVATE_DESTINATIONS", "true")
            .env("SWITCHBOARD_WEBHOOKS__ATTEMPT_TIMEOUT", "1s")
            .env("SWITCHBOARD_WEBHOOKS__RETRY_INITIAL", "100ms")
            .env("SWITCHBOARD_WEBHOOKS__RETRY_MAX", "1s"),
    )
    .await;
    let w = World::create(&gw, "acme").await;
    // A port nobody listens on: every attempt fails to connect.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", closed.local_addr().unwrap());
    drop(closed);
    let res = gw
        .http
        .put(gw.url("/api/admin/bays/acme/participants/rex/webhook"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({ "url": url }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    for n in 0..3 {
        gw.post_message(&w.ana, "group", &format!("to the hook {n}"))
            .await;
    }
    let failing = eventually(Duration::from_secs(15), || async {
        let (_, body) = admin_get(&gw, "/bays/acme/webhooks").await;
        body["webhooks"].as_array().is_some_and(|hooks| {
            hooks.iter().any(|h| {
                h["agent"] == "rex"
                    && h["url"] == url.as_str()
                    && h["lastError"].is_string()
                    && h["failingSince"].is_string()
                    && h["backlog"].as_u64() >= Some(3)
            })
        })
    })
    .await;
    assert!(failing, "{}", admin_get(&gw, "/bays/acme/webhooks").await.1);
    let (_, body) = admin_get(&gw, "/bays/acme/webhooks").await;
    let scout = body["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["agent"] == "scout")
        .unwrap()
        .clone();
    assert_eq!(scout["url"], Value::Null);
    assert_eq!(scout["backlog"], 0);
    let (s, b) = admin_get(&gw, "/bays/nope/webhooks").await;
    assert_error(s, &b, 404, "NOT_FOUND");
}

#[tokio::test]
async fn the_page_and_its_assets_come_from_the_binary() {
    let gw = Gateway::spawn().await;
    for (path, kind, needle) in [
        ("/console", "text/html", "console.js"),
        ("/console/console.js", "text/javascript", "sessionStorage"),
        ("/console/console.css", "text/css", ".presence"),
    ] {
        let res = gw.http.get(gw.url(path)).send().await.unwrap();
        assert_eq!(res.status(), 200, "{path}");
        let headers = res.headers().clone();
        assert!(headers["content-type"].to_str().unwrap().starts_with(kind));
        assert!(headers["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("default-src 'self'"));
        let text = res.text().await.unwrap();
        assert!(text.contains(needle), "{path}");
        assert!(
            !text.contains("http://") && !text.contains("https://"),
            "{path} loads nothing from elsewhere"
        );
    }
    let res = gw
        .http
        .get(gw.url("/console/../Cargo.toml"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
    let res = gw
        .http
        .get(gw.url("/console/nope.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
    // The address typed with a trailing slash leads to the page.
    let plain = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let res = plain.get(gw.url("/console/")).send().await.unwrap();
    assert_eq!(res.status(), 308);
    assert_eq!(res.headers()["location"], "/console");
    let res = gw.http.get(gw.url("/console/")).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.text().await.unwrap().contains("console.js"));
}

/// The `transports` of `member` in a `members` list (a view's or a
/// `sessions` event's).
fn transports_of(members: &Value, member: &str) -> Vec<String> {
    members
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == member)
        .unwrap_or_else(|| panic!("no {member} in {members}"))["transports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn members_show_their_transports_and_node_live() {
    let gw = Gateway::spawn_with(
        Opts::default()
            .env("SWITCHBOARD_WEBHOOKS__ALLOW_HTTP", "true")
            .env("SWITCHBOARD_WEBHOOKS__ALLOW_PRIVATE_DESTINATIONS", "true"),
    )
    .await;
    let w = World::create(&gw, "acme").await;
    let (_, nodes) = admin_get(&gw, "/nodes").await;
    let node = nodes["self"].clone();
    let mut events = open_stream(&gw, "/bays/acme/conversations/group/live").await;
    let view = until(&mut events, "view", |_| true).await;
    assert!(transports_of(&view["members"], "scout").is_empty());

    // A socket: `ws`, on this node.
    let ws = gw.ws_ready(&w.scout, None).await;
    let seen = until(&mut events, "sessions", |d| {
        transports_of(&d["members"], "scout") == ["ws"]
    })
    .await;
    let scout = seen["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "scout")
        .unwrap();
    assert_eq!(scout["sessions"][0]["node"], node, "{seen}");
    assert_eq!(scout["sessions"][0]["lingering"], false, "{seen}");

    // Another transport of a member already online (its token's stream
    // displaces the socket, protocol §11): no presence change, yet the
    // stream shows the switch.
    let sse = common::sse::sse_at(&gw.url(""), &w.scout, Default::default())
        .await
        .unwrap();
    until(&mut events, "sessions", |d| {
        transports_of(&d["members"], "scout") == ["sse"]
    })
    .await;

    // A webhook is a transport too.
    let res = gw
        .http
        .put(gw.url("/api/admin/bays/acme/participants/brain/webhook"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({ "url": "http://127.0.0.1:9/brain" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    // With the node whose worker holds the delivery lease.
    until(&mut events, "sessions", |d| {
        transports_of(&d["members"], "brain") == ["webhook"]
            && d["members"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["id"] == "brain" && m["webhook"]["node"] == node)
    })
    .await;

    // The plain view says the same.
    let (status, body) = admin_get(&gw, "/bays/acme/conversations/group/view").await;
    assert_eq!(status, 200);
    assert_eq!(transports_of(&body["members"], "scout"), ["sse"]);
    assert_eq!(transports_of(&body["members"], "brain"), ["webhook"]);
    assert_eq!(
        body["members"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == "brain")
            .unwrap()["webhook"]["url"],
        "http://127.0.0.1:9/brain"
    );
    drop(sse);
    drop(ws);
}

#[tokio::test]
async fn a_held_updates_call_shows_as_updates() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, "acme").await;
    let mut events = open_stream(&gw, "/bays/acme/conversations/group/live").await;
    until(&mut events, "view", |_| true).await;
    // Rex holds an `/updates` call while the stream watches.
    tokio::select! {
        answered = gw.updates(&w.rex, None, "15") => panic!("answered before the stream saw it: {answered:?}"),
        _ = until(&mut events, "sessions", |d| {
            transports_of(&d["members"], "rex") == ["updates"]
        }) => {}
    }
}

#[tokio::test]
async fn the_webhooks_stream_updates_when_a_delivery_fails() {
    let gw = Gateway::spawn_with(
        Opts::default()
            .env("SWITCHBOARD_WEBHOOKS__ALLOW_HTTP", "true")
            .env("SWITCHBOARD_WEBHOOKS__ALLOW_PRIVATE_DESTINATIONS", "true")
            .env("SWITCHBOARD_WEBHOOKS__ATTEMPT_TIMEOUT", "1s")
            .env("SWITCHBOARD_WEBHOOKS__RETRY_INITIAL", "100ms")
            .env("SWITCHBOARD_WEBHOOKS__RETRY_MAX", "1s"),
    )
    .await;
    let w = World::create(&gw, "acme").await;
    let mut events = open_stream(&gw, "/bays/acme/webhooks/live").await;
    let rex = |d: &Value| {
        d["webhooks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["agent"] == "rex")
            .cloned()
            .unwrap()
    };
    let first = until(&mut events, "webhooks", |_| true).await;
    assert_eq!(rex(&first)["url"], Value::Null, "{first}");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", closed.local_addr().unwrap());
    drop(closed);
    let res = gw
        .http
        .put(gw.url("/api/admin/bays/acme/participants/rex/webhook"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({ "url": url }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    until(&mut events, "webhooks", |d| rex(d)["url"] == url.as_str()).await;
    gw.post_message(&w.ana, "group", "to the hook").await;
    let failing = until(&mut events, "webhooks", |d| {
        rex(d)["failingSince"].is_string()
    })
    .await;
    assert!(rex(&failing)["lastError"].is_string(), "{failing}");
    assert!(rex(&failing)["backlog"].as_u64() >= Some(1), "{failing}");
    let (s, b) = admin_get(&gw, "/bays/nope/webhooks/live").await;
    assert_error(s, &b, 404, "NOT_FOUND");
}

#[tokio::test]
async fn every_bay_of_the_store_is_listed_with_counts() {
    let gw = Gateway::spawn().await;
    World::create(&gw, "acme").await;
    // A Bay nobody uses: no feed runs for it anywhere, yet it is listed.
    gw.create_bay("quiet").await;
    let (status, body) = admin_get(&gw, "/bays").await;
    assert_eq!(status, 200, "{body}");
    let bays = body["bays"].as_array().unwrap();
    let find = |id: &str| {
        bays.iter()
            .find(|b| b["id"] == id)
            .unwrap_or_else(|| panic!("no {id} in {body}"))
    };
    let acme = find("acme");
    assert_eq!(acme["agents"], 3, "{acme}");
    assert_eq!(acme["humans"], 2, "{acme}");
    assert_eq!(acme["conversations"], 2, "{acme}");
    let quiet = find("quiet");
    assert_eq!(quiet["agents"], 0, "{quiet}");
    assert_eq!(quiet["conversations"], 0, "{quiet}");
    assert_eq!(quiet["feedsOn"], json!([]), "{quiet}");
    let ids: Vec<&str> = bays.iter().map(|b| b["id"].as_str().unwrap()).collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(ids, sorted, "sorted by id");
}
