//! The operator's side of pairing, under `/api/admin` (behind its
//! admin-token gate): minting pairing codes and approving link requests.

use super::code;
use super::{iso, AgentRef};
use crate::api::body::Object;
use crate::error::ApiError;
use crate::provision::{self, NewParticipant};
use crate::state::AppState;
use actix_web::{post, web, HttpResponse};
use serde::{Deserialize, Serialize};
use switchboard_actors::model::Participant;
use switchboard_actors::store::{now_ms, Approval, Created, PairingTarget, SecretHash};
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use switchboard_protocol::ids::{BayId, ParticipantId};
use switchboard_protocol::model::ParticipantKind;
use utoipa::ToSchema;

/// `POST …/pairing-codes` answer.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MintedCode {
    /// The single-use code, `XXXXX-XXXXX` (Crockford base32). Shown only
    /// here; the server keeps its hash.
    pub code: String,
    /// When it stops redeeming (ISO 8601): `pairing.code_ttl` from now.
    pub expires_at: String,
}

/// The agent `pid` of `bay`: 404 when either is unknown, 400 for a user.
async fn agent(
    state: &AppState,
    bay: &BayId,
    pid: &ParticipantId,
) -> Result<Participant, ApiError> {
    match state.store.participant(bay, pid).await? {
        Some(p) if p.kind == ParticipantKind::Agent => Ok(p),
        Some(_) => Err(ApiError::new(
            ErrorCode::InvalidRequest,
            format!("{pid} is a user; pairing is for agents"),
        )),
        None => Err(ApiError::not_found()),
    }
}

/// `POST /bays/{bay}/participants/{pid}/pairing-codes` → 201 `{code,
/// expiresAt}`.
#[utoipa::path(
    operation_id = "mintPairingCode",
    tag = "admin",
    summary = "Mint a pairing code for an agent",
    description = "A single-use code that `POST /api/agent-api/pair` redeems for the agent's rotated token, within `pairing.code_ttl` (10 minutes by default, protocol §2). Minting changes nothing else: the agent's current token keeps working until a code is redeemed, and earlier codes stay valid until used or expired.",
    params(
        ("bay" = String, Path, description = "Bay id"),
        ("pid" = String, Path, description = "An agent's participant id"),
    ),
    responses(
        (status = 201, description = "The code (shown only here)", body = MintedCode),
        (status = 400, description = "INVALID_REQUEST: the participant is a user", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown bay or participant, or the admin API is disabled (no admin token configured)", body = ErrorBody),
        (status = 500, description = "INTERNAL", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE: the store cannot be reached", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[post("/bays/{bay}/participants/{pid}/pairing-codes")]
pub async fn mint_code(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (bay, pid) = path.into_inner();
    let (bay, pid) = (BayId(bay), ParticipantId(pid));
    agent(&state, &bay, &pid).await?;
    let ttl = state.settings.pairing.code_ttl;
    let target = PairingTarget {
        bay,
        participant: pid,
    };
    // 50 random bits: a clash is all but impossible, and a few tries settle it.
    for _ in 0..4 {
        let code = code::mint_code();
        let canonical = code::normalise(&code).expect("a minted code is canonical");
        let expires_at = now_ms() + ttl.as_millis() as u64;
        if let Created::Created(()) = state
            .store
            .create_pairing_code(&SecretHash::of(&canonical), target.clone(), ttl)
            .await?
        {
            return Ok(HttpResponse::Created().json(MintedCode {
                code,
                expires_at: iso(expires_at),
            }));
        }
    }
    Err(ApiError::new(
        ErrorCode::Internal,
        "could not mint a unique pairing code",
    ))
}

/// Body of `POST /link-requests/{id}/approve`: `{bay, participantId}` for
/// an existing agent, or `{bay, agent: {id?, name?, description?}}` for a
/// new one. Exactly one of the two.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Approve {
    /// The Bay of the agent.
    bay: String,
    /// An existing agent of the Bay; its token is rotated when the client
    /// collects it.
    participant_id: Option<String>,
    /// A new agent to create in the Bay for this link.
    agent: Option<NewLinkedAgent>,
}

/// The new agent of an approval.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewLinkedAgent {
    /// 1–64 characters of `[A-Za-z0-9_-]`; minted when absent.
    id: Option<String>,
    /// Display name, 1–200 characters; the name the client asked for when
    /// absent (400 when it asked for none).
    name: Option<String>,
    /// What the agent is for, up to 4,000 characters.
    description: Option<String>,
}

/// `POST /link-requests/{id}/approve` answer.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Approved {
    /// The request's id.
    pub id: String,
    /// Always `approved`.
    pub status: super::link::LinkStatus,
    /// The agent's Bay.
    #[schema(value_type = String)]
    pub bay: BayId,
    /// The agent the client will collect a token for.
    pub agent: AgentRef,
    /// The client must collect the token before this (ISO 8601).
    pub expires_at: String,
}

fn invalid(message: &str) -> ApiError {
    ApiError::new(ErrorCode::InvalidRequest, message)
}

/// `POST /link-requests/{id}/approve` → 200 with the approval.
#[utoipa::path(
    operation_id = "approveLinkRequest",
    tag = "admin",
    summary = "Approve a link request for an agent",
    description = "For an existing agent (`participantId`) or a new one (`agent`, created now; its name defaults to the name the client asked for). The token is minted when the client collects it (`GET /api/agent-api/link-requests/{id}?secret=`): only then is the existing agent's token rotated (the old one gets 401, its sessions close with 4001). A request is approved once.",
    params(("id" = String, Path, description = "Link request id")),
    request_body = Approve,
    responses(
        (status = 200, description = "Approved", body = Approved),
        (status = 400, description = "INVALID_JSON, or INVALID_REQUEST (neither or both of `participantId` and `agent`, an unknown participant or a user, a bad new agent)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED: missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: unknown, expired or collected link request, unknown bay, or the admin API is disabled (no admin token configured)", body = ErrorBody),
        (status = 409, description = "ALREADY_EXISTS: the request is already approved, or the new agent's id is taken", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE", body = ErrorBody),
        (status = 415, description = "UNSUPPORTED_MEDIA_TYPE: content-type is not application/json", body = ErrorBody),
        (status = 500, description = "INTERNAL", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE: the store cannot be reached", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("admin_token" = [])),
)]
#[post("/link-requests/{id}/approve")]
pub async fn approve(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: Object<Approve>,
) -> Result<HttpResponse, ApiError> {
    let id = path.into_inner();
    let body = body.into_inner();
    let bay = BayId(body.bay);
    // Checked first so that a doomed approval creates no agent.
    let request = state
        .store
        .link_request(&id)
        .await?
        .ok_or_else(|| ApiError::new(ErrorCode::NotFound, "no such link request"))?;
    if request.approved.is_some() {
        return Err(already_approved());
    }
    let agent = match (body.participant_id, body.agent) {
        (Some(pid), None) => match state.store.participant(&bay, &ParticipantId(pid)).await? {
            Some(p) if p.kind == ParticipantKind::Agent => p,
            Some(_) => return Err(invalid("participantId is a user; linking is for agents")),
            None if state.store.bay(&bay).await?.is_none() => return Err(ApiError::not_found()),
            None => return Err(invalid("participantId is not a participant of this bay")),
        },
        (None, Some(new)) => {
            let name = new
                .name
                .or(request.name.clone())
                .ok_or_else(|| invalid("agent.name is required: the request carries no name"))?;
            // The minted token is never shown: the client gets a fresh one
            // when it collects the approval.
            let (p, _unshown) = provision::create_participant(
                &*state.store,
                &bay,
                NewParticipant {
                    id: new.id,
                    kind: ParticipantKind::Agent,
                    name,
                    description: new.description,
                    connector: None,
                    token: None,
                },
            )
            .await?;
            p
        }
        _ => return Err(invalid("give exactly one of participantId and agent")),
    };
    let target = PairingTarget {
        bay: bay.clone(),
        participant: agent.id.clone(),
    };
    match state.store.approve_link_request(&id, target).await? {
        Approval::Approved(r) => Ok(HttpResponse::Ok().json(Approved {
            id: r.id,
            status: super::link::LinkStatus::Approved,
            bay,
            agent: AgentRef::from(&agent),
            expires_at: iso(r.expires_at_ms),
        })),
        Approval::NotFound => Err(ApiError::new(ErrorCode::NotFound, "no such link request")),
        Approval::AlreadyApproved => Err(already_approved()),
    }
}

fn already_approved() -> ApiError {
    ApiError::new(
        ErrorCode::AlreadyExists,
        "the link request is already approved",
    )
}
