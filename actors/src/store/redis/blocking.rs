//! Dedicated connections for blocking reads (`XREAD BLOCK`).
//!
//! A blocking command occupies its connection until it returns, so it must
//! not run on a shared multiplexed connection: every command pipelined
//! behind it would wait for up to the block time. Each blocking
//! read therefore takes a connection of its own from this small cache, and
//! gives it back when the read completed normally. Connections that failed
//! or whose read was abandoned (the future dropped mid-read, or the guard
//! timeout fired) are dropped, never reused, so no late reply can reach the
//! next reader. At most one connection per concurrently blocked reader is
//! open (in practice the credentials tail's, and two per Bay feed on
//! this node); idle ones beyond
//! [`MAX_IDLE`] are closed.
//!
//! On a Redis Cluster each dedicated connection is a cluster connection of
//! its own (one socket to every node, never the shared ones): the
//! `XREAD BLOCK` goes to the node serving the log's slot, and when the slot
//! moves the read follows the redirection to its new node. So a node keeps
//! one cluster connection per concurrently blocked reader, each holding a
//! socket to every node of the cluster.

use super::connection::{Connection, Target};
use parking_lot::Mutex;
use redis::RedisResult;

/// Idle dedicated connections kept for reuse.
const MAX_IDLE: usize = 16;

/// Dedicated (blocking-read) connections open on this node, in use or idle
/// (gauge). One for the node's credentials tail, about two per running Bay
/// feed (its log and openings tails), plus at most `MAX_IDLE` (16) idle
/// ones.
pub const BLOCKING_CONNECTIONS: &str = "switchboard_redis_blocking_connections";

/// A dedicated connection, counted in [`BLOCKING_CONNECTIONS`] until it is
/// dropped.
pub struct Dedicated {
    /// The connection itself.
    pub conn: Connection,
    _counted: Counted,
}

/// Holds one unit of [`BLOCKING_CONNECTIONS`].
struct Counted;

impl Counted {
    fn new() -> Self {
        metrics::gauge!(BLOCKING_CONNECTIONS).increment(1.0);
        Counted
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        metrics::gauge!(BLOCKING_CONNECTIONS).decrement(1.0);
    }
}

pub struct BlockingConnections {
    target: Target,
    idle: Mutex<Vec<Dedicated>>,
}

impl BlockingConnections {
    pub fn new(target: Target) -> Self {
        BlockingConnections {
            target,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// An idle dedicated connection, or a new one. The bool tells whether it
    /// was reused (a reused one may have died while idle). Its replies are
    /// not bounded: the caller bounds each blocking read by its block time.
    pub async fn take(&self) -> RedisResult<(Dedicated, bool)> {
        if let Some(conn) = self.idle.lock().pop() {
            return Ok((conn, true));
        }
        let conn = self.target.connect(None).await?;
        Ok((
            Dedicated {
                conn,
                _counted: Counted::new(),
            },
            false,
        ))
    }

    /// Keeps `conn`, opened elsewhere, as an idle dedicated connection.
    pub fn adopt(&self, conn: Connection) {
        self.give_back(Dedicated {
            conn,
            _counted: Counted::new(),
        });
    }

    /// Returns a connection whose last command completed normally.
    pub fn give_back(&self, conn: Dedicated) {
        let mut idle = self.idle.lock();
        if idle.len() < MAX_IDLE {
            idle.push(conn);
        }
    }
}
