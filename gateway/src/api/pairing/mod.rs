//! Pairing and reverse linking (protocol §2, "The two ways to connect";
//! §11: `POST /pair`, `POST /link-requests`, `GET /link-requests/:id/info`,
//! `GET /link-requests/:id?secret=`): how an agent gets its token without
//! an operator copying it over.
//!
//! - [`redeem`]: `POST /api/agent-api/pair {code}`, no auth: a single-use
//!   code an operator minted redeems for the agent's rotated token.
//! - [`link`]: the link-request routes, no auth: a client asks for a link,
//!   an operator approves it, the client collects the token once.
//! - [`admin`]: the operator's side under `/api/admin` (minting codes,
//!   approving requests).
//!
//! Nothing secret is stored in the clear: codes and poll secrets are kept
//! as SHA-256 (the store's `pairing` area), and a token is minted only when
//! it is handed over, through the same rotation as the admin API's (the
//! old token gets 401 and its sessions close with 4001, on every node).
//! The unauthenticated routes sit outside the agent API's token gate and
//! draw on per-IP buckets (`pairing.*_per_minute`) instead of a token's.

pub mod admin;
pub mod code;
pub mod link;
pub mod redeem;

use crate::state::AppState;
use actix_web::{web, HttpRequest};
use serde::Serialize;
use switchboard_actors::model::Participant;
use switchboard_protocol::ids::ParticipantId;
use utoipa::ToSchema;

/// Registers the unauthenticated routes, with their full paths: they are
/// served before the agent API scope, whose gate would ask for a token.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(redeem::pair)
        .service(link::create)
        .service(link::info)
        .service(link::poll);
}

/// Registers the operator's routes inside the admin API's scope (behind
/// its admin-token gate).
pub fn admin_routes(cfg: &mut web::ServiceConfig) {
    cfg.service(admin::mint_code).service(admin::approve);
}

/// The URL clients reach this deployment at, without a trailing slash:
/// `public_url` when set, else the request's scheme and `Host` (as actix
/// reads them, `Forwarded` / `X-Forwarded-*` included). Clients append
/// `/api/agent-api/…` to it (BayChat CLI: `apiRequest(creds, "GET",
/// "/api/agent-api/me")` on the stored `baseUrl`).
pub fn base_url(state: &AppState, req: &HttpRequest) -> String {
    match &state.settings.public_url {
        Some(url) => url.trim_end_matches('/').to_owned(),
        None => {
            let info = req.connection_info();
            format!("{}://{}", info.scheme(), info.host())
        }
    }
}

/// An agent as pairing names it: `{id, name}` (protocol §2, the
/// `agent` of the credentials file).
#[derive(Serialize, ToSchema)]
pub struct AgentRef {
    /// The agent's participant id.
    #[schema(value_type = String)]
    pub id: ParticipantId,
    /// Its display name.
    pub name: String,
}

impl From<&Participant> for AgentRef {
    fn from(p: &Participant) -> Self {
        AgentRef {
            id: p.id.clone(),
            name: p.name.clone(),
        }
    }
}

/// What a client stores to connect (protocol §2: the credentials file,
/// `{baseUrl, token, agent: {id, name}}`): the answer of a redeemed code.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Credentials {
    /// Where the API is: `scheme://host[:port][/prefix]`, no trailing
    /// slash and no `/api/agent-api` (clients append it).
    pub base_url: String,
    /// The agent's new bearer token (`bay_…`); its previous one no
    /// longer works. Shown only here.
    pub token: String,
    /// The agent the token authenticates.
    pub agent: AgentRef,
}

/// Unix ms as the ISO 8601 UTC timestamp (ms precision) the API uses.
pub fn iso(ms: u64) -> String {
    chrono::DateTime::from_timestamp_millis(ms as i64)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
