//! `GET /r/{cap}`: the link's one GET, four answers by its query
//! (docs/rooms.md):
//!
//! - READ (no query, or `format=json`): the room, this link's role and
//!   operations, the protocol text, the brief, the latest 20 messages
//!   oldest first and a cursor; without a JSON `Accept` and `format`, the
//!   protocol text alone as `text/markdown`;
//! - FOLLOW (`cursor`, `wait`, `limit`): [`super::follow`];
//! - history (`before`, `limit`): older messages, the cursor untouched;
//! - GET-only send (`send=1`, `author`, `body`, `client_id`, `reply_to`):
//!   [`super::reply::send`]. Strict: an unknown or repeated parameter is
//!   400, more than 4,096 bytes of path and query is 414, and a prefetch
//!   (`Sec-Purpose` / `Purpose: prefetch`) never writes. HEAD is not routed
//!   here at all (405), so it never writes either.

use super::follow::{self, RoomCursor};
use super::view::{self, RoomMessage, RoomView};
use super::Opened;
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::http::header::ACCEPT;
use actix_web::{get, web, HttpRequest, HttpResponse};
use serde::Serialize;
use std::collections::HashMap;
use switchboard_actors::model::StoredMessage;
use switchboard_actors::store::now_ms;
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use utoipa::ToSchema;

/// Messages a READ shows.
pub const READ_MESSAGES: usize = 20;
/// Most messages one FOLLOW or history page holds.
pub const MAX_LIMIT: usize = 100;
/// Longest path and query of a GET-only send, in bytes.
pub const MAX_SEND_URI: usize = 4096;
/// The window `activity.poll_age_seconds` is reported against.
const ACTIVITY_WINDOW_SECONDS: u64 = 60;

/// `activity` of a READ.
#[derive(Serialize, ToSchema)]
pub struct RoomActivity {
    /// Seconds since the room's last recorded authorized access (recorded
    /// at most once per window).
    pub poll_age_seconds: u64,
    /// The recording window, seconds.
    pub window_seconds: u64,
}

/// A READ's JSON answer, in the protocol's order.
#[derive(Serialize, ToSchema)]
pub struct RoomRead {
    /// The protocol text, this link's URLs filled in.
    pub protocol: String,
    /// The room record.
    pub room: RoomView,
    /// What this link may do.
    pub allowed_operations: Vec<&'static str>,
    /// Opaque; FOLLOW from it.
    pub cursor: String,
    /// Decimal revision of the room's log at the read.
    pub revision: String,
    /// Always false for a READ.
    pub has_more: bool,
    /// Whether older messages exist (history).
    pub has_older: bool,
    /// How recently the room was used.
    pub activity: RoomActivity,
    /// The pinned message, or null.
    pub brief: Option<RoomMessage>,
    /// The latest messages, oldest first.
    pub messages: Vec<RoomMessage>,
}

/// A history page.
#[derive(Serialize, ToSchema)]
pub struct RoomHistory {
    /// Older messages, oldest first.
    pub messages: Vec<RoomMessage>,
    /// Whether still older ones exist.
    pub has_older: bool,
}

/// The parameters each mode accepts (`format` in every one).
const FOLLOW_KEYS: [&str; 4] = ["cursor", "wait", "limit", "format"];
const HISTORY_KEYS: [&str; 3] = ["before", "limit", "format"];
const SEND_KEYS: [&str; 6] = ["send", "author", "body", "client_id", "reply_to", "format"];
const READ_KEYS: [&str; 1] = ["format"];

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::InvalidRequest, message)
}

/// One `application/x-www-form-urlencoded` component decoded (`+` is a
/// space, `%XX` a byte), or `None` when the bytes are not UTF-8: never
/// replaced by U+FFFD, so nothing is stored other than what was sent.
fn decode_component(raw: &str) -> Option<String> {
    let raw = raw.as_bytes();
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match raw[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < raw.len() => match (hex(raw[i + 1]), hex(raw[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// The query as a map; a repeated or unknown (for the mode) key is 400,
/// and so is a component that is not UTF-8 once decoded (400
/// INVALID_CONTENT for `body`, INVALID_REQUEST otherwise).
fn parse_query(req: &HttpRequest) -> Result<HashMap<String, String>, ApiError> {
    let mut params = HashMap::new();
    for pair in req.query_string().split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let k =
            decode_component(k).ok_or_else(|| invalid("a parameter name is not valid utf-8"))?;
        let Some(v) = decode_component(v) else {
            let code = if k == "body" {
                ErrorCode::InvalidContent
            } else {
                ErrorCode::InvalidRequest
            };
            return Err(ApiError::new(
                code,
                format!("{k} is not valid utf-8 once percent-decoded"),
            ));
        };
        if params.insert(k.clone(), v).is_some() {
            return Err(invalid(format!("parameter {k} is given twice")));
        }
    }
    let allowed: &[&str] = if params.contains_key("send") {
        &SEND_KEYS
    } else if params.contains_key("cursor") {
        &FOLLOW_KEYS
    } else if params.contains_key("before") {
        &HISTORY_KEYS
    } else {
        &READ_KEYS
    };
    if let Some(stray) = params.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(invalid(format!(
            "unknown parameter {stray}; this request accepts {}",
            allowed.join(", ")
        )));
    }
    if let Some(f) = params.get("format") {
        if f != "json" {
            return Err(invalid("format must be json"));
        }
    }
    Ok(params)
}

/// `limit` within 1..=`max` (absent: `max`).
pub fn limit(params: &HashMap<String, String>, max: usize) -> Result<usize, ApiError> {
    match params.get("limit") {
        None => Ok(max),
        Some(raw) => raw
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| invalid(format!("limit must be an integer from 1 to {max}"))),
    }
}

fn wants_json(req: &HttpRequest, params: &HashMap<String, String>) -> bool {
    params.contains_key("format")
        || req
            .headers()
            .get(ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("application/json"))
}

fn is_prefetch(req: &HttpRequest) -> bool {
    ["sec-purpose", "purpose", "x-purpose", "x-moz"]
        .iter()
        .filter_map(|h| req.headers().get(*h))
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("prefetch"))
}

/// `GET /r/{cap}`.
#[utoipa::path(
    operation_id = "readRoom",
    tag = "rooms",
    summary = "READ, FOLLOW, history or GET-only send",
    description = "READ: with `Accept: application/json` or `?format=json`, the room, role, allowed_operations, protocol text, brief, latest 20 messages (oldest first) and an opaque cursor; otherwise the protocol text as `text/markdown`. FOLLOW: `?cursor=&wait=&limit=` holds up to `wait` seconds (at most 25) until something changes, then answers upserts, tombstones, the brief or room when they changed, has_more and the next cursor. A cursor that cannot be resumed is 409 CURSOR_EXPIRED: READ again. History: `?before=ID&limit=`. GET-only send: `?send=1&author=&body=&client_id=` (strict parameters, at most 4,096 bytes of path and query: 414 URI_TOO_LONG; prefetches never write).",
    params(("cap" = String, Path, description = "The link's capability")),
    responses(
        (status = 200, description = "READ (or a FOLLOW, history page, or identical GET-send retry)", body = RoomRead),
        (status = 201, description = "GET-only send: sent", body = RoomMessage),
        (status = 400, description = "INVALID_REQUEST (unknown parameter, bad limit or wait), INVALID_CONTENT, INVALID_IDEMPOTENCY_KEY", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: the link cannot send; BAY_SUSPENDED (every request of a suspended Bay); ACCOUNT_SUSPENDED, AUTHOR_REMOVED or ROOM_AUTHORS_FULL (a GET-only send)", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown link", body = ErrorBody),
        (status = 409, description = "CURSOR_EXPIRED (READ again) or IDEMPOTENCY_KEY_REUSED", body = ErrorBody),
        (status = 410, description = "ROOM_EXPIRED or MESSAGE_DELETED", body = ErrorBody),
        (status = 414, description = "URI_TOO_LONG", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 503, description = "STORE_UNAVAILABLE, or UNAVAILABLE: a FOLLOW on a draining node (a held FOLLOW answers empty at once when the drain starts)", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
)]
#[get("/r/{cap}")]
pub async fn read_room(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let is_send = req
        .query_string()
        .split('&')
        .any(|p| p.starts_with("send="));
    let uri_len = req.uri().path().len() + req.query_string().len() + 1;
    if is_send && uri_len > MAX_SEND_URI {
        return Err(ApiError::new(
            ErrorCode::UriTooLong,
            "a GET-only send is at most 4096 bytes of path and query; use POST",
        ));
    }
    let params = parse_query(&req)?;
    if params.contains_key("send") {
        return get_send(&state, &req, &path, params).await;
    }
    state.rooms.read(state.client_of(&req))?;
    let link = super::open(&state, &path).await?;
    if params.contains_key("cursor") {
        return follow::follow(&state, &req, &link, &params).await;
    }
    if params.contains_key("before") {
        return history(&state, &link, &params).await;
    }
    if !wants_json(&req, &params) {
        let base = super::base(&state, &req);
        return Ok(HttpResponse::Ok()
            .content_type("text/markdown; charset=utf-8")
            .body(super::text::protocol(&link, &base, &state.settings.rooms)));
    }
    let answer = read(&state, &req, &link).await?;
    Ok(HttpResponse::Ok().json(answer))
}

/// The GET-only send: `send=1` and the REPLY fields as parameters.
async fn get_send(
    state: &AppState,
    req: &HttpRequest,
    cap: &str,
    mut params: HashMap<String, String>,
) -> Result<HttpResponse, ApiError> {
    if params.get("send").map(String::as_str) != Some("1") {
        return Err(invalid("send must be 1"));
    }
    if is_prefetch(req) {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "a prefetch never sends; send the request itself",
        ));
    }
    let link = super::open(state, cap).await?;
    let mut take = |k: &str| params.remove(k);
    let (Some(author), Some(body), Some(client_id)) =
        (take("author"), take("body"), take("client_id"))
    else {
        return Err(invalid("a GET-only send needs author, body and client_id"));
    };
    let reply_to = take("reply_to");
    let (status, message) = super::reply::send(
        state,
        &link,
        super::reply::Send {
            author,
            body,
            client_id,
            reply_to,
        },
    )
    .await?;
    Ok(HttpResponse::build(status).json(message))
}

/// The newest `want` visible messages, oldest first, and whether older
/// ones exist: tombstones and open drafts are skipped, reading back page
/// by page until `want` are found or the history ends.
pub async fn latest_visible(
    state: &AppState,
    link: &Opened,
    before: Option<switchboard_protocol::ids::MessageId>,
    want: usize,
) -> Result<(Vec<StoredMessage>, bool), ApiError> {
    let (bay, conv) = (&link.room.bay, &link.room.conversation);
    let mut found: Vec<StoredMessage> = Vec::new();
    let mut cursor = before;
    loop {
        let (page, older) = state
            .store
            .messages_before(bay, conv, cursor.as_ref(), want.max(READ_MESSAGES))
            .await?;
        cursor = page.first().map(|m| m.id.clone());
        let mut visible: Vec<StoredMessage> = page.into_iter().filter(view::visible).collect();
        visible.append(&mut found);
        found = visible;
        if found.len() >= want || !older || cursor.is_none() {
            let extra = found.len().saturating_sub(want);
            let has_older = older || extra > 0;
            return Ok((found.split_off(extra), has_older));
        }
    }
}

/// A READ's JSON answer for `link`.
async fn read(state: &AppState, req: &HttpRequest, link: &Opened) -> Result<RoomRead, ApiError> {
    let (bay, conv) = (&link.room.bay, &link.room.conversation);
    // The head first: whatever changes after it is the first FOLLOW's.
    let head = state.store.log_head(bay).await?;
    let (messages, has_older) = latest_visible(state, link, None, READ_MESSAGES).await?;
    let brief = brief(state, link).await?;
    let messages = view::render(
        &*state.store,
        bay,
        link.room.brief.as_ref(),
        &messages,
        &HashMap::new(),
    )
    .await?;
    let _ = conv;
    let base = super::base(state, req);
    Ok(RoomRead {
        protocol: super::text::protocol(link, &base, &state.settings.rooms),
        room: RoomView::of(link, &state.settings.rooms),
        allowed_operations: super::allowed_operations(link.role).to_vec(),
        cursor: RoomCursor {
            position: head.clone(),
            metadata_revision: link.room.metadata_revision,
        }
        .encode(),
        revision: view::revision(head.entry).to_string(),
        has_more: false,
        has_older,
        activity: RoomActivity {
            poll_age_seconds: now_ms().saturating_sub(link.room.last_activity_ms) / 1000,
            window_seconds: ACTIVITY_WINDOW_SECONDS,
        },
        brief,
        messages,
    })
}

/// The room's brief as shown, or `None` (no pin, or its message is gone).
pub async fn brief(state: &AppState, link: &Opened) -> Result<Option<RoomMessage>, ApiError> {
    let Some(id) = &link.room.brief else {
        return Ok(None);
    };
    let (bay, conv) = (&link.room.bay, &link.room.conversation);
    let Some(m) = state
        .store
        .message(bay, conv, id)
        .await?
        .filter(view::visible)
    else {
        return Ok(None);
    };
    Ok(
        view::render(&*state.store, bay, Some(id), &[m], &HashMap::new())
            .await?
            .pop(),
    )
}

/// A history page: the visible messages before `before`, oldest first.
async fn history(
    state: &AppState,
    link: &Opened,
    params: &HashMap<String, String>,
) -> Result<HttpResponse, ApiError> {
    let before = params
        .get("before")
        .and_then(|b| view::message_id(b))
        .ok_or_else(|| invalid("before must be a message id (a decimal string)"))?;
    let want = limit(params, MAX_LIMIT)?;
    let (messages, has_older) = latest_visible(state, link, Some(before), want).await?;
    let messages = view::render(
        &*state.store,
        &link.room.bay,
        link.room.brief.as_ref(),
        &messages,
        &HashMap::new(),
    )
    .await?;
    Ok(HttpResponse::Ok().json(RoomHistory {
        messages,
        has_older,
    }))
}
