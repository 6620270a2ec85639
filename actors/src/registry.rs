//! The per-node registry: finds or starts the [`BayFeed`] of a Bay and the
//! [`ConversationActor`] of a conversation.
//!
//! Feeds and conversation actors run on a small pool of dedicated arbiters
//! (threads), spread by a hash of their id, so HTTP workers only parse,
//! serialize and write.

use crate::conversation::{ConversationActor, DraftSettings};
use crate::feed::{ActivityKind, BayFeed, CloseAll, FeedSettings, NoteActivity};
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
    /// Dedicated arbiter threads for feeds and conversation actors.
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
    arbiters: Vec<ArbiterHandle>,
    feeds: Mutex<HashMap<BayId, Addr<BayFeed>>>,
    conversations: Mutex<HashMap<(BayId, ConversationId), Addr<ConversationActor>>>,
}

impl Registry {
    /// Creates the registry and its arbiter threads. Must run inside an actix system.
    pub fn new(store: Arc<dyn Store>, settings: RegistrySettings) -> Self {
        let arbiters = (0..settings.arbiters.max(1))
            .map(|_| Arbiter::new().handle())
            .collect();
        Registry {
            inner: Arc::new(Inner {
                store,
                settings,
                tokens: Arc::default(),
                arbiters,
                feeds: Mutex::new(HashMap::new()),
                conversations: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// This node's token cache, kept exact by the feeds.
    pub fn tokens(&self) -> &Arc<TokenCache> {
        &self.inner.tokens
    }

    fn arbiter_for(&self, key: &impl Hash) -> &ArbiterHandle {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        key.hash(&mut h);
        &self.inner.arbiters[(h.finish() as usize) % self.inner.arbiters.len()]
    }

    /// The feed of `bay`, started if needed.
    pub fn feed(&self, bay: &BayId) -> Addr<BayFeed> {
        let mut feeds = self.inner.feeds.lock();
        if let Some(addr) = feeds.get(bay).filter(|a| a.connected()) {
            return addr.clone();
        }
        let (b, store, settings, tokens) = (
            bay.clone(),
            self.inner.store.clone(),
            self.inner.settings.feed,
            self.inner.tokens.clone(),
        );
        let addr = BayFeed::start_in_arbiter(self.arbiter_for(bay), move |_| {
            BayFeed::new(b, store, settings, tokens)
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
        let addr = ConversationActor::start_in_arbiter(self.arbiter_for(&key), move |_| {
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

    /// Number of live feeds and conversation actors (for metrics).
    pub fn actor_counts(&self) -> (usize, usize) {
        (
            self.inner
                .feeds
                .lock()
                .values()
                .filter(|a| a.connected())
                .count(),
            self.inner
                .conversations
                .lock()
                .values()
                .filter(|a| a.connected())
                .count(),
        )
    }

    /// Closes every session on this node (graceful drain).
    pub fn close_all_sessions(&self, reason: CloseReason) {
        for feed in self.inner.feeds.lock().values() {
            feed.do_send(CloseAll { reason });
        }
    }
}
