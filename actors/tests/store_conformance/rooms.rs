//! Rooms by link: one room per conversation, capabilities that open
//! exactly what they were stored with, briefs whose revision moves only on
//! a real change, activity that only moves forward; the same on every engine.

use super::common::unique;
use std::sync::Arc;
use switchboard_actors::store::{
    BriefChange, Created, Room, RoomAuthor, RoomLink, RoomRole, SecretHash, Store, Updated,
    Visibility,
};
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId};

conformance!(
    a_conversation_has_at_most_one_room,
    a_capability_opens_what_it_was_stored_with,
    the_brief_revision_moves_only_on_a_change,
    activity_only_moves_forward,
    authors_are_counted_under_the_cap_and_stay_joined,
    a_rename_moves_the_revision,
);

fn room() -> Room {
    Room {
        bay: BayId(unique("b")),
        conversation: ConversationId(unique("c")),
        name: "lab".into(),
        visibility: Visibility::Public,
        created_at_ms: 1_700_000_000_000,
        brief: Some(MessageId("ignored".into())),
        metadata_revision: 42,
        last_activity_ms: 7,
    }
}

async fn created(store: &dyn Store, r: Room) -> Room {
    match store.create_room(r).await.unwrap() {
        Created::Created(r) => r,
        Created::AlreadyExists => panic!("the room existed"),
    }
}

async fn a_conversation_has_at_most_one_room(store: Arc<dyn Store>) {
    let r = room();
    assert_eq!(
        store.room(&r.bay, &r.conversation).await.unwrap(),
        None,
        "no room before creation"
    );
    let stored = created(&*store, r.clone()).await;
    assert_eq!(stored.metadata_revision, 1, "revisions start at 1");
    assert_eq!(
        stored.last_activity_ms, r.created_at_ms,
        "created counts as activity"
    );
    assert_eq!(
        store.room(&r.bay, &r.conversation).await.unwrap().as_ref(),
        Some(&stored)
    );
    let again = Room {
        name: "other".into(),
        ..r.clone()
    };
    assert_eq!(
        store.create_room(again).await.unwrap(),
        Created::AlreadyExists
    );
    assert_eq!(
        store
            .room(&r.bay, &r.conversation)
            .await
            .unwrap()
            .unwrap()
            .name,
        "lab",
        "the first room stays"
    );
}

async fn a_capability_opens_what_it_was_stored_with(store: Arc<dyn Store>) {
    let r = created(&*store, room()).await;
    let (guest, reader) = (
        SecretHash::of(&unique("cap")),
        SecretHash::of(&unique("cap")),
    );
    let link = |role| RoomLink {
        bay: r.bay.clone(),
        conversation: r.conversation.clone(),
        role,
    };
    assert_eq!(
        store
            .create_room_link(&guest, link(RoomRole::Guest))
            .await
            .unwrap(),
        Created::Created(())
    );
    assert_eq!(
        store
            .create_room_link(&reader, link(RoomRole::Reader))
            .await
            .unwrap(),
        Created::Created(())
    );
    assert_eq!(
        store
            .create_room_link(&guest, link(RoomRole::Owner))
            .await
            .unwrap(),
        Created::AlreadyExists,
        "a taken hash keeps its role"
    );
    assert_eq!(
        store.room_link(&guest).await.unwrap(),
        Some(link(RoomRole::Guest))
    );
    assert_eq!(
        store.room_link(&reader).await.unwrap(),
        Some(link(RoomRole::Reader))
    );
    assert_eq!(
        store.room_link(&SecretHash::of("unknown")).await.unwrap(),
        None
    );
}

async fn the_brief_revision_moves_only_on_a_change(store: Arc<dyn Store>) {
    let r = created(&*store, room()).await;
    let (a, b) = (MessageId(unique("msg_")), MessageId(unique("msg_")));
    let brief = |change| {
        let store = store.clone();
        let (bay, conv) = (r.bay.clone(), r.conversation.clone());
        async move {
            match store.set_brief(&bay, &conv, change).await.unwrap() {
                Updated::Updated(room) => (room.brief, room.metadata_revision),
                Updated::NotFound => panic!("the room exists"),
            }
        }
    };
    assert_eq!(
        brief(BriefChange::Pin(a.clone())).await,
        (Some(a.clone()), 2)
    );
    assert_eq!(
        brief(BriefChange::Pin(a.clone())).await,
        (Some(a.clone()), 2),
        "pinning again changes nothing"
    );
    assert_eq!(
        brief(BriefChange::Unpin(b.clone())).await,
        (Some(a.clone()), 2),
        "unpinning another keeps the brief"
    );
    assert_eq!(
        brief(BriefChange::Pin(b.clone())).await,
        (Some(b.clone()), 3),
        "a new pin replaces"
    );
    assert_eq!(brief(BriefChange::Unpin(b.clone())).await, (None, 4));
    assert_eq!(brief(BriefChange::Unpin(b)).await, (None, 4));
    assert_eq!(
        store
            .set_brief(&BayId(unique("b")), &r.conversation, BriefChange::Pin(a))
            .await
            .unwrap(),
        Updated::NotFound
    );
}

async fn activity_only_moves_forward(store: Arc<dyn Store>) {
    let r = created(&*store, room()).await;
    let at = |s: Arc<dyn Store>, r: Room| async move {
        s.room(&r.bay, &r.conversation)
            .await
            .unwrap()
            .unwrap()
            .last_activity_ms
    };
    store
        .touch_room(&r.bay, &r.conversation, r.created_at_ms + 500)
        .await
        .unwrap();
    assert_eq!(at(store.clone(), r.clone()).await, r.created_at_ms + 500);
    store
        .touch_room(&r.bay, &r.conversation, r.created_at_ms + 100)
        .await
        .unwrap();
    assert_eq!(
        at(store.clone(), r.clone()).await,
        r.created_at_ms + 500,
        "never back"
    );
    // A brief change keeps the activity, and the other way round.
    store
        .set_brief(
            &r.bay,
            &r.conversation,
            BriefChange::Pin(MessageId("msg_x".into())),
        )
        .await
        .unwrap();
    assert_eq!(at(store.clone(), r.clone()).await, r.created_at_ms + 500);
    let after = store.room(&r.bay, &r.conversation).await.unwrap().unwrap();
    assert_eq!(after.brief, Some(MessageId("msg_x".into())));
    // Touching an unknown room creates nothing.
    let ghost = ConversationId(unique("c"));
    store.touch_room(&r.bay, &ghost, 1).await.unwrap();
    assert_eq!(store.room(&r.bay, &ghost).await.unwrap(), None);
}

async fn authors_are_counted_under_the_cap_and_stay_joined(store: Arc<dyn Store>) {
    let r = room();
    let (b, c) = (&r.bay, &r.conversation);
    let (a1, a2, a3) = (
        ParticipantId("p_link_a".into()),
        ParticipantId("p_link_b".into()),
        ParticipantId("p_link_c".into()),
    );
    assert_eq!(
        store.admit_room_author(b, c, &a1, 2).await.unwrap(),
        RoomAuthor::New
    );
    assert_eq!(
        store.admit_room_author(b, c, &a1, 2).await.unwrap(),
        RoomAuthor::Pending,
        "counted, not joined yet"
    );
    store.room_author_joined(b, c, &a1).await.unwrap();
    assert_eq!(
        store.admit_room_author(b, c, &a1, 2).await.unwrap(),
        RoomAuthor::Joined
    );
    assert_eq!(
        store.admit_room_author(b, c, &a2, 2).await.unwrap(),
        RoomAuthor::New
    );
    assert_eq!(
        store.admit_room_author(b, c, &a3, 2).await.unwrap(),
        RoomAuthor::Full,
        "a third author past a cap of two"
    );
    assert_eq!(
        store.admit_room_author(b, c, &a3, 2).await.unwrap(),
        RoomAuthor::Full,
        "a refusal counted nothing"
    );
    assert_eq!(
        store.admit_room_author(b, c, &a2, 2).await.unwrap(),
        RoomAuthor::Pending,
        "known authors pass a full room"
    );
    assert_eq!(
        store.admit_room_author(b, c, &a3, u32::MAX).await.unwrap(),
        RoomAuthor::New
    );
    let other = ConversationId(unique("c"));
    assert_eq!(
        store.admit_room_author(b, &other, &a1, 1).await.unwrap(),
        RoomAuthor::New,
        "counted per room"
    );
}

async fn a_rename_moves_the_revision(store: Arc<dyn Store>) {
    let r = room();
    assert_eq!(
        store
            .rename_room(&r.bay, &r.conversation, "x")
            .await
            .unwrap(),
        Updated::NotFound
    );
    let stored = created(&*store, r.clone()).await;
    let Updated::Updated(renamed) = store
        .rename_room(&r.bay, &r.conversation, "launch")
        .await
        .unwrap()
    else {
        panic!("the room exists");
    };
    assert_eq!(renamed.name, "launch");
    assert!(renamed.metadata_revision > stored.metadata_revision);
    let again = store
        .rename_room(&r.bay, &r.conversation, "launch")
        .await
        .unwrap();
    assert_eq!(
        again,
        Updated::Updated(renamed.clone()),
        "the same name changes nothing"
    );
    let read = store.room(&r.bay, &r.conversation).await.unwrap().unwrap();
    assert_eq!(read, renamed);
}
