//! The orphan sweep: a draft whose author went away fails.
//!
//! A draft is orphaned when its author holds no session (`/ws` or
//! `/updates`, on any node: [`PresenceStore::online`](crate::store::PresenceStore::online)) and appended nothing for
//! `timing.draft_orphan_timeout`. Every node sweeps (there is no leader to
//! lose): each failure goes through the draft's conversation actor as an
//! [`EndDraft`] that names the version the sweep judged, so an append
//! racing the sweep wins, and two nodes failing one draft log it once.
//! A client disconnect alone never ends a draft: only the timeout does.

use crate::conversation::{EndDraft, Ending};
use crate::registry::Registry;
use crate::store::Store;
use actix::prelude::*;
use chrono::Utc;
use std::sync::Arc;
use std::time::Duration;

/// Why an orphaned draft failed, as `message.failed` says.
pub const ORPHAN_REASON: &str = "the author went away: no session and no append in time";

/// The sweep actor. Start one per node.
pub struct OrphanSweep {
    store: Arc<dyn Store>,
    registry: Registry,
    timeout: Duration,
    running: bool,
}

impl OrphanSweep {
    /// A sweep failing drafts orphaned for `timeout`
    /// (`timing.draft_orphan_timeout`).
    pub fn new(store: Arc<dyn Store>, registry: Registry, timeout: Duration) -> Self {
        OrphanSweep {
            store,
            registry,
            timeout,
            running: false,
        }
    }

    /// How often the sweep looks: a quarter of the timeout, between 250 ms
    /// and 5 s, so a draft fails at most that long after it is due.
    pub fn interval(timeout: Duration) -> Duration {
        (timeout / 4).clamp(Duration::from_millis(250), Duration::from_secs(5))
    }
}

impl Actor for OrphanSweep {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.run_interval(Self::interval(self.timeout), |act, ctx| {
            if act.running {
                return;
            }
            act.running = true;
            let (store, registry, timeout) = (act.store.clone(), act.registry.clone(), act.timeout);
            let pass = async move {
                if let Err(err) = sweep(&*store, &registry, timeout).await {
                    tracing::warn!(error = %err, "draft orphan sweep failed; retrying");
                }
            };
            ctx.spawn(pass.into_actor(act).map(|_, act, _| act.running = false));
        });
    }
}

/// One pass over every Bay that may hold open drafts.
async fn sweep(
    store: &dyn Store,
    registry: &Registry,
    timeout: Duration,
) -> Result<(), crate::store::StoreError> {
    let due = Utc::now() - chrono::Duration::from_std(timeout).unwrap_or_default();
    for bay in store.draft_bays().await? {
        let drafts = store.open_drafts(&bay).await?;
        if drafts.is_empty() {
            store.prune_draft_bay(&bay).await?;
            continue;
        }
        if drafts.iter().all(|d| d.last_activity > due) {
            continue;
        }
        let online = store.online(&bay).await?;
        for d in drafts.iter().filter(|d| d.last_activity <= due) {
            if online.contains(&d.author) {
                continue;
            }
            let Some(draft) = store.message(&bay, &d.conversation, &d.message).await? else {
                continue;
            };
            let Some(author) = store.participant(&bay, &d.author).await? else {
                continue;
            };
            let ending = Ending::Fail {
                version: draft.version,
                reason: ORPHAN_REASON.into(),
            };
            let end = EndDraft {
                by: author,
                message: d.message.clone(),
                ending,
            };
            match registry.conversation(&bay, &d.conversation).send(end).await {
                Ok(Ok(_)) => {}
                Ok(Err(err)) => return Err(err),
                Err(err) => tracing::debug!(error = %err, "conversation actor unavailable"),
            }
        }
    }
    Ok(())
}
