//! The JSON error body and its codes. Every error the gateway returns is
//! `{"error": "<snake_case>", "code": "<UPPER_CASE>", "message": "<human text>"}`.

use serde::{Deserialize, Serialize};

/// Machine-readable error codes. Each has a fixed HTTP status (see
/// [`ErrorCode::status`]) and a snake_case twin for `error`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
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
    /// 401: missing, unknown, rotated or revoked token (protocol §2).
    Unauthorized,
    /// 403: not a participant of that conversation (context / messages GET).
    NotParticipant,
    /// 403: a member may see the object but not do this to it (edit another
    /// member's message, close another member's poll without being admin).
    Forbidden,
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
    /// 410: the message was deleted (an edit of it, or a retried send whose
    /// message has since been deleted: it is never recreated).
    MessageDeleted,
    /// 413: request body above the configured limit.
    PayloadTooLarge,
    /// 415.
    UnsupportedMediaType,
    /// 429: the 20/min `/updates` bucket is spent (protocol §11).
    UpdatesRateLimited,
    /// 429: the 60/min agent budget is spent.
    RateLimited,
    /// 500.
    Internal,
    /// 503: the store cannot be reached; retry after `Retry-After`.
    StoreUnavailable,
    /// 503: the node is draining or full.
    Unavailable,
}

impl ErrorCode {
    /// HTTP status of the code.
    pub fn status(self) -> u16 {
        use ErrorCode::*;
        match self {
            InvalidJson
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
            | WebhookDestinationForbidden => 400,
            Unauthorized => 401,
            NotParticipant | Forbidden => 403,
            NotFound | PollNotFound => 404,
            MethodNotAllowed => 405,
            AlreadyExists | CursorExpired | IdempotencyKeyReused | PollClosed => 409,
            MessageDeleted => 410,
            PayloadTooLarge => 413,
            UnsupportedMediaType => 415,
            UpdatesRateLimited | RateLimited => 429,
            Internal => 500,
            StoreUnavailable | Unavailable => 503,
        }
    }

    /// The UPPER_CASE wire form (`code`).
    pub fn as_str(self) -> &'static str {
        use ErrorCode::*;
        match self {
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
            Unauthorized => "UNAUTHORIZED",
            NotParticipant => "NOT_PARTICIPANT",
            Forbidden => "FORBIDDEN",
            NotFound => "NOT_FOUND",
            PollNotFound => "POLL_NOT_FOUND",
            MethodNotAllowed => "METHOD_NOT_ALLOWED",
            AlreadyExists => "ALREADY_EXISTS",
            CursorExpired => "CURSOR_EXPIRED",
            IdempotencyKeyReused => "IDEMPOTENCY_KEY_REUSED",
            PollClosed => "POLL_CLOSED",
            MessageDeleted => "MESSAGE_DELETED",
            PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            UnsupportedMediaType => "UNSUPPORTED_MEDIA_TYPE",
            UpdatesRateLimited => "UPDATES_RATE_LIMITED",
            RateLimited => "RATE_LIMITED",
            Internal => "INTERNAL",
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
}

impl ErrorBody {
    /// Builds the body for `code` with a human-readable, lowercase `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorBody {
            error: code.snake(),
            code: code.as_str().to_owned(),
            message: message.into(),
        }
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
        assert_eq!(listed.len(), 33, "{schema}");
        for value in listed {
            let code: ErrorCode = serde_json::from_value(value.clone()).unwrap();
            assert_eq!(value, code.as_str());
        }
    }

    #[test]
    fn serde_form_matches_as_str() {
        for code in [
            ErrorCode::UpdatesRateLimited,
            ErrorCode::NotParticipant,
            ErrorCode::InvalidJson,
            ErrorCode::InvalidWebhookUrl,
            ErrorCode::WebhookDestinationForbidden,
        ] {
            assert_eq!(serde_json::to_value(code).unwrap(), code.as_str());
        }
    }
}
