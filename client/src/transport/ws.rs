//! A `/ws` session (protocol §11, docs/websocket.md): `hello` with the
//! cursor, then `event` / `cursor` / `reset` frames until the close, whose
//! code decides what comes next (the close-code table of docs/websocket.md).

use crate::config::TransportChoice;
use crate::error::ClientError;
use crate::listener::{Ctx, Ended};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::time::Duration;
use switchboard_protocol::error::close;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

/// Longest wait for the upgrade's answer.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// Runs one WebSocket session.
pub(crate) async fn run(ctx: &mut Ctx) -> Ended {
    let url = ctx
        .client
        .url("/ws")
        .replacen("http://", "ws://", 1)
        .replacen("https://", "wss://", 1);
    let mut req = match url.into_client_request() {
        Ok(r) => r,
        Err(e) => return Ended::Fatal(ClientError::Config(format!("bad websocket url: {e}"))),
    };
    req.headers_mut()
        .insert("Authorization", ctx.client.authorization().clone());
    let shown = ctx.client.url("/ws");
    let connected =
        tokio::time::timeout(CONNECT_TIMEOUT, tokio_tungstenite::connect_async(req)).await;
    let mut socket = match connected {
        Err(_) => {
            return Ended::broke(format!(
                "GET {shown}: no answer to the upgrade within {CONNECT_TIMEOUT:?}"
            ))
        }
        Ok(Ok((socket, _))) => socket,
        Ok(Err(WsError::Http(res))) => {
            let status = res.status().as_u16();
            let retry_after = crate::rest::retry_after(res.headers());
            let auto = ctx.config.transport == TransportChoice::Auto;
            return match status {
                401 => Ended::Fatal(ClientError::Unauthorized {
                    message: "the upgrade was refused with 401".into(),
                }),
                429 | 503 => Ended::Retry {
                    retry_after,
                    abnormal: false,
                    reason: format!("GET {shown}: the upgrade was answered {status}"),
                },
                // Not found, or forbidden, with no /updates to fall back
                // to: retrying will not change it.
                403 | 404 if !auto => Ended::Fatal(crate::listener::not_healing(
                    &shown,
                    status,
                    if status == 404 {
                        "NOT_FOUND"
                    } else {
                        "FORBIDDEN"
                    }
                    .into(),
                    String::new(),
                )),
                // The server (or a proxy) gave up waiting for the request:
                // a timeout, not a refusal of WebSockets.
                408 => Ended::broke(format!(
                    "GET {shown}: the upgrade was answered 408 (request timeout)"
                )),
                // A proxy that strips or refuses upgrades: the node then
                // sees a plain GET (400), or the proxy answers itself.
                400..=499 => Ended::Refused {
                    reason: if auto {
                        format!("GET {shown}: the upgrade was refused with {status}")
                    } else {
                        format!(
                            "GET {shown}: the upgrade was refused with {status} (a proxy that does not pass WebSockets? --transport auto falls back to /updates)"
                        )
                    },
                },
                _ => Ended::broke(format!("GET {shown}: the upgrade was answered {status}")),
            };
        }
        Ok(Err(e)) => return Ended::broke(format!("GET {shown}: {}", crate::error::chain(&e))),
    };
    let hello = json!({ "t": "hello", "resume": ctx.cursor }).to_string();
    if let Err(e) = socket.send(Message::text(hello)).await {
        return Ended::broke(format!("{shown}: sending hello failed: {e}"));
    }
    // The `error` frame that precedes the server's close.
    let mut error: Option<(String, String)> = None;
    loop {
        let next = tokio::time::timeout(ctx.config.read_timeout, socket.next()).await;
        let msg = match next {
            Err(_) => {
                return Ended::broke(format!(
                    "{shown}: nothing for {:?}, not even a ping",
                    ctx.config.read_timeout
                ))
            }
            Ok(None) => return Ended::broke(format!("{shown}: the socket ended")),
            Ok(Some(Err(e))) => return Ended::broke(format!("{shown}: the socket broke: {e}")),
            Ok(Some(Ok(m))) => m,
        };
        match msg {
            Message::Text(text) => {
                let frame: Value = match serde_json::from_str(text.as_str()) {
                    Ok(v) => v,
                    Err(e) => {
                        return Ended::Fatal(ClientError::Protocol(format!(
                            "frame is not json: {e}"
                        )))
                    }
                };
                let step = match frame["t"].as_str() {
                    Some("ready") => {
                        ctx.connected = true;
                        Ok(())
                    }
                    Some("event") => ctx.deliver(frame["event"].clone()).await,
                    Some("cursor") => match frame["cursor"].as_str() {
                        Some(c) => ctx.on_cursor(c.to_owned()).await,
                        None => Ok(()),
                    },
                    Some("reset") => ctx.on_reset().await,
                    Some("error") => {
                        error = Some((
                            frame["code"].as_str().unwrap_or_default().to_owned(),
                            frame["message"].as_str().unwrap_or_default().to_owned(),
                        ));
                        Ok(())
                    }
                    // Frame types added later are ignored (protocol §11).
                    _ => Ok(()),
                };
                if let Err(ended) = step {
                    return ended;
                }
            }
            Message::Close(frame) => {
                let code = frame.as_ref().map(|f| u16::from(f.code));
                let reason = frame.map(|f| f.reason.to_string()).unwrap_or_default();
                return on_close(code, error.take(), reason);
            }
            // Pings are answered by tungstenite; binary frames are not ours.
            _ => {}
        }
    }
}

/// The close-code table of docs/websocket.md.
fn on_close(code: Option<u16>, error: Option<(String, String)>, reason: String) -> Ended {
    let (error_code, message) = error.unwrap_or_else(|| (String::new(), reason));
    match code {
        Some(close::DISPLACED) => Ended::Fatal(ClientError::Displaced),
        Some(close::CREDENTIAL_REVOKED) => Ended::Fatal(ClientError::Unauthorized { message }),
        Some(close::FRAMING_VIOLATION) | Some(close::PROTOCOL_ERROR) => {
            Ended::Fatal(ClientError::Protocol(format!("{error_code}: {message}")))
        }
        Some(close::MESSAGE_TOO_BIG) => Ended::Fatal(ClientError::MessageTooBig { message }),
        // 4003: the node is going away (or the log was reset, a `reset`
        // came first): resume at once, elsewhere. The session could not
        // open (store trouble): wait first.
        Some(close::GOING_AWAY) => match error_code.as_str() {
            "STORE_UNAVAILABLE" | "UNAVAILABLE" | "INTERNAL" => Ended::Retry {
                retry_after: Some(Duration::from_secs(1)),
                abnormal: false,
                reason: format!("the socket closed with 4003 {error_code}: {message}"),
            },
            _ => Ended::Immediate,
        },
        // A slow consumer resumes from its cursor, losing nothing.
        Some(close::POLICY_VIOLATION) => Ended::Immediate,
        Some(c) if c == u16::from(CloseCode::Normal) || c == u16::from(CloseCode::Away) => {
            Ended::Retry {
                retry_after: None,
                abnormal: false,
                reason: format!("the server closed the socket ({c})"),
            }
        }
        Some(c) => Ended::broke(format!(
            "the socket closed with {c} {error_code}: {message}"
        )),
        None => Ended::broke("the socket closed without a close code".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_codes_follow_the_documented_table() {
        assert!(matches!(
            on_close(Some(4000), None, String::new()),
            Ended::Fatal(ClientError::Displaced)
        ));
        assert!(matches!(
            on_close(Some(4001), None, String::new()),
            Ended::Fatal(ClientError::Unauthorized { .. })
        ));
        assert!(matches!(
            on_close(
                Some(4003),
                Some(("GOING_AWAY".into(), String::new())),
                String::new()
            ),
            Ended::Immediate
        ));
        assert!(matches!(
            on_close(
                Some(4003),
                Some(("STORE_UNAVAILABLE".into(), String::new())),
                String::new()
            ),
            Ended::Retry {
                abnormal: false,
                ..
            }
        ));
        assert!(matches!(
            on_close(Some(1009), None, "frame exceeds the size limit".into()),
            Ended::Fatal(ClientError::MessageTooBig { .. })
        ));
        assert!(matches!(
            on_close(None, None, String::new()),
            Ended::Retry { abnormal: true, .. }
        ));
    }
}
