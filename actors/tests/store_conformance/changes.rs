//! Message changes: edits, deletes, reactions and votes, and polls found by id.

use super::common::{message, new_bay, new_group, new_participant, Append};
use super::{change, changed, head, history, logged, revision_of};
use chrono::Utc;
use serde_json::json;
use std::sync::Arc;
use switchboard_actors::model::{Conversation, Member, Reaction};
use switchboard_actors::store::log::{Change, LogEvent};
use switchboard_actors::store::{Changed, MessageChange, NewMessage, ReadState, Store};
use switchboard_protocol::card::{Card, CardType};
use switchboard_protocol::event::ConversationRef;
use switchboard_protocol::ids::{ConversationId, MessageId, ParticipantId};
use switchboard_protocol::model::{ParticipantKind, Role, SenderType};
use switchboard_protocol::poll::PollState;

conformance!(
    changes_replace_the_message_and_log_the_change,
    polls_are_found_by_id,
    cards_polls_and_reactions_round_trip_through_changes,
    unread_counts_leave_deleted_messages_out,
);

async fn changes_replace_the_message_and_log_the_change(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (ana, _) = new_participant(store, &bay.id, "ana", ParticipantKind::User).await;
    let (rex, _) = new_participant(store, &bay.id, "rex", ParticipantKind::Agent).await;
    let (bob, _) = new_participant(store, &bay.id, "bob", ParticipantKind::User).await;
    let c = new_group(
        store,
        &bay.id,
        "c_change",
        &[(&ana, Role::Admin), (&rex, Role::Member)],
        5,
    )
    .await;
    let mut sent = Vec::new();
    for (i, sender) in [&ana, &rex, &ana].into_iter().enumerate() {
        let a = store
            .append(
                &bay.id,
                message(&c, sender, &format!("message {i}"), None),
                sender.kind,
            )
            .await
            .unwrap();
        sent.push(a.message);
    }
    let (m1, m2, m3) = (sent[0].clone(), sent[1].clone(), sent[2].clone());
    assert_eq!(m2.version, 0);
    let all_since = m1.created_at - chrono::Duration::days(1);

    // An edit at the stored version + 1.
    let before = head(store, &bay.id).await;
    let mut edited = m2.clone();
    edited.content = "message 1, edited".into();
    edited.edited_at = Some(Utc::now());
    edited.version = m2.version + 1;
    let edit = Change::Edited {
        message: edited.clone(),
    };
    let entry = changed(change(store, &bay.id, &c, edited.clone(), edit.clone()).await);
    assert_eq!(head(store, &bay.id).await.entry, entry);
    assert_eq!(
        logged(store, &bay.id, &before).await,
        vec![(
            entry,
            LogEvent::Change {
                conversation: c.reference(),
                change: Box::new(edit),
            }
        )]
    );
    assert_eq!(
        store.message(&bay.id, &c.id, &m2.id).await.unwrap(),
        Some(edited.clone())
    );
    let now = vec![m1.clone(), edited.clone(), m3.clone()];
    assert_eq!(history(store, &bay.id, &c.id).await, now);
    assert_eq!(
        store
            .messages_since(&bay.id, &c.id, all_since, 10)
            .await
            .unwrap(),
        now
    );
    assert_eq!(
        store
            .messages_before(&bay.id, &c.id, Some(&m3.id), 10)
            .await
            .unwrap(),
        (vec![m1.clone(), edited.clone()], false)
    );

    // A change made from the old version (or skipping one): Conflict, nothing logged.
    let after_edit = head(store, &bay.id).await;
    for version in [edited.version, edited.version + 2] {
        let mut late = m2.clone();
        late.content = format!("lost edit at version {version}");
        late.version = version;
        assert_eq!(
            change(
                store,
                &bay.id,
                &c,
                late.clone(),
                Change::Edited { message: late }
            )
            .await,
            Changed::Conflict,
            "version {version} over stored {}",
            edited.version
        );
    }
    assert_eq!(head(store, &bay.id).await, after_edit);
    assert_eq!(history(store, &bay.id, &c.id).await, now);

    // A delete: the tombstone replaces the message.
    let at = Utc::now();
    let mut tomb = edited.clone();
    tomb.tombstone(at);
    tomb.version = edited.version + 1;
    let deletion = Change::Deleted {
        message: m2.id.clone(),
        at,
        by: ana.id.clone(),
    };
    let entry = changed(change(store, &bay.id, &c, tomb.clone(), deletion.clone()).await);
    assert_eq!(
        logged(store, &bay.id, &after_edit).await,
        vec![(
            entry,
            LogEvent::Change {
                conversation: c.reference(),
                change: Box::new(deletion),
            }
        )]
    );
    let got = store
        .message(&bay.id, &c.id, &m2.id)
        .await
        .unwrap()
        .expect("a tombstone stays in history");
    assert!(got.is_deleted());
    assert_eq!((got.content.as_str(), got.deleted_at), ("", Some(at)));
    assert_eq!((got.seq, got.version), (m2.seq, 2));
    assert_eq!(got, tomb);
    let now = vec![m1.clone(), tomb.clone(), m3.clone()];
    assert_eq!(history(store, &bay.id, &c.id).await, now);
    assert_eq!(
        store
            .messages_since(&bay.id, &c.id, all_since, 10)
            .await
            .unwrap(),
        now
    );

    // Authorized at a revision the conversation has moved past: Stale.
    let old_revision = revision_of(store, &bay.id, &c.id).await;
    store
        .upsert_member(
            &bay.id,
            &c.id,
            Member {
                participant: bob.id.clone(),
                role: Role::Member,
            },
        )
        .await
        .unwrap();
    let after_roster = head(store, &bay.id).await;
    let mut m3_edited = m3.clone();
    m3_edited.content = "message 2, edited".into();
    m3_edited.version = 1;
    let stale = MessageChange {
        conversation: c.reference(),
        revision: old_revision,
        message: m3_edited.clone(),
        change: Change::Edited {
            message: m3_edited.clone(),
        },
    };
    assert_eq!(
        store.change_message(&bay.id, stale.clone()).await.unwrap(),
        Changed::Stale
    );
    assert_eq!(head(store, &bay.id).await, after_roster, "nothing logged");
    assert_eq!(
        store.message(&bay.id, &c.id, &m3.id).await.unwrap(),
        Some(m3.clone())
    );
    // The same change at the current revision goes through.
    let current = MessageChange {
        revision: revision_of(store, &bay.id, &c.id).await,
        ..stale
    };
    changed(store.change_message(&bay.id, current).await.unwrap());
    assert_eq!(
        store.message(&bay.id, &c.id, &m3.id).await.unwrap(),
        Some(m3_edited.clone())
    );

    // Unknown message, a message of another conversation, an unknown
    // conversation: NotFound, nothing logged.
    let c2 = new_group(store, &bay.id, "c_change2", &[(&ana, Role::Admin)], 5).await;
    let foreign = store
        .append(&bay.id, message(&c2, &ana, "in c2", None), ana.kind)
        .await
        .unwrap()
        .message;
    let quiet = head(store, &bay.id).await;
    let mut ghost = m1.clone();
    ghost.id = MessageId("m_none".into());
    ghost.version = 1;
    assert_eq!(
        change(
            store,
            &bay.id,
            &c,
            ghost.clone(),
            Change::Edited {
                message: ghost.clone()
            }
        )
        .await,
        Changed::NotFound
    );
    let mut foreign_edit = foreign.clone();
    foreign_edit.version = 1;
    foreign_edit.content = "moved".into();
    assert_eq!(
        change(
            store,
            &bay.id,
            &c,
            foreign_edit.clone(),
            Change::Edited {
                message: foreign_edit
            }
        )
        .await,
        Changed::NotFound
    );
    let nowhere = ConversationRef {
        id: ConversationId("c_none".into()),
        ..c.reference()
    };
    let mut m1_edit = m1.clone();
    m1_edit.version = 1;
    assert_eq!(
        store
            .change_message(
                &bay.id,
                MessageChange {
                    conversation: nowhere,
                    revision: 0,
                    message: m1_edit.clone(),
                    change: Change::Edited { message: m1_edit },
                }
            )
            .await
            .unwrap(),
        Changed::NotFound
    );
    assert_eq!(head(store, &bay.id).await, quiet);
    assert_eq!(
        history(store, &bay.id, &c.id).await,
        vec![m1, tomb, m3_edited]
    );
    assert_eq!(history(store, &bay.id, &c2.id).await, vec![foreign]);
}

fn lunch_poll(id: &str, asked_by: &ParticipantId) -> PollState {
    PollState::new(
        id,
        "Lunch?".into(),
        vec!["Pizza".into(), "Sushi".into(), "Ramen".into()],
        false,
        asked_by.clone(),
    )
}

/// A `card.poll` message from `sender` in `c`.
fn with_poll(
    c: &Conversation,
    sender: &switchboard_actors::model::Participant,
    poll: PollState,
) -> NewMessage {
    let mut m = message(c, sender, &poll.fallback_content(), None);
    m.message.poll = Some(poll);
    m
}

async fn polls_are_found_by_id(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (ana, _) = new_participant(store, &bay.id, "ana", ParticipantKind::User).await;
    let g = new_group(store, &bay.id, "g", &[(&ana, Role::Member)], 5).await;
    let g2 = new_group(store, &bay.id, "g2", &[(&ana, Role::Member)], 5).await;
    assert_eq!(
        store.poll_message(&bay.id, "poll_lunch").await.unwrap(),
        None
    );

    let poll = lunch_poll("poll_lunch", &ana.id);
    let lunch = store
        .append(&bay.id, with_poll(&g, &ana, poll.clone()), ana.kind)
        .await
        .unwrap()
        .message;
    assert_eq!(lunch.poll, Some(poll));
    let dinner = store
        .append(
            &bay.id,
            with_poll(&g2, &ana, lunch_poll("poll_dinner", &ana.id)),
            ana.kind,
        )
        .await
        .unwrap()
        .message;
    store
        .append(&bay.id, message(&g, &ana, "not a poll", None), ana.kind)
        .await
        .unwrap();
    assert_eq!(
        store.poll_message(&bay.id, "poll_lunch").await.unwrap(),
        Some((g.id.clone(), lunch.id.clone()))
    );
    assert_eq!(
        store.poll_message(&bay.id, "poll_dinner").await.unwrap(),
        Some((g2.id.clone(), dinner.id.clone()))
    );
    assert_eq!(
        store.poll_message(&bay.id, "poll_none").await.unwrap(),
        None
    );
    assert_eq!(store.poll_message(&bay.id, "").await.unwrap(), None);

    // Poll ids are per Bay.
    let other = new_bay(store).await;
    assert_eq!(
        store.poll_message(&other.id, "poll_lunch").await.unwrap(),
        None
    );
    let (ana2, _) = new_participant(store, &other.id, "ana", ParticipantKind::User).await;
    let og = new_group(store, &other.id, "og", &[(&ana2, Role::Member)], 5).await;
    let theirs = store
        .append(
            &other.id,
            with_poll(&og, &ana2, lunch_poll("poll_lunch", &ana2.id)),
            ana2.kind,
        )
        .await
        .unwrap()
        .message;
    assert_eq!(
        store.poll_message(&other.id, "poll_lunch").await.unwrap(),
        Some((og.id.clone(), theirs.id))
    );
    assert_eq!(
        store.poll_message(&bay.id, "poll_lunch").await.unwrap(),
        Some((g.id.clone(), lunch.id))
    );
}

async fn cards_polls_and_reactions_round_trip_through_changes(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (ana, _) = new_participant(store, &bay.id, "ana", ParticipantKind::User).await;
    let (rex, _) = new_participant(store, &bay.id, "rex", ParticipantKind::Agent).await;
    let c = new_group(
        store,
        &bay.id,
        "c_rich",
        &[(&ana, Role::Member), (&rex, Role::Member)],
        5,
    )
    .await;
    let start = head(store, &bay.id).await;

    // A card with awkward JSON (a fake hole, unicode, big numbers, empties).
    let mut carded = message(&c, &rex, "Launch review ✓", None);
    carded.message.metadata = Some(json!({"big": 12345678901234567890u64, "empty": []}));
    carded.message.card = Some(Card {
        kind: CardType::Calendar,
        payload: json!({
            "title": "Launch \"__sb_hole_0__\" review 🚀",
            "start": "2026-09-21T10:00:00+02:00",
            "end": "2026-09-21T11:00:00+02:00",
            "attendees": [{"name": "Ana", "address": "ana@example.com"}],
            "notes": "line 1\nline 2 \\ backslash",
        }),
    });
    // The sender's `usage` rides along through every change below.
    carded.message.usage = switchboard_protocol::usage::validate_usage(&json!({
        "model": "m \"__sb_hole_1__\"",
        "inputTokens": 812,
    }))
    .unwrap();
    let carded_in = carded.message.clone();
    let carded = store
        .append(&bay.id, carded, rex.kind)
        .await
        .unwrap()
        .message;
    let mut expected = carded_in;
    expected.created_at = carded.created_at;
    expected.seq = 1;
    assert_eq!(carded, expected);

    let poll = lunch_poll("poll_rich", &ana.id);
    let polled = store
        .append(&bay.id, with_poll(&c, &ana, poll.clone()), ana.kind)
        .await
        .unwrap()
        .message;
    assert_eq!(polled.poll, Some(poll.clone()));
    assert_eq!(polled.seq, 2);
    assert_eq!(
        history(store, &bay.id, &c.id).await,
        vec![carded.clone(), polled.clone()]
    );

    // Reactions on the card, then a vote and a close on the poll.
    let mut reacted = carded.clone();
    reacted.reactions = vec![
        Reaction {
            emoji: "👍🏽".into(),
            by: vec![ana.id.clone(), rex.id.clone()],
        },
        Reaction {
            emoji: "\"🎉\"".into(),
            by: vec![ana.id.clone()],
        },
    ];
    reacted.version = 1;
    let reaction = Change::Reaction {
        message: reacted.id.clone(),
        emoji: "👍🏽".into(),
        participant: rex.id.clone(),
        count: 2,
        added: true,
    };
    let e1 = changed(change(store, &bay.id, &c, reacted.clone(), reaction.clone()).await);
    let mut voted = polled.clone();
    let tally = voted.poll.as_mut().unwrap();
    assert!(tally.cast(rex.id.clone(), SenderType::Agent, vec![2], Utc::now()));
    assert!(tally.cast(ana.id.clone(), SenderType::User, vec![0], Utc::now()));
    assert!(tally.close());
    voted.version = 1;
    let vote = Change::Poll {
        message: voted.id.clone(),
        poll: voted.poll.clone().unwrap(),
    };
    let e2 = changed(change(store, &bay.id, &c, voted.clone(), vote.clone()).await);

    assert_eq!(
        store.message(&bay.id, &c.id, &carded.id).await.unwrap(),
        Some(reacted.clone())
    );
    assert_eq!(
        store.message(&bay.id, &c.id, &polled.id).await.unwrap(),
        Some(voted.clone())
    );
    let now = vec![reacted.clone(), voted.clone()];
    assert_eq!(history(store, &bay.id, &c.id).await, now);
    assert_eq!(
        store
            .messages_since(
                &bay.id,
                &c.id,
                carded.created_at - chrono::Duration::days(1),
                10
            )
            .await
            .unwrap(),
        now
    );
    // The log carries all four exactly as well.
    let entries = logged(store, &bay.id, &start).await;
    let (ids, events): (Vec<_>, Vec<_>) = entries.into_iter().unzip();
    assert_eq!(&ids[2..], &[e1, e2]);
    assert_eq!(
        events,
        vec![
            LogEvent::Message {
                conversation: c.reference(),
                message: Box::new(carded),
            },
            LogEvent::Message {
                conversation: c.reference(),
                message: Box::new(polled),
            },
            LogEvent::Change {
                conversation: c.reference(),
                change: Box::new(reaction),
            },
            LogEvent::Change {
                conversation: c.reference(),
                change: Box::new(vote),
            },
        ]
    );
}

/// `unread` counts the messages after the marker that are not tombstones;
/// a deletion at or before the marker changes nothing.
async fn unread_counts_leave_deleted_messages_out(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (ana, _) = new_participant(store, &bay.id, "ana", ParticipantKind::User).await;
    let (rex, _) = new_participant(store, &bay.id, "rex", ParticipantKind::Agent).await;
    let c = new_group(
        store,
        &bay.id,
        "c_unread",
        &[(&ana, Role::Admin), (&rex, Role::Member)],
        5,
    )
    .await;
    let mut sent = Vec::new();
    for i in 0..5 {
        let a = store
            .append(&bay.id, message(&c, &ana, &format!("m{i}"), None), ana.kind)
            .await
            .unwrap();
        sent.push(a.message);
    }
    let unread = |who: ParticipantId| {
        let (bay, c) = (bay.id.clone(), c.id.clone());
        async move {
            let states = store.read_states(&bay, &who, &[c]).await.unwrap();
            states.into_iter().next().map(|s: ReadState| s.unread)
        }
    };
    store
        .mark_read(&bay.id, &c.reference(), &rex.id, &sent[1])
        .await
        .unwrap();
    assert_eq!(unread(rex.id.clone()).await, Some(3));
    for (i, expected) in [(3, 2), (1, 2), (4, 1)] {
        let mut tomb = sent[i].clone();
        tomb.tombstone(Utc::now());
        tomb.version += 1;
        let deletion = Change::Deleted {
            message: tomb.id.clone(),
            at: tomb.deleted_at.unwrap(),
            by: ana.id.clone(),
        };
        changed(change(store, &bay.id, &c, tomb, deletion).await);
        assert_eq!(
            unread(rex.id.clone()).await,
            Some(expected),
            "after deleting m{i}"
        );
    }
    // Without a marker every message counts, tombstones not.
    let (bob, _) = new_participant(store, &bay.id, "bob", ParticipantKind::User).await;
    assert_eq!(unread(bob.id.clone()).await, Some(2));
}
