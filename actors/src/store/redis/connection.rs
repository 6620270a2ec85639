//! The engine's connections to Redis: one server, or a Redis Cluster.
//!
//! Every request of a node goes over a few *multiplexed* connections, used
//! round-robin ([`Shared`]): commands from concurrent requests are
//! pipelined on one socket, so there is no checkout, no per-checkout health
//! check (`PING` / `UNWATCH` on every borrow, which a pool such as deadpool
//! does) and no waiting for a free connection under load. Measured on the S2
//! benchmark (2,000 connections, 2,000 posts/s): the deadpool pool of 64
//! issued a `PING` and an `UNWATCH` per command, about two thirds of all
//! commands Redis saw; see `BENCHMARKS.md`.
//!
//! - **One server** ([`Target::Single`]): each shared connection is a
//!   redis-rs `ConnectionManager`. A connection that fails reconnects by
//!   itself in the background; commands issued meanwhile fail fast and the
//!   caller answers 503.
//! - **Redis Cluster** ([`Target::Cluster`], `redis.cluster = true`): each
//!   shared connection is a redis-rs async `ClusterConnection`, which keeps
//!   one multiplexed socket per node, routes every command by the slot of
//!   its first key (scripts included: `EVALSHA sha numkeys key…`), follows
//!   `MOVED` (refreshing its slot map) and `ASK` (with `ASKING`), and waits
//!   and retries on `TRYAGAIN`, `CLUSTERDOWN` and `LOADING` — what a slot
//!   migration or a failover answers for a moment. Those retries are
//!   bounded ([`CLUSTER_RETRIES`], backoff [`CLUSTER_RETRY_MIN_MS`] to
//!   [`CLUSTER_RETRY_MAX_MS`]) and every command stays under the engine's
//!   own timeout, so a cluster that does not settle gives 503, not a hung
//!   request.
//!
//! **Scripts on a cluster.** redis-rs answers `NOSCRIPT` by sending
//! `SCRIPT LOAD` and retrying `EVALSHA`; on a cluster it fans `SCRIPT LOAD`
//! out to every node (primaries and replicas) and fails unless every node
//! answers, so one unreachable replica would break scripts on every
//! primary. [`Connection`] therefore never sends `SCRIPT LOAD` to a cluster:
//! it keeps the script's source, and answers a `NOSCRIPT` from `EVALSHA` by
//! sending `EVAL <source>` with the same keys and arguments, which is
//! routed by the first key like any keyed command (following `MOVED` and
//! `ASK` to the node that runs it) and leaves the script cached there for
//! the next `EVALSHA`.
//!
//! Blocking reads never use the shared connections (see the `blocking`
//! module): an `XREAD BLOCK` would stall every command queued behind it.

use parking_lot::RwLock;
use redis::aio::{
    ConnectionLike, ConnectionManager, ConnectionManagerConfig, MultiplexedConnection,
};
use redis::cluster::{ClusterClient, ClusterConfig};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo};
use redis::{
    AsyncConnectionConfig, Client, Cmd, ErrorKind, Pipeline, RedisFuture, RedisResult, Value,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Once};
use std::time::Duration;

/// How long opening (or re-opening) a connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Reconnection attempts after a failure before the manager gives up until
/// the next command triggers a new round. None: commands wait for a
/// reconnection in progress, and while Redis is down they must fail fast
/// (503) rather than queue behind a backoff (measured: one retry already
/// made every command wait 1.4 s).
const RECONNECT_RETRIES: usize = 0;
/// Retries of one cluster command after a redirection (`MOVED`, `ASK`), a
/// transient refusal (`TRYAGAIN`, `CLUSTERDOWN`, `LOADING`) or a broken
/// node connection.
pub const CLUSTER_RETRIES: u32 = 12;
/// Shortest wait before retrying a cluster command that got `TRYAGAIN` (ms).
/// redis-rs' default (1.28 s) would make one slot migration cost seconds.
pub const CLUSTER_RETRY_MIN_MS: u64 = 10;
/// Longest wait between two retries of a cluster command (ms); the waits
/// double from about 20 ms up to this.
pub const CLUSTER_RETRY_MAX_MS: u64 = 500;

/// Where Redis is. Cheap to clone.
#[derive(Clone)]
pub enum Target {
    /// One server (a primary).
    Single(Client),
    /// A Redis Cluster, reached through its seed nodes.
    Cluster(ClusterClient),
}

impl Target {
    /// One server at `url` (`redis://`, `rediss://`, `redis+unix://`, `unix://`).
    ///
    /// # Errors
    /// An invalid URL. The error never quotes the URL (it may hold a password).
    pub fn single(url: &str) -> RedisResult<Target> {
        install_tls_provider();
        Ok(Target::Single(Client::open(url)?))
    }

    /// A Redis Cluster reached through `seeds` (`redis://` or `rediss://`
    /// URLs of some of its nodes; one that answers is enough, the others
    /// are found through it). All seeds share one password and TLS mode.
    ///
    /// # Errors
    /// No seed, an invalid URL, or seeds that disagree on password or TLS.
    pub fn cluster<S: AsRef<str>>(seeds: &[S]) -> RedisResult<Target> {
        install_tls_provider();
        let client = ClusterClient::builder(seeds.iter().map(|s| s.as_ref()))
            .connection_timeout(CONNECT_TIMEOUT)
            .retries(CLUSTER_RETRIES)
            .min_retry_wait(CLUSTER_RETRY_MIN_MS)
            .max_retry_wait(CLUSTER_RETRY_MAX_MS)
            .build()?;
        Ok(Target::Cluster(client))
    }

    /// `host:port` of a single `rediss://` server, to tell a plain server
    /// apart from a slow TLS one when the handshake times out; `None` for
    /// plain URLs, sockets and clusters.
    pub fn tls_address(&self) -> Option<(String, u16)> {
        match self {
            Target::Single(client) => match &client.get_connection_info().addr {
                ::redis::ConnectionAddr::TcpTls { host, port, .. } => Some((host.clone(), *port)),
                _ => None,
            },
            Target::Cluster(_) => None,
        }
    }

    /// Whether this is a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self, Target::Cluster(_))
    }

    /// Opens one connection of its own (a plain multiplexed connection, or
    /// a cluster connection with its own socket to every node), for callers
    /// that must not share the engine's connections: blocking reads and the
    /// rate limiter. `response_timeout` `None` waits for replies as long as
    /// it takes (the caller bounds it).
    ///
    /// # Errors
    /// The connection error (refused, timed out, authentication, TLS).
    pub async fn connect(&self, response_timeout: Option<Duration>) -> RedisResult<Connection> {
        match self {
            Target::Single(client) => {
                let mut config =
                    AsyncConnectionConfig::new().set_connection_timeout(CONNECT_TIMEOUT);
                if let Some(timeout) = response_timeout {
                    config = config.set_response_timeout(timeout);
                }
                let conn = client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await?;
                Ok(Connection::Plain(conn))
            }
            Target::Cluster(client) => {
                let mut config = ClusterConfig::new().set_connection_timeout(CONNECT_TIMEOUT);
                if let Some(timeout) = response_timeout {
                    config = config.set_response_timeout(timeout);
                }
                let conn = client.get_async_connection_with_config(config).await?;
                Ok(Connection::Cluster(conn))
            }
        }
    }
}

/// rustls needs a process-wide crypto provider for `rediss://`. Installed
/// once; a provider some other part of the process installed first is kept.
fn install_tls_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A small set of multiplexed connections, used round-robin. Cheap to clone.
#[derive(Clone)]
pub struct Shared {
    connections: Arc<[Connection]>,
    next: Arc<AtomicUsize>,
}

impl Shared {
    /// Opens `count` (at least 1) multiplexed connections to `target`: to
    /// the server, or each to every node of the cluster.
    ///
    /// # Errors
    /// The first connection error (refused, timed out, authentication, TLS).
    pub async fn open(
        target: &Target,
        count: usize,
        response_timeout: Duration,
    ) -> RedisResult<Self> {
        let mut connections = Vec::with_capacity(count.max(1));
        for _ in 0..count.max(1) {
            connections.push(match target {
                Target::Single(client) => {
                    let config = ConnectionManagerConfig::new()
                        .set_connection_timeout(CONNECT_TIMEOUT)
                        .set_response_timeout(response_timeout)
                        .set_number_of_retries(RECONNECT_RETRIES);
                    Connection::Managed(
                        ConnectionManager::new_with_config(client.clone(), config).await?,
                    )
                }
                Target::Cluster(_) => target.connect(Some(response_timeout)).await?,
            });
        }
        Ok(Shared {
            connections: connections.into(),
            next: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// How many connections there are.
    pub fn len(&self) -> usize {
        self.connections.len()
    }

    /// One of the connections (the next in turn), to run a command on.
    pub fn get(&self) -> Connection {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.connections.len();
        self.connections[i].clone()
    }
}

/// One multiplexed connection: to one server (managed or plain), or to a
/// cluster. Cloning it shares the underlying sockets.
#[derive(Clone)]
pub enum Connection {
    /// One server, reconnecting by itself.
    Managed(ConnectionManager),
    /// One server, a plain connection (dropped by its owner when it fails).
    Plain(MultiplexedConnection),
    /// A Redis Cluster.
    Cluster(ClusterConnection),
}

impl Connection {
    /// Runs `command` on every primary (the one server, or each primary of
    /// the cluster) and answers `(node, reply)` for each; `node` is the
    /// primary's `host:port` on a cluster, empty for the one server.
    ///
    /// # Errors
    /// The first failure of any node.
    pub async fn on_every_primary(&mut self, command: &Cmd) -> RedisResult<Vec<(String, Value)>> {
        match self {
            Connection::Cluster(conn) => {
                let reply = conn
                    .route_command(
                        command,
                        RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None)),
                    )
                    .await?;
                match reply {
                    Value::Map(items) => items
                        .into_iter()
                        .map(|(node, reply)| {
                            let node = match node {
                                Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
                                Value::SimpleString(s) => s,
                                other => format!("{other:?}"),
                            };
                            Ok((node, reply))
                        })
                        .collect(),
                    other => Err((
                        ErrorKind::TypeError,
                        "unexpected reply from the cluster's primaries",
                        format!("{other:?}"),
                    )
                        .into()),
                }
            }
            _ => {
                let reply = self.req_packed_command(command).await?;
                Ok(vec![(String::new(), reply)])
            }
        }
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Managed(conn) => conn.req_packed_command(cmd),
            Connection::Plain(conn) => conn.req_packed_command(cmd),
            Connection::Cluster(conn) => Box::pin(cluster_command(conn, cmd)),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Managed(conn) => conn.req_packed_commands(cmd, offset, count),
            Connection::Plain(conn) => conn.req_packed_commands(cmd, offset, count),
            Connection::Cluster(conn) => conn.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Managed(conn) => conn.get_db(),
            Connection::Plain(conn) => conn.get_db(),
            Connection::Cluster(conn) => conn.get_db(),
        }
    }
}

/// Sources of the scripts seen in `SCRIPT LOAD`, by SHA-1. Holds the
/// engine's and the rate limiter's few fixed scripts.
static SCRIPT_SOURCES: LazyLock<RwLock<HashMap<String, Arc<[u8]>>>> =
    LazyLock::new(|| RwLock::new(HashMap::new()));

/// One command on a cluster connection, with the script handling described
/// in the module docs: `SCRIPT LOAD` only records the source (and answers
/// its SHA-1 as Redis would), and an `EVALSHA` the node does not know is
/// sent again as `EVAL` with the recorded source.
async fn cluster_command(conn: &mut ClusterConnection, cmd: &Cmd) -> RedisResult<Value> {
    let args: Vec<&[u8]> = cmd
        .args_iter()
        .map(|a| match a {
            redis::Arg::Simple(bytes) => bytes,
            redis::Arg::Cursor => b"0".as_slice(),
        })
        .collect();
    let name = args.first().map(|a| a.to_ascii_uppercase());
    match name.as_deref() {
        Some(b"SCRIPT") if args.len() == 3 && args[1].eq_ignore_ascii_case(b"LOAD") => {
            let source = args[2];
            let text = std::str::from_utf8(source).map_err(|_| {
                redis::RedisError::from((ErrorKind::ClientError, "script is not UTF-8"))
            })?;
            let sha = redis::Script::new(text).get_hash().to_owned();
            SCRIPT_SOURCES
                .write()
                .entry(sha.clone())
                .or_insert_with(|| source.into());
            Ok(Value::BulkString(sha.into_bytes()))
        }
        Some(b"EVALSHA") if args.len() >= 3 => match conn.req_packed_command(cmd).await {
            Err(err) if err.kind() == ErrorKind::NoScriptError => {
                let sha = String::from_utf8_lossy(args[1]).to_ascii_lowercase();
                let Some(source) = SCRIPT_SOURCES.read().get(&sha).cloned() else {
                    // redis-rs sends SCRIPT LOAD next (recorded above) and retries.
                    return Err(err);
                };
                let mut eval = redis::cmd("EVAL");
                eval.arg(&*source);
                for a in &args[2..] {
                    eval.arg(*a);
                }
                conn.req_packed_command(&eval).await
            }
            other => other,
        },
        _ => conn.req_packed_command(cmd).await,
    }
}
