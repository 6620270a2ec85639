//! The store conformance suite: every test below is an engine-agnostic
//! async function over `Arc<dyn Store>`, run against BOTH engines — the
//! memory engine and the Redis engine on a real `redis-server` (one per
//! test, on its own port and temp dir) — again on a one-node Redis
//! Cluster, which refuses any script whose keys span hash slots, and again
//! with the engine in cluster mode (`redis.cluster`) on a real three-master
//! Redis Cluster, where each test's Bays and tokens land on different
//! masters. An engine passes only if it behaves exactly like the other.

mod common;

use chrono::Utc;
use common::{message, new_bay, new_group, new_participant, participant, unique, Append, Limits};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchboard_actors::model::{Conversation, Member, Reaction, StoredMessage};
use switchboard_actors::store::log::{Change, LogEvent, LogRecord};
use switchboard_actors::store::{
    now_ms, AppendOutcome, Appended, Changed, Created, DraftAppend, DraftAppended, Idempotency,
    MessageChange, NewMessage, Opening, ParticipantPresence, PresenceChange, Principal, Published,
    ReadState, Replay, RosterChange, RoundStep, Store, Updated,
};
use switchboard_actors::token::TokenHash;
use switchboard_protocol::card::{Card, CardType};
use switchboard_protocol::cursor::{EntryId, Epoch, LogPosition};
use switchboard_protocol::event::ConversationRef;
use switchboard_protocol::ids::{
    BayId, ConversationId, MessageId, ParticipantId, SessionId, TokenId,
};
use switchboard_protocol::model::{
    MessageState, ParticipantKind, Policy, ReplyPolicy, Role, SenderType,
};
use switchboard_protocol::poll::PollState;
use switchboard_protocol::presence::PresenceState;

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
                    let limits = Limits::default();
                    $( let limits = $limits; )?
                    super::$name(common::memory_store(limits)).await;
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
                    let limits = Limits::default();
                    $( let limits = $limits; )?
                    let server = common::redis::RedisServer::start();
                    let store: Arc<dyn Store> = Arc::new(common::redis_store(&server, limits).await);
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
                    let limits = Limits::default();
                    $( let limits = $limits; )?
                    let server = common::redis::RedisServer::start_cluster();
                    let store: Arc<dyn Store> = Arc::new(common::redis_store(&server, limits).await);
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
                    let limits = Limits::default();
                    $( let limits = $limits; )?
                    let cluster = common::redis::RedisCluster::start();
                    let store: Arc<dyn Store> =
                        Arc::new(common::redis_cluster_store(&cluster, limits).await);
                    super::$name(store).await;
                    drop(cluster);
                }
            )*
        }
    };
}

conformance!(
    bays_and_participants,
    tokens_rotate_and_revoke,
    conversations_members_and_roster_entries,
    history_since_before_and_paging,
    message_json_round_trips_exactly,
    round_cap_semantics,
    concurrent_appends_count_rounds_exactly,
    log_read_through_expired_and_epoch,
    control_entries_are_logged,
    trimming_by_age_expires_cursors: Limits { window: Duration::from_millis(300), max_entries: 10_000 },
    trimming_by_count_expires_cursors: Limits { window: Duration::from_secs(900), max_entries: 3 },
    blocking_read_wakes_on_append,
    blocking_read_times_out_empty,
    revisions_refuse_stale_appends,
    roster_changes_name_the_members_before_and_after,
    roster_changes_are_trimmed_with_the_log: Limits { window: Duration::from_secs(900), max_entries: 2 },
    openings_travel_apart_from_the_log,
    a_blocked_openings_read_wakes_on_an_opening,
    idempotent_appends_store_once,
    concurrent_idempotent_appends_store_one_and_count_one_round,
    idempotency_keys_expire_with_the_replay_window: Limits { window: Duration::from_secs(1), max_entries: 10_000 },
    seq_counts_messages_from_one,
    changes_replace_the_message_and_log_the_change,
    read_markers_only_move_forward,
    polls_are_found_by_id,
    cards_polls_and_reactions_round_trip_through_changes,
    drafts_stream_close_and_count_their_round_at_completion,
    presence_records_merge_nodes_and_expire,
    publishing_presence_logs_each_change_once,
    concurrent_presence_publishers_log_a_change_once,
);

// ---- helpers ----

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

fn is_expired(r: Replay) -> bool {
    matches!(r, Replay::Expired)
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

// ---- the suite ----

async fn bays_and_participants(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    assert_eq!(
        store.create_bay(bay.clone()).await.unwrap(),
        Created::AlreadyExists
    );
    assert_eq!(store.bay(&bay.id).await.unwrap(), Some(bay.clone()));
    assert_eq!(store.bay(&BayId(unique("nobay"))).await.unwrap(), None);

    let (bob, bob_token) = new_participant(store, &bay.id, "p_bob", ParticipantKind::Agent).await;
    let (alice, _) = new_participant(store, &bay.id, "p_alice", ParticipantKind::User).await;
    // Same id, or same token: refused.
    assert_eq!(
        store
            .create_participant(
                &bay.id,
                participant("p_bob", ParticipantKind::User),
                TokenHash::of("bay_other_token_0001")
            )
            .await
            .unwrap(),
        Created::AlreadyExists
    );
    assert_eq!(
        store
            .create_participant(
                &bay.id,
                participant("p_carol", ParticipantKind::User),
                bob_token.clone()
            )
            .await
            .unwrap(),
        Created::AlreadyExists
    );
    // The refused token stayed Bob's.
    assert_eq!(
        store
            .authenticate(&bob_token)
            .await
            .unwrap()
            .map(|p| p.participant.id),
        Some(bob.id.clone())
    );
    // Unknown Bay.
    assert_eq!(
        store
            .create_participant(
                &BayId(unique("nobay")),
                participant("p_x", ParticipantKind::User),
                TokenHash::of("bay_nobay_token_00001")
            )
            .await
            .unwrap(),
        Created::AlreadyExists
    );
    assert_eq!(
        store.participant(&bay.id, &bob.id).await.unwrap(),
        Some(bob.clone())
    );
    assert_eq!(
        store
            .participant(&bay.id, &ParticipantId("p_carol".into()))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store.participants(&bay.id).await.unwrap(),
        vec![alice.clone(), bob.clone()],
        "sorted by id"
    );
    assert_eq!(
        store.participants(&BayId(unique("nobay"))).await.unwrap(),
        vec![]
    );
    assert_eq!(
        store
            .participants_in(
                &bay.id,
                &[
                    bob.id.clone(),
                    ParticipantId("p_ghost".into()),
                    alice.id.clone()
                ]
            )
            .await
            .unwrap(),
        vec![bob.clone(), alice.clone()],
        "the ids asked for, in that order, unknown ones skipped"
    );
    assert_eq!(
        store.authenticate(&bob_token).await.unwrap(),
        Some(Principal {
            bay: bay.id.clone(),
            participant: bob,
            token: bob_token.id(),
        })
    );
    assert_eq!(
        store
            .authenticate(&TokenHash::of("bay_never_issued_000001"))
            .await
            .unwrap(),
        None
    );
}

async fn tokens_rotate_and_revoke(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (p, t1) = new_participant(store, &bay.id, "p_agent", ParticipantKind::Agent).await;
    let start = head(store, &bay.id).await;

    // Rotation: the old token stops at once, the new one works, and the
    // revocation is in the log.
    let t2 = TokenHash::of("bay_rotated_token_000002");
    assert_eq!(
        store
            .set_token(&bay.id, &p.id, Some(t2.clone()))
            .await
            .unwrap(),
        Updated::Updated(())
    );
    assert_eq!(store.authenticate(&t1).await.unwrap(), None);
    assert_eq!(
        store
            .authenticate(&t2)
            .await
            .unwrap()
            .map(|x| x.participant.id),
        Some(p.id.clone())
    );
    let (records, through) = read(store, &bay.id, &start, 10).await;
    assert_eq!(records.len(), 1);
    assert_eq!(
        records[0].event,
        LogEvent::CredentialRevoked {
            participant: p.id.clone(),
            token: t1.id(),
        }
    );

    // Revocation.
    assert_eq!(
        store.set_token(&bay.id, &p.id, None).await.unwrap(),
        Updated::Updated(())
    );
    assert_eq!(store.authenticate(&t2).await.unwrap(), None);
    let (records, through) = read(store, &bay.id, &at(&start, through), 10).await;
    assert_eq!(
        records.iter().map(|r| r.event.clone()).collect::<Vec<_>>(),
        vec![LogEvent::CredentialRevoked {
            participant: p.id.clone(),
            token: t2.id(),
        }]
    );

    // A token for a participant without one: nothing to revoke, nothing logged.
    let t3 = TokenHash::of("bay_third_token_0000003");
    assert_eq!(
        store
            .set_token(&bay.id, &p.id, Some(t3.clone()))
            .await
            .unwrap(),
        Updated::Updated(())
    );
    assert!(store.authenticate(&t3).await.unwrap().is_some());
    let (records, _) = read(store, &bay.id, &at(&start, through), 10).await;
    assert!(records.is_empty(), "{records:?}");

    // Unknown participant or Bay.
    assert_eq!(
        store
            .set_token(
                &bay.id,
                &ParticipantId("p_ghost".into()),
                Some(TokenHash::of("bay_ghost_token_0000001"))
            )
            .await
            .unwrap(),
        Updated::NotFound
    );
    assert_eq!(
        store
            .authenticate(&TokenHash::of("bay_ghost_token_0000001"))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .set_token(&BayId(unique("nobay")), &p.id, None)
            .await
            .unwrap(),
        Updated::NotFound
    );
    assert!(store.authenticate(&t3).await.unwrap().is_some());

    // A revoked token is free again and authenticates only its new owner.
    let q = participant("p_other", ParticipantKind::User);
    assert_eq!(
        store
            .create_participant(&bay.id, q.clone(), t1.clone())
            .await
            .unwrap(),
        Created::Created(q.clone())
    );
    assert_eq!(
        store
            .authenticate(&t1)
            .await
            .unwrap()
            .map(|x| x.participant.id),
        Some(q.id)
    );
}

async fn conversations_members_and_roster_entries(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (u, _) = new_participant(store, &bay.id, "p_user", ParticipantKind::User).await;
    let (a1, _) = new_participant(store, &bay.id, "p_a1", ParticipantKind::Agent).await;
    let (a2, _) = new_participant(store, &bay.id, "p_a2", ParticipantKind::Agent).await;
    let start = head(store, &bay.id).await;

    let c1 = new_group(
        store,
        &bay.id,
        "c_1",
        &[(&u, Role::Admin), (&a1, Role::Member)],
        3,
    )
    .await;
    let c0 = new_group(store, &bay.id, "c_0", &[(&a1, Role::Member)], 3).await;
    assert_eq!(
        store
            .create_conversation(&bay.id, c1.clone())
            .await
            .unwrap(),
        Created::AlreadyExists
    );
    assert_eq!(
        store
            .create_conversation(&BayId(unique("nobay")), c1.clone())
            .await
            .unwrap(),
        Created::AlreadyExists
    );
    assert_eq!(
        store.conversation(&bay.id, &c1.id).await.unwrap(),
        Some(c1.clone())
    );
    assert_eq!(
        store
            .conversation(&bay.id, &ConversationId("c_none".into()))
            .await
            .unwrap(),
        None
    );

    // Add, re-role, remove.
    let Updated::Updated(after_add) = store
        .upsert_member(
            &bay.id,
            &c1.id,
            Member {
                participant: a2.id.clone(),
                role: Role::Member,
            },
        )
        .await
        .unwrap()
    else {
        panic!("upsert failed")
    };
    assert_eq!(
        after_add.member_ids(),
        vec![u.id.clone(), a1.id.clone(), a2.id.clone()]
    );
    let Updated::Updated(after_role) = store
        .upsert_member(
            &bay.id,
            &c1.id,
            Member {
                participant: a1.id.clone(),
                role: Role::Admin,
            },
        )
        .await
        .unwrap()
    else {
        panic!("re-role failed")
    };
    assert_eq!(after_role.member(&a1.id).unwrap().role, Role::Admin);
    assert_eq!(after_role.members.len(), 3);
    let Updated::Updated(after_remove) =
        store.remove_member(&bay.id, &c1.id, &a2.id).await.unwrap()
    else {
        panic!("remove failed")
    };
    assert_eq!(after_remove.member_ids(), vec![u.id.clone(), a1.id.clone()]);
    assert_eq!(
        store.remove_member(&bay.id, &c1.id, &a2.id).await.unwrap(),
        Updated::NotFound,
        "not a member any more"
    );
    let ghost = ConversationId("c_ghost".into());
    assert_eq!(
        store.remove_member(&bay.id, &ghost, &u.id).await.unwrap(),
        Updated::NotFound
    );
    assert_eq!(
        store
            .upsert_member(
                &bay.id,
                &ghost,
                Member {
                    participant: u.id.clone(),
                    role: Role::Member
                }
            )
            .await
            .unwrap(),
        Updated::NotFound
    );

    // Title and policy.
    let policy = Policy {
        agent_reply_policy: ReplyPolicy::Open,
        max_agent_rounds: 2,
        ..Policy::default()
    };
    let Updated::Updated(after_update) = store
        .update_conversation(
            &bay.id,
            &c1.id,
            Some(Some("Renamed".into())),
            Some(policy.clone()),
        )
        .await
        .unwrap()
    else {
        panic!("update failed")
    };
    assert_eq!(after_update.title.as_deref(), Some("Renamed"));
    assert_eq!(after_update.policy, policy);
    assert_eq!(
        store.conversation(&bay.id, &c1.id).await.unwrap(),
        Some(after_update.clone())
    );
    let Updated::Updated(untitled) = store
        .update_conversation(&bay.id, &c1.id, Some(None), None)
        .await
        .unwrap()
    else {
        panic!("update failed")
    };
    assert_eq!(untitled.title, None);
    assert_eq!(untitled.policy, policy);
    assert_eq!(
        store
            .update_conversation(&bay.id, &ghost, Some(None), None)
            .await
            .unwrap(),
        Updated::NotFound
    );

    // Listings.
    assert_eq!(
        store.conversations(&bay.id).await.unwrap(),
        vec![c0.clone(), untitled.clone()],
        "sorted by id"
    );
    assert_eq!(
        store.conversations_of(&bay.id, &u.id).await.unwrap(),
        vec![untitled.clone()]
    );
    assert_eq!(
        store.conversations_of(&bay.id, &a1.id).await.unwrap(),
        vec![c0.clone(), untitled.clone()]
    );
    assert!(store
        .conversations_of(&bay.id, &a2.id)
        .await
        .unwrap()
        .is_empty());

    // Every change logged its roster, in order.
    let (records, _) = read(store, &bay.id, &start, 100).await;
    let rosters: Vec<(ConversationId, Option<String>, Vec<ParticipantId>)> = records
        .iter()
        .map(|r| match &r.event {
            LogEvent::Roster {
                conversation,
                members,
            } => (
                conversation.id.clone(),
                conversation.title.clone(),
                members.clone(),
            ),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    let t1 = Some("c_1 title".to_owned());
    assert_eq!(
        rosters,
        vec![
            (c1.id.clone(), t1.clone(), vec![u.id.clone(), a1.id.clone()]),
            (c0.id.clone(), Some("c_0 title".into()), vec![a1.id.clone()]),
            (
                c1.id.clone(),
                t1.clone(),
                vec![u.id.clone(), a1.id.clone(), a2.id.clone()]
            ),
            (
                c1.id.clone(),
                t1.clone(),
                vec![u.id.clone(), a1.id.clone(), a2.id.clone()]
            ),
            (c1.id.clone(), t1.clone(), vec![u.id.clone(), a1.id.clone()]),
            (
                c1.id.clone(),
                Some("Renamed".into()),
                vec![u.id.clone(), a1.id.clone()]
            ),
            (c1.id.clone(), None, vec![u.id.clone(), a1.id.clone()]),
        ]
    );
    assert!(records.windows(2).all(|w| w[0].id < w[1].id));
}

async fn history_since_before_and_paging(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (u, _) = new_participant(store, &bay.id, "p_user", ParticipantKind::User).await;
    let (a, _) = new_participant(store, &bay.id, "p_agent", ParticipantKind::Agent).await;
    let c = new_group(
        store,
        &bay.id,
        "c_hist",
        &[(&u, Role::Member), (&a, Role::Member)],
        5,
    )
    .await;
    let start = head(store, &bay.id).await;

    let mut sent: Vec<StoredMessage> = Vec::new();
    let mut entries = Vec::new();
    for i in 0..7 {
        let sender = if i % 2 == 0 { &u } else { &a };
        let before = chrono::Utc::now();
        let appended = store
            .append(
                &bay.id,
                message(&c, sender, &format!("message {i}"), None),
                sender.kind,
            )
            .await
            .unwrap();
        let m = &appended.message;
        assert_eq!(m.content, format!("message {i}"));
        assert_eq!(
            m.created_at.timestamp_subsec_nanos() % 1_000_000,
            0,
            "createdAt has millisecond precision"
        );
        assert!(
            m.created_at >= before - chrono::Duration::seconds(2)
                && m.created_at <= chrono::Utc::now() + chrono::Duration::seconds(2),
            "createdAt is stamped by the store: {}",
            m.created_at
        );
        if let Some(prev) = sent.last() {
            assert!(
                m.created_at > prev.created_at,
                "createdAt strictly increases"
            );
        }
        entries.push(appended.entry);
        sent.push(appended.message);
    }
    assert!(entries.windows(2).all(|w| w[0] < w[1]));

    // The log carries the same messages, with their entry ids.
    let (records, _) = read(store, &bay.id, &start, 100).await;
    assert_eq!(records.len(), 7);
    for ((r, m), e) in records.iter().zip(&sent).zip(&entries) {
        assert_eq!(r.id, *e);
        assert_eq!(
            r.event,
            LogEvent::Message {
                conversation: c.reference(),
                message: m.clone()
            }
        );
    }

    // By id.
    assert_eq!(
        store.message(&bay.id, &c.id, &sent[3].id).await.unwrap(),
        Some(sent[3].clone())
    );
    assert_eq!(
        store
            .message(&bay.id, &c.id, &MessageId("m_none".into()))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .message(&bay.id, &ConversationId("c_none".into()), &sent[3].id)
            .await
            .unwrap(),
        None
    );

    // Since: strictly after, oldest first, at most `limit`.
    let since = |i: usize| sent[i].created_at;
    assert_eq!(
        store
            .messages_since(&bay.id, &c.id, since(2), 10)
            .await
            .unwrap(),
        sent[3..].to_vec()
    );
    assert_eq!(
        store
            .messages_since(&bay.id, &c.id, since(2), 3)
            .await
            .unwrap(),
        sent[3..6].to_vec()
    );
    assert_eq!(
        store
            .messages_since(
                &bay.id,
                &c.id,
                since(2) + chrono::Duration::microseconds(500),
                10
            )
            .await
            .unwrap(),
        sent[3..].to_vec(),
        "sub-millisecond `since`"
    );
    assert_eq!(
        store
            .messages_since(
                &bay.id,
                &c.id,
                since(2) - chrono::Duration::microseconds(1),
                10
            )
            .await
            .unwrap(),
        sent[2..].to_vec()
    );
    assert!(store
        .messages_since(&bay.id, &c.id, since(6), 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        store
            .messages_since(&bay.id, &c.id, since(0) - chrono::Duration::days(1), 100)
            .await
            .unwrap(),
        sent
    );
    assert_eq!(
        store
            .messages_since(
                &bay.id,
                &c.id,
                since(0) - chrono::Duration::days(1),
                usize::MAX
            )
            .await
            .unwrap(),
        sent
    );
    assert_eq!(
        store
            .messages_before(&bay.id, &c.id, None, usize::MAX)
            .await
            .unwrap(),
        (sent.clone(), false)
    );
    assert!(store
        .messages_since(&bay.id, &c.id, since(0), 0)
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .messages_since(&bay.id, &ConversationId("c_none".into()), since(0), 10)
        .await
        .unwrap()
        .is_empty());

    // Before: pages of the newest, oldest first, with "more" while older remain.
    let page = |r: (Vec<StoredMessage>, bool)| r;
    assert_eq!(
        page(
            store
                .messages_before(&bay.id, &c.id, None, 3)
                .await
                .unwrap()
        ),
        (sent[4..7].to_vec(), true)
    );
    assert_eq!(
        page(
            store
                .messages_before(&bay.id, &c.id, Some(&sent[4].id), 3)
                .await
                .unwrap()
        ),
        (sent[1..4].to_vec(), true)
    );
    assert_eq!(
        page(
            store
                .messages_before(&bay.id, &c.id, Some(&sent[1].id), 3)
                .await
                .unwrap()
        ),
        (sent[0..1].to_vec(), false)
    );
    assert_eq!(
        page(
            store
                .messages_before(&bay.id, &c.id, Some(&sent[0].id), 3)
                .await
                .unwrap()
        ),
        (vec![], false)
    );
    assert_eq!(
        page(
            store
                .messages_before(&bay.id, &c.id, None, 7)
                .await
                .unwrap()
        ),
        (sent.clone(), false)
    );
    assert_eq!(
        page(
            store
                .messages_before(&bay.id, &c.id, None, 100)
                .await
                .unwrap()
        ),
        (sent.clone(), false)
    );
    assert_eq!(
        page(
            store
                .messages_before(&bay.id, &c.id, None, 0)
                .await
                .unwrap()
        ),
        (vec![], true)
    );
    assert_eq!(
        page(
            store
                .messages_before(&bay.id, &c.id, Some(&MessageId("m_none".into())), 3)
                .await
                .unwrap()
        ),
        (vec![], false)
    );
    assert_eq!(
        page(
            store
                .messages_before(&bay.id, &ConversationId("c_none".into()), None, 3)
                .await
                .unwrap()
        ),
        (vec![], false)
    );
}

async fn message_json_round_trips_exactly(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (u, _) = new_participant(store, &bay.id, "p_user", ParticipantKind::User).await;
    let c = new_group(store, &bay.id, "c_json", &[(&u, Role::Member)], 5).await;
    let mut m = message(
        &c,
        &u,
        "quotes \" backslash \\ newline \n unicode ✓ 🚀 and a fake hole \"__sb_hole_0__\"",
        None,
    );
    m.message.metadata = Some(json!({
        "big": 12345678901234567890u64,
        "neg": -9007199254740993i64,
        "float": 0.1,
        "empty_list": [],
        "empty_object": {},
        "nested": {"list": [1, "two", null, true]},
    }));
    m.message.routing.mentions = vec![ParticipantId("p_x".into())];
    let appended = store.append(&bay.id, m.clone(), u.kind).await.unwrap();
    let mut expected = m.message.clone();
    expected.created_at = appended.message.created_at;
    expected.seq = 1;
    assert_eq!(appended.message, expected);
    assert_eq!(
        store.message(&bay.id, &c.id, &expected.id).await.unwrap(),
        Some(expected.clone())
    );
}

async fn round_cap_semantics(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (u, _) = new_participant(store, &bay.id, "p_user", ParticipantKind::User).await;
    let (a1, _) = new_participant(store, &bay.id, "p_a1", ParticipantKind::Agent).await;
    let (a2, _) = new_participant(store, &bay.id, "p_a2", ParticipantKind::Agent).await;
    let members = [(&u, Role::Member), (&a1, Role::Member), (&a2, Role::Member)];
    let start = head(store, &bay.id).await;

    async fn send(
        store: &dyn Store,
        bay: &BayId,
        c: &Conversation,
        sender: &switchboard_actors::model::Participant,
        cap: Option<u8>,
    ) -> bool {
        store
            .append(bay, message(c, sender, "hi", cap), sender.kind)
            .await
            .unwrap()
            .message
            .routing
            .suppressed
    }

    // Cap 5: the 5th consecutive agent message (and later ones) is suppressed.
    let c5 = new_group(store, &bay.id, "c_cap5", &members, 5).await;
    let mut got = Vec::new();
    for i in 0..7 {
        let a = if i % 2 == 0 { &a1 } else { &a2 };
        got.push(send(store, &bay.id, &c5, a, Some(5)).await);
    }
    assert_eq!(got, [false, false, false, false, true, true, true]);
    // A human resets the count and is never suppressed.
    assert!(!send(store, &bay.id, &c5, &u, Some(5)).await);
    assert!(!send(store, &bay.id, &c5, &a1, Some(5)).await);

    // Cap 0: every agent message is suppressed, even the first after a human.
    let c0 = new_group(store, &bay.id, "c_cap0", &members, 0).await;
    assert!(send(store, &bay.id, &c0, &a1, Some(0)).await);
    assert!(!send(store, &bay.id, &c0, &u, Some(0)).await);
    assert!(send(store, &bay.id, &c0, &a2, Some(0)).await);

    // Cap 1 suppresses exactly what cap 0 does (docs/routing.md).
    let c1 = new_group(store, &bay.id, "c_cap1", &members, 1).await;
    assert!(send(store, &bay.id, &c1, &a1, Some(1)).await);
    assert!(!send(store, &bay.id, &c1, &u, Some(1)).await);
    assert!(send(store, &bay.id, &c1, &a2, Some(1)).await);
    assert!(send(store, &bay.id, &c1, &a1, Some(1)).await);

    // No cap (DM / AGENT_CHAT): never suppressed, but the count still runs,
    // so a cap applied later sees the rounds so far.
    let cn = new_group(store, &bay.id, "c_nocap", &members, 5).await;
    for _ in 0..3 {
        assert!(!send(store, &bay.id, &cn, &a1, None).await);
    }
    assert!(
        send(store, &bay.id, &cn, &a1, Some(4)).await,
        "4th agent round under cap 4"
    );

    // A cap with a given `suppressed` the store must override.
    let co = new_group(store, &bay.id, "c_override", &members, 1).await;
    let mut m = message(&co, &a1, "hi", Some(2));
    m.message.routing.suppressed = true;
    let first = store.append(&bay.id, m, a1.kind).await.unwrap();
    assert!(!first.message.routing.suppressed, "1st round under cap 2");

    // The log carries the same verdicts as the append results.
    let (records, _) = read(store, &bay.id, &start, 1000).await;
    let logged: Vec<bool> = records
        .iter()
        .filter_map(|r| match &r.event {
            LogEvent::Message {
                conversation,
                message,
            } if conversation.id == c5.id => Some(message.routing.suppressed),
            _ => None,
        })
        .collect();
    assert_eq!(
        logged,
        [false, false, false, false, true, true, true, false, false]
    );
}

async fn concurrent_appends_count_rounds_exactly(store: Arc<dyn Store>) {
    let bay = new_bay(&*store).await;
    let (a1, _) = new_participant(&*store, &bay.id, "p_a1", ParticipantKind::Agent).await;
    let (a2, _) = new_participant(&*store, &bay.id, "p_a2", ParticipantKind::Agent).await;
    let c = new_group(
        &*store,
        &bay.id,
        "c_race",
        &[(&a1, Role::Member), (&a2, Role::Member)],
        5,
    )
    .await;
    const PER_TASK: usize = 25;
    let tasks: Vec<_> = [a1.clone(), a2.clone()]
        .into_iter()
        .map(|sender| {
            let store = store.clone();
            let bay = bay.id.clone();
            let c = c.clone();
            tokio::spawn(async move {
                let mut out = Vec::new();
                for i in 0..PER_TASK {
                    let m = message(&c, &sender, &format!("{} {i}", sender.id), Some(5));
                    out.push(store.append(&bay, m, sender.kind).await.unwrap());
                }
                out
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let suppressed = all.iter().filter(|a| a.message.routing.suppressed).count();
    assert_eq!(
        suppressed,
        2 * PER_TASK - 4,
        "rounds 5..=50 are suppressed, exactly"
    );

    // History order is the order the counter saw: 4 free rounds, then capped.
    let (history, more) = store
        .messages_before(&bay.id, &c.id, None, 1000)
        .await
        .unwrap();
    assert!(!more);
    assert_eq!(history.len(), 2 * PER_TASK);
    assert!(history
        .windows(2)
        .all(|w| w[0].created_at < w[1].created_at));
    let flags: Vec<bool> = history.iter().map(|m| m.routing.suppressed).collect();
    assert!(
        flags[..4].iter().all(|s| !s) && flags[4..].iter().all(|s| *s),
        "{flags:?}"
    );
    // And the log order matches the history order.
    let mut by_entry = all.clone();
    by_entry.sort_by_key(|a| a.entry);
    assert_eq!(
        by_entry
            .iter()
            .map(|a| a.message.id.clone())
            .collect::<Vec<_>>(),
        history.iter().map(|m| m.id.clone()).collect::<Vec<_>>()
    );
}

async fn log_read_through_expired_and_epoch(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let h0 = head(store, &bay.id).await;
    assert_eq!(h0.entry, EntryId::ZERO, "a new Bay's log is empty");
    assert_eq!(head(store, &bay.id).await, h0, "the epoch is stable");
    assert_eq!(read(store, &bay.id, &h0, 10).await, (vec![], EntryId::ZERO));

    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(control(store, &bay.id).await);
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    let h5 = head(store, &bay.id).await;
    assert_eq!(h5, at(&h0, ids[4]));

    let ids_of = |r: &[Arc<LogRecord>]| r.iter().map(|r| r.id).collect::<Vec<_>>();
    // Full pages end at their last entry; a short page reaches the head.
    let (r, t) = read(store, &bay.id, &h0, 2).await;
    assert_eq!((ids_of(&r), t), (ids[0..2].to_vec(), ids[1]));
    let (r, t) = read(store, &bay.id, &at(&h0, t), 2).await;
    assert_eq!((ids_of(&r), t), (ids[2..4].to_vec(), ids[3]));
    let (r, t) = read(store, &bay.id, &at(&h0, t), 2).await;
    assert_eq!((ids_of(&r), t), (ids[4..5].to_vec(), ids[4]));
    let (r, t) = read(store, &bay.id, &at(&h0, t), 2).await;
    assert_eq!((ids_of(&r), t), (vec![], ids[4]));
    let (r, t) = read(store, &bay.id, &h0, usize::MAX).await;
    assert_eq!((ids_of(&r), t), (ids.clone(), ids[4]), "no practical limit");
    let (r, t) = read(store, &bay.id, &at(&h0, ids[2]), 10).await;
    assert_eq!((ids_of(&r), t), (ids[3..5].to_vec(), ids[4]));
    // Beyond the head, or from another incarnation of the log.
    assert!(is_expired(
        store
            .read_log(&bay.id, &at(&h0, ids[4].next()), 10, None)
            .await
            .unwrap()
    ));
    assert!(is_expired(
        store
            .read_log(
                &bay.id,
                &at(&h0, EntryId::new(ids[4].ms + 60_000, 0)),
                10,
                None
            )
            .await
            .unwrap()
    ));
    let foreign = LogPosition {
        epoch: Epoch("zzzzzz".into()),
        entry: ids[1],
    };
    assert!(matches!(
        store.read_log(&bay.id, &foreign, 10, None).await.unwrap(),
        Replay::EpochChanged
    ));
    assert!(matches!(
        store
            .read_log(&bay.id, &foreign, 10, Some(Duration::from_secs(2)))
            .await
            .unwrap(),
        Replay::EpochChanged
    ));

    // Logs are per Bay.
    let other = new_bay(store).await;
    let ho = head(store, &other.id).await;
    assert_eq!(ho.entry, EntryId::ZERO);
    assert_ne!(ho.epoch, h0.epoch);
    assert!(matches!(
        store.read_log(&other.id, &h5, 10, None).await.unwrap(),
        Replay::EpochChanged
    ));
}

async fn control_entries_are_logged(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let start = head(store, &bay.id).await;
    let event = LogEvent::CredentialRevoked {
        participant: ParticipantId("p_1".into()),
        token: TokenId("0123456789abcdef".into()),
    };
    let id = store.append_control(&bay.id, event.clone()).await.unwrap();
    let (records, through) = read(store, &bay.id, &start, 10).await;
    assert_eq!(
        records.iter().map(|r| (**r).clone()).collect::<Vec<_>>(),
        vec![LogRecord::new(id, event)]
    );
    assert_eq!(through, id);
}

async fn trimming_by_age_expires_cursors(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let h0 = head(store, &bay.id).await;
    let e1 = control(store, &bay.id).await;
    let e2 = control(store, &bay.id).await;
    assert_eq!(read(store, &bay.id, &h0, 10).await.0.len(), 2);
    tokio::time::sleep(Duration::from_millis(450)).await;
    // This append trims e1 and e2 (older than the 300 ms window).
    let e3 = control(store, &bay.id).await;
    assert!(
        is_expired(store.read_log(&bay.id, &h0, 10, None).await.unwrap()),
        "unseen entries were trimmed"
    );
    assert!(is_expired(
        store
            .read_log(&bay.id, &at(&h0, e1), 10, None)
            .await
            .unwrap()
    ));
    assert!(is_expired(
        store
            .read_log(&bay.id, &h0, 10, Some(Duration::from_secs(1)))
            .await
            .unwrap()
    ));
    // A reader past everything trimmed lost nothing: not expired.
    let (r, t) = read(store, &bay.id, &at(&h0, e2), 10).await;
    assert_eq!(
        (r.iter().map(|r| r.id).collect::<Vec<_>>(), t),
        (vec![e3], e3)
    );
    assert_eq!(read(store, &bay.id, &at(&h0, e3), 10).await, (vec![], e3));
}

async fn trimming_by_count_expires_cursors(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let h0 = head(store, &bay.id).await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(control(store, &bay.id).await);
    }
    assert!(is_expired(
        store.read_log(&bay.id, &h0, 10, None).await.unwrap()
    ));
    assert!(is_expired(
        store
            .read_log(&bay.id, &at(&h0, ids[0]), 10, None)
            .await
            .unwrap()
    ));
    let (r, t) = read(store, &bay.id, &at(&h0, ids[1]), 10).await;
    assert_eq!(
        (r.iter().map(|r| r.id).collect::<Vec<_>>(), t),
        (ids[2..].to_vec(), ids[4])
    );
}

async fn blocking_read_wakes_on_append(store: Arc<dyn Store>) {
    let bay = new_bay(&*store).await;
    control(&*store, &bay.id).await;
    let h = head(&*store, &bay.id).await;
    let reader = {
        let store = store.clone();
        let bay = bay.id.clone();
        let h = h.clone();
        tokio::spawn(async move {
            let t0 = Instant::now();
            let r = store
                .read_log(&bay, &h, 10, Some(Duration::from_secs(10)))
                .await;
            (r, t0.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let e = control(&*store, &bay.id).await;
    let (r, waited) = tokio::time::timeout(Duration::from_secs(5), reader)
        .await
        .expect("the blocked read woke up")
        .unwrap();
    match r.unwrap() {
        Replay::Records { records, through } => {
            assert_eq!(records.iter().map(|r| r.id).collect::<Vec<_>>(), vec![e]);
            assert_eq!(through, e);
        }
        other => panic!("expected the new entry, got {other:?}"),
    }
    assert!(
        waited >= Duration::from_millis(200),
        "it did block: {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(5),
        "woke on the append: {waited:?}"
    );

    // With entries already there, a blocking read answers at once.
    let t0 = Instant::now();
    let (records, _) = match store
        .read_log(&bay.id, &h, 10, Some(Duration::from_secs(10)))
        .await
        .unwrap()
    {
        Replay::Records { records, through } => (records, through),
        other => panic!("{other:?}"),
    };
    assert_eq!(records.len(), 1);
    assert!(t0.elapsed() < Duration::from_secs(2));

    // Several blocked readers all wake.
    let h2 = head(&*store, &bay.id).await;
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let store = store.clone();
            let bay = bay.id.clone();
            let h2 = h2.clone();
            tokio::spawn(async move {
                store
                    .read_log(&bay, &h2, 10, Some(Duration::from_secs(10)))
                    .await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let e2 = control(&*store, &bay.id).await;
    for r in readers {
        let r = tokio::time::timeout(Duration::from_secs(5), r)
            .await
            .expect("woke")
            .unwrap();
        assert!(
            matches!(r.unwrap(), Replay::Records { ref records, .. } if records.len() == 1 && records[0].id == e2)
        );
    }
}

async fn blocking_read_times_out_empty(store: Arc<dyn Store>) {
    let bay = new_bay(&*store).await;
    control(&*store, &bay.id).await;
    let h = head(&*store, &bay.id).await;
    let t0 = Instant::now();
    let r = store
        .read_log(&bay.id, &h, 10, Some(Duration::from_millis(400)))
        .await
        .unwrap();
    let waited = t0.elapsed();
    match r {
        Replay::Records { records, through } => {
            assert!(records.is_empty());
            assert_eq!(through, h.entry);
        }
        other => panic!("{other:?}"),
    }
    assert!(waited >= Duration::from_millis(350), "{waited:?}");
    assert!(waited < Duration::from_secs(3), "{waited:?}");
    // A fresh Bay (no log yet) blocks and times out the same way.
    let fresh = new_bay(&*store).await;
    let hf = head(&*store, &fresh.id).await;
    let r = store
        .read_log(&fresh.id, &hf, 10, Some(Duration::from_millis(200)))
        .await
        .unwrap();
    assert!(
        matches!(r, Replay::Records { ref records, through } if records.is_empty() && through == EntryId::ZERO)
    );
}

async fn revisions_refuse_stale_appends(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (u, _) = new_participant(store, &bay.id, "p_u", ParticipantKind::User).await;
    let (a, _) = new_participant(store, &bay.id, "p_a", ParticipantKind::Agent).await;
    let c = new_group(store, &bay.id, "c_rev", &[(&u, Role::Member)], 2).await;
    let r1 = store
        .conversation_revisioned(&bay.id, &c.id)
        .await
        .unwrap()
        .expect("exists");
    assert_eq!(r1.value, c);
    let mut m = message(&c, &u, "at r1", None);
    m.revision = r1.revision;
    let ok = store.append_message(&bay.id, m, u.kind).await.unwrap();
    assert!(matches!(ok, AppendOutcome::Appended(_)), "{ok:?}");

    // Any change moves the revision on; an append routed before it is refused.
    store
        .upsert_member(
            &bay.id,
            &c.id,
            Member {
                participant: a.id.clone(),
                role: Role::Member,
            },
        )
        .await
        .unwrap();
    let r2 = store
        .conversation_revisioned(&bay.id, &c.id)
        .await
        .unwrap()
        .expect("exists");
    assert_ne!(r2.revision, r1.revision);
    assert!(r2.value.member(&a.id).is_some());
    let before = head(store, &bay.id).await;
    let mut stale = message(&c, &u, "at r1 again", None);
    stale.revision = r1.revision;
    let refused = store.append_message(&bay.id, stale, u.kind).await.unwrap();
    assert!(matches!(refused, AppendOutcome::Stale), "{refused:?}");
    assert_eq!(
        head(store, &bay.id).await,
        before,
        "a stale append logs nothing"
    );
    let (history, _) = store
        .messages_before(&bay.id, &c.id, None, 10)
        .await
        .unwrap();
    assert_eq!(history.len(), 1, "a stale append stores nothing");
    // The round counter did not move either: the next agent message is round 1 of 2.
    let first = store
        .append(&bay.id, message(&c, &a, "agent 1", Some(2)), a.kind)
        .await
        .unwrap();
    assert!(!first.message.routing.suppressed);

    // Unknown conversations have no revision.
    assert_eq!(
        store
            .conversation_revisioned(&bay.id, &ConversationId("nope".into()))
            .await
            .unwrap(),
        None
    );
}

async fn roster_changes_name_the_members_before_and_after(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (ana, _) = new_participant(store, &bay.id, "ana", ParticipantKind::User).await;
    let (scout, _) = new_participant(store, &bay.id, "scout", ParticipantKind::Agent).await;
    let (rex, _) = new_participant(store, &bay.id, "rex", ParticipantKind::Agent).await;
    let start = head(store, &bay.id).await;
    let g = new_group(
        store,
        &bay.id,
        "g",
        &[(&ana, Role::Member), (&scout, Role::Member)],
        2,
    )
    .await;
    let after_create = head(store, &bay.id).await;
    control(store, &bay.id).await;
    store
        .upsert_member(
            &bay.id,
            &g.id,
            Member {
                participant: rex.id.clone(),
                role: Role::Member,
            },
        )
        .await
        .unwrap();
    let added = head(store, &bay.id).await;
    // Removing a non-member changes nothing and logs nothing.
    assert_eq!(
        store
            .remove_member(&bay.id, &g.id, &ParticipantId("ghost".into()))
            .await
            .unwrap(),
        Updated::NotFound
    );
    store
        .remove_member(&bay.id, &g.id, &scout.id)
        .await
        .unwrap();
    let removed = head(store, &bay.id).await;
    let ids = |v: &[&str]| {
        v.iter()
            .map(|p| ParticipantId((*p).into()))
            .collect::<Vec<_>>()
    };
    let all = store.roster_changes(&bay.id, &start).await.unwrap();
    assert_eq!(
        all,
        vec![
            RosterChange {
                at: after_create.entry,
                conversation: g.id.clone(),
                before: vec![],
                after: ids(&["ana", "scout"]),
            },
            RosterChange {
                at: added.entry,
                conversation: g.id.clone(),
                before: ids(&["ana", "scout"]),
                after: ids(&["ana", "scout", "rex"]),
            },
            RosterChange {
                at: removed.entry,
                conversation: g.id.clone(),
                before: ids(&["ana", "scout", "rex"]),
                after: ids(&["ana", "rex"]),
            },
        ]
    );
    // Each change's id is its `Roster` entry in the log.
    let (records, _) = read(store, &bay.id, &start, 100).await;
    let roster_ids: Vec<EntryId> = records
        .iter()
        .filter(|r| matches!(r.event, LogEvent::Roster { .. }))
        .map(|r| r.id)
        .collect();
    assert_eq!(roster_ids, all.iter().map(|c| c.at).collect::<Vec<_>>());
    // Strictly after the position given.
    assert_eq!(
        store.roster_changes(&bay.id, &added).await.unwrap(),
        all[2..].to_vec()
    );
    assert_eq!(
        store.roster_changes(&bay.id, &removed).await.unwrap(),
        vec![]
    );
    // A policy change is a roster change too (its revision moves).
    store
        .update_conversation(&bay.id, &g.id, Some(Some("renamed".into())), None)
        .await
        .unwrap();
    let last = store.roster_changes(&bay.id, &removed).await.unwrap();
    assert_eq!(last.len(), 1);
    assert_eq!(
        (last[0].before.clone(), last[0].after.clone()),
        (ids(&["ana", "rex"]), ids(&["ana", "rex"]))
    );
}

async fn roster_changes_are_trimmed_with_the_log(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (ana, _) = new_participant(store, &bay.id, "ana", ParticipantKind::User).await;
    let start = head(store, &bay.id).await;
    new_group(store, &bay.id, "g1", &[(&ana, Role::Member)], 2).await;
    let g2 = new_group(store, &bay.id, "g2", &[(&ana, Role::Member)], 2).await;
    let g2_at = head(store, &bay.id).await.entry;
    // Two more entries: with a cap of 2 entries, both roster entries go.
    control(store, &bay.id).await;
    assert_eq!(
        store
            .roster_changes(&bay.id, &start)
            .await
            .unwrap()
            .iter()
            .map(|c| c.at)
            .collect::<Vec<_>>(),
        vec![g2_at],
        "the first roster entry was trimmed"
    );
    control(store, &bay.id).await;
    assert_eq!(store.roster_changes(&bay.id, &start).await.unwrap(), vec![]);
    let _ = g2;
}

async fn openings_travel_apart_from_the_log(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    assert_eq!(store.openings_head(&bay.id).await.unwrap(), EntryId::ZERO);
    let log_before = head(store, &bay.id).await;
    let (t, s1, s2) = (
        TokenId("0123456789abcdef".into()),
        SessionId("s_1".into()),
        SessionId("s_2".into()),
    );
    let o1 = store.open_session(&bay.id, &t, &s1).await.unwrap();
    let o2 = store.open_session(&bay.id, &t, &s2).await.unwrap();
    assert!(o2 > o1, "ids increase");
    assert_eq!(store.openings_head(&bay.id).await.unwrap(), o2);
    assert_eq!(
        store
            .read_openings(&bay.id, EntryId::ZERO, 10, None)
            .await
            .unwrap(),
        vec![
            Opening {
                id: o1,
                token: t.clone(),
                session: s1
            },
            Opening {
                id: o2,
                token: t.clone(),
                session: s2.clone()
            },
        ]
    );
    assert_eq!(
        store.read_openings(&bay.id, o1, 10, None).await.unwrap(),
        vec![Opening {
            id: o2,
            token: t,
            session: s2
        }]
    );
    assert_eq!(
        store.read_openings(&bay.id, o2, 10, None).await.unwrap(),
        vec![]
    );
    // Replays never see them: the log did not move.
    assert_eq!(head(store, &bay.id).await, log_before);
    assert_eq!(read(store, &bay.id, &log_before, 10).await.0.len(), 0);
}

async fn a_blocked_openings_read_wakes_on_an_opening(store: Arc<dyn Store>) {
    let bay = new_bay(&*store).await;
    let after = store.openings_head(&bay.id).await.unwrap();
    let reader = {
        let (store, bay) = (store.clone(), bay.id.clone());
        tokio::spawn(async move {
            store
                .read_openings(&bay, after, 10, Some(Duration::from_secs(10)))
                .await
                .unwrap()
        })
    };
    // Let the reader block first; a late start still passes (it reads the opening).
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t0 = Instant::now();
    let id = store
        .open_session(
            &bay.id,
            &TokenId("0123456789abcdef".into()),
            &SessionId("s".into()),
        )
        .await
        .unwrap();
    let got = reader.await.unwrap();
    assert_eq!(got.iter().map(|o| o.id).collect::<Vec<_>>(), vec![id]);
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "woke on the opening, not the timeout"
    );
}

// ---- the message lifecycle: idempotency, seq, changes, read markers, polls ----

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

fn duplicate(outcome: AppendOutcome) -> StoredMessage {
    match outcome {
        AppendOutcome::Duplicate(m) => *m,
        other => panic!("expected Duplicate, got {other:?}"),
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

async fn read_state(
    store: &dyn Store,
    bay: &BayId,
    who: &ParticipantId,
    c: &ConversationId,
) -> ReadState {
    let mut states = store
        .read_states(bay, who, std::slice::from_ref(c))
        .await
        .unwrap();
    assert_eq!(states.len(), 1);
    states.remove(0)
}

fn state(last_read: Option<&StoredMessage>, unread: u64) -> ReadState {
    ReadState {
        last_read: last_read.map(|m| m.id.clone()),
        unread,
    }
}

async fn idempotent_appends_store_once(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (ana, _) = new_participant(store, &bay.id, "ana", ParticipantKind::User).await;
    let c = new_group(store, &bay.id, "c_idem", &[(&ana, Role::Member)], 5).await;
    let start = head(store, &bay.id).await;

    let request = keyed(message(&c, &ana, "hello once", None), "key-1", "fp-1");
    let first = appended(send(store, &bay.id, request.clone(), ana.kind).await);
    assert_eq!(first.message.id, request.message.id);
    assert_eq!(first.message.content, "hello once");
    assert_eq!(first.message.seq, 1);

    // A retry mints a new message id; the store compares only the key and
    // the fingerprint, so even another body gets the FIRST message back.
    let retry = keyed(message(&c, &ana, "a retry's body", None), "key-1", "fp-1");
    assert_ne!(retry.message.id, first.message.id);
    let before_retry = head(store, &bay.id).await;
    let dup = duplicate(send(store, &bay.id, retry, ana.kind).await);
    assert_eq!(dup, first.message, "the first message, exactly as stored");
    assert_eq!(
        (dup.id.clone(), dup.content.as_str(), dup.seq),
        (first.message.id.clone(), "hello once", 1)
    );
    assert_eq!(
        head(store, &bay.id).await,
        before_retry,
        "a retry logs nothing"
    );
    assert_eq!(
        history(store, &bay.id, &c.id).await,
        vec![first.message.clone()]
    );
    assert_eq!(
        logged(store, &bay.id, &start).await,
        vec![(
            first.entry,
            LogEvent::Message {
                conversation: c.reference(),
                message: first.message.clone(),
            }
        )],
        "exactly one Message entry"
    );

    // The same key for another request: refused, nothing stored or logged.
    let reused = keyed(message(&c, &ana, "something else", None), "key-1", "fp-2");
    let outcome = send(store, &bay.id, reused, ana.kind).await;
    assert!(matches!(outcome, AppendOutcome::KeyReused), "{outcome:?}");
    assert_eq!(head(store, &bay.id).await, before_retry);
    assert_eq!(
        history(store, &bay.id, &c.id).await,
        vec![first.message.clone()]
    );

    // Another key (same fingerprint): another send.
    let other = keyed(message(&c, &ana, "hello twice", None), "key-2", "fp-1");
    let other_id = other.message.id.clone();
    let second = appended(send(store, &bay.id, other, ana.kind).await);
    assert_eq!(
        (second.message.id.clone(), second.message.seq),
        (other_id, 2)
    );
    assert_eq!(
        history(store, &bay.id, &c.id).await,
        vec![first.message.clone(), second.message.clone()]
    );

    // Keys are per Bay: the same key in another Bay is that Bay's own send.
    let elsewhere = new_bay(store).await;
    let (ana2, _) = new_participant(store, &elsewhere.id, "ana", ParticipantKind::User).await;
    let c2 = new_group(store, &elsewhere.id, "c_idem", &[(&ana2, Role::Member)], 5).await;
    let there = keyed(message(&c2, &ana2, "hello once", None), "key-1", "fp-1");
    let there_id = there.message.id.clone();
    let there = appended(send(store, &elsewhere.id, there, ana2.kind).await);
    assert_eq!(there.message.id, there_id);

    // After the first message was deleted, a retry gets its tombstone.
    let at = Utc::now();
    let mut tomb = first.message.clone();
    tomb.tombstone(at);
    tomb.version = first.message.version + 1;
    changed(
        change(
            store,
            &bay.id,
            &c,
            tomb.clone(),
            Change::Deleted {
                message: tomb.id.clone(),
                at,
                by: ana.id.clone(),
            },
        )
        .await,
    );
    let before_late_retry = head(store, &bay.id).await;
    let late = keyed(message(&c, &ana, "hello once", None), "key-1", "fp-1");
    let dup = duplicate(send(store, &bay.id, late, ana.kind).await);
    assert!(dup.is_deleted(), "{dup:?}");
    assert_eq!(dup, tomb);
    assert_eq!(dup.content, "");
    assert_eq!(head(store, &bay.id).await, before_late_retry);
    // And the key still refuses another request.
    let reused = keyed(message(&c, &ana, "hello once", None), "key-1", "fp-2");
    let outcome = send(store, &bay.id, reused, ana.kind).await;
    assert!(matches!(outcome, AppendOutcome::KeyReused), "{outcome:?}");
    assert_eq!(
        history(store, &bay.id, &c.id).await,
        vec![tomb, second.message]
    );
}

async fn concurrent_idempotent_appends_store_one_and_count_one_round(store: Arc<dyn Store>) {
    const N: usize = 16;
    let bay = new_bay(&*store).await;
    let (rex, _) = new_participant(&*store, &bay.id, "rex", ParticipantKind::Agent).await;
    let c = new_group(&*store, &bay.id, "c_idem_race", &[(&rex, Role::Member)], 3).await;
    let start = head(&*store, &bay.id).await;
    let revision = revision_of(&*store, &bay.id, &c.id).await;
    let gate = Arc::new(tokio::sync::Barrier::new(N));
    let tasks: Vec<_> = (0..N)
        .map(|i| {
            let (store, bay, c, rex, gate) = (
                store.clone(),
                bay.id.clone(),
                c.clone(),
                rex.clone(),
                gate.clone(),
            );
            tokio::spawn(async move {
                let mut m = keyed(
                    message(&c, &rex, &format!("attempt {i}"), Some(3)),
                    "race-key",
                    "race-fp",
                );
                m.revision = revision;
                let id = m.message.id.clone();
                gate.wait().await;
                (id, store.append_message(&bay, m, rex.kind).await.unwrap())
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.push(t.await.unwrap());
    }
    let mut winners = Vec::new();
    let mut duplicates = Vec::new();
    for (id, outcome) in outcomes {
        match outcome {
            AppendOutcome::Appended(a) => {
                assert_eq!(a.message.id, id);
                winners.push(*a);
            }
            AppendOutcome::Duplicate(m) => duplicates.push(*m),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one append stored");
    assert_eq!(duplicates.len(), N - 1);
    let first = winners.remove(0);
    assert!(
        duplicates.iter().all(|d| *d == first.message),
        "every other attempt got the stored message"
    );
    assert_eq!(first.message.seq, 1);
    assert!(!first.message.routing.suppressed, "round 1 of cap 3");
    assert_eq!(
        history(&*store, &bay.id, &c.id).await,
        vec![first.message.clone()]
    );
    assert_eq!(
        logged(&*store, &bay.id, &start)
            .await
            .into_iter()
            .map(|(id, _)| id)
            .collect::<Vec<_>>(),
        vec![first.entry],
        "one entry logged"
    );
    // The round counter moved by exactly one: the next agent message is
    // round 2 of 3 (free), the one after it round 3 (capped).
    let next = store
        .append(&bay.id, message(&c, &rex, "round 2", Some(3)), rex.kind)
        .await
        .unwrap();
    assert!(!next.message.routing.suppressed, "round 2 of 3");
    assert_eq!(next.message.seq, 2);
    let capped = store
        .append(&bay.id, message(&c, &rex, "round 3", Some(3)), rex.kind)
        .await
        .unwrap();
    assert!(capped.message.routing.suppressed, "round 3 of 3");
    assert_eq!(capped.message.seq, 3);
}

async fn idempotency_keys_expire_with_the_replay_window(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (ana, _) = new_participant(store, &bay.id, "ana", ParticipantKind::User).await;
    let c = new_group(store, &bay.id, "c_idem_ttl", &[(&ana, Role::Member)], 5).await;
    let first = appended(
        send(
            store,
            &bay.id,
            keyed(message(&c, &ana, "once", None), "k", "fp"),
            ana.kind,
        )
        .await,
    );
    let dup = duplicate(
        send(
            store,
            &bay.id,
            keyed(message(&c, &ana, "once", None), "k", "fp"),
            ana.kind,
        )
        .await,
    );
    assert_eq!(dup, first.message);
    // Past the 1 s window the key is forgotten: the same request is a new send.
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    let again = keyed(message(&c, &ana, "once", None), "k", "fp");
    let again_id = again.message.id.clone();
    let again = appended(send(store, &bay.id, again, ana.kind).await);
    assert_eq!((again.message.id, again.message.seq), (again_id, 2));
}

async fn seq_counts_messages_from_one(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (ana, _) = new_participant(store, &bay.id, "ana", ParticipantKind::User).await;
    let (rex, _) = new_participant(store, &bay.id, "rex", ParticipantKind::Agent).await;
    let (bob, _) = new_participant(store, &bay.id, "bob", ParticipantKind::User).await;
    let members = [(&ana, Role::Member), (&rex, Role::Member)];
    let c1 = new_group(store, &bay.id, "c_seq1", &members, 5).await;
    let c2 = new_group(store, &bay.id, "c_seq2", &members, 5).await;
    let start = head(store, &bay.id).await;

    let mut sent = Vec::new();
    for (i, sender) in [&ana, &rex, &ana].into_iter().enumerate() {
        let a = store
            .append(
                &bay.id,
                message(&c1, sender, &format!("m{i}"), None),
                sender.kind,
            )
            .await
            .unwrap();
        sent.push(a.message);
    }
    assert_eq!(sent.iter().map(|m| m.seq).collect::<Vec<_>>(), [1, 2, 3]);
    // Each conversation counts on its own.
    let other = store
        .append(&bay.id, message(&c2, &ana, "elsewhere", None), ana.kind)
        .await
        .unwrap();
    assert_eq!(other.message.seq, 1);
    // Refused appends take no seq: a stale one, and a reused key.
    let stale_revision = revision_of(store, &bay.id, &c1.id).await;
    store
        .upsert_member(
            &bay.id,
            &c1.id,
            Member {
                participant: bob.id.clone(),
                role: Role::Member,
            },
        )
        .await
        .unwrap();
    let mut stale = message(&c1, &ana, "stale", None);
    stale.revision = stale_revision;
    let outcome = store
        .append_message(&bay.id, stale, ana.kind)
        .await
        .unwrap();
    assert!(matches!(outcome, AppendOutcome::Stale), "{outcome:?}");
    let keyed_first = appended(
        send(
            store,
            &bay.id,
            keyed(message(&c1, &rex, "m3", None), "k", "fp-a"),
            rex.kind,
        )
        .await,
    );
    assert_eq!(keyed_first.message.seq, 4);
    sent.push(keyed_first.message);
    let reused = send(
        store,
        &bay.id,
        keyed(message(&c1, &rex, "m3 again", None), "k", "fp-b"),
        rex.kind,
    )
    .await;
    assert!(matches!(reused, AppendOutcome::KeyReused), "{reused:?}");
    // A seq given by the caller is the store's to stamp.
    let mut given = message(&c1, &ana, "m4", None);
    given.message.seq = 99;
    let fifth = store.append(&bay.id, given, ana.kind).await.unwrap();
    assert_eq!(fifth.message.seq, 5);
    sent.push(fifth.message);

    // Every read carries the same seqs.
    let seqs = |ms: &[StoredMessage]| ms.iter().map(|m| m.seq).collect::<Vec<_>>();
    assert_eq!(
        seqs(&history(store, &bay.id, &c1.id).await),
        [1, 2, 3, 4, 5]
    );
    assert_eq!(history(store, &bay.id, &c1.id).await, sent);
    assert_eq!(
        seqs(
            &store
                .messages_since(&bay.id, &c1.id, sent[0].created_at, 10)
                .await
                .unwrap()
        ),
        [2, 3, 4, 5]
    );
    assert_eq!(
        seqs(
            &store
                .messages_before(&bay.id, &c1.id, Some(&sent[3].id), 10)
                .await
                .unwrap()
                .0
        ),
        [1, 2, 3]
    );
    for m in &sent {
        assert_eq!(
            store
                .message(&bay.id, &c1.id, &m.id)
                .await
                .unwrap()
                .map(|m| m.seq),
            Some(m.seq)
        );
    }
    assert_eq!(seqs(&history(store, &bay.id, &c2.id).await), [1]);
    let logged_seqs: Vec<(ConversationId, u64)> = logged(store, &bay.id, &start)
        .await
        .into_iter()
        .filter_map(|(_, e)| match e {
            LogEvent::Message { message, .. } => Some((message.conversation_id, message.seq)),
            _ => None,
        })
        .collect();
    assert_eq!(
        logged_seqs,
        vec![
            (c1.id.clone(), 1),
            (c1.id.clone(), 2),
            (c1.id.clone(), 3),
            (c2.id.clone(), 1),
            (c1.id.clone(), 4),
            (c1.id.clone(), 5),
        ]
    );
}

async fn changes_replace_the_message_and_log_the_change(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (ana, _) = new_participant(store, &bay.id, "ana", ParticipantKind::User).await;
    let (rex, _) = new_participant(store, &bay.id, "rex", ParticipantKind::Agent).await;
    let (bob, _) = new_participant(store, &bay.id, "bob", ParticipantKind::User).await;
    let c = new_group(
        store,
        &bay.id,
        "c_change",
        &[(&ana, Role::Admin), (&rex, Role::Member)],
        5,
    )
    .await;
    let mut sent = Vec::new();
    for (i, sender) in [&ana, &rex, &ana].into_iter().enumerate() {
        let a = store
            .append(
                &bay.id,
                message(&c, sender, &format!("message {i}"), None),
                sender.kind,
            )
            .await
            .unwrap();
        sent.push(a.message);
    }
    let (m1, m2, m3) = (sent[0].clone(), sent[1].clone(), sent[2].clone());
    assert_eq!(m2.version, 0);
    let all_since = m1.created_at - chrono::Duration::days(1);

    // An edit at the stored version + 1.
    let before = head(store, &bay.id).await;
    let mut edited = m2.clone();
    edited.content = "message 1, edited".into();
    edited.edited_at = Some(Utc::now());
    edited.version = m2.version + 1;
    let edit = Change::Edited {
        message: edited.clone(),
    };
    let entry = changed(change(store, &bay.id, &c, edited.clone(), edit.clone()).await);
    assert_eq!(head(store, &bay.id).await.entry, entry);
    assert_eq!(
        logged(store, &bay.id, &before).await,
        vec![(
            entry,
            LogEvent::Change {
                conversation: c.reference(),
                change: edit,
            }
        )]
    );
    assert_eq!(
        store.message(&bay.id, &c.id, &m2.id).await.unwrap(),
        Some(edited.clone())
    );
    let now = vec![m1.clone(), edited.clone(), m3.clone()];
    assert_eq!(history(store, &bay.id, &c.id).await, now);
    assert_eq!(
        store
            .messages_since(&bay.id, &c.id, all_since, 10)
            .await
            .unwrap(),
        now
    );
    assert_eq!(
        store
            .messages_before(&bay.id, &c.id, Some(&m3.id), 10)
            .await
            .unwrap(),
        (vec![m1.clone(), edited.clone()], false)
    );

    // A change made from the old version (or skipping one): Conflict, nothing logged.
    let after_edit = head(store, &bay.id).await;
    for version in [edited.version, edited.version + 2] {
        let mut late = m2.clone();
        late.content = format!("lost edit at version {version}");
        late.version = version;
        assert_eq!(
            change(
                store,
                &bay.id,
                &c,
                late.clone(),
                Change::Edited { message: late }
            )
            .await,
            Changed::Conflict,
            "version {version} over stored {}",
            edited.version
        );
    }
    assert_eq!(head(store, &bay.id).await, after_edit);
    assert_eq!(history(store, &bay.id, &c.id).await, now);

    // A delete: the tombstone replaces the message.
    let at = Utc::now();
    let mut tomb = edited.clone();
    tomb.tombstone(at);
    tomb.version = edited.version + 1;
    let deletion = Change::Deleted {
        message: m2.id.clone(),
        at,
        by: ana.id.clone(),
    };
    let entry = changed(change(store, &bay.id, &c, tomb.clone(), deletion.clone()).await);
    assert_eq!(
        logged(store, &bay.id, &after_edit).await,
        vec![(
            entry,
            LogEvent::Change {
                conversation: c.reference(),
                change: deletion,
            }
        )]
    );
    let got = store
        .message(&bay.id, &c.id, &m2.id)
        .await
        .unwrap()
        .expect("a tombstone stays in history");
    assert!(got.is_deleted());
    assert_eq!((got.content.as_str(), got.deleted_at), ("", Some(at)));
    assert_eq!((got.seq, got.version), (m2.seq, 2));
    assert_eq!(got, tomb);
    let now = vec![m1.clone(), tomb.clone(), m3.clone()];
    assert_eq!(history(store, &bay.id, &c.id).await, now);
    assert_eq!(
        store
            .messages_since(&bay.id, &c.id, all_since, 10)
            .await
            .unwrap(),
        now
    );

    // Authorized at a revision the conversation has moved past: Stale.
    let old_revision = revision_of(store, &bay.id, &c.id).await;
    store
        .upsert_member(
            &bay.id,
            &c.id,
            Member {
                participant: bob.id.clone(),
                role: Role::Member,
            },
        )
        .await
        .unwrap();
    let after_roster = head(store, &bay.id).await;
    let mut m3_edited = m3.clone();
    m3_edited.content = "message 2, edited".into();
    m3_edited.version = 1;
    let stale = MessageChange {
        conversation: c.reference(),
        revision: old_revision,
        message: m3_edited.clone(),
        change: Change::Edited {
            message: m3_edited.clone(),
        },
    };
    assert_eq!(
        store.change_message(&bay.id, stale.clone()).await.unwrap(),
        Changed::Stale
    );
    assert_eq!(head(store, &bay.id).await, after_roster, "nothing logged");
    assert_eq!(
        store.message(&bay.id, &c.id, &m3.id).await.unwrap(),
        Some(m3.clone())
    );
    // The same change at the current revision goes through.
    let current = MessageChange {
        revision: revision_of(store, &bay.id, &c.id).await,
        ..stale
    };
    changed(store.change_message(&bay.id, current).await.unwrap());
    assert_eq!(
        store.message(&bay.id, &c.id, &m3.id).await.unwrap(),
        Some(m3_edited.clone())
    );

    // Unknown message, a message of another conversation, an unknown
    // conversation: NotFound, nothing logged.
    let c2 = new_group(store, &bay.id, "c_change2", &[(&ana, Role::Admin)], 5).await;
    let foreign = store
        .append(&bay.id, message(&c2, &ana, "in c2", None), ana.kind)
        .await
        .unwrap()
        .message;
    let quiet = head(store, &bay.id).await;
    let mut ghost = m1.clone();
    ghost.id = MessageId("m_none".into());
    ghost.version = 1;
    assert_eq!(
        change(
            store,
            &bay.id,
            &c,
            ghost.clone(),
            Change::Edited {
                message: ghost.clone()
            }
        )
        .await,
        Changed::NotFound
    );
    let mut foreign_edit = foreign.clone();
    foreign_edit.version = 1;
    foreign_edit.content = "moved".into();
    assert_eq!(
        change(
            store,
            &bay.id,
            &c,
            foreign_edit.clone(),
            Change::Edited {
                message: foreign_edit
            }
        )
        .await,
        Changed::NotFound
    );
    let nowhere = ConversationRef {
        id: ConversationId("c_none".into()),
        ..c.reference()
    };
    let mut m1_edit = m1.clone();
    m1_edit.version = 1;
    assert_eq!(
        store
            .change_message(
                &bay.id,
                MessageChange {
                    conversation: nowhere,
                    revision: 0,
                    message: m1_edit.clone(),
                    change: Change::Edited { message: m1_edit },
                }
            )
            .await
            .unwrap(),
        Changed::NotFound
    );
    assert_eq!(head(store, &bay.id).await, quiet);
    assert_eq!(
        history(store, &bay.id, &c.id).await,
        vec![m1, tomb, m3_edited]
    );
    assert_eq!(history(store, &bay.id, &c2.id).await, vec![foreign]);
}

async fn read_markers_only_move_forward(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (ana, _) = new_participant(store, &bay.id, "ana", ParticipantKind::User).await;
    let (bob, _) = new_participant(store, &bay.id, "bob", ParticipantKind::User).await;
    let (rex, _) = new_participant(store, &bay.id, "rex", ParticipantKind::Agent).await;
    let g = new_group(
        store,
        &bay.id,
        "g",
        &[
            (&ana, Role::Member),
            (&bob, Role::Member),
            (&rex, Role::Member),
        ],
        5,
    )
    .await;
    let empty = new_group(store, &bay.id, "g_empty", &[(&bob, Role::Member)], 5).await;
    let g2 = new_group(
        store,
        &bay.id,
        "g2",
        &[(&ana, Role::Member), (&bob, Role::Member)],
        5,
    )
    .await;
    assert_eq!(
        read_state(store, &bay.id, &bob.id, &g.id).await,
        state(None, 0)
    );

    let post = |sender: &switchboard_actors::model::Participant, text: &str| {
        store.append(&bay.id, message(&g, sender, text, None), sender.kind)
    };
    let m1 = post(&ana, "one").await.unwrap().message;
    // Posting reads it: the poster's marker is its own message.
    assert_eq!(
        read_state(store, &bay.id, &ana.id, &g.id).await,
        state(Some(&m1), 0)
    );
    assert_eq!(
        read_state(store, &bay.id, &bob.id, &g.id).await,
        state(None, 1)
    );
    let m2 = post(&rex, "two").await.unwrap().message;
    let m3 = post(&ana, "three").await.unwrap().message;
    let m4 = post(&rex, "four").await.unwrap().message;
    assert_eq!(
        read_state(store, &bay.id, &bob.id, &g.id).await,
        state(None, 4)
    );
    assert_eq!(
        read_state(store, &bay.id, &ana.id, &g.id).await,
        state(Some(&m3), 1)
    );
    assert_eq!(
        read_state(store, &bay.id, &rex.id, &g.id).await,
        state(Some(&m4), 0)
    );

    // Forward: moved and logged.
    let before = head(store, &bay.id).await;
    let entry = store
        .mark_read(&bay.id, &g.reference(), &bob.id, &m2)
        .await
        .unwrap()
        .expect("the marker moved");
    assert_eq!(
        logged(store, &bay.id, &before).await,
        vec![(
            entry,
            LogEvent::Change {
                conversation: g.reference(),
                change: Change::Read {
                    participant: bob.id.clone(),
                    message: m2.id.clone(),
                },
            }
        )]
    );
    assert_eq!(
        read_state(store, &bay.id, &bob.id, &g.id).await,
        state(Some(&m2), 2)
    );

    // Back or in place: nothing moves, nothing is logged.
    let moved = head(store, &bay.id).await;
    for back in [&m1, &m2] {
        assert_eq!(
            store
                .mark_read(&bay.id, &g.reference(), &bob.id, back)
                .await
                .unwrap(),
            None,
            "{}",
            back.content
        );
    }
    assert_eq!(head(store, &bay.id).await, moved);
    assert_eq!(
        read_state(store, &bay.id, &bob.id, &g.id).await,
        state(Some(&m2), 2)
    );
    // Markers are per participant.
    assert_eq!(
        read_state(store, &bay.id, &ana.id, &g.id).await,
        state(Some(&m3), 1)
    );

    // Several conversations at once, in the order asked.
    let n1 = store
        .append(&bay.id, message(&g2, &ana, "g2 one", None), ana.kind)
        .await
        .unwrap()
        .message;
    assert_eq!(
        store
            .read_states(
                &bay.id,
                &bob.id,
                &[g2.id.clone(), empty.id.clone(), g.id.clone()]
            )
            .await
            .unwrap(),
        vec![state(None, 1), state(None, 0), state(Some(&m2), 2)]
    );
    assert_eq!(
        store
            .read_states(&bay.id, &ana.id, &[g.id.clone(), g2.id.clone()])
            .await
            .unwrap(),
        vec![state(Some(&m3), 1), state(Some(&n1), 0)]
    );
    assert_eq!(
        store.read_states(&bay.id, &bob.id, &[]).await.unwrap(),
        vec![]
    );

    // Bob posts: his marker jumps to his message, past anything he marked.
    let m5 = post(&bob, "five").await.unwrap().message;
    assert_eq!(
        read_state(store, &bay.id, &bob.id, &g.id).await,
        state(Some(&m5), 0)
    );
    assert_eq!(
        read_state(store, &bay.id, &ana.id, &g.id).await,
        state(Some(&m3), 2)
    );
    let quiet = head(store, &bay.id).await;
    assert_eq!(
        store
            .mark_read(&bay.id, &g.reference(), &bob.id, &m4)
            .await
            .unwrap(),
        None
    );
    assert_eq!(head(store, &bay.id).await, quiet);
    // g2 did not move.
    assert_eq!(
        read_state(store, &bay.id, &bob.id, &g2.id).await,
        state(None, 1)
    );
}

fn lunch_poll(id: &str, asked_by: &ParticipantId) -> PollState {
    PollState::new(
        id,
        "Lunch?".into(),
        vec!["Pizza".into(), "Sushi".into(), "Ramen".into()],
        false,
        asked_by.clone(),
    )
}

/// A `card.poll` message from `sender` in `c`.
fn with_poll(
    c: &Conversation,
    sender: &switchboard_actors::model::Participant,
    poll: PollState,
) -> NewMessage {
    let mut m = message(c, sender, &poll.fallback_content(), None);
    m.message.poll = Some(poll);
    m
}

async fn polls_are_found_by_id(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (ana, _) = new_participant(store, &bay.id, "ana", ParticipantKind::User).await;
    let g = new_group(store, &bay.id, "g", &[(&ana, Role::Member)], 5).await;
    let g2 = new_group(store, &bay.id, "g2", &[(&ana, Role::Member)], 5).await;
    assert_eq!(
        store.poll_message(&bay.id, "poll_lunch").await.unwrap(),
        None
    );

    let poll = lunch_poll("poll_lunch", &ana.id);
    let lunch = store
        .append(&bay.id, with_poll(&g, &ana, poll.clone()), ana.kind)
        .await
        .unwrap()
        .message;
    assert_eq!(lunch.poll, Some(poll));
    let dinner = store
        .append(
            &bay.id,
            with_poll(&g2, &ana, lunch_poll("poll_dinner", &ana.id)),
            ana.kind,
        )
        .await
        .unwrap()
        .message;
    store
        .append(&bay.id, message(&g, &ana, "not a poll", None), ana.kind)
        .await
        .unwrap();
    assert_eq!(
        store.poll_message(&bay.id, "poll_lunch").await.unwrap(),
        Some((g.id.clone(), lunch.id.clone()))
    );
    assert_eq!(
        store.poll_message(&bay.id, "poll_dinner").await.unwrap(),
        Some((g2.id.clone(), dinner.id.clone()))
    );
    assert_eq!(
        store.poll_message(&bay.id, "poll_none").await.unwrap(),
        None
    );
    assert_eq!(store.poll_message(&bay.id, "").await.unwrap(), None);

    // Poll ids are per Bay.
    let other = new_bay(store).await;
    assert_eq!(
        store.poll_message(&other.id, "poll_lunch").await.unwrap(),
        None
    );
    let (ana2, _) = new_participant(store, &other.id, "ana", ParticipantKind::User).await;
    let og = new_group(store, &other.id, "og", &[(&ana2, Role::Member)], 5).await;
    let theirs = store
        .append(
            &other.id,
            with_poll(&og, &ana2, lunch_poll("poll_lunch", &ana2.id)),
            ana2.kind,
        )
        .await
        .unwrap()
        .message;
    assert_eq!(
        store.poll_message(&other.id, "poll_lunch").await.unwrap(),
        Some((og.id.clone(), theirs.id))
    );
    assert_eq!(
        store.poll_message(&bay.id, "poll_lunch").await.unwrap(),
        Some((g.id.clone(), lunch.id))
    );
}

async fn cards_polls_and_reactions_round_trip_through_changes(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (ana, _) = new_participant(store, &bay.id, "ana", ParticipantKind::User).await;
    let (rex, _) = new_participant(store, &bay.id, "rex", ParticipantKind::Agent).await;
    let c = new_group(
        store,
        &bay.id,
        "c_rich",
        &[(&ana, Role::Member), (&rex, Role::Member)],
        5,
    )
    .await;
    let start = head(store, &bay.id).await;

    // A card with awkward JSON (a fake hole, unicode, big numbers, empties).
    let mut carded = message(&c, &rex, "Launch review ✓", None);
    carded.message.metadata = Some(json!({"big": 12345678901234567890u64, "empty": []}));
    carded.message.card = Some(Card {
        kind: CardType::Calendar,
        payload: json!({
            "title": "Launch \"__sb_hole_0__\" review 🚀",
            "start": "2026-09-21T10:00:00+02:00",
            "end": "2026-09-21T11:00:00+02:00",
            "attendees": [{"name": "Ana", "address": "ana@example.com"}],
            "notes": "line 1\nline 2 \\ backslash",
        }),
    });
    let carded_in = carded.message.clone();
    let carded = store
        .append(&bay.id, carded, rex.kind)
        .await
        .unwrap()
        .message;
    let mut expected = carded_in;
    expected.created_at = carded.created_at;
    expected.seq = 1;
    assert_eq!(carded, expected);

    let poll = lunch_poll("poll_rich", &ana.id);
    let polled = store
        .append(&bay.id, with_poll(&c, &ana, poll.clone()), ana.kind)
        .await
        .unwrap()
        .message;
    assert_eq!(polled.poll, Some(poll.clone()));
    assert_eq!(polled.seq, 2);
    assert_eq!(
        history(store, &bay.id, &c.id).await,
        vec![carded.clone(), polled.clone()]
    );

    // Reactions on the card, then a vote and a close on the poll.
    let mut reacted = carded.clone();
    reacted.reactions = vec![
        Reaction {
            emoji: "👍🏽".into(),
            by: vec![ana.id.clone(), rex.id.clone()],
        },
        Reaction {
            emoji: "\"🎉\"".into(),
            by: vec![ana.id.clone()],
        },
    ];
    reacted.version = 1;
    let reaction = Change::Reaction {
        message: reacted.id.clone(),
        emoji: "👍🏽".into(),
        participant: rex.id.clone(),
        count: 2,
        added: true,
    };
    let e1 = changed(change(store, &bay.id, &c, reacted.clone(), reaction.clone()).await);
    let mut voted = polled.clone();
    let tally = voted.poll.as_mut().unwrap();
    assert!(tally.cast(rex.id.clone(), SenderType::Agent, vec![2], Utc::now()));
    assert!(tally.cast(ana.id.clone(), SenderType::User, vec![0], Utc::now()));
    assert!(tally.close());
    voted.version = 1;
    let vote = Change::Poll {
        message: voted.id.clone(),
        poll: voted.poll.clone().unwrap(),
    };
    let e2 = changed(change(store, &bay.id, &c, voted.clone(), vote.clone()).await);

    assert_eq!(
        store.message(&bay.id, &c.id, &carded.id).await.unwrap(),
        Some(reacted.clone())
    );
    assert_eq!(
        store.message(&bay.id, &c.id, &polled.id).await.unwrap(),
        Some(voted.clone())
    );
    let now = vec![reacted.clone(), voted.clone()];
    assert_eq!(history(store, &bay.id, &c.id).await, now);
    assert_eq!(
        store
            .messages_since(
                &bay.id,
                &c.id,
                carded.created_at - chrono::Duration::days(1),
                10
            )
            .await
            .unwrap(),
        now
    );
    // The log carries all four exactly as well.
    let entries = logged(store, &bay.id, &start).await;
    let (ids, events): (Vec<_>, Vec<_>) = entries.into_iter().unzip();
    assert_eq!(&ids[2..], &[e1, e2]);
    assert_eq!(
        events,
        vec![
            LogEvent::Message {
                conversation: c.reference(),
                message: carded,
            },
            LogEvent::Message {
                conversation: c.reference(),
                message: polled,
            },
            LogEvent::Change {
                conversation: c.reference(),
                change: reaction,
            },
            LogEvent::Change {
                conversation: c.reference(),
                change: vote,
            },
        ]
    );
}

async fn drafts_stream_close_and_count_their_round_at_completion(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (a1, _) = new_participant(store, &bay.id, "p_a1", ParticipantKind::Agent).await;
    let (a2, _) = new_participant(store, &bay.id, "p_a2", ParticipantKind::Agent).await;
    let members = [(&a1, Role::Member), (&a2, Role::Member)];
    let c = new_group(store, &bay.id, "c_draft", &members, 2).await;
    let start = head(store, &bay.id).await;

    // Opening a draft counts no round and asks nothing.
    let mut open = message(&c, &a1, "Hel", Some(2));
    open.message.state = MessageState::Streaming;
    let draft = store.append(&bay.id, open, a1.kind).await.unwrap().message;
    assert!(draft.is_streaming());
    assert_eq!(draft.version, 0);
    let drafts = store.open_drafts(&bay.id).await.unwrap();
    assert_eq!(drafts.len(), 1);
    assert_eq!((&drafts[0].message, &drafts[0].author), (&draft.id, &a1.id));
    assert!(store.draft_bays().await.unwrap().contains(&bay.id));

    // Appends extend the text at the expected version only.
    let revision = revision_of(store, &bay.id, &c.id).await;
    let add = |version: u64, offset: u64, text: &str| DraftAppend {
        conversation: c.reference(),
        message: draft.id.clone(),
        revision,
        version,
        offset,
        text: text.into(),
    };
    let first = store.append_draft(&bay.id, add(0, 3, "lo ")).await.unwrap();
    assert!(
        matches!(first, DraftAppended::Appended { version: 1, .. }),
        "{first:?}"
    );
    assert_eq!(
        store.append_draft(&bay.id, add(0, 6, "x")).await.unwrap(),
        DraftAppended::Conflict
    );
    let stale = DraftAppend {
        revision: revision.wrapping_add(1),
        ..add(1, 6, "x")
    };
    assert_eq!(
        store.append_draft(&bay.id, stale).await.unwrap(),
        DraftAppended::Stale,
        "an append checked against an old roster is refused"
    );
    let second = store
        .append_draft(&bay.id, add(1, 6, "wörld"))
        .await
        .unwrap();
    assert!(matches!(second, DraftAppended::Appended { version: 2, .. }));
    let read = store
        .message(&bay.id, &c.id, &draft.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((read.content.as_str(), read.version), ("Hello wörld", 2));
    assert!(read.is_streaming());
    let page = history(store, &bay.id, &c.id).await;
    assert_eq!(
        page[0].content, "Hello wörld",
        "history shows the text so far"
    );

    // Another agent's message meanwhile: round 1.
    let other = store
        .append(&bay.id, message(&c, &a2, "ok", Some(2)), a2.kind)
        .await
        .unwrap();
    assert!(!other.message.routing.suppressed);

    // Completion counts the draft's round: the 2nd under cap 2 is suppressed.
    let mut done = read.clone();
    done.version = 3;
    done.state = MessageState::Complete;
    let closed = store
        .close_draft(
            &bay.id,
            MessageChange {
                conversation: c.reference(),
                revision,
                message: done.clone(),
                change: Change::Completed {
                    message: done.clone(),
                },
            },
            Some(RoundStep {
                sender: ParticipantKind::Agent,
                cap: Some(2),
            }),
        )
        .await
        .unwrap();
    changed(closed);
    let stored = store
        .message(&bay.id, &c.id, &draft.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.state, MessageState::Complete);
    assert_eq!(
        (stored.content.as_str(), stored.version),
        ("Hello wörld", 3)
    );
    assert!(stored.routing.suppressed, "2nd agent round under cap 2");

    // Closed: no more appends, no second close, no open draft left.
    assert_eq!(
        store.append_draft(&bay.id, add(3, 11, "!")).await.unwrap(),
        DraftAppended::Closed
    );
    let mut again = stored.clone();
    again.version = 4;
    let twice = store
        .close_draft(
            &bay.id,
            MessageChange {
                conversation: c.reference(),
                revision,
                message: again.clone(),
                change: Change::Completed { message: again },
            },
            None,
        )
        .await
        .unwrap();
    assert_eq!(twice, Changed::Conflict);
    assert!(store.open_drafts(&bay.id).await.unwrap().is_empty());
    store.prune_draft_bay(&bay.id).await.unwrap();
    assert!(!store.draft_bays().await.unwrap().contains(&bay.id));

    // The log: the opening, two deltas, the other message, the completion
    // carrying the store's verdict.
    let kinds: Vec<String> = logged(store, &bay.id, &start)
        .await
        .into_iter()
        .map(|(_, e)| match e {
            LogEvent::Message { message, .. } => format!("message:{:?}", message.state),
            LogEvent::Change {
                change: Change::Delta { text, version, .. },
                ..
            } => format!("delta:{version}:{text}"),
            LogEvent::Change {
                change: Change::Completed { message },
                ..
            } => format!("completed:{}", message.routing.suppressed),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "message:Streaming",
            "delta:1:lo ",
            "delta:2:wörld",
            "message:Complete",
            "completed:true"
        ]
    );
}

// ---- presence ----

fn pid(s: &str) -> ParticipantId {
    ParticipantId(s.into())
}

/// Sorted copies of `entries`, for comparisons.
fn sorted(mut entries: Vec<ParticipantPresence>) -> Vec<ParticipantPresence> {
    entries.sort_by(|a, b| {
        (a.participant.as_str(), a.session, a.active_ms).cmp(&(
            b.participant.as_str(),
            b.session,
            b.active_ms,
        ))
    });
    entries
}

async fn presence_records_merge_nodes_and_expire(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    assert!(store.presence_records(&bay.id).await.unwrap().is_empty());
    assert!(store.online(&bay.id).await.unwrap().is_empty());
    let now = now_ms();
    let on_a = vec![
        ParticipantPresence {
            session: true,
            active_ms: now,
            ..ParticipantPresence::new(pid("rex"))
        },
        ParticipantPresence {
            linger_until_ms: now + 60_000,
            ..ParticipantPresence::new(pid("scout"))
        },
        // Typing through node A while its session lives on node B.
        ParticipantPresence {
            thinking_until_ms: now + 5_000,
            active_ms: now,
            ..ParticipantPresence::new(pid("brain"))
        },
    ];
    let on_b = vec![ParticipantPresence {
        session: true,
        active_ms: now - 1,
        ..ParticipantPresence::new(pid("brain"))
    }];
    let long = Duration::from_secs(60);
    store
        .set_presence(&bay.id, "node_a", &on_a, long)
        .await
        .unwrap();
    store
        .set_presence(&bay.id, "node_b", &on_b, long)
        .await
        .unwrap();
    let mut want = on_a.clone();
    want.extend(on_b.clone());
    assert_eq!(
        sorted(store.presence_records(&bay.id).await.unwrap()),
        sorted(want)
    );
    // Present: a session anywhere, or within a linger; typing alone is not.
    assert_eq!(
        store.online(&bay.id).await.unwrap(),
        [pid("brain"), pid("rex"), pid("scout")]
    );
    assert!(store.draft_authors(&bay.id).await.unwrap().is_empty());

    // A node's new record replaces its old one.
    store
        .set_presence(&bay.id, "node_a", &[], long)
        .await
        .unwrap();
    assert_eq!(
        sorted(store.presence_records(&bay.id).await.unwrap()),
        sorted(on_b.clone())
    );
    assert_eq!(store.online(&bay.id).await.unwrap(), [pid("brain")]);

    // A record that is not refreshed expires.
    store
        .set_presence(&bay.id, "node_b", &on_b, Duration::from_millis(200))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(store.presence_records(&bay.id).await.unwrap().is_empty());
    assert!(store.online(&bay.id).await.unwrap().is_empty());
    // Other Bays are apart.
    let other = new_bay(store).await;
    store
        .set_presence(&other.id, "node_a", &on_a, long)
        .await
        .unwrap();
    assert!(store.presence_records(&bay.id).await.unwrap().is_empty());
}

fn presence_change(p: &str, from: PresenceState, to: PresenceState) -> PresenceChange {
    PresenceChange {
        participant: pid(p),
        from,
        to,
        at: chrono::DateTime::from_timestamp_millis(1_764_561_600_123).unwrap(),
    }
}

async fn publishing_presence_logs_each_change_once(store: Arc<dyn Store>) {
    use PresenceState::*;
    let store = &*store;
    let bay = new_bay(store).await;
    assert!(store.published_presence(&bay.id).await.unwrap().is_empty());
    let start = head(store, &bay.id).await;

    let changes = [
        presence_change("brain", Offline, Thinking),
        presence_change("rex", Offline, Online),
    ];
    let Published::Logged(ids) = store.publish_presence(&bay.id, &changes).await.unwrap() else {
        panic!("a first publish conflicted");
    };
    assert_eq!(ids.len(), 2);
    let (records, _) = read(store, &bay.id, &start, 10).await;
    let logged: Vec<LogRecord> = records.iter().map(|r| (**r).clone()).collect();
    let expected: Vec<LogRecord> = changes
        .iter()
        .zip(&ids)
        .map(|(c, id)| {
            LogRecord::new(
                *id,
                LogEvent::Presence {
                    participant: c.participant.clone(),
                    state: c.to,
                    at: c.at,
                },
            )
        })
        .collect();
    assert_eq!(logged, expected);
    assert_eq!(
        store.published_presence(&bay.id).await.unwrap(),
        [(pid("brain"), Thinking), (pid("rex"), Online)]
    );

    // Computed against a state that is no longer published: nothing at
    // all happens, not even for the change that would still fit.
    let after = head(store, &bay.id).await;
    let stale = [
        presence_change("scout", Offline, Online),
        presence_change("rex", Offline, Online),
    ];
    assert_eq!(
        store.publish_presence(&bay.id, &stale).await.unwrap(),
        Published::Conflict
    );
    assert!(read(store, &bay.id, &after, 10).await.0.is_empty());
    assert_eq!(store.published_presence(&bay.id).await.unwrap().len(), 2);

    // Offline is the absence of a published state.
    let gone = [
        presence_change("rex", Online, Offline),
        presence_change("brain", Thinking, Idle),
    ];
    assert!(matches!(
        store.publish_presence(&bay.id, &gone).await.unwrap(),
        Published::Logged(ids) if ids.len() == 2
    ));
    assert_eq!(
        store.published_presence(&bay.id).await.unwrap(),
        [(pid("brain"), Idle)]
    );
    let (records, _) = read(store, &bay.id, &after, 10).await;
    let states: Vec<(String, PresenceState)> = records
        .iter()
        .map(|r| match &r.event {
            LogEvent::Presence {
                participant, state, ..
            } => (participant.0.clone(), *state),
            other => panic!("not a presence entry: {other:?}"),
        })
        .collect();
    assert_eq!(
        states,
        [("rex".to_owned(), Offline), ("brain".to_owned(), Idle)]
    );
    // Nothing to publish is no entry.
    let last = head(store, &bay.id).await;
    assert_eq!(
        store.publish_presence(&bay.id, &[]).await.unwrap(),
        Published::Logged(Vec::new())
    );
    assert_eq!(head(store, &bay.id).await, last);
}

async fn concurrent_presence_publishers_log_a_change_once(store: Arc<dyn Store>) {
    use PresenceState::*;
    let bay = new_bay(&*store).await;
    let start = head(&*store, &bay.id).await;
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (store, bay) = (store.clone(), bay.id.clone());
            tokio::spawn(async move {
                store
                    .publish_presence(&bay, &[presence_change("rex", Offline, Online)])
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut logged = 0;
    for t in tasks {
        if matches!(t.await.unwrap(), Published::Logged(_)) {
            logged += 1;
        }
    }
    assert_eq!(logged, 1, "exactly one publisher logs the change");
    assert_eq!(read(&*store, &bay.id, &start, 10).await.0.len(), 1);
}
