//! A TCP proxy to a real redis-server that can freeze the store's tail
//! connections alone: the dedicated connections that issue `XREAD BLOCK`
//! (what every Bay feed reads the log with) stop moving bytes either way,
//! as if their peer were `SIGSTOP`ped, while the shared connection (PING,
//! writes, scripts) keeps flowing. The failure a ping-only health check
//! cannot see.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// See the module docs.
pub struct TailStallProxy {
    port: u16,
    stalled: Arc<AtomicBool>,
}

impl TailStallProxy {
    /// Listens on a free port and forwards to `127.0.0.1:upstream`.
    pub async fn start(upstream: u16) -> TailStallProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let stalled = Arc::new(AtomicBool::new(false));
        let flag = stalled.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await else {
                    continue;
                };
                let tail = Arc::new(AtomicBool::new(false));
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                tokio::spawn(pump(cr, sw, flag.clone(), tail.clone(), true));
                tokio::spawn(pump(sr, cw, flag.clone(), tail, false));
            }
        });
        TailStallProxy { port, stalled }
    }

    /// The Redis URL that goes through the proxy.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Freezes every tail connection, open or to come, until [`Self::heal`].
    pub fn stall_tail(&self) {
        self.stalled.store(true, Ordering::SeqCst);
    }

    /// Lets frozen connections move again.
    pub fn heal(&self) {
        self.stalled.store(false, Ordering::SeqCst);
    }
}

/// Copies one direction. A connection is a tail once its client sent an
/// `XREAD` command; while the proxy is stalled a tail's bytes wait here.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    stalled: Arc<AtomicBool>,
    tail: Arc<AtomicBool>,
    from_client: bool,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        // The command itself (a RESP bulk string), not the word inside a
        // script body that `SCRIPT LOAD` sends over the shared connection.
        const COMMAND: &[u8] = b"$5\r\nXREAD\r\n";
        if from_client
            && buf[..n]
                .windows(COMMAND.len())
                .any(|w| w.eq_ignore_ascii_case(COMMAND))
        {
            tail.store(true, Ordering::SeqCst);
        }
        while tail.load(Ordering::SeqCst) && stalled.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
