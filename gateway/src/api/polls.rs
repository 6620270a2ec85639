//! Polls (protocol v1.12): a poll is a `card.poll` message whose
//! `cardPayload` names the poll and whose `poll` carries the tally. Votes
//! and closing run on the conversation's actor like any message change,
//! and every change sends members a `poll.updated` event with the tally.
//! A poll in a conversation the caller is not in answers `POLL_NOT_FOUND`,
//! exactly like a poll that does not exist.

use super::messages::send::{created, post, Send};
use crate::api::body::Object;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::{get, post, web, HttpResponse};
use serde::{Deserialize, Serialize};
use switchboard_actors::conversation::{Action, Amend, AmendOutcome};
use switchboard_actors::model::StoredMessage;
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use switchboard_protocol::ids::{ConversationId, MessageId};
use switchboard_protocol::poll::{validate_poll, PollState, PollView};
use utoipa::ToSchema;

/// Registers the routes under `/api/agent-api`.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(create_poll)
        .service(get_poll)
        .service(vote)
        .service(close_poll);
}

/// Body of `POST /polls` (protocol v1.12, `create_poll`).
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(examples(json!({"conversationId": "group", "question": "Lunch?", "options": ["Pizza", "Sushi"], "allowMultiple": false})))]
pub(crate) struct CreatePoll {
    /// The conversation to ask; the caller must be a member.
    pub conversation_id: String,
    /// 1–500 characters (trimmed), not blank.
    #[schema(
        min_length = 1,
        max_length = 500,
        pattern = "[^\\t\\n\\x0B\\f\\r \\x85\\xA0\\u1680\\u2000-\\u200D\\u2028\\u2029\\u202F\\u205F\\u2060\\u3000\\uFEFF]"
    )]
    pub question: String,
    /// Two to ten answers, 1–200 characters each (trimmed), not blank, no
    /// two the same word (compared trimmed, case-insensitively, whitespace
    /// runs collapsed: 400 INVALID_POLL).
    #[schema(min_items = 2, max_items = 10)]
    pub options: Vec<String>,
    /// Whether a voter may hold several answers (default false).
    #[serde(default)]
    pub allow_multiple: bool,
    /// The idempotency key, as an alternative to the `Idempotency-Key`
    /// header: a retried creation returns the first poll.
    #[schema(min_length = 1, max_length = 255, pattern = "^[ -~]*$")]
    pub client_id: Option<String>,
}

/// Body of `POST /polls/{id}/vote` (protocol v1.12, `vote_in_poll`).
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct VoteBody {
    /// The complete set of answers the caller holds, counted from zero;
    /// `[]` withdraws the vote.
    #[serde(deserialize_with = "crate::api::integral::vec")]
    option_indexes: Vec<i64>,
}

/// Answer of the poll routes: the poll as the caller sees it.
///
/// `pollId`, `question` and `options` repeat the card's fields at the top
/// level because the shipped BayChat CLI (0.23.1 `handleVoteInPoll`) reads
/// the labels as `view.options[i]` beside the tally in `view.poll`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PollAnswer {
    /// The poll's id (`cardPayload.pollId`).
    poll_id: String,
    /// The poll's conversation.
    conversation_id: ConversationId,
    /// Its `card.poll` message.
    message_id: MessageId,
    /// The question, as the room reads it.
    question: String,
    /// The answers' labels in card order: `options[i]` is answer `i` of
    /// `optionIndexes` and of `poll.options[].index` (counted from zero).
    options: Vec<String>,
    /// `{pollId, question, options, askedBy, allowMultiple}`.
    #[schema(value_type = Object)]
    card_payload: serde_json::Value,
    /// The tally, with the caller's `mine` and `canVote` (protocol v1.12).
    poll: PollView,
}

impl PollAnswer {
    fn of(message: &StoredMessage, poll: &PollState, caller: &Caller) -> Self {
        PollAnswer {
            poll_id: poll.id.clone(),
            conversation_id: message.conversation_id.clone(),
            message_id: message.id.clone(),
            question: poll.question.clone(),
            options: poll.options.clone(),
            card_payload: poll.card_payload(),
            poll: poll.view(&caller.principal.participant.id, true),
        }
    }
}

/// Answer of `POST /polls`: the `card.poll` message, and `pollId` beside
/// it, because the shipped BayChat CLI (0.23.1 `handleCreatePoll`) reads
/// `result.pollId` off the answer.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PollCreated {
    /// The new poll's id, for `/polls/{id}` (also `cardPayload.pollId`).
    pub poll_id: String,
    /// The poll's message, in the `GET …/messages` shape.
    #[serde(flatten)]
    message: super::views::RestMessage,
}

fn poll_not_found() -> ApiError {
    ApiError::new(
        ErrorCode::PollNotFound,
        "no such poll in a conversation you are in",
    )
}

/// `POST /polls` → 201 with the `card.poll` message (REST shape).
#[utoipa::path(
    operation_id = "createPoll",
    tag = "agent",
    summary = "Put a poll in a conversation",
    description = "Posts a `card.poll` message: `content` is the plain-text fallback (the question, then the answers numbered from one), `cardPayload` holds `{pollId, question, options, askedBy, allowMultiple}` and `poll` the tally. The message is routed like any other (its text's @mentions wake agents). An `Idempotency-Key` header (or `clientId`) makes retries safe exactly as for `POST …/messages`.",
    params(
        ("Idempotency-Key" = Option<String>, Header, description = "1–255 printable ASCII characters; a plain token or a quoted structured-field string", pattern = "^(?:[!#-~](?:[ -~]{0,253}[!-~])?|\"(?:[ !#-\\[\\]-~]|\\\\[\"\\\\]){1,255}\") *$"),
    ),
    request_body = CreatePoll,
    responses(
        (status = 201, description = "The poll's message, with `pollId` beside its fields", body = PollCreated),
        (status = 400, description = "INVALID_JSON, INVALID_IDEMPOTENCY_KEY, or INVALID_POLL (fewer than two answers, more than ten, two the same word, blank or too long)", body = ErrorBody),
        (status = 409, description = "IDEMPOTENCY_KEY_REUSED", body = ErrorBody),
        (status = 410, description = "MESSAGE_DELETED: the key's poll was deleted since", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE", body = ErrorBody),
        (status = 415, description = "UNSUPPORTED_MEDIA_TYPE", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown conversation or not a member", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[post("/polls")]
async fn create_poll(
    state: web::Data<AppState>,
    caller: Caller,
    req: actix_web::HttpRequest,
    body: Object<CreatePoll>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal).await?;
    let body = body.into_inner();
    let key = super::messages::send::idempotency_key(&req, body.client_id.clone())?;
    let (replayed, answer) = open_poll(&state, &caller, body, key).await?;
    Ok(created(replayed, &answer))
}

/// Validates and posts a poll for `caller`: whether it is the replay of
/// an idempotent retry, and the created poll. Shared with the MCP tool
/// `create_poll`.
///
/// # Errors
/// 400 INVALID_POLL; the refusals of a send (404 for a non-member).
pub(crate) async fn open_poll(
    state: &AppState,
    caller: &Caller,
    body: CreatePoll,
    key: Option<String>,
) -> Result<(bool, PollCreated), ApiError> {
    let (question, options) =
        validate_poll(&body.question, &body.options).map_err(|(c, m)| ApiError::new(c, m))?;
    let poll = PollState::new(
        format!(
            "poll_{}",
            ulid::Ulid::new().to_string().to_ascii_lowercase()
        ),
        question,
        options,
        body.allow_multiple,
        caller.principal.participant.id.clone(),
    );
    let poll_id = poll.id.clone();
    let send = Send {
        conversation: ConversationId(body.conversation_id),
        content: poll.fallback_content(),
        reply_to: None,
        metadata: None,
        card: None,
        poll: Some(poll),
        usage: None,
        key,
        stream: false,
        attachments: Vec::new(),
        budget: None,
    };
    let posted = post(state, caller, send).await?;
    // A retry answers the first poll, whose id is on its card.
    let poll_id = posted
        .message
        .card_payload
        .as_ref()
        .and_then(|c| c["pollId"].as_str())
        .map_or(poll_id, str::to_owned);
    let body = PollCreated {
        poll_id,
        message: posted.message,
    };
    Ok((posted.replayed, body))
}

/// The poll `id` of the caller's Bay: its message, if the caller is a
/// member of its conversation (else `POLL_NOT_FOUND`).
async fn locate(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> Result<(ConversationId, MessageId), ApiError> {
    let bay = &caller.principal.bay;
    let (conversation, message) = state
        .store
        .poll_message(bay, id)
        .await?
        .ok_or_else(poll_not_found)?;
    let member = state
        .store
        .conversation(bay, &conversation)
        .await?
        .is_some_and(|c| c.member(&caller.principal.participant.id).is_some());
    if !member {
        return Err(poll_not_found());
    }
    Ok((conversation, message))
}

/// `GET /polls/{id}` → the poll.
#[utoipa::path(
    operation_id = "getPoll",
    tag = "agent",
    summary = "Read a poll",
    params(("id" = String, Path, description = "Poll id (`cardPayload.pollId`)")),
    responses(
        (status = 200, description = "The poll as the caller sees it", body = PollAnswer),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 404, description = "POLL_NOT_FOUND: no such poll, or not in a conversation the caller is in", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[get("/polls/{id}")]
async fn get_poll(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal).await?;
    let (conversation, message) = locate(&state, &caller, &path).await?;
    let message = state
        .store
        .message(&caller.principal.bay, &conversation, &message)
        .await?
        .ok_or_else(poll_not_found)?;
    let poll = message.poll.as_ref().ok_or_else(poll_not_found)?;
    Ok(HttpResponse::Ok().json(PollAnswer::of(&message, poll, &caller)))
}

/// Runs a poll action (a vote, closing) and gives the poll after it.
/// Shared with the MCP tool `vote_in_poll`.
///
/// # Errors
/// 404 POLL_NOT_FOUND, 409 POLL_CLOSED, 400 POLL_SINGLE_CHOICE /
/// INVALID_OPTION_INDEX, 403 FORBIDDEN (closing another's poll).
pub(crate) async fn act(
    state: &AppState,
    caller: &Caller,
    id: &str,
    action: Action,
) -> Result<PollAnswer, ApiError> {
    let (conversation, message) = locate(state, caller, id).await?;
    let outcome = state
        .registry
        .conversation(&caller.principal.bay, &conversation)
        .send(Amend {
            by: caller.principal.participant.clone(),
            message,
            action,
        })
        .await??;
    let message = match outcome {
        AmendOutcome::Changed(m) | AmendOutcome::Unchanged(m) => m,
        AmendOutcome::NotFound | AmendOutcome::Deleted => return Err(poll_not_found()),
        AmendOutcome::Forbidden => {
            return Err(ApiError::new(
                ErrorCode::Forbidden,
                "only the poll's creator or a conversation admin may close it",
            ))
        }
        AmendOutcome::Refused(code, message) => return Err(ApiError::new(code, message)),
    };
    let poll = message.poll.as_ref().ok_or_else(poll_not_found)?;
    Ok(PollAnswer::of(&message, poll, caller))
}

/// `POST /polls/{id}/vote` `{optionIndexes}` → 200 with the poll.
#[utoipa::path(
    operation_id = "voteInPoll",
    tag = "agent",
    summary = "Cast, change or withdraw your vote",
    description = "`optionIndexes` counts from zero and is the complete set of answers the caller holds: one for an ordinary poll, several where `allowMultiple`, `[]` to withdraw. The same vote twice changes nothing and sends no event; any change sends members `poll.updated` with the tally. Every vote is visible to the room (protocol v1.12).",
    params(("id" = String, Path, description = "Poll id")),
    request_body = VoteBody,
    responses(
        (status = 200, description = "The poll after the vote", body = PollAnswer),
        (status = 400, description = "INVALID_JSON, POLL_SINGLE_CHOICE (a second answer on a poll that takes one) or INVALID_OPTION_INDEX (an answer the poll does not offer, or one given twice)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 404, description = "POLL_NOT_FOUND: no such poll, or not in a conversation the caller is in", body = ErrorBody),
        (status = 409, description = "POLL_CLOSED", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[post("/polls/{id}/vote")]
async fn vote(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    body: Object<VoteBody>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal).await?;
    let indexes = body.into_inner().option_indexes;
    Ok(HttpResponse::Ok().json(act(&state, &caller, &path, Action::Vote { indexes }).await?))
}

/// `POST /polls/{id}/close` → 200 with the poll (`closed: true`).
#[utoipa::path(
    operation_id = "closePoll",
    tag = "agent",
    summary = "Close a poll",
    description = "Its creator or a conversation admin. Votes are refused afterwards (409 POLL_CLOSED); the tally stays. Closing a closed poll changes nothing.",
    params(("id" = String, Path, description = "Poll id")),
    responses(
        (status = 200, description = "The closed poll", body = PollAnswer),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: neither the creator nor an admin", body = ErrorBody),
        (status = 404, description = "POLL_NOT_FOUND", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[post("/polls/{id}/close")]
async fn close_poll(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal).await?;
    Ok(HttpResponse::Ok().json(act(&state, &caller, &path, Action::ClosePoll).await?))
}
