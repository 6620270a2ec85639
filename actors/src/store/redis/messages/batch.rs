//! Group commit of this node's message appends, per Bay.
//!
//! A node keeps at most [`MAX_IN_FLIGHT`] batches of a Bay's appends in
//! Redis at once. The appends that arrive for the Bay meanwhile wait, and
//! go together in the next batch: one `EVALSHA` of `append.lua`, one read
//! and write of the log's meta hash, one trim check, one `TIME` for the
//! senders' budgets. Redis's cost per post so falls as the load rises,
//! which is when it matters; a post to a quiet Bay goes at once (no timer,
//! no added wait). Two in flight rather than one keep Redis busy while a
//! batch's answer travels back and the next is sent (as pipelining did
//! with one script per post). A batch runs its appends in the order they
//! arrived; across batches in flight the order is Redis's. That is safe
//! because a conversation's posts reach the store one at a time (the
//! conversation actor runs them in turn), so only posts of different
//! conversations, concurrent anyway, can share or race between batches.
//!
//! Each message is answered on its own (`append.lua`: one answer per
//! message, an error inside the script fails only the message it hit). A
//! failure of the whole call (Redis unreachable, timed out) fails every
//! message of the batch with the same error, as it failed the one call
//! each made before; a write whose reply was lost may have been applied
//! (at-least-once, module docs of the engine). What waits behind a failed
//! batch is answered `Unavailable` at once and never sent, and a post's
//! command timeout counts from its arrival, queue included: a post that
//! never left the queue is never stored, whatever it was answered.

use super::append::{AppendArgs, AppendKeys, APPEND_MESSAGES};
use crate::store::redis::codec::{corrupt, unavailable};
use crate::store::redis::command::invoke_on;
use crate::store::redis::connection::Shared;
use crate::store::redis::log::LogArgs;
use crate::store::redis::{RedisLimits, COMMAND_TIMEOUT};
use crate::store::StoreError;
use ::redis::Value;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use switchboard_protocol::ids::BayId;
use tokio::sync::oneshot;

/// Most batches of one Bay a node has in Redis at once (see the module
/// docs).
const MAX_IN_FLIGHT: usize = 2;

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

/// One Bay's appends on this node: what waits for a batch, and how many
/// tasks run its batches (each one batch in flight at a time).
#[derive(Default)]
struct Queue {
    waiting: Vec<Waiting>,
    running: usize,
}

/// The per-Bay queues of this node's appends. A Bay has an entry while a
/// batch of its is in flight; its last running task removes it once
/// nothing waits.
pub(in crate::store::redis) struct Appends {
    shared: Shared,
    limits: RedisLimits,
    queues: Mutex<HashMap<BayId, Queue>>,
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
        let start = {
            let mut queues = self.queues.lock();
            let queue = queues.entry(bay.clone()).or_default();
            queue.waiting.push(waiting);
            let start = queue.running < MAX_IN_FLIGHT;
            if start {
                queue.running += 1;
            }
            start
        };
        if start {
            // A task of its own, not this caller's: a caller may stop
            // waiting (its request ended) while others wait behind it.
            tokio::spawn(Arc::clone(self).run(doing, bay.clone()));
        }
        // The command timeout counts from here, the queue included: a post
        // behind a stuck batch is answered in time, and one whose caller
        // stopped waiting before its batch was taken is never sent.
        match tokio::time::timeout(COMMAND_TIMEOUT, answered).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(unavailable(
                doing,
                bay.as_str(),
                "the append batch was dropped (the runtime is shutting down)",
            )),
            Err(_) => Err(unavailable(doing, bay.as_str(), "timed out")),
        }
    }

    /// Runs batches of `bay`'s appends, one at a time, until nothing waits.
    async fn run(self: Arc<Self>, doing: &'static str, bay: BayId) {
        let mut running = Running {
            appends: &self,
            bay: &bay,
            done: false,
        };
        loop {
            let batch = {
                let mut queues = self.queues.lock();
                let batch = queues
                    .get_mut(&bay)
                    .map(|q| take_batch(&mut q.waiting))
                    .unwrap_or_default();
                if batch.is_empty() {
                    stop_running(&mut queues, &bay);
                    running.done = true;
                    return;
                }
                batch
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
                // Redis is unreachable or stuck: what waits behind this
                // batch is answered now, unsent, rather than sent into the
                // same trouble. Its 503s are the clean kind (nothing
                // stored); only a sent batch's may have been applied.
                let unsent = self
                    .queues
                    .lock()
                    .get_mut(bay)
                    .map(|q| std::mem::take(&mut q.waiting))
                    .unwrap_or_default();
                let not_sent = unavailable(
                    doing,
                    bay.as_str(),
                    format!("not sent: the append batch ahead of it failed ({e})"),
                );
                for w in unsent {
                    let _ = w.answer.send(Err(not_sent.clone()));
                }
                for w in batch {
                    let _ = w.answer.send(Err(e.clone()));
                }
            }
        }
    }
}

/// Takes the next batch from the front of `queue`: up to [`MAX_MESSAGES`]
/// messages and [`MAX_BYTES`] of arguments (at least one message). Parts
/// whose caller stopped waiting (timed out, or its request ended) are
/// dropped unsent: their callers were answered without them.
fn take_batch(queue: &mut Vec<Waiting>) -> Vec<Waiting> {
    queue.retain(|w| !w.answer.is_closed());
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

/// One task fewer runs `bay`'s batches; the last one out removes the
/// Bay's entry (with whatever still waits: nothing, unless its task was
/// stopped, see [`Running`]).
fn stop_running(queues: &mut HashMap<BayId, Queue>, bay: &BayId) {
    if let Some(queue) = queues.get_mut(bay) {
        queue.running -= 1;
        if queue.running == 0 {
            queues.remove(bay);
        }
    }
}

/// While a task runs `bay`'s batches. If it stops before it is done (its
/// runtime shut down), it counts itself out; when it was the last, the
/// Bay's waiters are answered `Unavailable` (their senders dropped) and
/// the next append starts afresh.
struct Running<'a> {
    appends: &'a Appends,
    bay: &'a BayId,
    done: bool,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if !self.done {
            stop_running(&mut self.appends.queues.lock(), self.bay);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Answered = oneshot::Receiver<Result<Vec<Value>, StoreError>>;

    fn waiting(bytes: usize, receivers: &mut Vec<Answered>) -> Waiting {
        let (answer, answered) = oneshot::channel();
        receivers.push(answered);
        Waiting {
            part: Part {
                keys: vec![],
                args: vec!["x".repeat(bytes)],
            },
            answer,
        }
    }

    #[test]
    fn a_batch_stops_at_its_message_and_byte_caps() {
        let mut rx = Vec::new();
        let mut queue: Vec<Waiting> = (0..100).map(|_| waiting(10, &mut rx)).collect();
        assert_eq!(take_batch(&mut queue).len(), MAX_MESSAGES);
        assert_eq!(queue.len(), 100 - MAX_MESSAGES);
        let mut queue: Vec<Waiting> = (0..5).map(|_| waiting(MAX_BYTES / 2, &mut rx)).collect();
        assert_eq!(
            take_batch(&mut queue).len(),
            2,
            "two halves fit, three do not"
        );
        let mut queue = vec![waiting(MAX_BYTES * 3, &mut rx), waiting(1, &mut rx)];
        assert_eq!(
            take_batch(&mut queue).len(),
            1,
            "one large message goes alone"
        );
        assert_eq!(queue.len(), 1);
    }

    #[test]
    fn a_part_whose_caller_left_is_not_sent() {
        let mut rx = Vec::new();
        let mut queue: Vec<Waiting> = (0..3).map(|_| waiting(10, &mut rx)).collect();
        drop(rx.remove(1));
        let batch = take_batch(&mut queue);
        assert_eq!(batch.len(), 2);
        assert!(batch.iter().all(|w| !w.answer.is_closed()));
        assert!(queue.is_empty());
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
