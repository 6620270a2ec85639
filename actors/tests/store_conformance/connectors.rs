//! Connector agents: designations per Bay, and pending requests taken
//! once, only by the connector they were made to, and gone after their TTL.

use super::common::unique;
use std::sync::Arc;
use std::time::Duration;
use switchboard_actors::store::{now_ms, PendingRequest, Store};
use switchboard_protocol::connector::{Platform, RequestKind};
use switchboard_protocol::ids::{BayId, ParticipantId};

conformance!(
    connectors_are_marked_per_bay_and_cleared,
    a_request_is_taken_once_and_only_by_its_connector,
    a_request_is_gone_after_its_ttl,
);

fn pid(id: &str) -> ParticipantId {
    ParticipantId(id.into())
}

fn request(id: &str, connector: &str) -> PendingRequest {
    PendingRequest {
        id: id.into(),
        connector: pid(connector),
        asker: pid("rex"),
        kind: RequestKind::Ask,
        expires_at_ms: now_ms() + 30_000,
    }
}

async fn connectors_are_marked_per_bay_and_cleared(store: Arc<dyn Store>) {
    let (b1, b2) = (BayId(unique("b")), BayId(unique("b")));
    assert!(store.connectors(&b1).await.unwrap().is_empty());
    assert_eq!(store.connector(&b1, &pid("scout")).await.unwrap(), None);

    store
        .set_connector(&b1, &pid("scout"), Some(Platform::Slack))
        .await
        .unwrap();
    store
        .set_connector(&b1, &pid("mailer"), Some(Platform::Gmail))
        .await
        .unwrap();
    store
        .set_connector(&b2, &pid("scout"), Some(Platform::Discord))
        .await
        .unwrap();
    // A second mark replaces the platform.
    store
        .set_connector(&b1, &pid("scout"), Some(Platform::Telegram))
        .await
        .unwrap();

    let all = store.connectors(&b1).await.unwrap();
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!(all[&pid("scout")], Platform::Telegram);
    assert_eq!(all[&pid("mailer")], Platform::Gmail);
    assert_eq!(
        store.connector(&b2, &pid("scout")).await.unwrap(),
        Some(Platform::Discord)
    );

    store.set_connector(&b1, &pid("scout"), None).await.unwrap();
    // Clearing twice is fine.
    store.set_connector(&b1, &pid("scout"), None).await.unwrap();
    assert_eq!(store.connector(&b1, &pid("scout")).await.unwrap(), None);
    assert_eq!(store.connectors(&b1).await.unwrap().len(), 1);
    assert_eq!(
        store.connector(&b2, &pid("scout")).await.unwrap(),
        Some(Platform::Discord)
    );
}

async fn a_request_is_taken_once_and_only_by_its_connector(store: Arc<dyn Store>) {
    let (bay, other) = (BayId(unique("b")), BayId(unique("b")));
    let r = request("creq_1", "scout");
    store
        .open_request(&bay, &r, Duration::from_secs(30))
        .await
        .unwrap();

    // Another connector, another Bay, another id: nothing.
    assert_eq!(
        store
            .take_request(&bay, &pid("brain"), "creq_1")
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .take_request(&other, &pid("scout"), "creq_1")
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .take_request(&bay, &pid("scout"), "creq_2")
            .await
            .unwrap(),
        None
    );
    // Its connector takes it, once.
    assert_eq!(
        store
            .take_request(&bay, &pid("scout"), "creq_1")
            .await
            .unwrap(),
        Some(r)
    );
    assert_eq!(
        store
            .take_request(&bay, &pid("scout"), "creq_1")
            .await
            .unwrap(),
        None
    );
}

async fn a_request_is_gone_after_its_ttl(store: Arc<dyn Store>) {
    let bay = BayId(unique("b"));
    store
        .open_request(
            &bay,
            &request("creq_a", "scout"),
            Duration::from_millis(200),
        )
        .await
        .unwrap();
    let kept = request("creq_b", "scout");
    store
        .open_request(&bay, &kept, Duration::from_secs(30))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        store
            .take_request(&bay, &pid("scout"), "creq_a")
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .take_request(&bay, &pid("scout"), "creq_b")
            .await
            .unwrap(),
        Some(kept)
    );
}
