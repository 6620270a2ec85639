//! The JSON error body and its codes. Every error the gateway returns is
//! `{"error": "<snake_case>", "code": "<UPPER_CASE>", "message": "<human text>"}`.
//!
//! Also how a WebSocket ends, the error of that transport: [`WsClose`] (the
//! `code` of the final `error` frame) and the [`close`] codes it maps to.

use serde::{Deserialize, Serialize};

/// Machine-readable error codes. Each has a fixed HTTP status (see
/// [`ErrorCode::status`]) and a snake_case twin for `error`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    /// 400: the request line or a header is not valid HTTP/1.1 (RFC 9112
    /// §3, §5), so no route was looked at.
    MalformedRequest,
    /// 400: body is not valid JSON or misses/mistypes a field.
    InvalidJson,
    /// 400: a field has an invalid value.
    InvalidRequest,
    /// 400: `content` empty or above the limit (protocol: 1..32,000 chars).
    InvalidContent,
    /// 400: `replyToMessageId` outside this conversation (protocol §11).
    InvalidReplyTarget,
    /// 400: the `cursor` parameter is not a cursor this server issued.
    InvalidCursor,
    /// 400: the `Idempotency-Key` header (or `clientId`) is empty, longer
    /// than 255 characters or not printable ASCII.
    InvalidIdempotencyKey,
    /// 400: a reaction's `emoji` is not one emoji.
    InvalidReaction,
    /// 400: a message carries both a `card` and attachments (protocol v1.11).
    CardWithAttachments,
    /// 400: `card.type` is not `card.calendar` or `card.email` (protocol v1.11).
    CardTypeNotSendable,
    /// 400: a card payload field is missing, unknown or malformed; the
    /// message names the field (protocol v1.11).
    InvalidCardPayload,
    /// 400: fewer than two answers, more than ten, or two that are the
    /// same word (protocol v1.12).
    InvalidPoll,
    /// 400: a second answer on a poll that takes one (protocol v1.12).
    PollSingleChoice,
    /// 400: an answer index the poll does not offer (protocol v1.12).
    InvalidOptionIndex,
    /// 400: a webhook URL that is not an absolute `https://` URL with a host,
    /// without userinfo or fragment, of at most 2,048 characters (protocol
    /// §11, `POST /webhook`).
    InvalidWebhookUrl,
    /// 400: a webhook URL whose host is or resolves to a loopback, private,
    /// link-local, CGNAT, multicast, documentation or cloud-metadata address
    /// (protocol §11, `POST /webhook`; SSRF defence).
    WebhookDestinationForbidden,
    /// 400: a summary's `throughMessageId` is not a message of the
    /// conversation, or `throughCreatedAt` is not that message's time
    /// (docs/summary.md).
    InvalidSummaryBoundary,
    /// 400: a summary item cites a source message id that is not a message
    /// of the conversation, or one after the summary's boundary
    /// (docs/summary.md).
    InvalidSummarySource,
    /// 400: a pairing code that does not redeem: unknown, expired or
    /// already used, one answer for all three so it is no oracle (protocol
    /// §2, `POST /pair`).
    InvalidPairingCode,
    /// 401: missing, unknown, rotated or revoked token (protocol §2).
    Unauthorized,
    /// 403: not a participant of that conversation (context / messages GET).
    NotParticipant,
    /// 403: a member may see the object but not do this to it (edit another
    /// member's message, close another member's poll without being admin).
    Forbidden,
    /// 403: an operator suspended this participant. A standing refusal, not
    /// a credential problem: the same token works again once reinstated
    /// (BayChat CLI 0.23.1 `relay/updates.js` waits it out).
    AccountSuspended,
    /// 403: an operator suspended the caller's whole Bay; as
    /// [`ErrorCode::AccountSuspended`] for every participant of it.
    BaySuspended,
    /// 403: only the Bay's designated summarizer agent may write a
    /// conversation's summary (docs/summary.md).
    NotSummarizer,
    /// 404: unknown route or object (and non-participant sends, protocol §7).
    NotFound,
    /// 404: no such poll, or not in a room the caller is in; the two are
    /// deliberately indistinguishable (protocol v1.12).
    PollNotFound,
    /// 405.
    MethodNotAllowed,
    /// 409: an object with that id already exists.
    AlreadyExists,
    /// 409: the cursor fell out of the replay buffer or its log epoch ended (protocol §11).
    CursorExpired,
    /// 409: an `Idempotency-Key` reused with a different request body.
    IdempotencyKeyReused,
    /// 409: the poll is closed (protocol v1.12).
    PollClosed,
    /// 409: a draft append whose `offset` lies beyond the draft's length;
    /// the error carries the `length` to resume from.
    AppendGap,
    /// 409: a draft append overlapping accepted text that it disagrees with.
    AppendConflict,
    /// 409: the message is not an open draft (never streamed, or already
    /// completed, cancelled or failed).
    DraftClosed,
    /// 409: a member added to or removed from a DM or AGENT_CHAT, which
    /// keeps exactly its two members (docs/conversations.md).
    DirectMembersFixed,
    /// 409: removing a DEDICATED room's designated agent; change the
    /// policy first (docs/conversations.md).
    MemberIsDesignatedAgent,
    /// 409: a summary whose boundary lies before the stored summary's:
    /// the stored one covers more and stays (docs/summary.md).
    SummaryStale,
    /// 409: `POST /agents/{id}/ask` or `/send` named an agent that is not
    /// a connector (protocol §9).
    NotAConnector,
    /// 409: the connector an `ask` or `send` named is suspended by an
    /// operator, or was suspended while the call waited (protocol §9).
    ConnectorSuspended,
    /// 410: the message was deleted (an edit of it, or a retried send whose
    /// message has since been deleted: it is never recreated).
    MessageDeleted,
    /// 410: the room's links expired after its inactivity timeout (rooms by link).
    RoomExpired,
    /// 408: a request body that did not arrive within
    /// `timing.request_body_timeout` (a stalled or trickling upload).
    RequestTimeout,
    /// 403: a link author an operator removed from the room's conversation
    /// writes again; refused until an operator adds it back (rooms by link).
    AuthorRemoved,
    /// 403: a new link author in a room that counts `rooms.max_authors`
    /// already; known authors keep writing (rooms by link).
    RoomAuthorsFull,
    /// 413: request body above the configured limit.
    PayloadTooLarge,
    /// 414: a GET-only send's path and query pass 4,096 bytes (rooms by link).
    UriTooLong,
    /// 415.
    UnsupportedMediaType,
    /// 429: the 20/min `/updates` bucket is spent (protocol §11).
    UpdatesRateLimited,
    /// 429: the 60/min agent budget is spent.
    RateLimited,
    /// 429: `?refresh=1` was asked too often for this conversation
    /// (`limits.summary_refresh_max` per `limits.summary_refresh_window`,
    /// 3 per 5 minutes by default; docs/summary.md).
    SummaryRefreshLimited,
    /// 403: a signed attachment URL whose signature is altered or whose
    /// `exp` has passed (protocol §10: the signature is the credential and
    /// it expires). Fetch a fresh one.
    InvalidSignature,
    /// 409: one of a send's attachment ids cannot be attached: unknown,
    /// another Bay's or uploader's, already attached, or held by another
    /// send. Which one is never said; nothing was sent (protocol §10).
    AttachmentConflict,
    /// 410: the file's message was deleted, and the file with it.
    AttachmentGone,
    /// 413: an upload above the Bay's cap (at most 25 MB, protocol §10).
    FileTooLarge,
    /// 416: a download's `Range` lies outside the file.
    RangeNotSatisfiable,
    /// 415: an upload whose bytes are not one of the allowed types
    /// (protocol §10: images, PDF, Office documents, text, CSV, zip).
    UnsupportedFileType,
    /// 500.
    Internal,
    /// 502: the connector answered the relayed call with an error; the
    /// message carries the connector's (docs/connectors.md).
    ConnectorFailed,
    /// 501: the feature is not served by this gateway.
    NotImplemented,
    /// 503: the store cannot be reached; retry after `Retry-After`.
    StoreUnavailable,
    /// 504: the connector did not answer within
    /// `timing.connector_answer_timeout` (30 s by default).
    ConnectorTimeout,
    /// 503: the node is draining or full.
    Unavailable,
}

impl ErrorCode {
    /// HTTP status of the code.
    pub fn status(self) -> u16 {
        use ErrorCode::*;
        match self {
            MalformedRequest
            | InvalidJson
            | InvalidRequest
            | InvalidContent
            | InvalidReplyTarget
            | InvalidCursor
            | InvalidIdempotencyKey
            | InvalidReaction
            | CardWithAttachments
            | CardTypeNotSendable
            | InvalidCardPayload
            | InvalidPoll
            | PollSingleChoice
            | InvalidOptionIndex
            | InvalidWebhookUrl
            | WebhookDestinationForbidden
            | InvalidSummaryBoundary
            | InvalidSummarySource => 400,
            InvalidPairingCode => 400,
            Unauthorized => 401,
            NotParticipant | Forbidden | AccountSuspended | BaySuspended | NotSummarizer
            | InvalidSignature | AuthorRemoved | RoomAuthorsFull => 403,
            NotFound | PollNotFound => 404,
            MethodNotAllowed => 405,
            AlreadyExists
            | CursorExpired
            | IdempotencyKeyReused
            | PollClosed
            | AppendGap
            | AppendConflict
            | DraftClosed
            | SummaryStale
            | DirectMembersFixed
            | MemberIsDesignatedAgent
            | NotAConnector
            | ConnectorSuspended
            | AttachmentConflict => 409,
            MessageDeleted | RoomExpired | AttachmentGone => 410,
            RequestTimeout => 408,
            PayloadTooLarge | FileTooLarge => 413,
            UriTooLong => 414,
            UnsupportedMediaType | UnsupportedFileType => 415,
            RangeNotSatisfiable => 416,
            UpdatesRateLimited | RateLimited | SummaryRefreshLimited => 429,
            Internal => 500,
            NotImplemented => 501,
            ConnectorFailed => 502,
            StoreUnavailable | Unavailable => 503,
            ConnectorTimeout => 504,
        }
    }

    /// The UPPER_CASE wire form (`code`).
    pub fn as_str(self) -> &'static str {
        use ErrorCode::*;
        match self {
            MalformedRequest => "MALFORMED_REQUEST",
            InvalidJson => "INVALID_JSON",
            InvalidRequest => "INVALID_REQUEST",
            InvalidContent => "INVALID_CONTENT",
            InvalidReplyTarget => "INVALID_REPLY_TARGET",
            InvalidCursor => "INVALID_CURSOR",
            InvalidIdempotencyKey => "INVALID_IDEMPOTENCY_KEY",
            InvalidReaction => "INVALID_REACTION",
            CardWithAttachments => "CARD_WITH_ATTACHMENTS",
            CardTypeNotSendable => "CARD_TYPE_NOT_SENDABLE",
            InvalidCardPayload => "INVALID_CARD_PAYLOAD",
            InvalidPoll => "INVALID_POLL",
            PollSingleChoice => "POLL_SINGLE_CHOICE",
            InvalidOptionIndex => "INVALID_OPTION_INDEX",
            InvalidWebhookUrl => "INVALID_WEBHOOK_URL",
            WebhookDestinationForbidden => "WEBHOOK_DESTINATION_FORBIDDEN",
            InvalidSummaryBoundary => "INVALID_SUMMARY_BOUNDARY",
            InvalidSummarySource => "INVALID_SUMMARY_SOURCE",
            InvalidPairingCode => "INVALID_PAIRING_CODE",
            Unauthorized => "UNAUTHORIZED",
            NotParticipant => "NOT_PARTICIPANT",
            Forbidden => "FORBIDDEN",
            AccountSuspended => "ACCOUNT_SUSPENDED",
            BaySuspended => "BAY_SUSPENDED",
            NotSummarizer => "NOT_SUMMARIZER",
            NotFound => "NOT_FOUND",
            PollNotFound => "POLL_NOT_FOUND",
            MethodNotAllowed => "METHOD_NOT_ALLOWED",
            AlreadyExists => "ALREADY_EXISTS",
            CursorExpired => "CURSOR_EXPIRED",
            IdempotencyKeyReused => "IDEMPOTENCY_KEY_REUSED",
            PollClosed => "POLL_CLOSED",
            AppendGap => "APPEND_GAP",
            AppendConflict => "APPEND_CONFLICT",
            DraftClosed => "DRAFT_CLOSED",
            SummaryStale => "SUMMARY_STALE",
            NotAConnector => "NOT_A_CONNECTOR",
            ConnectorSuspended => "CONNECTOR_SUSPENDED",
            ConnectorFailed => "CONNECTOR_FAILED",
            ConnectorTimeout => "CONNECTOR_TIMEOUT",
            DirectMembersFixed => "DIRECT_MEMBERS_FIXED",
            MemberIsDesignatedAgent => "MEMBER_IS_DESIGNATED_AGENT",
            MessageDeleted => "MESSAGE_DELETED",
            RoomExpired => "ROOM_EXPIRED",
            AuthorRemoved => "AUTHOR_REMOVED",
            RoomAuthorsFull => "ROOM_AUTHORS_FULL",
            PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            UriTooLong => "URI_TOO_LONG",
            RequestTimeout => "REQUEST_TIMEOUT",
            UnsupportedMediaType => "UNSUPPORTED_MEDIA_TYPE",
            UpdatesRateLimited => "UPDATES_RATE_LIMITED",
            RateLimited => "RATE_LIMITED",
            SummaryRefreshLimited => "SUMMARY_REFRESH_LIMITED",
            InvalidSignature => "INVALID_SIGNATURE",
            AttachmentConflict => "ATTACHMENT_CONFLICT",
            AttachmentGone => "ATTACHMENT_GONE",
            FileTooLarge => "FILE_TOO_LARGE",
            UnsupportedFileType => "UNSUPPORTED_FILE_TYPE",
            RangeNotSatisfiable => "RANGE_NOT_SATISFIABLE",
            Internal => "INTERNAL",
            NotImplemented => "NOT_IMPLEMENTED",
            StoreUnavailable => "STORE_UNAVAILABLE",
            Unavailable => "UNAVAILABLE",
        }
    }

    /// The snake_case wire form (`error`), e.g. `cursor_expired`.
    pub fn snake(self) -> String {
        self.as_str().to_ascii_lowercase()
    }
}

/// The JSON error body. HTTP errors carry it with the code's status, and
/// `Retry-After` (seconds) on 429 and 503.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(examples(json!({
    "error": "cursor_expired",
    "code": "CURSOR_EXPIRED",
    "message": "cursor expired: it fell out of the replay buffer or the log was reset"
})))]
pub struct ErrorBody {
    /// The snake_case twin of `code`, e.g. `cursor_expired`.
    pub error: String,
    /// The UPPER_CASE machine-readable code, e.g. `CURSOR_EXPIRED`.
    #[schema(value_type = ErrorCode)]
    pub code: String,
    /// Human-readable, lowercase text; not meant to be matched on.
    pub message: String,
    /// For `APPEND_GAP`, `APPEND_CONFLICT` and a draft grown past the
    /// content limit: the draft's length in Unicode scalar values, where
    /// the author resumes. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length: Option<u64>,
}

impl ErrorBody {
    /// Builds the body for `code` with a human-readable, lowercase `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorBody {
            error: code.snake(),
            code: code.as_str().to_owned(),
            message: message.into(),
            length: None,
        }
    }
}

/// WebSocket close codes (protocol §11). Which close uses which code is
/// [`WsClose::close_code`].
pub mod close {
    /// Displaced by a newer connection for the same token. Do not reconnect.
    pub const DISPLACED: u16 = 4000;
    /// The credential expired or was revoked.
    pub const CREDENTIAL_REVOKED: u16 = 4001;
    /// The client broke the framing contract (non-JSON, binary, unknown frame or fields).
    pub const FRAMING_VIOLATION: u16 = 4002;
    /// The server is going away (drain); resume on another node.
    pub const GOING_AWAY: u16 = 4003;
    /// An operator suspended the participant or its Bay. Do not reconnect
    /// in a loop: the upgrade answers 403 until an operator reinstates it.
    pub const SUSPENDED: u16 = 4004;
    /// Standard close: the client broke the WebSocket protocol itself
    /// (unmasked frame, bad opcode or length, reserved bits, a fragmented
    /// or oversized control frame, a close code RFC 6455 §7.4 does not allow).
    pub const PROTOCOL_ERROR: u16 = 1002;
    /// Standard close: a text message (or a close frame's reason) is not
    /// UTF-8 (RFC 6455 §8.1, §7.4.1).
    pub const INVALID_PAYLOAD: u16 = 1007;
    /// Standard close: the client broke a server policy (here: it fell too
    /// far behind reading).
    pub const POLICY_VIOLATION: u16 = 1008;
    /// Standard close: a message was larger than the server accepts.
    pub const MESSAGE_TOO_BIG: u16 = 1009;
}

/// Why the server closes a WebSocket (protocol §11 close codes). Its wire
/// string ([`WsClose::as_str`]) is the `code` of the `error` frame sent just
/// before the close, and it decides the close code ([`WsClose::close_code`]).
/// The gateway maps every way a session ends to one of these in one place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WsClose {
    /// 4000: a newer connection (WebSocket or `/updates`) of the same token
    /// opened, on any node. Do not reconnect in a loop.
    Displaced,
    /// 4001: the token was rotated or revoked; re-authenticate.
    CredentialRevoked,
    /// 4004: an operator suspended the participant (`ACCOUNT_SUSPENDED`).
    AccountSuspended,
    /// 4004: an operator suspended the participant's Bay (`BAY_SUSPENDED`).
    BaySuspended,
    /// 4002: the client broke the framing contract (non-JSON text, a binary
    /// message, an unknown `t` or field, a second `hello`).
    FramingViolation,
    /// 4002: no `hello` within the hello timeout (10 s by default).
    HelloTimeout,
    /// 4003: the node is draining; a final `cursor` frame precedes the
    /// close. Resume on another node.
    GoingAway,
    /// 4003: the Bay's replay buffer was lost; a `reset` frame precedes the
    /// close. Reconnect without a cursor.
    LogReset,
    /// 4003: the session could not open (store or node trouble); the code
    /// is the one the HTTP answer would carry, e.g. `STORE_UNAVAILABLE`.
    Failed(ErrorCode),
    /// 1008: the client fell more than `limits.max_outbound_queue_bytes`
    /// behind; it resumes with its last cursor and loses nothing.
    SlowConsumer,
    /// 1009: a frame above `limits.max_ws_frame_bytes`.
    MessageTooBig,
    /// 1007: a text message, whole or across its fragments, or a close
    /// frame's reason, is not UTF-8 (RFC 6455 §8.1).
    InvalidPayload,
    /// 1002: the client broke the WebSocket protocol itself (unmasked
    /// frame, bad opcode or length, reserved bits, a fragmented or
    /// oversized control frame, a continuation with no message to continue
    /// or a new message inside one, a close code RFC 6455 §7.4 does not allow).
    ProtocolError,
}

impl WsClose {
    /// Every close the server initiates, with `Failed` once per code an
    /// opening can fail with.
    pub const ALL: [WsClose; 15] = [
        WsClose::Displaced,
        WsClose::CredentialRevoked,
        WsClose::AccountSuspended,
        WsClose::BaySuspended,
        WsClose::FramingViolation,
        WsClose::HelloTimeout,
        WsClose::GoingAway,
        WsClose::LogReset,
        WsClose::Failed(ErrorCode::StoreUnavailable),
        WsClose::Failed(ErrorCode::Unavailable),
        WsClose::Failed(ErrorCode::Internal),
        WsClose::SlowConsumer,
        WsClose::MessageTooBig,
        WsClose::InvalidPayload,
        WsClose::ProtocolError,
    ];

    /// The WebSocket close code (protocol §11 for 4000–4003, this server's
    /// 4004 for suspension, RFC 6455 for the 1xxx codes).
    pub fn close_code(self) -> u16 {
        match self {
            WsClose::Displaced => close::DISPLACED,
            WsClose::CredentialRevoked => close::CREDENTIAL_REVOKED,
            WsClose::AccountSuspended | WsClose::BaySuspended => close::SUSPENDED,
            WsClose::FramingViolation | WsClose::HelloTimeout => close::FRAMING_VIOLATION,
            WsClose::GoingAway | WsClose::LogReset | WsClose::Failed(_) => close::GOING_AWAY,
            WsClose::SlowConsumer => close::POLICY_VIOLATION,
            WsClose::MessageTooBig => close::MESSAGE_TOO_BIG,
            WsClose::InvalidPayload => close::INVALID_PAYLOAD,
            WsClose::ProtocolError => close::PROTOCOL_ERROR,
        }
    }

    /// The UPPER_CASE wire form: the `code` of the `error` frame.
    pub fn as_str(self) -> &'static str {
        match self {
            WsClose::Displaced => "DISPLACED",
            WsClose::CredentialRevoked => "CREDENTIAL_REVOKED",
            WsClose::AccountSuspended => ErrorCode::AccountSuspended.as_str(),
            WsClose::BaySuspended => ErrorCode::BaySuspended.as_str(),
            WsClose::FramingViolation => "FRAMING_VIOLATION",
            WsClose::HelloTimeout => "HELLO_TIMEOUT",
            WsClose::GoingAway => "GOING_AWAY",
            WsClose::LogReset => "LOG_RESET",
            WsClose::Failed(code) => code.as_str(),
            WsClose::SlowConsumer => "SLOW_CONSUMER",
            WsClose::MessageTooBig => "MESSAGE_TOO_BIG",
            WsClose::InvalidPayload => "INVALID_PAYLOAD",
            WsClose::ProtocolError => "PROTOCOL_ERROR",
        }
    }
}

/// The response header of a held `GET /updates` that a session end
/// answered (200, no events, the session's cursor) rather than its wait or
/// an event: its value is the [`WsClose::as_str`] of that end, the code a
/// WebSocket's `error` frame would carry (`DISPLACED`, `GOING_AWAY`,
/// `SLOW_CONSUMER`). Protocol §11 keeps the displaced poll's answer an
/// empty 200 (older clients poll again); this header is how a client tells
/// "displaced: stop" from "nothing happened: poll again" without guessing
/// from timing. Absent on every other answer.
pub const SESSION_END_HEADER: &str = "Switchboard-Session-End";

impl Serialize for WsClose {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_expired_body_matches_protocol() {
        let body = serde_json::to_value(ErrorBody::new(ErrorCode::CursorExpired, "x")).unwrap();
        assert_eq!(body["error"], "cursor_expired");
        assert_eq!(body["code"], "CURSOR_EXPIRED");
        assert_eq!(ErrorCode::CursorExpired.status(), 409);
    }

    /// The OpenAPI schema lists every code in the form `code` carries.
    #[test]
    fn schema_lists_every_code_in_wire_form() {
        use utoipa::PartialSchema;
        let schema = serde_json::to_value(ErrorCode::schema()).unwrap();
        let listed = schema["enum"].as_array().unwrap();
        assert_eq!(listed.len(), 63, "{schema}");
        for value in listed {
            let code: ErrorCode = serde_json::from_value(value.clone()).unwrap();
            assert_eq!(value, code.as_str());
        }
    }

    /// The README's table of errors names every code a client may meet
    /// (all but `NOT_IMPLEMENTED`, which no route answers).
    #[test]
    fn the_readme_lists_every_code() {
        use utoipa::PartialSchema;
        let readme = include_str!("../../README.md");
        let schema = serde_json::to_value(ErrorCode::schema()).unwrap();
        let missing: Vec<&str> = schema["enum"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v.as_str())
            .filter(|c| *c != "NOT_IMPLEMENTED" && !readme.contains(&format!("`{c}`")))
            .collect();
        assert!(missing.is_empty(), "README.md does not list {missing:?}");
    }

    /// Each close has its own wire string, and the protocol's four codes
    /// keep their §11 meaning.
    #[test]
    fn ws_closes_have_distinct_wire_strings_and_the_protocol_codes() {
        let mut seen = std::collections::HashSet::new();
        for c in WsClose::ALL {
            assert!(seen.insert(c.as_str()), "{c:?} repeats {}", c.as_str());
            assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
        }
        assert_eq!(WsClose::Displaced.close_code(), 4000);
        assert_eq!(WsClose::CredentialRevoked.close_code(), 4001);
        assert_eq!(WsClose::FramingViolation.close_code(), 4002);
        assert_eq!(WsClose::HelloTimeout.close_code(), 4002);
        assert_eq!(WsClose::GoingAway.close_code(), 4003);
        assert_eq!(WsClose::AccountSuspended.close_code(), 4004);
        assert_eq!(WsClose::BaySuspended.as_str(), "BAY_SUSPENDED");
        assert_eq!(
            WsClose::Failed(ErrorCode::StoreUnavailable).as_str(),
            "STORE_UNAVAILABLE"
        );
    }

    #[test]
    fn serde_form_matches_as_str() {
        for code in [
            ErrorCode::UpdatesRateLimited,
            ErrorCode::NotParticipant,
            ErrorCode::InvalidJson,
            ErrorCode::InvalidWebhookUrl,
            ErrorCode::WebhookDestinationForbidden,
            ErrorCode::InvalidPairingCode,
        ] {
            assert_eq!(serde_json::to_value(code).unwrap(), code.as_str());
        }
    }
}
