//! Named leases: one holder at a time, renewed by its holder, free again
//! once released or expired.

use super::common::unique;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use switchboard_actors::store::Store;

conformance!(
    a_lease_has_one_holder_until_released_or_expired,
    a_group_lease_is_kept_by_its_holders_heartbeat,
    a_groups_live_holders_are_read_at_once,
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

/// One read names every lease of a group whose holder's heartbeat lives,
/// and leaves out the free, the released and those of a lapsed holder,
/// exactly the leases `take_group_lease` would refuse another holder.
async fn a_groups_live_holders_are_read_at_once(store: Arc<dyn Store>) {
    let store = &*store;
    let group = unique("group_");
    let short = Duration::from_millis(300);
    let long = Duration::from_secs(30);
    let held = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(n, h)| ((*n).to_owned(), (*h).to_owned()))
            .collect()
    };
    assert_eq!(
        store.live_group_holders(&group).await.unwrap(),
        HashMap::new(),
        "an unknown group holds nothing"
    );
    for (name, holder, ttl) in [
        ("rex", "node-a", short),
        ("scout", "node-a", short),
        ("brain", "node-b", long),
        ("gone", "node-b", long),
    ] {
        assert!(store
            .take_group_lease(&group, name, holder, ttl)
            .await
            .unwrap());
    }
    store
        .release_group_lease(&group, "gone", "node-b")
        .await
        .unwrap();
    // A heartbeat alone (no lease) lists nothing.
    store.renew_group(&group, "node-c", long).await.unwrap();
    assert_eq!(
        store.live_group_holders(&group).await.unwrap(),
        held(&[("rex", "node-a"), ("scout", "node-a"), ("brain", "node-b")])
    );
    // Other groups are apart.
    let other = unique("group_");
    assert!(store
        .take_group_lease(&other, "rex", "node-b", long)
        .await
        .unwrap());
    assert_eq!(
        store.live_group_holders(&other).await.unwrap(),
        held(&[("rex", "node-b")])
    );
    // a's heartbeat lapses: its leases are no longer listed, and what is
    // listed is what another holder cannot take.
    tokio::time::sleep(Duration::from_millis(450)).await;
    let live = store.live_group_holders(&group).await.unwrap();
    assert_eq!(live, held(&[("brain", "node-b")]));
    for name in ["rex", "scout", "brain", "gone"] {
        let taken = store
            .take_group_lease(&group, name, "node-c", long)
            .await
            .unwrap();
        assert_eq!(taken, !live.contains_key(name), "{name}");
    }
    assert_eq!(
        store.live_group_holders(&group).await.unwrap(),
        held(&[
            ("rex", "node-c"),
            ("scout", "node-c"),
            ("brain", "node-b"),
            ("gone", "node-c"),
        ])
    );
}
