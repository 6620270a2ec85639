//! Pairing codes and link requests: single use under concurrency, gone
//! once expired, the same on every engine.

use super::common::unique;
use std::sync::Arc;
use std::time::Duration;
use switchboard_actors::store::{
    now_ms, Approval, Created, LinkRequest, PairingTarget, SecretHash, Store,
};
use switchboard_protocol::ids::{BayId, ParticipantId};

conformance!(
    a_pairing_code_redeems_once,
    concurrent_redemptions_have_one_winner,
    a_pairing_code_expires,
    a_link_request_is_approved_once_and_claimed_once,
    concurrent_claims_and_approvals_have_one_winner,
    a_link_request_expires_approved_or_not,
);

fn target() -> PairingTarget {
    PairingTarget {
        bay: BayId(unique("b")),
        participant: ParticipantId(unique("a")),
    }
}

fn request(ttl: Duration) -> LinkRequest {
    let now = now_ms();
    LinkRequest {
        id: unique("lr_"),
        name: Some("Claude on laptop".into()),
        secret: SecretHash::of(&unique("secret")),
        created_at_ms: now,
        expires_at_ms: now + ttl.as_millis() as u64,
        approved: None,
    }
}

const LONG: Duration = Duration::from_secs(60);

async fn a_pairing_code_redeems_once(store: Arc<dyn Store>) {
    let code = SecretHash::of(&unique("code"));
    let to = target();
    assert_eq!(
        store
            .create_pairing_code(&code, to.clone(), LONG)
            .await
            .unwrap(),
        Created::Created(())
    );
    assert_eq!(
        store
            .create_pairing_code(&code, target(), LONG)
            .await
            .unwrap(),
        Created::AlreadyExists,
        "a taken hash is refused and keeps its target"
    );
    assert_eq!(store.redeem_pairing_code(&code).await.unwrap(), Some(to));
    assert_eq!(store.redeem_pairing_code(&code).await.unwrap(), None);
    let unknown = SecretHash::of(&unique("never"));
    assert_eq!(store.redeem_pairing_code(&unknown).await.unwrap(), None);
}

async fn concurrent_redemptions_have_one_winner(store: Arc<dyn Store>) {
    let code = SecretHash::of(&unique("code"));
    store
        .create_pairing_code(&code, target(), LONG)
        .await
        .unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (store, code) = (store.clone(), code.clone());
            tokio::spawn(async move { store.redeem_pairing_code(&code).await.unwrap() })
        })
        .collect();
    let mut winners = 0;
    for t in tasks {
        winners += usize::from(t.await.unwrap().is_some());
    }
    assert_eq!(winners, 1);
}

async fn a_pairing_code_expires(store: Arc<dyn Store>) {
    let code = SecretHash::of(&unique("code"));
    store
        .create_pairing_code(&code, target(), Duration::from_millis(200))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(store.redeem_pairing_code(&code).await.unwrap(), None);
}

async fn a_link_request_is_approved_once_and_claimed_once(store: Arc<dyn Store>) {
    let r = request(LONG);
    assert_eq!(
        store.create_link_request(r.clone()).await.unwrap(),
        Created::Created(())
    );
    assert_eq!(
        store.create_link_request(request(LONG)).await.unwrap(),
        Created::Created(()),
        "another id is another request"
    );
    let mut same_id = request(LONG);
    same_id.id = r.id.clone();
    assert_eq!(
        store.create_link_request(same_id).await.unwrap(),
        Created::AlreadyExists
    );
    assert_eq!(store.link_request(&r.id).await.unwrap(), Some(r.clone()));
    assert_eq!(
        store.claim_link_request(&r.id).await.unwrap(),
        None,
        "a pending request cannot be claimed"
    );
    assert_eq!(
        store.link_request(&r.id).await.unwrap(),
        Some(r.clone()),
        "and stays pending"
    );

    let to = target();
    let approved = LinkRequest {
        approved: Some(to.clone()),
        ..r.clone()
    };
    assert_eq!(
        store.approve_link_request(&r.id, to.clone()).await.unwrap(),
        Approval::Approved(approved.clone())
    );
    assert_eq!(
        store.approve_link_request(&r.id, target()).await.unwrap(),
        Approval::AlreadyApproved
    );
    assert_eq!(store.link_request(&r.id).await.unwrap(), Some(approved));

    assert_eq!(store.claim_link_request(&r.id).await.unwrap(), Some(to));
    assert_eq!(store.claim_link_request(&r.id).await.unwrap(), None);
    assert_eq!(
        store.link_request(&r.id).await.unwrap(),
        None,
        "claimed: gone"
    );
    assert_eq!(
        store.approve_link_request(&r.id, target()).await.unwrap(),
        Approval::NotFound
    );
    assert_eq!(store.link_request("lr_never").await.unwrap(), None);
    assert_eq!(
        store
            .approve_link_request("lr_never", target())
            .await
            .unwrap(),
        Approval::NotFound
    );
}

async fn concurrent_claims_and_approvals_have_one_winner(store: Arc<dyn Store>) {
    let r = request(LONG);
    store.create_link_request(r.clone()).await.unwrap();
    let approvals: Vec<_> = (0..8)
        .map(|_| {
            let (store, id) = (store.clone(), r.id.clone());
            tokio::spawn(async move { store.approve_link_request(&id, target()).await.unwrap() })
        })
        .collect();
    let mut approved = 0;
    for t in approvals {
        approved += usize::from(matches!(t.await.unwrap(), Approval::Approved(_)));
    }
    assert_eq!(approved, 1);

    let claims: Vec<_> = (0..8)
        .map(|_| {
            let (store, id) = (store.clone(), r.id.clone());
            tokio::spawn(async move { store.claim_link_request(&id).await.unwrap() })
        })
        .collect();
    let mut claimed = 0;
    for t in claims {
        claimed += usize::from(t.await.unwrap().is_some());
    }
    assert_eq!(claimed, 1);
}

async fn a_link_request_expires_approved_or_not(store: Arc<dyn Store>) {
    let pending = request(Duration::from_millis(300));
    let approved = request(Duration::from_millis(300));
    store.create_link_request(pending.clone()).await.unwrap();
    store.create_link_request(approved.clone()).await.unwrap();
    assert!(matches!(
        store
            .approve_link_request(&approved.id, target())
            .await
            .unwrap(),
        Approval::Approved(_)
    ));
    tokio::time::sleep(Duration::from_millis(800)).await;
    for id in [&pending.id, &approved.id] {
        assert_eq!(store.link_request(id).await.unwrap(), None);
        assert_eq!(store.claim_link_request(id).await.unwrap(), None);
        assert_eq!(
            store.approve_link_request(id, target()).await.unwrap(),
            Approval::NotFound
        );
    }
}
