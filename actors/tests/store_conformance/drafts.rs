//! Streaming drafts: deltas, completion and the round counted at completion.

use super::common::{message, new_bay, new_group, new_participant, Append};
use super::{changed, head, history, logged, revision_of};
use std::sync::Arc;
use switchboard_actors::store::log::{Change, LogEvent};
use switchboard_actors::store::{
    Changed, DraftAppend, DraftAppended, MessageChange, RoundStep, Store,
};
use switchboard_protocol::model::{MessageState, ParticipantKind, Role};

conformance!(drafts_stream_close_and_count_their_round_at_completion);

async fn drafts_stream_close_and_count_their_round_at_completion(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (a1, _) = new_participant(store, &bay.id, "p_a1", ParticipantKind::Agent).await;
    let (a2, _) = new_participant(store, &bay.id, "p_a2", ParticipantKind::Agent).await;
    let members = [(&a1, Role::Member), (&a2, Role::Member)];
    let c = new_group(store, &bay.id, "c_draft", &members, 2).await;
    let start = head(store, &bay.id).await;

    // Opening a draft counts no round and asks nothing.
    let mut open = message(&c, &a1, "Hel", Some(2));
    open.message.state = MessageState::Streaming;
    let draft = store.append(&bay.id, open, a1.kind).await.unwrap().message;
    assert!(draft.is_streaming());
    assert_eq!(draft.version, 0);
    let drafts = store.open_drafts(&bay.id).await.unwrap();
    assert_eq!(drafts.len(), 1);
    assert_eq!((&drafts[0].message, &drafts[0].author), (&draft.id, &a1.id));
    assert!(store.draft_bays().await.unwrap().contains(&bay.id));

    // Appends extend the text at the expected version only.
    let revision = revision_of(store, &bay.id, &c.id).await;
    let add = |version: u64, offset: u64, text: &str| DraftAppend {
        conversation: c.reference(),
        message: draft.id.clone(),
        revision,
        version,
        offset,
        text: text.into(),
    };
    let first = store.append_draft(&bay.id, add(0, 3, "lo ")).await.unwrap();
    assert!(
        matches!(first, DraftAppended::Appended { version: 1, .. }),
        "{first:?}"
    );
    assert_eq!(
        store.append_draft(&bay.id, add(0, 6, "x")).await.unwrap(),
        DraftAppended::Conflict
    );
    let stale = DraftAppend {
        revision: revision.wrapping_add(1),
        ..add(1, 6, "x")
    };
    assert_eq!(
        store.append_draft(&bay.id, stale).await.unwrap(),
        DraftAppended::Stale,
        "an append checked against an old roster is refused"
    );
    let second = store
        .append_draft(&bay.id, add(1, 6, "wörld"))
        .await
        .unwrap();
    assert!(matches!(second, DraftAppended::Appended { version: 2, .. }));
    let read = store
        .message(&bay.id, &c.id, &draft.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((read.content.as_str(), read.version), ("Hello wörld", 2));
    assert!(read.is_streaming());
    let page = history(store, &bay.id, &c.id).await;
    assert_eq!(
        page[0].content, "Hello wörld",
        "history shows the text so far"
    );

    // Another agent's message meanwhile: round 1.
    let other = store
        .append(&bay.id, message(&c, &a2, "ok", Some(2)), a2.kind)
        .await
        .unwrap();
    assert!(!other.message.routing.suppressed);

    // Completion counts the draft's round: the 2nd under cap 2 is suppressed.
    let mut done = read.clone();
    done.version = 3;
    done.state = MessageState::Complete;
    let closed = store
        .close_draft(
            &bay.id,
            MessageChange {
                conversation: c.reference(),
                revision,
                message: done.clone(),
                change: Change::Completed {
                    message: done.clone(),
                },
            },
            Some(RoundStep {
                sender: ParticipantKind::Agent,
                cap: Some(2),
            }),
        )
        .await
        .unwrap();
    changed(closed);
    let stored = store
        .message(&bay.id, &c.id, &draft.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.state, MessageState::Complete);
    assert_eq!(
        (stored.content.as_str(), stored.version),
        ("Hello wörld", 3)
    );
    assert!(stored.routing.suppressed, "2nd agent round under cap 2");

    // Closed: no more appends, no second close, no open draft left.
    assert_eq!(
        store.append_draft(&bay.id, add(3, 11, "!")).await.unwrap(),
        DraftAppended::Closed
    );
    let mut again = stored.clone();
    again.version = 4;
    let twice = store
        .close_draft(
            &bay.id,
            MessageChange {
                conversation: c.reference(),
                revision,
                message: again.clone(),
                change: Change::Completed { message: again },
            },
            None,
        )
        .await
        .unwrap();
    assert_eq!(twice, Changed::Conflict);
    assert!(store.open_drafts(&bay.id).await.unwrap().is_empty());
    store.prune_draft_bay(&bay.id).await.unwrap();
    assert!(!store.draft_bays().await.unwrap().contains(&bay.id));

    // The log: the opening, two deltas, the other message, the completion
    // carrying the store's verdict.
    let kinds: Vec<String> = logged(store, &bay.id, &start)
        .await
        .into_iter()
        .map(|(_, e)| match e {
            LogEvent::Message { message, .. } => format!("message:{:?}", message.state),
            LogEvent::Change { change, .. } => match *change {
                Change::Delta { text, version, .. } => format!("delta:{version}:{text}"),
                Change::Completed { message } => {
                    format!("completed:{}", message.routing.suppressed)
                }
                other => format!("{other:?}"),
            },
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "message:Streaming",
            "delta:1:lo ",
            "delta:2:wörld",
            "message:Complete",
            "completed:true"
        ]
    );
}
