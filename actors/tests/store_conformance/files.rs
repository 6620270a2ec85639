//! Attachments: uploads, all-or-nothing claims, links, the library, the
//! sweep of unsent uploads and the files of a deleted message, the same on
//! every engine.

use super::common::unique;
use std::sync::Arc;
use switchboard_actors::store::{now_ms, Claim, Created, FileLink, Store, StoredFile};
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId};

conformance!(
    an_upload_is_stored_once_and_read_back_unsent,
    a_claim_is_all_or_nothing,
    a_claim_refuses_other_uploaders_bays_and_repeats,
    linked_files_join_the_library_newest_first_with_totals,
    a_sent_file_cannot_be_sent_again_but_its_own_token_can,
    a_released_or_lapsed_claim_frees_the_files,
    expired_unsent_uploads_are_swept_and_sent_ones_are_not,
    a_deleted_messages_files_are_gone_and_leave_the_library,
    concurrent_claims_of_one_file_have_one_winner,
);

const HOUR: u64 = 3_600_000;

fn upload(bay: &BayId, uploader: &ParticipantId, size: u64, expires_at_ms: u64) -> StoredFile {
    StoredFile {
        id: unique("att_"),
        bay: bay.clone(),
        uploader: uploader.clone(),
        sealed_name: unique("sealed"),
        mime: "image/png".into(),
        size,
        created_at_ms: now_ms(),
        expires_at_ms,
    }
}

async fn stored(store: &Arc<dyn Store>, file: StoredFile) -> String {
    let id = file.id.clone();
    assert_eq!(store.put_file(file).await.unwrap(), Created::Created(()));
    id
}

fn ids(list: &[&String]) -> Vec<String> {
    list.iter().map(|s| (*s).clone()).collect()
}

async fn an_upload_is_stored_once_and_read_back_unsent(store: Arc<dyn Store>) {
    let bay = BayId(unique("b"));
    let me = ParticipantId(unique("a"));
    let file = upload(&bay, &me, 42, now_ms() + HOUR);
    let id = stored(&store, file.clone()).await;
    assert_eq!(
        store.put_file(file.clone()).await.unwrap(),
        Created::AlreadyExists
    );
    let entry = store.file(&bay, &id).await.unwrap().expect("stored");
    assert_eq!(entry.file, file);
    assert_eq!(entry.link, FileLink::Unlinked);
    assert!(store
        .file(&BayId(unique("b")), &id)
        .await
        .unwrap()
        .is_none());
    assert!(store.file(&bay, "att_nope").await.unwrap().is_none());
}

async fn a_claim_is_all_or_nothing(store: Arc<dyn Store>) {
    let bay = BayId(unique("b"));
    let me = ParticipantId(unique("a"));
    let a = stored(&store, upload(&bay, &me, 1, now_ms() + HOUR)).await;
    let b = stored(&store, upload(&bay, &me, 2, now_ms() + HOUR)).await;
    let unknown = unique("att_");
    let until = now_ms() + 60_000;
    let claim = store
        .claim_files(&bay, &me, &ids(&[&a, &unknown, &b]), "t1", until)
        .await
        .unwrap();
    assert_eq!(claim, Claim::Conflict);
    for id in [&a, &b] {
        let link = store.file(&bay, id).await.unwrap().unwrap().link;
        assert_eq!(link, FileLink::Unlinked, "nothing claimed on a conflict");
    }
    match store
        .claim_files(&bay, &me, &ids(&[&b, &a]), "t1", until)
        .await
        .unwrap()
    {
        Claim::Claimed(files) => {
            let got: Vec<&str> = files.iter().map(|f| f.id.as_str()).collect();
            assert_eq!(got, [b.as_str(), a.as_str()], "in the order asked");
        }
        Claim::Conflict => panic!("both are mine and unsent"),
    }
    // Held by t1: another send is refused.
    let other = store
        .claim_files(&bay, &me, &ids(&[&a]), "t2", until)
        .await
        .unwrap();
    assert_eq!(other, Claim::Conflict);
}

async fn a_claim_refuses_other_uploaders_bays_and_repeats(store: Arc<dyn Store>) {
    let bay = BayId(unique("b"));
    let me = ParticipantId(unique("a"));
    let you = ParticipantId(unique("a"));
    let mine = stored(&store, upload(&bay, &me, 1, now_ms() + HOUR)).await;
    let until = now_ms() + 60_000;
    let by_you = store
        .claim_files(&bay, &you, &ids(&[&mine]), "t", until)
        .await
        .unwrap();
    assert_eq!(by_you, Claim::Conflict);
    let other_bay = BayId(unique("b"));
    let elsewhere = store
        .claim_files(&other_bay, &me, &ids(&[&mine]), "t", until)
        .await
        .unwrap();
    assert_eq!(elsewhere, Claim::Conflict);
    let twice = store
        .claim_files(&bay, &me, &ids(&[&mine, &mine]), "t", until)
        .await
        .unwrap();
    assert_eq!(twice, Claim::Conflict);
    assert_eq!(
        store.file(&bay, &mine).await.unwrap().unwrap().link,
        FileLink::Unlinked
    );
}

async fn linked_files_join_the_library_newest_first_with_totals(store: Arc<dyn Store>) {
    let bay = BayId(unique("b"));
    let me = ParticipantId(unique("a"));
    let conv = ConversationId(unique("c"));
    let until = now_ms() + 60_000;
    let mut sent = Vec::new();
    for (n, size) in [10u64, 20, 30].into_iter().enumerate() {
        let id = stored(&store, upload(&bay, &me, size, now_ms() + HOUR)).await;
        let token = format!("t{n}");
        assert!(matches!(
            store
                .claim_files(&bay, &me, &ids(&[&id]), &token, until)
                .await
                .unwrap(),
            Claim::Claimed(_)
        ));
        let msg = MessageId(unique("msg_"));
        let linked = store
            .link_files(&bay, &ids(&[&id]), &token, &conv, &msg)
            .await
            .unwrap();
        assert_eq!(linked, 1);
        match store.file(&bay, &id).await.unwrap().unwrap().link {
            FileLink::Sent {
                conversation,
                message,
                ..
            } => {
                assert_eq!(conversation, conv);
                assert_eq!(message, msg);
            }
            other => panic!("not sent: {other:?}"),
        }
        sent.push(id);
    }
    // An unsent upload is not in the library.
    stored(&store, upload(&bay, &me, 99, now_ms() + HOUR)).await;
    let first = store
        .conversation_files(&bay, &conv, None, 2)
        .await
        .unwrap();
    assert_eq!((first.total_files, first.total_bytes), (3, 60));
    let got: Vec<&str> = first.files.iter().map(|e| e.file.id.as_str()).collect();
    assert_eq!(got, [sent[2].as_str(), sent[1].as_str()]);
    let before = match &first.files.last().unwrap().link {
        FileLink::Sent { seq, .. } => *seq,
        other => panic!("listed but not sent: {other:?}"),
    };
    let next = store
        .conversation_files(&bay, &conv, Some(before), 2)
        .await
        .unwrap();
    let got: Vec<&str> = next.files.iter().map(|e| e.file.id.as_str()).collect();
    assert_eq!(got, [sent[0].as_str()]);
    let empty = store
        .conversation_files(&bay, &ConversationId(unique("c")), None, 10)
        .await
        .unwrap();
    assert_eq!(
        (empty.files.len(), empty.total_files, empty.total_bytes),
        (0, 0, 0)
    );
}

async fn a_sent_file_cannot_be_sent_again_but_its_own_token_can(store: Arc<dyn Store>) {
    let bay = BayId(unique("b"));
    let me = ParticipantId(unique("a"));
    let conv = ConversationId(unique("c"));
    let id = stored(&store, upload(&bay, &me, 5, now_ms() + HOUR)).await;
    let until = now_ms() + 60_000;
    store
        .claim_files(&bay, &me, &ids(&[&id]), "first", until)
        .await
        .unwrap();
    let msg = MessageId(unique("msg_"));
    store
        .link_files(&bay, &ids(&[&id]), "first", &conv, &msg)
        .await
        .unwrap();
    let again = store
        .claim_files(&bay, &me, &ids(&[&id]), "second", until)
        .await
        .unwrap();
    assert_eq!(again, Claim::Conflict);
    // A retried idempotent send presents the same token and finds its files.
    let retry = store
        .claim_files(&bay, &me, &ids(&[&id]), "first", until)
        .await
        .unwrap();
    assert!(matches!(retry, Claim::Claimed(_)));
    // ...without linking them twice.
    let twice = store
        .link_files(&bay, &ids(&[&id]), "first", &conv, &msg)
        .await
        .unwrap();
    assert_eq!(twice, 0);
    let page = store
        .conversation_files(&bay, &conv, None, 10)
        .await
        .unwrap();
    assert_eq!(page.total_files, 1);
}

async fn a_released_or_lapsed_claim_frees_the_files(store: Arc<dyn Store>) {
    let bay = BayId(unique("b"));
    let me = ParticipantId(unique("a"));
    let id = stored(&store, upload(&bay, &me, 5, now_ms() + HOUR)).await;
    let until = now_ms() + 60_000;
    store
        .claim_files(&bay, &me, &ids(&[&id]), "t1", until)
        .await
        .unwrap();
    // Another token's release changes nothing.
    store.release_files(&bay, &ids(&[&id]), "t2").await.unwrap();
    assert!(matches!(
        store.file(&bay, &id).await.unwrap().unwrap().link,
        FileLink::Claimed { .. }
    ));
    store.release_files(&bay, &ids(&[&id]), "t1").await.unwrap();
    assert_eq!(
        store.file(&bay, &id).await.unwrap().unwrap().link,
        FileLink::Unlinked
    );
    // A claim that lapsed (its sender died) does not hold the file.
    store
        .claim_files(&bay, &me, &ids(&[&id]), "t3", now_ms() - 1)
        .await
        .unwrap();
    let taken = store
        .claim_files(&bay, &me, &ids(&[&id]), "t4", until)
        .await
        .unwrap();
    assert!(matches!(taken, Claim::Claimed(_)));
}

async fn expired_unsent_uploads_are_swept_and_sent_ones_are_not(store: Arc<dyn Store>) {
    let bay = BayId(unique("b"));
    let me = ParticipantId(unique("a"));
    let conv = ConversationId(unique("c"));
    let past = now_ms() - 1;
    let old = stored(&store, upload(&bay, &me, 1, past)).await;
    let young = stored(&store, upload(&bay, &me, 1, now_ms() + HOUR)).await;
    let sent = stored(&store, upload(&bay, &me, 1, past)).await;
    store
        .claim_files(&bay, &me, &ids(&[&sent]), "t", now_ms() + 60_000)
        .await
        .unwrap();
    store
        .link_files(&bay, &ids(&[&sent]), "t", &conv, &MessageId(unique("msg_")))
        .await
        .unwrap();
    let due: Vec<String> = store
        .expired_uploads(now_ms(), 1000)
        .await
        .unwrap()
        .into_iter()
        .filter(|f| f.bay == bay)
        .map(|f| f.id)
        .collect();
    assert_eq!(due, std::slice::from_ref(&old));
    assert!(store.delete_upload(&bay, &old, now_ms()).await.unwrap());
    assert!(
        !store.delete_upload(&bay, &old, now_ms()).await.unwrap(),
        "once"
    );
    assert!(store.file(&bay, &old).await.unwrap().is_none());
    assert!(!store.delete_upload(&bay, &sent, now_ms()).await.unwrap());
    assert!(store.file(&bay, &sent).await.unwrap().is_some());
    assert!(store.file(&bay, &young).await.unwrap().is_some());
    // A file under a live claim is not deleted.
    let held = stored(&store, upload(&bay, &me, 1, past)).await;
    store
        .claim_files(&bay, &me, &ids(&[&held]), "h", now_ms() + 60_000)
        .await
        .unwrap();
    assert!(!store.delete_upload(&bay, &held, now_ms()).await.unwrap());
}

async fn a_deleted_messages_files_are_gone_and_leave_the_library(store: Arc<dyn Store>) {
    let bay = BayId(unique("b"));
    let me = ParticipantId(unique("a"));
    let conv = ConversationId(unique("c"));
    let a = stored(&store, upload(&bay, &me, 7, now_ms() + HOUR)).await;
    let b = stored(&store, upload(&bay, &me, 8, now_ms() + HOUR)).await;
    let keep = stored(&store, upload(&bay, &me, 100, now_ms() + HOUR)).await;
    let until = now_ms() + 60_000;
    let msg = MessageId(unique("msg_"));
    store
        .claim_files(&bay, &me, &ids(&[&a, &b]), "t", until)
        .await
        .unwrap();
    store
        .link_files(&bay, &ids(&[&a, &b]), "t", &conv, &msg)
        .await
        .unwrap();
    store
        .claim_files(&bay, &me, &ids(&[&keep]), "k", until)
        .await
        .unwrap();
    store
        .link_files(&bay, &ids(&[&keep]), "k", &conv, &MessageId(unique("msg_")))
        .await
        .unwrap();
    let mut dropped: Vec<String> = store
        .drop_message_files(&bay, &conv, &msg)
        .await
        .unwrap()
        .into_iter()
        .map(|f| f.id)
        .collect();
    dropped.sort();
    let mut want = vec![a.clone(), b.clone()];
    want.sort();
    assert_eq!(dropped, want);
    assert_eq!(
        store.file(&bay, &a).await.unwrap().unwrap().link,
        FileLink::Gone
    );
    let page = store
        .conversation_files(&bay, &conv, None, 10)
        .await
        .unwrap();
    assert_eq!((page.total_files, page.total_bytes), (1, 100));
    assert_eq!(page.files[0].file.id, keep);
    assert!(store
        .drop_message_files(&bay, &conv, &msg)
        .await
        .unwrap()
        .is_empty());
    let again = store
        .claim_files(&bay, &me, &ids(&[&a]), "t", until)
        .await
        .unwrap();
    assert_eq!(again, Claim::Conflict, "a gone file is never sent again");
}

async fn concurrent_claims_of_one_file_have_one_winner(store: Arc<dyn Store>) {
    let bay = BayId(unique("b"));
    let me = ParticipantId(unique("a"));
    let id = stored(&store, upload(&bay, &me, 1, now_ms() + HOUR)).await;
    let until = now_ms() + 60_000;
    let tasks: Vec<_> = (0..8)
        .map(|n| {
            let (store, bay, me, id) = (store.clone(), bay.clone(), me.clone(), id.clone());
            tokio::spawn(async move {
                store
                    .claim_files(&bay, &me, &[id], &format!("t{n}"), until)
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut winners = 0;
    for t in tasks {
        if matches!(t.await.unwrap(), Claim::Claimed(_)) {
            winners += 1;
        }
    }
    assert_eq!(winners, 1);
}
