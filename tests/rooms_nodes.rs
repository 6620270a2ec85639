//! Rooms by link on two gateways sharing one Redis: a FOLLOW on one node
//! sees posts, retries and pins made on the other, a shared Bay
//! conversation talks across both protocols and nodes, and an agent that
//! follows the protocol text step by step converges on the same room state
//! as a second reader while one node is killed.

mod common;

use common::rooms::*;
use common::*;
use reqwest::Method;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

#[tokio::test]
async fn two_nodes_on_one_redis_share_rooms() {
    let redis = RedisServer::start(false);
    let a = Gateway::spawn_with(opts().redis(&redis.url())).await;
    let b = Gateway::spawn_with(opts().redis(&redis.url())).await;
    let links = room(&a, "public").await;
    let r = read(&b, &links.reader).await;
    let cursor = r["cursor"].as_str().unwrap().to_owned();
    // FOLLOW on B, post on A.
    let (http, url) = (
        b.http.clone(),
        on(&b, &links.reader, &format!("?cursor={cursor}&wait=20")),
    );
    let held = tokio::spawn(async move {
        let started = Instant::now();
        let v = http
            .get(url)
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap();
        (started.elapsed(), v)
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let id = said(&a, &links.guest, "Orbit", "across nodes").await;
    let (took, got) = held.await.unwrap();
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert_eq!(ids(&got["upserts"]), vec![id.clone()]);
    // A retry on B of A's send is the same message.
    let (s, again) = reply(&b, &links.guest, "Orbit", "across nodes", "c-across nodes").await;
    assert_eq!(s, 200, "{again}");
    assert_eq!(again["id"], json!(id));
    // A pin on A reaches a FOLLOW on B.
    call_on(
        &a,
        Method::POST,
        &links.guest,
        "/pins",
        Some(json!({"message_id": id})),
    )
    .await;
    let (_, f) = follow(&b, &links.reader, got["cursor"].as_str().unwrap(), 5, 100).await;
    assert_eq!(f["brief"]["id"], json!(id), "{f}");

    shared_conversation_across(&a, &b).await;
}

/// A reader that does what the protocol text says: READ (and history
/// back to the start), FOLLOW applying upserts by id and dropping
/// tombstones, REPLY with a client_id retried unchanged after an unclear
/// result, REPEAT. It fails over to the next node when one stops
/// answering, keeping its cursor.
struct ScriptedAgent {
    http: reqwest::Client,
    nodes: Vec<String>,
    at: usize,
    cap: String,
    state: std::collections::BTreeMap<String, Value>,
    cursor: String,
    replied: std::collections::BTreeSet<String>,
}

impl ScriptedAgent {
    fn url(&self, rest: &str) -> String {
        format!("{}/r/{}{rest}", self.nodes[self.at], self.cap)
    }

    /// One call, failing over while a node does not answer.
    async fn call(&mut self, method: Method, rest: &str, body: Option<Value>) -> (u16, Value) {
        for _ in 0..20 {
            let mut req = self.http.request(method.clone(), self.url(rest));
            if let Some(b) = &body {
                req = req.json(b);
            }
            match req.send().await {
                Ok(res) => {
                    let s = res.status().as_u16();
                    return (s, res.json().await.unwrap_or(Value::Null));
                }
                Err(_) => {
                    self.at = (self.at + 1) % self.nodes.len();
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        panic!("no node answers");
    }

    /// Step 1: READ, then history back to the first message.
    async fn read(&mut self) {
        let (s, r) = self.call(Method::GET, "?format=json", None).await;
        assert_eq!(s, 200, "{r}");
        self.state.clear();
        let mut older = r["has_older"].as_bool().unwrap();
        let mut page = r["messages"].as_array().unwrap().clone();
        loop {
            let first = page.first().map(|m| m["id"].as_str().unwrap().to_owned());
            for m in page.drain(..) {
                self.state.insert(m["id"].as_str().unwrap().to_owned(), m);
            }
            let (true, Some(first)) = (older, first) else {
                break;
            };
            let (s, h) = self
                .call(Method::GET, &format!("?before={first}&limit=100"), None)
                .await;
            assert_eq!(s, 200, "{h}");
            older = h["has_older"].as_bool().unwrap();
            page = h["messages"].as_array().unwrap().clone();
        }
        self.cursor = r["cursor"].as_str().unwrap().to_owned();
    }

    /// Step 3 for every message of the human's not answered yet.
    async fn reply_to_new(&mut self) {
        let todo: Vec<(String, String)> = self
            .state
            .values()
            .filter(|m| m["author"] == "Human" && !self.replied.contains(m["id"].as_str().unwrap()))
            .map(|m| {
                (
                    m["id"].as_str().unwrap().to_owned(),
                    m["body"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        for (id, body) in todo {
            let payload = json!({"author": "Agent", "body": format!("re: {body}"), "client_id": format!("re-{id}"), "reply_to": id});
            loop {
                let (s, m) = self.call(Method::POST, "", Some(payload.clone())).await;
                match s {
                    200 | 201 | 410 => break,
                    // The answered message was removed meanwhile.
                    400 if m["code"] == "INVALID_REPLY_TARGET" => break,
                    429 | 503 => tokio::time::sleep(Duration::from_millis(200)).await,
                    _ => panic!("reply answered {s}: {m}"),
                }
            }
            self.replied.insert(id);
        }
    }

    /// Steps 2 and 4: one FOLLOW, applied; whether it changed anything.
    async fn follow(&mut self, wait: u32) -> bool {
        let rest = format!("?cursor={}&wait={wait}&limit=100", self.cursor);
        let (s, f) = self.call(Method::GET, &rest, None).await;
        match s {
            200 => {}
            409 => {
                self.read().await;
                return true;
            }
            429 | 503 => return true,
            _ => panic!("follow answered {s}: {f}"),
        }
        let mut changed = false;
        for m in f["upserts"].as_array().unwrap() {
            self.state
                .insert(m["id"].as_str().unwrap().to_owned(), m.clone());
            changed = true;
        }
        for t in f["tombstones"].as_array().unwrap() {
            self.state.remove(t.as_str().unwrap());
            changed = true;
        }
        self.cursor = f["cursor"].as_str().unwrap().to_owned();
        changed || f["has_more"] == true
    }
}

/// What two readers must agree on: each message's author, body and reactions.
fn essence(
    state: &std::collections::BTreeMap<String, Value>,
) -> Vec<(String, Value, Value, Value)> {
    state
        .iter()
        .map(|(id, m)| {
            (
                id.clone(),
                m["author"].clone(),
                m["body"].clone(),
                m["reactions"].clone(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_scripted_agent_converges_with_a_reader_through_a_node_kill() {
    let redis = RedisServer::start(false);
    let mut a = Gateway::spawn_with(opts().redis(&redis.url())).await;
    let b = Gateway::spawn_with(opts().redis(&redis.url())).await;
    let links = room(&b, "private").await;
    let mut agent = ScriptedAgent {
        http: test_http(),
        nodes: vec![format!("http://{}", a.addr), format!("http://{}", b.addr)],
        at: 0,
        cap: Links::cap(&links.guest),
        state: Default::default(),
        cursor: String::new(),
        replied: Default::default(),
    };
    agent.read().await;
    let mut posted = Vec::new();
    for i in 0..12 {
        posted.push(said(&b, &links.guest, "Human", &format!("task {i}")).await);
        if i == 5 {
            a.kill_now();
        }
        if i % 4 == 1 {
            let r = json!({"message_id": posted[i / 2], "author": "Watcher", "emoji": "👀"});
            call_on(&b, Method::POST, &links.guest, "/reactions", Some(r)).await;
        }
        if i == 8 {
            call_on(
                &b,
                Method::DELETE,
                &links.owner,
                &format!("/messages/{}", posted[3]),
                None,
            )
            .await;
        }
        agent.follow(1).await;
        agent.reply_to_new().await;
    }
    // REPEAT until a FOLLOW finds nothing left to do.
    let deadline = Instant::now() + Duration::from_secs(30);
    while agent.follow(1).await
        || agent
            .state
            .values()
            .any(|m| m["author"] == "Human" && !agent.replied.contains(m["id"].as_str().unwrap()))
    {
        agent.reply_to_new().await;
        assert!(Instant::now() < deadline, "the agent did not settle");
    }
    assert_eq!(agent.at, 1, "the agent failed over to the surviving node");

    let mut reader = ScriptedAgent {
        http: test_http(),
        nodes: vec![format!("http://{}", b.addr)],
        at: 0,
        cap: Links::cap(&links.reader),
        state: Default::default(),
        cursor: String::new(),
        replied: Default::default(),
    };
    reader.read().await;
    assert_eq!(essence(&agent.state), essence(&reader.state));
    // One reply per task still there, none twice, none for the removed one.
    let replies: Vec<&Value> = reader
        .state
        .values()
        .filter(|m| m["author"] == "Agent")
        .collect();
    assert_eq!(replies.len(), 12, "{replies:?}");
    assert!(!reader.state.contains_key(&posted[3]));
}
