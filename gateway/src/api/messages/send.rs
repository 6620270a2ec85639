//! `POST /conversations/{id}/messages`: the checks of a send (content,
//! card, metadata, attachments), its idempotency key and fingerprint, and
//! `post` / `post_and_answer`, which polls post through too.

use crate::api::body::Object;
use crate::api::files::attach;
use crate::api::views::RestMessage;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::{post, web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use switchboard_actors::conversation::{Post, PostOutcome};
use switchboard_actors::feed::ActivityKind;
use switchboard_actors::model::StoredMessage;
use switchboard_actors::store::{Budget, Idempotency};
use switchboard_protocol::card::{validate_card, Card};
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use switchboard_protocol::ids::{ConversationId, MessageId};
use switchboard_protocol::poll::PollState;
use switchboard_protocol::usage::{validate_usage, Usage};
use utoipa::ToSchema;

/// Longest idempotency key accepted, in characters.
pub const MAX_IDEMPOTENCY_KEY: usize = 255;

/// Body of `POST …/messages`.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(examples(json!({"content": "On it, @Ana.", "replyToMessageId": null, "metadata": {"runId": "r-42"}})))]
pub(crate) struct SendBody {
    /// The text, 1 to `limits.max_content_chars` (32,000 by default)
    /// characters, not blank. `@Name` mentions route to agents (protocol §7).
    /// With a `card`, the plain-text fallback shown where the card cannot
    /// render (protocol v1.11).
    #[schema(required = true, value_type = String, min_length = 1, max_length = 32000, pattern = "[^\\t\\n\\x0B\\f\\r \\x85\\xA0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]")]
    #[serde(default, deserialize_with = "present")]
    content: Option<serde_json::Value>,
    /// Quote an earlier message of the same conversation.
    #[schema(value_type = Option<MessageId>)]
    reply_to_message_id: Option<String>,
    /// Free-form object stored with the message (`addressedAgents` is
    /// server-only and dropped; `type` is set by the server for cards).
    #[schema(value_type = Option<Object>)]
    metadata: Option<serde_json::Value>,
    /// `{type, payload}` with `type` `card.calendar` or `card.email`
    /// (protocol v1.11); payloads are strict and refused field by field.
    #[schema(value_type = Option<Card>)]
    card: Option<serde_json::Value>,
    /// The idempotency key, as an alternative to the `Idempotency-Key`
    /// header (the same rules; when both are given they must be equal).
    #[schema(min_length = 1, max_length = 255, pattern = "^[ -~]*$")]
    client_id: Option<String>,
    /// Open a draft that you stream into with `…/append` and finalize with
    /// `…/complete` (docs/websocket.md, "Streaming replies"). `content` is
    /// then optional (the text to start with) and routing runs at completion.
    stream: Option<bool>,
    /// What producing the message cost (protocol §11 `usage`): `model` (a
    /// string) and token counts (non-negative integers) under the sender's
    /// own names, e.g. `{"model": "deepseek-chat", "inputTokens": 812,
    /// "outputTokens": 64}`; at most 16 fields. Stored with the message
    /// and shown on REST. A bad shape is 400 INVALID_REQUEST naming the field.
    #[schema(value_type = Option<Object>)]
    usage: Option<serde_json::Value>,
    /// Files uploaded with `POST /attachments`, 1 to 10, in render order
    /// (protocol §10). Not with `attachmentId`, a `card` or `stream`.
    #[schema(value_type = Option<Vec<AttachmentRef>>)]
    attachments: Option<serde_json::Value>,
    /// The legacy single-file form of `attachments`.
    #[schema(value_type = Option<String>)]
    attachment_id: Option<serde_json::Value>,
}

/// One item of a send's `attachments`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct AttachmentRef {
    /// The id `POST /attachments` answered.
    #[schema(rename = "attachmentId")]
    attachment_id: String,
}

/// A field that is present, `null` included (`Some(Value::Null)`); with
/// `#[serde(default)]` an absent one is `None`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<serde_json::Value>, D::Error> {
    serde::Deserialize::deserialize(d).map(Some)
}

/// Checks the `content` a draft opens with: absent (or `null`) is `""`;
/// else a string of at most `max` characters (Unicode scalar values).
fn draft_start(content: serde_json::Value, max: usize) -> Result<String, ApiError> {
    match content {
        serde_json::Value::Null => Ok(String::new()),
        serde_json::Value::String(s) if s.chars().count() <= max => Ok(s),
        _ => Err(ApiError::new(
            ErrorCode::InvalidContent,
            format!("content of a draft must be a string of at most {max} characters (unicode scalar values)"),
        )),
    }
}

/// Checks `content` of a send or an edit: a string of 1 to `max`
/// characters (Unicode scalar values), not blank.
pub(crate) fn checked_content(content: serde_json::Value, max: usize) -> Result<String, ApiError> {
    let serde_json::Value::String(content) = content else {
        return Err(ApiError::new(
            ErrorCode::InvalidContent,
            "content must be a string",
        ));
    };
    let chars = content.chars().count();
    if chars == 0 || chars > max || content.trim().is_empty() {
        return Err(ApiError::new(
            ErrorCode::InvalidContent,
            format!("content must be 1 to {max} characters (unicode scalar values) and not blank"),
        ));
    }
    Ok(content)
}

/// The send's idempotency key from the `Idempotency-Key` header (a plain
/// token, or a structured-field string as the IETF httpapi draft defines
/// it: `"..."` with `\"` and `\\` escapes, no parameters) or `clientId`:
/// 1–255 printable ASCII characters. Two headers, or a header and a
/// `clientId` that differ, are refused.
pub(crate) fn idempotency_key(
    req: &HttpRequest,
    client_id: Option<String>,
) -> Result<Option<String>, ApiError> {
    let invalid = |why: &str| ApiError::new(ErrorCode::InvalidIdempotencyKey, why.to_owned());
    let mut values = req.headers().get_all("idempotency-key");
    let header = match (values.next(), values.next()) {
        (None, _) => None,
        (Some(_), Some(_)) => return Err(invalid("send one Idempotency-Key header, not several")),
        (Some(v), None) => {
            let raw = v
                .to_str()
                .map_err(|_| invalid("Idempotency-Key must be printable ascii"))?
                .trim();
            Some(if raw.starts_with('"') {
                sf_string(raw).ok_or_else(|| {
                    invalid("Idempotency-Key is a malformed quoted string (or has parameters)")
                })?
            } else {
                raw.to_owned()
            })
        }
    };
    let key = match (header, client_id) {
        (Some(h), Some(c)) if h != c => {
            return Err(invalid(
                "Idempotency-Key and clientId differ; send one, or the same value",
            ))
        }
        (Some(k), _) | (None, Some(k)) => k,
        (None, None) => return Ok(None),
    };
    let printable = key.bytes().all(|b| (0x20..0x7f).contains(&b));
    if key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY || !printable {
        return Err(invalid(
            "an idempotency key is 1 to 255 printable ascii characters",
        ));
    }
    Ok(Some(key))
}

/// The value of a structured-field string (RFC 8941 §3.3.3): `raw` is
/// `"` … `"`, with `\"` and `\\` as the only escapes and nothing after
/// the closing quote.
fn sf_string(raw: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = raw.strip_prefix('"')?.chars();
    loop {
        match chars.next()? {
            '\\' => match chars.next()? {
                c @ ('"' | '\\') => out.push(c),
                _ => return None,
            },
            '"' => return chars.next().is_none().then_some(out),
            c => out.push(c),
        }
    }
}

/// SHA-256 (hex) of the parts, each length-prefixed so no two lists of
/// parts hash alike.
fn digest(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p);
    }
    hex::encode(h.finalize())
}

/// What a send asks for, as the idempotency fingerprint covers it.
#[derive(Serialize)]
struct Fingerprint<'a> {
    conversation: &'a ConversationId,
    content: &'a str,
    reply_to: Option<&'a str>,
    metadata: &'a Option<serde_json::Value>,
    card: &'a Option<Card>,
    poll: Option<(&'a str, &'a [String], bool)>,
    stream: bool,
    usage: &'a Option<Usage>,
    attachments: &'a [String],
}

/// A validated send, ready for the conversation actor.
pub(crate) struct Send {
    pub conversation: ConversationId,
    pub content: String,
    pub reply_to: Option<String>,
    pub metadata: Option<serde_json::Value>,
    pub card: Option<Card>,
    pub poll: Option<PollState>,
    /// The validated `usage`, if sent.
    pub usage: Option<Usage>,
    pub key: Option<String>,
    /// Open a draft (`"stream": true`).
    pub stream: bool,
    /// Attachment ids, in render order (protocol §10); empty for none.
    pub attachments: Vec<String>,
    /// The caller's agent budget for the append to take from (Redis
    /// buckets, [`RateLimits::agent_budget`](crate::ratelimit::RateLimits::agent_budget));
    /// `None` when the request was counted already.
    pub budget: Option<Budget>,
}

/// Posts `send` for `caller` and answers as `POST …/messages` does:
/// 201 with the message; a retried idempotent send gets its first answer
/// again (201, `Idempotent-Replayed: true`), 409 when the key was used
/// for another request, 410 when its message was deleted since.
pub(crate) async fn post_and_answer(
    state: &AppState,
    caller: &Caller,
    send: Send,
) -> Result<HttpResponse, ApiError> {
    let posted = post(state, caller, send).await?;
    Ok(created(posted.replayed, &posted.message))
}

/// A send the conversation accepted: the message in the REST shape, and
/// whether it is the first answer of an idempotent retry.
pub(crate) struct Posted {
    pub message: RestMessage,
    pub replayed: bool,
}

/// 201 with `body`, marked `Idempotent-Replayed: true` for a retry.
pub(crate) fn created(replayed: bool, body: &impl Serialize) -> HttpResponse {
    let mut answer = HttpResponse::Created();
    if replayed {
        answer.insert_header(("Idempotent-Replayed", "true"));
    }
    answer.json(body)
}

/// Posts `send` for `caller`: the refusals of [`post_and_answer`], else
/// the stored (or, for a retry, the first) message.
pub(crate) async fn post(
    state: &AppState,
    caller: &Caller,
    send: Send,
) -> Result<Posted, ApiError> {
    let sender = &caller.principal.participant;
    let idempotency = send.key.as_deref().map(|key| Idempotency {
        key: digest(&[sender.id.as_str().as_bytes(), key.as_bytes()]),
        fingerprint: digest(&[serde_json::to_string(&Fingerprint {
            conversation: &send.conversation,
            content: &send.content,
            reply_to: send.reply_to.as_deref(),
            metadata: &send.metadata,
            card: &send.card,
            poll: send
                .poll
                .as_ref()
                .map(|p| (p.question.as_str(), p.options.as_slice(), p.allow_multiple)),
            stream: send.stream,
            usage: &send.usage,
            attachments: &send.attachments,
        })
        .unwrap_or_default()
        .as_bytes()]),
    });
    let bay = &caller.principal.bay;
    // A claim token only for a send with files (minting one is a ULID).
    let token = if send.attachments.is_empty() {
        String::new()
    } else {
        attach::claim_token(idempotency.as_ref().map(|i| i.key.as_str()))
    };
    let mut metadata = send.metadata;
    if !send.attachments.is_empty() {
        let files = attach::claim(state, bay, &sender.id, &send.attachments, &token).await?;
        metadata = Some(attach::metadata_with(metadata, &files));
    }
    let outcome = state
        .registry
        .conversation(bay, &send.conversation)
        .send(Post {
            sender: sender.clone(),
            content: send.content,
            reply_to: send.reply_to.map(MessageId),
            metadata,
            card: send.card,
            poll: send.poll,
            usage: send.usage,
            idempotency,
            stream: send.stream,
            budget: send.budget,
            received: std::time::Instant::now(),
        })
        .await
        .map_err(ApiError::from)
        .and_then(|r| r.map_err(ApiError::from));
    if !send.attachments.is_empty() {
        match &outcome {
            Ok(PostOutcome::Posted(m)) | Ok(PostOutcome::Duplicate(m)) => {
                let ids = &send.attachments;
                attach::link(state, bay, ids, &token, &send.conversation, &m.id).await;
            }
            _ => attach::release(state, bay, &send.attachments, &token).await,
        }
    }
    let outcome = outcome?;
    let reader = &sender.id;
    let answer = |m: &StoredMessage| RestMessage::of(m, reader, m.sender.clone());
    match outcome {
        PostOutcome::Posted(message) => {
            metrics::counter!(crate::metrics::MESSAGES_ACCEPTED).increment(1);
            state.registry.note_activity(
                &caller.principal.bay,
                sender.id.clone(),
                ActivityKind::Sent,
            );
            Ok(Posted {
                message: answer(&message),
                replayed: false,
            })
        }
        PostOutcome::Duplicate(first) if first.is_deleted() => Err(ApiError::new(
            ErrorCode::MessageDeleted,
            "the message this idempotency key created was deleted; it is not sent again",
        )),
        PostOutcome::Duplicate(first) => Ok(Posted {
            message: answer(&first),
            replayed: true,
        }),
        PostOutcome::KeyReused => Err(ApiError::new(
            ErrorCode::IdempotencyKeyReused,
            "this idempotency key was used for a different request",
        )),
        PostOutcome::RateLimited(wait) => Err(crate::ratelimit::agent_limited(wait)),
        PostOutcome::NotFound => Err(ApiError::not_found()),
        PostOutcome::InvalidReplyTarget => Err(ApiError::new(
            ErrorCode::InvalidReplyTarget,
            "replyToMessageId is not a message of this conversation",
        )),
    }
}

/// `POST /conversations/{id}/messages` `{content, replyToMessageId?,
/// metadata?, card?, usage?, clientId?}` → 201 with the stored message in the GET
/// shape. Non-participants get 404 (protocol §7: never confirm the id exists).
#[utoipa::path(
    operation_id = "sendMessage",
    tag = "agent",
    summary = "Post a message",
    description = "Stores the message and delivers it to every member over `/updates` and `/ws`; `@Name` mentions and the conversation's policy decide each agent's `shouldRespond`. Non-participants and unknown ids get 404 alike (protocol §7: never confirm an id exists).\n\nFiles (protocol §10): `attachments: [{attachmentId}]` (1 to 10, render order) or the legacy `attachmentId`, never both. Linking is all-or-nothing: an id that is unknown, another Bay's or uploader's, or already sent is 409 ATTACHMENT_CONFLICT and no message is created (which id is never said). Every copy of the message then carries `metadata.attachments[] {attachmentId, type, mimeType, sizeBytes, attachmentUrl}` with freshly signed URLs, and the legacy `metadata.attachmentId` / `attachmentUrl` of the first.\n\nIdempotent retries: send an `Idempotency-Key` header (or `clientId` in the body). Within the replay window (15 min by default) a retry with the same key and body, on any node, stores nothing and answers the first message again (201, `Idempotent-Replayed: true`); the same key with another body is 409 IDEMPOTENCY_KEY_REUSED; a retry whose message was deleted since is 410 MESSAGE_DELETED. Keys are scoped to their sender.",
    params(
        ("id" = String, Path, description = "Conversation id"),
        ("Idempotency-Key" = Option<String>, Header, description = "1–255 printable ASCII characters; a plain token or a quoted structured-field string", pattern = "^(?:[!#-~](?:[ -~]{0,253}[!-~])?|\"(?:[ !#-\\[\\]-~]|\\\\[\"\\\\]){1,255}\") *$"),
    ),
    request_body = SendBody,
    responses(
        (status = 201, description = "The stored message (or, for a retried idempotent send, the first one), in the GET shape", body = RestMessage),
        (status = 400, description = "INVALID_JSON, INVALID_CONTENT (`content` not a string, empty, blank or too long), INVALID_REPLY_TARGET, INVALID_IDEMPOTENCY_KEY, CARD_WITH_ATTACHMENTS, CARD_TYPE_NOT_SENDABLE, INVALID_CARD_PAYLOAD (names the field) or INVALID_REQUEST (`metadata` not an object, a bad `usage` (names the field), both attachment shapes, not 1 to 10 attachments, attachments on a streamed draft)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED: missing, unknown, rotated or revoked token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown conversation or not a member (never confirms the id exists)", body = ErrorBody),
        (status = 409, description = "IDEMPOTENCY_KEY_REUSED: the key was used with a different body; ATTACHMENT_CONFLICT: an attachment cannot be attached (nothing was sent)", body = ErrorBody),
        (status = 410, description = "MESSAGE_DELETED: the key's message was deleted since; it is not sent again", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE: body above `limits.max_body_bytes`", body = ErrorBody),
        (status = 415, description = "UNSUPPORTED_MEDIA_TYPE: content-type is not application/json", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED: the agent request budget (60/min by default) is spent", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 500, description = "INTERNAL", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE: the store or node cannot serve now; retry with the same Idempotency-Key", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[post("/conversations/{id}/messages")]
pub(super) async fn send_message(
    state: web::Data<AppState>,
    caller: Caller,
    req: HttpRequest,
    path: web::Path<String>,
    body: Object<SendBody>,
) -> Result<HttpResponse, ApiError> {
    // With Redis buckets the append takes the call in its own script (one
    // store call per post); a send refused before the append takes it
    // here, before answering, so every request counts once either way
    // (but for one the store failed, below).
    let budget = state.limits.agent_budget(&caller.principal);
    if budget.is_none() {
        state.limits.check_agent(&caller.principal).await?;
    }
    let answer = send_checked(
        &state,
        &caller,
        &req,
        path.into_inner(),
        body.into_inner(),
        budget.clone(),
    )
    .await;
    // A send the store failed (503) is not charged: the failure was ours,
    // and a limiter call into the same failing Redis would only hold the
    // answer up (up to the limiter's own timeout).
    let store_failed = matches!(&answer, Err(e) if e.code == ErrorCode::StoreUnavailable);
    if budget.is_some_and(|b| !b.is_taken()) && !store_failed {
        state.limits.check_agent(&caller.principal).await?;
    }
    answer
}

/// The checks and the post of [`send_message`], its budget taken by the
/// append (`budget`) or already (`None`).
async fn send_checked(
    state: &AppState,
    caller: &Caller,
    req: &HttpRequest,
    conversation: String,
    body: SendBody,
    budget: Option<Budget>,
) -> Result<HttpResponse, ApiError> {
    let has_attachments = [&body.attachments, &body.attachment_id]
        .iter()
        .any(|v| v.as_ref().is_some_and(|v| !v.is_null()));
    // A card is judged first so its named refusals win (protocol v1.11).
    let card = match &body.card {
        None | Some(serde_json::Value::Null) => None,
        Some(raw) => Some(
            validate_card(raw, has_attachments).map_err(|e| ApiError::new(e.code, e.message))?,
        ),
    };
    let stream = body.stream.unwrap_or(false);
    let max = state.settings.limits.max_content_chars;
    let content = match (stream, body.content) {
        (true, content) => draft_start(content.unwrap_or_default(), max)?,
        (false, Some(content)) => checked_content(content, max)?,
        (false, None) => {
            return Err(ApiError::new(
                ErrorCode::InvalidJson,
                "invalid json body: missing field `content`",
            ))
        }
    };
    if stream && card.is_some() {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "a streamed message cannot carry a card",
        ));
    }
    if !matches!(
        body.metadata,
        None | Some(serde_json::Value::Object(_)) | Some(serde_json::Value::Null)
    ) {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "metadata must be an object",
        ));
    }
    let attachments = attach::requested(body.attachments.as_ref(), body.attachment_id.as_ref())?;
    if stream && !attachments.is_empty() {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "a streamed message cannot carry attachments",
        ));
    }
    let usage = match &body.usage {
        None => None,
        Some(raw) => {
            validate_usage(raw).map_err(|m| ApiError::new(ErrorCode::InvalidRequest, m))?
        }
    };
    let key = idempotency_key(req, body.client_id)?;
    let send = Send {
        conversation: ConversationId(conversation),
        content,
        reply_to: body.reply_to_message_id,
        metadata: body
            .metadata
            .filter(|m| !m.is_null())
            .map(strip_server_fields),
        card,
        poll: None,
        usage,
        key,
        stream,
        attachments,
        budget,
    };
    post_and_answer(state, caller, send).await
}

/// Metadata keys only the server writes (protocol §4: `addressedAgents` is
/// the server's resolution of plain-name addressing). A sender's own value
/// is dropped, so no one can plant a routing hint.
/// The attachment fields are the server's too (protocol §10: it writes
/// `attachments[]` from the stored files and signs every URL).
const SERVER_METADATA_FIELDS: [&str; 4] = [
    "addressedAgents",
    "attachments",
    "attachmentId",
    "attachmentUrl",
];

/// Drops what only the server writes: [`SERVER_METADATA_FIELDS`], and a
/// `type` naming a card (`card.…`), so no message passes itself off as a
/// card or poll it does not carry. Other `type` values are the sender's.
pub(crate) fn strip_server_fields(mut metadata: serde_json::Value) -> serde_json::Value {
    if let Some(map) = metadata.as_object_mut() {
        for key in SERVER_METADATA_FIELDS {
            map.remove(key);
        }
        if map
            .get("type")
            .and_then(|t| t.as_str())
            .is_some_and(|t| t.starts_with("card."))
        {
            map.remove("type");
        }
    }
    metadata
}

#[cfg(test)]
mod tests {
    use super::sf_string;

    #[test]
    fn structured_field_strings_are_parsed_strictly() {
        assert_eq!(sf_string(r#""k-1""#).as_deref(), Some("k-1"));
        assert_eq!(sf_string(r#""a\"b""#).as_deref(), Some("a\"b"));
        assert_eq!(sf_string(r#""a\\b""#).as_deref(), Some("a\\b"));
        for bad in [r#""unterminated"#, r#""x";param=1"#, r#""a\nb""#, r#""a" "#] {
            assert_eq!(sf_string(bad), None, "{bad}");
        }
    }
}
