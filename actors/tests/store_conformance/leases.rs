//! Named leases: one holder at a time, renewed by its holder, free again
//! once released or expired.

use super::common::unique;
use std::sync::Arc;
use std::time::Duration;
use switchboard_actors::store::Store;

conformance!(
    a_lease_has_one_holder_until_released_or_expired,
    a_group_lease_is_kept_by_its_holders_heartbeat,
);

async fn a_lease_has_one_holder_until_released_or_expired(store: Arc<dyn Store>) {
    let store = &*store;
    let name = unique("lease_");
    let long = Duration::from_secs(30);
    assert_eq!(store.lease_holder(&name).await.unwrap(), None);
    assert!(store.lease(&name, "node-a", long).await.unwrap());
    assert_eq!(
        store.lease_holder(&name).await.unwrap().as_deref(),
        Some("node-a")
    );
    assert!(
        !store.lease(&name, "node-b", long).await.unwrap(),
        "held by a"
    );
    assert!(
        store.lease(&name, "node-a", long).await.unwrap(),
        "a renews"
    );
    // Releasing someone else's lease does nothing.
    store.release_lease(&name, "node-b").await.unwrap();
    assert!(!store.lease(&name, "node-b", long).await.unwrap());
    store.release_lease(&name, "node-a").await.unwrap();
    assert!(
        store.lease(&name, "node-b", long).await.unwrap(),
        "free after release"
    );

    let short = unique("lease_short_");
    assert!(store
        .lease(&short, "node-a", Duration::from_millis(200))
        .await
        .unwrap());
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(store.lease_holder(&short).await.unwrap(), None, "expired");
    assert!(
        store.lease(&short, "node-b", long).await.unwrap(),
        "free after its ttl"
    );
}

/// A group lease has one holder while that holder's heartbeat in the
/// group lives, however long ago the lease itself was taken; once the
/// heartbeat lapses another holder takes it, and a release frees it.
async fn a_group_lease_is_kept_by_its_holders_heartbeat(store: Arc<dyn Store>) {
    let store = &*store;
    let group = unique("group_");
    let short = Duration::from_millis(300);
    assert_eq!(store.group_lease_holder(&group, "rex").await.unwrap(), None);
    assert!(store
        .take_group_lease(&group, "rex", "node-a", short)
        .await
        .unwrap());
    assert!(store
        .take_group_lease(&group, "scout", "node-a", short)
        .await
        .unwrap());
    assert_eq!(
        store
            .group_lease_holder(&group, "rex")
            .await
            .unwrap()
            .as_deref(),
        Some("node-a")
    );
    assert!(
        !store
            .take_group_lease(&group, "rex", "node-b", short)
            .await
            .unwrap(),
        "held by a"
    );
    // The heartbeat alone keeps both leases past their first lifetime.
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        store.renew_group(&group, "node-a", short).await.unwrap();
    }
    assert!(!store
        .take_group_lease(&group, "scout", "node-b", short)
        .await
        .unwrap());
    assert!(store
        .take_group_lease(&group, "rex", "node-a", short)
        .await
        .unwrap());
    // Other groups are apart.
    let other = unique("group_");
    assert!(store
        .take_group_lease(&other, "rex", "node-b", short)
        .await
        .unwrap());
    // a's heartbeat lapses: b takes over.
    tokio::time::sleep(Duration::from_millis(450)).await;
    assert_eq!(store.group_lease_holder(&group, "rex").await.unwrap(), None);
    assert!(store
        .take_group_lease(&group, "rex", "node-b", short)
        .await
        .unwrap());
    assert_eq!(
        store
            .group_lease_holder(&group, "rex")
            .await
            .unwrap()
            .as_deref(),
        Some("node-b")
    );
    // Releasing someone else's lease does nothing; the holder's frees it.
    store
        .release_group_lease(&group, "rex", "node-a")
        .await
        .unwrap();
    assert!(!store
        .take_group_lease(&group, "rex", "node-a", short)
        .await
        .unwrap());
    store
        .release_group_lease(&group, "rex", "node-b")
        .await
        .unwrap();
    assert!(store
        .take_group_lease(&group, "rex", "node-a", short)
        .await
        .unwrap());
}
