//! The rolling conversation summary (protocol §6, docs/summary.md):
//! `GET /conversations/{id}/summary` for members (and the Bay's
//! summarizer), `PUT` for the summarizer alone. The gateway runs no
//! language model: it serves what the summarizer wrote and, on
//! `?refresh=1`, asks it for a new one with a `summary.requested` event.

use super::views::Room;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::{get, put, web, HttpResponse};
use chrono::{DateTime, Utc};
use futures_util::future::try_join_all;
use serde::{Deserialize, Serialize};
use switchboard_actors::model::StoredMessage;
use switchboard_actors::store::log::{wire_time, LogEvent};
use switchboard_actors::store::{RefreshSlot, StoredSummary, SummaryWritten};
use switchboard_protocol::context::ContextEnvelope;
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use switchboard_protocol::ids::{ConversationId, MessageId, ParticipantId};
use switchboard_protocol::summary::{ConversationMemory, MemoryWrite};
use utoipa::{IntoParams, ToSchema};

/// Most messages `recentMessages` holds.
pub const MAX_RECENT: usize = 200;
/// `recentMessages` size when `limit` is absent.
pub const DEFAULT_RECENT: usize = 100;
/// Source ids looked up at once while a write is checked.
const LOOKUPS_AT_ONCE: usize = 32;

/// Registers the agent API routes.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(get_summary).service(put_summary);
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct SummaryQuery {
    /// `1` (or `true`): ask the Bay's summarizer for a fresh summary
    /// (`summary.requested`); limited per conversation
    /// (`limits.summary_refresh_max` per `limits.summary_refresh_window`,
    /// 3 per 5 minutes by default). `0`, `false` or absent: just read.
    #[param(value_type = Option<String>, pattern = "^(1|true|0|false)$")]
    refresh: Option<String>,
    /// Most messages in `recentMessages`, 1–200 (default 100).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 200)]
    limit: Option<String>,
}

/// `GET /conversations/{id}/summary`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SummaryAnswer {
    /// The stored summary, `null` when none was written yet (the answer
    /// is still 200: summaries fail soft, protocol §6).
    #[schema(required = true)]
    pub memory: Option<ConversationMemory>,
    /// The newest messages after `memory.throughMessageId` (all messages
    /// when `memory` is null), at most `limit`, ascending: the same shape
    /// as `GET …/messages`.
    pub recent_messages: Vec<super::views::RestMessage>,
    /// `true` when older messages after the boundary were left out of
    /// `recentMessages`: page back with `GET …/messages?cursor=<the
    /// first one's id>`.
    pub recent_truncated: bool,
    /// The context envelope for the caller; `null` for the Bay's
    /// summarizer reading a conversation it is not a member of.
    #[schema(required = true)]
    pub context: Option<ContextEnvelope>,
    /// What `?refresh=1` did; `null` when it was not asked.
    #[schema(required = true)]
    pub refresh: Option<RefreshAnswer>,
}

/// What a `?refresh=1` did.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RefreshAnswer {
    /// `true`: the summarizer was sent `summary.requested`. `false`: the
    /// Bay has no summarizer (`reason: "NO_SUMMARIZER"`); nothing was sent
    /// and nothing counted against the refresh limit.
    pub requested: bool,
    /// The summarizer asked, `null` when there is none.
    #[schema(required = true)]
    pub summarizer_id: Option<ParticipantId>,
    /// `"NO_SUMMARIZER"` when `requested` is false, else `null`.
    #[schema(required = true)]
    pub reason: Option<&'static str>,
}

/// `PUT /conversations/{id}/summary`.
#[derive(Serialize, ToSchema)]
pub struct SummaryStored {
    /// The summary as stored, with its new `version`.
    pub memory: ConversationMemory,
}

/// A `true`/`false` query flag: `1`/`true`, `0`/`false`, absent = false.
fn flag(raw: Option<&str>, name: &str) -> Result<bool, ApiError> {
    match raw {
        None | Some("0") | Some("false") => Ok(false),
        Some("1") | Some("true") => Ok(true),
        Some(_) => Err(ApiError::new(
            ErrorCode::InvalidRequest,
            format!("{name} must be 1, true, 0 or false"),
        )),
    }
}

/// The newest `limit` messages with a `seq` above `after`, ascending, and
/// whether older ones above it were left out.
async fn after_boundary(
    state: &AppState,
    caller: &Caller,
    id: &ConversationId,
    after: u64,
    limit: usize,
) -> Result<(Vec<StoredMessage>, bool), ApiError> {
    let bay = &caller.principal.bay;
    // One more than asked: a full page of messages all after the
    // boundary says exactly whether more of them exist.
    let (page, _) = state
        .store
        .messages_before(bay, id, None, limit + 1)
        .await?;
    let mut recent: Vec<StoredMessage> = page.into_iter().filter(|m| m.seq > after).collect();
    let truncated = recent.len() > limit;
    if truncated {
        recent.remove(0);
    }
    super::views::refresh_previews(&*state.store, bay, id, &mut recent).await?;
    Ok((recent, truncated))
}

/// `GET /conversations/{id}/summary[?refresh=1][&limit=N]` → `{ memory,
/// recentMessages, recentTruncated, context, refresh }` (protocol §6).
#[utoipa::path(
    operation_id = "getSummary",
    tag = "agent",
    summary = "Catch up: the rolling summary and the messages after it",
    description = "Fails soft: with no summary yet the answer is still 200, `memory: null`, with the newest messages. `recentMessages` are the newest `limit` messages after the summary's boundary, ascending, in the `GET …/messages` shape; `recentTruncated` says older ones after the boundary were left out. The summary is derived, untrusted context (protocol §6): it never authorizes a reply. `?refresh=1` sends the Bay's summarizer a `summary.requested` event (every transport); with no summarizer designated the answer says so (`refresh.requested: false`, `reason: \"NO_SUMMARIZER\"`). The Bay's summarizer may read any conversation of its Bay (`context` is then null when it is not a member).",
    params(
        ("id" = String, Path, description = "Conversation id"),
        SummaryQuery,
    ),
    responses(
        (status = 200, description = "The summary (or null), the messages after it, the context envelope", body = SummaryAnswer),
        (status = 400, description = "INVALID_REQUEST: bad `refresh` or `limit`", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED: missing, unknown, rotated or revoked token", body = ErrorBody),
        (status = 403, description = "NOT_PARTICIPANT: not a member of the conversation (also for unknown ids)", body = ErrorBody),
        (status = 429, description = "SUMMARY_REFRESH_LIMITED: `?refresh=1` asked too often for this conversation (3 per 5 minutes by default), or RATE_LIMITED: the agent budget is spent", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 500, description = "INTERNAL", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE: the store or node cannot serve now", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[get("/conversations/{id}/summary")]
async fn get_summary(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    query: web::Query<SummaryQuery>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal).await?;
    let id = ConversationId(path.into_inner());
    let refresh = flag(query.refresh.as_deref(), "refresh")?;
    let limit = match &query.limit {
        None => DEFAULT_RECENT,
        Some(raw) => raw
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_RECENT).contains(n))
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::InvalidRequest,
                    format!("limit must be an integer from 1 to {MAX_RECENT}"),
                )
            })?,
    };
    Ok(HttpResponse::Ok().json(summary_of(&state, &caller, &id, refresh, limit).await?))
}

/// The catch-up answer for conversation `id`, as `GET …/summary` gives it;
/// `refresh` asks the summarizer for a new summary, `limit` caps the
/// messages after the boundary (1 to [`MAX_RECENT`]). Shared with the MCP
/// tool `get_conversation_summary`.
///
/// # Errors
/// 403 NOT_PARTICIPANT; 429 SUMMARY_REFRESH_LIMITED for a refresh asked too often.
pub(crate) async fn summary_of(
    state: &AppState,
    caller: &Caller,
    id: &ConversationId,
    refresh: bool,
    limit: usize,
) -> Result<SummaryAnswer, ApiError> {
    let bay = &caller.principal.bay;
    let reader = &caller.principal.participant.id;
    let not_participant = || {
        ApiError::new(
            ErrorCode::NotParticipant,
            "you are not a participant of this conversation",
        )
    };
    let conversation = state
        .store
        .conversation(bay, id)
        .await?
        .ok_or_else(not_participant)?;
    let summarizer = state.store.summarizer(bay).await?;
    let member = conversation.member(reader).is_some();
    if !member && summarizer.as_ref() != Some(reader) {
        return Err(not_participant());
    }
    let stored = state.store.summary(bay, id).await?;
    let refresh = if refresh {
        Some(request_refresh(state, caller, &conversation, summarizer, stored.as_ref()).await?)
    } else {
        None
    };
    let after = stored.as_ref().map_or(0, |s| s.through_seq);
    let (recent, recent_truncated) = after_boundary(state, caller, id, after, limit).await?;
    let participants = state.store.participants(bay).await?;
    let room = Room::new(conversation, &participants);
    Ok(SummaryAnswer {
        memory: stored.map(|s| s.memory),
        recent_messages: recent
            .iter()
            .map(|m| room.rest_message(m, reader))
            .collect(),
        recent_truncated,
        context: member.then(|| room.envelope(reader)),
        refresh,
    })
}

/// `?refresh=1`: counts the request and logs `summary.requested` for the
/// summarizer, or says there is none (nothing counted).
async fn request_refresh(
    state: &AppState,
    caller: &Caller,
    conversation: &switchboard_actors::model::Conversation,
    summarizer: Option<ParticipantId>,
    stored: Option<&StoredSummary>,
) -> Result<RefreshAnswer, ApiError> {
    let bay = &caller.principal.bay;
    let Some(summarizer) = summarizer else {
        return Ok(RefreshAnswer {
            requested: false,
            summarizer_id: None,
            reason: Some("NO_SUMMARIZER"),
        });
    };
    let limits = &state.settings.limits;
    let slot = state
        .store
        .take_summary_refresh(
            bay,
            &conversation.id,
            limits.summary_refresh_max,
            limits.summary_refresh_window,
        )
        .await?;
    if let RefreshSlot::Limited { retry_after } = slot {
        let secs = retry_after.as_millis().div_ceil(1000).max(1) as u64;
        return Err(ApiError::new(
            ErrorCode::SummaryRefreshLimited,
            format!(
                "summary refresh is limited to {} per {} s for this conversation; retry in {secs} s or read the stored summary without refresh",
                limits.summary_refresh_max,
                limits.summary_refresh_window.as_secs(),
            ),
        )
        .retry_after(std::time::Duration::from_secs(secs)));
    }
    state
        .store
        .append_control(
            bay,
            LogEvent::SummaryRequested {
                conversation: conversation.reference(),
                summarizer: summarizer.clone(),
                requested_by: caller.principal.participant.id.clone(),
                through: stored.map(|s| s.memory.through_message_id.clone()),
                version: stored.map_or(0, |s| s.memory.version),
                at: Utc::now(),
            },
        )
        .await?;
    Ok(RefreshAnswer {
        requested: true,
        summarizer_id: Some(summarizer),
        reason: None,
    })
}

/// `PUT /conversations/{id}/summary` `MemoryWrite` → 200 `{ memory }`.
#[utoipa::path(
    operation_id = "putSummary",
    tag = "agent",
    summary = "Write a conversation's summary (the Bay's summarizer only)",
    description = "Only the agent the admin API designated as the Bay's summarizer may write (`PUT /api/admin/bays/{bay}/summarizer`); it may write any conversation of its Bay. Bounds (docs/summary.md): `summary` 1–4,000 characters; each of `decisions`, `openTasks`, `openQuestions`, `durableFacts` at most 50 items; an item's `text` 1–1,000 characters and 1–20 `sourceMessageIds`; `owner` (≤ 200) and `status` (≤ 40) on open tasks only; at most 500 distinct source ids in all. The boundary and every source must be messages of the conversation, the sources at or before the boundary. The store sets `version` (one more than the stored summary's), `generatedAt`, `generatedBy` and `approxTokens`.",
    params(
        ("id" = String, Path, description = "Conversation id"),
    ),
    request_body = MemoryWrite,
    responses(
        (status = 200, description = "Stored", body = SummaryStored),
        (status = 400, description = "INVALID_JSON (not an object, unknown field), INVALID_REQUEST (a bound; the message names the field), INVALID_SUMMARY_BOUNDARY (`throughMessageId` is not a message of the conversation, or `throughCreatedAt` is not its time) or INVALID_SUMMARY_SOURCE (a source id is not a message of the conversation, was deleted, or lies after the boundary; an id repeated within one item counts once)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED: missing, unknown, rotated or revoked token", body = ErrorBody),
        (status = 403, description = "NOT_SUMMARIZER: the caller is not the Bay's designated summarizer", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: no such conversation in the Bay", body = ErrorBody),
        (status = 409, description = "SUMMARY_STALE: the stored summary's boundary lies after this one's; it stays", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED: the agent request budget (60/min by default) is spent", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 500, description = "INTERNAL", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE: the store or node cannot serve now", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[put("/conversations/{id}/summary")]
async fn put_summary(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    body: super::body::Object<MemoryWrite>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal).await?;
    let id = ConversationId(path.into_inner());
    let bay = &caller.principal.bay;
    let writer = &caller.principal.participant.id;
    if state.store.summarizer(bay).await?.as_ref() != Some(writer) {
        return Err(ApiError::new(
            ErrorCode::NotSummarizer,
            "only the Bay's designated summarizer agent may write summaries",
        ));
    }
    let mut write = body.into_inner();
    write.drop_repeated_sources();
    write
        .check_shape()
        .map_err(|e| ApiError::new(ErrorCode::InvalidRequest, e.message()))?;
    if state.store.conversation(bay, &id).await?.is_none() {
        return Err(ApiError::not_found());
    }
    let boundary = boundary_of(&state, &caller, &id, &write).await?;
    check_sources(&state, &caller, &id, &write, &boundary).await?;
    let memory = ConversationMemory {
        approx_tokens: write.approx_tokens(),
        summary: write.summary,
        decisions: write.decisions,
        open_tasks: write.open_tasks,
        open_questions: write.open_questions,
        durable_facts: write.durable_facts,
        through_message_id: boundary.id.clone(),
        through_created_at: boundary.created_at_wire(),
        version: 0,
        generated_at: wire_time(Utc::now()),
        generated_by: writer.clone(),
    };
    let summary = StoredSummary {
        memory,
        through_seq: boundary.seq,
    };
    match state.store.put_summary(bay, &id, summary).await? {
        SummaryWritten::Stored(s) => Ok(HttpResponse::Ok().json(SummaryStored { memory: s.memory })),
        SummaryWritten::Stale(current) => Err(ApiError::new(
            ErrorCode::SummaryStale,
            format!(
                "the stored summary (version {}) already covers up to {}, after this one's boundary",
                current.memory.version, current.memory.through_message_id
            ),
        )),
    }
}

/// The boundary message: a message of the conversation, at the time the
/// writer says if it says one.
async fn boundary_of(
    state: &AppState,
    caller: &Caller,
    id: &ConversationId,
    write: &MemoryWrite,
) -> Result<StoredMessage, ApiError> {
    let bad = |m: String| ApiError::new(ErrorCode::InvalidSummaryBoundary, m);
    let through = &write.through_message_id;
    let message = state
        .store
        .message(&caller.principal.bay, id, through)
        .await?
        .ok_or_else(|| {
            bad(format!(
                "throughMessageId {through} is not a message of this conversation"
            ))
        })?;
    if let Some(at) = &write.through_created_at {
        let same = DateTime::parse_from_rfc3339(at).is_ok_and(|t| {
            t.with_timezone(&Utc).timestamp_millis() == message.created_at.timestamp_millis()
        });
        if !same {
            return Err(bad(format!(
                "throughCreatedAt {at} is not the createdAt of {through} ({})",
                message.created_at_wire()
            )));
        }
    }
    Ok(message)
}

/// Every source id names a message of the conversation at or before the
/// boundary; looked up [`LOOKUPS_AT_ONCE`] at a time.
async fn check_sources(
    state: &AppState,
    caller: &Caller,
    id: &ConversationId,
    write: &MemoryWrite,
    boundary: &StoredMessage,
) -> Result<(), ApiError> {
    let bay = &caller.principal.bay;
    let ids: Vec<&MessageId> = write.source_ids();
    for chunk in ids.chunks(LOOKUPS_AT_ONCE) {
        let found = try_join_all(chunk.iter().map(|m| state.store.message(bay, id, m))).await?;
        for (source, message) in chunk.iter().zip(found) {
            let problem = match message {
                None => "is not a message of this conversation",
                Some(m) if m.seq > boundary.seq => "lies after the summary's boundary",
                // A tombstone has no content left to rest a claim on.
                Some(m) if m.is_deleted() => "was deleted",
                Some(_) => continue,
            };
            return Err(ApiError::new(
                ErrorCode::InvalidSummarySource,
                format!("source message {source} {problem}"),
            ));
        }
    }
    Ok(())
}
