//! `/api/mcp`: Switchboard as a remote Model Context Protocol server
//! (Streamable HTTP), so MCP-aware agents get the BayChat tools without a
//! local bridge process (docs/mcp.md).
//!
//! The wire protocol (JSON-RPC framing, sessions, SSE answers,
//! protocol-version negotiation) is rmcp's, but for a session's `GET`
//! stream, the official Rust SDK, hosted on
//! actix through `rmcp-actix-web`. What is ours, one concern a file:
//!
//! - [`gate`]: the agent's bearer token before anything (401 before any
//!   session exists), and each session held to the token that opened it;
//! - [`sessions`]: that binding, and the session's listening position;
//! - [`server`]: the MCP handler (server info, tools, the protocol resource);
//! - [`tools`]: the tool list: names, descriptions and argument schemas as
//!   the BayChat CLI ships them;
//! - [`calls`]: each tool, calling the same functions as its REST route;
//! - [`listen`]: `wait_for_messages`, a held poll keeping the session's cursor;
//! - [`stream`]: `GET /api/mcp` of a session, its events as notifications
//!   on SSE with cursors as ids;
//! - [`render`]: the text a tool answers with (`[HH:MM] Name (role) …`);
//! - [`local`]: running a call on the actix arbiter the request came from;
//! - [`refusals`]: JSON (or JSON-RPC) answers where rmcp answers plain text.

pub mod calls;
pub mod gate;
pub mod listen;
pub mod local;
pub mod refusals;
pub mod render;
pub mod server;
pub mod sessions;
pub mod stream;
pub mod tools;

use crate::auth::Caller;
use crate::state::AppState;
use actix_web::{web, HttpMessage, HttpRequest};
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, SessionConfig};
use rmcp_actix_web::transport::StreamableHttpService;
use std::sync::Arc;
use std::time::Duration;

/// Where the endpoint is mounted.
pub const PATH: &str = "/api/mcp";

/// The MCP endpoint of a node: rmcp's transport (one session table for
/// every worker) and the sessions' bindings to their tokens.
#[derive(Clone)]
pub struct Mcp {
    service: StreamableHttpService<server::Handler, LocalSessionManager>,
    /// Session id → the token that opened it, and its listening position.
    pub sessions: Arc<sessions::Sessions>,
}

/// What a tool call needs from the HTTP request that carried it: the
/// node's state, the authenticated caller, the session (if any) and the
/// arbiter to run on. Put into rmcp's request extensions by the
/// `on_request` hook.
#[derive(Clone)]
pub struct CallScope {
    /// The node's state.
    pub state: AppState,
    /// The caller, authenticated by [`gate::mcp_gate`].
    pub caller: Caller,
    /// The client's address (admission of held calls is per IP).
    pub peer: Option<std::net::IpAddr>,
    /// Where the gateway's actors and handlers run.
    pub arbiter: actix_rt::ArbiterHandle,
}

impl Mcp {
    /// The endpoint with `idle` as the sessions' idle expiry
    /// (`timing.mcp_session_idle`) and `max_body` as the largest request
    /// body, in bytes (`limits.max_body_bytes`; larger is 413).
    pub fn new(idle: Duration, max_body: usize) -> Self {
        let mut config = SessionConfig::default();
        config.keep_alive = Some(idle);
        let mut manager = LocalSessionManager::default();
        manager.session_config = config;
        let service = StreamableHttpService::builder()
            .service_factory(Arc::new(|| Ok(server::Handler)))
            .session_manager(Arc::new(manager))
            .stateful_mode(true)
            .max_request_body_bytes(max_body)
            // Switchboard is reached under its own host names: the gate's
            // bearer token is the defence, not the Host header.
            .allowed_hosts(Vec::new())
            .sse_keep_alive(Duration::from_secs(20))
            .on_request_fn(|req: &HttpRequest, ext: &mut rmcp::model::Extensions| {
                if let Some(scope) = call_scope(req) {
                    ext.insert(scope);
                }
            })
            .build();
        Mcp {
            service,
            sessions: Arc::new(sessions::Sessions::new(idle)),
        }
    }

    /// Mounts the endpoint at [`PATH`], behind [`gate::mcp_gate`].
    pub fn routes(&self, cfg: &mut web::ServiceConfig) {
        cfg.service(
            self.service
                .clone()
                .scope_with_path(PATH)
                .wrap(actix_web::middleware::from_fn(gate::mcp_gate)),
        );
    }
}

/// The [`CallScope`] of a request the gate let through.
fn call_scope(req: &HttpRequest) -> Option<CallScope> {
    let state = req.app_data::<web::Data<AppState>>()?.get_ref().clone();
    let caller = req.extensions().get::<Caller>()?.clone();
    let arbiter = actix_rt::Arbiter::try_current()
        .unwrap_or_else(|| actix_rt::System::current().arbiter().clone());
    let peer = state.client_of(req);
    Some(CallScope {
        state,
        caller,
        peer,
        arbiter,
    })
}
