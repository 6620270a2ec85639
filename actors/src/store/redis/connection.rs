//! The engine's shared connections to Redis.
//!
//! Every request of a node goes over a few *multiplexed* connections
//! (redis-rs `ConnectionManager`): commands from concurrent requests are
//! pipelined on one socket, so there is no checkout, no per-checkout health
//! check (`PING` / `UNWATCH` on every borrow, which a pool such as deadpool
//! does) and no waiting for a free connection under load. A connection that
//! fails reconnects by itself in the background; commands issued meanwhile
//! fail fast and the caller answers 503.
//!
//! Measured on the S2 benchmark (2,000 connections, 2,000 posts/s): the
//! deadpool pool of 64 issued a `PING` and an `UNWATCH` per command, about
//! two thirds of all commands Redis saw; see `BENCHMARKS.md`.
//!
//! Blocking reads never use these connections (see the `blocking` module):
//! an `XREAD BLOCK` would stall every command queued behind it.

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::{Client, Cmd, Pipeline, RedisFuture, RedisResult, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long opening (or re-opening) a connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Reconnection attempts after a failure before the manager gives up until
/// the next command triggers a new round. None: commands wait for a
/// reconnection in progress, and while Redis is down they must fail fast
/// (503) rather than queue behind a backoff (measured: one retry already
/// made every command wait 1.4 s).
const RECONNECT_RETRIES: usize = 0;

/// A small set of multiplexed connections, used round-robin. Cheap to clone.
#[derive(Clone)]
pub struct Shared {
    connections: Arc<[ConnectionManager]>,
    next: Arc<AtomicUsize>,
}

impl Shared {
    /// Opens `count` (at least 1) multiplexed connections to `client`'s server.
    ///
    /// # Errors
    /// The first connection error (refused, timed out, authentication).
    pub async fn open(
        client: &Client,
        count: usize,
        response_timeout: Duration,
    ) -> RedisResult<Self> {
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(CONNECT_TIMEOUT)
            .set_response_timeout(response_timeout)
            .set_number_of_retries(RECONNECT_RETRIES);
        let mut connections = Vec::with_capacity(count.max(1));
        for _ in 0..count.max(1) {
            connections
                .push(ConnectionManager::new_with_config(client.clone(), config.clone()).await?);
        }
        Ok(Shared {
            connections: connections.into(),
            next: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// One of the connections (the next in turn), to run a command on.
    pub fn get(&self) -> Connection {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.connections.len();
        Connection(self.connections[i].clone())
    }
}

/// One multiplexed connection, borrowed for a command. Dropping it returns
/// nothing anywhere: the underlying socket is shared.
pub struct Connection(ConnectionManager);

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.0.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.0.req_packed_commands(cmd, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.0.get_db()
    }
}
