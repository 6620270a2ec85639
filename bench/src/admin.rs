//! A small client of Switchboard's admin API, its `/metrics` and its
//! process (`/proc`), for the long-running scenarios (`churn`, `soak`):
//! provisioning Bays, participants and conversations, and sampling what a
//! node holds.

use crate::procstat;
use crate::target::anyhow_lite::{bail, Context, Result};
use serde_json::{json, Value};

/// The admin token `bench/peers/switchboard.sh` starts the gateway with.
pub use crate::target::ADMIN_TOKEN;

/// One gateway node, reached over HTTP.
#[derive(Clone)]
pub struct Node {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// Client for admin calls, agent calls and scrapes.
    pub http: reqwest::Client,
}

impl Node {
    /// A node at `addr`; the client keeps up to `pool` idle connections.
    pub fn new(addr: &str, pool: usize) -> Result<Node> {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(pool)
            // Below actix-web's 5 s keep-alive (see target.rs).
            .pool_idle_timeout(std::time::Duration::from_secs(3))
            .timeout(std::time::Duration::from_secs(60))
            .build()
            .context("http client")?;
        Ok(Node {
            addr: addr.to_owned(),
            http,
        })
    }

    /// `http://ADDR` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// POSTs `body` to the admin API (`/api/admin` + `path`); the answer
    /// body on a 2xx.
    ///
    /// # Errors
    /// A transport error, or any other status (with its body).
    pub async fn admin_post(&self, path: &str, body: Value) -> Result<Value> {
        let res = self
            .http
            .post(self.url(&format!("/api/admin{path}")))
            .bearer_auth(ADMIN_TOKEN)
            .json(&body)
            .send()
            .await
            .context(format!("POST /api/admin{path}"))?;
        let status = res.status();
        let text = res.text().await.unwrap_or_default();
        if !status.is_success() {
            bail!("POST /api/admin{path}: {status} {text}");
        }
        serde_json::from_str(&text).context("admin answer")
    }

    /// Creates Bay `id`.
    ///
    /// # Errors
    /// As [`Node::admin_post`].
    pub async fn create_bay(&self, id: &str) -> Result<()> {
        self.admin_post("/bays", json!({"id": id, "name": id}))
            .await
            .map(drop)
    }

    /// Creates participant `id` (`kind` = `user` | `agent`) in `bay`;
    /// returns its token.
    ///
    /// # Errors
    /// As [`Node::admin_post`], or an answer without a token.
    pub async fn create_participant(&self, bay: &str, id: &str, kind: &str) -> Result<String> {
        let b = self
            .admin_post(
                &format!("/bays/{bay}/participants"),
                json!({"id": id, "kind": kind, "name": id}),
            )
            .await?;
        b["token"]
            .as_str()
            .map(str::to_owned)
            .context("participant answer without a token")
    }

    /// Creates conversation `id` of `kind` in `bay` with `members`.
    ///
    /// # Errors
    /// As [`Node::admin_post`].
    pub async fn create_conversation(
        &self,
        bay: &str,
        id: &str,
        kind: &str,
        members: &[&str],
    ) -> Result<()> {
        self.admin_post(
            &format!("/bays/{bay}/conversations"),
            json!({"id": id, "type": kind, "members": members}),
        )
        .await
        .map(drop)
    }

    /// Posts `content` to `conversation` as `token`; the message id.
    ///
    /// # Errors
    /// A transport error or a non-201 answer.
    pub async fn post_message(
        &self,
        token: &str,
        conversation: &str,
        content: &str,
    ) -> Result<String> {
        let res = self
            .http
            .post(self.url(&format!(
                "/api/agent-api/conversations/{conversation}/messages"
            )))
            .bearer_auth(token)
            .json(&json!({ "content": content }))
            .send()
            .await
            .context("post")?;
        let status = res.status();
        let text = res.text().await.unwrap_or_default();
        if status.as_u16() != 201 {
            bail!("post: {status} {text}");
        }
        let v: Value = serde_json::from_str(&text).context("post answer")?;
        v["id"]
            .as_str()
            .map(str::to_owned)
            .context("post answer without an id")
    }

    /// `GET` an agent API `path` as `token`; the status.
    ///
    /// # Errors
    /// A transport error.
    pub async fn agent_get(&self, token: &str, path: &str) -> Result<u16> {
        let res = self
            .http
            .get(self.url(&format!("/api/agent-api{path}")))
            .bearer_auth(token)
            .send()
            .await
            .context(format!("GET {path}"))?;
        let status = res.status().as_u16();
        let _ = res.bytes().await;
        Ok(status)
    }

    /// The `/metrics` text.
    ///
    /// # Errors
    /// A transport error.
    pub async fn metrics(&self) -> Result<String> {
        self.http
            .get(self.url("/metrics"))
            .send()
            .await
            .context("GET /metrics")?
            .text()
            .await
            .context("metrics body")
    }
}

/// The value of the sample `series` (a metric name with its labels
/// exactly as exposed, e.g. `switchboard_actors{kind="feed"}`) in a
/// `/metrics` text; 0 when absent.
pub fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            (name == series).then(|| value.parse().ok()).flatten()
        })
        .unwrap_or(0.0)
}

/// Sum of every sample of metric `name` (any labels).
pub fn sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let base = series.split('{').next()?;
            (base == name).then(|| value.parse::<f64>().ok()).flatten()
        })
        .sum()
}

/// What a node holds at one instant: its gauges and its process.
pub async fn snapshot(node: &Node, pid: Option<u32>) -> Value {
    let m = node.metrics().await.unwrap_or_default();
    let tracked = |t: &str| sample(&m, &format!("switchboard_tracked_entries{{table=\"{t}\"}}"));
    json!({
        "feeds": sample(&m, "switchboard_actors{kind=\"feed\"}"),
        "conversation_actors": sample(&m, "switchboard_actors{kind=\"conversation\"}"),
        "blocking_redis_connections": sample(&m, "switchboard_redis_blocking_connections"),
        "connections": sum(&m, "switchboard_connections"),
        "held_polls": sample(&m, "switchboard_held_polls"),
        "rate_limit_tokens": tracked("rate_limit_updates") + tracked("rate_limit_agent"),
        "token_cache": tracked("token_cache"),
        "admission_ips": tracked("admission_ips"),
        "admission_tokens": tracked("admission_tokens"),
        "rss_kib": pid.and_then(|p| procstat::status_kib(p, "VmRSS")),
        "fds": pid.map(open_fds),
        "threads": pid.and_then(|p| procstat::status_kib(p, "Threads")),
    })
}

/// Open file descriptors of `pid` (entries of `/proc/PID/fd`).
pub fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// `INFO` fields of the Redis at `addr` (`host:port`), over a plain TCP
/// connection (RESP by hand: `INFO` answers one bulk string).
pub fn redis_info(addr: &str, fields: &[&str]) -> Value {
    use std::io::{Read, Write};
    let mut out = serde_json::Map::new();
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return Value::Object(out);
    };
    let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(2)));
    if s.write_all(b"*1\r\n$4\r\nINFO\r\n").is_err() {
        return Value::Object(out);
    }
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    // The header says how long the bulk string is; read until we have it.
    let mut want = None;
    while let Ok(n) = s.read(&mut chunk) {
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        if want.is_none() {
            if let Some(end) = buf.windows(2).position(|w| w == b"\r\n") {
                want = std::str::from_utf8(&buf[1..end])
                    .ok()
                    .and_then(|l| l.parse::<usize>().ok())
                    .map(|l| l + end + 4);
            }
        }
        if want.is_some_and(|w| buf.len() >= w) {
            break;
        }
    }
    let text = String::from_utf8_lossy(&buf);
    for line in text.lines() {
        if let Some((k, v)) = line.trim().split_once(':') {
            if fields.contains(&k) {
                let v = v.parse::<f64>().map(Value::from).unwrap_or(json!(v));
                out.insert(k.to_owned(), v);
            }
        }
    }
    Value::Object(out)
}
