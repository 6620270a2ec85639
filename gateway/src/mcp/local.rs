//! Running a tool call where the REST handlers run.
//!
//! rmcp drives each session on a task of its own (`tokio::spawn`), whose
//! futures must be `Send`. The gateway's own paths are not: they start
//! actors (a held poll, a conversation actor), which needs an actix
//! arbiter. So a call is handed to the arbiter its HTTP request arrived
//! on and the answer comes back over a channel.

use actix_rt::ArbiterHandle;
use std::future::Future;
use tokio::sync::oneshot;

/// Runs `make()`'s future on `arbiter` and waits for its output; `None`
/// when the arbiter stopped before answering (the node is shutting down).
pub async fn on_arbiter<F, Fut, T>(arbiter: &ArbiterHandle, make: F) -> Option<T>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T> + 'static,
    T: Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    let sent = arbiter.spawn_fn(move || {
        actix_rt::spawn(async move {
            let _ = tx.send(make().await);
        });
    });
    if !sent {
        return None;
    }
    rx.await.ok()
}
