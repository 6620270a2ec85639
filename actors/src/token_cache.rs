//! `TokenCache`: authenticated tokens remembered per node, so a request
//! costs no store call to authenticate.
//!
//! The store stays the authority; the cache only answers while the Bay's
//! feed on this node is tailing the log, because that is how rotations and
//! revocations reach the node: every `CredentialRevoked` entry the feed
//! applies drops the participant's entries at once (a `Suspension` entry
//! too, or all of the Bay's for a Bay-wide one, since each entry holds its
//! caller's standing) (within the feed's lag,
//! milliseconds; well under the 1 s the design allows). A feed that cannot
//! read the log (store trouble, log lost) drops its Bay's entries and stops
//! the cache from answering for that Bay until it reads again.
//!
//! The race to close: a request authenticates at the store, a revocation is
//! logged and applied, and only then does the request insert its stale
//! answer. Every revocation and every change of a Bay's liveness bumps a
//! generation; a caller reads the generation *before* asking the store and
//! the insert is refused when it moved. Inserts for a Bay whose feed is not
//! live are refused too, so entries only ever come from store answers newer
//! than the feed's starting point.

use crate::store::Principal;
use crate::token::TokenHash;
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};
use switchboard_protocol::ids::{BayId, ParticipantId};

/// Entries kept at most; beyond it new tokens are not cached (they still
/// authenticate, at the store).
const MAX_ENTRIES: usize = 100_000;
/// An entry older than this is asked of the store again: a bound on any
/// staleness the log could not correct (defence in depth).
const MAX_AGE: Duration = Duration::from_secs(300);

/// The cache. Cheap to share behind an `Arc`; one per node.
#[derive(Default)]
pub struct TokenCache {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Bumped by every revocation and liveness change (see module docs).
    generation: u64,
    /// Bays whose feed is tailing the log. Invariant: entries exist only
    /// for these Bays.
    live: HashSet<BayId>,
    entries: HashMap<TokenHash, (Principal, Instant)>,
}

/// A generation read before asking the store; hand it to [`TokenCache::insert`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Generation(u64);

impl TokenCache {
    /// The principal of `token`, when cached for a live Bay.
    pub fn get(&self, token: &TokenHash) -> Option<Principal> {
        let inner = self.inner.lock();
        let (principal, at) = inner.entries.get(token)?;
        (inner.live.contains(&principal.bay) && at.elapsed() < MAX_AGE).then(|| principal.clone())
    }

    /// The current generation; read it before asking the store.
    pub fn generation(&self) -> Generation {
        Generation(self.inner.lock().generation)
    }

    /// Remembers the store's answer for `token`, unless a revocation or a
    /// liveness change happened since `seen`, or the Bay's feed is not live.
    pub fn insert(&self, token: TokenHash, principal: Principal, seen: Generation) {
        let mut inner = self.inner.lock();
        if inner.generation != seen.0
            || !inner.live.contains(&principal.bay)
            || inner.entries.len() >= MAX_ENTRIES
        {
            return;
        }
        inner.entries.insert(token, (principal, Instant::now()));
    }

    /// A `CredentialRevoked` for `participant` was applied: forget all of
    /// its tokens (the entry names only the old token's handle, and a
    /// participant has one token at a time).
    pub fn revoke(&self, bay: &BayId, participant: &ParticipantId) {
        let mut inner = self.inner.lock();
        inner.generation += 1;
        inner
            .entries
            .retain(|_, (p, _)| !(p.bay == *bay && p.participant.id == *participant));
    }

    /// A Bay-wide `Suspension` entry was applied: forget every entry of
    /// the Bay (each holds its participant's standing, now stale). The Bay
    /// stays live, so fresh store answers are cached again.
    pub fn forget_bay(&self, bay: &BayId) {
        let mut inner = self.inner.lock();
        inner.generation += 1;
        inner.entries.retain(|_, (p, _)| p.bay != *bay);
    }

    /// The Bay's feed started (`true`) or stopped (`false`) reading the log.
    pub fn set_live(&self, bay: &BayId, live: bool) {
        let mut inner = self.inner.lock();
        let changed = if live {
            inner.live.insert(bay.clone())
        } else {
            inner.entries.retain(|_, (p, _)| p.bay != *bay);
            inner.live.remove(bay)
        };
        if changed {
            inner.generation += 1;
        }
    }

    /// Forgets entries too old to be answered (older than the cache's
    /// five-minute bound); call periodically, so entries of tokens no
    /// longer used do not wait for their Bay's feed to stop.
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
    fn answers_only_for_live_bays() {
        let cache = TokenCache::default();
        let bay = BayId("b".into());
        let t = TokenHash::of("bay_rex");
        cache.insert(t.clone(), principal("b", "rex"), cache.generation());
        assert_eq!(cache.get(&t), None, "not live: not cached");
        cache.set_live(&bay, true);
        cache.insert(t.clone(), principal("b", "rex"), cache.generation());
        assert_eq!(cache.get(&t), Some(principal("b", "rex")));
        cache.set_live(&bay, false);
        assert_eq!(cache.get(&t), None);
        assert!(cache.is_empty(), "a dead feed drops its Bay's entries");
    }

    #[test]
    fn a_revocation_between_the_store_answer_and_the_insert_wins() {
        let cache = TokenCache::default();
        let bay = BayId("b".into());
        cache.set_live(&bay, true);
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
        cache.set_live(&bay, true);
        let (rex, ana) = (TokenHash::of("bay_rex"), TokenHash::of("bay_u_ana"));
        cache.insert(rex.clone(), principal("b", "rex"), cache.generation());
        cache.insert(ana.clone(), principal("b", "ana"), cache.generation());
        cache.revoke(&bay, &ParticipantId("rex".into()));
        assert_eq!(cache.get(&rex), None);
        assert_eq!(cache.get(&ana), Some(principal("b", "ana")));
    }
}
