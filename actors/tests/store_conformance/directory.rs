//! Bays, participants and tokens: creation, listing, rotation and
//! revocation, and the credentials channel every change of a token's
//! standing is published on.

use super::common::{new_bay, new_participant, participant, unique};
use super::{at, head, read};
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchboard_actors::store::log::LogEvent;
use switchboard_actors::store::{
    Created, CredentialChange, CredentialChangeKind, CredentialsRead, Principal, Store, Suspension,
    Updated,
};
use switchboard_actors::token::TokenHash;
use switchboard_protocol::cursor::EntryId;
use switchboard_protocol::ids::{BayId, ParticipantId};
use switchboard_protocol::model::ParticipantKind;

conformance!(
    every_bay_is_listed_once_sorted,
    bays_and_participants,
    tokens_rotate_and_revoke,
    suspension_is_stored_logged_and_reversible,
    every_change_of_standing_is_published_on_the_credentials_channel,
    a_blocking_credentials_read_wakes_on_a_change
);

async fn every_bay_is_listed_once_sorted(store: Arc<dyn Store>) {
    let store = &*store;
    let a = new_bay(store).await;
    let b = new_bay(store).await;
    // A second create of the same id lists it once.
    assert_eq!(
        store.create_bay(a.clone()).await.unwrap(),
        Created::AlreadyExists
    );
    let listed = store.bays().await.unwrap();
    for bay in [&a, &b] {
        assert_eq!(
            listed.iter().filter(|l| l.id == bay.id).collect::<Vec<_>>(),
            [bay],
            "{listed:?}"
        );
    }
    let ids: Vec<&str> = listed.iter().map(|b| b.id.as_str()).collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(ids, sorted);
}

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
            suspended: None,
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

async fn suspension_is_stored_logged_and_reversible(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let other = new_bay(store).await;
    let (p, t) = new_participant(store, &bay.id, "p_agent", ParticipantKind::Agent).await;
    let (q, tq) = new_participant(store, &bay.id, "p_user", ParticipantKind::User).await;
    let (_, to) = new_participant(store, &other.id, "p_agent", ParticipantKind::Agent).await;
    let standing = |token: TokenHash| async move {
        store
            .authenticate(&token)
            .await
            .unwrap()
            .expect("a suspended token still authenticates")
            .suspended
    };
    let start = head(store, &bay.id).await;

    // A participant: stored, logged once, idempotent.
    assert_eq!(
        store
            .set_suspended(&bay.id, Some(&p.id), true)
            .await
            .unwrap(),
        Updated::Updated(true)
    );
    assert_eq!(
        store
            .set_suspended(&bay.id, Some(&p.id), true)
            .await
            .unwrap(),
        Updated::Updated(false),
        "suspending twice changes nothing"
    );
    assert!(store.suspended(&bay.id, Some(&p.id)).await.unwrap());
    assert!(!store.suspended(&bay.id, Some(&q.id)).await.unwrap());
    assert!(!store.suspended(&bay.id, None).await.unwrap());
    assert_eq!(standing(t.clone()).await, Some(Suspension::Participant));
    assert_eq!(standing(tq.clone()).await, None);
    let (records, through) = read(store, &bay.id, &start, 10).await;
    assert_eq!(
        records.iter().map(|r| r.event.clone()).collect::<Vec<_>>(),
        vec![LogEvent::Suspension {
            participant: Some(p.id.clone()),
            suspended: true,
        }]
    );

    // The Bay: every participant, no other Bay; the Bay's refusal wins.
    assert_eq!(
        store.set_suspended(&bay.id, None, true).await.unwrap(),
        Updated::Updated(true)
    );
    assert!(store.suspended(&bay.id, None).await.unwrap());
    assert_eq!(standing(t.clone()).await, Some(Suspension::Bay));
    assert_eq!(standing(tq.clone()).await, Some(Suspension::Bay));
    assert_eq!(standing(to.clone()).await, None, "other Bays are untouched");
    assert!(!store.suspended(&other.id, None).await.unwrap());

    // Reinstating: the same tokens, logged.
    assert_eq!(
        store.set_suspended(&bay.id, None, false).await.unwrap(),
        Updated::Updated(true)
    );
    assert_eq!(
        store
            .set_suspended(&bay.id, Some(&p.id), false)
            .await
            .unwrap(),
        Updated::Updated(true)
    );
    assert_eq!(
        store
            .set_suspended(&bay.id, Some(&p.id), false)
            .await
            .unwrap(),
        Updated::Updated(false)
    );
    assert_eq!(standing(t.clone()).await, None);
    assert_eq!(standing(tq).await, None);
    let (records, _) = read(store, &bay.id, &at(&start, through), 10).await;
    assert_eq!(
        records.iter().map(|r| r.event.clone()).collect::<Vec<_>>(),
        vec![
            LogEvent::Suspension {
                participant: None,
                suspended: true,
            },
            LogEvent::Suspension {
                participant: None,
                suspended: false,
            },
            LogEvent::Suspension {
                participant: Some(p.id.clone()),
                suspended: false,
            },
        ]
    );

    // Unknown participant or Bay.
    let ghost = ParticipantId("p_ghost".into());
    assert_eq!(
        store
            .set_suspended(&bay.id, Some(&ghost), true)
            .await
            .unwrap(),
        Updated::NotFound
    );
    let nobay = BayId(unique("nobay"));
    assert_eq!(
        store.set_suspended(&nobay, None, true).await.unwrap(),
        Updated::NotFound
    );
    assert_eq!(
        store
            .set_suspended(&nobay, Some(&p.id), true)
            .await
            .unwrap(),
        Updated::NotFound
    );
    assert!(!store.suspended(&bay.id, Some(&ghost)).await.unwrap());
    assert!(!store.suspended(&nobay, None).await.unwrap());
}

/// The changes of the credentials channel after `after` (non-blocking).
async fn credential_changes(store: &dyn Store, after: EntryId) -> Vec<CredentialChange> {
    match store.read_credentials(after, 100, None).await.unwrap() {
        CredentialsRead::Changes(changes) => changes,
        CredentialsRead::Lost => panic!("nothing was trimmed"),
    }
}

async fn every_change_of_standing_is_published_on_the_credentials_channel(store: Arc<dyn Store>) {
    let store = &*store;
    let start = store.credentials_head().await.unwrap();
    let bay = new_bay(store).await;
    let (p, _) = new_participant(store, &bay.id, "p_agent", ParticipantKind::Agent).await;
    assert!(
        credential_changes(store, start).await.is_empty(),
        "creating a participant changes no standing"
    );
    let rotated = TokenHash::of("bay_rotated_token_for_credentials_0001");
    store
        .set_token(&bay.id, &p.id, Some(rotated))
        .await
        .unwrap();
    store.set_token(&bay.id, &p.id, None).await.unwrap();
    store.set_token(&bay.id, &p.id, None).await.unwrap();
    store
        .set_suspended(&bay.id, Some(&p.id), true)
        .await
        .unwrap();
    store
        .set_suspended(&bay.id, Some(&p.id), true)
        .await
        .unwrap();
    store
        .set_suspended(&bay.id, Some(&p.id), false)
        .await
        .unwrap();
    store.set_suspended(&bay.id, None, true).await.unwrap();
    store.set_suspended(&bay.id, None, false).await.unwrap();
    let changes = credential_changes(store, start).await;
    let seen: Vec<(Option<ParticipantId>, CredentialChangeKind)> = changes
        .iter()
        .map(|c| {
            assert_eq!(c.bay, bay.id);
            (c.participant.clone(), c.kind)
        })
        .collect();
    let pid = Some(p.id.clone());
    assert_eq!(
        seen,
        vec![
            (pid.clone(), CredentialChangeKind::Revoked),
            (pid.clone(), CredentialChangeKind::Revoked),
            (pid.clone(), CredentialChangeKind::Suspended),
            (pid, CredentialChangeKind::Reinstated),
            (None, CredentialChangeKind::Suspended),
            (None, CredentialChangeKind::Reinstated),
        ],
        "one change per change of standing; none when nothing changed"
    );
    assert!(
        changes.windows(2).all(|w| w[0].id < w[1].id) && changes[0].id > start,
        "{changes:?}"
    );
    let last = changes.last().unwrap().id;
    assert_eq!(store.credentials_head().await.unwrap(), last);
    assert!(credential_changes(store, last).await.is_empty());
    // Read from the middle: the rest, in order.
    let rest = credential_changes(store, changes[2].id).await;
    assert_eq!(rest, changes[3..].to_vec());
    // Paged.
    match store.read_credentials(start, 2, None).await.unwrap() {
        CredentialsRead::Changes(page) => assert_eq!(page, changes[..2].to_vec()),
        CredentialsRead::Lost => panic!("nothing was trimmed"),
    }
}

async fn a_blocking_credentials_read_wakes_on_a_change(store: Arc<dyn Store>) {
    let bay = new_bay(&*store).await;
    let head = store.credentials_head().await.unwrap();
    // Nothing comes: the read gives up after its block.
    let t0 = Instant::now();
    assert_eq!(
        store
            .read_credentials(head, 10, Some(Duration::from_millis(200)))
            .await
            .unwrap(),
        CredentialsRead::Changes(Vec::new())
    );
    assert!(
        t0.elapsed() >= Duration::from_millis(150),
        "{:?}",
        t0.elapsed()
    );
    let reader = {
        let store = store.clone();
        tokio::spawn(async move {
            let t0 = Instant::now();
            let read = store
                .read_credentials(head, 10, Some(Duration::from_secs(10)))
                .await
                .unwrap();
            (read, t0.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    store.set_suspended(&bay.id, None, true).await.unwrap();
    let (read, waited) = reader.await.unwrap();
    let CredentialsRead::Changes(changes) = read else {
        panic!("nothing was trimmed")
    };
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0].bay, bay.id);
    assert_eq!(changes[0].participant, None);
    assert_eq!(changes[0].kind, CredentialChangeKind::Suspended);
    assert!(
        waited < Duration::from_secs(5),
        "woke on the change: {waited:?}"
    );
}
