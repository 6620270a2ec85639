//! Messages: history reads and paging, the stored JSON, the round cap, `seq` and read markers.

use super::common::{message, new_bay, new_group, new_participant, Append};
use super::{appended, head, history, keyed, logged, read, revision_of, send};
use serde_json::json;
use std::sync::Arc;
use switchboard_actors::model::{Conversation, Member, StoredMessage};
use switchboard_actors::store::log::{Change, LogEvent};
use switchboard_actors::store::{AppendOutcome, Budget, ReadState, Store};
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId, TokenId};
use switchboard_protocol::model::{ParticipantKind, Role};

conformance!(
    history_since_before_and_paging,
    message_json_round_trips_exactly,
    round_cap_semantics,
    concurrent_appends_count_rounds_exactly,
    seq_counts_messages_from_one,
    read_markers_only_move_forward,
    an_append_takes_its_budget,
);

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
                message: Box::new(m.clone())
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
    // The sender's `usage`, with the largest count a client may send.
    m.message.usage = switchboard_protocol::usage::validate_usage(&json!({
        "model": "model \" ✓",
        "inputTokens": switchboard_protocol::usage::MAX_USAGE_COUNT,
        "outputTokens": 0,
    }))
    .unwrap();
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
                change: Box::new(Change::Read {
                    participant: bob.id.clone(),
                    message: m2.id.clone(),
                }),
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

/// A message carrying a budget takes one call from its token's bucket in
/// the append's own step: `burst` appends pass, the next is refused with
/// the wait and stores nothing; a stale append takes nothing; an
/// idempotent retry takes a call; other tokens and Bays are apart.
async fn an_append_takes_its_budget(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (a, _) = new_participant(store, &bay.id, "p_agent", ParticipantKind::Agent).await;
    let c = new_group(store, &bay.id, "c_budget", &[(&a, Role::Member)], 50).await;
    let token = TokenId("0123456789abcdef".into());
    let with = |text: &str, budget: &Budget| {
        let mut m = message(&c, &a, text, None);
        m.budget = Some(budget.clone());
        m
    };
    // 2 a minute: one call back every 30 s.
    let budget = || Budget::per_minute(token.clone(), 2);
    let first = budget();
    let sent = appended(
        send(
            store,
            &bay.id,
            keyed(with("one", &first), "k1", "f1"),
            a.kind,
        )
        .await,
    );
    assert!(first.is_taken());
    // A stale append takes nothing.
    let stale = budget();
    let mut m = with("stale", &stale);
    m.revision = revision_of(store, &bay.id, &c.id).await + 1;
    assert!(matches!(
        store.append_message(&bay.id, m, a.kind).await.unwrap(),
        AppendOutcome::Stale
    ));
    assert!(!stale.is_taken());
    // The retry of an idempotent send takes the second call.
    let retry = budget();
    match send(
        store,
        &bay.id,
        keyed(with("one", &retry), "k1", "f1"),
        a.kind,
    )
    .await
    {
        AppendOutcome::Duplicate(m) => assert_eq!(m.id, sent.message.id),
        other => panic!("{other:?}"),
    }
    assert!(retry.is_taken());
    let refused = budget();
    match send(store, &bay.id, with("three", &refused), a.kind).await {
        AppendOutcome::RateLimited(wait) => assert!(
            wait > std::time::Duration::from_secs(20) && wait <= std::time::Duration::from_secs(30),
            "{wait:?}"
        ),
        other => panic!("{other:?}"),
    }
    assert!(refused.is_taken());
    assert_eq!(
        history(store, &bay.id, &c.id).await.len(),
        1,
        "nothing stored"
    );
    // Without a budget the append is not counted; another token has its own.
    appended(send(store, &bay.id, message(&c, &a, "free", None), a.kind).await);
    let other = Budget::per_minute(TokenId("fedcba9876543210".into()), 2);
    appended(send(store, &bay.id, with("other token", &other), a.kind).await);
    // Another Bay: the same token id, its own bucket.
    let bay2 = new_bay(store).await;
    let (a2, _) = new_participant(store, &bay2.id, "p_agent", ParticipantKind::Agent).await;
    let c2 = new_group(store, &bay2.id, "c_budget", &[(&a2, Role::Member)], 50).await;
    let mut m = message(&c2, &a2, "elsewhere", None);
    m.budget = Some(budget());
    appended(send(store, &bay2.id, m, a2.kind).await);
}
