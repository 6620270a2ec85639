//! Why a client call or a listener failed.

use std::time::Duration;

/// An error of the client. A [`crate::Listener`] yields one as its last item
/// when it stops for good (`Displaced`, `Unauthorized`, `Suspended`, `MessageTooBig`,
/// `Protocol`, `Store`, and `Api` for a 4xx that no retry changes, such as
/// the 404 of a wrong base URL); transient trouble (a refused connection,
/// a dropped socket, a 429, a 5xx) is retried inside the listener and
/// only reported, as [`crate::Update::Retrying`].
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// A newer connection of the same token took over (WebSocket close 4000,
    /// SSE `close` `DISPLACED`, protocol §11). The listener stops instead of
    /// reconnecting, so two loops on one token do not displace each other
    /// in a hot loop.
    #[error("displaced: a newer connection for this token opened")]
    Displaced,
    /// The token is missing, unknown, rotated or revoked (401, WebSocket
    /// close 4001). Reconnecting will not help; get a new token.
    #[error("unauthorized: {message}")]
    Unauthorized {
        /// The server's phrase.
        message: String,
    },
    /// An operator suspended this participant (`ACCOUNT_SUSPENDED`) or its
    /// Bay (`BAY_SUSPENDED`): 403 on every route, WebSocket close 4004, SSE
    /// `close`. A standing refusal, not a credential problem: the token is
    /// still good and works again once reinstated, but nothing this client
    /// does changes the answer, so it stops instead of retrying in a loop
    /// (BayChat CLI 0.23.1's relay treats these codes the same way, as
    /// refusals about standing that no new login fixes).
    #[error("{code}: {message}")]
    Suspended {
        /// `ACCOUNT_SUSPENDED` or `BAY_SUSPENDED`.
        code: String,
        /// The server's phrase.
        message: String,
    },
    /// The server refused a frame of this client as too big (close 1009,
    /// `limits.max_ws_frame_bytes`). The client sends only `hello`, so this
    /// points at a misconfigured server or proxy.
    #[error("the server refused a frame as too big (close 1009): {message}")]
    MessageTooBig {
        /// The server's phrase, which names the limit.
        message: String,
    },
    /// The server answered what the protocol does not allow (a framing
    /// violation, 4002, or a body that is not the documented JSON).
    #[error("protocol error: {0}")]
    Protocol(String),
    /// A REST call answered an error (`{error, code, message}`).
    #[error("{status} {code}: {message}")]
    Api {
        /// HTTP status.
        status: u16,
        /// The body's `code` (`UPPER_CASE`, e.g. `NOT_FOUND`).
        code: String,
        /// The body's `message`.
        message: String,
        /// `Retry-After`, when the server sent one (429, 503).
        retry_after: Option<Duration>,
    },
    /// The request could not be made or its answer not read.
    #[error("http: {0}")]
    Http(#[from] reqwest::Error),
    /// The cursor store failed to load or save.
    #[error("cursor store: {0}")]
    Store(#[from] std::io::Error),
    /// Bad client settings (a base URL that is not http(s), a token that is
    /// not a header value).
    #[error("invalid configuration: {0}")]
    Config(String),
}

/// The codes of [`ClientError::Suspended`].
pub const SUSPENSION_CODES: [&str; 2] = ["ACCOUNT_SUSPENDED", "BAY_SUSPENDED"];

impl ClientError {
    /// Whether the listener stops for good on this error (as opposed to
    /// retrying): every kind but `Http` and `Api` answers that may heal
    /// (5xx, and 408, 409, 425, 429).
    pub fn is_terminal(&self) -> bool {
        match self {
            ClientError::Api { status, .. } => {
                (400..500).contains(status) && !matches!(status, 408 | 409 | 425 | 429)
            }
            ClientError::Http(_) => false,
            _ => true,
        }
    }
}

/// An error and its sources, `": "`-joined, each source once: reqwest's
/// own text ("error sending request for url …") hides the cause
/// ("Connection refused (os error 111)") in its sources.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}
