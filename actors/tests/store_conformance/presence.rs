//! Presence: node records, published states and their log entries.

use super::common::new_bay;
use super::{head, read};
use std::sync::Arc;
use std::time::Duration;
use switchboard_actors::session::Transport;
use switchboard_actors::store::log::{LogEvent, LogRecord};
use switchboard_actors::store::{now_ms, ParticipantPresence, PresenceChange, Published, Store};
use switchboard_protocol::ids::ParticipantId;
use switchboard_protocol::presence::PresenceState;

conformance!(
    presence_records_merge_nodes_and_expire,
    a_presence_version_moves_on_every_write_and_expiry,
    presence_records_follow_each_changed_entry,
    publishing_presence_logs_each_change_once,
    concurrent_presence_publishers_log_a_change_once,
);

fn pid(s: &str) -> ParticipantId {
    ParticipantId(s.into())
}

/// `entries` as `presence_records` gives them back: each naming `node`.
fn at_node(entries: &[ParticipantPresence], node: &str) -> Vec<ParticipantPresence> {
    entries
        .iter()
        .cloned()
        .map(|mut e| {
            e.node = node.into();
            e
        })
        .collect()
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
            transports: vec![Transport::Ws, Transport::Mcp],
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
        .set_presence(&bay.id, "node_a", on_a.to_vec(), long)
        .await
        .unwrap();
    store
        .set_presence(&bay.id, "node_b", on_b.to_vec(), long)
        .await
        .unwrap();
    // Each entry comes back naming the node whose record holds it.
    let mut want = at_node(&on_a, "node_a");
    want.extend(at_node(&on_b, "node_b"));
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
        .set_presence(&bay.id, "node_a", vec![], long)
        .await
        .unwrap();
    assert_eq!(
        sorted(store.presence_records(&bay.id).await.unwrap()),
        sorted(at_node(&on_b, "node_b"))
    );
    assert_eq!(store.online(&bay.id).await.unwrap(), [pid("brain")]);

    // A record that is not refreshed expires.
    store
        .set_presence(&bay.id, "node_b", on_b.to_vec(), Duration::from_millis(200))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(store.presence_records(&bay.id).await.unwrap().is_empty());
    assert!(store.online(&bay.id).await.unwrap().is_empty());
    // Other Bays are apart.
    let other = new_bay(store).await;
    store
        .set_presence(&other.id, "node_a", on_a.to_vec(), long)
        .await
        .unwrap();
    assert!(store.presence_records(&bay.id).await.unwrap().is_empty());
}

/// An engine that keeps a presence version moves it whenever the records
/// may differ (a write, an expiry) and holds it otherwise: the publisher
/// trusts an unchanged version to skip reading every record.
async fn a_presence_version_moves_on_every_write_and_expiry(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let Some(start) = store.presence_version(&bay.id).await.unwrap() else {
        return; // the engine keeps none: its publisher reads every tick
    };
    assert_eq!(store.presence_version(&bay.id).await.unwrap(), Some(start));
    let rex = vec![ParticipantPresence {
        session: true,
        active_ms: now_ms(),
        ..ParticipantPresence::new(pid("rex"))
    }];
    let long = Duration::from_secs(60);
    store
        .set_presence(&bay.id, "node_a", rex.clone(), long)
        .await
        .unwrap();
    let written = store.presence_version(&bay.id).await.unwrap();
    assert_ne!(written, Some(start));
    assert_eq!(store.presence_version(&bay.id).await.unwrap(), written);
    // The same record again is a write too (the engine need not compare).
    store
        .set_presence(&bay.id, "node_b", rex.clone(), Duration::from_millis(200))
        .await
        .unwrap();
    let again = store.presence_version(&bay.id).await.unwrap();
    assert_ne!(again, written);
    // node_b's record expires: the version moves without a write.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_ne!(store.presence_version(&bay.id).await.unwrap(), again);
    // Another Bay's writes leave this one's alone.
    let held = store.presence_version(&bay.id).await.unwrap();
    let other = new_bay(store).await;
    store
        .set_presence(&other.id, "node_a", rex, long)
        .await
        .unwrap();
    assert_eq!(store.presence_version(&bay.id).await.unwrap(), held);
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

/// A node's successive records read back exactly as written, whichever
/// entries changed, left or joined between them; and a record that lapsed
/// (and was collected by a reader) comes back whole at its next write.
async fn presence_records_follow_each_changed_entry(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let now = now_ms();
    let entry = |id: &str, active_ms: u64| ParticipantPresence {
        session: true,
        active_ms,
        transports: vec![Transport::Ws],
        ..ParticipantPresence::new(pid(id))
    };
    let long = Duration::from_secs(60);
    let first = vec![entry("a", now), entry("b", now), entry("c", now)];
    store
        .set_presence(&bay.id, "node_a", first.to_vec(), long)
        .await
        .unwrap();
    assert_eq!(
        sorted(store.presence_records(&bay.id).await.unwrap()),
        sorted(at_node(&first, "node_a"))
    );
    // Read again with no write between: the same (an engine may keep what
    // it decoded until the node writes again).
    assert_eq!(
        sorted(store.presence_records(&bay.id).await.unwrap()),
        sorted(at_node(&first, "node_a"))
    );
    // `a` unchanged, `b` changed, `c` gone, `d` new.
    let second = vec![
        entry("a", now),
        ParticipantPresence {
            linger_until_ms: now + 60_000,
            ..ParticipantPresence::new(pid("b"))
        },
        entry("d", now + 1),
    ];
    store
        .set_presence(&bay.id, "node_a", second.to_vec(), long)
        .await
        .unwrap();
    assert_eq!(
        sorted(store.presence_records(&bay.id).await.unwrap()),
        sorted(at_node(&second, "node_a"))
    );
    // The same record again (a heartbeat): still the same.
    store
        .set_presence(&bay.id, "node_a", second.to_vec(), long)
        .await
        .unwrap();
    assert_eq!(
        sorted(store.presence_records(&bay.id).await.unwrap()),
        sorted(at_node(&second, "node_a"))
    );
    // Lapsed and collected, then written again unchanged: whole again.
    store
        .set_presence(
            &bay.id,
            "node_a",
            second.to_vec(),
            Duration::from_millis(200),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(store.presence_records(&bay.id).await.unwrap().is_empty());
    store
        .set_presence(&bay.id, "node_a", second.to_vec(), long)
        .await
        .unwrap();
    assert_eq!(
        sorted(store.presence_records(&bay.id).await.unwrap()),
        sorted(at_node(&second, "node_a"))
    );
    assert_eq!(
        store.online(&bay.id).await.unwrap(),
        [pid("a"), pid("b"), pid("d")]
    );
}
