//! Attachments end to end (protocol §10; docs/files.md): uploads sniffed
//! and capped, all-or-nothing sends, signed expiring URLs on every copy of
//! a message, token-free streamed downloads with ranges, the file library,
//! deleted messages' files, the sweep of unsent uploads, and the
//! S3-compatible backend against a real `s3s-fs`, two nodes included.
//!
//! Runs on both engines (`SWITCHBOARD_TEST_STORE=redis`); the S3 tests
//! start their own Redis and object store.

mod common;
#[path = "common/files.rs"]
mod files_common;

use common::*;
use files_common::*;
use serde_json::{json, Value};
use std::time::Duration;

const BAY: &str = "b1";
const PATIENCE: Duration = Duration::from_secs(10);

async fn world() -> (Gateway, World) {
    let gw = Gateway::spawn().await;
    let w = World::create(&gw, BAY).await;
    (gw, w)
}

async fn history(gw: &Gateway, token: &str, conv: &str) -> Vec<Value> {
    let (s, page) = gw
        .get(token, &format!("/conversations/{conv}/messages?limit=100"))
        .await;
    assert_eq!(s, 200, "{page}");
    page["messages"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn a_sent_file_comes_back_signed_and_downloads_without_a_token() {
    let (gw, w) = world().await;
    let png = png_bytes(3000);
    let pdf = pdf_bytes(5000);
    let (s, up) = upload(&gw, &w.rex, "shot.png", &png).await;
    assert_eq!(s, 201, "{up}");
    assert_eq!(up["mimeType"], "image/png");
    assert_eq!(up["size"], png.len());
    let png_id = up["attachmentId"].as_str().unwrap().to_owned();
    let pdf_id = uploaded(&gw, &w.rex, "Spëc sheet.pdf", &pdf).await;
    let (s, sent) = gw
        .post_json(
            &w.rex,
            "/conversations/group/messages",
            json!({"content": "two files", "attachments": [{"attachmentId": png_id}, {"attachmentId": pdf_id}]}),
        )
        .await;
    assert_eq!(s, 201, "{sent}");
    let meta = &sent["metadata"];
    let items = meta["attachments"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["attachmentId"], png_id.as_str());
    assert_eq!(items[0]["type"], "image");
    assert_eq!(items[0]["mimeType"], "image/png");
    assert_eq!(items[0]["sizeBytes"], png.len());
    assert_eq!(items[1]["type"], "file");
    assert_eq!(items[1]["mimeType"], "application/pdf");
    let mut keys: Vec<&str> = items[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "attachmentId",
            "attachmentUrl",
            "mimeType",
            "sizeBytes",
            "type"
        ]
    );
    // The legacy single-file mirror of the first.
    assert_eq!(meta["attachmentId"], png_id.as_str());
    assert_eq!(meta["attachmentUrl"], items[0]["attachmentUrl"]);

    // Another member reads it over REST: the bytes, with no token at all.
    let msgs = history(&gw, &w.ana, "group").await;
    let read = msgs.iter().find(|m| m["id"] == sent["id"]).unwrap();
    let url = read["metadata"]["attachments"][1]["attachmentUrl"]
        .as_str()
        .unwrap();
    let res = reqwest::get(url).await.unwrap();
    assert_eq!(res.status(), 200);
    let h = res.headers().clone();
    assert_eq!(h["content-type"], "application/pdf");
    assert_eq!(h["content-length"], pdf.len().to_string().as_str());
    let cd = h["content-disposition"].to_str().unwrap();
    assert!(cd.starts_with("attachment"), "{cd}");
    assert!(
        cd.contains("filename*=UTF-8''Sp%C3%ABc%20sheet.pdf"),
        "{cd}"
    );
    assert_eq!(h["accept-ranges"], "bytes");
    assert_eq!(res.bytes().await.unwrap().as_ref(), pdf.as_slice());

    // A range.
    let res = reqwest::Client::new()
        .get(url)
        .header("range", "bytes=10-19")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 206);
    assert_eq!(
        res.headers()["content-range"],
        format!("bytes 10-19/{}", pdf.len()).as_str()
    );
    assert_eq!(res.bytes().await.unwrap().as_ref(), &pdf[10..20]);
    let res = reqwest::Client::new()
        .get(url)
        .header("range", format!("bytes={}-", pdf.len() + 5))
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.headers()["content-range"],
        format!("bytes */{}", pdf.len()).as_str()
    );
    let status = res.status().as_u16();
    let body: Value = res.json().await.unwrap();
    assert_error(status, &body, 416, "RANGE_NOT_SATISFIABLE");
}

#[tokio::test]
async fn every_transport_and_replay_carries_fresh_signed_urls() {
    let (gw, w) = world().await;
    let (_, first) = gw.updates(&w.ana, None, "1").await;
    let cursor = first["cursor"].as_str().unwrap().to_owned();
    let mut ws = gw.ws_ready(&w.ana, Some(&cursor)).await;
    let id = uploaded(&gw, &w.rex, "a.png", &png_bytes(100)).await;
    let (s, sent) = gw
        .post_json(
            &w.rex,
            "/conversations/group/messages",
            json!({"content": "legacy", "attachmentId": id, "metadata": {"type": "file"}}),
        )
        .await;
    assert_eq!(s, 201, "{sent}");
    // The type is the server's, from the bytes: not the sender's claim.
    assert_eq!(sent["metadata"]["type"], "image");
    let mut seen = Vec::new();
    let event = 'found: {
        for _ in 0..20 {
            let (events, _) = ws.read_batch().await;
            if let Some(e) = events.iter().find(|e| e["message"]["id"] == sent["id"]) {
                break 'found e.clone();
            }
            seen.extend(events);
        }
        panic!("no event for the message in {seen:?}");
    };
    let ws_url = event["message"]["metadata"]["attachmentUrl"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(reqwest::get(&ws_url).await.unwrap().status(), 200);
    // The same entry replayed through /updates from the older cursor.
    let (s, page) = gw.updates(&w.ana, Some(&cursor), "1").await;
    assert_eq!(s, 200, "{page}");
    let replayed = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["message"]["id"] == sent["id"])
        .unwrap_or_else(|| panic!("not replayed: {page}"));
    let m = &replayed["message"]["metadata"];
    assert_eq!(m["attachments"][0]["attachmentId"], id.as_str());
    assert_eq!(m["attachments"][0]["type"], "image");
    assert!(m["attachments"][0].get("bay").is_none(), "{m}");
    let url = m["attachments"][0]["attachmentUrl"].as_str().unwrap();
    assert_eq!(reqwest::get(url).await.unwrap().status(), 200);
}

#[tokio::test]
async fn a_webhook_delivery_carries_signed_urls_too() {
    use std::sync::{Arc, Mutex};
    let got: Arc<Mutex<Vec<Value>>> = Arc::default();
    let sink = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: axum::body::Bytes| {
            let sink = sink.clone();
            async move {
                if let Ok(v) = serde_json::from_slice::<Value>(&body) {
                    sink.lock().unwrap().push(v);
                }
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let gw = Gateway::spawn_with(
        Opts::default()
            .env("SWITCHBOARD_WEBHOOKS__ALLOW_HTTP", "true")
            .env("SWITCHBOARD_WEBHOOKS__ALLOW_PRIVATE_DESTINATIONS", "true"),
    )
    .await;
    let w = World::create(&gw, BAY).await;
    let (s, b) = gw.post_json(&w.rex, "/webhook", json!({"url": hook})).await;
    assert_eq!(s, 200, "{b}");
    let id = uploaded(&gw, &w.ana, "plan.pdf", &pdf_bytes(2000)).await;
    let (s, sent) = gw
        .post_json(
            &w.ana,
            "/conversations/group/messages",
            json!({"content": "the plan", "attachments": [{"attachmentId": id}]}),
        )
        .await;
    assert_eq!(s, 201, "{sent}");
    let delivered = eventually(Duration::from_secs(20), || async {
        got.lock()
            .unwrap()
            .iter()
            .any(|b| b["message"]["id"] == sent["id"])
    })
    .await;
    assert!(delivered, "no delivery: {:?}", got.lock().unwrap());
    let body = got
        .lock()
        .unwrap()
        .iter()
        .find(|b| b["message"]["id"] == sent["id"])
        .cloned()
        .unwrap();
    let item = &body["message"]["metadata"]["attachments"][0];
    assert_eq!(item["attachmentId"], id.as_str());
    assert_eq!(item["mimeType"], "application/pdf");
    let url = item["attachmentUrl"].as_str().unwrap();
    assert_eq!(
        reqwest::get(url)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap()
            .len(),
        2000
    );
}

#[tokio::test]
async fn the_type_is_sniffed_from_the_bytes_and_only_allowed_types_are_kept() {
    let (gw, w) = world().await;
    let cases: [(&str, Vec<u8>, Option<&str>); 7] = [
        ("photo.txt", png_bytes(50), Some("image/png")),
        ("data.csv", b"a,b\n1,2\n".to_vec(), Some("text/csv")),
        (
            "notes.txt",
            "héllo\n".as_bytes().to_vec(),
            Some("text/plain"),
        ),
        (
            "a.gif",
            b"GIF89a\x01\x00\x01\x00\x00\x00\x00".to_vec(),
            Some("image/gif"),
        ),
        ("archive.zip", zip_bytes(), Some("application/zip")),
        (
            "tool.png",
            b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00".to_vec(),
            None,
        ),
        ("blob.pdf", vec![0u8, 1, 2, 3, 0, 0, 9], None),
    ];
    for (name, bytes, want) in cases {
        let (s, body) = upload(&gw, &w.rex, name, &bytes).await;
        match want {
            Some(mime) => {
                assert_eq!(s, 201, "{name}: {body}");
                assert_eq!(body["mimeType"], mime, "{name}");
            }
            None => assert_error(s, &body, 415, "UNSUPPORTED_FILE_TYPE"),
        }
    }
    // Not multipart, or no `file` part.
    let res = gw
        .http
        .post(gw.url("/api/agent-api/attachments"))
        .bearer_auth(&w.rex)
        .json(&json!({"file": "x"}))
        .send()
        .await
        .unwrap();
    // Not multipart: the body's type is wrong, not its framing.
    assert_eq!(res.status(), 415);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["code"], "UNSUPPORTED_MEDIA_TYPE", "{body}");
    let (s, body) = upload_field(&gw, &w.rex, "other", "a.txt", b"hi").await;
    assert_error(s, &body, 400, "INVALID_REQUEST");
    // No token: 401.
    let res = gw
        .http
        .post(gw.url("/api/agent-api/attachments"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
}

#[tokio::test]
async fn markup_and_scripts_are_plain_text_and_an_empty_file_is_refused() {
    let (gw, w) = world().await;
    let texts: [(&str, &[u8]); 6] = [
        ("b.txt", b"<b>bold</b> words\n"),
        ("p.txt", b"<p>a paragraph</p>\n"),
        ("a.txt", b"<a href=\"https://example.com\">a link</a>\n"),
        ("feed.xml", b"<?xml version=\"1.0\"?>\n<feed/>\n"),
        ("page.html", b"<html><body>hi</body></html>\n"),
        ("run.sh", b"#!/bin/sh\necho hi\n"),
    ];
    for (name, bytes) in texts {
        let (s, body) = upload(&gw, &w.rex, name, bytes).await;
        assert_eq!(s, 201, "{name}: {body}");
        assert_eq!(body["mimeType"], "text/plain", "{name}");
    }
    // Markup with a NUL byte is not text.
    let (s, body) = upload(&gw, &w.rex, "x.html", b"<html>\x00</html>").await;
    assert_error(s, &body, 415, "UNSUPPORTED_FILE_TYPE");
    // Empty: nothing to sniff, said plainly.
    let (s, body) = upload(&gw, &w.rex, "empty.txt", b"").await;
    assert_error(s, &body, 400, "INVALID_REQUEST");
    assert!(body.to_string().contains("empty"), "{body}");
}

#[tokio::test]
async fn head_of_a_signed_url_answers_the_gets_headers_without_a_body() {
    let (gw, w) = world().await;
    let pdf = pdf_bytes(4000);
    let id = uploaded(&gw, &w.rex, "spec.pdf", &pdf).await;
    let (s, sent) = gw
        .post_json(
            &w.rex,
            "/conversations/group/messages",
            json!({"content": "a file", "attachments": [{"attachmentId": id}]}),
        )
        .await;
    assert_eq!(s, 201, "{sent}");
    let url = sent["metadata"]["attachmentUrl"].as_str().unwrap();
    let client = reqwest::Client::new();
    let res = client.head(url).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let h = res.headers().clone();
    assert_eq!(h["content-type"], "application/pdf");
    assert_eq!(h["content-length"], pdf.len().to_string().as_str());
    assert!(h["content-disposition"]
        .to_str()
        .unwrap()
        .starts_with("attachment"));
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert!(res.bytes().await.unwrap().is_empty());
    // Checked like the GET: an altered signature is refused.
    let bad = format!("{}0", url);
    let res = client.head(&bad).send().await.unwrap();
    assert_eq!(res.status(), 403);
}

#[tokio::test]
async fn uploads_are_capped_per_bay_and_at_the_hard_cap() {
    let gw = Gateway::spawn_with(
        Opts::default()
            .env("SWITCHBOARD_FILES__MAX_BYTES", "20000")
            .env("SWITCHBOARD_FILES__BAY_MAX_BYTES__SMALL", "1000"),
    )
    .await;
    let w = World::create(&gw, BAY).await;
    gw.create_bay("small").await;
    let tiny = gw.create_participant("small", "t", "agent", "Tiny").await;
    assert_eq!(
        upload(&gw, &w.rex, "ok.txt", &text_bytes(20000)).await.0,
        201
    );
    let (s, body) = upload(&gw, &w.rex, "big.txt", &text_bytes(20001)).await;
    assert_error(s, &body, 413, "FILE_TOO_LARGE");
    assert_eq!(upload(&gw, &tiny, "ok.txt", &text_bytes(1000)).await.0, 201);
    let (s, body) = upload(&gw, &tiny, "big.txt", &text_bytes(1001)).await;
    assert_error(s, &body, 413, "FILE_TOO_LARGE");
    // Past the sniff window too (the cap is counted while streaming).
    let (s, body) = upload(&gw, &w.rex, "big.png", &png_bytes(200_000)).await;
    assert_error(s, &body, 413, "FILE_TOO_LARGE");
}

#[tokio::test]
async fn a_25_mb_file_goes_up_and_down_and_one_byte_more_is_refused() {
    let (gw, w) = world().await;
    let big = png_bytes(25 * 1024 * 1024);
    let id = uploaded(&gw, &w.rex, "big.png", &big).await;
    let (s, sent) = gw
        .post_json(
            &w.rex,
            "/conversations/group/messages",
            json!({"content": "big", "attachments": [{"attachmentId": id}]}),
        )
        .await;
    assert_eq!(s, 201, "{sent}");
    let url = sent["metadata"]["attachmentUrl"].as_str().unwrap();
    let got = reqwest::get(url).await.unwrap().bytes().await.unwrap();
    assert!(
        got.as_ref() == big.as_slice(),
        "the bytes came back changed"
    );
    let (s, body) = upload(&gw, &w.rex, "bigger.png", &png_bytes(25 * 1024 * 1024 + 1)).await;
    assert_error(s, &body, 413, "FILE_TOO_LARGE");
}

#[tokio::test]
async fn linking_is_all_or_nothing_and_never_says_which_id() {
    let (gw, w) = world().await;
    gw.create_bay("other").await;
    let stranger = gw.create_participant("other", "x", "agent", "X").await;
    let mine = uploaded(&gw, &w.rex, "a.png", &png_bytes(10)).await;
    let theirs = uploaded(&gw, &w.scout, "b.png", &png_bytes(10)).await;
    let elsewhere = uploaded(&gw, &stranger, "c.png", &png_bytes(10)).await;
    let before = history(&gw, &w.ana, "group").await.len();
    for (what, bad) in [
        ("unknown", "att_00000000000000000000000000"),
        ("another uploader's", theirs.as_str()),
        ("another bay's", elsewhere.as_str()),
    ] {
        let (s, body) = gw
            .post_json(&w.rex, "/conversations/group/messages",
                json!({"content": "x", "attachments": [{"attachmentId": mine}, {"attachmentId": bad}]}))
            .await;
        assert_error(s, &body, 409, "ATTACHMENT_CONFLICT");
        let message = body["message"].as_str().unwrap();
        assert!(
            !message.contains(bad) && !message.contains(&mine),
            "{what}: {message}"
        );
    }
    assert_eq!(
        history(&gw, &w.ana, "group").await.len(),
        before,
        "no message created"
    );
    // The good file was not held by the refused sends.
    let (s, sent) = gw
        .post_json(
            &w.rex,
            "/conversations/group/messages",
            json!({"content": "x", "attachments": [{"attachmentId": mine}]}),
        )
        .await;
    assert_eq!(s, 201, "{sent}");
    // Already attached.
    let (s, body) = gw
        .post_json(
            &w.rex,
            "/conversations/dm/messages",
            json!({"content": "again", "attachmentId": mine}),
        )
        .await;
    assert_error(s, &body, 409, "ATTACHMENT_CONFLICT");
    // Shapes.
    let fresh = uploaded(&gw, &w.rex, "d.png", &png_bytes(10)).await;
    let eleven: Vec<Value> = (0..11).map(|_| json!({"attachmentId": fresh})).collect();
    for (body, code) in [
        (
            json!({"content": "x", "attachments": [{"attachmentId": fresh}], "attachmentId": fresh}),
            "INVALID_REQUEST",
        ),
        (
            json!({"content": "x", "attachments": []}),
            "INVALID_REQUEST",
        ),
        (
            json!({"content": "x", "attachments": eleven}),
            "INVALID_REQUEST",
        ),
        (
            json!({"content": "x", "attachments": [{"id": fresh}]}),
            "INVALID_REQUEST",
        ),
        (
            json!({"content": "x", "stream": true, "attachments": [{"attachmentId": fresh}]}),
            "INVALID_REQUEST",
        ),
        (
            json!({"content": "x", "card": {"type": "card.calendar", "payload": {"title": "Sync"}},
            "attachments": [{"attachmentId": fresh}]}),
            "CARD_WITH_ATTACHMENTS",
        ),
    ] {
        let (s, b) = gw
            .post_json(&w.rex, "/conversations/group/messages", body.clone())
            .await;
        assert_error(s, &b, 400, code);
    }
    // A non-member's send is 404 as always, and frees the file.
    let (s, _) = gw
        .post_json(
            &w.rex,
            "/conversations/nope/messages",
            json!({"content": "x", "attachments": [{"attachmentId": fresh}]}),
        )
        .await;
    assert_eq!(s, 404);
    let (s, _) = gw
        .post_json(
            &w.rex,
            "/conversations/group/messages",
            json!({"content": "x", "attachments": [{"attachmentId": fresh}]}),
        )
        .await;
    assert_eq!(s, 201);
}

#[tokio::test]
async fn a_retried_idempotent_send_with_files_answers_the_first_message() {
    let (gw, w) = world().await;
    let id = uploaded(&gw, &w.rex, "a.png", &png_bytes(10)).await;
    let send = || {
        gw.http
            .post(gw.url("/api/agent-api/conversations/group/messages"))
            .bearer_auth(&w.rex)
            .header("Idempotency-Key", "k-1")
            .json(&json!({"content": "once", "attachments": [{"attachmentId": id}]}))
            .send()
    };
    let first = send().await.unwrap();
    assert_eq!(first.status(), 201);
    let first: Value = first.json().await.unwrap();
    let again = send().await.unwrap();
    assert_eq!(again.status(), 201);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["id"], first["id"]);
}

#[tokio::test]
async fn altered_or_expired_urls_are_refused() {
    let gw = Gateway::spawn_with(Opts::default().env("SWITCHBOARD_FILES__URL_TTL", "2s")).await;
    let w = World::create(&gw, BAY).await;
    let id = uploaded(&gw, &w.rex, "a.png", &png_bytes(10)).await;
    let (_, sent) = gw
        .post_json(
            &w.rex,
            "/conversations/group/messages",
            json!({"content": "x", "attachmentId": id}),
        )
        .await;
    let url = sent["metadata"]["attachmentUrl"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(reqwest::get(&url).await.unwrap().status(), 200);
    let flip = |url: &str, from: &str, to: &str| url.replacen(from, to, 1);
    let sig_at = url.find("sig=").unwrap() + 4;
    let mut altered = url.clone();
    let c = if &url[sig_at..sig_at + 1] == "0" {
        "1"
    } else {
        "0"
    };
    altered.replace_range(sig_at..sig_at + 1, c);
    let later_exp = {
        let exp: u64 = url
            .split("exp=")
            .nth(1)
            .unwrap()
            .split('&')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        flip(&url, &format!("exp={exp}"), &format!("exp={}", exp + 3600))
    };
    for bad in [
        altered,
        later_exp,
        flip(&url, "id=att_", "id=att_0"),
        url.split("&sig=").next().unwrap().to_owned(),
        // A field given twice is an altered URL too, not a bad query.
        format!("{url}&bay=other"),
    ] {
        let res = reqwest::get(&bad).await.unwrap();
        let status = res.status().as_u16();
        let body: Value = res.json().await.unwrap();
        assert_error(status, &body, 403, "INVALID_SIGNATURE");
    }
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let res = reqwest::get(&url).await.unwrap();
    let status = res.status().as_u16();
    let body: Value = res.json().await.unwrap();
    assert_error(status, &body, 403, "INVALID_SIGNATURE");
    // A re-read mints a fresh one.
    let msgs = history(&gw, &w.ana, "group").await;
    let fresh = msgs.iter().find(|m| m["id"] == sent["id"]).unwrap()["metadata"]["attachmentUrl"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(fresh, url);
    assert_eq!(reqwest::get(&fresh).await.unwrap().status(), 200);
}

#[tokio::test]
async fn a_deleted_messages_files_are_gone() {
    let (gw, w) = world().await;
    let id = uploaded(&gw, &w.rex, "a.png", &png_bytes(10)).await;
    let (_, sent) = gw
        .post_json(
            &w.rex,
            "/conversations/group/messages",
            json!({"content": "x", "attachments": [{"attachmentId": id}]}),
        )
        .await;
    let url = sent["metadata"]["attachmentUrl"]
        .as_str()
        .unwrap()
        .to_owned();
    let mid = sent["id"].as_str().unwrap();
    let res = gw
        .http
        .delete(gw.url(&format!(
            "/api/agent-api/conversations/group/messages/{mid}"
        )))
        .bearer_auth(&w.rex)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
    let res = reqwest::get(&url).await.unwrap();
    let status = res.status().as_u16();
    let body: Value = res.json().await.unwrap();
    assert_error(status, &body, 410, "ATTACHMENT_GONE");
    let (s, lib) = gw.get(&w.ana, "/conversations/group/attachments").await;
    assert_eq!(s, 200);
    assert_eq!(lib["totals"], json!({"files": 0, "bytes": 0}));
    let (s, _) = gw
        .get(
            &w.ana,
            &format!("/conversations/group/attachments/{id}/link"),
        )
        .await;
    assert_eq!(s, 404);
}

#[tokio::test]
async fn the_library_lists_sent_files_newest_first_with_totals_and_no_urls() {
    let (gw, w) = world().await;
    let mut ids = Vec::new();
    for (n, size) in [100usize, 200, 300].into_iter().enumerate() {
        let id = uploaded(&gw, &w.rex, &format!("f{n}.png"), &png_bytes(size)).await;
        let (s, _) = gw
            .post_json(
                &w.rex,
                "/conversations/group/messages",
                json!({"content": format!("file {n}"), "attachments": [{"attachmentId": id}]}),
            )
            .await;
        assert_eq!(s, 201);
        ids.push(id);
    }
    uploaded(&gw, &w.rex, "unsent.png", &png_bytes(999)).await;
    let (s, first) = gw
        .get(&w.ana, "/conversations/group/attachments?limit=2")
        .await;
    assert_eq!(s, 200, "{first}");
    assert_eq!(first["totals"], json!({"files": 3, "bytes": 600}));
    let listed: Vec<&str> = first["attachments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["attachmentId"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [ids[2].as_str(), ids[1].as_str()]);
    let f = &first["attachments"][0];
    assert_eq!(f["name"], "f2.png");
    assert_eq!(f["type"], "image");
    assert_eq!(f["uploadedBy"], "rex");
    assert_eq!(f["sizeBytes"], 300);
    assert!(
        !first.to_string().contains("signed-content"),
        "no urls: {first}"
    );
    let cursor = first["nextCursor"].as_str().unwrap();
    let (_, next) = gw
        .get(
            &w.ana,
            &format!("/conversations/group/attachments?limit=2&cursor={cursor}"),
        )
        .await;
    assert!(next.get("totals").is_none(), "{next}");
    assert_eq!(next["attachments"].as_array().unwrap().len(), 1);
    assert_eq!(next["attachments"][0]["attachmentId"], ids[0].as_str());
    assert!(next["nextCursor"].is_null());
    // One fresh link.
    let (s, link) = gw
        .get(
            &w.ana,
            &format!("/conversations/group/attachments/{}/link", ids[1]),
        )
        .await;
    assert_eq!(s, 200, "{link}");
    assert_eq!(link["name"], "f1.png");
    assert_eq!(link["mimeType"], "image/png");
    let url = link["attachmentUrl"].as_str().unwrap();
    let got = reqwest::get(url).await.unwrap().bytes().await.unwrap();
    assert_eq!(got.as_ref(), png_bytes(200).as_slice());
    // Not in this conversation, or not a member.
    let (s, _) = gw
        .get(
            &w.ana,
            &format!("/conversations/dm/attachments/{}/link", ids[1]),
        )
        .await;
    assert_eq!(s, 404);
    let (s, body) = gw.get(&w.ben, "/conversations/dm/attachments").await;
    assert_error(s, &body, 403, "NOT_PARTICIPANT");
    let (s, body) = gw
        .get(
            &w.ben,
            &format!("/conversations/dm/attachments/{}/link", ids[1]),
        )
        .await;
    assert_error(s, &body, 403, "NOT_PARTICIPANT");
    let (s, body) = gw
        .get(&w.ana, "/conversations/group/attachments?cursor=zz")
        .await;
    assert_error(s, &body, 400, "INVALID_CURSOR");
    let (s, body) = gw
        .get(&w.ana, "/conversations/group/attachments?limit=0")
        .await;
    assert_error(s, &body, 400, "INVALID_REQUEST");
}

#[tokio::test]
async fn an_upload_never_sent_is_swept_after_its_ttl() {
    let gw = Gateway::spawn_with(
        Opts::default()
            .env("SWITCHBOARD_FILES__UNLINKED_TTL", "1s")
            .env("SWITCHBOARD_FILES__SWEEP_INTERVAL", "200ms"),
    )
    .await;
    let w = World::create(&gw, BAY).await;
    let id = uploaded(&gw, &w.rex, "a.png", &png_bytes(10)).await;
    let swept = eventually(PATIENCE, || async {
        let (s, _) = gw
            .post_json(
                &w.rex,
                "/conversations/dm/messages",
                json!({"content": "late", "attachmentId": id}),
            )
            .await;
        s == 409
    })
    .await;
    assert!(swept, "the upload was never swept");
}

// ---------------------------------------------------------------- object storage

#[tokio::test]
async fn the_s3_backend_stores_and_serves_files() {
    let Some(s3) = S3Server::start() else { return };
    let gw = Gateway::spawn_with(s3.opts(Opts::default())).await;
    let w = World::create(&gw, BAY).await;
    let bytes = pdf_bytes(7 * 1024 * 1024);
    let id = uploaded(&gw, &w.rex, "big.pdf", &bytes).await;
    assert!(s3.holds(&format!("{BAY}/{id}")), "not in the bucket");
    let (s, sent) = gw
        .post_json(
            &w.rex,
            "/conversations/group/messages",
            json!({"content": "x", "attachments": [{"attachmentId": id}]}),
        )
        .await;
    assert_eq!(s, 201, "{sent}");
    let url = sent["metadata"]["attachmentUrl"].as_str().unwrap();
    let got = reqwest::get(url).await.unwrap().bytes().await.unwrap();
    assert!(got.as_ref() == bytes.as_slice());
    let res = reqwest::Client::new()
        .get(url)
        .header("range", "bytes=0-3")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 206);
    assert_eq!(res.bytes().await.unwrap().as_ref(), b"%PDF");
    // Deleting the message removes the object.
    let mid = sent["id"].as_str().unwrap();
    gw.http
        .delete(gw.url(&format!(
            "/api/agent-api/conversations/group/messages/{mid}"
        )))
        .bearer_auth(&w.rex)
        .send()
        .await
        .unwrap();
    assert!(!s3.holds(&format!("{BAY}/{id}")), "still in the bucket");
}

#[tokio::test]
async fn a_file_uploaded_on_one_node_downloads_through_a_url_minted_on_another() {
    let Some(s3) = S3Server::start() else { return };
    let redis = RedisServer::start(false);
    let key = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    let opts = || {
        s3.opts(Opts::default().redis(&redis.url()))
            .env("SWITCHBOARD_WEBHOOKS__SECRET_KEY", key)
    };
    let a = Gateway::spawn_with(opts()).await;
    let b = Gateway::spawn_with(opts()).await;
    let w = World::create(&a, BAY).await;
    let bytes = png_bytes(40_000);
    let id = uploaded(&a, &w.rex, "pic.png", &bytes).await;
    let (s, _) = a
        .post_json(
            &w.rex,
            "/conversations/group/messages",
            json!({"content": "x", "attachments": [{"attachmentId": id}]}),
        )
        .await;
    assert_eq!(s, 201);
    let msgs = history(&b, &w.ana, "group").await;
    let url = msgs.last().unwrap()["metadata"]["attachmentUrl"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(url.contains(&b.addr), "minted by b: {url}");
    let got = reqwest::get(&url).await.unwrap().bytes().await.unwrap();
    assert!(got.as_ref() == bytes.as_slice());
    // The same signature holds on node a: nothing is kept per URL.
    let on_a = url.replace(&b.addr, &a.addr);
    let got = reqwest::get(&on_a).await.unwrap().bytes().await.unwrap();
    assert!(got.as_ref() == bytes.as_slice());
    // And b's library lists what a stored.
    let (_, lib) = b.get(&w.ana, "/conversations/group/attachments").await;
    assert_eq!(lib["totals"]["files"], 1);
}
