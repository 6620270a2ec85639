//! The one place errors become wire answers: HTTP status, JSON body
//! (`{error, code, message}`) and `Retry-After` where a client should wait,
//! and how the end of a session reaches a WebSocket (`error` frame and close
//! code) or a held `/updates` call ([`SessionEnd`]).

use actix_web::http::header::{HeaderValue, RETRY_AFTER};
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use std::fmt;
use std::time::Duration;
use switchboard_actors::session::CloseReason;
use switchboard_actors::store::{StoreError, Suspension};
use switchboard_protocol::error::{ErrorBody, ErrorCode, WsClose};

/// An error answer. Build with [`ApiError::new`] or a `From` conversion.
#[derive(Debug)]
pub struct ApiError {
    /// Decides the HTTP status and the body's `error` / `code`; a WebSocket
    /// that fails to open closes with it ([`ApiError::ws_close`]).
    pub code: ErrorCode,
    /// The body's `message`: a lowercase phrase for humans; clients branch
    /// on `code`, never on this.
    pub message: String,
    /// Seconds a client should wait before retrying (`Retry-After`).
    pub retry_after: Option<Duration>,
    /// A draft's length, for the append refusals (the body's `length`).
    pub length: Option<u64>,
}

impl ApiError {
    /// An error with a lowercase human-readable message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
            retry_after: None,
            length: None,
        }
    }

    /// Adds the draft's `length` (in Unicode scalar values) to the body.
    pub fn with_length(mut self, length: u64) -> Self {
        self.length = Some(length);
        self
    }

    /// Adds `Retry-After` (rounded up to whole seconds, at least 1).
    pub fn retry_after(mut self, wait: Duration) -> Self {
        self.retry_after = Some(wait);
        self
    }

    /// 404 that never confirms whether an id exists.
    pub fn not_found() -> Self {
        ApiError::new(ErrorCode::NotFound, "not found")
    }

    /// 401 for a missing, unknown or revoked token (protocol §2).
    pub fn unauthorized() -> Self {
        ApiError::new(ErrorCode::Unauthorized, "missing or invalid bearer token")
    }

    /// 403 `ACCOUNT_SUSPENDED` / `BAY_SUSPENDED`: a standing refusal. The
    /// token stays valid and works again once an operator reinstates.
    pub fn suspended(suspension: Suspension) -> Self {
        let (code, message) = suspension_wire(suspension);
        ApiError::new(code, message)
    }
}

/// The code and message of a suspension's refusal, on every transport.
fn suspension_wire(suspension: Suspension) -> (ErrorCode, &'static str) {
    match suspension {
        Suspension::Participant => (
            ErrorCode::AccountSuspended,
            "an operator suspended this participant; the token works again once reinstated",
        ),
        Suspension::Bay => (
            ErrorCode::BaySuspended,
            "an operator suspended this bay; its tokens work again once reinstated",
        ),
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse {
        let mut body = ErrorBody::new(self.code, self.message.clone());
        body.length = self.length;
        let mut res = HttpResponse::build(self.status_code()).json(body);
        if self.code.status() == 401 {
            // RFC 6750 §3: a 401 names the scheme the client should use.
            res.headers_mut().insert(
                actix_web::http::header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer"),
            );
        }
        if let Some(wait) = self.retry_after {
            let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            if let Ok(v) = HeaderValue::from_str(&secs.max(1).to_string()) {
                res.headers_mut().insert(RETRY_AFTER, v);
            }
        }
        res
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Unavailable { .. } => {
                tracing::warn!(error = %err, "store unavailable");
                ApiError::new(
                    ErrorCode::StoreUnavailable,
                    "the store is unavailable; retry later",
                )
                .retry_after(Duration::from_secs(1))
            }
            StoreError::Corrupt { .. } => {
                tracing::error!(error = %err, "store returned corrupt data");
                ApiError::new(ErrorCode::Internal, "internal error")
            }
        }
    }
}

impl From<actix::MailboxError> for ApiError {
    fn from(err: actix::MailboxError) -> Self {
        tracing::error!(error = %err, "actor mailbox failed");
        ApiError::new(ErrorCode::Unavailable, "the node is busy; retry")
            .retry_after(Duration::from_secs(1))
    }
}

/// Maps actix-web's JSON extractor failures to 400 INVALID_JSON / 413 / 415
/// with the JSON body (never an HTML or plain-text page).
pub fn json_error(
    err: actix_web::error::JsonPayloadError,
    _: &actix_web::HttpRequest,
) -> actix_web::Error {
    use actix_web::error::JsonPayloadError as E;
    let api = match &err {
        E::OverflowKnownLength { .. } | E::Overflow { .. } => {
            ApiError::new(ErrorCode::PayloadTooLarge, "request body is too large")
        }
        E::ContentType => ApiError::new(
            ErrorCode::UnsupportedMediaType,
            "content-type must be application/json",
        ),
        E::Deserialize(e) => {
            ApiError::new(ErrorCode::InvalidJson, format!("invalid json body: {e}"))
        }
        E::Payload(e) => broken_body(e)
            .unwrap_or_else(|| ApiError::new(ErrorCode::InvalidJson, "invalid json body")),
        _ => ApiError::new(ErrorCode::InvalidJson, "invalid json body"),
    };
    api.into()
}

/// 400 `MALFORMED_REQUEST` for a body HTTP itself could not read (a chunked
/// encoding that does not parse, a body cut short), as for a head that
/// does not parse: the fault is the framing, not the JSON inside it.
/// `None` for other payload errors.
pub fn broken_body(err: &actix_web::error::PayloadError) -> Option<ApiError> {
    use actix_web::error::PayloadError as P;
    let says = match err {
        P::EncodingCorrupted => "the request body is not valid HTTP/1.1 chunked encoding",
        P::Incomplete(None) => "the request body ended before its declared length",
        // What actix reports for a body its `Content-Encoding` cannot decode.
        P::Incomplete(Some(_)) => {
            "the request body could not be read (is its Content-Encoding right?)"
        }
        _ => return None,
    };
    Some(ApiError::new(ErrorCode::MalformedRequest, says))
}

/// Maps query-string failures to 400 INVALID_REQUEST.
pub fn query_error(
    err: actix_web::error::QueryPayloadError,
    _: &actix_web::HttpRequest,
) -> actix_web::Error {
    invalid_query(&err).into()
}

/// The 400 INVALID_REQUEST of a query string that does not parse (the
/// app's handler above, and polls served off the dispatcher).
pub fn invalid_query(err: &actix_web::error::QueryPayloadError) -> ApiError {
    ApiError::new(ErrorCode::InvalidRequest, format!("invalid query: {err}"))
}

/// Maps path failures to 404.
pub fn path_error(_: actix_web::error::PathError, _: &actix_web::HttpRequest) -> actix_web::Error {
    ApiError::not_found().into()
}

/// What a WebSocket sends before the `error` frame of its close.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preamble {
    /// Nothing.
    None,
    /// A `reset` frame: the session's position is no longer addressable.
    Reset,
    /// A final `cursor` frame, so the client resumes elsewhere losing nothing.
    Cursor,
}

/// How the end of a session reaches the wire, on both transports.
#[derive(Debug)]
pub struct SessionEnd {
    /// The WebSocket's `error` frame code and close code.
    pub ws: WsClose,
    /// What the WebSocket sends before its `error` frame.
    pub preamble: Preamble,
    /// The held `/updates` answer: `None` answers at once with no events,
    /// the session's cursor and the `Switchboard-Session-End` header naming
    /// `ws` ([`switchboard_protocol::error::SESSION_END_HEADER`]); `Some`
    /// answers with that error.
    pub updates: Option<ApiError>,
    /// The human-readable phrase of the `error` frame and the close.
    pub message: &'static str,
}

impl SessionEnd {
    /// The one mapping from why a session ends ([`CloseReason`], told by the
    /// feed or found while opening) to what each transport answers.
    pub fn of(reason: CloseReason) -> SessionEnd {
        let (ws, preamble, updates, message) = match reason {
            CloseReason::Displaced => (
                WsClose::Displaced,
                Preamble::None,
                None,
                "a newer connection for this token opened",
            ),
            CloseReason::Revoked => (
                WsClose::CredentialRevoked,
                Preamble::None,
                Some(ApiError::unauthorized()),
                "the credential was rotated or revoked",
            ),
            CloseReason::Suspended(suspension) => (
                match suspension {
                    Suspension::Participant => WsClose::AccountSuspended,
                    Suspension::Bay => WsClose::BaySuspended,
                },
                Preamble::None,
                Some(ApiError::suspended(suspension)),
                suspension_wire(suspension).1,
            ),
            CloseReason::LogReset => {
                let message =
                    "the replay buffer was reset; catch up over REST and resume without a cursor";
                (
                    WsClose::LogReset,
                    Preamble::Reset,
                    Some(ApiError::new(ErrorCode::CursorExpired, message)),
                    message,
                )
            }
            CloseReason::Draining => (
                WsClose::GoingAway,
                Preamble::Cursor,
                None,
                "the server is going away; resume on another node",
            ),
            CloseReason::TooSlow => (
                WsClose::SlowConsumer,
                Preamble::None,
                None,
                "the connection fell too far behind; resume with the last cursor",
            ),
        };
        SessionEnd {
            ws,
            preamble,
            updates,
            message,
        }
    }
}

impl ApiError {
    /// The WebSocket close of a session that could not open with this error.
    pub fn ws_close(&self) -> WsClose {
        WsClose::Failed(self.code)
    }
}
