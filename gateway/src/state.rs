//! Shared application state handed to every handler.

use crate::connections::ConnectionLimiter;
use crate::ratelimit::RateLimits;
use std::sync::Arc;
use switchboard_actors::registry::Registry;
use switchboard_actors::store::Store;
use switchboard_config::Settings;

/// Everything handlers need. Cheap to clone (all `Arc`s).
#[derive(Clone)]
pub struct AppState {
    /// The node's validated settings, fixed for the process lifetime.
    pub settings: Arc<Settings>,
    /// The store (wrapped in metrics instrumentation); the only source of
    /// truth shared with other nodes.
    pub store: Arc<dyn Store>,
    /// Finds or starts this node's Bay feeds and conversation actors.
    pub registry: Registry,
    /// Per-token request budgets (protocol §11: 60/min agent API, 20/min
    /// `/updates`); cluster-wide with the redis engine.
    pub limits: Arc<RateLimits>,
    /// The room protocol's buckets and FOLLOW counts (per node).
    pub rooms: Arc<crate::rooms::limits::RoomLimits>,
    /// Concurrent replays allowed on this node; the rest wait their turn,
    /// so a resume storm's memory is bounded.
    pub replay_slots: Arc<tokio::sync::Semaphore>,
    /// Admission of WebSockets and held `/updates` (per IP, per node).
    pub connections: Arc<ConnectionLimiter>,
    /// Long-polls held per client IP (`limits.max_held_polls_per_ip`).
    pub held_polls: Arc<crate::held_polls::HeldPolls>,
    /// SHA-256 hex of the admin token; `None` disables the admin API (404).
    pub admin_token_hash: Option<Arc<String>>,
    /// Turns true on SIGTERM/SIGINT: `/readyz` answers 503 and new
    /// sessions are refused. A channel rather than a flag so that sessions
    /// not yet attached to a feed (a WebSocket before `hello`) learn of it.
    pub draining: Arc<tokio::sync::watch::Sender<bool>>,
    /// Webhook deliveries of this node (and the sealing of their secrets).
    pub webhooks: crate::webhooks::dispatcher::Dispatcher,
    /// The MCP endpoint (`/api/mcp`): its sessions, shared by every worker.
    pub mcp: crate::mcp::Mcp,
    /// Attachment bytes, URL signing and filename sealing (protocol §10).
    pub files: crate::files::Files,
    /// The readiness canary's outcome (`/readyz`: delivery flows).
    pub canary: Arc<crate::ops::canary::Canary>,
}

impl AppState {
    /// The client address of a request from `peer` with `headers`: the
    /// peer's, or the one a trusted proxy forwarded (`[proxy]`,
    /// [`crate::client_ip::resolve`]). Everything counted per IP uses it.
    pub fn client_ip(
        &self,
        peer: Option<std::net::SocketAddr>,
        headers: &actix_http::header::HeaderMap,
    ) -> Option<std::net::IpAddr> {
        crate::client_ip::resolve(&self.settings.proxy, peer, headers)
    }

    /// [`AppState::client_ip`] of an actix-web request.
    pub fn client_of(&self, req: &actix_web::HttpRequest) -> Option<std::net::IpAddr> {
        self.client_ip(req.peer_addr(), req.headers())
    }

    /// Whether the node is draining.
    pub fn is_draining(&self) -> bool {
        *self.draining.borrow()
    }

    /// Starts the drain (see [`AppState::draining`]).
    pub fn start_draining(&self) {
        self.draining.send_replace(true);
    }

    /// Resolves once the node drains (at once if it already does).
    pub fn drain_started(&self) -> impl std::future::Future<Output = ()> + 'static {
        let mut rx = self.draining.subscribe();
        async move {
            // An error means the state is gone, i.e. the node is stopping.
            let _ = rx.wait_for(|draining| *draining).await;
        }
    }
}
