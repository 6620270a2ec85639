//! `/updates` long-polls (protocol §11): one held call at a time, each
//! answer's cursor into the next call; 409 `CURSOR_EXPIRED` means reset.

use crate::error::ClientError;
use crate::listener::{Ctx, Ended};
use serde_json::Value;
use std::time::{Duration, Instant};

/// Consecutive empty answers that came back well before `wait` that mean
/// another loop of the same token keeps displacing this one (protocol §11:
/// "two poll loops on one token displace each other in a hot loop").
const EARLY_EMPTY_LIMIT: u32 = 3;

/// Polls until the connection fails, the server refuses, or `probe_at`
/// passes (then `/ws` is tried again).
pub(crate) async fn run(ctx: &mut Ctx, probe_at: Option<Instant>) -> Ended {
    let wait = ctx.config.updates_wait.clamp(1, 30);
    let mut early_empty = 0;
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
        let started = Instant::now();
        let res = match req.send().await {
            Ok(r) => r,
            Err(_) => {
                return Ended::Retry {
                    retry_after: None,
                    abnormal: true,
                }
            }
        };
        let status = res.status().as_u16();
        match status {
            200 => {
                let body: Value = match res.json().await {
                    Ok(v) => v,
                    Err(_) => {
                        return Ended::Retry {
                            retry_after: None,
                            abnormal: true,
                        }
                    }
                };
                let events = body["events"].as_array().cloned().unwrap_or_default();
                if events.is_empty() && started.elapsed() < Duration::from_secs(wait) / 2 {
                    early_empty += 1;
                    if early_empty >= EARLY_EMPTY_LIMIT {
                        return Ended::Fatal(ClientError::Displaced);
                    }
                } else {
                    early_empty = 0;
                }
                for event in events {
                    if let Err(ended) = ctx.deliver(event).await {
                        return ended;
                    }
                }
                let cursor = body["cursor"].as_str().unwrap_or_default().to_owned();
                if let Err(ended) = ctx.on_cursor(cursor).await {
                    return ended;
                }
                // A new call follows: this "session" goes on.
                if probe_at.is_some_and(|at| Instant::now() >= at) {
                    return Ended::Probe;
                }
            }
            409 => {
                if let Err(ended) = ctx.on_reset().await {
                    return ended;
                }
            }
            _ => {
                let err = crate::rest::api_error(res).await;
                return match err {
                    ClientError::Unauthorized { .. } => Ended::Fatal(err),
                    ClientError::Api { retry_after, .. } if status == 429 || status == 503 => {
                        Ended::Retry {
                            retry_after,
                            abnormal: false,
                        }
                    }
                    _ => Ended::Retry {
                        retry_after: None,
                        abnormal: true,
                    },
                };
            }
        }
    }
}
