//! Webhooks: each participant's URL and sealed secret, its delivery
//! position and status, and the rule that a worker of a removed or
//! replaced webhook never writes over its successor's.

use super::common::{new_bay, new_participant, unique};
use super::{head, read};
use chrono::{TimeZone, Utc};
use std::sync::Arc;
use switchboard_actors::store::log::LogEvent;
use switchboard_actors::store::{Store, Webhook, WebhookStatus};
use switchboard_protocol::cursor::{EntryId, LogPosition};
use switchboard_protocol::model::ParticipantKind;

conformance!(
    a_webhook_is_set_read_and_removed_with_its_position,
    writes_for_a_replaced_webhook_are_ignored,
    a_disabled_webhook_keeps_why_it_stopped,
    every_webhook_change_is_logged_for_its_worker,
);

fn hook(url: &str) -> Webhook {
    Webhook {
        url: url.into(),
        sealed_secret: unique("sealed_"),
        set_at: Utc.with_ymd_and_hms(2026, 12, 1, 12, 0, 0).unwrap(),
    }
}

fn failing(error: &str) -> WebhookStatus {
    WebhookStatus {
        last_delivered_at: None,
        last_error: Some(error.into()),
        failing_since: Some(Utc.with_ymd_and_hms(2026, 12, 1, 12, 5, 0).unwrap()),
    }
}

async fn a_webhook_is_set_read_and_removed_with_its_position(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (agent, _) = new_participant(store, &bay.id, "rex", ParticipantKind::Agent).await;
    assert_eq!(store.webhook(&bay.id, &agent.id).await.unwrap(), None);
    assert_eq!(
        store.webhook_position(&bay.id, &agent.id).await.unwrap(),
        None
    );

    let from = head(store, &bay.id).await;
    let h = hook("https://hooks.example/rex");
    store
        .set_webhook(&bay.id, &agent.id, Some((h.clone(), from.clone())))
        .await
        .unwrap();
    assert_eq!(
        store.webhook(&bay.id, &agent.id).await.unwrap(),
        Some(h.clone())
    );
    assert_eq!(
        store.webhook_position(&bay.id, &agent.id).await.unwrap(),
        Some(from.clone())
    );
    let owners = store.webhook_owners().await.unwrap();
    assert!(owners.contains(&(bay.id.clone(), agent.id.clone())));

    let later = LogPosition {
        entry: EntryId { ms: 42, seq: 7 },
        ..from
    };
    store
        .set_webhook_position(&bay.id, &agent.id, &h, &later)
        .await
        .unwrap();
    assert_eq!(
        store.webhook_position(&bay.id, &agent.id).await.unwrap(),
        Some(later)
    );
    store
        .set_webhook_status(&bay.id, &agent.id, &h, &failing("HTTP 500"))
        .await
        .unwrap();
    assert_eq!(
        store.webhook_status(&bay.id, &agent.id).await.unwrap(),
        failing("HTTP 500")
    );

    store.set_webhook(&bay.id, &agent.id, None).await.unwrap();
    assert_eq!(store.webhook(&bay.id, &agent.id).await.unwrap(), None);
    assert_eq!(
        store.webhook_position(&bay.id, &agent.id).await.unwrap(),
        None
    );
    assert!(!store
        .webhook_owners()
        .await
        .unwrap()
        .contains(&(bay.id.clone(), agent.id.clone())));
    // The last status outlives the webhook: it says why deliveries stopped.
    assert_eq!(
        store.webhook_status(&bay.id, &agent.id).await.unwrap(),
        failing("HTTP 500")
    );
}

async fn writes_for_a_replaced_webhook_are_ignored(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (agent, _) = new_participant(store, &bay.id, "rex", ParticipantKind::Agent).await;
    let from = head(store, &bay.id).await;
    let (old, new) = (hook("https://old.example/"), hook("https://new.example/"));
    store
        .set_webhook(&bay.id, &agent.id, Some((old.clone(), from.clone())))
        .await
        .unwrap();
    store
        .set_webhook(&bay.id, &agent.id, Some((new.clone(), from.clone())))
        .await
        .unwrap();
    // Setting a webhook clears the status.
    assert_eq!(
        store.webhook_status(&bay.id, &agent.id).await.unwrap(),
        WebhookStatus::default()
    );

    // A late worker of the old webhook moves nothing.
    let moved = LogPosition {
        entry: EntryId { ms: 99, seq: 0 },
        ..from.clone()
    };
    store
        .set_webhook_position(&bay.id, &agent.id, &old, &moved)
        .await
        .unwrap();
    store
        .set_webhook_status(&bay.id, &agent.id, &old, &failing("timed out"))
        .await
        .unwrap();
    store
        .disable_webhook(&bay.id, &agent.id, &old, &failing("HTTP 410"))
        .await
        .unwrap();
    assert_eq!(store.webhook(&bay.id, &agent.id).await.unwrap(), Some(new));
    assert_eq!(
        store.webhook_position(&bay.id, &agent.id).await.unwrap(),
        Some(from)
    );
    assert_eq!(
        store.webhook_status(&bay.id, &agent.id).await.unwrap(),
        WebhookStatus::default()
    );
}

async fn a_disabled_webhook_keeps_why_it_stopped(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (agent, _) = new_participant(store, &bay.id, "rex", ParticipantKind::Agent).await;
    let h = hook("https://gone.example/");
    store
        .set_webhook(
            &bay.id,
            &agent.id,
            Some((h.clone(), head(store, &bay.id).await)),
        )
        .await
        .unwrap();
    store
        .disable_webhook(&bay.id, &agent.id, &h, &failing("HTTP 410"))
        .await
        .unwrap();
    assert_eq!(store.webhook(&bay.id, &agent.id).await.unwrap(), None);
    assert_eq!(
        store.webhook_position(&bay.id, &agent.id).await.unwrap(),
        None
    );
    assert!(!store
        .webhook_owners()
        .await
        .unwrap()
        .contains(&(bay.id.clone(), agent.id.clone())));
    assert_eq!(
        store.webhook_status(&bay.id, &agent.id).await.unwrap(),
        failing("HTTP 410")
    );
}

/// Setting, replacing, removing and disabling a webhook each log a
/// `WebhookChanged` entry (what wakes an idle delivery worker); a late
/// 410 of a replaced webhook, which changes nothing, logs nothing.
async fn every_webhook_change_is_logged_for_its_worker(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (agent, _) = new_participant(store, &bay.id, "rex", ParticipantKind::Agent).await;
    let start = head(store, &bay.id).await;
    let old = hook("https://old.example/");
    let new = hook("https://new.example/");
    for h in [&old, &new] {
        store
            .set_webhook(
                &bay.id,
                &agent.id,
                Some((h.clone(), head(store, &bay.id).await)),
            )
            .await
            .unwrap();
    }
    store
        .disable_webhook(&bay.id, &agent.id, &old, &failing("HTTP 410"))
        .await
        .unwrap();
    store
        .disable_webhook(&bay.id, &agent.id, &new, &failing("HTTP 410"))
        .await
        .unwrap();
    store
        .set_webhook(
            &bay.id,
            &agent.id,
            Some((old.clone(), head(store, &bay.id).await)),
        )
        .await
        .unwrap();
    store.set_webhook(&bay.id, &agent.id, None).await.unwrap();
    let (records, _) = read(store, &bay.id, &start, 100).await;
    let changed: Vec<&LogEvent> = records.iter().map(|r| &r.event).collect();
    let want = LogEvent::WebhookChanged {
        participant: agent.id.clone(),
    };
    assert_eq!(
        changed,
        vec![&want; 5],
        "set, replaced, disabled, set, removed"
    );
}
