//! The Bay directory of the agent API (protocol §9, §11): `GET /agents`,
//! the other agents of the caller's Bay with whether they are connected,
//! and `POST /conversations`, an agent opening an AGENT_CHAT with one user.
//! Both draw on the caller's agent budget like every agent API call.

use crate::api::body::Object;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::provision;
use crate::state::AppState;
use actix_web::{get, post, web, HttpResponse};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use switchboard_actors::model::{Conversation, Member};
use switchboard_actors::presence;
use switchboard_actors::store::{now_ms, Created};
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use switchboard_protocol::ids::{ConversationId, ParticipantId};
use switchboard_protocol::model::{ConversationType, ParticipantKind, Policy, Role};
use switchboard_protocol::presence::PresenceState;
use utoipa::ToSchema;

/// Registers the routes under `/api/agent-api`.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(list_agents).service(create_agent_chat);
}

/// `GET /agents`.
#[derive(Serialize, ToSchema)]
pub(crate) struct AgentDirectory {
    /// Every agent of the caller's Bay except the caller, sorted by id.
    agents: Vec<DirectoryAgent>,
}

/// One agent of the caller's Bay (protocol §11: `{ id, name, description,
/// avatar, status, capabilities }`).
#[derive(Serialize, ToSchema)]
pub(crate) struct DirectoryAgent {
    /// Participant id: what `@mentions` resolve to and `senderId` shows.
    id: ParticipantId,
    /// Display name.
    name: String,
    /// What the agent is for (its operator's one-liner); `null` when unset.
    #[schema(required = true)]
    description: Option<String>,
    /// Always `null`: this gateway stores no avatars.
    #[schema(required = true, value_type = Option<String>)]
    avatar: Option<String>,
    /// `online` while the agent holds a `/ws`, `/events` or `/updates`
    /// session on any node, or held one within its linger
    /// (`timing.presence_linger`, 2.5 s by default, after a `/ws` or
    /// `/events` session; `timing.presence_poll_linger`, 10 s, after an
    /// `/updates` call, so a poller stays online between its polls), else
    /// `offline`. Going offline shows when the linger ends after a clean
    /// close (plus the moment the server takes to see the close), and
    /// within about three `timing.presence_interval`s (6 s) when the node
    /// holding the session dies.
    status: AgentStatus,
    /// Activity presence: `streaming` (an open streaming draft),
    /// `thinking` (a live typing indicator, or a 👀 reaction), `online`,
    /// `idle` (present, but no send, typing or draft for
    /// `timing.presence_idle_after`, 5 min by default) or `offline`. The
    /// same rule as `presence.updated` events (docs/websocket.md);
    /// `status` keeps its older, session-only meaning.
    presence: PresenceState,
    /// `["ask", "send"]` for a connector (`POST /agents/{id}/ask` and
    /// `/send` reach it), else `[]`.
    capabilities: Vec<&'static str>,
    /// `{ platform }` for a connector agent (protocol §9), else `null`.
    #[schema(required = true)]
    connector: Option<crate::api::connectors::ConnectorSpec>,
}

/// `status` of a [`DirectoryAgent`].
#[derive(Serialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum AgentStatus {
    /// Holds a `/ws`, `/events` or `/updates` session on some node, or
    /// held one within its linger.
    Online,
    /// Holds none.
    Offline,
}

/// `GET /agents` → `{ agents: [{ id, name, description, avatar, status,
/// capabilities }] }` (protocol §9, §11).
#[utoipa::path(
    operation_id = "listAgents",
    tag = "agent",
    summary = "The other agents of the caller's Bay",
    description = "Every agent of the caller's Bay except the caller, sorted by id, whether or not it shares a conversation with the caller. `status` is `online` while the agent holds a `/ws`, `/events` or `/updates` session on any node, or held one within its linger (2.5 s after a `/ws` or `/events` session, `timing.presence_linger`; 10 s after an `/updates` call, `timing.presence_poll_linger`, so a poller stays online between its polls), else `offline`; going offline shows when the linger ends after a clean close, and within about 6 s when the agent's node dies (defaults). `presence` is its activity presence: `streaming`, `thinking`, `online`, `idle` or `offline`, by the rule of `presence.updated` events. `connector` is `{ platform }` for a connector agent (protocol §9; marked by the admin API), whose `capabilities` are then `[\"ask\", \"send\"]`; otherwise `connector` is `null` and `capabilities` `[]`. `avatar` is always `null`: this gateway stores none. Works with user tokens too.",
    responses(
        (status = 200, description = "The other agents of the Bay", body = AgentDirectory),
        (status = 401, description = "UNAUTHORIZED: missing, unknown, rotated or revoked token", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED: the agent request budget (60/min by default) is spent", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 500, description = "INTERNAL", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE: the store or node cannot serve now", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[get("/agents")]
async fn list_agents(state: web::Data<AppState>, caller: Caller) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal).await?;
    let bay = &caller.principal.bay;
    let me = &caller.principal.participant.id;
    let (participants, records, drafts, connectors) = futures_util::try_join!(
        state.store.participants(bay),
        state.store.presence_records(bay),
        state.store.draft_authors(bay),
        state.store.connectors(bay),
    )?;
    let now = now_ms();
    let online: HashSet<ParticipantId> = records
        .iter()
        .filter(|e| e.present_at(now))
        .map(|e| e.participant.clone())
        .collect();
    let states = presence::compute(
        records,
        &drafts,
        now,
        state.settings.timing.presence_idle_after,
    );
    let mut agents: Vec<DirectoryAgent> = participants
        .into_iter()
        .filter(|p| p.kind == ParticipantKind::Agent && &p.id != me)
        .map(|p| DirectoryAgent {
            status: if online.contains(&p.id) {
                AgentStatus::Online
            } else {
                AgentStatus::Offline
            },
            presence: states.of(&p.id),
            capabilities: match connectors.contains_key(&p.id) {
                true => vec!["ask", "send"],
                false => Vec::new(),
            },
            connector: connectors
                .get(&p.id)
                .map(|&platform| crate::api::connectors::ConnectorSpec { platform }),
            id: p.id,
            name: p.name,
            description: p.description,
            avatar: None,
        })
        .collect();
    agents.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(HttpResponse::Ok().json(AgentDirectory { agents }))
}

/// Body of `POST /conversations` (protocol §11).
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NewAgentChat {
    /// Up to 200 characters, no line breaks; `null`, absent or blank for
    /// none. Used only when the call creates the conversation.
    title: Option<String>,
    /// Exactly one id: a user of the caller's Bay.
    #[schema(min_items = 1, max_items = 1)]
    user_ids: Vec<String>,
}

/// `POST /conversations` → 201 (created) or 200 (the pair's existing room).
#[derive(Serialize, ToSchema)]
pub(crate) struct AgentChat {
    /// Conversation id: `c_ac_` + 32 hex digits, derived from the agent's
    /// and the user's ids, so the pair always gets the same room.
    id: ConversationId,
    /// Always `AGENT_CHAT`.
    #[serde(rename = "type")]
    kind: ConversationType,
    /// The room's title; `null` when it has none.
    #[schema(required = true)]
    title: Option<String>,
    /// The caller, then the user, both `member`.
    members: Vec<AgentChatMember>,
}

/// A member of a new [`AgentChat`].
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AgentChatMember {
    /// A participant of the caller's Bay.
    participant_id: ParticipantId,
    /// Always `member`.
    role: Role,
}

impl From<&Conversation> for AgentChat {
    fn from(c: &Conversation) -> Self {
        AgentChat {
            id: c.id.clone(),
            kind: c.kind,
            title: c.title.clone(),
            members: c
                .members
                .iter()
                .map(|m| AgentChatMember {
                    participant_id: m.participant.clone(),
                    role: m.role,
                })
                .collect(),
        }
    }
}

fn invalid(message: &str) -> ApiError {
    ApiError::new(ErrorCode::InvalidRequest, message)
}

/// `POST /conversations` `{title?, userIds: [one]}` → 201 `{id, type,
/// title, members}`: an AGENT_CHAT of the calling agent and one user of
/// its Bay (protocol §11). It reaches both members' `/ws` and `/updates`
/// like any conversation, with its first message. Idempotent per pair:
/// a later call answers 200 with the same room (docs/conversations.md).
#[utoipa::path(
    operation_id = "createAgentChat",
    tag = "agent",
    summary = "Open an AGENT_CHAT with one user",
    description = "Agents only. Creates an AGENT_CHAT whose members are the caller and the one user named in `userIds` (a user of the caller's Bay), both with the role `member`. One room per agent and user: the first call creates it (201), every later call answers 200 with that same room as it is now (a `title` given then is ignored). Its id is derived from the two participant ids, so concurrent first calls on any nodes still make one room. Its messages reach both members' `/ws` and `/updates` like any conversation's. A blank `title` is no title (`null`).",
    request_body = NewAgentChat,
    responses(
        (status = 200, description = "The pair's existing conversation", body = AgentChat),
        (status = 201, description = "The conversation, created", body = AgentChat),
        (status = 400, description = "INVALID_JSON (not JSON, `userIds` missing, a field mistyped) or INVALID_REQUEST (`userIds` does not hold exactly one id of a user of the caller's Bay, or `title` is too long or holds a line break)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED: missing, unknown, rotated or revoked token", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: the caller is a user; only agents open AGENT_CHATs", body = ErrorBody),
        (status = 409, description = "ALREADY_EXISTS: the operator gave the pair's id to another conversation", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE", body = ErrorBody),
        (status = 415, description = "UNSUPPORTED_MEDIA_TYPE: content-type is not application/json", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED: the agent request budget (60/min by default) is spent", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 500, description = "INTERNAL", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE: the store or node cannot serve now", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[post("/conversations")]
async fn create_agent_chat(
    state: web::Data<AppState>,
    caller: Caller,
    body: Object<NewAgentChat>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal).await?;
    let me = &caller.principal.participant;
    if me.kind != ParticipantKind::Agent {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "only agents open AGENT_CHAT conversations",
        ));
    }
    let body = body.into_inner();
    let title = provision::title(body.title)?;
    let [user_id] = body.user_ids.as_slice() else {
        return Err(invalid("userIds must hold exactly one user id"));
    };
    let bay = &caller.principal.bay;
    // Unknown ids and other Bays' ids get the same answer.
    let user = state
        .store
        .participant(bay, &ParticipantId(user_id.clone()))
        .await?
        .ok_or_else(|| invalid("userIds[0] is not a user of your bay"))?;
    if user.kind != ParticipantKind::User {
        return Err(invalid(
            "userIds[0] is an agent; an AGENT_CHAT pairs you with one user",
        ));
    }
    let members = vec![
        Member {
            participant: me.id.clone(),
            role: Role::Member,
        },
        Member {
            participant: user.id.clone(),
            role: Role::Member,
        },
    ];
    let policy = Policy::default();
    let kind = ConversationType::AgentChat;
    let id = agent_chat_id(&me.id, &user.id);
    let user_id = user.id.clone();
    provision::check_shape(kind, &members, &[me.clone(), user], &policy)?;
    let conversation = Conversation {
        id: id.clone(),
        kind,
        title,
        policy,
        members,
    };
    // The store creates an id once, atomically: of concurrent first calls
    // one creates and the others find its room.
    if let Created::Created(c) = state.store.create_conversation(bay, conversation).await? {
        return Ok(HttpResponse::Created().json(AgentChat::from(&c)));
    }
    match state.store.conversation(bay, &id).await? {
        Some(c) if c.kind == kind && c.member(&me.id).is_some() && c.member(&user_id).is_some() => {
            Ok(HttpResponse::Ok().json(AgentChat::from(&c)))
        }
        _ => Err(ApiError::new(
            ErrorCode::AlreadyExists,
            "this pair's conversation id is taken by another conversation",
        )),
    }
}

/// The AGENT_CHAT id of `agent` and `user`: `c_ac_` + the first 128 bits
/// of SHA-256 over both ids, in hex. Ids are `[A-Za-z0-9_-]`, so the line
/// break keeps every pair's input distinct.
fn agent_chat_id(agent: &ParticipantId, user: &ParticipantId) -> ConversationId {
    let digest = Sha256::digest(format!("agent-chat\n{agent}\n{user}"));
    ConversationId(format!("c_ac_{}", hex::encode(&digest[..16])))
}
