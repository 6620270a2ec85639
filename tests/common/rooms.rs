//! Room-protocol clients for the end-to-end tests (tests/rooms.rs,
//! tests/rooms_nodes.rs): real HTTP calls on a gateway's room links, and
//! the shared Bay conversation scenario both files run.

use super::*;
use reqwest::Method;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

pub const PUBLIC: &str = "http://rooms.example/sb";

/// A room's three links as returned, and the capabilities in them.
pub struct Links {
    pub owner: String,
    pub guest: String,
    pub reader: String,
}

impl Links {
    pub fn cap(url: &str) -> String {
        url.rsplit('/').next().unwrap().to_owned()
    }
}

pub fn opts() -> Opts {
    Opts::default().env("SWITCHBOARD_PUBLIC_URL", PUBLIC)
}

/// The path of a link URL on `gw` (links carry the public base URL).
pub fn on(gw: &Gateway, link: &str, rest: &str) -> String {
    gw.url(&format!("/r/{}{rest}", Links::cap(link)))
}

pub async fn call(gw: &Gateway, method: Method, url: &str, body: Option<Value>) -> (u16, Value) {
    let mut req = gw.http.request(method, url);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// `method` on `link` + `rest` (a path or query after the link), with
/// `body` as JSON when given.
pub async fn call_on(
    gw: &Gateway,
    method: Method,
    link: &str,
    rest: &str,
    body: Option<Value>,
) -> (u16, Value) {
    call(gw, method, &on(gw, link, rest), body).await
}

pub async fn create(gw: &Gateway, body: Value) -> (u16, Value) {
    call(gw, Method::POST, &gw.url("/rooms"), Some(body)).await
}

pub async fn room(gw: &Gateway, visibility: &str) -> Links {
    let (s, b) = create(gw, json!({"name": "lab", "visibility": visibility})).await;
    assert_eq!(s, 201, "{b}");
    Links {
        owner: b["links"]["owner"].as_str().unwrap().to_owned(),
        guest: b["links"]["guest"].as_str().unwrap().to_owned(),
        reader: b["links"]["reader"].as_str().unwrap().to_owned(),
    }
}

pub async fn read(gw: &Gateway, link: &str) -> Value {
    let res = gw
        .http
        .get(on(gw, link, ""))
        .header("Accept", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    res.json().await.unwrap()
}

pub async fn follow(gw: &Gateway, link: &str, cursor: &str, wait: u32, limit: u32) -> (u16, Value) {
    let url = on(
        gw,
        link,
        &format!("?cursor={cursor}&wait={wait}&limit={limit}"),
    );
    call(gw, Method::GET, &url, None).await
}

pub async fn reply(
    gw: &Gateway,
    link: &str,
    author: &str,
    body: &str,
    client_id: &str,
) -> (u16, Value) {
    let b = json!({"author": author, "body": body, "client_id": client_id});
    call(gw, Method::POST, &on(gw, link, ""), Some(b)).await
}

pub async fn said(gw: &Gateway, link: &str, author: &str, body: &str) -> String {
    let (s, m) = reply(gw, link, author, body, &format!("c-{body}")).await;
    assert_eq!(s, 201, "{m}");
    m["id"].as_str().unwrap().to_owned()
}

pub fn ids(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

pub async fn share(gw: &Gateway, bay: &str, cid: &str, role: &str) -> String {
    let (s, b) = gw
        .admin(
            Method::POST,
            &format!("/bays/{bay}/conversations/{cid}/links"),
            Some(json!({"role": role})),
        )
        .await;
    assert_eq!(s, 201, "{b}");
    b["url"].as_str().unwrap().to_owned()
}

/// The events `token` receives over `/updates` until one matches.
pub async fn update_matching(
    gw: &Gateway,
    token: &str,
    from: String,
    want: impl Fn(&Value) -> bool,
) -> Value {
    let mut cursor = Some(from);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let (s, b) = gw.updates(token, cursor.as_deref(), "2").await;
        assert_eq!(s, 200, "{b}");
        for e in b["events"].as_array().into_iter().flatten() {
            if want(e) {
                return e.clone();
            }
        }
        cursor = b["cursor"].as_str().map(str::to_owned);
    }
    panic!("no matching event");
}

/// A Bay GROUP shared by link, across `a` (link side) and `b` (members).
pub async fn shared_conversation_across(a: &Gateway, b: &Gateway) {
    let w = World::create(a, "bay1").await;
    let guest = share(a, "bay1", "group", "guest").await;
    let reader = share(a, "bay1", "group", "reader").await;
    assert!(guest.starts_with(&format!("{PUBLIC}/r/")));
    let (s, e) = a
        .admin(
            Method::POST,
            "/bays/bay1/conversations/dm/links",
            Some(json!({"role": "guest"})),
        )
        .await;
    assert_error(s, &e, 400, "INVALID_REQUEST");
    let (s, e) = a
        .admin(
            Method::POST,
            "/bays/bay1/conversations/group/links",
            Some(json!({"role": "owner"})),
        )
        .await;
    assert_error(s, &e, 400, "INVALID_REQUEST");

    // A member's post shows on the link under the member's name.
    let (s, _) = b.post_message(&w.ana, "group", "hello from the bay").await;
    assert_eq!(s, 201);
    let r = read(a, &reader).await;
    assert_eq!(r["room"]["role"], "reader");
    let last = r["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["author"], "Ana");
    assert_eq!(last["source"], "bay");
    let cursor = r["cursor"].as_str().unwrap().to_owned();

    // A link post mentioning an agent reaches it, routed like a human's.
    let start = |t: String| async move {
        let (s, f) = b.updates(&t, None, "1").await;
        assert_eq!(s, 200, "{f}");
        f["cursor"].as_str().unwrap().to_owned()
    };
    let (rex_from, ana_from) = (start(w.rex.clone()).await, start(w.ana.clone()).await);
    let (s, m) = reply(a, &guest, "Visitor", "@Rex can you look?", "v1").await;
    assert_eq!(s, 201, "{m}");
    let event = update_matching(b, &w.rex, rex_from, |e| {
        e["message"]["content"] == "@Rex can you look?"
    })
    .await;
    assert_eq!(event["message"]["sender"]["name"], "Visitor", "{event}");
    assert_eq!(event["message"]["senderType"], "USER", "{event}");
    assert_eq!(event["message"]["shouldRespond"], true, "{event}");
    let seen = update_matching(b, &w.ana, ana_from, |e| {
        e["message"]["content"] == "@Rex can you look?"
    })
    .await;
    assert_eq!(seen["message"]["shouldRespond"], false, "{seen}");

    // The member's answer reaches the link's FOLLOW.
    let (http, url) = (
        a.http.clone(),
        on(a, &reader, &format!("?cursor={cursor}&wait=15")),
    );
    let held = tokio::spawn(async move {
        http.get(url)
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    b.post_message(&w.rex, "group", "on it").await;
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut got = held.await.unwrap();
    let mut bodies: Vec<String> = Vec::new();
    loop {
        bodies.extend(
            got["upserts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["body"].as_str().unwrap().to_owned()),
        );
        if bodies.iter().any(|b| b == "on it") || Instant::now() > deadline {
            break;
        }
        got = follow(a, &reader, got["cursor"].as_str().unwrap(), 5, 100)
            .await
            .1;
    }
    assert!(bodies.contains(&"on it".to_owned()), "{bodies:?}");
}

const B64URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// base64url without padding (a room cursor's wire form).
pub fn b64url(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(B64URL[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// The text inside a base64url (no padding) string.
pub fn unb64url(text: &str) -> String {
    let mut bits = 0u32;
    let mut held = 0;
    let mut out = Vec::new();
    for c in text.bytes() {
        let v = B64URL.iter().position(|x| *x == c).unwrap() as u32;
        bits = bits << 6 | v;
        held += 6;
        if held >= 8 {
            held -= 8;
            out.push((bits >> held & 0xff) as u8);
        }
    }
    String::from_utf8(out).unwrap()
}

/// A room cursor's fields (`r1`, epoch, position, metadata revision).
pub fn cursor_parts(cursor: &str) -> Vec<String> {
    unb64url(cursor).split('.').map(str::to_owned).collect()
}

/// A room cursor with `position` and `metadata_revision` in `like`'s epoch.
pub fn forged_cursor(like: &str, position: &str, metadata_revision: &str) -> String {
    let parts = cursor_parts(like);
    b64url(format!("r1.{}.{position}.{metadata_revision}", parts[1]).as_bytes())
}
