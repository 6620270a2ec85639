//! Start-up: opening the engine's connections and refusing servers it
//! cannot be correct on (every primary must be Redis ≥ 7 and run
//! `maxmemory-policy noeviction`). Errors never quote `redis.url`: it may
//! hold a password.

use super::blocking::BlockingConnections;
use super::codec::{corrupt, from_redis, text};
use super::connection::{Shared, Target};
use super::messages::batch::Appends;
use super::{RedisLimits, RedisStore, COMMAND_TIMEOUT, CONNECT_TIMEOUT};
use crate::store::prelude::*;
use crate::store::StoreError;
use ::redis::{cmd, Cmd, FromRedisValue, Value};
use std::future::Future;

/// Connects to Redis at `url` with `connections` multiplexed connections
/// (see the `connection` module), checks the server, and returns the engine.
///
/// # Errors
/// [`StoreError::Unavailable`] when the URL is invalid, the server cannot be
/// reached, is older than Redis 7, or runs an evicting `maxmemory-policy`
/// (when `CONFIG` is not permitted the policy check is skipped with a
/// warning).
pub async fn connect(
    url: &str,
    connections: usize,
    limits: RedisLimits,
) -> Result<RedisStore, StoreError> {
    connect_to(target(Target::single(url))?, connections, limits).await
}

/// Connects to the Redis Cluster reached through `seeds` (URLs of some of
/// its nodes): each of the `connections` is a cluster connection that routes
/// every command and script by its slot. The start-up guards run on every
/// primary of the cluster.
///
/// # Errors
/// As [`connect`], for any primary; also when the seeds disagree on their
/// password or TLS mode.
pub async fn connect_cluster<S: AsRef<str>>(
    seeds: &[S],
    connections: usize,
    limits: RedisLimits,
) -> Result<RedisStore, StoreError> {
    connect_to(target(Target::cluster(seeds))?, connections, limits).await
}

/// A [`Target`], or the error naming the setting (never the URL: it may
/// hold a password).
fn target(parsed: ::redis::RedisResult<Target>) -> Result<Target, StoreError> {
    parsed.map_err(|e| StoreError::Unavailable {
        doing: "connecting to Redis",
        cause: format!("invalid redis.url: {e}"),
    })
}

/// Connects to `target` (one server or a cluster), checks it, and returns
/// the engine. See [`connect`] and [`connect_cluster`].
///
/// # Errors
/// As [`connect`].
pub async fn connect_to(
    target: Target,
    connections: usize,
    limits: RedisLimits,
) -> Result<RedisStore, StoreError> {
    let doing = "connecting to Redis";
    // Errors here never include the URL: it may hold a password.
    // One plain connection first: it fails at once with the real cause
    // (refused, authentication, an untrusted TLS certificate), where the
    // reconnecting managers would retry until the timeout below. It then
    // serves the first blocking read.
    let first = match bounded_connect(doing, target.connect(None)).await {
        // Our bound or the client's own connect timeout.
        Err(StoreError::Unavailable { cause, .. }) if cause.ends_with("timed out") => {
            return Err(StoreError::Unavailable {
                doing,
                cause: timed_out_cause(&target, cause).await,
            })
        }
        other => other?,
    };
    // Bounded: the connection manager would otherwise retry with backoff.
    let shared =
        bounded_connect(doing, Shared::open(&target, connections, COMMAND_TIMEOUT)).await?;
    let cluster = target.is_cluster();
    let blocking = BlockingConnections::new(target);
    blocking.adopt(first);
    let mut store = RedisStore {
        appends: Appends::new(shared.clone(), limits),
        shared,
        blocking,
        limits,
        presence_written: Default::default(),
        presence_read: Default::default(),
        atomic_credentials: false,
    };
    store.ping().await?;
    store.check_server().await?;
    store.atomic_credentials = !cluster && !store.cluster_enabled().await?;
    Ok(store)
}

/// Runs one connection step under [`CONNECT_TIMEOUT`], as `Unavailable`
/// errors that never quote the URL.
async fn bounded_connect<T>(
    doing: &'static str,
    step: impl Future<Output = ::redis::RedisResult<T>>,
) -> Result<T, StoreError> {
    tokio::time::timeout(CONNECT_TIMEOUT, step)
        .await
        .map_err(|_| StoreError::Unavailable {
            doing,
            cause: "timed out".into(),
        })?
        .map_err(|e| StoreError::Unavailable {
            doing,
            cause: format!("cannot connect: {e}"),
        })
}

/// Why the first connection timed out, as precisely as can be told: a
/// `rediss://` URL pointed at a server that speaks plain RESP waits for a
/// TLS handshake that never comes, which otherwise reads as "timed out".
/// The probe sends a plain `PING` on a connection of its own (1 s bound).
async fn timed_out_cause(target: &Target, cause: String) -> String {
    let Some((host, port)) = target.tls_address() else {
        return cause;
    };
    if answers_plain_resp(&host, port).await {
        format!(
            "timed out in the TLS handshake: the server at {host}:{port} answers plain \
             Redis (RESP), not TLS; use a redis:// URL or enable TLS on the server"
        )
    } else {
        cause
    }
}

/// Whether `host:port` answers a plain `PING` with a RESP reply (`+PONG`,
/// or an error such as `-NOAUTH`), within 1 s.
async fn answers_plain_resp(host: &str, port: u16) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let probe = async {
        let mut socket = tokio::net::TcpStream::connect((host, port)).await.ok()?;
        socket.write_all(b"PING\r\n").await.ok()?;
        let mut reply = [0u8; 1];
        socket.read_exact(&mut reply).await.ok()?;
        Some(matches!(reply[0], b'+' | b'-'))
    };
    tokio::time::timeout(std::time::Duration::from_secs(1), probe)
        .await
        .ok()
        .flatten()
        .unwrap_or(false)
}

/// `"<node>: "` naming a cluster primary in an error, or nothing.
fn node_prefix(node: &str) -> String {
    if node.is_empty() {
        String::new()
    } else {
        format!("{node}: ")
    }
}

impl RedisStore {
    /// Whether the (single) server runs in cluster mode: a script may then
    /// touch only one slot's keys, even when the engine talks to it alone.
    async fn cluster_enabled(&self) -> Result<bool, StoreError> {
        let doing = "checking the Redis server";
        let info: String = self
            .query(doing, "INFO cluster", cmd("INFO").arg("cluster"))
            .await?;
        Ok(info.lines().any(|l| l.trim() == "cluster_enabled:1"))
    }

    /// Refuses servers the engine cannot be correct on. On a cluster every
    /// primary is checked (a slot may move to any of them); replicas are
    /// not, as the engine never reads from them.
    async fn check_server(&self) -> Result<(), StoreError> {
        let doing = "checking the Redis server";
        for (node, reply) in self
            .on_every_primary(doing, "INFO server", cmd("INFO").arg("server"))
            .await?
        {
            let at = node_prefix(&node);
            let info =
                String::from_redis_value(&reply).map_err(|e| corrupt(doing, "INFO server", e))?;
            let version = info
                .lines()
                .find_map(|l| l.strip_prefix("redis_version:"))
                .map(str::trim)
                .unwrap_or("unknown");
            let major: u32 = version
                .split('.')
                .next()
                .and_then(|m| m.parse().ok())
                .unwrap_or(0);
            if major < 7 {
                return Err(StoreError::Unavailable {
                    doing,
                    cause: format!(
                        "{at}Redis {version} is too old: the redis engine needs Redis 7.0 or \
                         newer (XINFO STREAM max-deleted-entry-id tells expired cursors apart)"
                    ),
                });
            }
        }
        let replies = match self
            .on_every_primary(
                doing,
                "CONFIG GET maxmemory-policy",
                cmd("CONFIG").arg("GET").arg("maxmemory-policy"),
            )
            .await
        {
            Ok(replies) => replies,
            Err(err) => {
                // Managed services often forbid or rename CONFIG.
                tracing::warn!(error = %err, "CONFIG GET maxmemory-policy is not permitted; make sure Redis runs with maxmemory-policy noeviction");
                return Ok(());
            }
        };
        for (node, reply) in replies {
            let at = node_prefix(&node);
            let policy = match reply {
                Value::Array(items) if items.len() == 2 => {
                    text(doing, "maxmemory-policy", &items[1])?.to_owned()
                }
                Value::Map(items) if items.len() == 1 => {
                    text(doing, "maxmemory-policy", &items[0].1)?.to_owned()
                }
                other => {
                    tracing::warn!(node = %node, reply = ?other, "CONFIG GET maxmemory-policy gave an unexpected answer; cannot check that Redis never evicts Switchboard's keys");
                    continue;
                }
            };
            if policy != "noeviction" {
                return Err(StoreError::Unavailable {
                    doing,
                    cause: format!(
                        "{at}maxmemory-policy is {policy:?}: an evicting policy would silently \
                         drop event-log entries, epochs and history; set maxmemory-policy noeviction"
                    ),
                });
            }
        }
        Ok(())
    }

    /// Runs one command on every primary (see
    /// [`Connection::on_every_primary`](super::connection::Connection::on_every_primary)).
    async fn on_every_primary(
        &self,
        doing: &'static str,
        what: &str,
        command: &Cmd,
    ) -> Result<Vec<(String, Value)>, StoreError> {
        self.timed(doing, what, async {
            self.shared
                .get()
                .on_every_primary(command)
                .await
                .map_err(|e| from_redis(doing, what, e))
        })
        .await
    }
}
