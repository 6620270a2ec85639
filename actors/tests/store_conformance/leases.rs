//! Named leases: one holder at a time, renewed by its holder, free again
//! once released or expired.

use super::common::unique;
use std::sync::Arc;
use std::time::Duration;
use switchboard_actors::store::Store;

conformance!(a_lease_has_one_holder_until_released_or_expired);

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
