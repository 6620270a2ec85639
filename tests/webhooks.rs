//! Webhook delivery end to end: a real gateway POSTs to a real HTTP
//! receiver (axum) that fails, throttles, stalls and finally accepts or
//! disables; signatures are checked with the independent `standardwebhooks`
//! crate, never with the gateway's own signing code.

mod common;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use common::{assert_error, Gateway, Opts, RedisServer, World};
use serde_json::{json, Value};
use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the receiver does with one request.
#[derive(Clone, Copy, Debug)]
enum Plan {
    Status(u16),
    /// 429 with `Retry-After: 1`.
    Throttle,
    /// Sleeps past the gateway's attempt timeout, then answers 200.
    Stall,
}

/// One request the receiver got.
#[derive(Clone, Debug)]
struct Received {
    headers: HeaderMap,
    body: Vec<u8>,
    answered: u16,
}

#[derive(Default)]
struct Receiver {
    /// Answers for the next requests; 200 once empty (or `then`).
    plan: Mutex<VecDeque<Plan>>,
    then: Mutex<Option<u16>>,
    /// How long every answer takes.
    delay: Mutex<Duration>,
    got: Mutex<Vec<Received>>,
}

async fn receive(
    State(r): State<Arc<Receiver>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let plan = r.plan.lock().unwrap().pop_front();
    let then = *r.then.lock().unwrap();
    let answered = match plan {
        Some(Plan::Status(s)) => s,
        Some(Plan::Throttle) => 429,
        Some(Plan::Stall) => 200,
        None => then.unwrap_or(200),
    };
    // Recorded on arrival, so the order is the order of attempts.
    r.got.lock().unwrap().push(Received {
        headers,
        body: body.to_vec(),
        answered,
    });
    if matches!(plan, Some(Plan::Stall)) {
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    let delay = *r.delay.lock().unwrap();
    tokio::time::sleep(delay).await;
    let status = StatusCode::from_u16(answered).unwrap();
    if answered == 429 {
        return (status, [("retry-after", "1")], "slow down").into_response();
    }
    (status, "ok").into_response()
}

/// Starts a receiver on a free port; returns it and its URL.
async fn start_receiver(plan: Vec<Plan>, then: Option<u16>) -> (Arc<Receiver>, String) {
    let r = Arc::new(Receiver::default());
    *r.plan.lock().unwrap() = plan.into();
    *r.then.lock().unwrap() = then;
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(receive))
        .with_state(r.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (r, url)
}

/// Settings that let a test deliver to a local receiver quickly.
fn opts() -> Opts {
    Opts::default()
        .env("SWITCHBOARD_WEBHOOKS__ALLOW_HTTP", "true")
        .env("SWITCHBOARD_WEBHOOKS__ALLOW_PRIVATE_DESTINATIONS", "true")
        .env("SWITCHBOARD_WEBHOOKS__ATTEMPT_TIMEOUT", "1s")
        .env("SWITCHBOARD_WEBHOOKS__RETRY_INITIAL", "100ms")
        .env("SWITCHBOARD_WEBHOOKS__RETRY_MAX", "1s")
        .env("SWITCHBOARD_WEBHOOKS__LEASE_TTL", "2s")
}

/// Sets `token`'s webhook to `url`; returns the signing secret.
async fn set_webhook(gw: &Gateway, token: &str, url: &str) -> String {
    let (s, b) = gw.post_json(token, "/webhook", json!({ "url": url })).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["url"], url);
    b["secret"].as_str().unwrap().to_owned()
}

/// The accepted (2xx) deliveries' bodies, in arrival order.
fn accepted(r: &Receiver) -> Vec<Value> {
    r.got
        .lock()
        .unwrap()
        .iter()
        .filter(|g| (200..300).contains(&g.answered))
        .map(|g| serde_json::from_slice(&g.body).unwrap())
        .collect()
}

/// Message ids of accepted `message.created` deliveries, deduped by
/// `eventId`, in first-arrival order.
fn delivered_messages(r: &Receiver) -> Vec<String> {
    let mut seen = HashSet::new();
    accepted(r)
        .into_iter()
        .filter(|b| b["event"] == "message.created")
        .filter(|b| seen.insert(b["eventId"].as_str().unwrap().to_owned()))
        .map(|b| b["message"]["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn deliveries_survive_failures_in_order_signed_and_deduped_to_exactly_once() {
    let (receiver, url) = start_receiver(
        vec![
            Plan::Status(500),
            Plan::Status(502),
            Plan::Throttle,
            Plan::Stall,
        ],
        None,
    )
    .await;
    let gw = Gateway::spawn_with(opts()).await;
    let w = World::create(&gw, "hooks").await;
    let secret = set_webhook(&gw, &w.rex, &url).await;

    let mut sent = Vec::new();
    for i in 0..5 {
        let text = if i % 2 == 0 {
            format!("@Rex task {i}")
        } else {
            format!("note {i}")
        };
        let (s, b) = gw.post_message(&w.ana, "group", &text).await;
        assert_eq!(s, 201, "{b}");
        sent.push(b["id"].as_str().unwrap().to_owned());
    }
    // Rex's own message is not delivered to Rex.
    let (s, own) = gw.post_message(&w.rex, "group", "my own").await;
    assert_eq!(s, 201, "{own}");
    let (s, last) = gw.post_message(&w.ana, "group", "last").await;
    assert_eq!(s, 201, "{last}");
    sent.push(last["id"].as_str().unwrap().to_owned());

    let all_in = common::eventually(Duration::from_secs(40), || async {
        delivered_messages(&receiver).len() >= sent.len()
    })
    .await;
    assert!(all_in, "delivered: {:?}", delivered_messages(&receiver));
    assert_eq!(
        delivered_messages(&receiver),
        sent,
        "every message once, in log order"
    );

    // The failures really happened, and were retried with the same eventId.
    let got = receiver.got.lock().unwrap().clone();
    let answers: Vec<u16> = got.iter().take(5).map(|g| g.answered).collect();
    assert_eq!(answers, [500, 502, 429, 200, 200], "{answers:?}");
    let first_id = |g: &Received| g.headers["webhook-id"].to_str().unwrap().to_owned();
    for g in &got[1..5] {
        assert_eq!(first_id(g), first_id(&got[0]), "retries keep their eventId");
    }

    // Every request verifies with the independent implementation, and a
    // tampered body does not.
    let verifier = standardwebhooks::Webhook::new(&secret).unwrap();
    for g in &got {
        verifier.verify(&g.body, &g.headers).unwrap();
        let body: Value = serde_json::from_slice(&g.body).unwrap();
        assert_eq!(g.headers["webhook-id"].to_str().unwrap(), body["eventId"]);
    }
    let mut tampered = got[0].body.clone();
    tampered[1] ^= 1;
    assert!(verifier.verify(&tampered, &got[0].headers).is_err());

    // The body is exactly the v2 table.
    let bodies = accepted(&receiver);
    let first = bodies
        .iter()
        .find(|b| b["message"]["id"] == sent[0].as_str())
        .unwrap();
    let mut keys: Vec<&str> = first
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "conversation",
            "conversationId",
            "event",
            "eventId",
            "history",
            "instructions",
            "mentions",
            "message",
            "participants",
            "policy",
            "schemaVersion",
            "sender",
            "you",
        ]
    );
    assert_eq!(first["schemaVersion"], 2);
    assert_eq!(first["conversationId"], "group");
    assert_eq!(
        first["you"],
        json!({"agentId": "rex", "isOrchestrator": false, "shouldRespond": true})
    );
    assert_eq!(first["message"]["shouldRespond"], true);
    assert_eq!(first["mentions"], json!(["rex"]));
    assert_eq!(first["history"], json!([]));
    assert!(
        first["participants"][0].get("description").is_some(),
        "{first}"
    );
    assert!(first["policy"]["effectiveRule"].is_string(), "{first}");
    let second = bodies
        .iter()
        .find(|b| b["message"]["id"] == sent[1].as_str())
        .unwrap();
    assert_eq!(
        second["you"]["shouldRespond"], false,
        "a note without a mention"
    );
    assert_eq!(
        second["history"][0]["id"],
        sent[0].as_str(),
        "prior turns, oldest first"
    );
    let mut turn_keys: Vec<&str> = second["history"][0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    turn_keys.sort_unstable();
    assert_eq!(
        turn_keys,
        [
            "content",
            "createdAt",
            "id",
            "replyTo",
            "senderId",
            "senderName",
            "senderType"
        ]
    );
    assert!(!delivered_messages(&receiver).contains(&own["id"].as_str().unwrap().to_owned()));

    // /me shows the webhook and its health.
    let (s, me) = gw.get(&w.rex, "/me").await;
    assert_eq!(s, 200, "{me}");
    assert_eq!(me["webhookUrl"], url.as_str());
    assert!(me["webhookStatus"]["lastDeliveredAt"].is_string(), "{me}");
    assert_eq!(me["webhookStatus"]["failingSince"], Value::Null, "{me}");
}

#[tokio::test]
async fn lifecycle_events_are_delivered_too() {
    let (receiver, url) = start_receiver(vec![], None).await;
    let gw = Gateway::spawn_with(opts()).await;
    let w = World::create(&gw, "hookevents").await;
    set_webhook(&gw, &w.rex, &url).await;
    let (_, m) = gw.post_message(&w.ana, "group", "hello").await;
    let id = m["id"].as_str().unwrap();
    let (s, b) = gw
        .post_json(
            &w.ben,
            &format!("/conversations/group/messages/{id}/reactions"),
            json!({"emoji": "👍"}),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    let arrived = common::eventually(Duration::from_secs(20), || async {
        accepted(&receiver).len() >= 2
    })
    .await;
    assert!(arrived, "{:?}", accepted(&receiver));
    let bodies = accepted(&receiver);
    assert_eq!(bodies[0]["event"], "message.created");
    assert_eq!(bodies[1]["event"], "reaction.added");
    assert_eq!(bodies[1]["schemaVersion"], 2);
    assert_eq!(bodies[1]["messageId"], id);
    assert_eq!(bodies[1]["participantId"], "ben");
    assert!(bodies[1]["eventId"].is_string());
}

/// Events addressed to one agent alone, `summary.requested` and
/// `connector.request`, reach an agent that only has a webhook, and the
/// connector's answer (made by webhook alone) ends the caller's call.
#[tokio::test]
async fn addressed_events_reach_a_webhook_only_agent() {
    let (receiver, url) = start_receiver(vec![], None).await;
    let gw = Gateway::spawn_with(opts()).await;
    let w = World::create(&gw, "hookaddressed").await;
    set_webhook(&gw, &w.rex, &url).await;
    for (path, body) in [
        ("summarizer", json!({ "participantId": "rex" })),
        ("participants/rex/connector", json!({ "platform": "slack" })),
    ] {
        let (s, b) = gw
            .admin(
                reqwest::Method::PUT,
                &format!("/bays/hookaddressed/{path}"),
                Some(body),
            )
            .await;
        assert_eq!(s, 200, "{b}");
    }
    let (s, b) = gw
        .get(&w.ana, "/conversations/group/summary?refresh=1")
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["refresh"]["requested"], true, "{b}");

    let asked = {
        let (http, url, token) = (
            common::test_http(),
            gw.url("/api/agent-api/agents/rex/ask"),
            w.ben.clone(),
        );
        tokio::spawn(async move {
            let res = http
                .post(url)
                .bearer_auth(token)
                .json(&json!({ "query": "release date" }))
                .send()
                .await
                .unwrap();
            (res.status().as_u16(), res.json::<Value>().await.unwrap())
        })
    };
    let arrived = common::eventually(Duration::from_secs(20), || async {
        accepted(&receiver)
            .iter()
            .any(|b| b["event"] == "connector.request")
    })
    .await;
    assert!(arrived, "{:?}", accepted(&receiver));
    let bodies = accepted(&receiver);
    let summary = bodies
        .iter()
        .find(|b| b["event"] == "summary.requested")
        .expect("summary.requested delivered");
    assert_eq!(summary["conversationId"], "group");
    assert_eq!(summary["requestedBy"], "ana");
    assert_eq!(summary["schemaVersion"], 2);
    let request = bodies
        .iter()
        .find(|b| b["event"] == "connector.request")
        .unwrap();
    assert_eq!(request["kind"], "ask");
    assert_eq!(request["fromId"], "ben");
    assert_eq!(request["payload"]["query"], "release date");
    assert!(request["eventId"].is_string(), "{request}");

    let id = request["requestId"].as_str().unwrap();
    let (s, b) = gw
        .post_json(
            &w.rex,
            &format!("/agents/requests/{id}/answer"),
            json!({ "result": { "date": "friday" } }),
        )
        .await;
    assert_eq!(s, 204, "{b}");
    let (s, b) = asked.await.unwrap();
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["result"], json!({ "date": "friday" }));
}

#[tokio::test]
async fn a_410_disables_the_webhook_and_me_says_why() {
    let (receiver, url) = start_receiver(vec![], Some(410)).await;
    let gw = Gateway::spawn_with(opts()).await;
    let w = World::create(&gw, "hookgone").await;
    set_webhook(&gw, &w.rex, &url).await;
    let (s, _) = gw.post_message(&w.ana, "group", "@Rex ping").await;
    assert_eq!(s, 201);
    let disabled = common::eventually(Duration::from_secs(20), || async {
        let (_, me) = gw.get(&w.rex, "/me").await;
        me["webhookUrl"].is_null()
            && me["webhookStatus"]["lastError"]
                .as_str()
                .is_some_and(|e| e.contains("410"))
    })
    .await;
    let (_, me) = gw.get(&w.rex, "/me").await;
    assert!(disabled, "{me}");
    // Nothing more is sent once disabled.
    let before = receiver.got.lock().unwrap().len();
    assert_eq!(before, 1);
    let (s, _) = gw.post_message(&w.ana, "group", "@Rex again").await;
    assert_eq!(s, 201);
    let (s, _) = gw.post_message(&w.ana, "group", "@Rex and again").await;
    assert_eq!(s, 201);
    // A later message to another agent's working webhook proves the
    // dispatcher kept running while Rex's got nothing.
    let (other, other_url) = start_receiver(vec![], None).await;
    set_webhook(&gw, &w.scout, &other_url).await;
    let (s, _) = gw.post_message(&w.ana, "group", "@Scout hi").await;
    assert_eq!(s, 201);
    assert!(
        common::eventually(Duration::from_secs(20), || async {
            !accepted(&other).is_empty()
        })
        .await
    );
    assert_eq!(
        receiver.got.lock().unwrap().len(),
        1,
        "nothing after the 410"
    );
}

/// A 410 that arrives after the webhook was replaced removes nothing: the
/// new webhook keeps delivering, and the old one's retries stop at once.
#[tokio::test]
async fn a_late_410_from_a_replaced_url_leaves_its_successor_alone() {
    let (old, old_url) = start_receiver(vec![], Some(410)).await;
    *old.delay.lock().unwrap() = Duration::from_millis(1500);
    let (new, new_url) = start_receiver(vec![], None).await;
    let gw = Gateway::spawn_with(opts()).await;
    let w = World::create(&gw, "hookrace").await;
    set_webhook(&gw, &w.rex, &old_url).await;
    let (s, _) = gw.post_message(&w.ana, "group", "@Rex first").await;
    assert_eq!(s, 201);
    // Replace the webhook while the old URL is still answering.
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            !old.got.lock().unwrap().is_empty()
        })
        .await
    );
    set_webhook(&gw, &w.rex, &new_url).await;
    let (s, second) = gw.post_message(&w.ana, "group", "@Rex second").await;
    assert_eq!(s, 201);
    let id = second["id"].as_str().unwrap().to_owned();
    assert!(
        common::eventually(Duration::from_secs(20), || async {
            delivered_messages(&new).contains(&id)
        })
        .await,
        "the new webhook got nothing"
    );
    let (_, me) = gw.get(&w.rex, "/me").await;
    assert_eq!(me["webhookUrl"], new_url.as_str(), "{me}");
    assert_eq!(
        old.got.lock().unwrap().len(),
        1,
        "the old URL was not retried"
    );
}

#[tokio::test]
async fn webhook_urls_are_checked() {
    let strict = Gateway::spawn().await;
    let w = World::create(&strict, "hookurls").await;
    let long = format!("https://example.com/{}", "a".repeat(2100));
    let table: Vec<(&str, u16, &str)> = vec![
        ("not a url", 400, "INVALID_WEBHOOK_URL"),
        ("ftp://example.com/x", 400, "INVALID_WEBHOOK_URL"),
        ("http://example.com/x", 400, "INVALID_WEBHOOK_URL"),
        ("https://user:pw@example.com/x", 400, "INVALID_WEBHOOK_URL"),
        (&long, 400, "INVALID_WEBHOOK_URL"),
        ("https://127.0.0.1/x", 400, "WEBHOOK_DESTINATION_FORBIDDEN"),
        ("https://10.1.2.3/x", 400, "WEBHOOK_DESTINATION_FORBIDDEN"),
        (
            "https://169.254.169.254/latest",
            400,
            "WEBHOOK_DESTINATION_FORBIDDEN",
        ),
        ("https://[::1]/x", 400, "WEBHOOK_DESTINATION_FORBIDDEN"),
        ("https://localhost/x", 400, "WEBHOOK_DESTINATION_FORBIDDEN"),
        ("https://8.8.8.8:0/x", 400, "INVALID_WEBHOOK_URL"),
    ];
    for (url, status, code) in table {
        let (s, b) = strict
            .post_json(&w.rex, "/webhook", json!({ "url": url }))
            .await;
        assert_error(s, &b, status, code);
    }
    let (s, b) = strict
        .post_json(&w.ana, "/webhook", json!({"url": "https://example.com/x"}))
        .await;
    assert_error(s, &b, 403, "FORBIDDEN");
    let (s, me) = strict.get(&w.rex, "/me").await;
    assert_eq!(s, 200);
    assert_eq!(me["webhookUrl"], Value::Null, "refusals stored nothing");
    assert_eq!(me["webhookStatus"], Value::Null);
}

#[tokio::test]
async fn the_admin_api_sets_and_removes_webhooks() {
    let (_receiver, url) = start_receiver(vec![], None).await;
    let gw = Gateway::spawn_with(opts()).await;
    let w = World::create(&gw, "hookadmin").await;
    let (s, b) = gw
        .admin(
            reqwest::Method::PUT,
            "/bays/hookadmin/participants/rex/webhook",
            Some(json!({ "url": url })),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    assert!(b["secret"].as_str().unwrap().starts_with("whsec_"), "{b}");
    let (_, me) = gw.get(&w.rex, "/me").await;
    assert_eq!(me["webhookUrl"], url.as_str());
    let (s, b) = gw
        .admin(
            reqwest::Method::PUT,
            "/bays/hookadmin/participants/ana/webhook",
            Some(json!({ "url": url })),
        )
        .await;
    assert_error(s, &b, 400, "INVALID_REQUEST");
    let (s, b) = gw
        .admin(
            reqwest::Method::PUT,
            "/bays/hookadmin/participants/nobody/webhook",
            Some(json!({ "url": url })),
        )
        .await;
    assert_error(s, &b, 404, "NOT_FOUND");
    let (s, _) = gw
        .admin(
            reqwest::Method::DELETE,
            "/bays/hookadmin/participants/rex/webhook",
            None,
        )
        .await;
    assert_eq!(s, 204);
    let (_, me) = gw.get(&w.rex, "/me").await;
    assert_eq!(me["webhookUrl"], Value::Null);
}

/// Posts `@Rex <i>` as `token`; returns the message id.
async fn post_rex(gw: &Gateway, token: &str, i: usize) -> String {
    let (s, b) = gw.post_message(token, "group", &format!("@Rex {i}")).await;
    assert_eq!(s, 201, "{b}");
    b["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn another_node_takes_over_when_the_delivering_node_dies() {
    let (receiver, url) = start_receiver(vec![], None).await;
    let redis = RedisServer::start(false);
    let mut nodes = [
        Gateway::spawn_with(opts().redis(&redis.url())).await,
        Gateway::spawn_with(opts().redis(&redis.url())).await,
    ];
    let w = World::create(&nodes[0], "hookfail").await;
    set_webhook(&nodes[0], &w.rex, &url).await;
    // Slow answers, so the kill lands while deliveries are in progress.
    *receiver.delay.lock().unwrap() = Duration::from_millis(150);
    let mut sent = Vec::new();
    for i in 0..12 {
        sent.push(post_rex(&nodes[0], &w.ana, i).await);
    }
    assert!(
        common::eventually(Duration::from_secs(20), || async {
            delivered_messages(&receiver).len() >= 3
        })
        .await
    );
    // Whichever node holds the lease says so in its log; kill it (SIGKILL).
    let holder = nodes
        .iter()
        .position(|n| n.logs().contains("delivering webhooks"))
        .expect("a node announced its lease");
    nodes[holder].kill_now();
    let cut_at = delivered_messages(&receiver).len();
    assert!(
        cut_at < sent.len(),
        "killed mid-stream ({cut_at} of {} delivered)",
        sent.len()
    );
    let survivor = &nodes[1 - holder];
    for i in 12..17 {
        sent.push(post_rex(survivor, &w.ana, i).await);
    }
    let all = common::eventually(Duration::from_secs(30), || async {
        delivered_messages(&receiver).len() >= sent.len()
    })
    .await;
    assert!(all, "{:?}", delivered_messages(&receiver));
    assert_eq!(
        delivered_messages(&receiver),
        sent,
        "at least once, in order, exactly once after dedupe"
    );
    assert!(
        survivor.logs().contains("delivering webhooks"),
        "the survivor took over"
    );
}

/// Every accepted delivery's `webhook-id`, in arrival order (duplicates
/// kept).
fn accepted_ids(r: &Receiver) -> Vec<String> {
    r.got
        .lock()
        .unwrap()
        .iter()
        .filter(|g| (200..300).contains(&g.answered))
        .map(|g| g.headers["webhook-id"].to_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_failing_status_write_neither_stops_delivery_nor_sends_twice() {
    let (receiver, url) = start_receiver(vec![], None).await;
    let redis = RedisServer::start(false);
    let gw = Gateway::spawn_with(opts().redis(&redis.url())).await;
    let w = World::create(&gw, "hookstatus").await;
    set_webhook(&gw, &w.rex, &url).await;
    // The status hash replaced by a string: every status read and write
    // now fails (WRONGTYPE), while positions and deliveries still work.
    let status_key = "sb:{hookstatus}:webhook-status";
    redis.cmd(&["DEL", status_key]);
    redis.cmd(&["SET", status_key, "not a hash"]);

    let mut sent = Vec::new();
    for i in 0..5 {
        sent.push(post_rex(&gw, &w.ana, i).await);
    }
    let all = common::eventually(Duration::from_secs(20), || async {
        delivered_messages(&receiver).len() >= sent.len()
    })
    .await;
    assert!(all, "delivered: {:?}", delivered_messages(&receiver));
    // One more after the others were accepted: had any been scheduled
    // again, it would arrive before this one.
    sent.push(post_rex(&gw, &w.ana, 5).await);
    assert!(
        common::eventually(Duration::from_secs(20), || async {
            delivered_messages(&receiver).len() >= sent.len()
        })
        .await
    );
    assert_eq!(delivered_messages(&receiver), sent, "in log order");
    let ids = accepted_ids(&receiver);
    let distinct: HashSet<&String> = ids.iter().collect();
    assert_eq!(distinct.len(), ids.len(), "delivered twice: {ids:?}");
    assert!(
        gw.logs().contains("webhook status not recorded"),
        "the status writes really failed"
    );
}

#[tokio::test]
async fn a_suspended_agents_webhook_pauses_and_resumes_where_it_stopped() {
    let (rex_hook, rex_url) = start_receiver(Vec::new(), None).await;
    let (brain_hook, brain_url) = start_receiver(Vec::new(), None).await;
    let gw = Gateway::spawn_with(opts()).await;
    let w = World::create(&gw, "hooks").await;
    set_webhook(&gw, &w.rex, &rex_url).await;
    set_webhook(&gw, &w.brain, &brain_url).await;
    let suspend = |what: &'static str| {
        let gw = &gw;
        async move {
            let path = format!("/bays/hooks/participants/rex/{what}");
            let (s, b) = gw.admin(reqwest::Method::POST, &path, None).await;
            assert_eq!(s, 200, "{b}");
        }
    };

    let (s, first) = gw.post_message(&w.ana, "group", "before").await;
    assert_eq!(s, 201, "{first}");
    let first = first["id"].as_str().unwrap().to_owned();
    let both = common::eventually(Duration::from_secs(30), || async {
        delivered_messages(&rex_hook) == [first.clone()]
            && delivered_messages(&brain_hook) == [first.clone()]
    })
    .await;
    assert!(both, "{:?}", delivered_messages(&rex_hook));

    suspend("suspend").await;
    let (s, during) = gw.post_message(&w.ana, "group", "during").await;
    assert_eq!(s, 201, "{during}");
    let during = during["id"].as_str().unwrap().to_owned();
    // Brain's webhook, not suspended, delivers it; Rex's has not by then.
    let brain_got = common::eventually(Duration::from_secs(30), || async {
        delivered_messages(&brain_hook).contains(&during)
    })
    .await;
    assert!(brain_got, "{:?}", delivered_messages(&brain_hook));
    assert_eq!(
        delivered_messages(&rex_hook),
        std::slice::from_ref(&first),
        "nothing is delivered while suspended"
    );

    // Reinstated: delivery resumes from where it paused, nothing skipped.
    suspend("reinstate").await;
    let resumed = common::eventually(Duration::from_secs(30), || async {
        delivered_messages(&rex_hook).len() >= 2
    })
    .await;
    assert!(resumed, "{:?}", delivered_messages(&rex_hook));
    assert_eq!(delivered_messages(&rex_hook), [first, during]);
}

/// `total_commands_processed` of `redis` (its `INFO stats`).
fn redis_commands(redis: &RedisServer) -> u64 {
    let info = redis.cmd(&["INFO", "stats"]);
    info.lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("total_commands_processed in INFO stats")
}

/// Idle webhook workers wait on the Bay's log instead of polling Redis:
/// with many webhooks registered and nothing to deliver, the node's
/// Redis traffic stays far below one command per webhook per second
/// (polling cost about five), and still a message posted afterwards, or
/// a URL changed while idle, takes effect at once.
#[tokio::test]
async fn idle_webhooks_do_not_poll_redis_and_wake_on_changes() {
    const HOOKS: usize = 50;
    const WINDOW: Duration = Duration::from_secs(10);
    let (first, first_url) = start_receiver(vec![], None).await;
    let (idle, idle_url) = start_receiver(vec![], None).await;
    let redis = RedisServer::start(false);
    // The default lease (8 s): its renewals are what an idle worker costs.
    let opts = Opts::default()
        .env("SWITCHBOARD_WEBHOOKS__ALLOW_HTTP", "true")
        .env("SWITCHBOARD_WEBHOOKS__ALLOW_PRIVATE_DESTINATIONS", "true")
        .redis(&redis.url());
    let gw = Gateway::spawn_with(opts).await;
    let w = World::create(&gw, "hookidle").await;
    set_webhook(&gw, &w.rex, &first_url).await;
    for i in 1..HOOKS {
        let token = gw
            .create_participant(
                "hookidle",
                &format!("idle{i}"),
                "agent",
                &format!("Idle {i}"),
            )
            .await;
        set_webhook(&gw, &token, &idle_url).await;
    }
    let started = common::eventually(Duration::from_secs(20), || async {
        gw.logs().matches("delivering webhooks").count() >= HOOKS
    })
    .await;
    assert!(started, "{}", gw.logs());
    tokio::time::sleep(Duration::from_secs(2)).await;

    redis.cmd(&["CONFIG", "RESETSTAT"]);
    let before = redis_commands(&redis);
    tokio::time::sleep(WINDOW).await;
    let spent = redis_commands(&redis) - before;
    println!("{}", redis.cmd(&["INFO", "commandstats"]));
    let per_second = spent as f64 / WINDOW.as_secs_f64();
    println!("{HOOKS} idle webhooks: {per_second:.1} Redis commands/s");
    assert!(
        per_second < HOOKS as f64 / 2.0,
        "{HOOKS} idle webhooks cost {per_second:.1} Redis commands/s"
    );
    assert!(
        idle.got.lock().unwrap().is_empty(),
        "nothing was addressed to them"
    );

    // A message wakes Rex's worker at once.
    let posted = std::time::Instant::now();
    let id = post_rex(&gw, &w.ana, 1).await;
    let arrived = common::eventually(Duration::from_secs(10), || async {
        delivered_messages(&first).contains(&id)
    })
    .await;
    assert!(arrived, "{:?}", delivered_messages(&first));
    let latency = posted.elapsed();
    println!("delivered {latency:?} after the post");
    assert!(latency < Duration::from_secs(2), "took {latency:?}");

    // The URL changes while the worker idles: the next message goes to the
    // new one, never the old.
    let (second, second_url) = start_receiver(vec![], None).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    set_webhook(&gw, &w.rex, &second_url).await;
    let posted = std::time::Instant::now();
    let id = post_rex(&gw, &w.ana, 2).await;
    let arrived = common::eventually(Duration::from_secs(10), || async {
        delivered_messages(&second).contains(&id)
    })
    .await;
    assert!(arrived, "{:?}", delivered_messages(&second));
    let latency = posted.elapsed();
    println!("delivered to the new URL {latency:?} after the post");
    assert!(latency < Duration::from_secs(4), "took {latency:?}");
    assert_eq!(delivered_messages(&first).len(), 1, "the old URL got more");
}

/// Accepted `message.created` deliveries of message `id`: (the agent each
/// was for, from its `eventId`, which names the recipient) — one per
/// delivery, duplicates kept.
fn deliveries_of(r: &Receiver, id: &str) -> Vec<String> {
    accepted(r)
        .into_iter()
        .filter(|b| b["event"] == "message.created" && b["message"]["id"] == id)
        .map(|b| b["eventId"].as_str().unwrap().to_owned())
        .collect()
}

/// Two nodes share one Redis and one node delivers every webhook of the
/// Bay: the other reads the Bay's lease group once per scan instead of
/// trying (and failing) to take each agent's lease every second, so with
/// many idle webhooks the two nodes' Redis traffic stays far below one
/// command per webhook per second (trying cost about one per webhook per
/// second). A message still reaches each webhook exactly once, and once
/// the delivering node is killed (SIGKILL) the other takes its leases
/// over and delivers the next message to each.
#[tokio::test]
async fn a_second_node_does_not_poll_leases_another_node_holds() {
    const HOOKS: usize = 100;
    const WINDOW: Duration = Duration::from_secs(10);
    let (receiver, url) = start_receiver(vec![], None).await;
    let redis = RedisServer::start(false);
    // The default lease (8 s), as in production.
    let opts = || {
        Opts::default()
            .env("SWITCHBOARD_WEBHOOKS__ALLOW_HTTP", "true")
            .env("SWITCHBOARD_WEBHOOKS__ALLOW_PRIVATE_DESTINATIONS", "true")
            .redis(&redis.url())
    };
    let mut first = Gateway::spawn_with(opts()).await;
    first.create_bay("hooktwo").await;
    let ana = first
        .create_participant("hooktwo", "ana", "user", "Ana")
        .await;
    let mut members = vec!["ana".to_owned()];
    let mut tokens = Vec::new();
    for i in 0..HOOKS {
        let id = format!("idle{i}");
        tokens.push(
            first
                .create_participant("hooktwo", &id, "agent", &format!("Idle {i}"))
                .await,
        );
        members.push(id);
    }
    let members: Vec<&str> = members.iter().map(String::as_str).collect();
    first
        .create_conversation("hooktwo", "all", "GROUP", &members)
        .await;
    for token in &tokens {
        set_webhook(&first, token, &url).await;
    }
    // The first node holds every lease before the second starts.
    let held = common::eventually(Duration::from_secs(20), || async {
        first.logs().matches("delivering webhooks").count() >= HOOKS
    })
    .await;
    assert!(held, "{}", first.logs());
    let second = Gateway::spawn_with(opts()).await;
    // Past a few of the second node's scans.
    tokio::time::sleep(Duration::from_secs(3)).await;

    redis.cmd(&["CONFIG", "RESETSTAT"]);
    let before = redis_commands(&redis);
    tokio::time::sleep(WINDOW).await;
    let spent = redis_commands(&redis) - before;
    println!("{}", redis.cmd(&["INFO", "commandstats"]));
    let per_second = spent as f64 / WINDOW.as_secs_f64();
    println!("{HOOKS} idle webhooks on two nodes: {per_second:.1} Redis commands/s");
    assert!(
        per_second < HOOKS as f64 / 2.0,
        "{HOOKS} idle webhooks on two nodes cost {per_second:.1} Redis commands/s"
    );
    assert!(
        !second.logs().contains("delivering webhooks"),
        "the second node took a lease the first holds"
    );
    assert!(receiver.got.lock().unwrap().is_empty(), "nothing was sent");

    // A message reaches each webhook exactly once.
    let posted = std::time::Instant::now();
    let (s, b) = first.post_message(&ana, "all", "hello all").await;
    assert_eq!(s, 201, "{b}");
    let id = b["id"].as_str().unwrap().to_owned();
    let all = common::eventually(Duration::from_secs(20), || async {
        deliveries_of(&receiver, &id).len() >= HOOKS
    })
    .await;
    assert!(all, "{} of {HOOKS}", deliveries_of(&receiver, &id).len());
    println!(
        "all {HOOKS} got the message {:?} after the post",
        posted.elapsed()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let got = deliveries_of(&receiver, &id);
    let distinct: HashSet<&String> = got.iter().collect();
    assert_eq!(got.len(), HOOKS, "delivered more than once");
    assert_eq!(distinct.len(), HOOKS, "one per webhook");

    // The delivering node dies: the second takes over (within the lease
    // and a scan) and delivers the next message to each.
    first.kill_now();
    let killed = std::time::Instant::now();
    let (s, b) = second.post_message(&ana, "all", "after the kill").await;
    assert_eq!(s, 201, "{b}");
    let next = b["id"].as_str().unwrap().to_owned();
    let all = common::eventually(Duration::from_secs(30), || async {
        deliveries_of(&receiver, &next).len() >= HOOKS
    })
    .await;
    assert!(
        all,
        "{} of {HOOKS}\n{}",
        deliveries_of(&receiver, &next).len(),
        second.logs()
    );
    println!(
        "all {HOOKS} got the next message {:?} after the kill",
        killed.elapsed()
    );
    let got = deliveries_of(&receiver, &next);
    let distinct: HashSet<&String> = got.iter().collect();
    assert_eq!(distinct.len(), HOOKS, "one per webhook");
    assert!(second.logs().contains("delivering webhooks"));
}
