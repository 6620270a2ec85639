//! Key layout of the Redis engine.
//!
//! Every key of a Bay carries the Bay id as its Redis Cluster hash tag
//! (`sb:{<bay>}:…`), so all of a Bay's keys live in one slot and one Lua
//! script may touch any of them atomically:
//!
//! | key                               | type   | holds                                              |
//! |-----------------------------------|--------|----------------------------------------------------|
//! | `sb:{bay}:bay`                    | string | the [`Bay`](crate::model::Bay) record (JSON)       |
//! | `sb:{bay}:epoch`                  | string | the log's epoch; minted with `SET NX` on first use |
//! | `sb:{bay}:log`                    | stream | the event log, field `e` = JSON `LogEvent`         |
//! | `sb:{bay}:log-meta`               | hash   | `last`, `maxdel`, `next_trim` ms, `ep` (epoch copy) |
//! | `sb:{bay}:rosters`                | stream | roster changes, ids = their log entry ids          |
//! | `sb:{bay}:openings`               | stream | session openings (displacement), field `o` = JSON  |
//! | `sb:{bay}:presence`               | hash   | node id → JSON heartbeat `{until, online, record}` |
//! | `sb:{bay}:presence:<node>`        | hash   | participant id → JSON `ParticipantPresence`        |
//! | `sb:{bay}:presence-states`        | hash   | participant id → published presence state          |
//! | `sb:{bay}:participants`           | hash   | participant id → JSON `Participant`                |
//! | `sb:{bay}:participant-tokens`     | hash   | participant id → SHA-256 of its current token      |
//! | `sb:{bay}:suspended`              | set    | suspended participant ids; `*`: the Bay itself     |
//! | `sb:{bay}:conversations`          | hash   | conversation id → JSON `Conversation` (+ members)  |
//! | `sb:{bay}:revisions`              | hash   | conversation id → revision (random, new per change)|
//! | `sb:{bay}:conv:<cid>:msgs`        | stream | history, id `<createdAt ms>-0`, field `m` = JSON   |
//! | `sb:{bay}:conv:<cid>:ids`         | hash   | message id → its history stream id                 |
//! | `sb:{bay}:conv:<cid>:state`       | hash   | `rounds`, `last_ms`, `seq`; `r:<pid>` last post    |
//! | `sb:{bay}:conv:<cid>:reads`       | hash   | participant id → `"<seq> <mid>"` marked read       |
//! | `sb:{bay}:conv:<cid>:draft:<mid>` | string | an open draft's text so far                        |
//! | `sb:{bay}:drafts`                 | zset   | open draft id → last activity ms                   |
//! | `sb:{bay}:draft-info`             | hash   | open draft id → `"<cid> <author>"`                 |
//! | `sb:{bay}:rl:<token>:agent`       | string | the token's agent request budget (GCRA, `PX`)      |
//! | `sb:{bay}:conv:<cid>:summary`     | hash   | `body` (JSON summary), `seq` (its boundary), `version` |
//! | `sb:{bay}:conv:<cid>:summary-refreshes` | zset | refresh requests in the window → their ms   |
//! | `sb:{bay}:summarizer`             | string | the Bay's summarizer agent id                      |
//! | `sb:{bay}:files`                  | hash   | attachment id → JSON `StoredFile` (fixed at upload) |
//! | `sb:{bay}:file-links`             | hash   | attachment id → its state, space-separated words   |
//! | `sb:{bay}:message-files`          | hash   | message id → the ids of the files it carries       |
//! | `sb:{bay}:conv:<cid>:files`       | zset   | the library: attachment id → its `seq`             |
//! | `sb:{bay}:conv:<cid>:file-totals` | hash   | `files`, `bytes` of the library, `seq` (last one)  |
//! | `sb:files-pending`                | zset   | `"<bay> <id>"` of unsent uploads → expiry ms (sweep index) |
//! | `sb:draft-bays`                   | set    | Bays that may hold open drafts (sweep index)       |
//! | `sb:nodes`                        | hash   | node id → JSON `{until, record}` (node directory)  |
//! | `sb:{credentials}:log`            | stream | credential changes of every Bay, `c` = JSON, `p` = previous id |
//! | `sb:{tok:<4 hex>}:<token hash>`   | string | token index: JSON `{bay, participant}`             |
//! | `sb:pairing-code:<code hash>`     | string | JSON `PairingTarget`, expiring with the code (`PX`)|
//! | `sb:link-request:<id>`            | hash   | `r` JSON `LinkRequest`, `a` its approval; `PX`'d   |
//! | `sb:{bay}:room:<cid>`             | hash   | `r` JSON `Room`, `brief`, `mrev`, `a` (activity ms)|
//! | `sb:room-link:<capability hash>`  | string | JSON `RoomLink`: the room and role it opens        |
//!
//! The token index is the one global lookup (a token names its Bay), so it
//! cannot share the Bay's slot. It is a *pointer*, not the truth: the truth
//! is `participant-tokens` in the Bay's slot, and `authenticate` only
//! accepts a token whose pointer leads to a participant whose current token
//! is exactly that hash. A stale pointer (left by a crash between the two
//! writes of a rotation) therefore never authenticates.
//!
//! Ids are validated by the gateway (`[A-Za-z0-9_-]{1,64}`), so they contain
//! neither `{`, `}` nor `:` and cannot break the layout.

use crate::token::TokenHash;
use switchboard_protocol::ids::{BayId, ConversationId, ParticipantId, TokenId};

/// Prefix of every key Switchboard writes.
pub const PREFIX: &str = "sb";

/// The keys of one Bay.
#[derive(Clone, Debug)]
pub struct BayKeys {
    base: String,
}

impl BayKeys {
    /// The keys of `bay`, all under the hash tag `{<bay>}`. `bay` must be a
    /// valid id (no `{`, `}` or `:`).
    pub fn new(bay: &BayId) -> Self {
        BayKeys {
            base: format!("{PREFIX}:{{{bay}}}"),
        }
    }

    /// `sb:{bay}:bay`: string, the [`Bay`](crate::model::Bay) record as JSON.
    pub fn bay(&self) -> String {
        format!("{}:bay", self.base)
    }

    /// `sb:{bay}:epoch`: string, the log's epoch; minted with `SET NX`, and
    /// a new one after data loss expires every older cursor.
    pub fn epoch(&self) -> String {
        format!("{}:epoch", self.base)
    }

    /// `sb:{bay}:log`: stream, the event log (field `e` = JSON `LogEvent`),
    /// trimmed to the replay window.
    pub fn log(&self) -> String {
        format!("{}:log", self.base)
    }

    /// `sb:{bay}:log-meta`: hash, the log's `last` generated id, `maxdel`
    /// (newest trimmed id) and `next_trim` (ms of the Redis clock before
    /// which appends skip the trim check). Kept by every log append, so
    /// reads need no `XINFO`. `ep` is a copy of the epoch (written by the
    /// first append that read the epoch key), so an append reads the
    /// epoch with `last` and `next_trim` in one `HMGET`.
    pub fn log_meta(&self) -> String {
        format!("{}:log-meta", self.base)
    }

    /// `sb:{bay}:rosters`: stream, one entry per roster change at the id of
    /// its `Roster` log entry, field `r` = JSON `{conversation, before}`;
    /// trimmed with the log. Replays rebuild membership as of any cursor
    /// from it.
    pub fn rosters(&self) -> String {
        format!("{}:rosters", self.base)
    }

    /// `sb:{bay}:openings`: stream, the displacement channel: one entry per
    /// connection opened (field `o` = JSON `{token, session}`), trimmed to
    /// about `OPENINGS_KEPT` entries. Apart from the log, so replays never
    /// read it.
    pub fn openings(&self) -> String {
        format!("{}:openings", self.base)
    }

    /// `sb:{bay}:revisions`: hash, conversation id → revision (random, new
    /// at creation and at each change). An append routed with another
    /// revision is refused, so the write path may cache conversations.
    pub fn revisions(&self) -> String {
        format!("{}:revisions", self.base)
    }

    /// `sb:{bay}:participants`: hash, participant id → JSON `Participant`.
    pub fn participants(&self) -> String {
        format!("{}:participants", self.base)
    }

    /// `sb:{bay}:participant-tokens`: hash, participant id → SHA-256 (hex)
    /// of its current token. The truth `authenticate` checks the global
    /// token index against.
    pub fn participant_tokens(&self) -> String {
        format!("{}:participant-tokens", self.base)
    }

    /// `sb:{bay}:suspended`: set, the ids of the participants an operator
    /// suspended, and `*` (never a valid id) while the Bay itself is.
    pub fn suspended(&self) -> String {
        format!("{}:suspended", self.base)
    }

    /// `sb:{bay}:conversations`: hash, conversation id → JSON `Conversation`
    /// (members and policy included).
    pub fn conversations(&self) -> String {
        format!("{}:conversations", self.base)
    }

    /// `sb:{bay}:conv:<cid>:msgs`: stream, the conversation's history in
    /// order; entry id `<createdAt ms>-0`, field `i` = the message id (its
    /// body is in [`BayKeys::bodies`], so it can change). Entries written
    /// before bodies were kept apart hold the JSON `StoredMessage` in `m`.
    pub fn messages(&self, conversation: &ConversationId) -> String {
        format!("{}:conv:{conversation}:msgs", self.base)
    }

    /// `sb:{bay}:conv:<cid>:ids`: hash, message id → its history stream id.
    pub fn message_ids(&self, conversation: &ConversationId) -> String {
        format!("{}:conv:{conversation}:ids", self.base)
    }

    /// `sb:{bay}:conv:<cid>:state`: hash, `rounds` = consecutive agent
    /// messages since the last human one (protocol §4, "Round caps"),
    /// `last_ms` = the newest message's `createdAt` in ms and `seq` = the
    /// newest message's `seq`, so an append reads neither stream; and
    /// `r:<participant id>` = `"<seq> <message id>"` of that participant's
    /// last post (posting reads everything before it), written with the
    /// counters in one `HSET`.
    pub fn conversation_state(&self, conversation: &ConversationId) -> String {
        format!("{}:conv:{conversation}:state", self.base)
    }

    /// `sb:{bay}:conv:<cid>:bodies`: hash, message id → JSON
    /// `StoredMessage` as it is now (edits, tombstones, reactions, votes
    /// replace it).
    pub fn bodies(&self, conversation: &ConversationId) -> String {
        format!("{}:conv:{conversation}:bodies", self.base)
    }

    /// `sb:{bay}:conv:<cid>:deleted`: sorted set of deleted message ids,
    /// scored by `seq`, so `unreadCount` leaves tombstones out without
    /// reading history.
    pub fn deleted(&self, conversation: &ConversationId) -> String {
        format!("{}:conv:{conversation}:deleted", self.base)
    }

    /// `sb:{bay}:conv:<cid>:versions`: hash, message id → its `version`
    /// (absent = 0): the compare-and-set of message changes.
    pub fn versions(&self, conversation: &ConversationId) -> String {
        format!("{}:conv:{conversation}:versions", self.base)
    }

    /// `sb:{bay}:conv:<cid>:reads`: hash, participant id → `"<seq> <message
    /// id>"` of the newest message it has marked read. A participant's
    /// marker is the newer of this and `r:<participant id>` in
    /// [`BayKeys::conversation_state`] (its last post). Posts of nodes
    /// before that field existed wrote their marker here.
    pub fn reads(&self, conversation: &ConversationId) -> String {
        format!("{}:conv:{conversation}:reads", self.base)
    }

    /// `sb:{bay}:webhooks`: hash, participant id → JSON `Webhook`.
    pub fn webhooks(&self) -> String {
        format!("{}:webhooks", self.base)
    }

    /// `sb:{bay}:webhook-positions`: hash, participant id → the cursor
    /// (`LogPosition::encode`) after the last record its deliveries handled.
    pub fn webhook_positions(&self) -> String {
        format!("{}:webhook-positions", self.base)
    }

    /// `sb:{bay}:webhook-status`: hash, participant id → JSON `WebhookStatus`.
    pub fn webhook_status(&self) -> String {
        format!("{}:webhook-status", self.base)
    }

    /// `sb:{bay}:presence`: hash, node id → JSON `{until, online,
    /// record: true}`: that node's presence heartbeat, its record valid
    /// until `until` (Unix ms), the record itself in
    /// [`BayKeys::presence_record`]. `online` is empty (older nodes read
    /// it). Records of older nodes are `{until, online, entries}` in this
    /// hash itself: `entries` the
    /// [`ParticipantPresence`](crate::store::ParticipantPresence) of each
    /// participant the node knows of.
    pub fn presence(&self) -> String {
        format!("{}:presence", self.base)
    }

    /// `sb:{bay}:presence:<node>`: hash, participant id → JSON
    /// [`ParticipantPresence`](crate::store::ParticipantPresence): what
    /// `node` knows of each participant, one field each, written only when
    /// it changes. Valid while the node's heartbeat in
    /// [`BayKeys::presence`] is; it also expires on its own, at twice the
    /// record's lifetime.
    pub fn presence_record(&self, node: &str) -> String {
        format!("{}:presence:{node}", self.base)
    }

    /// `sb:{bay}:presence-states`: hash, participant id → its published
    /// presence state (`online`, `thinking`, `streaming`, `idle`; absent =
    /// `offline`), changed only together with the `Presence` log entry
    /// that announces it.
    pub fn presence_states(&self) -> String {
        format!("{}:presence-states", self.base)
    }

    /// `sb:{bay}:rl:<token id>:<bucket>`: string, the GCRA bucket
    /// (`agent`: the agent request budget) of one token of the Bay, in its
    /// slot so the append takes from it in its own script; expires when
    /// the bucket would be full again.
    pub fn rate_limit(&self, token: &TokenId, bucket: &str) -> String {
        format!("{}:rl:{}:{bucket}", self.base, token.0)
    }

    /// `sb:{bay}:polls`: hash, poll id → `"<conversation id> <message id>"`.
    pub fn polls(&self) -> String {
        format!("{}:polls", self.base)
    }

    /// `sb:{bay}:idem:<key>`: string `"<fingerprint> <conversation id>
    /// <message id>"`, an idempotent send (`key` is already a SHA-256 hex
    /// digest), expiring with the replay window.
    pub fn idempotency(&self, key: &str) -> String {
        format!("{}:idem:{key}", self.base)
    }

    /// `sb:{bay}:drafts`: sorted set, open draft message id → its last
    /// activity (Unix ms): what the orphan sweep reads.
    pub fn drafts(&self) -> String {
        format!("{}:drafts", self.base)
    }

    /// `sb:{bay}:draft-info`: hash, open draft message id →
    /// `"<conversation id> <author id>"`.
    pub fn draft_info(&self) -> String {
        format!("{}:draft-info", self.base)
    }

    /// `sb:{bay}:conv:<cid>:summary`: hash, the conversation's summary:
    /// `body` = JSON `StoredSummary`, `seq` = its boundary's `seq`,
    /// `version` = its version (authoritative over the body's).
    pub fn summary(&self, conversation: &ConversationId) -> String {
        format!("{}:conv:{conversation}:summary", self.base)
    }

    /// `sb:{bay}:conv:<cid>:summary-refreshes`: sorted set, the
    /// `?refresh=1` requests counted in the current window, scored by
    /// their Unix ms; expires with the window.
    pub fn summary_refreshes(&self, conversation: &ConversationId) -> String {
        format!("{}:conv:{conversation}:summary-refreshes", self.base)
    }

    /// `sb:{bay}:files`: hash, attachment id → JSON `StoredFile`.
    pub fn files(&self) -> String {
        format!("{}:files", self.base)
    }

    /// `sb:{bay}:file-links`: hash, attachment id → its state (see
    /// `redis/files.rs`).
    pub fn file_links(&self) -> String {
        format!("{}:file-links", self.base)
    }

    /// `sb:{bay}:message-files`: hash, message id → space-separated ids of
    /// the files it carries.
    pub fn message_files(&self) -> String {
        format!("{}:message-files", self.base)
    }

    /// `sb:{bay}:conv:<cid>:files`: zset, the conversation's library,
    /// attachment id → library `seq`.
    pub fn library(&self, conversation: &ConversationId) -> String {
        format!("{}:conv:{conversation}:files", self.base)
    }

    /// `sb:{bay}:conv:<cid>:file-totals`: hash, `files` and `bytes` of the
    /// library and `seq`, the last library position handed out.
    pub fn library_totals(&self, conversation: &ConversationId) -> String {
        format!("{}:conv:{conversation}:file-totals", self.base)
    }

    /// `sb:{bay}:summarizer`: string, the Bay's designated summarizer
    /// agent's id (absent: none).
    pub fn summarizer(&self) -> String {
        format!("{}:summarizer", self.base)
    }

    /// `sb:{bay}:connectors`: hash, participant id → connector platform.
    pub fn connectors(&self) -> String {
        format!("{}:connectors", self.base)
    }

    /// `sb:{bay}:connector-request:<connector>:<id>`: string, a JSON
    /// `PendingRequest` awaiting `connector`'s answer; expires with the
    /// request. The connector's id in the key makes another agent's answer
    /// find nothing.
    pub fn connector_request(&self, connector: &ParticipantId, id: &str) -> String {
        format!("{}:connector-request:{connector}:{id}", self.base)
    }

    /// `sb:{bay}:room:<cid>`: hash, the conversation's room: `r` = JSON
    /// `Room` as created, `brief` = the pinned message id (absent: none),
    /// `mrev` = the metadata revision, `a` = the last activity (Unix ms),
    /// `name` = the name after a rename (absent: the one in `r`).
    /// The fields that change are kept apart so each change is one field.
    pub fn room(&self, conversation: &ConversationId) -> String {
        format!("{}:room:{conversation}", self.base)
    }

    /// `sb:{bay}:room:<cid>:authors`: hash, the room's link authors:
    /// participant id → `0` (counted) or `1` (joined the conversation).
    pub fn room_authors(&self, conversation: &ConversationId) -> String {
        format!("{}:room:{conversation}:authors", self.base)
    }

    /// `sb:{bay}:conv:<cid>:draft:<mid>`: string, an open draft's text so
    /// far (appends are `APPEND`s; the body keeps the text at opening).
    pub fn draft_text(&self, conversation: &ConversationId, message: &str) -> String {
        format!("{}:conv:{conversation}:draft:{message}", self.base)
    }
}

/// `sb:files-pending`: zset, `"<bay> <attachment id>"` of every upload not
/// sent yet → its expiry (Unix ms): the sweep's index across Bays.
pub fn files_pending() -> String {
    format!("{PREFIX}:files-pending")
}

/// `sb:draft-bays`: set of Bay ids that may hold open drafts, across Bays
/// (an index for the orphan sweep; the Bay's `drafts` set is the truth).
pub fn draft_bays() -> String {
    format!("{PREFIX}:draft-bays")
}

/// `sb:bays`: set, the id of every Bay (written by `create_bay`, after
/// the Bay's own key: it lives in another slot).
pub fn bays() -> String {
    format!("{PREFIX}:bays")
}

/// `sb:{credentials}:log`: stream, the credentials channel: one entry per
/// change of a token's standing (rotation, revocation, suspension,
/// reinstatement) of any Bay, field `c` = JSON `CredentialChange`, `p` =
/// the id of the entry before it; capped with `MAXLEN ~`
/// `CREDENTIAL_CHANGES_KEPT`. Its own hash tag: every node tails it with
/// one blocking read, whatever the number of Bays.
pub fn credentials() -> String {
    format!("{PREFIX}:{{credentials}}:log")
}

/// `sb:nodes`: hash of node id → JSON `{until, record}`, the node
/// directory (each node refreshes its own field; readers drop expired ones).
pub fn nodes() -> String {
    format!("{PREFIX}:nodes")
}

/// `sb:webhook-owners`: set of `"<bay> <participant>"` with a webhook,
/// across Bays (an index; the Bay's `webhooks` hash is the truth).
pub fn webhook_owners() -> String {
    format!("{PREFIX}:webhook-owners")
}

/// `sb:lease:<name>`: string, the lease's holder, expiring with the lease.
pub fn lease(name: &str) -> String {
    format!("{PREFIX}:lease:{name}")
}

/// `sb:{lease:<group>}`: hash of a group of leases: `n:<name>` → the
/// holder of lease `name`, `h:<holder>` → until when (Unix ms, Redis's
/// clock) that holder's heartbeat keeps its leases of the group.
pub fn group_leases(group: &str) -> String {
    format!("{PREFIX}:{{lease:{group}}}")
}

/// `sb:pairing-code:<code hash>`: string, the code's JSON
/// [`PairingTarget`](crate::store::PairingTarget), with the code's TTL.
/// Not hash-tagged: every operation touches this one key.
pub fn pairing_code(code: &crate::store::SecretHash) -> String {
    format!("{PREFIX}:pairing-code:{}", code.0)
}

/// `sb:link-request:<id>`: hash, field `r` the JSON
/// [`LinkRequest`](crate::store::LinkRequest) as created (pending), field
/// `a` the JSON target once approved; expires with the request.
pub fn link_request(id: &str) -> String {
    format!("{PREFIX}:link-request:{id}")
}

/// `sb:room-link:<capability hash>`: string, the JSON
/// [`RoomLink`](crate::store::rooms::RoomLink) a capability opens. Not
/// hash-tagged: a capability names its Bay, like a token.
pub fn room_link(capability: &crate::store::SecretHash) -> String {
    format!("{PREFIX}:room-link:{}", capability.0)
}

/// The token index entry of `token`: hash-tagged by its first four hex
/// digits, so the index spreads over the cluster's slots.
pub fn token(token: &TokenHash) -> String {
    let tag = token.0.get(..4).unwrap_or(&token.0);
    format!("{PREFIX}:{{tok:{tag}}}:{}", token.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The part of a key Redis Cluster hashes (its hash tag, if any).
    fn hash_tag(key: &str) -> &str {
        match key.find('{') {
            Some(open) => match key[open + 1..].find('}') {
                Some(len) if len > 0 => &key[open + 1..open + 1 + len],
                _ => key,
            },
            None => key,
        }
    }

    #[test]
    fn every_bay_key_shares_the_bay_hash_tag() {
        let k = BayKeys::new(&BayId("acme".into()));
        let c = ConversationId("c_1".into());
        for key in [
            k.bay(),
            k.epoch(),
            k.log(),
            k.participants(),
            k.participant_tokens(),
            k.conversations(),
            k.messages(&c),
            k.message_ids(&c),
            k.conversation_state(&c),
            k.log_meta(),
            k.rosters(),
            k.revisions(),
            k.bodies(&c),
            k.versions(&c),
            k.reads(&c),
            k.deleted(&c),
            k.polls(),
            k.idempotency("ab12"),
            k.presence(),
            k.presence_record("node-1"),
            k.presence_states(),
            k.summary(&c),
            k.summary_refreshes(&c),
            k.summarizer(),
            k.rate_limit(&TokenId("0123456789abcdef".into()), "agent"),
        ] {
            assert_eq!(hash_tag(&key), "acme", "{key}");
        }
        assert_eq!(k.messages(&c), "sb:{acme}:conv:c_1:msgs");
    }

    #[test]
    fn token_keys_are_tagged_by_their_prefix() {
        let h = TokenHash::of("bay_demo");
        let key = token(&h);
        assert_eq!(hash_tag(&key), format!("tok:{}", &h.0[..4]));
        assert!(key.ends_with(&h.0));
    }
}
