//! The ceiling: the smallest fan-out server that does the benchmark's job.
//!
//! tokio-tungstenite, one `broadcast` channel per room, no auth, no JSON, no
//! replay, no per-client state beyond the channel receiver. It is not a
//! product: it is the practical limit of this machine for "an HTTP POST comes
//! in, every WebSocket subscribed to the room gets the body as a text frame".
//!
//! * `GET /ws/ROOM` (WebSocket upgrade): subscribe to ROOM; the subscription
//!   exists before the 101 answer is sent, so nothing published after the
//!   handshake is missed.
//! * `POST /pub/ROOM` (body = the message): send to every subscriber; 204.
//! * `GET /healthz`: 200.
//!
//! Usage: `switchboard-bench-ceiling [ADDR]` (default 127.0.0.1:9300).

use futures_util::{SinkExt, StreamExt};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::broadcast;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

type Rooms = Arc<Mutex<HashMap<String, broadcast::Sender<Utf8Bytes>>>>;

/// Frames a slow subscriber may lag before it misses some (counted by the
/// client as loss, never hidden). tokio's broadcast allocates the whole ring
/// per room up front, so this is also the ceiling's memory per room.
const CHANNEL_CAPACITY: usize = 1024;

fn sender(rooms: &Rooms, room: &str) -> broadcast::Sender<Utf8Bytes> {
    rooms
        .lock()
        .unwrap()
        .entry(room.to_string())
        .or_insert_with(|| broadcast::channel(CHANNEL_CAPACITY).0)
        .clone()
}

fn main() -> std::io::Result<()> {
    switchboard_bench_raise_nofile();
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9300".into());
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(async move {
            let listener = TcpListener::bind(&addr).await?;
            eprintln!("ceiling listening on {addr}");
            let rooms: Rooms = Arc::default();
            loop {
                let (stream, _) = match listener.accept().await {
                    Ok(s) => s,
                    Err(e) => {
                        // EMFILE and friends: back off instead of spinning.
                        eprintln!("accept: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let rooms = rooms.clone();
                tokio::spawn(async move {
                    let _ = handle(stream, rooms).await;
                });
            }
        })
}

fn switchboard_bench_raise_nofile() {
    // SAFETY: plain libc calls on a local struct.
    unsafe {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

async fn handle(stream: TcpStream, rooms: Rooms) -> std::io::Result<()> {
    let mut head = [0u8; 4];
    let n = stream.peek(&mut head).await?;
    if n == 4 && &head == b"POST" {
        return http(stream, rooms).await;
    }
    // A WebSocket upgrade (or /healthz, answered by the same small parser).
    let mut peekbuf = [0u8; 16];
    let n = stream.peek(&mut peekbuf).await?;
    if peekbuf[..n].starts_with(b"GET /healthz") {
        return http(stream, rooms).await;
    }
    let mut rx = None;
    #[allow(clippy::result_large_err)] // the callback's type is tungstenite's
    let ws = tokio_tungstenite::accept_hdr_async_with_config(
        stream,
        |req: &Request, resp: Response| {
            let room = req.uri().path().strip_prefix("/ws/").unwrap_or("");
            rx = Some(sender(&rooms, room).subscribe());
            Ok(resp)
        },
        // tungstenite allocates its read buffer eagerly (128 KiB by default);
        // subscribers only send control frames.
        Some(WebSocketConfig::default().read_buffer_size(4096)),
    )
    .await
    .map_err(std::io::Error::other)?;
    let Some(mut rx) = rx else { return Ok(()) };
    let (mut sink, mut incoming) = ws.split();
    loop {
        tokio::select! {
            msg = rx.recv() => match msg {
                Ok(m) => {
                    if sink.feed(Message::Text(m)).await.is_err() { break; }
                    // Batch what is already queued into one flush.
                    let mut failed = false;
                    while let Ok(m) = rx.try_recv() {
                        if sink.feed(Message::Text(m)).await.is_err() { failed = true; break; }
                    }
                    if failed || sink.flush().await.is_err() { break; }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => break,
            },
            inc = incoming.next() => match inc {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => break,
                Some(Ok(_)) => {}
            },
        }
    }
    Ok(())
}

/// A minimal HTTP/1.1 keep-alive loop: `POST /pub/ROOM` and `GET /healthz`.
async fn http(stream: TcpStream, rooms: Rooms) -> std::io::Result<()> {
    let (r, mut w) = stream.into_split();
    let mut r = BufReader::new(r);
    let mut line = String::new();
    let mut body = Vec::new();
    loop {
        line.clear();
        if r.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let path = parts.next().unwrap_or("").to_string();
        let mut len = 0usize;
        loop {
            line.clear();
            if r.read_line(&mut line).await? == 0 {
                return Ok(());
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
        }
        body.resize(len, 0);
        r.read_exact(&mut body).await?;
        let status = match (method.as_str(), path.strip_prefix("/pub/")) {
            ("POST", Some(room)) => match String::from_utf8(std::mem::take(&mut body)) {
                Ok(text) => {
                    let _ = sender(&rooms, room).send(Utf8Bytes::from(text));
                    "204 No Content"
                }
                Err(_) => "400 Bad Request",
            },
            ("GET", _) if path == "/healthz" => "200 OK",
            _ => "404 Not Found",
        };
        w.write_all(format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n").as_bytes())
            .await?;
    }
}
