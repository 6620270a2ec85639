//! The operator console's reads and its test post, under `/api/admin`
//! (behind the admin gate of [`super::admin`]): the node directory, a
//! Bay's conversations, one conversation's view, and posting as a chosen
//! participant to see how a message routes. The live stream of a
//! conversation is [`super::operator_live`], webhook health
//! [`super::operator_webhooks`], the list of Bays [`super::operator_bays`].

use super::body::Object;
use super::messages::send::{checked_content, post as post_message, Send};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::{get, post, web, HttpResponse};
use serde::Deserialize;
use serde_json::{json, Value};
use switchboard_actors::model::{Conversation, Participant, StoredMessage};
use switchboard_actors::store::{Principal, Suspension};
use switchboard_actors::token::TokenHash;
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId, TokenId};
use utoipa::ToSchema;

/// The newest messages a conversation view shows.
pub const VIEW_MESSAGES: usize = 30;

/// Registers the routes (inside the admin scope).
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(nodes)
        .service(conversations)
        .service(view)
        .service(post_as)
        .configure(super::operator_webhooks::routes)
        .configure(super::operator_bays::routes)
        .configure(super::operator_live::routes);
}

/// A message as the console shows it: who sent it, what, and how it
/// routed (the agents it addresses, and whether the round cap
/// suppressed it).
pub fn message_json(m: &StoredMessage) -> Value {
    json!({
        "id": m.id,
        "sender": {"id": m.sender.id, "name": m.sender.name, "kind": m.sender.kind},
        "content": m.content,
        "createdAt": m.created_at,
        "streaming": m.is_streaming(),
        "deleted": m.is_deleted(),
        "respondents": m.routing.respondents,
        "suppressed": m.routing.suppressed,
    })
}

fn member_json(c: &Conversation, participants: &[Participant]) -> Vec<Value> {
    c.members
        .iter()
        .map(|m| {
            let p = participants.iter().find(|p| p.id == m.participant);
            json!({
                "id": m.participant,
                "role": m.role,
                "name": p.map(|p| p.name.as_str()),
                "kind": p.map(|p| p.kind),
            })
        })
        .collect()
}

/// `GET /nodes` → 200 `{nodes: [NodeRecord…]}`: every live node sharing
/// this store (one with the memory engine).
#[utoipa::path(
    operation_id = "adminNodes",
    tag = "admin",
    summary = "Live gateway nodes",
    description = "Every node sharing this store that reported within the last 10 s: version, start time, connections by transport, held polls, feeds, deliveries per second and p99 delivery latency over its last 2 s, its readiness canary's round trip, and the Bays it runs feeds for.",
    responses(
        (status = 200, description = "`{nodes: [{id, version, startedMs, reportedMs, connections, heldPolls, feeds, deliveriesPerSecond, deliveryP99Ms, canaryMs, bays}]}`", body = serde_json::Value),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: the admin API is disabled", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[get("/nodes")]
async fn nodes(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let nodes = state.store.nodes().await?;
    Ok(HttpResponse::Ok().json(json!({ "nodes": nodes, "self": switchboard_actors::node::id() })))
}

/// `GET /bays/{bay}/conversations` → 200 `{bay, conversations: [{id,
/// type, title, members}]}`; 404 for an unknown Bay.
#[utoipa::path(
    operation_id = "adminConversations",
    tag = "admin",
    summary = "A Bay's conversations",
    params(("bay" = String, Path, description = "Bay id")),
    responses(
        (status = 200, description = "`{bay: {id, name}, conversations: [{id, type, title, members: [{id, role, name, kind}]}]}`", body = serde_json::Value),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown Bay, or the admin API is disabled", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[get("/bays/{bay}/conversations")]
async fn conversations(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let bay = BayId(path.into_inner());
    let found = state
        .store
        .bay(&bay)
        .await?
        .ok_or_else(ApiError::not_found)?;
    let participants = state.store.participants(&bay).await?;
    let list: Vec<Value> = state
        .store
        .conversations(&bay)
        .await?
        .iter()
        .map(|c| {
            json!({
                "id": c.id, "type": c.kind, "title": c.title,
                "members": member_json(c, &participants),
            })
        })
        .collect();
    Ok(HttpResponse::Ok().json(json!({ "bay": found, "conversations": list })))
}

/// The conversation, or 404.
pub(crate) async fn conversation_of(
    state: &AppState,
    bay: &BayId,
    cid: &ConversationId,
) -> Result<Conversation, ApiError> {
    state
        .store
        .conversation(bay, cid)
        .await?
        .ok_or_else(ApiError::not_found)
}

/// The view of one conversation: members with their published presence,
/// the newest messages, and the drafts streaming now.
pub(crate) async fn view_json(
    state: &AppState,
    bay: &BayId,
    c: &Conversation,
) -> Result<Value, ApiError> {
    let participants = state.store.participants(bay).await?;
    let presence = state.store.published_presence(bay).await?;
    let online = state.store.online(bay).await?;
    let ids: Vec<ParticipantId> = c.members.iter().map(|m| m.participant.clone()).collect();
    let ways = super::operator_sessions::member_sessions(state, bay, &ids).await?;
    let members: Vec<Value> = member_json(c, &participants)
        .into_iter()
        .zip(&c.members)
        .zip(ways)
        .map(|((mut v, m), ways)| {
            let published = presence
                .iter()
                .find(|(p, _)| *p == m.participant)
                .map(|(_, s)| serde_json::to_value(s).unwrap_or(Value::Null));
            v["presence"] = published.unwrap_or_else(|| json!("offline"));
            v["connected"] = json!(online.contains(&m.participant));
            for key in ["transports", "sessions", "webhook"] {
                v[key] = ways[key].clone();
            }
            v
        })
        .collect();
    let (messages, _) = state
        .store
        .messages_before(bay, &c.id, None, VIEW_MESSAGES)
        .await?;
    let drafts: Vec<Value> = state
        .store
        .open_drafts(bay)
        .await?
        .into_iter()
        .filter(|d| d.conversation == c.id)
        .map(|d| json!({"message": d.message, "author": d.author, "lastActivity": d.last_activity}))
        .collect();
    Ok(json!({
        "conversation": {"id": c.id, "type": c.kind, "title": c.title},
        "members": members,
        "messages": messages.iter().map(message_json).collect::<Vec<_>>(),
        "drafts": drafts,
    }))
}

/// `GET /bays/{bay}/conversations/{cid}/view`.
#[utoipa::path(
    operation_id = "adminConversationView",
    tag = "admin",
    summary = "One conversation as the console shows it",
    params(
        ("bay" = String, Path, description = "Bay id"),
        ("cid" = String, Path, description = "Conversation id"),
    ),
    responses(
        (status = 200, description = "`{conversation, members: [{id, role, name, kind, presence, connected, transports, sessions: [{node, transports, lingering}], webhook: {url, failing}?}], messages: [...] (newest 30, oldest first), drafts: [{message, author, lastActivity}]}`", body = serde_json::Value),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown Bay or conversation, or the admin API is disabled", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[get("/bays/{bay}/conversations/{cid}/view")]
async fn view(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (bay, cid) = path.into_inner();
    let (bay, cid) = (BayId(bay), ConversationId(cid));
    let c = conversation_of(&state, &bay, &cid).await?;
    Ok(HttpResponse::Ok().json(view_json(&state, &bay, &c).await?))
}

/// Body of `POST /bays/{bay}/conversations/{cid}/messages`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PostAs {
    /// The member to post as.
    #[serde(rename = "as")]
    sender: String,
    /// The text, as `POST …/messages` takes it.
    #[schema(value_type = String, min_length = 1, max_length = 32000, pattern = "[^\\t\\n\\x0B\\f\\r \\x85\\xA0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]")]
    content: Value,
}

/// `POST /bays/{bay}/conversations/{cid}/messages` `{as, content}` → 201
/// `{message, recipients: [{id, name, kind, shouldRespond}]}`: posts as
/// the member `as` through the same path as its own send (routing, round
/// cap, delivery), and shows each other member's verdict.
#[utoipa::path(
    operation_id = "adminPostAs",
    tag = "admin",
    summary = "Post as a member (routing test)",
    description = "Sends `content` as the member `as`, exactly as its own `POST /conversations/{id}/messages` would (mentions, policy, round cap, delivery on every transport), and answers the stored message with every other member's `shouldRespond`.",
    params(
        ("bay" = String, Path, description = "Bay id"),
        ("cid" = String, Path, description = "Conversation id"),
    ),
    request_body = PostAs,
    responses(
        (status = 201, description = "`{message, recipients: [{id, name, kind, shouldRespond}]}`", body = serde_json::Value),
        (status = 400, description = "INVALID_JSON or INVALID_CONTENT", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 403, description = "ACCOUNT_SUSPENDED or BAY_SUSPENDED: the member or its Bay is suspended", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown Bay, conversation or participant, `as` is not a member, or the admin API is disabled", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[post("/bays/{bay}/conversations/{cid}/messages")]
async fn post_as(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: Object<PostAs>,
) -> Result<HttpResponse, ApiError> {
    let (bay, cid) = path.into_inner();
    let (bay, cid) = (BayId(bay), ConversationId(cid));
    let body = body.into_inner();
    let content = checked_content(body.content, state.settings.limits.max_content_chars)?;
    let participant = state
        .store
        .participant(&bay, &ParticipantId(body.sender))
        .await?
        .ok_or_else(ApiError::not_found)?;
    // A suspended member cannot send on its own; nor does the console for it.
    let standing = Suspension::of(
        state.store.suspended(&bay, Some(&participant.id)).await?,
        state.store.suspended(&bay, None).await?,
    );
    if let Some(suspension) = standing {
        return Err(ApiError::suspended(suspension));
    }
    let caller = Caller {
        principal: Principal {
            bay: bay.clone(),
            participant: participant.clone(),
            // No token: the operator posts, the principal stands for the member.
            token: TokenId("operator-console".into()),
            suspended: None,
        },
        token_hash: TokenHash(String::new()),
    };
    let send = Send {
        conversation: cid.clone(),
        content,
        reply_to: None,
        metadata: None,
        card: None,
        poll: None,
        usage: None,
        key: None,
        stream: false,
        attachments: Vec::new(),
        budget: None,
    };
    let posted = post_message(&state, &caller, send).await?;
    let id = MessageId(posted.message.view.id.to_string());
    let stored = state
        .store
        .message(&bay, &cid, &id)
        .await?
        .ok_or_else(|| ApiError::new(ErrorCode::Internal, "the posted message is missing"))?;
    let c = conversation_of(&state, &bay, &cid).await?;
    let participants = state.store.participants(&bay).await?;
    let recipients: Vec<Value> = member_json(&c, &participants)
        .into_iter()
        .zip(&c.members)
        .filter(|(_, m)| m.participant != participant.id)
        .map(|(mut v, m)| {
            v["shouldRespond"] = json!(stored
                .routing
                .should_respond(&m.participant, &stored.sender.id));
            v
        })
        .collect();
    Ok(HttpResponse::Created()
        .json(json!({ "message": message_json(&stored), "recipients": recipients })))
}
