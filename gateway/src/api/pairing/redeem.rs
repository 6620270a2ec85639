//! `POST /api/agent-api/pair {code}`: redeem a pairing code (protocol §2,
//! `baychat pair <code>`).

use super::code::normalise;
use super::{base_url, AgentRef, Credentials};
use crate::api::body::Object;
use crate::error::ApiError;
use crate::provision;
use crate::state::AppState;
use actix_web::{post, web, HttpRequest, HttpResponse};
use serde::Deserialize;
use switchboard_actors::store::SecretHash;
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use utoipa::ToSchema;

/// Body of `POST /pair`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PairBody {
    /// The code as the operator handed it over (`ABCDE-FGHJK`; case,
    /// dashes and spaces do not matter).
    code: String,
}

/// The one answer for every code that does not redeem: unknown, expired,
/// already used, or not even shaped like a code. No oracle.
fn invalid_code() -> ApiError {
    ApiError::new(
        ErrorCode::InvalidPairingCode,
        "the pairing code is unknown, expired or already used",
    )
}

/// `POST /pair {code}` → 200 `{baseUrl, token, agent: {id, name}}`. No
/// authentication: the code is the credential. Redeeming rotates the
/// agent's token (its old token gets 401 and its sessions close with
/// 4001, on every node) and uses the code up.
#[utoipa::path(
    operation_id = "pair",
    tag = "pairing",
    summary = "Redeem a pairing code for the agent's token",
    description = "No authentication: the single-use code an operator minted (`POST /api/admin/bays/{bay}/participants/{pid}/pairing-codes`) is the credential. Redemption rotates the agent's token, so any other client of the agent is cut off (401, WebSocket close 4001). A code that is unknown, expired or already used gets one answer, 400 `INVALID_PAIRING_CODE`. Attempts are limited per client IP (`pairing.redeem_per_minute`, 10/min by default), redeemed or not.",
    request_body = PairBody,
    responses(
        (status = 200, description = "The credentials to store (the token is shown only here)", body = Credentials),
        (status = 400, description = "INVALID_PAIRING_CODE (unknown, expired or used: one answer for all), or INVALID_JSON (not JSON, no `code`, unknown field)", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE", body = ErrorBody),
        (status = 415, description = "UNSUPPORTED_MEDIA_TYPE: content-type is not application/json", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED: too many attempts from this IP", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 503, description = "STORE_UNAVAILABLE: the store cannot be reached", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(()),
)]
#[post("/api/agent-api/pair")]
pub async fn pair(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: Object<PairBody>,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_pair(state.client_of(&req)).await?;
    let code = normalise(&body.code).ok_or_else(invalid_code)?;
    let target = state
        .store
        .redeem_pairing_code(&SecretHash::of(&code))
        .await?
        .ok_or_else(invalid_code)?;
    // Codes are minted for agents only. One whose agent is gone is used up
    // and answers like any other spent code.
    let (agent, token) = provision::rotate_token(&*state.store, &target.bay, &target.participant)
        .await?
        .ok_or_else(invalid_code)?;
    Ok(HttpResponse::Ok().json(Credentials {
        base_url: base_url(&state, &req),
        token,
        agent: AgentRef::from(&agent),
    }))
}
