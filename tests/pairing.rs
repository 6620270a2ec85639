//! End-to-end tests of pairing and reverse linking (protocol §2, §11:
//! `POST /pair`, `/link-requests`), against real gateway processes: the
//! single use of a code, one answer for every code that does not redeem,
//! the old token's 401 and its WebSocket's 4001 close (on another node
//! too), the per-IP limits, and a link request's token handed over once.

mod common;

use common::*;
use reqwest::Method;
use serde_json::{json, Value};
use std::time::Duration;
use switchboard_protocol::error::WsClose;

const BAY: &str = "b1";
const PATIENCE: Duration = Duration::from_secs(5);

async fn world() -> (Gateway, World) {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    (gw, w)
}

/// A call with no credential: (status, body).
async fn public(gw: &Gateway, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut req = gw
        .http
        .request(method, gw.url(&format!("/api/agent-api{path}")));
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

async fn mint(gw: &Gateway, pid: &str) -> String {
    let (s, b) = gw
        .admin(
            Method::POST,
            &format!("/bays/{BAY}/participants/{pid}/pairing-codes"),
            None,
        )
        .await;
    assert_eq!(s, 201, "{b}");
    assert!(
        b["expiresAt"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{b}"
    );
    b["code"].as_str().unwrap().to_owned()
}

async fn pair(gw: &Gateway, code: &str) -> (u16, Value) {
    public(gw, Method::POST, "/pair", Some(json!({ "code": code }))).await
}

/// Creates a link request: (id, poll secret, whole answer).
async fn link(gw: &Gateway, body: Option<Value>) -> (String, String, Value) {
    let (s, b) = public(gw, Method::POST, "/link-requests", body).await;
    assert_eq!(s, 201, "{b}");
    (
        b["id"].as_str().unwrap().to_owned(),
        b["pollSecret"].as_str().unwrap().to_owned(),
        b,
    )
}

async fn poll(gw: &Gateway, id: &str, secret: &str) -> (u16, Value) {
    public(
        gw,
        Method::GET,
        &format!("/link-requests/{id}?secret={secret}"),
        None,
    )
    .await
}

async fn approve(gw: &Gateway, id: &str, body: Value) -> (u16, Value) {
    gw.admin(
        Method::POST,
        &format!("/link-requests/{id}/approve"),
        Some(body),
    )
    .await
}

// ---------------------------------------------------------------- pairing codes

#[tokio::test]
async fn a_code_redeems_once_for_a_rotated_token_that_cuts_the_old_one_off() {
    let (gw, w) = world().await;
    let mut ws = gw.ws_ready(&w.rex, None).await;
    ws.read_batch().await;
    let code = mint(&gw, "rex").await;
    // Minting alone changes nothing.
    assert_eq!(gw.get(&w.rex, "/me").await.0, 200);

    let (s, creds) = pair(&gw, &code).await;
    assert_eq!(s, 200, "{creds}");
    assert_eq!(creds["baseUrl"], gw.url(""), "{creds}");
    assert_eq!(creds["agent"], json!({"id": "rex", "name": "Rex"}));
    let token = creds["token"].as_str().unwrap();
    assert!(token.starts_with("bay_") && !token.starts_with("bay_u_"));

    // The old token: its socket closes with 4001, and it gets 401 everywhere.
    ws.expect_server_close(WsClose::CredentialRevoked, PATIENCE)
        .await;
    let (s, b) = gw.get(&w.rex, "/me").await;
    assert_error(s, &b, 401, "UNAUTHORIZED");
    assert_eq!(
        gw.ws_try(WsAuth::Header(&w.rex)).await.err().map(|e| e.0),
        Some(401)
    );
    // The new one is the agent's.
    let (s, me) = gw.get(token, "/me").await;
    assert_eq!((s, &me["id"]), (200, &json!("rex")), "{me}");

    // Used: the same refusal as a code that never existed.
    let (s, used) = pair(&gw, &code).await;
    assert_error(s, &used, 400, "INVALID_PAIRING_CODE");
    assert_eq!(
        gw.get(token, "/me").await.0,
        200,
        "a refused redemption rotates nothing"
    );
}

#[tokio::test]
async fn used_expired_unknown_and_malformed_codes_get_one_answer() {
    let gw = Gateway::spawn_with(Opts::default().env("SWITCHBOARD_PAIRING__CODE_TTL", "1s")).await;
    let w = World::create(&gw, BAY).await;
    let used = mint(&gw, "rex").await;
    assert_eq!(pair(&gw, &used).await.0, 200);
    let expired = mint(&gw, "scout").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let (s, first) = pair(&gw, &used).await;
    assert_error(s, &first, 400, "INVALID_PAIRING_CODE");
    for code in [
        expired.as_str(),
        "ZZZZZ-ZZZZZ",
        "not a code",
        "",
        "ABCDE-FGHJKM",
    ] {
        assert_eq!(pair(&gw, code).await, (400, first.clone()), "{code:?}");
    }
    // The expired code's agent kept its token: nothing was rotated.
    assert_eq!(gw.get(&w.scout, "/me").await.0, 200);
}

#[tokio::test]
async fn codes_are_read_whatever_their_case_and_dashes() {
    let (gw, _w) = world().await;
    let code = mint(&gw, "scout").await;
    let typed = code.replace('-', " ").to_ascii_lowercase();
    let (s, creds) = pair(&gw, &typed).await;
    assert_eq!(s, 200, "{creds}");
    assert_eq!(creds["agent"]["id"], "scout");
}

#[tokio::test]
async fn of_concurrent_redemptions_exactly_one_wins() {
    let (gw, _w) = world().await;
    let code = mint(&gw, "brain").await;
    let gw = std::sync::Arc::new(gw);
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (gw, code) = (gw.clone(), code.clone());
            tokio::spawn(async move { pair(&gw, &code).await })
        })
        .collect();
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap().0);
    }
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 400, 400, 400, 400, 400, 400, 400]);
}

#[tokio::test]
async fn minting_is_refused_for_users_unknown_ids_and_strangers() {
    let (gw, _w) = world().await;
    let at = |pid: &str| format!("/bays/{BAY}/participants/{pid}/pairing-codes");
    let (s, b) = gw.admin(Method::POST, &at("ana"), None).await;
    assert_error(s, &b, 400, "INVALID_REQUEST");
    let (s, b) = gw.admin(Method::POST, &at("nobody"), None).await;
    assert_error(s, &b, 404, "NOT_FOUND");
    let (s, b) = gw
        .admin(
            Method::POST,
            "/bays/nope/participants/rex/pairing-codes",
            None,
        )
        .await;
    assert_error(s, &b, 404, "NOT_FOUND");
    let res = gw
        .http
        .post(gw.url(&format!("/api/admin{}", at("rex"))))
        .bearer_auth("wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 401);
    // A body that is not a code request at all.
    let (s, b) = public(&gw, Method::POST, "/pair", Some(json!({"token": "x"}))).await;
    assert_error(s, &b, 400, "INVALID_JSON");
}

#[tokio::test]
async fn pairing_attempts_and_link_requests_are_limited_per_ip() {
    let gw = Gateway::spawn_with(
        Opts::default()
            .env("SWITCHBOARD_PAIRING__REDEEM_PER_MINUTE", "3")
            .env("SWITCHBOARD_PAIRING__LINK_REQUESTS_PER_MINUTE", "2"),
    )
    .await;
    let w = World::create(&gw, BAY).await;
    let good = mint(&gw, "rex").await;
    for _ in 0..3 {
        assert_eq!(pair(&gw, "ZZZZZ-ZZZZZ").await.0, 400);
    }
    // Spent: even a good code is refused, and nothing is looked up.
    let res = gw
        .http
        .post(gw.url("/api/agent-api/pair"))
        .json(&json!({ "code": good }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 429);
    let wait: u64 = res.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(wait >= 1, "{wait}");
    let body: Value = res.json().await.unwrap();
    assert_error(429, &body, 429, "RATE_LIMITED");

    link(&gw, None).await;
    link(&gw, None).await;
    let (s, b) = public(&gw, Method::POST, "/link-requests", None).await;
    assert_error(s, &b, 429, "RATE_LIMITED");
    // The refused good code redeemed nothing: Rex's token still works.
    assert_eq!(gw.get(&w.rex, "/me").await.0, 200);
}

#[tokio::test]
async fn public_url_is_the_base_url_handed_out() {
    let gw = Gateway::spawn_with(
        Opts::default().env("SWITCHBOARD_PUBLIC_URL", "https://chat.example/sb"),
    )
    .await;
    World::create(&gw, BAY).await;
    let code = mint(&gw, "rex").await;
    let (s, creds) = pair(&gw, &code).await;
    assert_eq!(s, 200, "{creds}");
    assert_eq!(creds["baseUrl"], "https://chat.example/sb");
    let (id, _, created) = link(&gw, None).await;
    assert_eq!(created["url"], format!("https://chat.example/sb/link/{id}"));
}

/// The store both nodes share: one Redis, whatever `SWITCHBOARD_TEST_STORE` says.
#[tokio::test]
async fn a_redemption_on_one_node_closes_the_old_token_on_another() {
    let redis = RedisServer::start(false);
    let a = Gateway::spawn_with(Opts::default().redis(&redis.url())).await;
    let b = Gateway::spawn_with(Opts::default().redis(&redis.url())).await;
    let w = World::create(&a, BAY).await;
    let mut ws = b.ws_ready(&w.rex, None).await;
    ws.read_batch().await;
    let code = mint(&a, "rex").await;
    let (s, creds) = pair(&a, &code).await;
    assert_eq!(s, 200, "{creds}");
    ws.expect_server_close(WsClose::CredentialRevoked, PATIENCE)
        .await;
    assert_eq!(b.get(&w.rex, "/me").await.0, 401);
    assert_eq!(b.get(creds["token"].as_str().unwrap(), "/me").await.0, 200);
    // Single use across nodes.
    assert_eq!(pair(&b, &code).await.0, 400);
}

// ---------------------------------------------------------------- link requests

#[tokio::test]
async fn a_link_approved_for_an_existing_agent_hands_its_token_over_once() {
    let (gw, w) = world().await;
    let mut ws = gw.ws_ready(&w.rex, None).await;
    ws.read_batch().await;
    let (id, secret, created) = link(&gw, Some(json!({"name": "Claude on laptop"}))).await;
    assert_eq!(created["url"], gw.url(&format!("/link/{id}")));
    assert!(!created["url"].as_str().unwrap().contains(&secret));

    // The approve screen's facts, without the secret.
    let (s, info) = public(&gw, Method::GET, &format!("/link-requests/{id}/info"), None).await;
    assert_eq!(s, 200, "{info}");
    assert_eq!(info["name"], "Claude on laptop");
    assert_eq!(info["status"], "pending");
    assert!(!info.to_string().contains(&secret));

    let (s, pending) = poll(&gw, &id, &secret).await;
    assert_eq!(
        (s, &pending["status"]),
        (200, &json!("pending")),
        "{pending}"
    );
    assert!(pending.get("token").is_none());

    // A wrong or missing secret answers like an unknown id.
    let (s, unknown) = poll(&gw, "lr_nope", &secret).await;
    assert_error(s, &unknown, 404, "NOT_FOUND");
    assert_eq!(poll(&gw, &id, "wrong").await, (404, unknown.clone()));
    let (s, b) = public(&gw, Method::GET, &format!("/link-requests/{id}"), None).await;
    assert_eq!((s, b), (404, unknown.clone()));

    let (s, approved) = approve(&gw, &id, json!({"bay": BAY, "participantId": "rex"})).await;
    assert_eq!(s, 200, "{approved}");
    assert_eq!(approved["agent"], json!({"id": "rex", "name": "Rex"}));
    assert_eq!(approved["status"], "approved");
    let (_, info) = public(&gw, Method::GET, &format!("/link-requests/{id}/info"), None).await;
    assert_eq!(info["status"], "approved");
    // The token is minted when collected: until then the old one works.
    assert_eq!(gw.get(&w.rex, "/me").await.0, 200);

    let (s, collected) = poll(&gw, &id, &secret).await;
    assert_eq!(s, 200, "{collected}");
    assert_eq!(collected["status"], "approved");
    assert_eq!(collected["baseUrl"], gw.url(""));
    assert_eq!(collected["agent"], json!({"id": "rex", "name": "Rex"}));
    let token = collected["token"].as_str().unwrap();
    assert_eq!(gw.get(token, "/me").await.0, 200);
    ws.expect_server_close(WsClose::CredentialRevoked, PATIENCE)
        .await;
    assert_eq!(gw.get(&w.rex, "/me").await.0, 401);

    // Once: then the request is gone for everyone.
    assert_eq!(poll(&gw, &id, &secret).await, (404, unknown.clone()));
    let (s, _) = public(&gw, Method::GET, &format!("/link-requests/{id}/info"), None).await;
    assert_eq!(s, 404);
    assert_eq!(
        gw.get(token, "/me").await.0,
        200,
        "a later poll rotates nothing"
    );
}

#[tokio::test]
async fn a_link_approved_as_a_new_agent_creates_it_with_the_asked_name() {
    let (gw, _w) = world().await;
    let (id, secret, _) = link(&gw, Some(json!({"name": "Laptop"}))).await;
    let (s, approved) = approve(&gw, &id, json!({"bay": BAY, "agent": {"id": "laptop"}})).await;
    assert_eq!(s, 200, "{approved}");
    assert_eq!(approved["agent"], json!({"id": "laptop", "name": "Laptop"}));
    let (s, collected) = poll(&gw, &id, &secret).await;
    assert_eq!(s, 200, "{collected}");
    let (s, me) = gw.get(collected["token"].as_str().unwrap(), "/me").await;
    assert_eq!(s, 200, "{me}");
    assert_eq!(
        (&me["id"], &me["name"], &me["kind"]),
        (&json!("laptop"), &json!("Laptop"), &json!("agent"))
    );
}

#[tokio::test]
async fn approvals_are_refused_as_documented() {
    let (gw, _w) = world().await;
    let (s, b) = approve(&gw, "lr_nope", json!({"bay": BAY, "participantId": "rex"})).await;
    assert_error(s, &b, 404, "NOT_FOUND");
    let (id, _, _) = link(&gw, None).await;
    for (body, code, status) in [
        (json!({"bay": BAY}), "INVALID_REQUEST", 400),
        (
            json!({"bay": BAY, "participantId": "rex", "agent": {"name": "X"}}),
            "INVALID_REQUEST",
            400,
        ),
        (
            json!({"bay": BAY, "participantId": "ana"}),
            "INVALID_REQUEST",
            400,
        ),
        (
            json!({"bay": BAY, "participantId": "nobody"}),
            "INVALID_REQUEST",
            400,
        ),
        (
            json!({"bay": "nope", "participantId": "rex"}),
            "NOT_FOUND",
            404,
        ),
        // The request carries no name, so a new agent needs one.
        (json!({"bay": BAY, "agent": {}}), "INVALID_REQUEST", 400),
        (
            json!({"bay": BAY, "agent": {"id": "rex", "name": "Rex 2"}}),
            "ALREADY_EXISTS",
            409,
        ),
        (
            json!({"bay": BAY, "participantId": "rex", "x": 1}),
            "INVALID_JSON",
            400,
        ),
    ] {
        let (s, b) = approve(&gw, &id, body.clone()).await;
        assert_error(s, &b, status, code);
    }
    // None of those approved it; the first real approval does, once.
    assert_eq!(
        approve(&gw, &id, json!({"bay": BAY, "participantId": "rex"}))
            .await
            .0,
        200
    );
    let (s, b) = approve(&gw, &id, json!({"bay": BAY, "participantId": "scout"})).await;
    assert_error(s, &b, 409, "ALREADY_EXISTS");

    for bad in [
        json!({"name": ""}),
        json!({"name": "a\nb"}),
        json!({"nom": "x"}),
        json!(["x"]),
    ] {
        let (s, b) = public(&gw, Method::POST, "/link-requests", Some(bad.clone())).await;
        assert_eq!(s, 400, "{bad}: {b}");
    }
    // The body may be left out, but one that is there is JSON, as on
    // every route: 415 for another type, and a key given twice is refused.
    let url = gw.url("/api/agent-api/link-requests");
    for ct in ["text/plain", "application/x-www-form-urlencoded"] {
        let req = gw
            .http
            .post(&url)
            .header("Content-Type", ct)
            .body(r#"{"name":"x"}"#);
        let (s, _, b) = gw.send_raw(req).await;
        assert_error(s, &b, 415, "UNSUPPORTED_MEDIA_TYPE");
        let req = gw.http.post(&url).header("Content-Type", ct).body("");
        let (s, _, b) = gw.send_raw(req).await;
        assert_eq!(s, 201, "an empty body is no body: {b}");
    }
    let req = gw
        .http
        .post(&url)
        .header("Content-Type", "application/json")
        .body(r#"{"name":"a","name":"b"}"#);
    let (s, _, b) = gw.send_raw(req).await;
    assert_error(s, &b, 400, "INVALID_JSON");
    assert!(
        b["message"].as_str().unwrap().contains("duplicate key"),
        "{b}"
    );
}

#[tokio::test]
async fn an_expired_link_request_is_gone_approved_or_not() {
    let gw = Gateway::spawn_with(Opts::default().env("SWITCHBOARD_PAIRING__LINK_TTL", "1s")).await;
    World::create(&gw, BAY).await;
    let (pending, pending_secret, _) = link(&gw, None).await;
    let (approved, approved_secret, _) = link(&gw, None).await;
    assert_eq!(
        approve(&gw, &approved, json!({"bay": BAY, "participantId": "rex"}))
            .await
            .0,
        200
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for (id, secret) in [(&pending, &pending_secret), (&approved, &approved_secret)] {
        assert_eq!(poll(&gw, id, secret).await.0, 404);
        let (s, _) = public(&gw, Method::GET, &format!("/link-requests/{id}/info"), None).await;
        assert_eq!(s, 404);
        let (s, b) = approve(&gw, id, json!({"bay": BAY, "participantId": "scout"})).await;
        assert_error(s, &b, 404, "NOT_FOUND");
    }
}

/// A body past the size limit on the routes that read an optional body
/// gets the JSON 413 every other route gives, not actix's plain text.
#[tokio::test]
async fn an_oversized_optional_body_is_a_json_413() {
    let (gw, w) = world().await;
    let big = json!({ "name": "x".repeat(600 * 1024) });
    let (s, b) = public(&gw, Method::POST, "/link-requests", Some(big.clone())).await;
    assert_error(s, &b, 413, "PAYLOAD_TOO_LARGE");
    let (s, b) = gw
        .post_json(&w.rex, "/conversations/group/messages/m_x/complete", big)
        .await;
    assert_error(s, &b, 413, "PAYLOAD_TOO_LARGE");
}
