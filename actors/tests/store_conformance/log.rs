//! The event log (replay buffer): reads, expiry, epochs, trimming and blocking reads.

use super::common::{new_bay, Limits};
use super::{at, control, head, read};
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchboard_actors::store::log::{LogEvent, LogRecord};
use switchboard_actors::store::{Replay, Store};
use switchboard_protocol::cursor::{EntryId, Epoch, LogPosition};
use switchboard_protocol::ids::{ParticipantId, TokenId};

conformance!(
    log_read_through_expired_and_epoch,
    control_entries_are_logged,
    trimming_by_age_expires_cursors: Limits { window: Duration::from_millis(300), max_entries: 10_000 },
    trimming_by_count_expires_cursors: Limits { window: Duration::from_secs(900), max_entries: 3 },
    blocking_read_wakes_on_append,
    blocking_read_times_out_empty,
);

fn is_expired(r: Replay) -> bool {
    matches!(r, Replay::Expired)
}

async fn log_read_through_expired_and_epoch(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let h0 = head(store, &bay.id).await;
    assert_eq!(h0.entry, EntryId::ZERO, "a new Bay's log is empty");
    assert_eq!(head(store, &bay.id).await, h0, "the epoch is stable");
    assert_eq!(read(store, &bay.id, &h0, 10).await, (vec![], EntryId::ZERO));

    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(control(store, &bay.id).await);
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    let h5 = head(store, &bay.id).await;
    assert_eq!(h5, at(&h0, ids[4]));

    let ids_of = |r: &[Arc<LogRecord>]| r.iter().map(|r| r.id).collect::<Vec<_>>();
    // Full pages end at their last entry; a short page reaches the head.
    let (r, t) = read(store, &bay.id, &h0, 2).await;
    assert_eq!((ids_of(&r), t), (ids[0..2].to_vec(), ids[1]));
    let (r, t) = read(store, &bay.id, &at(&h0, t), 2).await;
    assert_eq!((ids_of(&r), t), (ids[2..4].to_vec(), ids[3]));
    let (r, t) = read(store, &bay.id, &at(&h0, t), 2).await;
    assert_eq!((ids_of(&r), t), (ids[4..5].to_vec(), ids[4]));
    let (r, t) = read(store, &bay.id, &at(&h0, t), 2).await;
    assert_eq!((ids_of(&r), t), (vec![], ids[4]));
    let (r, t) = read(store, &bay.id, &h0, usize::MAX).await;
    assert_eq!((ids_of(&r), t), (ids.clone(), ids[4]), "no practical limit");
    let (r, t) = read(store, &bay.id, &at(&h0, ids[2]), 10).await;
    assert_eq!((ids_of(&r), t), (ids[3..5].to_vec(), ids[4]));
    // Beyond the head, or from another incarnation of the log.
    assert!(is_expired(
        store
            .read_log(&bay.id, &at(&h0, ids[4].next()), 10, None)
            .await
            .unwrap()
    ));
    assert!(is_expired(
        store
            .read_log(
                &bay.id,
                &at(&h0, EntryId::new(ids[4].ms + 60_000, 0)),
                10,
                None
            )
            .await
            .unwrap()
    ));
    let foreign = LogPosition {
        epoch: Epoch("zzzzzz".into()),
        entry: ids[1],
    };
    assert!(matches!(
        store.read_log(&bay.id, &foreign, 10, None).await.unwrap(),
        Replay::EpochChanged
    ));
    assert!(matches!(
        store
            .read_log(&bay.id, &foreign, 10, Some(Duration::from_secs(2)))
            .await
            .unwrap(),
        Replay::EpochChanged
    ));

    // Logs are per Bay.
    let other = new_bay(store).await;
    let ho = head(store, &other.id).await;
    assert_eq!(ho.entry, EntryId::ZERO);
    assert_ne!(ho.epoch, h0.epoch);
    assert!(matches!(
        store.read_log(&other.id, &h5, 10, None).await.unwrap(),
        Replay::EpochChanged
    ));
}

async fn control_entries_are_logged(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let start = head(store, &bay.id).await;
    let event = LogEvent::CredentialRevoked {
        participant: ParticipantId("p_1".into()),
        token: TokenId("0123456789abcdef".into()),
    };
    let id = store.append_control(&bay.id, event.clone()).await.unwrap();
    let (records, through) = read(store, &bay.id, &start, 10).await;
    assert_eq!(
        records.iter().map(|r| (**r).clone()).collect::<Vec<_>>(),
        vec![LogRecord::new(id, event)]
    );
    assert_eq!(through, id);
}

async fn trimming_by_age_expires_cursors(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let h0 = head(store, &bay.id).await;
    let e1 = control(store, &bay.id).await;
    let e2 = control(store, &bay.id).await;
    assert_eq!(read(store, &bay.id, &h0, 10).await.0.len(), 2);
    tokio::time::sleep(Duration::from_millis(450)).await;
    // This append trims e1 and e2 (older than the 300 ms window).
    let e3 = control(store, &bay.id).await;
    assert!(
        is_expired(store.read_log(&bay.id, &h0, 10, None).await.unwrap()),
        "unseen entries were trimmed"
    );
    assert!(is_expired(
        store
            .read_log(&bay.id, &at(&h0, e1), 10, None)
            .await
            .unwrap()
    ));
    assert!(is_expired(
        store
            .read_log(&bay.id, &h0, 10, Some(Duration::from_secs(1)))
            .await
            .unwrap()
    ));
    // A reader past everything trimmed lost nothing: not expired.
    let (r, t) = read(store, &bay.id, &at(&h0, e2), 10).await;
    assert_eq!(
        (r.iter().map(|r| r.id).collect::<Vec<_>>(), t),
        (vec![e3], e3)
    );
    assert_eq!(read(store, &bay.id, &at(&h0, e3), 10).await, (vec![], e3));
}

async fn trimming_by_count_expires_cursors(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let h0 = head(store, &bay.id).await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(control(store, &bay.id).await);
    }
    assert!(is_expired(
        store.read_log(&bay.id, &h0, 10, None).await.unwrap()
    ));
    assert!(is_expired(
        store
            .read_log(&bay.id, &at(&h0, ids[0]), 10, None)
            .await
            .unwrap()
    ));
    let (r, t) = read(store, &bay.id, &at(&h0, ids[1]), 10).await;
    assert_eq!(
        (r.iter().map(|r| r.id).collect::<Vec<_>>(), t),
        (ids[2..].to_vec(), ids[4])
    );
}

async fn blocking_read_wakes_on_append(store: Arc<dyn Store>) {
    let bay = new_bay(&*store).await;
    control(&*store, &bay.id).await;
    let h = head(&*store, &bay.id).await;
    let reader = {
        let store = store.clone();
        let bay = bay.id.clone();
        let h = h.clone();
        tokio::spawn(async move {
            let t0 = Instant::now();
            let r = store
                .read_log(&bay, &h, 10, Some(Duration::from_secs(10)))
                .await;
            (r, t0.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let e = control(&*store, &bay.id).await;
    let (r, waited) = tokio::time::timeout(Duration::from_secs(5), reader)
        .await
        .expect("the blocked read woke up")
        .unwrap();
    match r.unwrap() {
        Replay::Records { records, through } => {
            assert_eq!(records.iter().map(|r| r.id).collect::<Vec<_>>(), vec![e]);
            assert_eq!(through, e);
        }
        other => panic!("expected the new entry, got {other:?}"),
    }
    assert!(
        waited >= Duration::from_millis(200),
        "it did block: {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(5),
        "woke on the append: {waited:?}"
    );

    // With entries already there, a blocking read answers at once.
    let t0 = Instant::now();
    let (records, _) = match store
        .read_log(&bay.id, &h, 10, Some(Duration::from_secs(10)))
        .await
        .unwrap()
    {
        Replay::Records { records, through } => (records, through),
        other => panic!("{other:?}"),
    };
    assert_eq!(records.len(), 1);
    assert!(t0.elapsed() < Duration::from_secs(2));

    // Several blocked readers all wake.
    let h2 = head(&*store, &bay.id).await;
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let store = store.clone();
            let bay = bay.id.clone();
            let h2 = h2.clone();
            tokio::spawn(async move {
                store
                    .read_log(&bay, &h2, 10, Some(Duration::from_secs(10)))
                    .await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let e2 = control(&*store, &bay.id).await;
    for r in readers {
        let r = tokio::time::timeout(Duration::from_secs(5), r)
            .await
            .expect("woke")
            .unwrap();
        assert!(
            matches!(r.unwrap(), Replay::Records { ref records, .. } if records.len() == 1 && records[0].id == e2)
        );
    }
}

async fn blocking_read_times_out_empty(store: Arc<dyn Store>) {
    let bay = new_bay(&*store).await;
    control(&*store, &bay.id).await;
    let h = head(&*store, &bay.id).await;
    let t0 = Instant::now();
    let r = store
        .read_log(&bay.id, &h, 10, Some(Duration::from_millis(400)))
        .await
        .unwrap();
    let waited = t0.elapsed();
    match r {
        Replay::Records { records, through } => {
            assert!(records.is_empty());
            assert_eq!(through, h.entry);
        }
        other => panic!("{other:?}"),
    }
    assert!(waited >= Duration::from_millis(350), "{waited:?}");
    assert!(waited < Duration::from_secs(3), "{waited:?}");
    // A fresh Bay (no log yet) blocks and times out the same way.
    let fresh = new_bay(&*store).await;
    let hf = head(&*store, &fresh.id).await;
    let r = store
        .read_log(&fresh.id, &hf, 10, Some(Duration::from_millis(200)))
        .await
        .unwrap();
    assert!(
        matches!(r, Replay::Records { ref records, through } if records.is_empty() && through == EntryId::ZERO)
    );
}
