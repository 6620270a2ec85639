//! A `/ws` session (protocol §11, docs/websocket.md): `hello` with the
//! cursor, then `event` / `cursor` / `reset` frames until the close, whose
//! code decides what comes next (the close-code table of docs/websocket.md).

use super::{not_healing, Ctx, Ended};
use crate::config::TransportChoice;
use crate::error::ClientError;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::time::Duration;
use switchboard_protocol::error::close;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

/// Longest wait for the upgrade's answer.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// The socket of a session.
type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The `error` frame that precedes the server's close: its `code` and
/// `message`.
type ErrorFrame = (String, String);

/// Runs one WebSocket session.
pub(crate) async fn run(ctx: &mut Ctx) -> Ended {
    let shown = ctx.client.url("/ws");
    let mut socket = match connect(ctx, &shown).await {
        Ok(socket) => socket,
        Err(ended) => return ended,
    };
    let hello = json!({ "t": "hello", "resume": ctx.cursor }).to_string();
    if let Err(e) = socket.send(Message::text(hello)).await {
        return Ended::broke(format!("{shown}: sending hello failed: {e}"));
    }
    let mut error: Option<ErrorFrame> = None;
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
                if let Err(ended) = on_text(ctx, text.as_str(), &mut error).await {
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

/// Opens the socket: the upgrade of `/ws` (shown as `shown` in reasons)
/// with the token's `Authorization`, answered within [`CONNECT_TIMEOUT`].
///
/// # Errors
/// How the session ends instead: a bad URL stops the listener; a refused
/// upgrade as [`upgrade_refused`] says; no answer or a broken connection
/// retries.
async fn connect(ctx: &Ctx, shown: &str) -> Result<Socket, Ended> {
    let url = ctx
        .client
        .url("/ws")
        .replacen("http://", "ws://", 1)
        .replacen("https://", "wss://", 1);
    let mut req = url
        .into_client_request()
        .map_err(|e| Ended::Fatal(ClientError::Config(format!("bad websocket url: {e}"))))?;
    req.headers_mut()
        .insert("Authorization", ctx.client.authorization().clone());
    let connected =
        tokio::time::timeout(CONNECT_TIMEOUT, tokio_tungstenite::connect_async(req)).await;
    match connected {
        Err(_) => Err(Ended::broke(format!(
            "GET {shown}: no answer to the upgrade within {CONNECT_TIMEOUT:?}"
        ))),
        Ok(Ok((socket, _))) => Ok(socket),
        Ok(Err(WsError::Http(res))) => {
            let status = res.status().as_u16();
            if let Some(suspended) = suspension(status, res.body().as_deref()) {
                return Err(Ended::Fatal(suspended));
            }
            let retry_after = crate::rest::retry_after(res.headers());
            let auto = ctx.config.transport == TransportChoice::Auto;
            Err(upgrade_refused(shown, status, retry_after, auto))
        }
        Ok(Err(e)) => Err(Ended::broke(format!(
            "GET {shown}: {}",
            crate::error::chain(&e)
        ))),
    }
}

/// A 403 upgrade refusal whose body names a suspension, as its error.
fn suspension(status: u16, body: Option<&[u8]>) -> Option<ClientError> {
    let body: serde_json::Value = serde_json::from_slice(body?).ok()?;
    let code = body["code"].as_str()?;
    (status == 403 && crate::error::SUSPENSION_CODES.contains(&code)).then(|| {
        ClientError::Suspended {
            code: code.to_owned(),
            message: body["message"].as_str().unwrap_or_default().to_owned(),
        }
    })
}

/// An HTTP answer `status` to the upgrade of `shown`, instead of `101`:
/// 401 stops; 429 / 503 retry after `retry_after`; 403 / 404 stop unless
/// `auto` (which falls back to `/updates`); other 4xx refuse WebSockets
/// ([`Ended::Refused`]); the rest retry as a broken connection.
fn upgrade_refused(shown: &str, status: u16, retry_after: Option<Duration>, auto: bool) -> Ended {
    match status {
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
        403 | 404 if !auto => Ended::Fatal(not_healing(
            shown,
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
    }
}

/// One text frame from the server: `ready`, `event`, `cursor` and `reset`
/// go to `ctx`; an `error` frame is kept in `error` for the close that
/// follows; frame types added later are ignored.
///
/// # Errors
/// A frame that is not JSON stops the listener; otherwise whatever `ctx`
/// ends the session with (the listener was dropped).
async fn on_text(ctx: &mut Ctx, text: &str, error: &mut Option<ErrorFrame>) -> Result<(), Ended> {
    let frame: Value = serde_json::from_str(text)
        .map_err(|e| Ended::Fatal(ClientError::Protocol(format!("frame is not json: {e}"))))?;
    match frame["t"].as_str() {
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
            *error = Some((
                frame["code"].as_str().unwrap_or_default().to_owned(),
                frame["message"].as_str().unwrap_or_default().to_owned(),
            ));
            Ok(())
        }
        // Frame types added later are ignored (protocol §11).
        _ => Ok(()),
    }
}

/// The close-code table of docs/websocket.md.
fn on_close(code: Option<u16>, error: Option<ErrorFrame>, reason: String) -> Ended {
    let (error_code, message) = error.unwrap_or_else(|| (String::new(), reason));
    match code {
        Some(close::DISPLACED) => Ended::Fatal(ClientError::Displaced),
        Some(close::CREDENTIAL_REVOKED) => Ended::Fatal(ClientError::Unauthorized { message }),
        Some(close::SUSPENDED) => Ended::Fatal(ClientError::Suspended {
            code: if error_code.is_empty() {
                "ACCOUNT_SUSPENDED".into()
            } else {
                error_code
            },
            message,
        }),
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
                Some(4004),
                Some(("BAY_SUSPENDED".into(), "suspended".into())),
                String::new()
            ),
            Ended::Fatal(ClientError::Suspended { code, .. }) if code == "BAY_SUSPENDED"
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
