//! Shared fixtures of the store tests: a real redis-server, store
//! constructors for both engines, and record builders.
#![allow(dead_code)]

pub mod redis;

use chrono::Utc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use switchboard_actors::model::{Bay, Conversation, Member, Participant, StoredMessage};
use switchboard_actors::store::memory::{MemoryLimits, MemoryStore};
use switchboard_actors::store::redis::{connect, connect_cluster, RedisLimits, RedisStore};
use switchboard_actors::store::{AppendOutcome, Appended, Created, NewMessage, Store, StoreError};
use switchboard_actors::token::TokenHash;
use switchboard_protocol::event::SenderView;
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId};
use switchboard_protocol::model::{ConversationType, ParticipantKind, Policy, Role};
use switchboard_protocol::routing::Routing;

/// Replay-buffer limits a test runs with (both engines get the same).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub window: Duration,
    pub max_entries: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            window: Duration::from_secs(900),
            max_entries: 10_000,
        }
    }
}

pub fn memory_store(limits: Limits) -> Arc<dyn Store> {
    Arc::new(MemoryStore::new(MemoryLimits {
        replay_window: limits.window,
        max_entries: limits.max_entries,
    }))
}

pub async fn redis_store(server: &redis::RedisServer, limits: Limits) -> RedisStore {
    connect(
        &server.url(),
        4,
        RedisLimits {
            replay_window: limits.window,
            max_entries: limits.max_entries,
        },
    )
    .await
    .expect("connect to the test redis-server")
}

/// The engine in cluster mode on `cluster` (every node given as a seed).
pub async fn redis_cluster_store(cluster: &redis::RedisCluster, limits: Limits) -> RedisStore {
    connect_cluster(
        &cluster.seeds(),
        4,
        RedisLimits {
            replay_window: limits.window,
            max_entries: limits.max_entries,
        },
    )
    .await
    .expect("connect to the test Redis Cluster")
}

/// A fresh id, unique within the test process.
pub fn unique(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{prefix}{}x{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

pub async fn new_bay(store: &dyn Store) -> Bay {
    let bay = Bay {
        id: BayId(unique("bay")),
        name: "Test bay".into(),
    };
    assert_eq!(
        store.create_bay(bay.clone()).await.unwrap(),
        Created::Created(bay.clone())
    );
    bay
}

pub fn participant(id: &str, kind: ParticipantKind) -> Participant {
    Participant {
        id: ParticipantId(id.into()),
        kind,
        name: format!("{id} name"),
        description: match kind {
            ParticipantKind::Agent => Some(format!("{id} does things")),
            ParticipantKind::User => None,
        },
    }
}

/// Creates a participant with a token of its own; returns it and the token hash.
pub async fn new_participant(
    store: &dyn Store,
    bay: &BayId,
    id: &str,
    kind: ParticipantKind,
) -> (Participant, TokenHash) {
    let p = participant(id, kind);
    let token = TokenHash::of(&unique(&format!("bay_token_{id}_")));
    assert_eq!(
        store
            .create_participant(bay, p.clone(), token.clone())
            .await
            .unwrap(),
        Created::Created(p.clone())
    );
    (p, token)
}

pub fn group(id: &str, members: &[(&Participant, Role)], cap: u8) -> Conversation {
    Conversation {
        id: ConversationId(id.into()),
        kind: ConversationType::Group,
        title: Some(format!("{id} title")),
        policy: Policy {
            max_agent_rounds: cap,
            ..Policy::default()
        },
        members: members
            .iter()
            .map(|(p, role)| Member {
                participant: p.id.clone(),
                role: *role,
            })
            .collect(),
    }
}

pub async fn new_group(
    store: &dyn Store,
    bay: &BayId,
    id: &str,
    members: &[(&Participant, Role)],
    cap: u8,
) -> Conversation {
    let c = group(id, members, cap);
    assert_eq!(
        store.create_conversation(bay, c.clone()).await.unwrap(),
        Created::Created(c.clone())
    );
    c
}

/// Appends at the conversation's current revision (tests route nothing,
/// so a stale revision would be a bug of the test).
#[allow(async_fn_in_trait)]
pub trait Append {
    /// [`Store::append_message`] at the current revision; panics on `Stale`.
    async fn append(
        &self,
        bay: &BayId,
        message: NewMessage,
        kind: ParticipantKind,
    ) -> Result<Appended, StoreError>;
}

impl<S: Store + ?Sized> Append for S {
    async fn append(
        &self,
        bay: &BayId,
        mut message: NewMessage,
        kind: ParticipantKind,
    ) -> Result<Appended, StoreError> {
        message.revision = self
            .conversation_revisioned(bay, &message.conversation.id)
            .await?
            .map_or(0, |c| c.revision);
        match self.append_message(bay, message, kind).await? {
            AppendOutcome::Appended(a) => Ok(*a),
            AppendOutcome::Stale => panic!("append at the current revision was stale"),
            other => panic!("append without an idempotency key answered {other:?}"),
        }
    }
}

/// A message from `sender` in `conversation`, ready to append under `cap`.
pub fn message(
    conversation: &Conversation,
    sender: &Participant,
    content: &str,
    cap: Option<u8>,
) -> NewMessage {
    NewMessage {
        conversation: conversation.reference(),
        message: StoredMessage {
            // Stamped by the store.
            created_at: Utc::now() - chrono::Duration::days(3),
            ..StoredMessage::new(
                MessageId(unique("m_")),
                conversation.id.clone(),
                SenderView {
                    id: sender.id.clone(),
                    name: sender.name.clone(),
                    kind: sender.kind,
                    role: Some(Role::Member),
                },
                content.into(),
                None,
                None,
                Routing::default(),
            )
        },
        round_cap: cap,
        revision: 0,
        idempotency: None,
        budget: None,
    }
}
