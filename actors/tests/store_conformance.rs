//! The store conformance suite: every test below is an engine-agnostic
//! async function over `Arc<dyn Store>`, run against BOTH engines — the
//! memory engine and the Redis engine on a real `redis-server` (one per
//! test, on its own port and temp dir) — again on a one-node Redis
//! Cluster, which refuses any script whose keys span hash slots, and again
//! with the engine in cluster mode (`redis.cluster`) on a real three-master
//! Redis Cluster, where each test's Bays and tokens land on different
//! masters. An engine passes only if it behaves exactly like the other.
//!
//! This file is the harness: the engine matrix ([`conformance!`], one
//! module per engine in each area) and the helpers several areas use. The
//! tests live beside it in `store_conformance/`, one file per area of the
//! store, each listing its tests in one `conformance!` call.

mod common;

use common::unique;
use std::sync::Arc;
use switchboard_actors::model::{Conversation, StoredMessage};
use switchboard_actors::store::log::{Change, LogEvent, LogRecord};
use switchboard_actors::store::{
    AppendOutcome, Appended, Changed, Idempotency, MessageChange, NewMessage, Replay, Store,
};
use switchboard_protocol::cursor::{EntryId, LogPosition};
use switchboard_protocol::ids::{BayId, ConversationId, ParticipantId, TokenId};
use switchboard_protocol::model::ParticipantKind;

/// Instantiates each test for both engines (the Redis one on one server, a
/// one-node cluster and a three-master cluster): `name` or `name: limits`.
macro_rules! conformance {
    ($($name:ident $(: $limits:expr)?),* $(,)?) => {
        mod memory {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    #[allow(unused_variables)]
                    let limits = crate::common::Limits::default();
                    $( let limits = $limits; )?
                    super::$name(crate::common::memory_store(limits)).await;
                }
            )*
        }
        mod redis {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    #[allow(unused_variables)]
                    let limits = crate::common::Limits::default();
                    $( let limits = $limits; )?
                    let server = crate::common::redis::RedisServer::start();
                    let store: std::sync::Arc<dyn switchboard_actors::store::Store> =
                        std::sync::Arc::new(crate::common::redis_store(&server, limits).await);
                    super::$name(store).await;
                    drop(server);
                }
            )*
        }
        /// The same tests on a one-node Redis Cluster: any script whose keys
        /// span slots fails there (`CROSSSLOT`).
        mod redis_cluster {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    #[allow(unused_variables)]
                    let limits = crate::common::Limits::default();
                    $( let limits = $limits; )?
                    let server = crate::common::redis::RedisServer::start_cluster();
                    let store: std::sync::Arc<dyn switchboard_actors::store::Store> =
                        std::sync::Arc::new(crate::common::redis_store(&server, limits).await);
                    super::$name(store).await;
                    drop(server);
                }
            )*
        }
        /// The same tests with the engine in cluster mode on a three-master
        /// Redis Cluster: commands and scripts routed by slot, blocking
        /// reads on dedicated cluster connections.
        mod redis_cluster_mode {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    #[allow(unused_variables)]
                    let limits = crate::common::Limits::default();
                    $( let limits = $limits; )?
                    let cluster = crate::common::redis::RedisCluster::start();
                    let store: std::sync::Arc<dyn switchboard_actors::store::Store> =
                        std::sync::Arc::new(crate::common::redis_cluster_store(&cluster, limits).await);
                    super::$name(store).await;
                    drop(cluster);
                }
            )*
        }
    };
}

#[path = "store_conformance/changes.rs"]
mod changes;
#[path = "store_conformance/connectors.rs"]
mod connectors;
#[path = "store_conformance/conversations.rs"]
mod conversations;
#[path = "store_conformance/directory.rs"]
mod directory;
#[path = "store_conformance/displacement.rs"]
mod displacement;
#[path = "store_conformance/drafts.rs"]
mod drafts;
#[path = "store_conformance/files.rs"]
mod files;
#[path = "store_conformance/idempotency.rs"]
mod idempotency;
#[path = "store_conformance/leases.rs"]
mod leases;
#[path = "store_conformance/log.rs"]
mod log;
#[path = "store_conformance/messages.rs"]
mod messages;
#[path = "store_conformance/nodes.rs"]
mod nodes;
#[path = "store_conformance/pairing.rs"]
mod pairing;
#[path = "store_conformance/presence.rs"]
mod presence;
#[path = "store_conformance/rooms.rs"]
mod rooms;
#[path = "store_conformance/summaries.rs"]
mod summaries;
#[path = "store_conformance/webhooks.rs"]
mod webhooks;

// ---- helpers shared by the areas ----

async fn head(store: &dyn Store, bay: &BayId) -> LogPosition {
    store.log_head(bay).await.unwrap()
}

/// Reads after `pos` (no blocking), expecting records.
async fn read(
    store: &dyn Store,
    bay: &BayId,
    pos: &LogPosition,
    max: usize,
) -> (Vec<Arc<LogRecord>>, EntryId) {
    match store.read_log(bay, pos, max, None).await.unwrap() {
        Replay::Records { records, through } => (records, through),
        other => panic!("expected records after {pos:?}, got {other:?}"),
    }
}

fn at(pos: &LogPosition, entry: EntryId) -> LogPosition {
    LogPosition {
        epoch: pos.epoch.clone(),
        entry,
    }
}

async fn control(store: &dyn Store, bay: &BayId) -> EntryId {
    store
        .append_control(
            bay,
            LogEvent::CredentialRevoked {
                participant: ParticipantId(unique("p")),
                token: TokenId(unique("t")),
            },
        )
        .await
        .unwrap()
}

/// `m` sent under idempotency key `key`, as a request with `fingerprint`.
fn keyed(mut m: NewMessage, key: &str, fingerprint: &str) -> NewMessage {
    m.idempotency = Some(Idempotency {
        key: key.into(),
        fingerprint: fingerprint.into(),
    });
    m
}

async fn revision_of(store: &dyn Store, bay: &BayId, conversation: &ConversationId) -> u64 {
    store
        .conversation_revisioned(bay, conversation)
        .await
        .unwrap()
        .expect("the conversation exists")
        .revision
}

/// [`Store::append_message`] at the conversation's current revision,
/// whatever it answers.
async fn send(
    store: &dyn Store,
    bay: &BayId,
    mut m: NewMessage,
    kind: ParticipantKind,
) -> AppendOutcome {
    m.revision = revision_of(store, bay, &m.conversation.id).await;
    store.append_message(bay, m, kind).await.unwrap()
}

fn appended(outcome: AppendOutcome) -> Appended {
    match outcome {
        AppendOutcome::Appended(a) => *a,
        other => panic!("expected Appended, got {other:?}"),
    }
}

/// Every entry logged after `pos`, as (id, event).
async fn logged(store: &dyn Store, bay: &BayId, pos: &LogPosition) -> Vec<(EntryId, LogEvent)> {
    let (records, _) = read(store, bay, pos, 10_000).await;
    records.iter().map(|r| (r.id, r.event.clone())).collect()
}

/// The whole history of `c`, oldest first.
async fn history(store: &dyn Store, bay: &BayId, c: &ConversationId) -> Vec<StoredMessage> {
    let (all, more) = store.messages_before(bay, c, None, 10_000).await.unwrap();
    assert!(!more);
    all
}

/// [`Store::change_message`] in `c` at its current revision.
async fn change(
    store: &dyn Store,
    bay: &BayId,
    c: &Conversation,
    message: StoredMessage,
    what: Change,
) -> Changed {
    let revision = revision_of(store, bay, &c.id).await;
    store
        .change_message(
            bay,
            MessageChange {
                conversation: c.reference(),
                revision,
                message,
                change: what,
            },
        )
        .await
        .unwrap()
}

fn changed(c: Changed) -> EntryId {
    match c {
        Changed::Changed(entry) => entry,
        other => panic!("expected Changed, got {other:?}"),
    }
}
