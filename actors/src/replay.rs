//! Replays from a cursor: the memberships in force at the cursor.
//!
//! The membership rule (docs/architecture.md, "Membership and replays"):
//! a replay judges each record by the membership in force when it was
//! logged, on whatever node it runs. The replay then keeps the
//! memberships current itself as it passes `Roster` entries (they carry the
//! members after each change); what it needs up front is the memberships
//! *at the cursor*, which [`memberships_at`] rebuilds from the store's
//! roster changes and the feed's index, whatever the feed has seen.

use crate::store::RosterChange;
use std::collections::{HashMap, HashSet};
use switchboard_protocol::cursor::EntryId;
use switchboard_protocol::ids::{ConversationId, ParticipantId};

/// The conversations `participant` was a member of right after log entry
/// `cursor`.
///
/// - `at_feed`: its conversations as of `feed` (the feed's position when
///   the session attached);
/// - `changes`: every roster change after `min(cursor, feed)` up to some
///   head at or after both, oldest first (read *after* attaching).
///
/// For a conversation that changed after the cursor, the first such
/// change's `before` is its roster at the cursor. For any other, the roster
/// at the cursor is the roster now: the feed's, moved forward by the
/// changes after `feed` (the cursor may come from a node ahead of this one).
pub fn memberships_at(
    participant: &ParticipantId,
    cursor: EntryId,
    feed: EntryId,
    at_feed: HashSet<ConversationId>,
    changes: &[RosterChange],
) -> HashSet<ConversationId> {
    let mut now = at_feed;
    for change in changes.iter().filter(|c| c.at > feed) {
        set(
            &mut now,
            &change.conversation,
            change.after.contains(participant),
        );
    }
    let mut first_after_cursor: HashMap<&ConversationId, bool> = HashMap::new();
    for change in changes.iter().filter(|c| c.at > cursor) {
        first_after_cursor
            .entry(&change.conversation)
            .or_insert_with(|| change.before.contains(participant));
    }
    for (conversation, member) in first_after_cursor {
        set(&mut now, conversation, member);
    }
    now
}

fn set(set: &mut HashSet<ConversationId>, conversation: &ConversationId, member: bool) {
    if member {
        set.insert(conversation.clone());
    } else {
        set.remove(conversation);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pid(s: &str) -> ParticipantId {
        ParticipantId(s.into())
    }
    fn cid(s: &str) -> ConversationId {
        ConversationId(s.into())
    }
    fn change(at: u64, c: &str, before: &[&str], after: &[&str]) -> RosterChange {
        RosterChange {
            at: EntryId::new(at, 0),
            conversation: cid(c),
            before: before.iter().map(|p| pid(p)).collect(),
            after: after.iter().map(|p| pid(p)).collect(),
        }
    }
    fn set_of(ids: &[&str]) -> HashSet<ConversationId> {
        ids.iter().map(|c| cid(c)).collect()
    }

    /// The scenario of a node started after every change: G = {ana, scout};
    /// cursor at 1; M0 at 2; rex added at 3; M1 at 4; scout removed at 5.
    #[test]
    fn a_fresh_feed_gives_each_member_the_rosters_of_the_cursor() {
        let changes = [
            change(3, "g", &["ana", "scout"], &["ana", "scout", "rex"]),
            change(5, "g", &["ana", "scout", "rex"], &["ana", "rex"]),
        ];
        // The feed loaded after everything: rex is in g, scout is not.
        let feed = EntryId::new(9, 0);
        let rex = memberships_at(
            &pid("rex"),
            EntryId::new(1, 0),
            feed,
            set_of(&["g"]),
            &changes,
        );
        assert_eq!(rex, set_of(&[]), "rex joined after the cursor");
        let scout = memberships_at(
            &pid("scout"),
            EntryId::new(1, 0),
            feed,
            set_of(&[]),
            &changes,
        );
        assert_eq!(scout, set_of(&["g"]), "scout was a member at the cursor");
    }

    #[test]
    fn a_cursor_ahead_of_the_feed_moves_the_feed_forward() {
        // The feed is at 2; rex was added at 3; the cursor (from a faster
        // node) is at 4; nothing changed after it.
        let changes = [change(3, "g", &["ana"], &["ana", "rex"])];
        let rex = memberships_at(
            &pid("rex"),
            EntryId::new(4, 0),
            EntryId::new(2, 0),
            set_of(&[]),
            &changes,
        );
        assert_eq!(rex, set_of(&["g"]));
    }

    #[test]
    fn without_changes_the_feed_index_is_the_answer() {
        let got = memberships_at(
            &pid("rex"),
            EntryId::new(1, 0),
            EntryId::new(5, 0),
            set_of(&["a", "b"]),
            &[],
        );
        assert_eq!(got, set_of(&["a", "b"]));
    }

    #[test]
    fn a_conversation_created_after_the_cursor_was_not_joined_yet() {
        let changes = [change(3, "h", &[], &["ana", "rex"])];
        let rex = memberships_at(
            &pid("rex"),
            EntryId::new(1, 0),
            EntryId::new(5, 0),
            set_of(&["h"]),
            &changes,
        );
        assert_eq!(rex, set_of(&[]));
    }
}
