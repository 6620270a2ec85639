//! Conversations: members, roster entries, revisions and roster changes.

use super::common::{group, message, new_bay, new_group, new_participant, unique, Append, Limits};
use super::{control, head, read};
use std::sync::Arc;
use std::time::Duration;
use switchboard_actors::model::Member;
use switchboard_actors::store::log::LogEvent;
use switchboard_actors::store::{AppendOutcome, Created, RosterChange, RosterRule, Store, Updated};
use switchboard_protocol::cursor::EntryId;
use switchboard_protocol::ids::{BayId, ConversationId, ParticipantId};
use switchboard_protocol::model::{ConversationType, ParticipantKind, Policy, ReplyPolicy, Role};

conformance!(
    conversations_members_and_roster_entries,
    revisions_refuse_stale_appends,
    roster_changes_name_the_members_before_and_after,
    roster_rules_refuse_changes_that_break_them,
    roster_changes_are_trimmed_with_the_log: Limits { window: Duration::from_secs(900), max_entries: 2 },
);

async fn conversations_members_and_roster_entries(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (u, _) = new_participant(store, &bay.id, "p_user", ParticipantKind::User).await;
    let (a1, _) = new_participant(store, &bay.id, "p_a1", ParticipantKind::Agent).await;
    let (a2, _) = new_participant(store, &bay.id, "p_a2", ParticipantKind::Agent).await;
    let start = head(store, &bay.id).await;

    let c1 = new_group(
        store,
        &bay.id,
        "c_1",
        &[(&u, Role::Admin), (&a1, Role::Member)],
        3,
    )
    .await;
    let c0 = new_group(store, &bay.id, "c_0", &[(&a1, Role::Member)], 3).await;
    assert_eq!(
        store
            .create_conversation(&bay.id, c1.clone())
            .await
            .unwrap(),
        Created::AlreadyExists
    );
    assert_eq!(
        store
            .create_conversation(&BayId(unique("nobay")), c1.clone())
            .await
            .unwrap(),
        Created::AlreadyExists
    );
    assert_eq!(
        store.conversation(&bay.id, &c1.id).await.unwrap(),
        Some(c1.clone())
    );
    assert_eq!(
        store
            .conversation(&bay.id, &ConversationId("c_none".into()))
            .await
            .unwrap(),
        None
    );

    // Add, re-role, remove.
    let Updated::Updated(after_add) = store
        .upsert_member(
            &bay.id,
            &c1.id,
            Member {
                participant: a2.id.clone(),
                role: Role::Member,
            },
        )
        .await
        .unwrap()
    else {
        panic!("upsert failed")
    };
    assert_eq!(
        after_add.member_ids(),
        vec![u.id.clone(), a1.id.clone(), a2.id.clone()]
    );
    let Updated::Updated(after_role) = store
        .upsert_member(
            &bay.id,
            &c1.id,
            Member {
                participant: a1.id.clone(),
                role: Role::Admin,
            },
        )
        .await
        .unwrap()
    else {
        panic!("re-role failed")
    };
    assert_eq!(after_role.member(&a1.id).unwrap().role, Role::Admin);
    assert_eq!(after_role.members.len(), 3);
    let Updated::Updated(after_remove) =
        store.remove_member(&bay.id, &c1.id, &a2.id).await.unwrap()
    else {
        panic!("remove failed")
    };
    assert_eq!(after_remove.member_ids(), vec![u.id.clone(), a1.id.clone()]);
    assert_eq!(
        store.remove_member(&bay.id, &c1.id, &a2.id).await.unwrap(),
        Updated::NotFound,
        "not a member any more"
    );
    let ghost = ConversationId("c_ghost".into());
    assert_eq!(
        store.remove_member(&bay.id, &ghost, &u.id).await.unwrap(),
        Updated::NotFound
    );
    assert_eq!(
        store
            .upsert_member(
                &bay.id,
                &ghost,
                Member {
                    participant: u.id.clone(),
                    role: Role::Member
                }
            )
            .await
            .unwrap(),
        Updated::NotFound
    );

    // Title and policy.
    let policy = Policy {
        agent_reply_policy: ReplyPolicy::Open,
        max_agent_rounds: 2,
        ..Policy::default()
    };
    let Updated::Updated(after_update) = store
        .update_conversation(
            &bay.id,
            &c1.id,
            Some(Some("Renamed".into())),
            Some(policy.clone()),
        )
        .await
        .unwrap()
    else {
        panic!("update failed")
    };
    assert_eq!(after_update.title.as_deref(), Some("Renamed"));
    assert_eq!(after_update.policy, policy);
    assert_eq!(
        store.conversation(&bay.id, &c1.id).await.unwrap(),
        Some(after_update.clone())
    );
    let Updated::Updated(untitled) = store
        .update_conversation(&bay.id, &c1.id, Some(None), None)
        .await
        .unwrap()
    else {
        panic!("update failed")
    };
    assert_eq!(untitled.title, None);
    assert_eq!(untitled.policy, policy);
    assert_eq!(
        store
            .update_conversation(&bay.id, &ghost, Some(None), None)
            .await
            .unwrap(),
        Updated::NotFound
    );

    // Listings.
    assert_eq!(
        store.conversations(&bay.id).await.unwrap(),
        vec![c0.clone(), untitled.clone()],
        "sorted by id"
    );
    assert_eq!(
        store.conversations_of(&bay.id, &u.id).await.unwrap(),
        vec![untitled.clone()]
    );
    assert_eq!(
        store.conversations_of(&bay.id, &a1.id).await.unwrap(),
        vec![c0.clone(), untitled.clone()]
    );
    assert!(store
        .conversations_of(&bay.id, &a2.id)
        .await
        .unwrap()
        .is_empty());

    // Every change logged its roster, in order.
    let (records, _) = read(store, &bay.id, &start, 100).await;
    let rosters: Vec<(ConversationId, Option<String>, Vec<ParticipantId>)> = records
        .iter()
        .map(|r| match &r.event {
            LogEvent::Roster {
                conversation,
                members,
            } => (
                conversation.id.clone(),
                conversation.title.clone(),
                members.clone(),
            ),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    let t1 = Some("c_1 title".to_owned());
    assert_eq!(
        rosters,
        vec![
            (c1.id.clone(), t1.clone(), vec![u.id.clone(), a1.id.clone()]),
            (c0.id.clone(), Some("c_0 title".into()), vec![a1.id.clone()]),
            (
                c1.id.clone(),
                t1.clone(),
                vec![u.id.clone(), a1.id.clone(), a2.id.clone()]
            ),
            (
                c1.id.clone(),
                t1.clone(),
                vec![u.id.clone(), a1.id.clone(), a2.id.clone()]
            ),
            (c1.id.clone(), t1.clone(), vec![u.id.clone(), a1.id.clone()]),
            (
                c1.id.clone(),
                Some("Renamed".into()),
                vec![u.id.clone(), a1.id.clone()]
            ),
            (c1.id.clone(), None, vec![u.id.clone(), a1.id.clone()]),
        ]
    );
    assert!(records.windows(2).all(|w| w[0].id < w[1].id));
}

async fn revisions_refuse_stale_appends(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (u, _) = new_participant(store, &bay.id, "p_u", ParticipantKind::User).await;
    let (a, _) = new_participant(store, &bay.id, "p_a", ParticipantKind::Agent).await;
    let c = new_group(store, &bay.id, "c_rev", &[(&u, Role::Member)], 2).await;
    let r1 = store
        .conversation_revisioned(&bay.id, &c.id)
        .await
        .unwrap()
        .expect("exists");
    assert_eq!(r1.value, c);
    let mut m = message(&c, &u, "at r1", None);
    m.revision = r1.revision;
    let ok = store.append_message(&bay.id, m, u.kind).await.unwrap();
    assert!(matches!(ok, AppendOutcome::Appended(_)), "{ok:?}");

    // Any change moves the revision on; an append routed before it is refused.
    store
        .upsert_member(
            &bay.id,
            &c.id,
            Member {
                participant: a.id.clone(),
                role: Role::Member,
            },
        )
        .await
        .unwrap();
    let r2 = store
        .conversation_revisioned(&bay.id, &c.id)
        .await
        .unwrap()
        .expect("exists");
    assert_ne!(r2.revision, r1.revision);
    assert!(r2.value.member(&a.id).is_some());
    let before = head(store, &bay.id).await;
    let mut stale = message(&c, &u, "at r1 again", None);
    stale.revision = r1.revision;
    let refused = store.append_message(&bay.id, stale, u.kind).await.unwrap();
    assert!(matches!(refused, AppendOutcome::Stale), "{refused:?}");
    assert_eq!(
        head(store, &bay.id).await,
        before,
        "a stale append logs nothing"
    );
    let (history, _) = store
        .messages_before(&bay.id, &c.id, None, 10)
        .await
        .unwrap();
    assert_eq!(history.len(), 1, "a stale append stores nothing");
    // The round counter did not move either: the next agent message is round 1 of 2.
    let first = store
        .append(&bay.id, message(&c, &a, "agent 1", Some(2)), a.kind)
        .await
        .unwrap();
    assert!(!first.message.routing.suppressed);

    // Unknown conversations have no revision.
    assert_eq!(
        store
            .conversation_revisioned(&bay.id, &ConversationId("nope".into()))
            .await
            .unwrap(),
        None
    );
}

async fn roster_changes_name_the_members_before_and_after(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (ana, _) = new_participant(store, &bay.id, "ana", ParticipantKind::User).await;
    let (scout, _) = new_participant(store, &bay.id, "scout", ParticipantKind::Agent).await;
    let (rex, _) = new_participant(store, &bay.id, "rex", ParticipantKind::Agent).await;
    let start = head(store, &bay.id).await;
    let g = new_group(
        store,
        &bay.id,
        "g",
        &[(&ana, Role::Member), (&scout, Role::Member)],
        2,
    )
    .await;
    let after_create = head(store, &bay.id).await;
    control(store, &bay.id).await;
    store
        .upsert_member(
            &bay.id,
            &g.id,
            Member {
                participant: rex.id.clone(),
                role: Role::Member,
            },
        )
        .await
        .unwrap();
    let added = head(store, &bay.id).await;
    // Removing a non-member changes nothing and logs nothing.
    assert_eq!(
        store
            .remove_member(&bay.id, &g.id, &ParticipantId("ghost".into()))
            .await
            .unwrap(),
        Updated::NotFound
    );
    store
        .remove_member(&bay.id, &g.id, &scout.id)
        .await
        .unwrap();
    let removed = head(store, &bay.id).await;
    let ids = |v: &[&str]| {
        v.iter()
            .map(|p| ParticipantId((*p).into()))
            .collect::<Vec<_>>()
    };
    let all = store.roster_changes(&bay.id, &start).await.unwrap();
    assert_eq!(
        all,
        vec![
            RosterChange {
                at: after_create.entry,
                conversation: g.id.clone(),
                before: vec![],
                after: ids(&["ana", "scout"]),
            },
            RosterChange {
                at: added.entry,
                conversation: g.id.clone(),
                before: ids(&["ana", "scout"]),
                after: ids(&["ana", "scout", "rex"]),
            },
            RosterChange {
                at: removed.entry,
                conversation: g.id.clone(),
                before: ids(&["ana", "scout", "rex"]),
                after: ids(&["ana", "rex"]),
            },
        ]
    );
    // Each change's id is its `Roster` entry in the log.
    let (records, _) = read(store, &bay.id, &start, 100).await;
    let roster_ids: Vec<EntryId> = records
        .iter()
        .filter(|r| matches!(r.event, LogEvent::Roster { .. }))
        .map(|r| r.id)
        .collect();
    assert_eq!(roster_ids, all.iter().map(|c| c.at).collect::<Vec<_>>());
    // Strictly after the position given.
    assert_eq!(
        store.roster_changes(&bay.id, &added).await.unwrap(),
        all[2..].to_vec()
    );
    assert_eq!(
        store.roster_changes(&bay.id, &removed).await.unwrap(),
        vec![]
    );
    // A policy change is a roster change too (its revision moves).
    store
        .update_conversation(&bay.id, &g.id, Some(Some("renamed".into())), None)
        .await
        .unwrap();
    let last = store.roster_changes(&bay.id, &removed).await.unwrap();
    assert_eq!(last.len(), 1);
    assert_eq!(
        (last[0].before.clone(), last[0].after.clone()),
        (ids(&["ana", "rex"]), ids(&["ana", "rex"]))
    );
}

async fn roster_changes_are_trimmed_with_the_log(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (ana, _) = new_participant(store, &bay.id, "ana", ParticipantKind::User).await;
    let start = head(store, &bay.id).await;
    new_group(store, &bay.id, "g1", &[(&ana, Role::Member)], 2).await;
    let g2 = new_group(store, &bay.id, "g2", &[(&ana, Role::Member)], 2).await;
    let g2_at = head(store, &bay.id).await.entry;
    // Two more entries: with a cap of 2 entries, both roster entries go.
    control(store, &bay.id).await;
    assert_eq!(
        store
            .roster_changes(&bay.id, &start)
            .await
            .unwrap()
            .iter()
            .map(|c| c.at)
            .collect::<Vec<_>>(),
        vec![g2_at],
        "the first roster entry was trimmed"
    );
    control(store, &bay.id).await;
    assert_eq!(store.roster_changes(&bay.id, &start).await.unwrap(), vec![]);
    let _ = g2;
}

/// A DM or AGENT_CHAT keeps its two members and a DEDICATED room its
/// designated agent: the refused change stores and logs nothing.
async fn roster_rules_refuse_changes_that_break_them(store: Arc<dyn Store>) {
    let store = &*store;
    let bay = new_bay(store).await;
    let (u, _) = new_participant(store, &bay.id, "p_user", ParticipantKind::User).await;
    let (a1, _) = new_participant(store, &bay.id, "p_a1", ParticipantKind::Agent).await;
    let (a2, _) = new_participant(store, &bay.id, "p_a2", ParticipantKind::Agent).await;
    let member = |p: &ParticipantId, role| Member {
        participant: p.clone(),
        role,
    };
    for kind in [ConversationType::Dm, ConversationType::AgentChat] {
        let mut c = group(
            &unique("c_pair"),
            &[(&u, Role::Member), (&a1, Role::Member)],
            3,
        );
        c.kind = kind;
        assert_eq!(
            store.create_conversation(&bay.id, c.clone()).await.unwrap(),
            Created::Created(c.clone())
        );
        let start = head(store, &bay.id).await;
        for pid in [&u.id, &a1.id] {
            assert_eq!(
                store.remove_member(&bay.id, &c.id, pid).await.unwrap(),
                Updated::Refused(RosterRule::DirectMembersFixed),
                "{kind:?}"
            );
        }
        assert_eq!(
            store
                .upsert_member(&bay.id, &c.id, member(&a2.id, Role::Member))
                .await
                .unwrap(),
            Updated::Refused(RosterRule::DirectMembersFixed),
            "{kind:?}"
        );
        assert_eq!(head(store, &bay.id).await, start, "nothing logged");
        assert_eq!(
            store.conversation(&bay.id, &c.id).await.unwrap(),
            Some(c.clone())
        );
        // A role still changes.
        let Updated::Updated(re_roled) = store
            .upsert_member(&bay.id, &c.id, member(&u.id, Role::Admin))
            .await
            .unwrap()
        else {
            panic!("re-role refused")
        };
        assert_eq!(re_roled.member_ids(), c.member_ids());
    }

    let g = new_group(
        store,
        &bay.id,
        &unique("c_dedicated"),
        &[(&u, Role::Member), (&a1, Role::Member), (&a2, Role::Member)],
        3,
    )
    .await;
    let dedicated = |agent: &ParticipantId| Policy {
        agent_reply_policy: ReplyPolicy::Dedicated,
        designated_agent_id: Some(agent.clone()),
        ..Policy::default()
    };
    let Updated::Updated(_) = store
        .update_conversation(&bay.id, &g.id, None, Some(dedicated(&a1.id)))
        .await
        .unwrap()
    else {
        panic!("policy refused")
    };
    let start = head(store, &bay.id).await;
    assert_eq!(
        store.remove_member(&bay.id, &g.id, &a1.id).await.unwrap(),
        Updated::Refused(RosterRule::DesignatedAgentStays)
    );
    assert_eq!(head(store, &bay.id).await, start, "nothing logged");
    // Naming an agent that is not a member is refused the same way.
    let (outsider, _) = new_participant(store, &bay.id, "p_out", ParticipantKind::Agent).await;
    assert_eq!(
        store
            .update_conversation(&bay.id, &g.id, None, Some(dedicated(&outsider.id)))
            .await
            .unwrap(),
        Updated::Refused(RosterRule::DesignatedAgentStays)
    );
    // Others leave; after the policy names another agent, so does a1.
    let Updated::Updated(_) = store.remove_member(&bay.id, &g.id, &u.id).await.unwrap() else {
        panic!("a plain member's removal refused")
    };
    let Updated::Updated(_) = store
        .update_conversation(&bay.id, &g.id, None, Some(dedicated(&a2.id)))
        .await
        .unwrap()
    else {
        panic!("policy refused")
    };
    let Updated::Updated(after) = store.remove_member(&bay.id, &g.id, &a1.id).await.unwrap() else {
        panic!("the former designated agent's removal refused")
    };
    assert_eq!(after.member_ids(), vec![a2.id.clone()]);
}
