//! Webhook delivery: the gateway's third transport (protocol §11, webhook
//! contract v2).
//!
//! Each agent with a webhook has a delivery position in its Bay's log,
//! kept in the store. A [`Dispatcher`] per node scans the store's webhook
//! owners every second and runs a worker for each agent whose lease it can
//! take (the agent's lease in the Bay's group `webhook:<bay>`), reading
//! each Bay's group once per scan to skip the agents another live node
//! delivers for: one node at a time delivers for an agent, and when it dies another takes over once
//! its leases lapse, from the stored position. A node keeps all its leases
//! of a Bay with one heartbeat, renewed every third of `lease_ttl` by the
//! scan loop, not one renewal per agent.
//!
//! A worker reads the log from its position and projects each record for
//! its agent exactly as `/ws` does (same recipients as of the record, same
//! verdicts; the agent's own messages and changes are skipped). Records go
//! one at a time, in log order — at-least-once, one request in flight per
//! agent, so a slow receiver delays only its own agent:
//!
//! A caught-up worker is idle: it waits on its Bay's feed on this node
//! ([`WatchHead`]) and reads the log again only when the feed reads a new
//! entry. A webhook set, replaced or removed (on any node, by its owner,
//! an operator or a 410) logs a `WebhookChanged` control entry, and a
//! suspension or reinstatement a `Suspension` entry, so the worker also
//! learns of those from the log; it reads its webhook and the agent's
//! standing again after reading any new records, and every
//! `idle_recheck` (30 s by default) as a backstop. An idle worker so costs
//! the store nothing between two checks, however long it idles: what a
//! node's idle webhooks cost is its heartbeat per Bay and its scan.
//!
//! While an operator suspends the agent or its Bay the worker delivers
//! nothing and keeps its position; it resumes from there once reinstated
//! (records that left the replay window meanwhile are given up, as below).
//!
//! - 2xx: delivered; the position moves past the record.
//! - 410: the receiver asked to stop; the webhook is removed and its status
//!   says why.
//! - 429 / 503: retried after `Retry-After` (capped at `retry_max`).
//! - anything else, a timeout or a refused connection: retried with
//!   exponential backoff and full jitter, `retry_initial` doubling to
//!   `retry_max`, until the record leaves the replay window; then it is
//!   given up, counted, and the position moves on.
//!
//! Every attempt resolves the destination again and refuses private
//! addresses (unless allowed), then connects to exactly the addresses it
//! checked: a DNS answer that changes between the check and the connection
//! (rebinding) cannot reach an internal address. Redirects are not
//! followed, and at most `max_response_bytes` of a response are read.

use super::body::{event_id, Bodies, Body};
use super::destination::{check_url, resolve};
use super::signing::{headers, SecretBox};
use crate::metrics::{WEBHOOK_ATTEMPT_SECONDS, WEBHOOK_DELIVERIES};
use parking_lot::Mutex;
use rand::Rng;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchboard_actors::feed::WatchHead;
use switchboard_actors::model::Participant;
use switchboard_actors::open::project;
use switchboard_actors::registry::Registry;
use switchboard_actors::replay::memberships_at;
use switchboard_actors::store::log::{LogEvent, LogRecord};
use switchboard_actors::store::{Replay, Store, StoreError, Webhook, WebhookStatus};
use switchboard_config::WebhookSettings;
use switchboard_protocol::cursor::{EntryId, LogPosition};
use switchboard_protocol::ids::{BayId, ConversationId, ParticipantId};
use tokio::sync::Semaphore;

/// How often the dispatcher looks for webhooks to deliver.
const SCAN_INTERVAL: Duration = Duration::from_secs(1);
/// Log records read per store call.
const READ_BATCH: usize = 100;
/// Longest wait between two reads of the log while the Bay has no feed on
/// this node to wake the worker (normally it has: the worker watches it).
const NO_FEED_WAIT: Duration = Duration::from_secs(1);
/// Longest sleep between two checks of a webhook during a retry's backoff:
/// a fixed URL is not kept waiting out the old one's backoff.
const BACKOFF_STEP: Duration = Duration::from_secs(1);

/// What workers share.
struct Shared {
    store: Arc<dyn Store>,
    /// The node's feeds: a worker waits on its Bay feed's head instead of
    /// holding a blocking read of its own (one per agent would be one Redis
    /// connection per agent).
    registry: Registry,
    settings: WebhookSettings,
    replay_window: Duration,
    secrets: SecretBox,
    /// Deliveries in flight on this node (`max_concurrent`).
    in_flight: Semaphore,
    /// The shared part of each message's bodies, rendered once for all
    /// the node's workers (see `body`).
    bodies: Bodies,
    /// Agent → when its oldest pending record was logged (Unix ms).
    pending_since: Mutex<HashMap<(BayId, ParticipantId), i64>>,
    /// The Bay of each status this node's workers record, as it is
    /// recorded: the console's live webhooks page waits on it.
    status_changes: tokio::sync::broadcast::Sender<BayId>,
}

/// The node's webhook deliveries. Cheap to clone.
#[derive(Clone)]
pub struct Dispatcher {
    shared: Arc<Shared>,
}

impl Dispatcher {
    /// A dispatcher over `store`; nothing runs until [`Dispatcher::start`].
    pub fn new(
        store: Arc<dyn Store>,
        registry: Registry,
        settings: WebhookSettings,
        replay_window: Duration,
        secrets: SecretBox,
    ) -> Self {
        Dispatcher {
            shared: Arc::new(Shared {
                store,
                registry,
                in_flight: Semaphore::new(settings.max_concurrent.max(1)),
                bodies: Bodies::default(),
                settings,
                replay_window,
                secrets,
                pending_since: Mutex::new(HashMap::new()),
                status_changes: tokio::sync::broadcast::channel(64).0,
            }),
        }
    }

    /// Seals a new webhook secret for storage.
    pub fn seal(&self, secret: &str) -> String {
        self.shared.secrets.seal(secret)
    }

    /// Starts the scan loop on the current tokio runtime. The workers it
    /// starts are spread over the threads the node's actors run on (the
    /// HTTP workers', or the dedicated `actor_threads`), by a hash of the
    /// Bay and agent, so a node's deliveries use every core it has.
    pub fn start(&self) {
        let shared = self.shared.clone();
        tokio::spawn(async move {
            // Each running worker, and whether its task ended.
            let mut running: HashMap<(BayId, ParticipantId), Arc<AtomicBool>> = HashMap::new();
            let ttl = shared.settings.lease_ttl;
            let beat_every = ttl / 3;
            // When this node last renewed its heartbeat in each Bay's group.
            let mut beaten: HashMap<BayId, Instant> = HashMap::new();
            let mut scanned: Option<Instant> = None;
            loop {
                running.retain(|_, ended| !ended.load(Ordering::Acquire));
                let bays: HashSet<&BayId> = running.keys().map(|(bay, _)| bay).collect();
                beaten.retain(|bay, _| bays.contains(bay));
                for bay in bays {
                    if beaten.get(bay).is_some_and(|at| at.elapsed() < beat_every) {
                        continue;
                    }
                    let group = lease_group(bay);
                    match shared.store.renew_group(&group, node_id(), ttl).await {
                        Ok(()) => drop(beaten.insert(bay.clone(), Instant::now())),
                        Err(e) => tracing::debug!(error = %e, "cannot renew webhook leases"),
                    }
                }
                if scanned.is_some_and(|at| at.elapsed() < SCAN_INTERVAL) {
                    tokio::time::sleep(beat_every.clamp(Duration::from_millis(50), SCAN_INTERVAL))
                        .await;
                    continue;
                }
                scanned = Some(Instant::now());
                match shared.store.webhook_owners().await {
                    Ok(owners) => {
                        let mut waiting: HashMap<BayId, Vec<ParticipantId>> = HashMap::new();
                        for owner in owners {
                            if !running.contains_key(&owner) {
                                waiting.entry(owner.0).or_default().push(owner.1);
                            }
                        }
                        for (bay, agents) in waiting {
                            for agent in takeable(&*shared.store, &bay, agents).await {
                                let worker =
                                    Worker::new(shared.clone(), bay.clone(), agent.clone());
                                let key = (bay.clone(), agent);
                                let ended = Arc::new(AtomicBool::new(false));
                                let guard = Ended(ended.clone());
                                // Not started (its thread is gone): the task
                                // is dropped, `ended` set, and the next scan
                                // tries again.
                                shared.registry.spawn(&key, async move {
                                    let _guard = guard;
                                    worker.run().await;
                                });
                                running.insert(key, ended);
                            }
                        }
                    }
                    Err(e) => tracing::debug!(error = %e, "cannot list webhooks"),
                }
                tokio::time::sleep(beat_every.clamp(Duration::from_millis(50), SCAN_INTERVAL))
                    .await;
            }
        });
    }

    /// The Bays whose webhook status a worker of this node recorded, as
    /// each is recorded (a lagging receiver misses some: it then reads
    /// everything again, see `Lagged`).
    pub fn status_changes(&self) -> tokio::sync::broadcast::Receiver<BayId> {
        self.shared.status_changes.subscribe()
    }

    /// Age of the oldest record still being retried on this node.
    pub fn oldest_pending(&self) -> Duration {
        let now = chrono::Utc::now().timestamp_millis();
        let oldest = self.shared.pending_since.lock().values().copied().min();
        oldest.map_or(Duration::ZERO, |ms| {
            Duration::from_millis(now.saturating_sub(ms).max(0) as u64)
        })
    }
}

/// Of `agents` (webhook owners of `bay` with no worker on this node), those
/// whose lease this node may take: free, already this node's, or held by
/// a node whose heartbeat lapsed. One read of the Bay's lease group per
/// scan, so a node does not start (and at once stop) a worker every scan
/// for each agent another live node delivers: at idle, a node that
/// delivers none of a Bay's webhooks costs the store one read per Bay per
/// scan, not one lease attempt per webhook. When the holder dies, its
/// heartbeat lapses within `lease_ttl` and the next scan here starts the
/// worker, which takes the lease (that take decides, atomically, as
/// before: two nodes may both try, one wins). If the read fails, none is
/// started this scan.
async fn takeable(
    store: &dyn Store,
    bay: &BayId,
    agents: Vec<ParticipantId>,
) -> Vec<ParticipantId> {
    let held = match store.live_group_holders(&lease_group(bay)).await {
        Ok(held) => held,
        Err(e) => {
            tracing::debug!(bay = %bay, error = %e, "cannot read webhook leases");
            return Vec::new();
        }
    };
    agents
        .into_iter()
        .filter(|agent| {
            held.get(agent.as_str())
                .is_none_or(|holder| holder == node_id())
        })
        .collect()
}

/// The group of the leases under which one node at a time delivers each
/// agent's webhooks in `bay`; each agent's lease is named by its id.
pub fn lease_group(bay: &BayId) -> String {
    format!("webhook:{bay}")
}

/// This node's id, the holder of its leases.
fn node_id() -> &'static str {
    switchboard_actors::node::id()
}

/// Marks its worker's task ended when dropped: when the task returns,
/// panics, or is dropped unrun with its thread.
struct Ended(Arc<AtomicBool>);

impl Drop for Ended {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Why a worker stops.
enum Stop {
    /// Another node holds the lease (or this one lost it).
    NotOurs,
    /// The webhook was removed (by its owner, or by a 410), or replaced by
    /// a new one, which starts from its own position (a new worker takes it).
    Removed,
}

/// Outcome of delivering one record.
enum Delivered {
    /// The receiver accepted the record (2xx): move past it, then record
    /// the success in the webhook's status.
    Accepted,
    /// Done with the record without a delivery (nothing to send, or given
    /// up): move past it.
    Skipped,
    /// Stop the worker.
    Stop(Stop),
}

/// The delivery loop of one agent.
struct Worker {
    shared: Arc<Shared>,
    bay: BayId,
    agent: ParticipantId,
    /// The Bay's lease group (see [`lease_group`]).
    group: String,
    renewed: Instant,
    /// The HTTP client pinned to the addresses last checked, and those.
    client: Option<(Vec<SocketAddr>, reqwest::Client)>,
}

impl Worker {
    fn new(shared: Arc<Shared>, bay: BayId, agent: ParticipantId) -> Self {
        let group = lease_group(&bay);
        Worker {
            shared,
            bay,
            agent,
            group,
            renewed: Instant::now(),
            client: None,
        }
    }

    async fn run(mut self) {
        match self.deliver_all().await {
            Ok(Stop::NotOurs) => {}
            Ok(Stop::Removed) => self.release().await,
            Err(e) => {
                tracing::warn!(bay = %self.bay, agent = %self.agent, error = %e, "webhook worker stopped");
                self.release().await;
            }
        }
        self.shared
            .pending_since
            .lock()
            .remove(&(self.bay.clone(), self.agent.clone()));
    }

    async fn release(&self) {
        let _ = self
            .shared
            .store
            .release_group_lease(&self.group, self.agent.as_str(), node_id())
            .await;
    }

    /// Takes the lease, or confirms it is still this node's once a third
    /// of `lease_ttl` passed since the last time (the dispatcher's
    /// heartbeat keeps it meanwhile); `false` when another node has it.
    async fn hold(&mut self, force: bool) -> Result<bool, StoreError> {
        let ttl = self.shared.settings.lease_ttl;
        if !force && self.renewed.elapsed() < ttl / 3 {
            return Ok(true);
        }
        let held = self
            .shared
            .store
            .take_group_lease(&self.group, self.agent.as_str(), node_id(), ttl)
            .await?;
        self.renewed = Instant::now();
        Ok(held)
    }

    /// The memberships of the agent right after `position`.
    async fn memberships_at(
        &self,
        position: &LogPosition,
    ) -> Result<HashSet<ConversationId>, StoreError> {
        let store = &self.shared.store;
        let head = store.log_head(&self.bay).await?;
        let now: HashSet<ConversationId> = store
            .conversations_of(&self.bay, &self.agent)
            .await?
            .into_iter()
            .map(|c| c.id)
            .collect();
        if head.epoch != position.epoch {
            return Ok(now);
        }
        let since = LogPosition {
            epoch: position.epoch.clone(),
            entry: position.entry.min(head.entry),
        };
        let changes = store.roster_changes(&self.bay, &since).await?;
        Ok(memberships_at(
            &self.agent,
            position.entry,
            head.entry,
            now,
            &changes,
        ))
    }

    async fn deliver_all(&mut self) -> Result<Stop, StoreError> {
        if !self.hold(true).await? {
            return Ok(Stop::NotOurs);
        }
        tracing::info!(bay = %self.bay, agent = %self.agent, node = node_id(), "delivering webhooks");
        let store = self.shared.store.clone();
        let Some(agent) = store.participant(&self.bay, &self.agent).await? else {
            return Ok(Stop::Removed);
        };
        let Some(webhook) = store.webhook(&self.bay, &self.agent).await? else {
            return Ok(Stop::Removed);
        };
        let Some(mut position) = store.webhook_position(&self.bay, &self.agent).await? else {
            return Ok(Stop::Removed);
        };
        let mut memberships = self.memberships_at(&position).await?;
        let mut head = self.watch_head().await;
        // When the webhook and the agent's standing were last read, and
        // whether an operator suspended the agent or its Bay then.
        let mut checked = Instant::now();
        let mut paused = self.suspended().await?;
        // Whether the log may hold records past the position: at start,
        // after a full batch, and whenever the Bay's feed moved.
        let mut read_due = true;
        loop {
            if !self.hold(false).await? {
                return Ok(Stop::NotOurs);
            }
            let recheck_due = checked.elapsed() >= self.shared.settings.idle_recheck;
            if !read_due && !recheck_due {
                read_due = self.wait_for_more(&mut head, checked).await;
                continue;
            }
            if paused {
                // Paused, not skipped: the position stays, and delivery
                // resumes from it once an operator reinstates. The
                // reinstatement is logged, so the worker looks again when
                // the log moves rather than asking the store every second.
                if store.webhook(&self.bay, &self.agent).await?.as_ref() != Some(&webhook) {
                    return Ok(Stop::Removed);
                }
                paused = self.suspended().await?;
                checked = Instant::now();
                if paused {
                    read_due = false;
                    continue;
                }
            }
            let replay = store
                .read_log(&self.bay, &position, READ_BATCH, None)
                .await?;
            let (records, through) = match replay {
                Replay::Records { records, through } => (records, through),
                Replay::Expired | Replay::EpochChanged => {
                    // Records were lost before delivery (the log was
                    // trimmed or reset): count it and go on from the head.
                    metrics::counter!(WEBHOOK_DELIVERIES, "outcome" => "gave_up").increment(1);
                    tracing::warn!(bay = %self.bay, agent = %self.agent, "webhook position expired; resuming at the log head");
                    position = store.log_head(&self.bay).await?;
                    store
                        .set_webhook_position(&self.bay, &self.agent, &webhook, &position)
                        .await?;
                    memberships = self.memberships_at(&position).await?;
                    continue;
                }
            };
            if !records.is_empty() || checked.elapsed() >= self.shared.settings.idle_recheck {
                // Read after the records: a webhook change or a suspension
                // logged among them is already in the store (each is
                // written before its entry), so nothing after it goes out.
                if store.webhook(&self.bay, &self.agent).await?.as_ref() != Some(&webhook) {
                    return Ok(Stop::Removed);
                }
                paused = self.suspended().await?;
                checked = Instant::now();
                if paused {
                    read_due = false;
                    continue;
                }
            }
            if let Some(stop) = self
                .deliver_records(&agent, &webhook, &mut position, &mut memberships, &records)
                .await?
            {
                return Ok(stop);
            }
            if through > position.entry {
                position.entry = through;
                store
                    .set_webhook_position(&self.bay, &self.agent, &webhook, &position)
                    .await?;
            }
            read_due = !records.is_empty();
        }
    }

    /// Delivers `records` in order, each projected for `agent` as `/ws`
    /// would (its own messages and open drafts skipped), moving `position`
    /// past each one as it is done with it. `Some` when the worker must
    /// stop.
    ///
    /// # Errors
    /// The store failed (reading, or writing the position).
    async fn deliver_records(
        &mut self,
        agent: &Participant,
        webhook: &Webhook,
        position: &mut LogPosition,
        memberships: &mut HashSet<ConversationId>,
        records: &[Arc<LogRecord>],
    ) -> Result<Option<Stop>, StoreError> {
        let store = self.shared.store.clone();
        for record in records {
            // No peers: presence is for live UIs, never pushed (docs/webhooks.md).
            let event = project(record, &agent.id, memberships, &HashSet::new());
            let mut accepted = false;
            if let Some(event) = event.filter(|_| !made_by(record, &agent.id) && !streaming(record))
            {
                match self
                    .deliver(agent, webhook, position, record, &event)
                    .await?
                {
                    Delivered::Accepted => accepted = true,
                    Delivered::Skipped => {}
                    Delivered::Stop(stop) => return Ok(Some(stop)),
                }
            }
            // The position first: once the receiver accepted a record,
            // nothing but a failed position write may send it again
            // (at-least-once, never because of bookkeeping).
            position.entry = record.id;
            store
                .set_webhook_position(&self.bay, &self.agent, webhook, position)
                .await?;
            if accepted {
                self.record_status(webhook, None).await;
            }
        }
        Ok(None)
    }

    /// Whether an operator suspended the agent or its Bay: its webhook
    /// delivers nothing meanwhile (docs/webhooks.md).
    async fn suspended(&self) -> Result<bool, StoreError> {
        let store = &self.shared.store;
        Ok(store.suspended(&self.bay, Some(&self.agent)).await?
            || store.suspended(&self.bay, None).await?)
    }

    /// Caught up (or paused): waits until the Bay's feed reads a new
    /// entry (`head` moves: a record, a webhook change, a suspension), or
    /// until the periodic re-check of the webhook (`idle_recheck` after
    /// `checked`) is due, whichever comes first. An idle worker thus costs
    /// the store nothing meanwhile (its lease lives on the dispatcher's
    /// heartbeat), not a read every second. Without a feed to watch, or
    /// once it went away, sleeps at most [`NO_FEED_WAIT`] and looks for one
    /// again. `true` when the log may have moved (the feed read an entry,
    /// or there is no feed to tell).
    async fn wait_for_more(
        &self,
        head: &mut Option<tokio::sync::watch::Receiver<EntryId>>,
        checked: Instant,
    ) -> bool {
        let deadline = checked + self.shared.settings.idle_recheck;
        let wait = deadline.saturating_duration_since(Instant::now());
        match head {
            Some(rx) => match tokio::time::timeout(wait, rx.changed()).await {
                Ok(Ok(())) => true,
                Err(_) => false,
                Ok(Err(_)) => {
                    // The feed stopped: entries may have gone unseen.
                    tokio::time::sleep(wait.min(NO_FEED_WAIT)).await;
                    *head = self.watch_head().await;
                    true
                }
            },
            None => {
                tokio::time::sleep(wait.min(NO_FEED_WAIT)).await;
                *head = self.watch_head().await;
                true
            }
        }
    }

    /// The head of this Bay's feed on this node, as it moves.
    async fn watch_head(&self) -> Option<tokio::sync::watch::Receiver<EntryId>> {
        self.shared
            .registry
            .feed(&self.bay)
            .send(WatchHead)
            .await
            .ok()
    }

    /// Delivers one record, retrying until it is delivered, given up, or
    /// the worker must stop.
    async fn deliver(
        &mut self,
        agent: &Participant,
        webhook: &Webhook,
        position: &LogPosition,
        record: &LogRecord,
        event: &switchboard_protocol::event::Event,
    ) -> Result<Delivered, StoreError> {
        let store = self.shared.store.clone();
        let id = event_id(&self.bay, &agent.id, &position.epoch, record);
        let at = LogPosition {
            epoch: position.epoch.clone(),
            entry: record.id,
        };
        let rendered = self
            .shared
            .bodies
            .render(&*store, &self.bay, &at, &agent.id, event, &id)
            .await?;
        let Some(body) = rendered else {
            return Ok(Delivered::Skipped);
        };
        let key = (self.bay.clone(), self.agent.clone());
        self.shared
            .pending_since
            .lock()
            .insert(key.clone(), record.id.ms as i64);
        let mut backoff = self.shared.settings.retry_initial;
        let result = loop {
            if !self.hold(false).await? {
                break Delivered::Stop(Stop::NotOurs);
            }
            if store.webhook(&self.bay, &self.agent).await?.as_ref() != Some(webhook) {
                break Delivered::Stop(Stop::Removed);
            }
            let started = Instant::now();
            let outcome = self.attempt(webhook, &id, &body).await;
            metrics::histogram!(WEBHOOK_ATTEMPT_SECONDS).record(started.elapsed().as_secs_f64());
            let wait = match outcome {
                Attempt::Delivered => {
                    metrics::counter!(WEBHOOK_DELIVERIES, "outcome" => "delivered").increment(1);
                    // Its status is recorded by the caller, after the position.
                    break Delivered::Accepted;
                }
                Attempt::Gone => {
                    metrics::counter!(WEBHOOK_DELIVERIES, "outcome" => "disabled").increment(1);
                    let status = self
                        .next_status(Some(
                            "the receiver answered 410 Gone: webhook removed".into(),
                        ))
                        .await?;
                    store
                        .disable_webhook(&self.bay, &self.agent, webhook, &status)
                        .await?;
                    tracing::info!(bay = %self.bay, agent = %self.agent, "webhook disabled by a 410");
                    break Delivered::Stop(Stop::Removed);
                }
                Attempt::RetryAfter(wait, why) => {
                    self.record_status(webhook, Some(why)).await;
                    wait.min(self.shared.settings.retry_max)
                }
                Attempt::Failed(why) => {
                    self.record_status(webhook, Some(why)).await;
                    let jittered = rand::rng().random_range(0..=backoff.as_millis() as u64);
                    backoff = (backoff * 2).min(self.shared.settings.retry_max);
                    Duration::from_millis(jittered)
                }
            };
            metrics::counter!(WEBHOOK_DELIVERIES, "outcome" => "failed").increment(1);
            let expires_ms = record.id.ms + self.shared.replay_window.as_millis() as u64;
            let now_ms = chrono::Utc::now().timestamp_millis().max(0) as u64;
            if now_ms + wait.as_millis() as u64 >= expires_ms {
                metrics::counter!(WEBHOOK_DELIVERIES, "outcome" => "gave_up").increment(1);
                tracing::warn!(bay = %self.bay, agent = %self.agent, entry = %record.id, "webhook delivery given up: the record left the replay window");
                break Delivered::Skipped;
            }
            if !self.pause(wait, webhook).await? {
                break Delivered::Stop(Stop::Removed);
            }
        };
        self.shared.pending_since.lock().remove(&key);
        Ok(result)
    }

    /// Sleeps `wait` between attempts, renewing the lease; `false` (at
    /// once) when the webhook was removed or replaced meanwhile, so a fixed
    /// URL is not kept waiting out the old one's backoff.
    async fn pause(&mut self, wait: Duration, webhook: &Webhook) -> Result<bool, StoreError> {
        let until = Instant::now() + wait;
        let step =
            (self.shared.settings.lease_ttl / 3).clamp(Duration::from_millis(100), BACKOFF_STEP);
        while Instant::now() < until {
            tokio::time::sleep(step.min(until - Instant::now())).await;
            self.hold(false).await?;
            let current = self.shared.store.webhook(&self.bay, &self.agent).await?;
            if current.as_ref() != Some(webhook) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Records the outcome of an attempt on `webhook` (`None`: delivered)
    /// in its status (`GET /me`'s `webhookStatus`).
    ///
    /// Best effort: the status only reports, so a store error here is
    /// logged and counted (`switchboard_store_errors_total`, by the store)
    /// and the worker goes on. Stopping on it would restart the worker
    /// from its stored position and deliver again what was just accepted,
    /// and under store overload keep doing so.
    async fn record_status(&self, webhook: &Webhook, error: Option<String>) {
        let written = match self.next_status(error).await {
            Ok(status) => {
                self.shared
                    .store
                    .set_webhook_status(&self.bay, &self.agent, webhook, &status)
                    .await
            }
            Err(e) => Err(e),
        };
        match written {
            // Nobody listening is no error.
            Ok(()) => drop(self.shared.status_changes.send(self.bay.clone())),
            Err(e) => {
                tracing::warn!(bay = %self.bay, agent = %self.agent, error = %e, "webhook status not recorded; delivery goes on")
            }
        }
    }

    /// The status after an attempt (`None`: delivered): `lastError` keeps
    /// the last failure even after a success, `failingSince` clears.
    async fn next_status(&self, error: Option<String>) -> Result<WebhookStatus, StoreError> {
        let store = &self.shared.store;
        let mut status: WebhookStatus = store.webhook_status(&self.bay, &self.agent).await?;
        let now = chrono::Utc::now();
        match error {
            None => {
                status.last_delivered_at = Some(now);
                status.failing_since = None;
            }
            Some(why) => {
                status.last_error = Some(why);
                status.failing_since.get_or_insert(now);
            }
        }
        Ok(status)
    }

    /// One POST of `body` to the webhook. The body is written out (and
    /// signed) once an in-flight slot is taken, so at most
    /// `max_concurrent` bodies are alive at once, whatever the room size.
    async fn attempt(&mut self, webhook: &Webhook, id: &str, body: &Body) -> Attempt {
        let shared = self.shared.clone();
        let settings = &shared.settings;
        let url = match check_url(&webhook.url, settings.allow_http) {
            Ok(url) => url,
            Err(e) => return Attempt::Failed(e.to_string()),
        };
        let addrs = match resolve(&url, settings.allow_private_destinations).await {
            Ok(addrs) => addrs,
            Err(e) => return Attempt::Failed(e.to_string()),
        };
        let secret = match self.shared.secrets.open(&webhook.sealed_secret) {
            Ok(secret) => secret,
            Err(e) => return Attempt::Failed(format!("cannot open the webhook secret: {e}")),
        };
        let client = match self.client_for(&url, &addrs) {
            Ok(client) => client,
            Err(e) => return Attempt::Failed(format!("http client: {e}")),
        };
        let _permit = self.shared.in_flight.acquire().await;
        let body = body.bytes();
        let timestamp = chrono::Utc::now().timestamp();
        let signed = match headers(&secret, id, timestamp, &body) {
            Ok(h) => h,
            Err(e) => return Attempt::Failed(format!("cannot sign: {e}")),
        };
        let mut request = client
            .post(url)
            .header("content-type", "application/json")
            .header(
                "user-agent",
                concat!("Switchboard-Webhooks/", env!("CARGO_PKG_VERSION")),
            )
            .body(body);
        for (name, value) in signed {
            request = request.header(name, value);
        }
        let response = match request.send().await {
            Ok(r) => r,
            Err(e) if e.is_timeout() => return Attempt::Failed("timed out".into()),
            Err(e) => return Attempt::Failed(format!("request failed: {e}")),
        };
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        drain(response, settings.max_response_bytes).await;
        match status {
            200..=299 => Attempt::Delivered,
            410 => Attempt::Gone,
            429 | 503 => Attempt::RetryAfter(
                retry_after.unwrap_or(settings.retry_initial),
                format!("HTTP {status}"),
            ),
            _ => Attempt::Failed(format!("HTTP {status}")),
        }
    }

    /// A client that connects to `url`'s host only at `addrs`, follows no
    /// redirects and times out after `attempt_timeout`.
    fn client_for(
        &mut self,
        url: &url::Url,
        addrs: &[SocketAddr],
    ) -> reqwest::Result<reqwest::Client> {
        if let Some((pinned, client)) = &self.client {
            if pinned == addrs {
                return Ok(client.clone());
            }
        }
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(self.shared.settings.attempt_timeout)
            .connect_timeout(self.shared.settings.attempt_timeout);
        if let Some(host) = url.host_str() {
            builder = builder.resolve_to_addrs(host, addrs);
        }
        let client = builder.build()?;
        self.client = Some((addrs.to_vec(), client.clone()));
        Ok(client)
    }
}

/// Outcome of one attempt.
enum Attempt {
    Delivered,
    Gone,
    RetryAfter(Duration, String),
    Failed(String),
}

/// Whether `agent` made the change or sent the message `record` logs: an
/// agent is not told of its own doings (protocol §11: its own messages
/// are excluded).
fn made_by(record: &LogRecord, agent: &ParticipantId) -> bool {
    match &record.event {
        LogEvent::Message { message, .. } => &message.sender.id == agent,
        LogEvent::Change { change, .. } => change.actor() == Some(agent),
        _ => false,
    }
}

/// Whether `record` is a step of a draft's stream (its opening or a
/// delta): webhooks skip them, since a draft wakes nobody while it
/// streams; its `message.completed` (or cancel, or failure) is delivered.
fn streaming(record: &LogRecord) -> bool {
    match &record.event {
        LogEvent::Message { message, .. } => message.is_streaming(),
        LogEvent::Change { change, .. } => change.is_delta(),
        _ => false,
    }
}

/// `Retry-After` as seconds or an HTTP date.
fn parse_retry_after(value: &str) -> Option<Duration> {
    if let Ok(secs) = value.trim().parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = chrono::DateTime::parse_from_rfc2822(value.trim()).ok()?;
    let wait = at.with_timezone(&chrono::Utc) - chrono::Utc::now();
    Some(wait.to_std().unwrap_or_default())
}

/// Reads and drops at most `cap` bytes of the response, so the connection
/// can be reused without trusting the receiver's size.
async fn drain(mut response: reqwest::Response, cap: usize) {
    let mut read = 0;
    while read < cap {
        match response.chunk().await {
            Ok(Some(chunk)) => read += chunk.len(),
            _ => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_retry_after;
    use std::time::Duration;

    #[test]
    fn retry_after_takes_seconds_and_dates() {
        assert_eq!(parse_retry_after("7"), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after("soon"), None);
        let past = "Tue, 01 Dec 1998 00:00:00 GMT";
        assert_eq!(parse_retry_after(past), Some(Duration::ZERO));
    }
}
