//! Idempotent sends: one message per key, concurrent retries, expiry with the replay window.

use super::common::{message, new_bay, new_group, new_participant, Append, Limits};
use super::{appended, change, changed, head, history, keyed, logged, revision_of, send};
use chrono::Utc;
use std::sync::Arc;
use std::time::Duration;
use switchboard_actors::model::StoredMessage;
use switchboard_actors::store::log::{Change, LogEvent};
use switchboard_actors::store::{AppendOutcome, Store};
use switchboard_protocol::model::{ParticipantKind, Role};

conformance!(
    idempotent_appends_store_once,
    concurrent_idempotent_appends_store_one_and_count_one_round,
    idempotency_keys_expire_with_the_replay_window: Limits { window: Duration::from_secs(1), max_entries: 10_000 },
);

fn duplicate(outcome: AppendOutcome) -> StoredMessage {
    match outcome {
        AppendOutcome::Duplicate(m) => *m,
        other => panic!("expected Duplicate, got {other:?}"),
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
                message: Box::new(first.message.clone()),
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
