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
//! open (in practice one per Bay feed on this node); idle ones beyond
//! [`MAX_IDLE`] are closed.

use parking_lot::Mutex;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, RedisResult};
use std::time::Duration;

/// Idle dedicated connections kept for reuse.
const MAX_IDLE: usize = 16;

/// How long opening a dedicated connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

pub struct BlockingConnections {
    client: Client,
    idle: Mutex<Vec<MultiplexedConnection>>,
}

impl BlockingConnections {
    pub fn new(client: Client) -> Self {
        BlockingConnections {
            client,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// An idle dedicated connection, or a new one. The bool tells whether it
    /// was reused (a reused one may have died while idle).
    pub async fn take(&self) -> RedisResult<(MultiplexedConnection, bool)> {
        if let Some(conn) = self.idle.lock().pop() {
            return Ok((conn, true));
        }
        let config = AsyncConnectionConfig::new().set_connection_timeout(CONNECT_TIMEOUT);
        let conn = self
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        Ok((conn, false))
    }

    /// Returns a connection whose last command completed normally.
    pub fn give_back(&self, conn: MultiplexedConnection) {
        let mut idle = self.idle.lock();
        if idle.len() < MAX_IDLE {
            idle.push(conn);
        }
    }
}
