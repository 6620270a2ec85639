//! `TokenCache`: authenticated tokens remembered per node, so a request
//! costs no store call to authenticate.
//!
//! The store stays the authority; the cache only answers while this
//! node's credentials tail ([`crate::credentials`]) is reading the store's
//! credentials channel, because that is how rotations, revocations,
//! suspensions and reinstatements of every Bay reach the node: each write
//! of a token's standing is also published on that one store-wide channel
//! ([`DirectoryStore::read_credentials`](crate::store::DirectoryStore::read_credentials)),
//! and the tail applies every change it reads (within its lag,
//! milliseconds; well under the 1 s the design allows): a participant's
//! change drops the participant's entries, a Bay-wide one every entry of
//! the Bay, since each entry holds its caller's standing. One blocking read
//! per node serves every Bay, so authenticating a request starts nothing
//! per Bay: no feed, no store connection. A tail that cannot read (store
//! trouble, changes trimmed before it read them) drops every entry and
//! stops the cache from answering until it reads again.
//!
//! Bay feeds apply their own log's `CredentialRevoked` and `Suspension`
//! entries too, as they close the sessions concerned: the same drop,
//! harmless twice, and it keeps "the feed applied the revocation, so the
//! entry is gone" true for the session opening's last check.
//!
//! The race to close: a request authenticates at the store, a revocation is
//! written and applied, and only then does the request insert its stale
//! answer. Every applied change and every change of the tail's liveness
//! bumps a generation; a caller reads the generation *before* asking the
//! store and the insert is refused when it moved. Inserts while the tail is
//! not live are refused too, so entries only ever come from store answers
//! newer than the tail's starting point (it reads the channel's head before
//! it turns live).
//!
//! The crash window: a change is published after the write it announces,
//! or in the same step where the engine can (the memory engine, and a
//! Redis server that is not a cluster: one script writes both). On a Redis
//! Cluster the channel and the Bay live in different slots, so the publish
//! is a second command; a node crashing between the two, or a publish that
//! keeps failing, leaves the change unpublished. Nodes running the Bay's
//! feed still apply the Bay's own log entry; the others answer tokens they
//! had cached for at most [`MAX_AGE`] (five minutes), the bound every entry
//! obeys whatever happens (defence in depth). Publishing *before* the write
//! would not close the window: a node could then cache a store answer read
//! between the publish and the write.

use crate::store::Principal;
use crate::token::TokenHash;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use switchboard_protocol::ids::{BayId, ParticipantId};

/// Entries kept at most; beyond it new tokens are not cached (they still
/// authenticate, at the store).
const MAX_ENTRIES: usize = 100_000;
/// An entry older than this is asked of the store again: a bound on any
/// staleness the credentials channel could not correct (defence in depth;
/// see the module docs for the crash window it bounds).
pub const MAX_AGE: Duration = Duration::from_secs(300);

/// The cache. Cheap to share behind an `Arc`; one per node.
#[derive(Default)]
pub struct TokenCache {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Bumped by every applied change and liveness change (see module docs).
    generation: u64,
    /// Whether the credentials tail is reading. Invariant: no entries
    /// while it is not.
    live: bool,
    entries: HashMap<TokenHash, (Principal, Instant)>,
}

/// A generation read before asking the store; hand it to [`TokenCache::insert`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Generation(u64);

impl TokenCache {
    /// The principal of `token`, when cached and the tail is live.
    pub fn get(&self, token: &TokenHash) -> Option<Principal> {
        let inner = self.inner.lock();
        let (principal, at) = inner.entries.get(token)?;
        (inner.live && at.elapsed() < MAX_AGE).then(|| principal.clone())
    }

    /// The current generation; read it before asking the store.
    pub fn generation(&self) -> Generation {
        Generation(self.inner.lock().generation)
    }

    /// Remembers the store's answer for `token`, unless a change or a
    /// liveness change was applied since `seen`, or the tail is not live.
    pub fn insert(&self, token: TokenHash, principal: Principal, seen: Generation) {
        let mut inner = self.inner.lock();
        if inner.generation != seen.0 || !inner.live || inner.entries.len() >= MAX_ENTRIES {
            return;
        }
        inner.entries.insert(token, (principal, Instant::now()));
    }

    /// A rotation, revocation, suspension or reinstatement of
    /// `participant` was applied: forget all of its tokens (a change names
    /// no token, and a participant has one token at a time).
    pub fn revoke(&self, bay: &BayId, participant: &ParticipantId) {
        let mut inner = self.inner.lock();
        inner.generation += 1;
        inner
            .entries
            .retain(|_, (p, _)| !(p.bay == *bay && p.participant.id == *participant));
    }

    /// A Bay-wide suspension or reinstatement was applied: forget every
    /// entry of the Bay (each holds its participant's standing, now
    /// stale). Fresh store answers are cached again.
    pub fn forget_bay(&self, bay: &BayId) {
        let mut inner = self.inner.lock();
        inner.generation += 1;
        inner.entries.retain(|_, (p, _)| p.bay != *bay);
    }

    /// The credentials tail started (`true`) or stopped (`false`) reading:
    /// stopping drops every entry, since changes may go unseen meanwhile.
    pub fn set_live(&self, live: bool) {
        let mut inner = self.inner.lock();
        if !live {
            inner.entries.clear();
        }
        if inner.live != live {
            inner.live = live;
            inner.generation += 1;
        }
    }

    /// Whether the credentials tail is reading (the cache answers).
    pub fn is_live(&self) -> bool {
        self.inner.lock().live
    }

    /// Forgets entries too old to be answered (older than the cache's
    /// five-minute bound); call periodically, so entries of tokens no
    /// longer used do not stay.
    pub fn prune(&self) {
        self.inner
            .lock()
            .entries
            .retain(|_, (_, at)| at.elapsed() < MAX_AGE);
    }

    /// Cached entries (for metrics and tests).
    pub fn len(&self) -> usize {
        self.inner.lock().entries.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Participant;
    use switchboard_protocol::ids::TokenId;
    use switchboard_protocol::model::ParticipantKind;

    fn principal(bay: &str, who: &str) -> Principal {
        Principal {
            bay: BayId(bay.into()),
            participant: Participant {
                id: ParticipantId(who.into()),
                kind: ParticipantKind::Agent,
                name: who.into(),
                description: None,
            },
            token: TokenId(format!("t-{who}")),
            suspended: None,
        }
    }

    #[test]
    fn answers_only_while_the_tail_is_live() {
        let cache = TokenCache::default();
        let t = TokenHash::of("bay_rex");
        cache.insert(t.clone(), principal("b", "rex"), cache.generation());
        assert_eq!(cache.get(&t), None, "not live: not cached");
        cache.set_live(true);
        cache.insert(t.clone(), principal("b", "rex"), cache.generation());
        cache.insert(
            TokenHash::of("bay_other"),
            principal("other", "max"),
            cache.generation(),
        );
        assert_eq!(cache.get(&t), Some(principal("b", "rex")));
        cache.set_live(false);
        assert_eq!(cache.get(&t), None);
        assert!(cache.is_empty(), "a tail that stops drops every entry");
    }

    #[test]
    fn a_liveness_change_between_the_store_answer_and_the_insert_wins() {
        let cache = TokenCache::default();
        cache.set_live(true);
        let t = TokenHash::of("bay_rex");
        let seen = cache.generation();
        cache.set_live(false);
        cache.set_live(true);
        cache.insert(t.clone(), principal("b", "rex"), seen);
        assert_eq!(cache.get(&t), None);
    }

    #[test]
    fn a_bay_wide_change_drops_only_that_bay() {
        let cache = TokenCache::default();
        cache.set_live(true);
        let (rex, max) = (TokenHash::of("bay_rex"), TokenHash::of("bay_max"));
        cache.insert(rex.clone(), principal("b", "rex"), cache.generation());
        cache.insert(max.clone(), principal("other", "max"), cache.generation());
        cache.forget_bay(&BayId("b".into()));
        assert_eq!(cache.get(&rex), None);
        assert_eq!(cache.get(&max), Some(principal("other", "max")));
    }

    #[test]
    fn a_revocation_between_the_store_answer_and_the_insert_wins() {
        let cache = TokenCache::default();
        let bay = BayId("b".into());
        cache.set_live(true);
        let t = TokenHash::of("bay_rex");
        let seen = cache.generation();
        // ... the store answered "valid"; meanwhile the feed applies a revocation.
        cache.revoke(&bay, &ParticipantId("rex".into()));
        cache.insert(t.clone(), principal("b", "rex"), seen);
        assert_eq!(cache.get(&t), None);
    }

    #[test]
    fn a_revocation_drops_only_that_participant() {
        let cache = TokenCache::default();
        let bay = BayId("b".into());
        cache.set_live(true);
        let (rex, ana) = (TokenHash::of("bay_rex"), TokenHash::of("bay_u_ana"));
        cache.insert(rex.clone(), principal("b", "rex"), cache.generation());
        cache.insert(ana.clone(), principal("b", "ana"), cache.generation());
        cache.revoke(&bay, &ParticipantId("rex".into()));
        assert_eq!(cache.get(&rex), None);
        assert_eq!(cache.get(&ana), Some(principal("b", "ana")));
    }
}
