//! Connector agents (protocol §9, docs/connectors.md) against real
//! gateways: the admin designation, `GET /agents` showing it, `ask` and
//! `send` relayed to the connector as `connector.request` events over
//! `/ws`, `/updates` and `/events`, the connector's answer (result or
//! error) ending the caller's held call, the timeout, every refusal, and
//! the relay across two gateway nodes on one Redis.

mod common;

use common::sse::{sse_at, SseOpen};
use common::*;
use reqwest::Method;
use serde_json::{json, Value};
use std::time::Duration;

const BAY: &str = "b1";

/// `{method} /api/admin/bays/{BAY}/participants/{pid}/connector`.
async fn connector_admin(
    gw: &Gateway,
    method: Method,
    pid: &str,
    body: Option<Value>,
) -> (u16, Value) {
    gw.admin(
        method,
        &format!("/bays/{BAY}/participants/{pid}/connector"),
        body,
    )
    .await
}

/// Marks `pid` as a connector of `platform` through the admin API.
async fn mark(gw: &Gateway, pid: &str, platform: &str) {
    let (s, b) = gw
        .admin(
            Method::PUT,
            &format!("/bays/{BAY}/participants/{pid}/connector"),
            Some(json!({ "platform": platform })),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(
        b,
        json!({ "participantId": pid, "connector": { "platform": platform } })
    );
}

/// Calls `POST /agents/{id}/{verb}` in the background, so the test can
/// play the connector meanwhile.
fn call(
    gw: &Gateway,
    token: &str,
    id: &str,
    verb: &str,
    body: Value,
) -> tokio::task::JoinHandle<(u16, Value)> {
    let (http, url, token) = (
        test_http(),
        gw.url(&format!("/api/agent-api/agents/{id}/{verb}")),
        token.to_owned(),
    );
    tokio::spawn(async move {
        let res = http
            .post(url)
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(Value::Null))
    })
}

/// The connector's answer to `request`: (status, body).
async fn answer(gw: &Gateway, token: &str, request: &str, body: Value) -> (u16, Value) {
    gw.post_json(token, &format!("/agents/requests/{request}/answer"), body)
        .await
}

/// The next `connector.request` event on `ws`.
async fn next_request(ws: &mut Ws) -> Value {
    loop {
        let (events, _) = ws.read_batch().await;
        if let Some(e) = events
            .into_iter()
            .find(|e| e["type"] == "connector.request")
        {
            return e;
        }
    }
}

#[tokio::test]
async fn an_ask_reaches_the_connector_over_ws_and_its_answer_is_the_callers_result() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    mark(&gw, "scout", "slack").await;

    // The directory shows the connector to everyone else.
    let (s, b) = gw.get(&w.rex, "/agents").await;
    assert_eq!(s, 200, "{b}");
    let scout = b["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == "scout")
        .unwrap()
        .clone();
    assert_eq!(scout["connector"], json!({ "platform": "slack" }));
    assert_eq!(scout["capabilities"], json!(["ask", "send"]));
    let brain = b["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == "brain")
        .unwrap()
        .clone();
    assert_eq!(brain["connector"], Value::Null);
    assert_eq!(brain["capabilities"], json!([]));

    let mut ws = gw.ws_ready(&w.scout, None).await;
    let pending = call(&gw, &w.rex, "scout", "ask", json!({ "query": "invoices" }));
    let event = next_request(&mut ws).await;
    assert_eq!(event["kind"], "ask");
    assert_eq!(event["fromId"], "rex");
    assert_eq!(event["fromName"], "Rex");
    assert_eq!(
        event["payload"],
        json!({ "query": "invoices", "limit": 10 })
    );
    assert!(event["expiresAt"].is_string(), "{event}");
    assert!(event.get("conversationId").is_none(), "{event}");
    let request = event["requestId"].as_str().unwrap().to_owned();
    assert!(
        request.starts_with("creq_") && request.len() >= 27,
        "{request}"
    );

    let hits = json!([{ "text": "Invoice #12 from ACME", "channel": "#billing" }]);
    let (s, b) = answer(&gw, &w.scout, &request, json!({ "result": hits })).await;
    assert_eq!(s, 204, "{b}");
    let (s, b) = pending.await.unwrap();
    assert_eq!(s, 200, "{b}");
    assert_eq!(
        b,
        json!({ "requestId": request, "connectorId": "scout", "platform": "slack", "result": hits })
    );

    // Answered once: a second answer finds nothing.
    let (s, b) = answer(&gw, &w.scout, &request, json!({ "result": 1 })).await;
    assert_error(s, &b, 404, "NOT_FOUND");
    ws.close().await;
}

#[tokio::test]
async fn a_send_reaches_the_connector_over_updates_and_sse_and_an_error_answer_is_502() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    mark(&gw, "scout", "telegram").await;
    let (s, start) = gw.updates(&w.scout, None, "1").await;
    assert_eq!(s, 200, "{start}");
    let cursor = start["cursor"].as_str().unwrap().to_owned();

    let body = json!({ "to": "@ops", "text": "deploy done" });
    let pending = call(&gw, &w.ana, "scout", "send", body.clone());
    let (s, got) = gw.updates(&w.scout, Some(&cursor), "10").await;
    assert_eq!(s, 200, "{got}");
    let events = got["events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{got}");
    let event = &events[0];
    assert_eq!(event["type"], "connector.request");
    assert_eq!(event["kind"], "send");
    assert_eq!(event["fromId"], "ana");
    assert_eq!(event["payload"], body);

    // The same event replays on /events from the same cursor.
    let base = format!("http://{}", gw.addr);
    let open = SseOpen {
        cursor: Some(&cursor),
        ..SseOpen::default()
    };
    let mut sse = sse_at(&base, &w.scout, open).await.unwrap();
    let got = sse.data_events(1).await;
    assert_eq!(&got[0].1, event);

    // Nobody else hears of it: the caller's own stream stays empty.
    let (s, other) = gw.updates(&w.brain, Some(&cursor), "1").await;
    assert_eq!(s, 200, "{other}");
    assert_eq!(other["events"], json!([]));

    let request = event["requestId"].as_str().unwrap();
    let refusal = json!({ "error": { "message": "chat @ops not found" } });
    let (s, b) = answer(&gw, &w.scout, request, refusal).await;
    assert_eq!(s, 204, "{b}");
    let (s, b) = pending.await.unwrap();
    assert_error(s, &b, 502, "CONNECTOR_FAILED");
    assert!(
        b["message"]
            .as_str()
            .unwrap()
            .contains("chat @ops not found"),
        "{b}"
    );
}

#[tokio::test]
async fn refusals_name_their_code_and_the_real_answer_still_lands() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    mark(&gw, "scout", "gmail").await;
    let ask = json!({ "query": "q" });

    // Unknown id, a user, and another Bay's connector: 404 alike.
    gw.create_bay("b2").await;
    gw.create_participant("b2", "far", "agent", "Far").await;
    let (s, b) = gw
        .admin(
            Method::PUT,
            "/bays/b2/participants/far/connector",
            Some(json!({ "platform": "slack" })),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    for id in ["nobody", "ana", "far"] {
        let (s, b) = gw
            .post_json(&w.rex, &format!("/agents/{id}/ask"), ask.clone())
            .await;
        assert_error(s, &b, 404, "NOT_FOUND");
    }
    // An agent that is not a connector.
    let (s, b) = gw.post_json(&w.rex, "/agents/brain/ask", ask.clone()).await;
    assert_error(s, &b, 409, "NOT_A_CONNECTOR");
    // Bad ask bodies.
    for bad in [
        json!({ "query": "  " }),
        json!({ "query": "q", "limit": 0 }),
        json!({ "query": "q", "limit": 101 }),
    ] {
        let (s, b) = gw.post_json(&w.rex, "/agents/scout/ask", bad).await;
        assert_error(s, &b, 400, "INVALID_REQUEST");
    }
    for bad in [json!({}), json!({ "query": "q", "extra": 1 }), json!(["q"])] {
        let (s, b) = gw.post_json(&w.rex, "/agents/scout/ask", bad).await;
        assert_error(s, &b, 400, "INVALID_JSON");
    }
    let big = json!({ "text": "x".repeat(70 * 1024) });
    let (s, b) = gw.post_json(&w.rex, "/agents/scout/send", big).await;
    assert_error(s, &b, 413, "PAYLOAD_TOO_LARGE");

    // A request made: another agent cannot answer it, a malformed answer
    // is refused, and the connector's answer still lands.
    let mut ws = gw.ws_ready(&w.scout, None).await;
    let pending = call(&gw, &w.rex, "scout", "ask", ask.clone());
    let request = next_request(&mut ws).await["requestId"]
        .as_str()
        .unwrap()
        .to_owned();
    let (s, b) = answer(&gw, &w.brain, &request, json!({ "result": "forged" })).await;
    assert_error(s, &b, 404, "NOT_FOUND");
    for bad in [
        json!({}),
        json!({ "result": 1, "error": { "message": "no" } }),
        json!({ "error": { "message": "" } }),
    ] {
        let (s, b) = answer(&gw, &w.scout, &request, bad).await;
        assert_error(s, &b, 400, "INVALID_REQUEST");
    }
    let (s, b) = answer(&gw, &w.scout, &request, json!({ "result": null })).await;
    assert_eq!(s, 204, "{b}");
    let (s, b) = pending.await.unwrap();
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["result"], Value::Null);
    ws.close().await;

    // Admin refusals: a user cannot be a connector, an unknown platform
    // is refused, and an unmarked agent stops being one.
    let (s, b) = connector_admin(
        &gw,
        Method::PUT,
        "ana",
        Some(json!({ "platform": "slack" })),
    )
    .await;
    assert_error(s, &b, 400, "INVALID_REQUEST");
    let (s, b) = connector_admin(
        &gw,
        Method::PUT,
        "brain",
        Some(json!({ "platform": "irc" })),
    )
    .await;
    assert_error(s, &b, 400, "INVALID_JSON");
    let (s, b) = connector_admin(&gw, Method::DELETE, "scout", None).await;
    assert_eq!(s, 204, "{b}");
    let (s, b) = gw.post_json(&w.rex, "/agents/scout/ask", ask).await;
    assert_error(s, &b, 409, "NOT_A_CONNECTOR");
    let (s, b) = connector_admin(&gw, Method::GET, "scout", None).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["connector"], Value::Null);
}

#[tokio::test]
async fn a_connector_can_be_marked_when_it_is_created() {
    let gw = Gateway::spawn().await;
    gw.create_bay(BAY).await;
    let (s, b) = gw
        .admin(
            Method::POST,
            &format!("/bays/{BAY}/participants"),
            Some(json!({
                "id": "mailer", "kind": "agent", "name": "Mailer",
                "connector": { "platform": "gmail" }
            })),
        )
        .await;
    assert_eq!(s, 201, "{b}");
    assert_eq!(
        b["connector"],
        json!({ "platform": "gmail" }),
        "echoed: {b}"
    );
    let (s, b) = connector_admin(&gw, Method::GET, "mailer", None).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["connector"], json!({ "platform": "gmail" }));
    // A user cannot be created as one, and nothing is created.
    let (s, b) = gw
        .admin(
            Method::POST,
            &format!("/bays/{BAY}/participants"),
            Some(json!({
                "id": "u1", "kind": "user", "name": "U",
                "connector": { "platform": "gmail" }
            })),
        )
        .await;
    assert_error(s, &b, 400, "INVALID_REQUEST");
    let (s, b) = connector_admin(&gw, Method::GET, "u1", None).await;
    assert_error(s, &b, 404, "NOT_FOUND");
}

#[tokio::test]
async fn an_unanswered_call_ends_504_and_a_late_answer_is_refused() {
    let gw = Gateway::spawn_with(
        Opts::default().env("SWITCHBOARD_TIMING__CONNECTOR_ANSWER_TIMEOUT", "1s"),
    )
    .await;
    let w = World::create(&gw, BAY).await;
    mark(&gw, "scout", "discord").await;
    let mut ws = gw.ws_ready(&w.scout, None).await;
    let pending = call(&gw, &w.rex, "scout", "ask", json!({ "query": "q" }));
    let request = next_request(&mut ws).await["requestId"]
        .as_str()
        .unwrap()
        .to_owned();
    let (s, b) = tokio::time::timeout(Duration::from_secs(10), pending)
        .await
        .expect("the call must end by itself")
        .unwrap();
    assert_error(s, &b, 504, "CONNECTOR_TIMEOUT");
    let (s, b) = answer(&gw, &w.scout, &request, json!({ "result": [] })).await;
    assert_error(s, &b, 404, "NOT_FOUND");
    ws.close().await;
}

/// The caller held on node A, the connector connected to and answering
/// on node B: the request and the answer both cross through Redis.
#[tokio::test]
async fn the_relay_crosses_two_nodes_on_one_redis() {
    let redis = RedisServer::start(false);
    let a = Gateway::spawn_with(Opts::default().redis(&redis.url())).await;
    let b = Gateway::spawn_with(Opts::default().redis(&redis.url())).await;
    let w = World::create(&a, BAY).await;
    mark(&a, "scout", "whatsapp").await;

    let mut ws = b.ws_ready(&w.scout, None).await;
    for round in 0..3 {
        let query = format!("order {round}");
        let pending = call(&a, &w.rex, "scout", "ask", json!({ "query": query }));
        let event = next_request(&mut ws).await;
        assert_eq!(event["payload"]["query"], query);
        let request = event["requestId"].as_str().unwrap();
        let result = json!({ "round": round });
        let (s, body) = answer(&b, &w.scout, request, json!({ "result": result })).await;
        assert_eq!(s, 204, "{body}");
        let (s, body) = pending.await.unwrap();
        assert_eq!(s, 200, "{body}");
        assert_eq!(body["result"], result);
        assert_eq!(body["platform"], "whatsapp");
    }
    ws.close().await;
}

/// The Rust client's `ask` and `answer_request` against a real gateway:
/// the asking side and the connector side both through the library.
#[tokio::test]
async fn the_rust_client_asks_and_answers() {
    use switchboard_client::{Client, ClientError};
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    mark(&gw, "scout", "slack").await;
    let base = format!("http://{}", gw.addr);
    let asker = Client::new(&base, &w.rex).unwrap();
    let connector = Client::new(&base, &w.scout).unwrap();

    let mut ws = gw.ws_ready(&w.scout, None).await;
    let pending = tokio::spawn(async move { asker.ask("scout", "standup notes", Some(3)).await });
    let event = next_request(&mut ws).await;
    assert_eq!(
        event["payload"],
        json!({ "query": "standup notes", "limit": 3 })
    );
    let request = event["requestId"].as_str().unwrap();
    connector
        .answer_request(request, json!(["note 1"]))
        .await
        .unwrap();
    let answered = pending.await.unwrap().unwrap();
    assert_eq!(answered["result"], json!(["note 1"]));
    // A second answer is the server's 404, as a typed error.
    match connector.answer_request(request, json!([])).await {
        Err(ClientError::Api { status, code, .. }) => {
            assert_eq!((status, code.as_str()), (404, "NOT_FOUND"));
        }
        other => panic!("expected a 404, got {other:?}"),
    }
    ws.close().await;
}

/// Suspensions end a held call at once: the caller's with its own
/// standing refusal (the answer is not handed over), the connector's with
/// 409 `CONNECTOR_SUSPENDED`; a suspended connector is refused before
/// anything is relayed, and a connector cannot relay to itself.
#[tokio::test]
async fn suspensions_end_held_calls_and_a_call_to_oneself_is_refused() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    mark(&gw, "scout", "slack").await;
    let suspend = |who: &str, act: &str| format!("/bays/{BAY}/participants/{who}/{act}");
    let mut ws = gw.ws_ready(&w.scout, None).await;

    // The caller suspended while it waits: 403, even though the connector
    // answers.
    let pending = call(&gw, &w.rex, "scout", "ask", json!({ "query": "q" }));
    let request = next_request(&mut ws).await["requestId"]
        .as_str()
        .unwrap()
        .to_owned();
    let (s, b) = gw
        .admin(Method::POST, &suspend("rex", "suspend"), None)
        .await;
    assert_eq!(s, 200, "{b}");
    let (s, b) = tokio::time::timeout(Duration::from_secs(10), pending)
        .await
        .expect("ends at once")
        .unwrap();
    assert_error(s, &b, 403, "ACCOUNT_SUSPENDED");
    let (s, b) = answer(&gw, &w.scout, &request, json!({ "result": "late" })).await;
    assert_error(s, &b, 404, "NOT_FOUND");

    // The connector suspended while a call waits, then before one.
    let pending = call(&gw, &w.brain, "scout", "ask", json!({ "query": "q" }));
    next_request(&mut ws).await;
    let (s, b) = gw
        .admin(Method::POST, &suspend("scout", "suspend"), None)
        .await;
    assert_eq!(s, 200, "{b}");
    let (s, b) = tokio::time::timeout(Duration::from_secs(10), pending)
        .await
        .expect("ends at once")
        .unwrap();
    assert_error(s, &b, 409, "CONNECTOR_SUSPENDED");
    let (s, b) = gw
        .post_json(&w.brain, "/agents/scout/ask", json!({ "query": "q" }))
        .await;
    assert_error(s, &b, 409, "CONNECTOR_SUSPENDED");
    let (s, b) = gw
        .admin(Method::POST, &suspend("scout", "reinstate"), None)
        .await;
    assert_eq!(s, 200, "{b}");

    let (s, b) = gw
        .post_json(&w.scout, "/agents/scout/ask", json!({ "query": "q" }))
        .await;
    assert_error(s, &b, 400, "INVALID_REQUEST");
}

/// A caller that hangs up withdraws its request: the connector's answer
/// afterwards is refused, not accepted for nobody.
#[tokio::test]
async fn a_caller_that_hangs_up_withdraws_its_request() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    mark(&gw, "scout", "slack").await;
    let mut ws = gw.ws_ready(&w.scout, None).await;
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(700))
        .build()
        .unwrap();
    let gave_up = impatient
        .post(gw.url("/api/agent-api/agents/scout/ask"))
        .bearer_auth(&w.rex)
        .json(&json!({ "query": "q" }))
        .send()
        .await;
    assert!(gave_up.is_err(), "the client timed out");
    let request = next_request(&mut ws).await["requestId"]
        .as_str()
        .unwrap()
        .to_owned();
    // The gateway notices the hang-up when the connection closes; one
    // answer, given well after, must find the request withdrawn.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (s, b) = answer(&gw, &w.scout, &request, json!({ "result": 1 })).await;
    assert_error(s, &b, 404, "NOT_FOUND");
    ws.close().await;
}
