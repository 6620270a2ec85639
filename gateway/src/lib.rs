//! Switchboard's HTTP and WebSocket front.
//!
//! This crate owns the wire: it turns requests into store calls and actor
//! messages. It does not decide routing (the `protocol` crate does) or how
//! events are ordered and fanned out (the `actors` crate does). Its
//! modules:
//!
//! - [`api`]: the REST routes, the agent API (protocol §11) and the admin
//!   API; [`provision`] holds the rules for creating Bays, participants and
//!   conversations that the admin API and [`bootstrap`] (`--bootstrap
//!   FILE`) share;
//! - [`realtime`]: `/updates`, `/ws` and `/events` (SSE), with one cursor
//!   and one session per token, and WebSockets served on their own socket;
//! - [`webhooks`]: push delivery to agents' webhooks, the third transport
//!   (signing, destination checks, delivery workers under leases);
//! - [`auth`]: bearer-token authentication; [`ratelimit`]: the per-token
//!   request budgets (in this process or in Redis); [`connections`]: the
//!   admission caps of realtime connections, per IP and per node;
//! - [`error`]: the JSON error body and how a session's end reaches each
//!   transport; [`method_not_allowed`]: 405 / 404 for unmatched requests;
//!   [`middleware`]: request ids and access logs;
//! - [`console`]: the operator console's page at `/console`;
//! - [`ops`]: `/healthz`, `/readyz` and `/metrics`; [`metrics`]: the
//!   metric names; [`telemetry`]: logging set-up; [`openapi`]: the OpenAPI
//!   document at `/openapi.json`;
//! - [`state`]: the state every handler shares; this file: the server's
//!   lifecycle (start, drain, stop).

#![warn(missing_docs)]

pub mod api;
pub mod auth;
pub mod bootstrap;
pub mod client_ip;
pub mod connections;
pub mod console;
pub mod error;
pub mod files;
pub mod held_polls;
pub mod malformed;
pub mod mcp;
pub mod method_not_allowed;
pub mod metrics;
pub mod middleware;
pub mod openapi;
pub mod ops;
pub mod provision;
pub mod ratelimit;
pub mod realtime;
pub mod rooms;
pub mod state;
pub mod telemetry;
pub mod webhooks;

use crate::error::{json_error, path_error, query_error};
use crate::ratelimit::RateLimits;
use crate::state::AppState;
use actix_http::HttpService;
use actix_service::{fn_factory, fn_service, map_config, ServiceFactory};
use actix_web::body::MessageBody;
use actix_web::dev::{AppConfig, ServiceRequest, ServiceResponse};
use actix_web::{web, App};
use sha2::{Digest, Sha256};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use switchboard_actors::conversation::DraftSettings;
use switchboard_actors::feed::FeedSettings;
use switchboard_actors::orphans::OrphanSweep;
use switchboard_actors::presence::PresenceSettings;
use switchboard_actors::registry::{Registry, RegistrySettings};
use switchboard_actors::session::CloseReason;
use switchboard_actors::store::instrumented::Instrumented;
use switchboard_actors::store::memory::{MemoryLimits, MemoryStore};
use switchboard_actors::store::redis::Target as RedisTarget;
use switchboard_actors::store::Store;
use switchboard_config::{Settings, StoreKind};

/// Replays (session opens from a cursor) that read the log at once per node;
/// the rest queue. Bounds the memory a resume storm takes at one time.
const REPLAY_SLOTS: usize = 256;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The `--bootstrap` file could not be read, parsed or applied.
    #[error(transparent)]
    Bootstrap(#[from] bootstrap::BootstrapError),
    /// The listener could not be bound (address in use, no permission…).
    #[error("cannot bind {bind}: {cause}")]
    Bind {
        /// The `bind` setting, `host:port`.
        bind: String,
        /// The OS error.
        cause: std::io::Error,
    },
    /// The store (or the rate limiter's Redis) could not be opened: Redis
    /// unreachable, too old, or with an evicting policy. Never names the
    /// URL, which may hold a password.
    #[error("cannot open the store: {0}")]
    Store(switchboard_actors::store::StoreError),
    /// The file storage could not be set up (`files.dir` not creatable,
    /// bad `files.s3` settings).
    #[error("cannot open the file storage: {0}")]
    Files(files::storage::BlobError),
    /// The HTTP server failed while running.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Where the Redis of `settings` is: one server at `redis.url`, or with
/// `redis.cluster` the cluster reached through the seed URLs it lists. The
/// store and the Redis rate limiter both connect through it.
///
/// # Errors
/// [`StoreError::Unavailable`](switchboard_actors::store::StoreError) for an
/// invalid URL, never quoting it (it may hold a password).
pub fn redis_target(
    settings: &switchboard_config::RedisSettings,
) -> Result<RedisTarget, switchboard_actors::store::StoreError> {
    let target = if settings.cluster {
        RedisTarget::cluster(&settings.seeds())
    } else {
        RedisTarget::single(&settings.url)
    };
    target.map_err(|e| switchboard_actors::store::StoreError::Unavailable {
        doing: "connecting to Redis",
        cause: format!("invalid redis.url: {e}"),
    })
}

async fn open_store(settings: &Settings) -> Result<Arc<dyn Store>, StartError> {
    match settings.store {
        StoreKind::Memory => Ok(Arc::new(MemoryStore::new(MemoryLimits {
            replay_window: settings.replay_window,
            max_entries: settings.replay_max_entries,
        }))),
        StoreKind::Redis => {
            let store = switchboard_actors::store::redis::connect_to(
                redis_target(&settings.redis).map_err(StartError::Store)?,
                settings.redis.connections,
                switchboard_actors::store::redis::RedisLimits {
                    replay_window: settings.replay_window,
                    max_entries: settings.replay_max_entries,
                },
            )
            .await
            // The message names what failed (unreachable, too old, evicting
            // policy) and never the URL, which may hold a password.
            .map_err(StartError::Store)?;
            Ok(Arc::new(store))
        }
    }
}

/// The accept backlog of each listening socket (actix-web's default).
const BACKLOG: i32 = 1024;

/// Binds every address `bind` (`host:port`) resolves to, as actix-web's
/// own `bind` would (address reuse, a backlog of [`BACKLOG`]): listening
/// sockets for [`actix_web::HttpServer::listen`].
///
/// # Errors
/// The address does not resolve, or none of its addresses can be bound
/// (the error of the last one, e.g. address in use).
fn bind(bind: &str) -> std::io::Result<Vec<std::net::TcpListener>> {
    use socket2::{Domain, Protocol, Socket, Type};
    use std::net::ToSocketAddrs;
    let mut bound = Vec::new();
    let mut last = None;
    for addr in bind.to_socket_addrs()? {
        let socket = (|| {
            let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
            socket.set_reuse_address(true)?;
            socket.bind(&addr.into())?;
            socket.listen(BACKLOG)?;
            Ok::<_, std::io::Error>(std::net::TcpListener::from(socket))
        })();
        match socket {
            Ok(l) => bound.push(l),
            Err(e) => last = Some(e),
        }
    }
    match (bound.is_empty(), last) {
        (false, _) => Ok(bound),
        (true, Some(e)) => Err(e),
        (true, None) => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the address resolves to nothing",
        )),
    }
}

/// Runs the gateway until SIGINT/SIGTERM, then drains: `/readyz` turns 503,
/// new sessions are refused, every WebSocket gets a final `cursor` frame and
/// closes with 4003, held `/updates` answer at once, and in-flight requests
/// get up to `timing.drain_timeout` to finish. Must run inside an actix system.
///
/// # Errors
///
/// [`StartError`] when the store, the bootstrap file or the listener cannot
/// be set up, or the server fails while running.
pub async fn serve(settings: Settings) -> Result<(), StartError> {
    // First, before any actor or store: a busy port is refused without side
    // effects, and without actors that never ran left for the runtime's
    // teardown (which starts them outside any reactor, and panics).
    let listeners = bind(&settings.bind).map_err(|cause| StartError::Bind {
        bind: settings.bind.clone(),
        cause,
    })?;
    ops::exporter::install();
    let store: Arc<dyn Store> = Arc::new(Instrumented::new(open_store(&settings).await?));
    if let Some(path) = &settings.bootstrap {
        bootstrap_demo(&*store, path).await?;
        bootstrap::keep_seeded(store.clone(), path.clone());
    }
    let registry = Registry::new(store.clone(), registry_settings(&settings));
    let base = files::public_base(&settings, &listeners);
    let state = app_state(&settings, store, registry, &base)?;
    let mut signals = ShutdownSignals::install();
    let server = listen(&settings, state.clone(), listeners)?;
    spawn_housekeeping(&state);
    ops::node_report::spawn(state.clone());
    ops::canary::spawn(
        state.canary.clone(),
        state.store.clone(),
        state.registry.clone(),
        settings.timing.canary_interval,
    );
    let handle = server.handle();
    let grace = settings.timing.drain_grace;
    actix_rt::spawn(async move {
        signals.next().await;
        drain(&state, grace, &mut signals, handle).await;
    });
    server.await?;
    tracing::info!("stopped");
    Ok(())
}

/// Provisions the bootstrap file's Bays and prints the tokens it fixed.
async fn bootstrap_demo(store: &dyn Store, path: &std::path::Path) -> Result<(), StartError> {
    let fixed = bootstrap::load(store, path).await?;
    if !fixed.is_empty() {
        // Printed to stdout, not logged: these tokens are already in the
        // operator's bootstrap file, and logs never carry tokens.
        println!("Demo credentials from {}:", path.display());
        for t in &fixed {
            println!(
                "  {:<10} {:<12} {:<14} {}",
                t.bay, t.participant, t.name, t.token
            );
        }
    }
    Ok(())
}

/// The settings of the feeds and conversation actors, from the node's.
fn registry_settings(settings: &Settings) -> RegistrySettings {
    let t = &settings.timing;
    RegistrySettings {
        feed: FeedSettings {
            watermark_interval: t.watermark_interval,
            linger: t.feed_linger,
            batch_max: 512,
            recent_max: settings.replay_max_entries,
            replay_window: settings.replay_window,
            block: Duration::from_secs(5),
            presence: PresenceSettings {
                interval: t.presence_interval,
                linger: t.presence_linger,
                tick: t.presence_tick,
                idle_after: t.presence_idle_after,
            },
            presence_max_members: settings.limits.presence_max_members,
            idle_timeout: t.actor_idle_timeout,
        },
        typing_ttl: t.typing_ttl,
        actor_idle_timeout: t.actor_idle_timeout,
        drafts: DraftSettings {
            flush_interval: t.draft_flush_interval,
            max_chars: settings.limits.max_content_chars,
        },
        arbiters: settings.actor_threads,
    }
}

/// Starts the background workers (webhooks, the orphan-draft sweep) and
/// assembles the state every handler shares.
fn app_state(
    settings: &Settings,
    store: Arc<dyn Store>,
    registry: Registry,
    public_base: &str,
) -> Result<AppState, StartError> {
    let key = sealing_key(settings);
    let webhooks = webhook_dispatcher(settings, store.clone(), registry.clone(), &key);
    webhooks.start();
    let files =
        files::Files::new(settings, store.clone(), &key, public_base).map_err(StartError::Files)?;
    files.start_sweep();
    actix::Actor::start(OrphanSweep::new(
        store.clone(),
        registry.clone(),
        settings.timing.draft_orphan_timeout,
    ));
    let state = AppState {
        webhooks,
        files,
        canary: ops::canary::Canary::new(settings.timing.canary_timeout),
        // Counted in Redis with the redis engine (cluster-wide), per node otherwise.
        limits: Arc::new(RateLimits::from_settings(settings).map_err(StartError::Store)?),
        rooms: Arc::new(rooms::limits::RoomLimits::new(&settings.rooms)),
        admin_token_hash: settings
            .admin_token
            .as_ref()
            .map(|t| Arc::new(hex::encode(Sha256::digest(t.as_bytes())))),
        draining: Arc::new(tokio::sync::watch::channel(false).0),
        replay_slots: Arc::new(tokio::sync::Semaphore::new(REPLAY_SLOTS)),
        mcp: mcp::Mcp::new(
            settings.timing.mcp_session_idle,
            settings.limits.max_body_bytes,
        ),
        held_polls: held_polls::HeldPolls::new(settings.limits.max_held_polls_per_ip),
        connections: connections::ConnectionLimiter::new(
            settings.limits.max_connections_per_ip,
            settings.limits.max_connections,
        ),
        store,
        registry,
        settings: Arc::new(settings.clone()),
    };
    if state.admin_token_hash.is_none() {
        tracing::info!("no admin token configured: the admin API answers 404 (set SWITCHBOARD_ADMIN_TOKEN to enable it)");
    }
    Ok(state)
}

/// Serves every route on the sockets [`bind`] opened, and starts.
///
/// Assembled the way actix-web's `HttpServer` assembles its server (one
/// HTTP service per worker and listener, the same timeouts), plus the
/// upgrade service of `realtime/upgrade.rs`, which `HttpServer` cannot
/// take: WebSocket upgrades leave the HTTP stack with their connection.
fn listen(
    settings: &Settings,
    app_state: AppState,
    listeners: Vec<std::net::TcpListener>,
) -> Result<actix_server::Server, StartError> {
    let max_body = settings.limits.max_body_bytes;
    let bind_error = |cause| StartError::Bind {
        bind: settings.bind.clone(),
        cause,
    };
    let mut builder = actix_server::Server::build()
        .disable_signals()
        .shutdown_timeout(settings.timing.drain_timeout.as_secs().max(1));
    if let Some(workers) = settings.workers {
        builder = builder.workers(workers);
    }
    let shutdown = builder.graceful_shutdown_signal();
    for listener in listeners {
        let addr = listener.local_addr().map_err(bind_error)?;
        tracing::info!("listening on {addr}");
        let state = app_state.clone();
        let shutdown = shutdown.clone();
        builder = builder
            .listen("switchboard", listener, move || {
                // Called once on each worker thread: the actors may run here too.
                state.registry.share_current_thread();
                state.files.sign_on_this_thread();
                let shutdown = shutdown.clone();
                let http = HttpService::build()
                    // Keep-alive connections end when a drain stops the server.
                    .graceful_shutdown_signal({
                        let shutdown = shutdown.clone();
                        move || {
                            let shutdown = shutdown.clone();
                            async move { shutdown.notified().await }
                        }
                    })
                    // The front's timings (realtime/front.rs), which are
                    // actix-http's defaults.
                    .keep_alive(realtime::front::KEEP_ALIVE)
                    .client_request_timeout(realtime::front::FIRST_HEAD_TIMEOUT)
                    // actix-web's default: how long a closing connection
                    // waits for the client's side of the shutdown.
                    .client_disconnect_timeout(Duration::from_secs(1))
                    // A client that closes its end of the connection is
                    // gone: end the connection (dropping a streamed body, so
                    // an SSE session or a held `/updates` call stops within
                    // its 500 ms check) as soon as its EOF is read, instead
                    // of when a later write fails, which for an idle SSE
                    // stream is the second heartbeat after the close
                    // (20–40 s). HTTP clients do not half-close a request
                    // they still await an answer to.
                    .h1_allow_half_closed(false)
                    // The app's way to end a connection's reading (a body
                    // left unread after its 408).
                    .on_connect_ext(|io: &realtime::upgrade::Socket, ext| {
                        ext.insert(io.end_after_answer());
                    })
                    .local_addr(addr)
                    .upgrade(realtime::upgrade::service(state.clone()))
                    .finish(map_config(app(&state, max_body), |_| AppConfig::default()));
                let front = realtime::front::Front::new(state.clone(), addr, shutdown);
                // What `HttpService::tcp` does, with each connection
                // starting in the front (held polls are served there) and
                // its socket wrapped so that a request actix cannot parse
                // gets the JSON error body.
                fn_factory(move || {
                    let http = http.new_service(());
                    let front = front.clone();
                    async move {
                        let http = Rc::new(http.await?);
                        Ok::<_, ()>(fn_service(move |io: tokio::net::TcpStream| {
                            let front = front.clone();
                            let http = http.clone();
                            async move {
                                // Every write goes out at once (no Nagle): a
                                // realtime event must not wait for the ACK of
                                // the one before it, which a client may delay
                                // by up to 40 ms.
                                io.set_nodelay(true)
                                    .map_err(actix_http::error::DispatchError::Io)?;
                                let peer = io.peer_addr().ok();
                                front.serve(io, peer, http).await
                            }
                        }))
                    }
                })
            })
            .map_err(bind_error)?;
    }
    Ok(builder.run())
}

/// The routes and their shared configuration, for one worker.
fn app(
    state: &AppState,
    max_body: usize,
) -> App<
    impl ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    App::new()
        // Innermost: runs just before routing, so a `HEAD` finds its `GET`.
        .wrap(actix_web::middleware::from_fn(
            middleware::head::head_as_get_route,
        ))
        .wrap(actix_web::middleware::from_fn(
            middleware::body_deadline::body_deadline,
        ))
        .wrap(actix_web::middleware::from_fn(
            middleware::request_log::request_log,
        ))
        .app_data(web::Data::new(state.clone()))
        .app_data(
            web::JsonConfig::default()
                .limit(max_body)
                .error_handler(json_error),
        )
        .app_data(web::QueryConfig::default().error_handler(query_error))
        .app_data(web::PathConfig::default().error_handler(path_error))
        .app_data(web::PayloadConfig::default().limit(max_body))
        // Routes are tried in the order given here, each dynamic one with a
        // regex match, so the agent API's comes early and its most used
        // routes first: a send tries a few patterns, not every one.
        // Pairing needs no token: served before the agent scope's gate.
        .configure(api::pairing::routes)
        // Nor do signed downloads: the signature is the credential.
        .configure(api::files::public_routes)
        .service(
            web::scope("/api/agent-api")
                // Authentication before any extractor reads the body.
                .wrap(actix_web::middleware::from_fn(auth::agent_gate))
                .configure(api::messages::routes)
                .configure(api::agent::routes)
                .configure(api::directory::routes)
                .configure(api::connectors::routes)
                .configure(api::drafts::routes)
                .configure(api::webhook::routes)
                .configure(api::polls::routes)
                .configure(api::summary::routes)
                .configure(api::typing::routes)
                .configure(api::files::routes)
                .configure(realtime::updates::routes)
                .configure(realtime::ws::routes)
                .configure(realtime::sse::routes),
        )
        // Rooms by link: the capability in the path is the credential.
        .configure(rooms::routes)
        // MCP (docs/mcp.md): its own gate, the same bearer tokens.
        .configure(|cfg| state.mcp.routes(cfg))
        .service(web::scope("/api/admin").configure(api::admin::routes))
        .configure(ops::routes)
        .configure(console::routes)
        .configure(openapi::routes)
        .default_service(web::to(method_not_allowed::fallback))
}

/// Periodic upkeep: histogram samples are folded in, idle rate-limit state
/// goes, stopped actors are forgotten, and the table gauges stay current
/// without a scrape.
fn spawn_housekeeping(state: &AppState) {
    // Histogram samples wait in lock-free buckets until upkeep folds them in:
    // without it they would accumulate for as long as nobody scrapes.
    actix_rt::spawn(async {
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        loop {
            tick.tick().await;
            ops::exporter::install().run_upkeep();
        }
    });
    let housekeeping = state.clone();
    actix_rt::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(60));
        loop {
            tick.tick().await;
            housekeeping.limits.shrink();
            housekeeping.rooms.shrink();
            housekeeping.registry.tokens().prune();
            ops::exporter::refresh(&housekeeping);
        }
    });
}

/// Drains after the first shutdown signal: new sessions are refused, every
/// session is closed, and the server stops after `grace` (at once on a
/// second signal).
async fn drain(
    state: &AppState,
    grace: Duration,
    signals: &mut ShutdownSignals,
    handle: actix_web::dev::ServerHandle,
) {
    tracing::info!(
        grace_ms = grace.as_millis() as u64,
        "shutdown signal received; draining"
    );
    state.start_draining();
    state.registry.close_all_sessions(CloseReason::Draining);
    // Keep answering (503 on /readyz and new sessions) while load
    // balancers notice; a second signal cuts the grace short. The close
    // frames flush meanwhile (at least 200 ms).
    let graceful = tokio::select! {
        _ = tokio::time::sleep(grace.max(Duration::from_millis(200))) => true,
        _ = signals.next() => {
            tracing::info!("second signal: stopping at once");
            false
        }
    };
    handle.stop(graceful).await;
}

/// SIGTERM and SIGINT (Ctrl-C), listened for from the moment this is
/// made: installed before the node starts listening, so a signal that
/// arrives right after start-up drains the node instead of killing it.
struct ShutdownSignals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
}

impl ShutdownSignals {
    fn install() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            ShutdownSignals {
                term: signal(SignalKind::terminate()).ok(),
                int: signal(SignalKind::interrupt()).ok(),
            }
        }
        #[cfg(not(unix))]
        ShutdownSignals {}
    }

    /// The next SIGTERM or SIGINT.
    async fn next(&mut self) {
        #[cfg(unix)]
        {
            async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
                match s {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending().await,
                }
            }
            tokio::select! {
                _ = recv(&mut self.term) => {}
                _ = recv(&mut self.int) => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// The node's sealing key (32 bytes): `webhooks.secret_key`; without one,
/// a key derived from the admin token (nodes sharing it can open each
/// other's seals), else a key of this process (webhook secrets and
/// attachment filenames sealed before a restart then cannot be opened, and
/// attachment URLs minted by another node do not verify).
fn sealing_key(settings: &Settings) -> [u8; 32] {
    use base64::Engine as _;
    let configured = settings.webhooks.secret_key.as_ref().and_then(|key| {
        base64::engine::general_purpose::STANDARD
            .decode(key)
            .ok()
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
    });
    let derived = settings.admin_token.as_ref().map(|t| {
        let mut h = Sha256::new();
        h.update(b"switchboard webhook secret key\0");
        h.update(t.as_bytes());
        <[u8; 32]>::from(h.finalize())
    });
    configured.or(derived).unwrap_or_else(|| {
        tracing::warn!("no webhooks.secret_key and no admin token: secrets, filenames and attachment URLs are sealed with a key of this process only");
        rand::random()
    })
}

/// The node's webhook deliveries, their secrets sealed with `key`.
fn webhook_dispatcher(
    settings: &Settings,
    store: Arc<dyn Store>,
    registry: Registry,
    key: &[u8; 32],
) -> webhooks::dispatcher::Dispatcher {
    webhooks::dispatcher::Dispatcher::new(
        store,
        registry,
        settings.webhooks.clone(),
        settings.replay_window,
        webhooks::signing::SecretBox::new(key),
    )
}
