//! One adapter per protocol. Every system is driven by the same client code
//! (connect, receive, publish over HTTP); only the URLs, the handshake and
//! how a frame is recognised differ.
//!
//! | system | subscribe | publish |
//! |---|---|---|
//! | Switchboard | `GET /api/agent-api/ws` + `hello` | `POST /api/agent-api/conversations/C/messages` (a member's token) |
//! | nchan | `GET /sub?id=C` (WS) | `POST /pub?id=C` |
//! | socket.io | Engine.IO v4 WS, `join` event (acked) | `POST /pub?room=C` (bench/peers/socketio/server.js) |
//! | sockudo | Pusher protocol 7, `pusher:subscribe` | `POST /apps/ID/events`, HMAC-SHA256 signed |
//! | ceiling | `GET /ws/C` | `POST /pub/C` |

use crate::stats::{ConnStats, Shared};
use anyhow_lite::{bail, Context, Result};
use futures_util::{SinkExt, StreamExt};
use hmac::{Hmac, Mac};
use md5::{Digest, Md5};
use serde::Serialize;
use serde_json::json;
use sha2::Sha256;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// Minimal error plumbing (no extra dependency): a boxed error with context.
pub mod anyhow_lite {
    pub type Error = Box<dyn std::error::Error + Send + Sync>;
    pub type Result<T> = std::result::Result<T, Error>;

    /// Adds a message to an error.
    pub trait Context<T> {
        fn context(self, msg: impl std::fmt::Display) -> Result<T>;
    }
    impl<T, E: std::fmt::Display> Context<T> for std::result::Result<T, E> {
        fn context(self, msg: impl std::fmt::Display) -> Result<T> {
            self.map_err(|e| format!("{msg}: {e}").into())
        }
    }
    impl<T> Context<T> for Option<T> {
        fn context(self, msg: impl std::fmt::Display) -> Result<T> {
            self.ok_or_else(|| msg.to_string().into())
        }
    }
    macro_rules! bail {
        ($($t:tt)*) => { return Err(format!($($t)*).into()) };
    }
    pub(crate) use bail;
}

pub type Ws = WebSocketStream<TcpStream>;

/// The systems under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum System {
    Switchboard,
    Nchan,
    Socketio,
    Sockudo,
    Ceiling,
}

impl System {
    pub fn name(self) -> &'static str {
        match self {
            System::Switchboard => "switchboard",
            System::Nchan => "nchan",
            System::Socketio => "socketio",
            System::Sockudo => "sockudo",
            System::Ceiling => "ceiling",
        }
    }

    /// Whether the system can resume a dropped subscriber from a position.
    pub fn can_resume(self) -> bool {
        matches!(self, System::Switchboard | System::Nchan | System::Socketio)
    }
}

/// Admin token the bench scripts start Switchboard with.
pub const ADMIN_TOKEN: &str = "bench-admin-token";
const BAY: &str = "bench";
const SOCKUDO_APP: (&str, &str, &str) = ("bench", "bench-key", "bench-secret");

/// One subscriber (and, for Switchboard, the participant it connects as).
#[derive(Clone, Debug)]
pub struct Member {
    pub room: usize,
    /// Switchboard bearer token (empty for the peers).
    pub token: String,
}

/// Who subscribes where and who publishes.
pub struct Layout {
    pub members: Vec<Member>,
    /// Per room: the Switchboard token a separate publisher posts with
    /// (a human who holds no socket), if the scenario has one.
    pub publishers: Vec<String>,
    pub rooms: usize,
}

impl Layout {
    pub fn members_in(&self, room: usize) -> usize {
        self.members.iter().filter(|m| m.room == room).count()
    }
}

/// The system under test: its kind and its node addresses (`host:port`).
#[derive(Clone)]
pub struct Target {
    pub system: System,
    pub nodes: Vec<String>,
    pub http: reqwest::Client,
    /// For S4 on nchan: ask for `ws+meta.nchan` frames (they carry the id).
    pub want_ids: bool,
    /// Switchboard: how many Bays the rooms are spread over (1 by default:
    /// every room in one Bay). On Redis Cluster a Bay's keys share one hash
    /// slot, so several Bays are what spreads the load over the masters.
    pub bays: usize,
}

fn room_id(r: usize) -> String {
    format!("room{r}")
}

impl Target {
    pub fn new(system: System, nodes: Vec<String>, publish_conns: usize) -> Result<Self> {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(publish_conns.max(8))
            // Below actix-web's 5 s keep-alive: a connection idle that long
            // (posts 5 s apart) is closed by the server just as it is reused,
            // and the POST fails with "error sending request".
            .pool_idle_timeout(Duration::from_secs(3))
            .tcp_nodelay(true)
            .timeout(Duration::from_secs(60))
            .build()
            .context("http client")?;
        Ok(Target {
            system,
            nodes,
            http,
            want_ids: false,
            bays: 1,
        })
    }

    /// Creates what the system needs for `rooms` rooms of `per_room`
    /// subscribers (Switchboard: [`Target::bays`] Bays, agents, GROUP
    /// conversations and, with `human_publisher`, one human per room who
    /// posts; room `r` and its members are in Bay `r % bays`; the peers need
    /// nothing).
    pub async fn provision(
        &self,
        rooms: usize,
        per_room: usize,
        human_publisher: bool,
        concurrency: usize,
    ) -> Result<Layout> {
        let n = rooms * per_room;
        if self.system != System::Switchboard {
            return Ok(Layout {
                members: (0..n)
                    .map(|i| Member {
                        room: i / per_room,
                        token: String::new(),
                    })
                    .collect(),
                publishers: vec![String::new(); rooms],
                rooms,
            });
        }
        let base = format!("http://{}/api/admin", self.nodes[0]);
        let post = |path: String, body: serde_json::Value| {
            let req = self
                .http
                .post(format!("{base}{path}"))
                .bearer_auth(ADMIN_TOKEN)
                .json(&body);
            async move {
                let resp = req.send().await.context("admin request")?;
                let status = resp.status();
                let v: serde_json::Value = resp.json().await.unwrap_or_default();
                if !status.is_success() {
                    bail!("admin {status}: {v}");
                }
                Ok::<_, anyhow_lite::Error>(v)
            }
        };
        let bays = self.bays.max(1);
        let bay = |room: usize| {
            if bays == 1 {
                BAY.to_owned()
            } else {
                format!("{BAY}{}", room % bays)
            }
        };
        for b in 0..bays.min(rooms.max(1)) {
            post("/bays".into(), json!({"id": bay(b), "name": "Bench"})).await?;
        }
        // (id, kind, room)
        let mut specs: Vec<(String, &str, usize)> = (0..n)
            .map(|i| (format!("a{i}"), "agent", i / per_room))
            .collect();
        if human_publisher {
            specs.extend((0..rooms).map(|r| (format!("h{r}"), "user", r)));
        }
        let tokens: Vec<Result<String>> =
            futures_util::stream::iter(specs.iter().map(|(id, kind, room)| {
                post(
                    format!("/bays/{}/participants", bay(*room)),
                    json!({"id": id, "kind": kind, "name": id}),
                )
            }))
            .buffered(concurrency.max(1))
            .map(|r| {
                r.and_then(|v| {
                    v["token"]
                        .as_str()
                        .map(str::to_string)
                        .context("no token in answer")
                })
            })
            .collect()
            .await;
        let tokens: Vec<String> = tokens.into_iter().collect::<Result<_>>()?;
        let convs = (0..rooms).map(|r| {
            let mut members: Vec<String> = (r * per_room..(r + 1) * per_room)
                .map(|i| format!("a{i}"))
                .collect();
            if human_publisher {
                members.push(format!("h{r}"));
            }
            post(
                format!("/bays/{}/conversations", bay(r)),
                json!({"id": room_id(r), "type": "GROUP", "title": room_id(r), "members": members}),
            )
        });
        let made: Vec<Result<serde_json::Value>> = futures_util::stream::iter(convs)
            .buffered(concurrency.max(1))
            .collect()
            .await;
        for m in made {
            m?;
        }
        Ok(Layout {
            members: (0..n)
                .map(|i| Member {
                    room: i / per_room,
                    token: tokens[i].clone(),
                })
                .collect(),
            publishers: if human_publisher {
                tokens[n..].to_vec()
            } else {
                vec![String::new(); rooms]
            },
            rooms,
        })
    }

    fn ws_url(&self, node: usize, m: &Member, st: &ConnStats) -> String {
        let host = &self.nodes[node % self.nodes.len()];
        let room = room_id(m.room);
        match self.system {
            System::Switchboard => format!("ws://{host}/api/agent-api/ws"),
            System::Nchan => match st.resume.lock().unwrap().cursor.clone() {
                Some(id) => format!("ws://{host}/sub?id={room}&last_event_id={id}"),
                None => format!("ws://{host}/sub?id={room}"),
            },
            System::Socketio => format!("ws://{host}/socket.io/?EIO=4&transport=websocket"),
            System::Sockudo => format!(
                "ws://{host}/app/{}?protocol=7&client=bench&version=1.0",
                SOCKUDO_APP.1
            ),
            System::Ceiling => format!("ws://{host}/ws/{room}"),
        }
    }

    /// Opens one subscriber from source address `src` and completes the
    /// system's handshake up to "subscribed" (Switchboard: `ready`, then the
    /// first `cursor` frame unless resuming). With `resume`, asks to continue
    /// from the position stored in `st`. Frames that arrive during the
    /// handshake are processed like any other.
    pub async fn open(
        &self,
        node: usize,
        src: Ipv4Addr,
        m: &Member,
        resume: bool,
        st: &ConnStats,
        shared: &Shared,
    ) -> Result<Ws> {
        let url = self.ws_url(node, m, st);
        let host = &self.nodes[node % self.nodes.len()];
        let addr: SocketAddr = tokio::net::lookup_host(host)
            .await
            .context("resolve")?
            .next()
            .context("no address")?;
        let sock = TcpSocket::new_v4().context("socket")?;
        sock.bind(SocketAddr::new(src.into(), 0))
            .context("bind source address")?;
        let stream = sock.connect(addr).await.context("connect")?;
        stream.set_nodelay(true).ok();
        let mut req = url.as_str().into_client_request().context("request")?;
        if self.system == System::Switchboard {
            req.headers_mut().insert(
                "authorization",
                HeaderValue::from_str(&format!("Bearer {}", m.token)).context("header")?,
            );
        }
        if self.system == System::Nchan && self.want_ids {
            req.headers_mut().insert(
                "sec-websocket-protocol",
                HeaderValue::from_static("ws+meta.nchan"),
            );
        }
        // tungstenite allocates its read buffer eagerly (128 KiB by default):
        // 16 KiB keeps 15,000 client sockets' memory modest.
        let cfg = WebSocketConfig::default().read_buffer_size(16 * 1024);
        let (mut ws, _) = tokio_tungstenite::client_async_with_config(req, stream, Some(cfg))
            .await
            .context("websocket handshake")?;
        match self.system {
            System::Switchboard => {
                let cursor = if resume {
                    st.resume.lock().unwrap().cursor.clone()
                } else {
                    None
                };
                ws.send(Message::text(
                    json!({"t": "hello", "resume": cursor}).to_string(),
                ))
                .await
                .context("hello")?;
                let mut ready = false;
                loop {
                    let t = next_text(&mut ws).await?;
                    if t.starts_with(r#"{"t":"ready""#) {
                        ready = true;
                        if resume {
                            break;
                        }
                        continue;
                    }
                    let is_cursor = t.starts_with(r#"{"t":"cursor""#);
                    self.process(&t, st, shared);
                    if ready && is_cursor {
                        break;
                    }
                }
            }
            System::Socketio => {
                let open = next_text(&mut ws).await?;
                if !open.starts_with('0') {
                    bail!("engine.io: expected open packet, got {open}");
                }
                let (pid, offset) = {
                    let r = st.resume.lock().unwrap();
                    (r.pid.clone(), r.cursor.clone())
                };
                let connect = match (resume, pid.as_deref(), offset.as_deref()) {
                    (true, Some(pid), Some(off)) => {
                        format!("40{}", json!({"pid": pid, "offset": off}))
                    }
                    _ => "40".to_string(),
                };
                ws.send(Message::text(connect)).await.context("connect")?;
                let recovered;
                loop {
                    let t = next_text(&mut ws).await?;
                    if let Some(body) = t.strip_prefix("40") {
                        let v: serde_json::Value =
                            serde_json::from_str(body).context("connect answer")?;
                        let new_pid = v["pid"].as_str().map(str::to_string);
                        recovered = resume && new_pid.is_some() && new_pid == pid;
                        st.resume.lock().unwrap().pid = new_pid;
                        break;
                    }
                    self.process_reply(&mut ws, &t, st, shared).await?;
                }
                if resume && !recovered {
                    shared.bump_reset();
                }
                if !recovered {
                    ws.send(Message::text(format!(
                        r#"421["join","{}"]"#,
                        room_id(m.room)
                    )))
                    .await
                    .context("join")?;
                    loop {
                        let t = next_text(&mut ws).await?;
                        if t.starts_with("431") {
                            break;
                        }
                        self.process_reply(&mut ws, &t, st, shared).await?;
                    }
                }
            }
            System::Sockudo => {
                let est = next_text(&mut ws).await?;
                if !est.contains("pusher:connection_established") {
                    bail!("pusher: expected connection_established, got {est}");
                }
                ws.send(Message::text(
                    json!({"event": "pusher:subscribe", "data": {"channel": room_id(m.room)}})
                        .to_string(),
                ))
                .await
                .context("subscribe")?;
                loop {
                    let t = next_text(&mut ws).await?;
                    if t.contains("subscription_succeeded") {
                        break;
                    }
                    if t.contains("pusher:error") {
                        bail!("pusher error: {t}");
                    }
                    self.process_reply(&mut ws, &t, st, shared).await?;
                }
            }
            System::Nchan | System::Ceiling => {}
        }
        Ok(ws)
    }

    async fn process_reply(
        &self,
        ws: &mut Ws,
        t: &str,
        st: &ConnStats,
        shared: &Shared,
    ) -> Result<()> {
        if let Some(reply) = self.process(t, st, shared) {
            ws.send(Message::text(reply)).await.context("reply")?;
        }
        Ok(())
    }

    /// Handles one text frame: records a delivery, stores a resume
    /// position, or returns the reply a keep-alive needs.
    pub fn process(&self, t: &str, st: &ConnStats, shared: &Shared) -> Option<String> {
        match self.system {
            System::Switchboard => {
                if t.starts_with(r#"{"t":"event""#) {
                    st.deliver(t.as_bytes(), shared);
                } else if let Some(rest) = t.strip_prefix(r#"{"t":"cursor","cursor":""#) {
                    if let Some(end) = rest.find('"') {
                        st.resume.lock().unwrap().cursor = Some(rest[..end].to_string());
                    }
                } else if t.contains(r#""t":"reset""#) {
                    shared.bump_reset();
                }
                None
            }
            System::Nchan => {
                if self.want_ids {
                    if let Some(rest) = t.strip_prefix("id: ") {
                        if let Some(end) = rest.find('\n') {
                            st.resume.lock().unwrap().cursor = Some(rest[..end].to_string());
                        }
                    }
                }
                st.deliver(t.as_bytes(), shared);
                None
            }
            System::Socketio => {
                if t == "2" {
                    return Some("3".into());
                }
                if t.starts_with("42") {
                    st.deliver(t.as_bytes(), shared);
                    // With connectionStateRecovery the last element is the offset.
                    if let Some(i) = t.rfind(",\"") {
                        if let Some(off) = t[i + 2..].strip_suffix("\"]") {
                            st.resume.lock().unwrap().cursor = Some(off.to_string());
                        }
                    }
                }
                None
            }
            System::Sockudo => {
                if t.contains("pusher:ping") {
                    return Some(r#"{"event":"pusher:pong","data":{}}"#.into());
                }
                if t.contains(r#""event":"msg""#) {
                    st.deliver(t.as_bytes(), shared);
                }
                None
            }
            System::Ceiling => {
                st.deliver(t.as_bytes(), shared);
                None
            }
        }
    }

    /// Publishes `payload` to `room` through node `node` (Switchboard: as
    /// the participant whose token is `token`). Ok means the system
    /// accepted it.
    pub async fn publish(
        &self,
        node: usize,
        room: usize,
        token: &str,
        payload: &str,
    ) -> Result<()> {
        let host = &self.nodes[node % self.nodes.len()];
        let room = room_id(room);
        let req = match self.system {
            System::Switchboard => self
                .http
                .post(format!(
                    "http://{host}/api/agent-api/conversations/{room}/messages"
                ))
                .bearer_auth(token)
                .json(&json!({ "content": payload })),
            System::Nchan => self
                .http
                .post(format!("http://{host}/pub?id={room}"))
                .body(payload.to_string()),
            System::Socketio => self
                .http
                .post(format!("http://{host}/pub?room={room}"))
                .body(payload.to_string()),
            System::Ceiling => self
                .http
                .post(format!("http://{host}/pub/{room}"))
                .body(payload.to_string()),
            System::Sockudo => {
                let body = json!({"name": "msg", "channels": [room], "data": payload}).to_string();
                let path = format!("/apps/{}/events", SOCKUDO_APP.0);
                let query = pusher_query(&path, &body);
                self.http
                    .post(format!("http://{host}{path}?{query}"))
                    .header("content-type", "application/json")
                    .body(body)
            }
        };
        let resp = req.send().await.context("publish")?;
        let status = resp.status();
        if !status.is_success() {
            let text = resp.text().await.unwrap_or_default();
            bail!(
                "publish {status}: {}",
                text.chars().take(200).collect::<String>()
            );
        }
        // Drain the body so the connection goes back to the pool.
        let _ = resp.bytes().await;
        Ok(())
    }

    /// Opens a raw held long-poll (S3): Switchboard `GET /updates?wait=30`,
    /// nchan `GET /sub?id=C` (longpoll subscriber). Returns the open socket.
    pub async fn hold_poll(&self, node: usize, src: Ipv4Addr, m: &Member) -> Result<TcpStream> {
        use tokio::io::AsyncWriteExt;
        let host = &self.nodes[node % self.nodes.len()];
        let addr: SocketAddr = host.parse().context("node address")?;
        let sock = TcpSocket::new_v4().context("socket")?;
        sock.bind(SocketAddr::new(src.into(), 0)).context("bind")?;
        let mut s = sock.connect(addr).await.context("connect")?;
        let req = match self.system {
            System::Switchboard => format!(
                "GET /api/agent-api/updates?wait=30 HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {}\r\n\r\n",
                m.token
            ),
            System::Nchan => format!(
                "GET /sub?id={} HTTP/1.1\r\nHost: {host}\r\n\r\n",
                room_id(m.room)
            ),
            other => bail!("{} has no long-poll transport here", other.name()),
        };
        s.write_all(req.as_bytes()).await.context("write")?;
        Ok(s)
    }
}

async fn next_text(ws: &mut Ws) -> Result<String> {
    loop {
        match tokio::time::timeout(Duration::from_secs(30), ws.next()).await {
            Err(_) => bail!("handshake timed out"),
            Ok(None) => bail!("closed during handshake"),
            Ok(Some(Err(e))) => bail!("during handshake: {e}"),
            Ok(Some(Ok(Message::Text(t)))) => return Ok(t.to_string()),
            Ok(Some(Ok(Message::Close(c)))) => bail!("closed during handshake: {c:?}"),
            Ok(Some(Ok(_))) => continue,
        }
    }
}

/// The Pusher HTTP API signature (auth_version 1.0): HMAC-SHA256 over
/// "POST\nPATH\nSORTED_QUERY" with the app secret.
fn pusher_query(path: &str, body: &str) -> String {
    let ts = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let md5 = hex::encode(Md5::digest(body.as_bytes()));
    let q = format!(
        "auth_key={}&auth_timestamp={ts}&auth_version=1.0&body_md5={md5}",
        SOCKUDO_APP.1
    );
    let mut mac = Hmac::<Sha256>::new_from_slice(SOCKUDO_APP.2.as_bytes()).expect("any key");
    mac.update(format!("POST\n{path}\n{q}").as_bytes());
    let sig = hex::encode(mac.finalize().into_bytes());
    format!("{q}&auth_signature={sig}")
}

/// Source address for connection `i`: 127.0.0.1 … 127.0.0.`n` in turn, so
/// one address's ephemeral port range is never the limit.
pub fn source_addr(i: usize, n: usize) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, 1 + (i % n.clamp(1, 250)) as u8)
}

/// Shared handle type for connection stats.
pub type ConnRef = Arc<ConnStats>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pusher_signature_has_all_fields() {
        let q = pusher_query("/apps/bench/events", "{}");
        for k in [
            "auth_key=",
            "auth_timestamp=",
            "auth_version=1.0",
            "body_md5=99914b932bd37a50b983c5e7c90ae93b",
            "auth_signature=",
        ] {
            assert!(q.contains(k), "{q}");
        }
    }

    #[test]
    fn source_addresses_cycle() {
        assert_eq!(source_addr(0, 8), Ipv4Addr::new(127, 0, 0, 1));
        assert_eq!(source_addr(9, 8), Ipv4Addr::new(127, 0, 0, 2));
    }
}
