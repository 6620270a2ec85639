//! `/updates` long-polls (protocol §11): one held call at a time, each
//! answer's cursor into the next call; 409 `CURSOR_EXPIRED` means reset.
//! An answer with the `Switchboard-Session-End: DISPLACED` header
//! ([`SESSION_END_HEADER`]) means a newer connection of the token took
//! over: the listener stops, as on WebSocket close 4000.

use super::{http_refusal, Ctx, Ended};
use crate::error::ClientError;
use serde_json::Value;
use std::time::{Duration, Instant};
use switchboard_protocol::error::{WsClose, SESSION_END_HEADER};

/// Polls until the connection fails, the server refuses, or `probe_at`
/// passes (then `/ws` is tried again).
pub(crate) async fn run(ctx: &mut Ctx, probe_at: Option<Instant>) -> Ended {
    let wait = ctx.config.updates_wait.clamp(1, 30);
    let url = ctx.client.url("/updates");
    loop {
        // Without a cursor, a short first call gets a position at once
        // (protocol §11 probes with wait=1 for the same reason).
        let wait = if ctx.cursor.is_none() { 1 } else { wait };
        let mut req = ctx
            .client
            .get("/updates")
            .query(&[("wait", wait.to_string())])
            .timeout(Duration::from_secs(wait + 20));
        if let Some(c) = &ctx.cursor {
            req = req.query(&[("cursor", c)]);
        }
        let res = match req.send().await {
            Ok(r) => r,
            Err(e) => return Ended::broke(format!("GET {url}: {}", crate::error::chain(&e))),
        };
        let status = res.status().as_u16();
        match status {
            200 => {
                let ended = res
                    .headers()
                    .get(SESSION_END_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                let body: Value = match res.json().await {
                    Ok(v) => v,
                    Err(e) => {
                        return Ended::broke(format!(
                            "GET {url}: the answer is not the documented JSON: {e}"
                        ))
                    }
                };
                let events = body["events"].as_array().cloned().unwrap_or_default();
                for event in events {
                    if let Err(ended) = ctx.deliver(event).await {
                        return ended;
                    }
                }
                let cursor = body["cursor"].as_str().unwrap_or_default().to_owned();
                if let Err(ended) = ctx.on_cursor(cursor).await {
                    return ended;
                }
                if ended.as_deref() == Some(WsClose::Displaced.as_str()) {
                    return Ended::Fatal(ClientError::Displaced);
                }
                // A new call follows: this "session" goes on (after a drain,
                // the next call reaches another node).
                if probe_at.is_some_and(|at| Instant::now() >= at) {
                    return Ended::Probe;
                }
            }
            409 => {
                if let Err(ended) = ctx.on_reset().await {
                    return ended;
                }
            }
            _ => return http_refusal(&url, crate::rest::api_error(res).await),
        }
    }
}
