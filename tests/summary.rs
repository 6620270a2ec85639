//! The rolling conversation summary (protocol §6, docs/summary.md) and
//! typing that others see, against a real gateway: the fail-soft GET, the
//! summarizer's PUT and each of its refusals, the admin designation,
//! `?refresh=1` reaching the summarizer over `/ws`, `/updates` and
//! `/events` (member or not), its per-conversation limit, and
//! `typing.started` reaching the other members.

mod common;

use common::sse::{sse_at, SseOpen};
use common::*;
use reqwest::Method;
use serde_json::{json, Value};

const BAY: &str = "b1";

/// `PUT /api/agent-api{path}` with `body`.
async fn put(gw: &Gateway, token: &str, path: &str, body: Value) -> (u16, Value) {
    let res = gw
        .http
        .put(gw.url(&format!("/api/agent-api{path}")))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// `GET …/summary` with its Retry-After header.
async fn get_summary(gw: &Gateway, token: &str, query: &str) -> (u16, Value, Option<String>) {
    let res = gw
        .http
        .get(gw.url(&format!(
            "/api/agent-api/conversations/group/summary{query}"
        )))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let retry = res
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, res.json().await.unwrap_or(Value::Null), retry)
}

/// The next non-empty batch of events on `ws` (watermark `cursor` frames
/// with no events before them are skipped).
async fn next_events(ws: &mut Ws) -> Vec<Value> {
    loop {
        let (events, _) = ws.read_batch().await;
        if !events.is_empty() {
            return events;
        }
    }
}

/// Designates `pid` as the Bay's summarizer.
async fn designate(gw: &Gateway, pid: &str) {
    let (s, b) = gw
        .admin(
            Method::PUT,
            &format!("/bays/{BAY}/summarizer"),
            Some(json!({ "participantId": pid })),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b, json!({ "bayId": BAY, "participantId": pid }));
}

/// Posts `n` messages to the group; returns their ids in order.
async fn post_many(gw: &Gateway, token: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        let (s, m) = gw.post_message(token, "group", &format!("note {i}")).await;
        assert_eq!(s, 201, "{m}");
        ids.push(id_of(&m));
    }
    ids
}

fn write(through: &str, sources: &[&str]) -> Value {
    json!({
        "summary": "The team planned the launch.",
        "decisions": [{ "text": "Ship on Friday", "sourceMessageIds": sources }],
        "openTasks": [{
            "text": "Write release notes", "owner": "Ana", "status": "open",
            "sourceMessageIds": [sources[0]]
        }],
        "openQuestions": [],
        "durableFacts": [{ "text": "Staging is eu-1", "sourceMessageIds": [sources[0]] }],
        "throughMessageId": through,
    })
}

#[tokio::test]
async fn with_no_summary_the_get_answers_200_with_null_memory_and_the_messages() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    let ids = post_many(&gw, &w.ana, 3).await;

    let (s, b, _) = get_summary(&gw, &w.rex, "").await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["memory"], Value::Null);
    let recent: Vec<String> = b["recentMessages"]
        .as_array()
        .unwrap()
        .iter()
        .map(id_of)
        .collect();
    assert_eq!(recent, ids);
    assert_eq!(b["recentTruncated"], false);
    assert_eq!(b["refresh"], Value::Null);
    assert_eq!(b["context"]["conversation"]["id"], "group");
    assert_eq!(b["context"]["you"]["agentId"], "rex");

    // The same message shape as GET …/messages.
    let (s, page) = gw.get(&w.rex, "/conversations/group/messages").await;
    assert_eq!(s, 200, "{page}");
    assert_eq!(b["recentMessages"], page["messages"]);

    // `limit` keeps the newest ones and says some were left out.
    let (s, b, _) = get_summary(&gw, &w.rex, "?limit=2").await;
    assert_eq!(s, 200, "{b}");
    let recent: Vec<String> = b["recentMessages"]
        .as_array()
        .unwrap()
        .iter()
        .map(id_of)
        .collect();
    assert_eq!(recent, ids[1..]);
    assert_eq!(b["recentTruncated"], true);

    for bad in ["?limit=0", "?limit=201", "?limit=x", "?refresh=yes"] {
        let (s, b, _) = get_summary(&gw, &w.rex, bad).await;
        assert_error(s, &b, 400, "INVALID_REQUEST");
    }
}

#[tokio::test]
async fn non_members_get_403_not_participant() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    // Ben is not in the DM; unknown conversations answer the same.
    for path in ["/conversations/dm/summary", "/conversations/nope/summary"] {
        let (s, b) = gw.get(&w.ben, path).await;
        assert_error(s, &b, 403, "NOT_PARTICIPANT");
    }
    // Another Bay's member cannot read this Bay's conversation.
    gw.create_bay("b2").await;
    let other = gw.create_participant("b2", "ana", "user", "Ana").await;
    let (s, b) = gw.get(&other, "/conversations/group/summary").await;
    assert_error(s, &b, 403, "NOT_PARTICIPANT");
}

#[tokio::test]
async fn the_summarizer_writes_and_members_read_the_summary_and_what_follows() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    designate(&gw, "brain").await;
    let ids = post_many(&gw, &w.ana, 4).await;

    let (s, b) = put(
        &gw,
        &w.brain,
        "/conversations/group/summary",
        write(&ids[1], &[&ids[0], &ids[1]]),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    let memory = &b["memory"];
    assert_eq!(memory["version"], 1);
    assert_eq!(memory["throughMessageId"], ids[1].as_str());
    assert_eq!(memory["generatedBy"], "brain");
    assert!(memory["approxTokens"].as_u64().unwrap() > 0, "{memory}");
    assert!(memory["generatedAt"].is_string(), "{memory}");
    assert_eq!(memory["openTasks"][0]["owner"], "Ana");
    assert_eq!(memory["openTasks"][0]["status"], "open");

    // The boundary's time is the message's.
    let (_, page) = gw.get(&w.rex, "/conversations/group/messages").await;
    assert_eq!(
        memory["throughCreatedAt"], page["messages"][1]["createdAt"],
        "{memory}"
    );

    // Every member reads it, with the messages after the boundary.
    let (s, got, _) = get_summary(&gw, &w.ben, "").await;
    assert_eq!(s, 200, "{got}");
    assert_eq!(&got["memory"], memory);
    let recent: Vec<String> = got["recentMessages"]
        .as_array()
        .unwrap()
        .iter()
        .map(id_of)
        .collect();
    assert_eq!(recent, ids[2..]);
    assert_eq!(got["recentTruncated"], false);

    // A later boundary is the next version.
    let (s, b) = put(
        &gw,
        &w.brain,
        "/conversations/group/summary",
        write(&ids[3], &[&ids[2]]),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["memory"]["version"], 2);
    let (_, got, _) = get_summary(&gw, &w.rex, "").await;
    assert_eq!(got["recentMessages"], json!([]));
    assert_eq!(got["memory"]["version"], 2);
}

#[tokio::test]
async fn every_refusal_of_a_summary_write_has_its_code() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    let ids = post_many(&gw, &w.ana, 3).await;
    let (s, dm) = gw.post_message(&w.ana, "dm", "elsewhere").await;
    assert_eq!(s, 201, "{dm}");
    let path = "/conversations/group/summary";
    let good = write(&ids[1], &[&ids[0]]);

    // No summarizer designated: nobody may write.
    let (s, b) = put(&gw, &w.brain, path, good.clone()).await;
    assert_error(s, &b, 403, "NOT_SUMMARIZER");
    designate(&gw, "brain").await;
    // A member that is not the summarizer, human or agent.
    for token in [&w.rex, &w.ana] {
        let (s, b) = put(&gw, token, path, good.clone()).await;
        assert_error(s, &b, 403, "NOT_SUMMARIZER");
    }

    // The boundary must be a message of this conversation.
    for through in ["msg_nope", id_of(&dm).as_str()] {
        let (s, b) = put(&gw, &w.brain, path, write(through, &[&ids[0]])).await;
        assert_error(s, &b, 400, "INVALID_SUMMARY_BOUNDARY");
    }
    // … at the time it was sent, if the writer says a time.
    let mut wrong_time = good.clone();
    wrong_time["throughCreatedAt"] = json!("2001-01-01T00:00:00.000Z");
    let (s, b) = put(&gw, &w.brain, path, wrong_time).await;
    assert_error(s, &b, 400, "INVALID_SUMMARY_BOUNDARY");

    // Sources: messages of this conversation, at or before the boundary.
    let dm_id = id_of(&dm);
    for sources in [
        vec!["msg_nope"],
        vec![dm_id.as_str()],
        vec![ids[2].as_str()],
    ] {
        let (s, b) = put(&gw, &w.brain, path, write(&ids[1], &sources)).await;
        assert_error(s, &b, 400, "INVALID_SUMMARY_SOURCE");
    }

    // Bounds and shape.
    let mut too_long = good.clone();
    too_long["summary"] = json!("x".repeat(4001));
    let mut no_sources = good.clone();
    no_sources["decisions"][0]["sourceMessageIds"] = json!([]);
    let mut owner_on_a_fact = good.clone();
    owner_on_a_fact["durableFacts"][0]["owner"] = json!("Ana");
    let mut too_many = good.clone();
    too_many["openQuestions"] = json!(vec![json!({"text": "q", "sourceMessageIds": [ids[0]]}); 51]);
    for body in [too_long, no_sources, owner_on_a_fact, too_many] {
        let (s, b) = put(&gw, &w.brain, path, body).await;
        assert_error(s, &b, 400, "INVALID_REQUEST");
    }
    let mut unknown = good.clone();
    unknown["version"] = json!(7);
    let (s, b) = put(&gw, &w.brain, path, unknown).await;
    assert_error(s, &b, 400, "INVALID_JSON");

    // Unknown conversation.
    let (s, b) = put(&gw, &w.brain, "/conversations/nope/summary", good.clone()).await;
    assert_error(s, &b, 404, "NOT_FOUND");

    // Nothing above was stored.
    let (_, got, _) = get_summary(&gw, &w.rex, "").await;
    assert_eq!(got["memory"], Value::Null, "{got}");

    // A boundary before the stored one's is stale; the stored one stays.
    let (s, b) = put(&gw, &w.brain, path, write(&ids[2], &[&ids[0]])).await;
    assert_eq!(s, 200, "{b}");
    let (s, b) = put(&gw, &w.brain, path, good).await;
    assert_error(s, &b, 409, "SUMMARY_STALE");
    let (_, got, _) = get_summary(&gw, &w.rex, "").await;
    assert_eq!(got["memory"]["throughMessageId"], ids[2].as_str());
    assert_eq!(got["memory"]["version"], 1);
}

#[tokio::test]
async fn the_admin_api_designates_shows_and_clears_the_summarizer() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    let path = format!("/bays/{BAY}/summarizer");
    let (s, b) = gw.admin(Method::GET, &path, None).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b, json!({ "bayId": BAY, "participantId": null }));

    designate(&gw, "scout").await;
    let (_, b) = gw.admin(Method::GET, &path, None).await;
    assert_eq!(b["participantId"], "scout");

    // A user cannot summarize; unknown participants and Bays are 404.
    let (s, b) = gw
        .admin(Method::PUT, &path, Some(json!({ "participantId": "ana" })))
        .await;
    assert_error(s, &b, 400, "INVALID_REQUEST");
    let (s, b) = gw
        .admin(
            Method::PUT,
            &path,
            Some(json!({ "participantId": "ghost" })),
        )
        .await;
    assert_error(s, &b, 404, "NOT_FOUND");
    let (s, b) = gw
        .admin(
            Method::PUT,
            "/bays/nobay/summarizer",
            Some(json!({ "participantId": "scout" })),
        )
        .await;
    assert_error(s, &b, 404, "NOT_FOUND");
    let (s, b) = gw
        .admin(Method::PUT, &path, Some(json!({ "id": "scout" })))
        .await;
    assert_error(s, &b, 400, "INVALID_JSON");
    let (_, b) = gw.admin(Method::GET, &path, None).await;
    assert_eq!(b["participantId"], "scout", "refusals changed nothing");

    // Cleared: the former summarizer may no longer write.
    let (s, _) = gw.admin(Method::DELETE, &path, None).await;
    assert_eq!(s, 204);
    let (_, b) = gw.admin(Method::GET, &path, None).await;
    assert_eq!(b["participantId"], Value::Null);
    let ids = post_many(&gw, &w.ana, 1).await;
    let (s, b) = put(
        &gw,
        &w.scout,
        "/conversations/group/summary",
        write(&ids[0], &[&ids[0]]),
    )
    .await;
    assert_error(s, &b, 403, "NOT_SUMMARIZER");
}

#[tokio::test]
async fn a_refresh_without_a_summarizer_says_so_and_counts_nothing() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    for _ in 0..5 {
        let (s, b, _) = get_summary(&gw, &w.rex, "?refresh=1").await;
        assert_eq!(s, 200, "{b}");
        assert_eq!(
            b["refresh"],
            json!({ "requested": false, "summarizerId": null, "reason": "NO_SUMMARIZER" })
        );
    }
}

#[tokio::test]
async fn a_refresh_reaches_the_summarizer_over_ws_updates_and_events_even_as_a_non_member() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    // The summarizer is a service agent in no conversation at all.
    let scribe = gw
        .create_participant(BAY, "scribe", "agent", "Scribe")
        .await;
    designate(&gw, "scribe").await;
    let ids = post_many(&gw, &w.ana, 2).await;

    let (s, start) = gw.updates(&scribe, None, "1").await;
    assert_eq!(s, 200, "{start}");
    let cursor = start["cursor"].as_str().unwrap().to_owned();

    let (s, b, _) = get_summary(&gw, &w.rex, "?refresh=1").await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(
        b["refresh"],
        json!({ "requested": true, "summarizerId": "scribe", "reason": null })
    );

    // /updates, from the cursor taken before the request.
    let (s, got) = gw.updates(&scribe, Some(&cursor), "5").await;
    assert_eq!(s, 200, "{got}");
    let events = got["events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{got}");
    let event = &events[0];
    assert_eq!(event["type"], "summary.requested");
    assert_eq!(event["conversationId"], "group");
    assert_eq!(event["requestedBy"], "rex");
    assert_eq!(event["throughMessageId"], Value::Null);
    assert_eq!(event["version"], 0);
    assert_eq!(event["conversation"]["id"], "group");
    assert!(event["requestedAt"].is_string(), "{event}");

    // /ws replays it from the same cursor: the same event.
    let mut ws = gw.ws_ready(&scribe, Some(&cursor)).await;
    let (batch, _) = ws.read_batch().await;
    assert_eq!(batch, vec![event.clone()]);
    ws.close().await;

    // /events too.
    let base = format!("http://{}", gw.addr);
    let open = SseOpen {
        cursor: Some(&cursor),
        ..SseOpen::default()
    };
    let mut sse = sse_at(&base, &scribe, open).await.unwrap();
    let got = sse.data_events(1).await;
    assert_eq!(&got[0].1, event);

    // The summarizer reads any conversation of its Bay (no context: it is
    // not a member), and writes it.
    let (s, b, _) = get_summary(&gw, &scribe, "").await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["context"], Value::Null);
    assert_eq!(b["recentMessages"].as_array().unwrap().len(), 2);
    let (s, b) = put(
        &gw,
        &scribe,
        "/conversations/group/summary",
        write(&ids[1], &[&ids[0]]),
    )
    .await;
    assert_eq!(s, 200, "{b}");

    // Live over /ws, now naming the stored boundary; members hear nothing.
    let mut live = gw.ws_ready(&scribe, None).await;
    let (_, ben_start) = gw.updates(&w.ben, None, "1").await;
    let start = ben_start["cursor"].as_str().unwrap().to_owned();
    let (s, b, _) = get_summary(&gw, &w.ana, "?refresh=1").await;
    assert_eq!(s, 200, "{b}");
    let batch = next_events(&mut live).await;
    assert_eq!(batch.len(), 1, "{batch:?}");
    assert_eq!(batch[0]["type"], "summary.requested");
    assert_eq!(batch[0]["requestedBy"], "ana");
    assert_eq!(batch[0]["throughMessageId"], ids[1].as_str());
    assert_eq!(batch[0]["version"], 1);
    let (_, quiet) = gw.updates(&w.ben, Some(&start), "1").await;
    assert_eq!(quiet["events"], json!([]), "{quiet}");
}

#[tokio::test]
async fn refreshes_are_limited_per_conversation_with_retry_after() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    designate(&gw, "brain").await;
    for _ in 0..3 {
        let (s, b, _) = get_summary(&gw, &w.rex, "?refresh=1").await;
        assert_eq!(s, 200, "{b}");
        assert_eq!(b["refresh"]["requested"], true);
    }
    // The fourth within 5 minutes, from anyone.
    let (s, b, retry) = get_summary(&gw, &w.ana, "?refresh=1").await;
    assert_error(s, &b, 429, "SUMMARY_REFRESH_LIMITED");
    let secs: u64 = retry.expect("Retry-After").parse().unwrap();
    assert!((1..=300).contains(&secs), "{secs}");
    // Reading without refresh still works.
    let (s, b, _) = get_summary(&gw, &w.ana, "").await;
    assert_eq!(s, 200, "{b}");
}

#[tokio::test]
async fn typing_shows_to_the_other_members_over_ws_and_updates() {
    // A long indicator, so the renewal below lands well within half of it
    // however slow the machine.
    let gw =
        Gateway::spawn_with(Opts::default().env("SWITCHBOARD_TIMING__TYPING_TTL", "120s")).await;
    let w = World::create(&gw, BAY).await;
    let (_, start) = gw.updates(&w.ana, None, "1").await;
    let ana_cursor = start["cursor"].as_str().unwrap().to_owned();
    let (_, start) = gw.updates(&w.rex, None, "1").await;
    let rex_cursor = start["cursor"].as_str().unwrap().to_owned();
    let mut ben = gw.ws_ready(&w.ben, None).await;

    let (s, b) = gw
        .post_json(&w.rex, "/conversations/group/typing", json!({}))
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["ok"], true);

    let batch = next_events(&mut ben).await;
    assert_eq!(batch.len(), 1, "{batch:?}");
    let event = &batch[0];
    assert_eq!(event["type"], "typing.started");
    assert_eq!(event["conversationId"], "group");
    assert_eq!(event["participantId"], "rex");
    assert_eq!(event["conversation"]["id"], "group");
    assert!(event["expiresAt"].is_string(), "{event}");

    let (s, got) = gw.updates(&w.ana, Some(&ana_cursor), "5").await;
    assert_eq!(s, 200, "{got}");
    assert_eq!(got["events"], json!([event]));

    // Renewing at once is not announced again; the typer never hears its
    // own indicator. A message afterwards proves the stream moved on.
    let (s, _) = gw
        .post_json(&w.rex, "/conversations/group/typing", json!({}))
        .await;
    assert_eq!(s, 200);
    let (s, m) = gw.post_message(&w.ana, "group", "after typing").await;
    assert_eq!(s, 201, "{m}");
    let batch = next_events(&mut ben).await;
    let types: Vec<&str> = batch.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["message"], "{batch:?}");
    let (_, got) = gw.updates(&w.rex, Some(&rex_cursor), "5").await;
    let types: Vec<&str> = got["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["message"], "{got}");

    // Non-members still get 404, and nothing is announced.
    let (s, b) = gw
        .post_json(&w.ben, "/conversations/dm/typing", json!({}))
        .await;
    assert_error(s, &b, 404, "NOT_FOUND");
}

#[tokio::test]
async fn a_summary_cites_no_deleted_message_and_each_source_once() {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    designate(&gw, "brain").await;
    let ids = post_many(&gw, &w.ana, 3).await;
    let path = "/conversations/group/summary";
    // A repeated source counts once.
    let (s, b) = put(
        &gw,
        &w.brain,
        path,
        write(&ids[1], &[&ids[0], &ids[1], &ids[0]]),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(
        b["memory"]["decisions"][0]["sourceMessageIds"],
        json!([ids[0], ids[1]]),
        "{b}"
    );
    // A deleted message is no source any more (its tombstone has no content).
    let res = gw
        .http
        .delete(gw.url(&format!(
            "/api/agent-api/conversations/group/messages/{}",
            ids[0]
        )))
        .bearer_auth(&w.ana)
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "{}", res.status());
    let (s, b) = put(&gw, &w.brain, path, write(&ids[2], &[&ids[0]])).await;
    assert_error(s, &b, 400, "INVALID_SUMMARY_SOURCE");
    assert!(b["message"].as_str().unwrap().contains("deleted"), "{b}");
    let (s, b) = put(&gw, &w.brain, path, write(&ids[2], &[&ids[1]])).await;
    assert_eq!(s, 200, "{b}");
}
