//! The node's credentials tail: one task per node that reads the store's
//! credentials channel
//! ([`DirectoryStore::read_credentials`](crate::store::DirectoryStore::read_credentials))
//! and applies every change to the node's [`TokenCache`], for every Bay at
//! once. On Redis it holds one dedicated blocking connection, whatever the
//! number of Bays (see `token_cache` for why the cache needs it).
//!
//! It reads the channel's head first and only then marks the cache live,
//! so every store answer the cache keeps is newer than the tail's starting
//! point. When a read fails, or the store says changes after the tail's
//! position were trimmed, the cache stops answering (and drops every
//! entry) and the tail starts again from the head, with a backoff.

use crate::store::{CredentialChange, CredentialsRead, Store};
use crate::token_cache::TokenCache;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Changes read at once.
const BATCH: usize = 512;
/// Longest pause between attempts after a failure.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Starts the tail on the current runtime; it runs until `tokens` is
/// dropped. `block` is how long one blocking read waits before reading
/// again.
pub fn spawn_tail(store: Arc<dyn Store>, tokens: &Arc<TokenCache>, block: Duration) {
    let tokens = Arc::downgrade(tokens);
    actix_rt::spawn(async move { run(store, tokens, block).await });
}

async fn run(store: Arc<dyn Store>, tokens: Weak<TokenCache>, block: Duration) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let head = match store.credentials_head().await {
            Ok(head) => head,
            Err(err) => {
                if tokens.strong_count() == 0 {
                    return;
                }
                tracing::warn!(error = %err, backoff_ms = backoff.as_millis() as u64, "credentials tail cannot read the channel's head");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        let Some(cache) = tokens.upgrade() else {
            return;
        };
        cache.set_live(true);
        drop(cache);
        let mut position = head;
        loop {
            let read = store.read_credentials(position, BATCH, Some(block)).await;
            let Some(cache) = tokens.upgrade() else {
                return;
            };
            match read {
                Ok(CredentialsRead::Changes(changes)) => {
                    backoff = Duration::from_millis(100);
                    for change in &changes {
                        apply(&cache, change);
                    }
                    if let Some(last) = changes.last() {
                        position = last.id;
                    }
                }
                Ok(CredentialsRead::Lost) => {
                    tracing::warn!(after = %position, "credentials tail fell behind the channel; forgetting every cached token");
                    cache.set_live(false);
                    break;
                }
                Err(err) => {
                    // Changes may be published unseen meanwhile.
                    cache.set_live(false);
                    drop(cache);
                    tracing::warn!(error = %err, backoff_ms = backoff.as_millis() as u64, "credentials tail read failed; the token cache answers nothing until it reads again");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    break;
                }
            }
        }
    }
}

/// Drops what `change` makes stale: the participant's entries, or the
/// Bay's for a Bay-wide change.
fn apply(cache: &TokenCache, change: &CredentialChange) {
    match &change.participant {
        Some(p) => cache.revoke(&change.bay, p),
        None => cache.forget_bay(&change.bay),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Bay, Participant};
    use crate::store::memory::{MemoryLimits, MemoryStore};
    use crate::token::TokenHash;
    use switchboard_protocol::ids::{BayId, ParticipantId};
    use switchboard_protocol::model::ParticipantKind;

    async fn eventually(mut check: impl FnMut() -> bool) -> bool {
        for _ in 0..200 {
            if check() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }

    #[actix_rt::test]
    async fn the_tail_applies_changes_of_every_bay() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new(MemoryLimits {
            replay_window: Duration::from_secs(900),
            max_entries: 1000,
        }));
        let tokens = Arc::new(TokenCache::default());
        spawn_tail(store.clone(), &tokens, Duration::from_millis(200));
        assert!(eventually(|| tokens.is_live()).await, "the tail turns live");
        let mut cached = Vec::new();
        for b in ["b1", "b2"] {
            let bay = BayId(b.into());
            store
                .create_bay(Bay {
                    id: bay.clone(),
                    name: b.into(),
                })
                .await
                .unwrap();
            let token = TokenHash::of(&format!("bay_{b}_rex"));
            let rex = Participant {
                id: ParticipantId("rex".into()),
                kind: ParticipantKind::Agent,
                name: "Rex".into(),
                description: None,
            };
            store
                .create_participant(&bay, rex, token.clone())
                .await
                .unwrap();
            let seen = tokens.generation();
            let principal = store.authenticate(&token).await.unwrap().unwrap();
            tokens.insert(token.clone(), principal, seen);
            assert!(tokens.get(&token).is_some());
            cached.push((bay, token));
        }
        let (b1, t1) = &cached[0];
        let (_, t2) = &cached[1];
        store
            .set_token(b1, &ParticipantId("rex".into()), None)
            .await
            .unwrap();
        assert!(eventually(|| tokens.get(t1).is_none()).await);
        assert!(tokens.get(t2).is_some(), "another Bay's entry stays");
        store.set_suspended(&cached[1].0, None, true).await.unwrap();
        assert!(eventually(|| tokens.get(t2).is_none()).await);
    }
}
