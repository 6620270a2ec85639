//! The displacement channel: session openings, apart from the log.

use super::common::new_bay;
use super::{head, read};
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchboard_actors::store::{Opening, Store};
use switchboard_protocol::cursor::EntryId;
use switchboard_protocol::ids::{SessionId, TokenId};

conformance!(
    openings_travel_apart_from_the_log,
    a_blocked_openings_read_wakes_on_an_opening,
);

async fn openings_travel_apart_from_the_log(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    assert_eq!(store.openings_head(&bay.id).await.unwrap(), EntryId::ZERO);
    let log_before = head(store, &bay.id).await;
    let (t, s1, s2) = (
        TokenId("0123456789abcdef".into()),
        SessionId("s_1".into()),
        SessionId("s_2".into()),
    );
    let o1 = store.open_session(&bay.id, &t, &s1).await.unwrap();
    let o2 = store.open_session(&bay.id, &t, &s2).await.unwrap();
    assert!(o2 > o1, "ids increase");
    assert_eq!(store.openings_head(&bay.id).await.unwrap(), o2);
    assert_eq!(
        store
            .read_openings(&bay.id, EntryId::ZERO, 10, None)
            .await
            .unwrap(),
        vec![
            Opening {
                id: o1,
                token: t.clone(),
                session: s1
            },
            Opening {
                id: o2,
                token: t.clone(),
                session: s2.clone()
            },
        ]
    );
    assert_eq!(
        store.read_openings(&bay.id, o1, 10, None).await.unwrap(),
        vec![Opening {
            id: o2,
            token: t,
            session: s2
        }]
    );
    assert_eq!(
        store.read_openings(&bay.id, o2, 10, None).await.unwrap(),
        vec![]
    );
    // Replays never see them: the log did not move.
    assert_eq!(head(store, &bay.id).await, log_before);
    assert_eq!(read(store, &bay.id, &log_before, 10).await.0.len(), 0);
}

async fn a_blocked_openings_read_wakes_on_an_opening(store: Arc<dyn Store>) {
    let bay = new_bay(&*store).await;
    let after = store.openings_head(&bay.id).await.unwrap();
    let reader = {
        let (store, bay) = (store.clone(), bay.id.clone());
        tokio::spawn(async move {
            store
                .read_openings(&bay, after, 10, Some(Duration::from_secs(10)))
                .await
                .unwrap()
        })
    };
    // Let the reader block first; a late start still passes (it reads the opening).
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t0 = Instant::now();
    let id = store
        .open_session(
            &bay.id,
            &TokenId("0123456789abcdef".into()),
            &SessionId("s".into()),
        )
        .await
        .unwrap();
    let got = reader.await.unwrap();
    assert_eq!(got.iter().map(|o| o.id).collect::<Vec<_>>(), vec![id]);
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "woke on the opening, not the timeout"
    );
}
