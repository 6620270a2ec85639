//! Group commit of this node's message appends, per Bay.
//!
//! While one batch of a Bay's appends runs in Redis, the appends that
//! arrive for the Bay wait, and go together in the next batch: one
//! `EVALSHA` of `append.lua`, one read and write of the log's meta hash,
//! one trim check, one `TIME` for the senders' budgets. Redis's cost per
//! post so falls as the load rises, which is when it matters; a post to an
//! idle Bay goes at once (no timer, no added wait). Appends keep the order
//! they arrived in: a batch runs them in that order, and a Bay has at most
//! one batch in flight per node.
//!
//! Each message is answered on its own (`append.lua`: one answer per
//! message, an error inside the script fails only the message it hit). A
//! failure of the whole call (Redis unreachable, timed out) fails every
//! message of the batch with the same error, as it failed the one call
//! each made before; a write whose reply was lost may have been applied
//! (at-least-once, module docs of the engine).

use super::append::{AppendArgs, AppendKeys, APPEND_MESSAGES};
use crate::store::redis::codec::{corrupt, unavailable};
use crate::store::redis::command::invoke_on;
use crate::store::redis::connection::Shared;
use crate::store::redis::log::LogArgs;
use crate::store::redis::RedisLimits;
use crate::store::StoreError;
use ::redis::Value;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use switchboard_protocol::ids::BayId;
use tokio::sync::oneshot;

/// Most messages in one batch: keeps one script's run (~10–20 µs of Redis
/// time per message) well under a millisecond or two, so other clients
/// of Redis are not held up behind it.
const MAX_MESSAGES: usize = 64;

/// Most argument bytes in one batch (the message bodies, mostly): a batch
/// is closed before it would pass this, unless it holds a single message.
const MAX_BYTES: usize = 1 << 20;

/// One message's part of a batch: its keys (`MessageKeys`) and arguments
/// (`MessageArgs`), in the script's order.
pub(in crate::store::redis) struct Part {
    pub keys: Vec<String>,
    pub args: Vec<String>,
}

impl Part {
    fn bytes(&self) -> usize {
        self.args.iter().map(String::len).sum()
    }
}

/// A part waiting for its batch, and where its answer goes.
struct Waiting {
    part: Part,
    answer: oneshot::Sender<Result<Vec<Value>, StoreError>>,
}

/// The per-Bay queues of this node's appends. A Bay has an entry while a
/// batch of its is in flight (its `Vec` holds what waits for the next);
/// the task that runs its batches removes it once nothing waits.
pub(in crate::store::redis) struct Appends {
    shared: Shared,
    limits: RedisLimits,
    queues: Mutex<HashMap<BayId, Vec<Waiting>>>,
}

impl Appends {
    /// Batches over `shared`, appending to logs kept to `limits`.
    pub(in crate::store::redis) fn new(shared: Shared, limits: RedisLimits) -> Arc<Self> {
        Arc::new(Appends {
            shared,
            limits,
            queues: Mutex::new(HashMap::new()),
        })
    }

    /// Appends `part` in `bay` with the next batch: `append.lua`'s answer
    /// for it (`{'ok', …}`, `{'stale'}`, …).
    ///
    /// # Errors
    /// `Unavailable` or `Corrupt` when the batch's call failed as a whole.
    pub(in crate::store::redis) async fn append(
        self: &Arc<Self>,
        doing: &'static str,
        bay: &BayId,
        part: Part,
    ) -> Result<Vec<Value>, StoreError> {
        let (answer, answered) = oneshot::channel();
        let waiting = Waiting { part, answer };
        let first = {
            let mut queues = self.queues.lock();
            match queues.get_mut(bay) {
                Some(queue) => {
                    queue.push(waiting);
                    false
                }
                None => {
                    queues.insert(bay.clone(), vec![waiting]);
                    true
                }
            }
        };
        if first {
            // A task of its own, not this caller's: a caller may stop
            // waiting (its request ended) while others wait behind it.
            tokio::spawn(Arc::clone(self).run(doing, bay.clone()));
        }
        answered.await.unwrap_or_else(|_| {
            Err(unavailable(
                doing,
                bay.as_str(),
                "the append batch was dropped (the runtime is shutting down)",
            ))
        })
    }

    /// Runs `bay`'s batches until nothing waits.
    async fn run(self: Arc<Self>, doing: &'static str, bay: BayId) {
        let mut running = Running {
            appends: &self,
            bay: &bay,
            done: false,
        };
        loop {
            let batch = {
                let mut queues = self.queues.lock();
                let queue = queues.get_mut(&bay).map(take_batch);
                match queue {
                    Some(batch) if !batch.is_empty() => batch,
                    _ => {
                        queues.remove(&bay);
                        running.done = true;
                        return;
                    }
                }
            };
            self.run_batch(doing, &bay, batch).await;
        }
    }

    /// One batch: one call, each answer to its waiter.
    async fn run_batch(&self, doing: &'static str, bay: &BayId, batch: Vec<Waiting>) {
        let shared = AppendKeys::new(bay);
        let log = LogArgs::new(&self.limits);
        let head = AppendArgs {
            epoch_candidate: &log.epoch_candidate,
            window_ms: &log.window_ms,
            max_entries: &log.max_entries,
        };
        let mut keys: Vec<&str> = shared.in_order();
        let mut args: Vec<&str> = head.in_order();
        for w in &batch {
            keys.extend(w.part.keys.iter().map(String::as_str));
            args.extend(w.part.args.iter().map(String::as_str));
        }
        let reply: Result<Value, StoreError> =
            invoke_on(&self.shared, doing, &APPEND_MESSAGES, &keys, &args).await;
        match answers(doing, &shared.log, reply, batch.len()) {
            Ok(answers) => {
                for (w, answer) in batch.into_iter().zip(answers) {
                    // A waiter that left drops its answer.
                    let _ = w.answer.send(Ok(answer));
                }
            }
            Err(e) => {
                for w in batch {
                    let _ = w.answer.send(Err(e.clone()));
                }
            }
        }
    }
}

/// Takes the next batch from the front of `queue`: up to [`MAX_MESSAGES`]
/// messages and [`MAX_BYTES`] of arguments (at least one message).
fn take_batch(queue: &mut Vec<Waiting>) -> Vec<Waiting> {
    let mut bytes = 0;
    let mut n = 0;
    for w in queue.iter().take(MAX_MESSAGES) {
        bytes += w.part.bytes();
        if n > 0 && bytes > MAX_BYTES {
            break;
        }
        n += 1;
    }
    queue.drain(..n).collect()
}

/// The script's reply as one answer per message (each a status-first
/// array).
fn answers(
    doing: &'static str,
    log: &str,
    reply: Result<Value, StoreError>,
    expected: usize,
) -> Result<Vec<Vec<Value>>, StoreError> {
    let Value::Array(items) = reply? else {
        return Err(corrupt(
            doing,
            log,
            "the append batch's reply is not a list",
        ));
    };
    if items.len() != expected {
        return Err(corrupt(
            doing,
            log,
            format!("{} answers to a batch of {expected}", items.len()),
        ));
    }
    items
        .into_iter()
        .map(|item| match item {
            Value::Array(answer) if !answer.is_empty() => Ok(answer),
            other => Err(corrupt(
                doing,
                log,
                format!("unexpected answer in an append batch: {other:?}"),
            )),
        })
        .collect()
}

/// While `bay`'s batches run. If the task stops before it is done (its
/// runtime shut down), the Bay's queue goes with it: its waiters are
/// answered `Unavailable` (their senders dropped), and the next append
/// starts a new task.
struct Running<'a> {
    appends: &'a Appends,
    bay: &'a BayId,
    done: bool,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.appends.queues.lock().remove(self.bay);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(bytes: usize) -> Waiting {
        Waiting {
            part: Part {
                keys: vec![],
                args: vec!["x".repeat(bytes)],
            },
            answer: oneshot::channel().0,
        }
    }

    #[test]
    fn a_batch_stops_at_its_message_and_byte_caps() {
        let mut queue: Vec<Waiting> = (0..100).map(|_| waiting(10)).collect();
        assert_eq!(take_batch(&mut queue).len(), MAX_MESSAGES);
        assert_eq!(queue.len(), 100 - MAX_MESSAGES);
        let mut queue: Vec<Waiting> = (0..5).map(|_| waiting(MAX_BYTES / 2)).collect();
        assert_eq!(
            take_batch(&mut queue).len(),
            2,
            "two halves fit, three do not"
        );
        let mut queue = vec![waiting(MAX_BYTES * 3), waiting(1)];
        assert_eq!(
            take_batch(&mut queue).len(),
            1,
            "one large message goes alone"
        );
        assert_eq!(queue.len(), 1);
    }

    #[test]
    fn every_message_needs_its_own_answer() {
        let answer = Value::Array(vec![Value::SimpleString("stale".into())]);
        let two = Ok(Value::Array(vec![answer.clone(), answer.clone()]));
        assert_eq!(answers("testing", "log", two, 2).unwrap().len(), 2);
        let short = Ok(Value::Array(vec![answer]));
        assert!(matches!(
            answers("testing", "log", short, 2),
            Err(StoreError::Corrupt { .. })
        ));
    }
}
