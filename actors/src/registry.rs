//! The per-node registry: finds or starts the [`BayFeed`] of a Bay and the
//! [`ConversationActor`] of a conversation.
//!
//! Feeds and conversation actors are spread by a hash of their id over
//! the HTTP worker threads ([`Registry::share_current_thread`]), or over
//! a pool of dedicated arbiters when [`RegistrySettings::arbiters`] asks
//! for one. Sharing the workers' threads is the default: a post then
//! reaches its conversation actor, the feed and the sessions without a
//! cross-thread wake-up when they share a thread (always, on one core),
//! where dedicated threads cost each post about five context switches
//! (BENCHMARKS.md, "Fan-out targets, one run").

use crate::conversation::{ConversationActor, DraftSettings};
use crate::feed::{ActivityKind, BayFeed, CloseAll, FeedSettings, IdleStop, NoteActivity};
use crate::session::CloseReason;
use crate::store::Store;
use crate::token_cache::TokenCache;
use actix::prelude::*;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;
use switchboard_protocol::ids::{BayId, ConversationId, ParticipantId};

/// Settings the registry passes to the actors it starts.
#[derive(Clone, Copy, Debug)]
pub struct RegistrySettings {
    /// Settings of every [`BayFeed`] the registry starts.
    pub feed: FeedSettings,
    /// Typing indicator lifetime (protocol §11: 5 s).
    pub typing_ttl: Duration,
    /// A conversation actor with no traffic for this long stops.
    pub actor_idle_timeout: Duration,
    /// Streaming drafts: flush window and length limit.
    pub drafts: DraftSettings,
    /// Dedicated arbiter threads for feeds and conversation actors; 0 =
    /// none, they run on the threads that called
    /// [`Registry::share_current_thread`] (the HTTP workers).
    pub arbiters: usize,
}

/// Cheap to clone; all clones share one directory.
#[derive(Clone)]
pub struct Registry {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn Store>,
    settings: RegistrySettings,
    tokens: Arc<TokenCache>,
    /// Where new actors start: see [`Arbiters`].
    arbiters: parking_lot::RwLock<Arbiters>,
    /// Feeds started on this node. Stopped ones (idle, see
    /// `FeedSettings::idle_timeout`) are pruned whenever a feed starts and
    /// at every [`Registry::actor_counts`], so the map is bounded by the
    /// Bays in use, not by every Bay ever touched.
    feeds: Mutex<HashMap<BayId, Addr<BayFeed>>>,
    /// Conversation actors, pruned like `feeds`.
    conversations: Mutex<HashMap<(BayId, ConversationId), Addr<ConversationActor>>>,
}

/// The dedicated arbiters, or (when none were asked for) the threads
/// that offered themselves; until one does, the thread that created the
/// registry (`fallback`).
struct Arbiters {
    handles: Vec<ArbiterHandle>,
    /// `handles` holds only the creating thread's arbiter.
    fallback: bool,
}

impl Registry {
    /// Creates the registry and its dedicated arbiter threads, if any, and
    /// starts the node's credentials tail, which keeps the token cache
    /// exact for every Bay ([`crate::credentials`]). Must run inside an
    /// actix system.
    pub fn new(store: Arc<dyn Store>, settings: RegistrySettings) -> Self {
        let arbiters = if settings.arbiters == 0 {
            Arbiters {
                handles: vec![Arbiter::current()],
                fallback: true,
            }
        } else {
            Arbiters {
                handles: (0..settings.arbiters)
                    .map(|_| Arbiter::new().handle())
                    .collect(),
                fallback: false,
            }
        };
        let tokens = Arc::default();
        crate::credentials::spawn_tail(store.clone(), &tokens, settings.feed.block);
        Registry {
            inner: Arc::new(Inner {
                store,
                settings,
                tokens,
                arbiters: parking_lot::RwLock::new(arbiters),
                feeds: Mutex::new(HashMap::new()),
                conversations: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// This node's token cache, kept exact by the credentials tail.
    pub fn tokens(&self) -> &Arc<TokenCache> {
        &self.inner.tokens
    }

    /// Offers the calling thread's arbiter (an HTTP worker's) to the
    /// actors started from now on; a no-op with dedicated arbiters. Actors
    /// already running stay where they are.
    pub fn share_current_thread(&self) {
        if self.inner.settings.arbiters != 0 {
            return;
        }
        let mut arbiters = self.inner.arbiters.write();
        if std::mem::take(&mut arbiters.fallback) {
            arbiters.handles.clear();
        }
        // A worker that died (actix-server replaces a panicked one) takes
        // no more actors.
        arbiters.handles.retain(|a| a.spawn(async {}));
        arbiters.handles.push(Arbiter::current());
    }

    fn arbiter_for(&self, key: &impl Hash) -> ArbiterHandle {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        key.hash(&mut h);
        let handles = &self.inner.arbiters.read().handles;
        handles[(h.finish() as usize) % handles.len()].clone()
    }

    /// Runs `task` on one of the threads the actors run on, chosen by a
    /// hash of `key` (so tasks of many keys spread over all of them);
    /// `false` when that thread is gone (the task is then dropped).
    pub fn spawn(
        &self,
        key: &impl Hash,
        task: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> bool {
        self.arbiter_for(key).spawn(task)
    }

    /// The feed of `bay`, started if needed.
    pub fn feed(&self, bay: &BayId) -> Addr<BayFeed> {
        let mut feeds = self.inner.feeds.lock();
        if let Some(addr) = feeds.get(bay).filter(|a| a.connected()) {
            return addr.clone();
        }
        feeds.retain(|_, a| a.connected());
        let (b, store, settings, tokens) = (
            bay.clone(),
            self.inner.store.clone(),
            self.inner.settings.feed,
            self.inner.tokens.clone(),
        );
        let directory = Arc::downgrade(&self.inner);
        let forget: IdleStop = Arc::new(move |bay, stopping| {
            if let Some(inner) = directory.upgrade() {
                let mut feeds = inner.feeds.lock();
                if feeds.get(bay) == Some(stopping) {
                    feeds.remove(bay);
                }
            }
        });
        let addr = BayFeed::start_in_arbiter(&self.arbiter_for(bay), move |_| {
            BayFeed::new(b, store, settings, tokens).on_idle_stop(forget)
        });
        feeds.insert(bay.clone(), addr.clone());
        addr
    }

    /// The actor of one conversation, started if needed. A stopped actor
    /// (idle timeout) is replaced transparently.
    pub fn conversation(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
    ) -> Addr<ConversationActor> {
        let key = (bay.clone(), conversation.clone());
        let mut convs = self.inner.conversations.lock();
        if let Some(addr) = convs.get(&key).filter(|a| a.connected()) {
            return addr.clone();
        }
        convs.retain(|_, a| a.connected());
        let (b, c, store) = (bay.clone(), conversation.clone(), self.inner.store.clone());
        let (ttl, idle, drafts) = (
            self.inner.settings.typing_ttl,
            self.inner.settings.actor_idle_timeout,
            self.inner.settings.drafts,
        );
        let addr = ConversationActor::start_in_arbiter(&self.arbiter_for(&key), move |_| {
            ConversationActor::new(b, c, store, ttl, idle, drafts)
        });
        convs.insert(key, addr.clone());
        addr
    }

    /// Tells the Bay's feed on this node of `participant`'s activity (a
    /// send, a typing indicator), for presence; starts the feed if needed,
    /// since the participant's sessions may live on other nodes.
    pub fn note_activity(&self, bay: &BayId, participant: ParticipantId, activity: ActivityKind) {
        self.feed(bay).do_send(NoteActivity {
            participant,
            activity,
        });
    }

    /// The Bays whose feed runs on this node, sorted (the node directory).
    pub fn feed_bays(&self) -> Vec<BayId> {
        let mut feeds = self.inner.feeds.lock();
        feeds.retain(|_, a| a.connected());
        let mut bays: Vec<BayId> = feeds.keys().cloned().collect();
        bays.sort();
        bays
    }

    /// Number of live feeds and conversation actors (for metrics); forgets
    /// the stopped ones on the way.
    pub fn actor_counts(&self) -> (usize, usize) {
        let mut feeds = self.inner.feeds.lock();
        feeds.retain(|_, a| a.connected());
        let feeds = feeds.len();
        let mut conversations = self.inner.conversations.lock();
        conversations.retain(|_, a| a.connected());
        (feeds, conversations.len())
    }

    /// Closes every session on this node (graceful drain).
    pub fn close_all_sessions(&self, reason: CloseReason) {
        for feed in self.inner.feeds.lock().values() {
            feed.do_send(CloseAll { reason });
        }
    }
}
