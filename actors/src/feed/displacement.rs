//! Displacement: one live session per token (protocol §11). Each
//! connection announces itself with an [`Opening`] on its Bay's
//! displacement channel; the feed tails that channel and closes the older
//! connections of each opening's token on this node (4000), whichever node
//! it opened on, and refuses an attach older than a live session of its
//! token. Separate from the log tail because the channel is a stream of
//! its own that outlives log resets: its tail starts once per feed.

use super::BayFeed;
use crate::session::CloseReason;
use crate::store::Opening;
use actix::prelude::*;
use std::time::Duration;
use switchboard_protocol::cursor::EntryId;
use switchboard_protocol::ids::{SessionId, TokenId};

impl BayFeed {
    /// Starts the displacement channel's tail after `from`, unless it runs
    /// already: it survives log resets, so reloading the index after one
    /// starts no second tail.
    pub(super) fn tail_openings(&mut self, from: EntryId, ctx: &mut Context<Self>) {
        if !self.openings_tailed {
            self.openings_tailed = true;
            self.start_openings_tail(from, ctx);
        }
    }

    /// Tails the displacement channel: each opening displaces the older
    /// connections of its token on this node, whichever node it opened on.
    fn start_openings_tail(&self, from: EntryId, ctx: &mut Context<Self>) {
        let addr = ctx.address();
        let store = self.store.clone();
        let bay = self.bay.clone();
        let settings = self.settings;
        actix_rt::spawn(async move {
            let mut after = from;
            let mut backoff = Duration::from_millis(100);
            while addr.connected() {
                match store
                    .read_openings(&bay, after, settings.batch_max, Some(settings.block))
                    .await
                {
                    Ok(openings) => {
                        backoff = Duration::from_millis(100);
                        let Some(last) = openings.last() else {
                            continue;
                        };
                        after = last.id;
                        if addr.send(Openings { openings }).await.is_err() {
                            return;
                        }
                    }
                    Err(err) => {
                        tracing::warn!(bay = %bay, error = %err, backoff_ms = backoff.as_millis() as u64, "feed openings read failed");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                    }
                }
            }
        });
    }

    /// Whether a session of `token` opened after `opened_at` is attached:
    /// an attach of the older connection then loses.
    pub(super) fn newer_exists(&self, token: &TokenId, opened_at: EntryId) -> bool {
        self.by_token.get(token).into_iter().flatten().any(|s| {
            self.sessions
                .get(s)
                .is_some_and(|a| a.opened_at > opened_at)
        })
    }

    /// Closes every session of `token` opened before `opened_at`.
    pub(super) fn displace_older(&mut self, token: &TokenId, opened_at: EntryId, keep: &SessionId) {
        let older: Vec<SessionId> = self
            .by_token
            .get(token)
            .into_iter()
            .flatten()
            .filter(|s| *s != keep)
            .filter(|s| {
                self.sessions
                    .get(s)
                    .is_some_and(|a| a.opened_at < opened_at)
            })
            .cloned()
            .collect();
        for s in older {
            self.close_session(&s, CloseReason::Displaced);
        }
    }
}

/// Openings read from the displacement channel, in order.
#[derive(Message)]
#[rtype(result = "()")]
struct Openings {
    openings: Vec<Opening>,
}

impl Handler<Openings> for BayFeed {
    type Result = ();

    fn handle(&mut self, msg: Openings, ctx: &mut Self::Context) {
        for o in msg.openings {
            self.displace_older(&o.token, o.id, &o.session);
        }
        self.publish_if_due(ctx);
    }
}
