//! Conversation summaries: versions counted by the store, boundaries never
//! moving back, one summarizer per Bay, and the refresh budget's window.

use super::common::unique;
use std::sync::Arc;
use std::time::Duration;
use switchboard_actors::store::{RefreshSlot, Store, StoredSummary, SummaryWritten};
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId};
use switchboard_protocol::summary::{ConversationMemory, MemoryItem};

conformance!(
    summaries_count_versions_and_refuse_an_older_boundary,
    summaries_are_kept_per_conversation,
    a_bay_has_one_summarizer_until_cleared,
    refreshes_fit_a_sliding_window,
);

fn summary(through: &str, seq: u64, text: &str) -> StoredSummary {
    StoredSummary {
        memory: ConversationMemory {
            summary: text.into(),
            decisions: vec![MemoryItem {
                text: "ship friday".into(),
                owner: None,
                status: None,
                source_message_ids: vec![MessageId("m1".into())],
            }],
            open_tasks: vec![MemoryItem {
                text: "notes".into(),
                owner: Some("Ana".into()),
                status: Some("open".into()),
                source_message_ids: vec![MessageId("m1".into()), MessageId("m2".into())],
            }],
            open_questions: vec![],
            durable_facts: vec![],
            through_message_id: MessageId(through.into()),
            through_created_at: "2026-01-01T00:00:00.000Z".into(),
            // The store's to set: whatever a writer puts here is replaced.
            version: 99,
            generated_at: "2026-01-01T00:00:01.000Z".into(),
            generated_by: ParticipantId("brain".into()),
            approx_tokens: 7,
        },
        through_seq: seq,
    }
}

fn stored(w: SummaryWritten) -> StoredSummary {
    match w {
        SummaryWritten::Stored(s) => s,
        other => panic!("expected Stored, got {other:?}"),
    }
}

async fn summaries_count_versions_and_refuse_an_older_boundary(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = BayId(unique("bay_"));
    let c = ConversationId("c".into());
    assert_eq!(store.summary(&bay, &c).await.unwrap(), None);

    let first = stored(
        store
            .put_summary(&bay, &c, summary("m5", 5, "one"))
            .await
            .unwrap(),
    );
    assert_eq!(first.memory.version, 1);
    assert_eq!(store.summary(&bay, &c).await.unwrap(), Some(first.clone()));

    // The same boundary again is a rewrite.
    let again = stored(
        store
            .put_summary(&bay, &c, summary("m5", 5, "two"))
            .await
            .unwrap(),
    );
    assert_eq!(again.memory.version, 2);
    assert_eq!(again.memory.summary, "two");

    // An older boundary changes nothing and names what is stored.
    match store
        .put_summary(&bay, &c, summary("m3", 3, "old"))
        .await
        .unwrap()
    {
        SummaryWritten::Stale(current) => assert_eq!(current, again),
        other => panic!("expected Stale, got {other:?}"),
    }
    assert_eq!(store.summary(&bay, &c).await.unwrap(), Some(again));

    let later = stored(
        store
            .put_summary(&bay, &c, summary("m9", 9, "three"))
            .await
            .unwrap(),
    );
    assert_eq!(later.memory.version, 3);
    assert_eq!(later.through_seq, 9);
    let read = store.summary(&bay, &c).await.unwrap().unwrap();
    assert_eq!(read, later);
    assert_eq!(read.memory.open_tasks[0].owner.as_deref(), Some("Ana"));
}

async fn summaries_are_kept_per_conversation(store: Arc<dyn Store>) {
    let store = &*store;
    let (bay, other_bay) = (BayId(unique("bay_")), BayId(unique("bay_")));
    let (a, b) = (ConversationId("a".into()), ConversationId("b".into()));
    stored(
        store
            .put_summary(&bay, &a, summary("m2", 2, "a"))
            .await
            .unwrap(),
    );
    assert_eq!(store.summary(&bay, &b).await.unwrap(), None);
    assert_eq!(store.summary(&other_bay, &a).await.unwrap(), None);
    // Another conversation's versions start at 1 and its boundary is its own.
    let first_b = stored(
        store
            .put_summary(&bay, &b, summary("m1", 1, "b"))
            .await
            .unwrap(),
    );
    assert_eq!(first_b.memory.version, 1);
}

async fn a_bay_has_one_summarizer_until_cleared(store: Arc<dyn Store>) {
    let store = &*store;
    let (bay, other_bay) = (BayId(unique("bay_")), BayId(unique("bay_")));
    assert_eq!(store.summarizer(&bay).await.unwrap(), None);
    let brain = ParticipantId("brain".into());
    let scribe = ParticipantId("scribe".into());
    store.set_summarizer(&bay, Some(&brain)).await.unwrap();
    assert_eq!(store.summarizer(&bay).await.unwrap(), Some(brain));
    assert_eq!(store.summarizer(&other_bay).await.unwrap(), None);
    store.set_summarizer(&bay, Some(&scribe)).await.unwrap();
    assert_eq!(store.summarizer(&bay).await.unwrap(), Some(scribe));
    store.set_summarizer(&bay, None).await.unwrap();
    assert_eq!(store.summarizer(&bay).await.unwrap(), None);
    // Clearing what is not set is harmless.
    store.set_summarizer(&bay, None).await.unwrap();
}

async fn refreshes_fit_a_sliding_window(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = BayId(unique("bay_"));
    let (c, d) = (ConversationId("c".into()), ConversationId("d".into()));
    let window = Duration::from_millis(800);
    for _ in 0..3 {
        assert_eq!(
            store
                .take_summary_refresh(&bay, &c, 3, window)
                .await
                .unwrap(),
            RefreshSlot::Taken
        );
    }
    match store
        .take_summary_refresh(&bay, &c, 3, window)
        .await
        .unwrap()
    {
        RefreshSlot::Limited { retry_after } => {
            assert!(
                retry_after > Duration::ZERO && retry_after <= window,
                "{retry_after:?}"
            );
        }
        RefreshSlot::Taken => panic!("a fourth refresh in the window was counted"),
    }
    // Each conversation has its own budget.
    assert_eq!(
        store
            .take_summary_refresh(&bay, &d, 3, window)
            .await
            .unwrap(),
        RefreshSlot::Taken
    );
    // Once the window passed, refreshes are counted again.
    tokio::time::sleep(window + Duration::from_millis(200)).await;
    assert_eq!(
        store
            .take_summary_refresh(&bay, &c, 3, window)
            .await
            .unwrap(),
        RefreshSlot::Taken
    );
}
