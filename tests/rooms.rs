//! End-to-end tests of rooms by link (docs/rooms.md), against real gateway
//! processes: creation and the three links, READ in the sample's shape,
//! FOLLOW (upserts, resurfacing reactions, tombstones, brief changes,
//! has_more, a bad cursor), REPLY with client_id retries, history, pins,
//! reactions, owner deletion, the GET-only send's strictness, the limits
//! with Retry-After, expiry, a Bay conversation shared by link, and two
//! nodes on one Redis.

mod common;

use common::rooms::*;
use common::*;
use reqwest::Method;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------- rooms and links

#[tokio::test]
async fn a_room_has_three_links_and_reads_in_the_protocol_shape() {
    let gw = Gateway::spawn_with(opts()).await;
    let (s, b) = create(
        &gw,
        json!({"name": "whoareyou", "visibility": "public", "brief": "Say hi."}),
    )
    .await;
    assert_eq!(s, 201, "{b}");
    let caps: Vec<String> = ["owner", "guest", "reader"]
        .iter()
        .map(|r| {
            let url = b["links"][r].as_str().unwrap();
            assert!(url.starts_with(&format!("{PUBLIC}/r/")), "{url}");
            let cap = Links::cap(url);
            assert!(cap.len() >= 22, "{cap}");
            assert!(cap
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
            cap
        })
        .collect();
    assert!(caps[0] != caps[1] && caps[1] != caps[2] && caps[0] != caps[2]);
    let guest = b["links"]["guest"].as_str().unwrap().to_owned();

    let r = read(&gw, &guest).await;
    let keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
    for k in [
        "protocol",
        "room",
        "allowed_operations",
        "cursor",
        "revision",
        "has_more",
        "has_older",
        "activity",
        "brief",
        "messages",
    ] {
        assert!(keys.contains(&k), "{k} missing: {r}");
    }
    assert_eq!(r["room"]["name"], "whoareyou");
    assert_eq!(r["room"]["role"], "guest");
    assert_eq!(r["room"]["owner"], false);
    assert_eq!(r["room"]["writable"], true);
    assert_eq!(r["room"]["visibility"], "public");
    assert_eq!(r["room"]["expiration"]["inactivity_seconds"], 2_592_000);
    assert_eq!(r["room"]["expiration"]["grace_seconds"], 60);
    assert!(r["room"]["metadata_revision"].is_string());
    assert!(r["revision"]
        .as_str()
        .unwrap()
        .bytes()
        .all(|c| c.is_ascii_digit()));
    assert_eq!(
        r["allowed_operations"],
        json!(["read", "listen", "history", "send", "pin", "unpin", "react"])
    );
    assert_eq!(r["activity"]["window_seconds"], 60);
    // The brief is the pinned first message, shown in messages too.
    assert_eq!(r["brief"]["body"], "Say hi.");
    assert_eq!(r["brief"]["pinned"], true);
    let m = &r["messages"][0];
    for k in [
        "id",
        "author",
        "body",
        "source",
        "created_at",
        "reply_to",
        "pinned",
        "reactions",
        "created_revision",
        "changed_revision",
    ] {
        assert!(m.get(k).is_some(), "{k} missing: {m}");
    }
    assert!(m["id"]
        .as_str()
        .unwrap()
        .bytes()
        .all(|c| c.is_ascii_digit()));
    // The protocol names this link, never another role's capability.
    let text = r["protocol"].as_str().unwrap();
    assert!(text.contains(&guest), "{text}");
    assert!(!text.contains(&caps[0]) && !text.contains(&caps[2]));

    // ?format=json is the same READ; no JSON Accept: the text itself.
    let (s, j) = call_on(&gw, Method::GET, &guest, "?format=json", None).await;
    assert_eq!(s, 200);
    assert_eq!(j["room"]["role"], "guest");
    let res = gw.http.get(on(&gw, &guest, "")).send().await.unwrap();
    assert!(res.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/markdown"));
    let plain = res.text().await.unwrap();
    assert!(plain.contains(&format!("GET {guest}?cursor=")), "{plain}");

    let reader = b["links"]["reader"].as_str().unwrap();
    let rr = read(&gw, reader).await;
    assert_eq!(
        rr["allowed_operations"],
        json!(["read", "listen", "history"])
    );
    assert_eq!(rr["room"]["writable"], false);
    assert!(!rr["protocol"].as_str().unwrap().contains(&guest));
    let owner = b["links"]["owner"].as_str().unwrap();
    let ro = read(&gw, owner).await;
    assert_eq!(ro["room"]["owner"], true);
    assert!(ro["allowed_operations"]
        .as_array()
        .unwrap()
        .contains(&json!("delete")));

    // Unknown links: 404 with a code, whatever they look like.
    for cap in [
        "AAAAAAAAAAAAAAAAAAAAAA",
        "short",
        "bad%20chars%20here%20xxxxxxx",
    ] {
        let (s, e) = call(
            &gw,
            Method::GET,
            &gw.url(&format!("/r/{cap}?format=json")),
            None,
        )
        .await;
        assert_error(s, &e, 404, "NOT_FOUND");
    }
}

#[tokio::test]
async fn bad_creations_are_refused_whole() {
    let gw = Gateway::spawn_with(opts()).await;
    let (s, e) = create(&gw, json!({"name": ""})).await;
    assert_error(s, &e, 400, "INVALID_REQUEST");
    let (s, e) = create(&gw, json!({"name": "x", "visibility": "secret"})).await;
    assert_eq!(s, 400, "{e}");
    let (s, e) = create(&gw, json!({"name": "x", "owner": "me"})).await;
    assert_eq!(s, 400, "{e}");
}

// ---------------------------------------------------------------- reply

#[tokio::test]
async fn replies_are_idempotent_by_client_id() {
    let gw = Gateway::spawn_with(opts()).await;
    let links = room(&gw, "private").await;
    let (s, first) = reply(&gw, &links.guest, "Orbit", "hello", "k1").await;
    assert_eq!(s, 201, "{first}");
    assert_eq!(first["author"], "Orbit");
    assert!(first.get("cursor").is_none(), "{first}");
    assert!(first["source"].is_null());
    // Identical retry: the same message, 200.
    let (s, again) = reply(&gw, &links.guest, "Orbit", "hello", "k1").await;
    assert_eq!(s, 200, "{again}");
    assert_eq!(again["id"], first["id"]);
    // Changed retry: 409.
    let (s, e) = reply(&gw, &links.guest, "Orbit", "hello!", "k1").await;
    assert_error(s, &e, 409, "IDEMPOTENCY_KEY_REUSED");
    let (s, e) = reply(&gw, &links.guest, "Byte", "hello", "k1").await;
    assert_error(s, &e, 409, "IDEMPOTENCY_KEY_REUSED");
    // Removed: 410, never recreated.
    let id = first["id"].as_str().unwrap();
    let (s, d) = call_on(
        &gw,
        Method::DELETE,
        &links.owner,
        &format!("/messages/{id}"),
        None,
    )
    .await;
    assert_eq!(s, 200, "{d}");
    let (s, e) = reply(&gw, &links.guest, "Orbit", "hello", "k1").await;
    assert_error(s, &e, 410, "MESSAGE_DELETED");
    assert!(read(&gw, &links.guest).await["messages"]
        .as_array()
        .unwrap()
        .is_empty());

    // client_id is required; the reader cannot send; bad reply_to.
    let (s, e) = call_on(
        &gw,
        Method::POST,
        &links.guest,
        "",
        Some(json!({"author": "A", "body": "x"})),
    )
    .await;
    assert_eq!(s, 400, "{e}");
    let (s, e) = reply(&gw, &links.reader, "R", "x", "k2").await;
    assert_error(s, &e, 403, "FORBIDDEN");
    let b = json!({"author": "A", "body": "x", "client_id": "k3", "reply_to": "12345"});
    let (s, e) = call_on(&gw, Method::POST, &links.guest, "", Some(b)).await;
    assert_error(s, &e, 400, "INVALID_REPLY_TARGET");
    // Oversized body: 413, nothing stored.
    let big = "x".repeat(2 * 1024 * 1024);
    let (s, _) = reply(&gw, &links.guest, "A", &big, "k4").await;
    assert_eq!(s, 413);
    assert!(read(&gw, &links.guest).await["messages"]
        .as_array()
        .unwrap()
        .is_empty());
}

// ---------------------------------------------------------------- follow

#[tokio::test]
async fn follow_holds_then_answers_upserts_tombstones_and_the_brief() {
    let gw = Gateway::spawn_with(opts()).await;
    let links = room(&gw, "private").await;
    let old = said(&gw, &links.guest, "Orbit", "first").await;
    let r = read(&gw, &links.reader).await;
    let cursor = r["cursor"].as_str().unwrap().to_owned();

    // Empty answer, same shape.
    let (s, empty) = follow(&gw, &links.reader, &cursor, 0, 100).await;
    assert_eq!(s, 200, "{empty}");
    assert_eq!(empty["upserts"], json!([]));
    assert_eq!(empty["tombstones"], json!([]));
    assert_eq!(empty["has_more"], false);
    assert!(empty.get("brief").is_none());

    // A held FOLLOW answers as soon as a post lands.
    let (gw2, reader, c) = (gw.http.clone(), on(&gw, &links.reader, ""), cursor.clone());
    let held = tokio::spawn(async move {
        let started = Instant::now();
        let res = gw2
            .get(format!("{reader}?cursor={c}&wait=20"))
            .send()
            .await
            .unwrap();
        (started.elapsed(), res.json::<Value>().await.unwrap())
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let new = said(&gw, &links.guest, "Byte", "second").await;
    let (took, a) = held.await.unwrap();
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert_eq!(ids(&a["upserts"]), vec![new.clone()]);
    let next = a["cursor"].as_str().unwrap().to_owned();

    // A reaction resurfaces the old message.
    let react = json!({"message_id": old, "author": "Human 1", "emoji": "👍"});
    let (s, m) = call_on(
        &gw,
        Method::POST,
        &links.guest,
        "/reactions",
        Some(react.clone()),
    )
    .await;
    assert_eq!(s, 200, "{m}");
    assert_eq!(
        m["reactions"],
        json!([{"emoji": "👍", "authors": ["Human 1"]}])
    );
    // Idempotent.
    let (s, m2) = call_on(&gw, Method::POST, &links.guest, "/reactions", Some(react)).await;
    assert_eq!(s, 200);
    assert_eq!(m2["reactions"], m["reactions"]);
    let (_, a) = follow(&gw, &links.reader, &next, 5, 100).await;
    assert_eq!(ids(&a["upserts"]), vec![old.clone()]);
    assert_eq!(
        a["upserts"][0]["reactions"][0]["authors"],
        json!(["Human 1"])
    );
    let next = a["cursor"].as_str().unwrap().to_owned();

    // A pin: the brief comes with the room record.
    let (s, p) = call_on(
        &gw,
        Method::POST,
        &links.guest,
        "/pins",
        Some(json!({"message_id": new})),
    )
    .await;
    assert_eq!(s, 200, "{p}");
    let (_, a) = follow(&gw, &links.reader, &next, 5, 100).await;
    assert_eq!(a["brief"]["id"], json!(new));
    assert!(a["room"]["metadata_revision"].is_string());
    let next = a["cursor"].as_str().unwrap().to_owned();

    // Owner deletion: a tombstone, and the brief goes.
    let (s, e) = call_on(
        &gw,
        Method::DELETE,
        &links.guest,
        &format!("/messages/{new}"),
        None,
    )
    .await;
    assert_error(s, &e, 403, "FORBIDDEN");
    let (s, _) = call_on(
        &gw,
        Method::DELETE,
        &links.owner,
        &format!("/messages/{new}"),
        None,
    )
    .await;
    assert_eq!(s, 200);
    let (_, a) = follow(&gw, &links.reader, &next, 5, 100).await;
    assert_eq!(a["tombstones"], json!([new]));
    assert_eq!(a["brief"], Value::Null);
    assert!(a.get("brief").is_some(), "{a}");
    assert!(read(&gw, &links.reader).await["brief"].is_null());

    // has_more pages; the reader cannot write.
    let (s, e) = reply(&gw, &links.reader, "R", "no", "r1").await;
    assert_error(s, &e, 403, "FORBIDDEN");
    let start = read(&gw, &links.reader).await["cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    for i in 0..3 {
        said(&gw, &links.guest, "Orbit", &format!("page {i}")).await;
    }
    let (_, a) = follow(&gw, &links.reader, &start, 0, 2).await;
    assert_eq!(a["upserts"].as_array().unwrap().len(), 2);
    assert_eq!(a["has_more"], true);
    let (_, b) = follow(&gw, &links.reader, a["cursor"].as_str().unwrap(), 0, 2).await;
    assert_eq!(b["upserts"].as_array().unwrap().len(), 1);
    assert_eq!(b["has_more"], false);

    // A cursor this room never issued: 409, READ again.
    let (s, e) = follow(&gw, &links.reader, "bm9wZQ", 0, 10).await;
    assert_error(s, &e, 409, "CURSOR_EXPIRED");
    let (s, e) = follow(&gw, &links.reader, &start, 0, 1000).await;
    assert_error(s, &e, 400, "INVALID_REQUEST");
}

#[tokio::test]
async fn history_pages_back_without_moving_the_cursor() {
    let gw = Gateway::spawn_with(opts()).await;
    let links = room(&gw, "private").await;
    let mut all = Vec::new();
    for i in 0..25 {
        all.push(said(&gw, &links.guest, "Orbit", &format!("m{i}")).await);
    }
    let r = read(&gw, &links.guest).await;
    assert_eq!(ids(&r["messages"]), all[5..].to_vec());
    assert_eq!(r["has_older"], true);
    let (s, h) = call_on(
        &gw,
        Method::GET,
        &links.guest,
        &format!("?before={}&limit=3", all[5]),
        None,
    )
    .await;
    assert_eq!(s, 200, "{h}");
    assert_eq!(ids(&h["messages"]), all[2..5].to_vec());
    assert_eq!(h["has_older"], true);
    let (_, h) = call_on(
        &gw,
        Method::GET,
        &links.guest,
        &format!("?before={}&limit=100", all[2]),
        None,
    )
    .await;
    assert_eq!(ids(&h["messages"]), all[..2].to_vec());
    assert_eq!(h["has_older"], false);
    let (s, e) = call_on(&gw, Method::GET, &links.guest, "?before=abc", None).await;
    assert_error(s, &e, 400, "INVALID_REQUEST");
}

// ---------------------------------------------------------------- GET-only send

#[tokio::test]
async fn the_get_only_send_is_strict_and_prefetches_never_write() {
    let gw = Gateway::spawn_with(opts()).await;
    let links = room(&gw, "private").await;
    let url = on(
        &gw,
        &links.guest,
        "?send=1&author=Orbit&body=hi%20there&client_id=g1",
    );
    let (s, m) = call(&gw, Method::GET, &url, None).await;
    assert_eq!(s, 201, "{m}");
    assert_eq!(m["body"], "hi there");
    let (s, again) = call(&gw, Method::GET, &url, None).await;
    assert_eq!(s, 200);
    assert_eq!(again["id"], m["id"]);

    let (s, e) = call(&gw, Method::GET, &format!("{url}&tracking=1"), None).await;
    assert_error(s, &e, 400, "INVALID_REQUEST");
    let long = "y".repeat(4100);
    let (s, e) = call_on(
        &gw,
        Method::GET,
        &links.guest,
        &format!("?send=1&author=A&body={long}&client_id=g2"),
        None,
    )
    .await;
    assert_error(s, &e, 414, "URI_TOO_LONG");
    for header in ["Sec-Purpose", "Purpose"] {
        let res = gw
            .http
            .get(on(
                &gw,
                &links.guest,
                "?send=1&author=A&body=pre&client_id=g3",
            ))
            .header(header, "prefetch")
            .send()
            .await
            .unwrap();
        assert!(!res.status().is_success());
    }
    let res = gw
        .http
        .head(on(
            &gw,
            &links.guest,
            "?send=1&author=A&body=head&client_id=g4",
        ))
        .send()
        .await
        .unwrap();
    assert!(!res.status().is_success(), "{}", res.status());
    let r = read(&gw, &links.guest).await;
    assert_eq!(
        ids(&r["messages"]),
        vec![m["id"].as_str().unwrap().to_owned()]
    );
    let (s, e) = call_on(
        &gw,
        Method::GET,
        &links.reader,
        "?send=1&author=A&body=x&client_id=g5",
        None,
    )
    .await;
    assert_error(s, &e, 403, "FORBIDDEN");
}

// ---------------------------------------------------------------- limits and lifetime

#[tokio::test]
async fn limits_answer_429_with_retry_after() {
    let gw = Gateway::spawn_with(
        opts()
            .env("SWITCHBOARD_ROOMS__CREATE_BURST", "2")
            .env("SWITCHBOARD_ROOMS__PRIVATE_WRITE_BURST", "2")
            .env("SWITCHBOARD_ROOMS__PRIVATE_WRITES_PER_MINUTE", "1")
            .env("SWITCHBOARD_ROOMS__MAX_WAITING_PER_IP", "1"),
    )
    .await;
    let links = room(&gw, "private").await;
    room(&gw, "public").await;
    let res = gw
        .http
        .post(gw.url("/rooms"))
        .json(&json!({"name": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 429);
    assert!(res.headers().contains_key("retry-after"));
    // The admin token is always accepted.
    let res = gw
        .http
        .post(gw.url("/rooms"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"name": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 201);

    said(&gw, &links.guest, "A", "one").await;
    said(&gw, &links.guest, "A", "two").await;
    let res = gw
        .http
        .post(on(&gw, &links.guest, ""))
        .json(&json!({"author": "A", "body": "three", "client_id": "c3"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 429);
    assert!(res.headers().contains_key("retry-after"));

    let cursor = read(&gw, &links.reader).await["cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let (http, url) = (
        gw.http.clone(),
        on(&gw, &links.reader, &format!("?cursor={cursor}&wait=3")),
    );
    let held = tokio::spawn(async move { http.get(url).send().await.unwrap().status().as_u16() });
    tokio::time::sleep(Duration::from_millis(700)).await;
    let res = gw
        .http
        .get(on(&gw, &links.reader, &format!("?cursor={cursor}&wait=3")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 429);
    assert!(res.headers().contains_key("retry-after"));
    assert_eq!(held.await.unwrap(), 200);
}

#[tokio::test]
async fn a_reaction_is_exactly_one_emoji() {
    let gw = Gateway::spawn_with(opts()).await;
    let links = room(&gw, "private").await;
    let id = said(&gw, &links.guest, "A", "react to me").await;
    let url = on(&gw, &links.guest, "/reactions");
    let long = "x".repeat(20_000);
    for bad in ["", "thumbs up", "👍👍", long.as_str()] {
        for method in [Method::POST, Method::DELETE] {
            let (s, e) = call(
                &gw,
                method,
                &url,
                Some(json!({"message_id": id, "author": "A", "emoji": bad})),
            )
            .await;
            assert_error(s, &e, 400, "INVALID_REACTION");
        }
    }
    // Nothing was written; a real emoji (unqualified form included) is fine.
    let (s, m) = call(
        &gw,
        Method::POST,
        &url,
        Some(json!({"message_id": id, "author": "A", "emoji": "❤"})),
    )
    .await;
    assert_eq!(s, 200, "{m}");
    assert_eq!(m["reactions"], json!([{"emoji": "❤️", "authors": ["A"]}]));
}

#[tokio::test]
async fn a_wrong_bearer_token_at_creation_is_401_before_any_bucket() {
    let gw = Gateway::spawn_with(opts().env("SWITCHBOARD_ROOMS__CREATE_BURST", "1")).await;
    let wrong = || {
        gw.http
            .post(gw.url("/rooms"))
            .bearer_auth("not-the-admin-token")
            .json(&json!({"name": "x"}))
            .send()
    };
    let res = wrong().await.unwrap();
    assert_eq!(res.status().as_u16(), 401);
    room(&gw, "private").await;
    let (s, e) = create(&gw, json!({"name": "x"})).await;
    assert_error(s, &e, 429, "RATE_LIMITED");
    let res = wrong().await.unwrap();
    assert_eq!(res.status().as_u16(), 401);
    let e: Value = res.json().await.unwrap();
    assert_eq!(e["code"], "UNAUTHORIZED", "{e}");
}

#[tokio::test]
async fn admin_only_creation_wants_the_admin_token() {
    let gw =
        Gateway::spawn_with(opts().env("SWITCHBOARD_ROOMS__ADMIN_ONLY_CREATION", "true")).await;
    let (s, e) = create(&gw, json!({"name": "x"})).await;
    assert_error(s, &e, 403, "FORBIDDEN");
    let res = gw
        .http
        .post(gw.url("/rooms"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"name": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 201);
}

#[tokio::test]
async fn reads_keep_a_room_alive_and_idleness_expires_it() {
    let gw = Gateway::spawn_with(
        opts()
            .env("SWITCHBOARD_ROOMS__INACTIVITY_TIMEOUT", "2s")
            .env("SWITCHBOARD_ROOMS__EXPIRY_GRACE", "1s"),
    )
    .await;
    let links = room(&gw, "private").await;
    // Reads every 400 ms for 4 s (longer than the 3 s lifetime).
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(4) {
        read(&gw, &links.reader).await;
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    tokio::time::sleep(Duration::from_millis(3500)).await;
    for link in [&links.owner, &links.guest, &links.reader] {
        let (s, e) = call_on(&gw, Method::GET, link, "?format=json", None).await;
        assert_error(s, &e, 410, "ROOM_EXPIRED");
    }
    let (s, e) = reply(&gw, &links.guest, "A", "late", "z").await;
    assert_error(s, &e, 410, "ROOM_EXPIRED");
}

// ---------------------------------------------------------------- Bay conversations

#[tokio::test]
async fn a_bay_conversation_shared_by_link_talks_both_ways() {
    let gw = Gateway::spawn_with(opts()).await;
    shared_conversation_across(&gw, &gw).await;
}

/// The participant id of link author `name` in conversation `cid` of `bay`
/// (as the operator's conversation list shows it).
async fn link_author(gw: &Gateway, bay: &str, cid: &str, name: &str) -> String {
    let (s, b) = gw
        .admin(Method::GET, &format!("/bays/{bay}/conversations"), None)
        .await;
    assert_eq!(s, 200, "{b}");
    let c = b["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == cid)
        .unwrap_or_else(|| panic!("no {cid}: {b}"));
    c["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name)
        .and_then(|m| m["id"].as_str())
        .filter(|id| id.starts_with("p_link_"))
        .unwrap_or_else(|| panic!("{name} is no member: {c}"))
        .to_owned()
}

#[tokio::test]
async fn operators_govern_link_authors_and_suspended_bays() {
    let gw = Gateway::spawn_with(opts()).await;
    World::create(&gw, "bay1").await;
    let guest = share(&gw, "bay1", "group", "guest").await;
    said(&gw, &guest, "Other", "first").await;
    let other = link_author(&gw, "bay1", "group", "Other").await;

    // A suspended author may read, not write (posts nor reactions).
    let (s, b) = gw
        .admin(
            Method::POST,
            &format!("/bays/bay1/participants/{other}/suspend"),
            None,
        )
        .await;
    assert!(s < 300, "{s} {b}");
    let (s, e) = reply(&gw, &guest, "Other", "while suspended", "s1").await;
    assert_error(s, &e, 403, "ACCOUNT_SUSPENDED");
    let id = said(&gw, &guest, "Someone", "hi").await;
    let (s, e) = call_on(
        &gw,
        Method::POST,
        &guest,
        "/reactions",
        Some(json!({"message_id": id, "author": "Other", "emoji": "👍"})),
    )
    .await;
    assert_error(s, &e, 403, "ACCOUNT_SUSPENDED");
    read(&gw, &guest).await;
    gw.admin(
        Method::POST,
        &format!("/bays/bay1/participants/{other}/reinstate"),
        None,
    )
    .await;
    said(&gw, &guest, "Other", "back").await;

    // Removed by an operator: refused, never re-added by its own post,
    // until an operator adds it back.
    let (s, b) = gw
        .admin(
            Method::DELETE,
            &format!("/bays/bay1/conversations/group/members/{other}"),
            None,
        )
        .await;
    assert_eq!(s, 204, "{b}");
    let (s, e) = reply(&gw, &guest, "Other", "let me in", "r1").await;
    assert_error(s, &e, 403, "AUTHOR_REMOVED");
    let (s, e) = reply(&gw, &guest, " Other ", "let me in", "r2").await;
    assert_error(s, &e, 403, "AUTHOR_REMOVED");
    let (s, b) = gw
        .admin(Method::GET, "/bays/bay1/conversations", None)
        .await;
    assert_eq!(s, 200);
    assert!(!b.to_string().contains(&other), "re-added: {b}");
    let (s, b) = gw
        .admin(
            Method::POST,
            "/bays/bay1/conversations/group/members",
            Some(json!({"participantId": other})),
        )
        .await;
    assert!(s < 300, "{s} {b}");
    said(&gw, &guest, "Other", "added back").await;

    // A suspended Bay refuses every request of its rooms' links, reads too.
    let cursor = read(&gw, &guest).await["cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let (s, b) = gw.admin(Method::POST, "/bays/bay1/suspend", None).await;
    assert!(s < 300, "{s} {b}");
    let (s, e) = reply(&gw, &guest, "Other", "bs", "bs1").await;
    assert_error(s, &e, 403, "BAY_SUSPENDED");
    for rest in [
        "?format=json".to_owned(),
        format!("?cursor={cursor}&wait=0"),
        format!("?before={id}"),
        "?send=1&author=Other&body=x&client_id=bs2".to_owned(),
    ] {
        let (s, e) = call_on(&gw, Method::GET, &guest, &rest, None).await;
        assert_error(s, &e, 403, "BAY_SUSPENDED");
    }
    let (s, e) = call_on(
        &gw,
        Method::POST,
        &guest,
        "/pins",
        Some(json!({"message_id": id})),
    )
    .await;
    assert_error(s, &e, 403, "BAY_SUSPENDED");
    gw.admin(Method::POST, "/bays/bay1/reinstate", None).await;
    let r = read(&gw, &guest).await;
    let bodies: Vec<&str> = r["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["body"].as_str().unwrap())
        .collect();
    assert!(!bodies.contains(&"bs"), "{bodies:?}");
    assert!(!bodies.contains(&"let me in"), "{bodies:?}");
}

#[tokio::test]
async fn a_room_admits_at_most_max_authors() {
    let gw = Gateway::spawn_with(opts().env("SWITCHBOARD_ROOMS__MAX_AUTHORS", "2")).await;
    let links = room(&gw, "private").await;
    let id = said(&gw, &links.guest, "A", "one").await;
    let (s, m) = call_on(
        &gw,
        Method::POST,
        &links.guest,
        "/reactions",
        Some(json!({"message_id": id, "author": "B", "emoji": "👍"})),
    )
    .await;
    assert_eq!(s, 200, "{m}");
    // A third name, by post, GET-only send or reaction: refused, unwritten.
    let (s, e) = reply(&gw, &links.guest, "C", "three", "c1").await;
    assert_error(s, &e, 403, "ROOM_AUTHORS_FULL");
    let (s, e) = call_on(
        &gw,
        Method::GET,
        &links.guest,
        "?send=1&author=C&body=three&client_id=c2",
        None,
    )
    .await;
    assert_error(s, &e, 403, "ROOM_AUTHORS_FULL");
    let (s, e) = call_on(
        &gw,
        Method::POST,
        &links.guest,
        "/reactions",
        Some(json!({"message_id": id, "author": "C", "emoji": "👍"})),
    )
    .await;
    assert_error(s, &e, 403, "ROOM_AUTHORS_FULL");
    // The room's authors keep writing.
    said(&gw, &links.guest, "B", "two").await;
    said(&gw, &links.owner, " A ", "again").await;
    let r = read(&gw, &links.reader).await;
    let authors: Vec<&str> = r["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["author"].as_str().unwrap())
        .collect();
    assert_eq!(authors, ["A", "B", "A"], "{r}");
    assert_eq!(r["messages"][0]["reactions"][0]["authors"], json!(["B"]));
}

#[tokio::test]
async fn forged_and_stale_cursors_expire_but_quiet_followers_do_not() {
    let gw = Gateway::spawn_with(opts().env("SWITCHBOARD_REPLAY_WINDOW", "2s")).await;
    let links = room(&gw, "private").await;
    said(&gw, &links.guest, "A", "one").await;
    let c0 = read(&gw, &links.reader).await["cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let parts = cursor_parts(&c0);
    assert_eq!(parts[0], "r1", "{parts:?}");
    assert_eq!(forged_cursor(&c0, &parts[2], &parts[3]), c0);

    // A metadata revision the room never had.
    let (s, e) = follow(
        &gw,
        &links.reader,
        &forged_cursor(&c0, &parts[2], "99"),
        0,
        10,
    )
    .await;
    assert_error(s, &e, 409, "CURSOR_EXPIRED");

    tokio::time::sleep(Duration::from_millis(2500)).await;
    // A quiet room: the cursor's position is older than the window, yet
    // nothing older than the window follows it.
    let (s, f) = follow(&gw, &links.reader, &c0, 0, 10).await;
    assert_eq!(s, 200, "{f}");
    assert_eq!(f["upserts"], json!([]));
    // A position from the room's beginning: the whole room, older than
    // the window, would replay.
    let (s, e) = follow(&gw, &links.reader, &forged_cursor(&c0, "0-0", "1"), 0, 10).await;
    assert_error(s, &e, 409, "CURSOR_EXPIRED");

    // A held FOLLOW of the quiet room gets the next post.
    let (http, url) = (
        gw.http.clone(),
        on(&gw, &links.reader, &format!("?cursor={c0}&wait=10")),
    );
    let held = tokio::spawn(async move {
        let res = http.get(url).send().await.unwrap();
        (res.status().as_u16(), res.json::<Value>().await.unwrap())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    said(&gw, &links.guest, "A", "two").await;
    let (s, f) = held.await.unwrap();
    assert_eq!(s, 200, "{f}");
    assert_eq!(f["upserts"][0]["body"], "two", "{f}");
    let c1 = f["cursor"].as_str().unwrap().to_owned();

    tokio::time::sleep(Duration::from_millis(2500)).await;
    said(&gw, &links.guest, "A", "three").await;
    // c0 missed "two", now older than the window: expired.
    let (s, e) = follow(&gw, &links.reader, &c0, 0, 10).await;
    assert_error(s, &e, 409, "CURSOR_EXPIRED");
    // c1 saw everything but "three": it goes on.
    let (s, f) = follow(&gw, &links.reader, &c1, 0, 10).await;
    assert_eq!(s, 200, "{f}");
    assert_eq!(f["upserts"][0]["body"], "three", "{f}");
}

#[tokio::test]
async fn bad_text_is_refused_not_stored() {
    let gw = Gateway::spawn_with(opts()).await;
    let links = room(&gw, "private").await;
    // Invalid UTF-8 in a GET-only send: refused, never stored as U+FFFD.
    let (s, e) = call_on(
        &gw,
        Method::GET,
        &links.guest,
        "?send=1&author=A&body=%FF%FE&client_id=u1",
        None,
    )
    .await;
    assert_error(s, &e, 400, "INVALID_CONTENT");
    let (s, e) = call_on(
        &gw,
        Method::GET,
        &links.guest,
        "?send=1&author=%C3&body=hi&client_id=u2",
        None,
    )
    .await;
    assert_error(s, &e, 400, "INVALID_REQUEST");
    let res = gw
        .http
        .post(on(&gw, &links.guest, ""))
        .header("Content-Type", "application/json")
        .body(b"{\"author\":\"A\",\"body\":\"\xff\xfe\",\"client_id\":\"u5\"}".to_vec())
        .send()
        .await
        .unwrap();
    let s = res.status().as_u16();
    assert_error(s, &res.json().await.unwrap(), 400, "INVALID_JSON");
    // Control characters in a body (line breaks and tabs are text).
    for body in ["nul\u{0}here", "bell\u{7}", "esc\u{1b}[31m"] {
        let (s, e) = reply(&gw, &links.guest, "A", body, "c-ctl").await;
        assert_error(s, &e, 400, "INVALID_CONTENT");
    }
    let (s, e) = call_on(
        &gw,
        Method::GET,
        &links.guest,
        "?send=1&author=A&body=a%00b&client_id=u3",
        None,
    )
    .await;
    assert_error(s, &e, 400, "INVALID_CONTENT");
    // Control characters and bidi overrides in author names.
    for author in [
        "nul\u{0}",
        "two\nlines",
        "\u{202E}nimda",
        "a\u{2066}b",
        "x\u{202A}",
    ] {
        let (s, e) = reply(&gw, &links.guest, author, "hi", "c-auth").await;
        assert_error(s, &e, 400, "INVALID_REQUEST");
    }
    let (s, e) = call_on(
        &gw,
        Method::GET,
        &links.guest,
        "?send=1&author=%E2%80%AEnimda&body=hi&client_id=u4",
        None,
    )
    .await;
    assert_error(s, &e, 400, "INVALID_REQUEST");
    assert!(read(&gw, &links.reader).await["messages"]
        .as_array()
        .unwrap()
        .is_empty());
    // Good text passes: line breaks, tabs, non-Latin names, + and %2B.
    let (s, m) = reply(&gw, &links.guest, "Zoë 李", "line one\r\n\tline two", "ok1").await;
    assert_eq!(s, 201, "{m}");
    assert_eq!(m["body"], "line one\r\n\tline two");
    let (s, m) = call_on(
        &gw,
        Method::GET,
        &links.guest,
        "?send=1&author=A&body=1+%2B+1%20%E2%9C%93&client_id=ok2",
        None,
    )
    .await;
    assert_eq!(s, 201, "{m}");
    assert_eq!(m["body"], "1 + 1 ✓");
}

#[tokio::test]
async fn a_shared_room_is_named_after_its_conversation_title() {
    let gw = Gateway::spawn_with(opts()).await;
    World::create(&gw, "bay1").await;
    let (s, b) = gw
        .admin(
            Method::POST,
            "/bays/bay1/conversations",
            Some(json!({"id": "untitled", "type": "GROUP", "members": ["ana", "rex"]})),
        )
        .await;
    assert_eq!(s, 201, "{b}");
    let guest = share(&gw, "bay1", "untitled", "guest").await;
    let r = read(&gw, &guest).await;
    assert_eq!(r["room"]["name"], "untitled");
    let cursor = r["cursor"].as_str().unwrap().to_owned();

    let retitle = |title: Value| {
        gw.admin(
            Method::PATCH,
            "/bays/bay1/conversations/untitled",
            Some(json!({ "title": title })),
        )
    };
    let (s, b) = retitle(json!("Launch plan")).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(read(&gw, &guest).await["room"]["name"], "Launch plan");
    // A follower gets the new record.
    let (s, f) = follow(&gw, &guest, &cursor, 0, 10).await;
    assert_eq!(s, 200, "{f}");
    assert_eq!(f["room"]["name"], "Launch plan", "{f}");
    let (s, b) = retitle(Value::Null).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(read(&gw, &guest).await["room"]["name"], "untitled");

    // The refusal of an empty brief names the field.
    let (s, e) = create(&gw, json!({"name": "x", "brief": ""})).await;
    assert_error(s, &e, 400, "INVALID_CONTENT");
    assert!(e["message"].as_str().unwrap().starts_with("brief "), "{e}");
}
