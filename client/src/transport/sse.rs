//! A `/events` session (docs/sse.md): `Last-Event-ID` with the cursor,
//! then events whose `id:` is the cursor after them, `cursor`, `reset` and
//! `close` control events, and comment heartbeats.

use super::{http_refusal, Ctx, Ended};
use crate::error::ClientError;
use futures_util::StreamExt;
use serde_json::Value;

/// Runs one SSE session.
pub(crate) async fn run(ctx: &mut Ctx) -> Ended {
    let url = ctx.client.url("/events");
    let mut req = ctx
        .client
        .http()
        .get(&url)
        .header("Authorization", ctx.client.authorization().clone())
        .header("Accept", "text/event-stream");
    if let Some(c) = &ctx.cursor {
        req = req.header("Last-Event-ID", c);
    }
    let res = match req.send().await {
        Ok(r) => r,
        Err(e) => return Ended::broke(format!("GET {url}: {}", crate::error::chain(&e))),
    };
    if res.status().as_u16() != 200 {
        return http_refusal(&url, crate::rest::api_error(res).await);
    }
    let mut body = res.bytes_stream();
    let mut parser = Parser::default();
    loop {
        let chunk = match tokio::time::timeout(ctx.config.read_timeout, body.next()).await {
            Err(_) => {
                return Ended::broke(format!(
                    "GET {url}: nothing for {:?}, not even a heartbeat",
                    ctx.config.read_timeout
                ))
            }
            Ok(None) => return Ended::broke(format!("GET {url}: the stream ended")),
            Ok(Some(Err(e))) => {
                return Ended::broke(format!(
                    "GET {url}: the stream broke: {}",
                    crate::error::chain(&e)
                ))
            }
            Ok(Some(Ok(c))) => c,
        };
        for block in parser.feed(&chunk) {
            if let Some(ended) = handle(ctx, block).await {
                return ended;
            }
        }
    }
}

async fn handle(ctx: &mut Ctx, block: Block) -> Option<Ended> {
    let step = match block.event.as_str() {
        "" | "message" => match serde_json::from_str::<Value>(&block.data) {
            Ok(event) => ctx.deliver(event).await,
            Err(e) => {
                return Some(Ended::Fatal(ClientError::Protocol(format!(
                    "event data is not json: {e}"
                ))))
            }
        },
        "cursor" => Ok(()),
        "reset" => ctx.on_reset().await,
        "close" => {
            let data: Value = serde_json::from_str(&block.data).unwrap_or(Value::Null);
            let message = data["message"].as_str().unwrap_or_default().to_owned();
            return Some(match data["code"].as_str().unwrap_or_default() {
                "DISPLACED" => Ended::Fatal(ClientError::Displaced),
                "CREDENTIAL_REVOKED" => Ended::Fatal(ClientError::Unauthorized { message }),
                code @ ("ACCOUNT_SUSPENDED" | "BAY_SUSPENDED") => {
                    Ended::Fatal(ClientError::Suspended {
                        code: code.to_owned(),
                        message,
                    })
                }
                code @ ("STORE_UNAVAILABLE" | "UNAVAILABLE" | "INTERNAL") => Ended::Retry {
                    retry_after: Some(std::time::Duration::from_secs(1)),
                    abnormal: false,
                    reason: format!("the stream closed with {code}: {message}"),
                },
                // GOING_AWAY, LOG_RESET (a reset came first), SLOW_CONSUMER.
                _ => Ended::Immediate,
            });
        }
        // Event names added later are ignored.
        _ => Ok(()),
    };
    if let Err(ended) = step {
        return Some(ended);
    }
    if let Some(id) = block.id {
        if let Err(ended) = ctx.on_cursor(id).await {
            return Some(ended);
        }
    }
    None
}

/// One dispatched SSE block.
#[derive(Debug, Default, PartialEq)]
struct Block {
    /// `event:`; empty for unnamed events.
    event: String,
    /// `data:` lines joined with `\n`.
    data: String,
    /// `id:` when the block had one.
    id: Option<String>,
}

/// The WHATWG event-stream line rules, for the fields this protocol uses
/// (`retry:` is ignored: the listener has its own backoff).
#[derive(Default)]
struct Parser {
    /// Bytes after the last line end.
    pending: Vec<u8>,
    current: Block,
    has_data: bool,
    /// The previous chunk ended in `\r`: a `\n` starting this one is part of it.
    after_cr: bool,
}

impl Parser {
    fn feed(&mut self, bytes: &[u8]) -> Vec<Block> {
        let mut out = Vec::new();
        for &b in bytes {
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    let line = std::mem::take(&mut self.pending);
                    if let Some(block) = self.line(&String::from_utf8_lossy(&line)) {
                        out.push(block);
                    }
                }
                _ => self.pending.push(b),
            }
        }
        out
    }

    fn line(&mut self, line: &str) -> Option<Block> {
        if line.is_empty() {
            let block = std::mem::take(&mut self.current);
            let had_data = std::mem::take(&mut self.has_data);
            return (had_data || block.id.is_some()).then_some(block);
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => self.current.event = value.to_owned(),
            "data" => {
                if self.has_data {
                    self.current.data.push('\n');
                }
                self.current.data.push_str(value);
                self.has_data = true;
            }
            "id" if !value.contains('\0') => self.current.id = Some(value.to_owned()),
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_blocks_across_chunks_and_line_endings() {
        let mut p = Parser::default();
        let mut got = p.feed(b"id: c1\r\ndata: {\"a\"");
        assert!(got.is_empty());
        got.extend(p.feed(b":1}\r\n\r\n: heartbeat\n\nevent: cursor\nid: c2\ndata: {}\n\n"));
        assert_eq!(
            got,
            vec![
                Block {
                    event: String::new(),
                    data: "{\"a\":1}".into(),
                    id: Some("c1".into())
                },
                Block {
                    event: "cursor".into(),
                    data: "{}".into(),
                    id: Some("c2".into())
                },
            ]
        );
    }
}
