//! Conversations: rosters, titles, policies: the Redis engine's
//! [`ConversationStore`]. Every change sets a new revision and logs a
//! `Roster` entry with its roster change (the members before and after,
//! [`StoredRosterChange`], read back by `log.rs`), in one script.
//! Scripts: `conversations/*.lua`.

use super::codec::{
    array, bytes, corrupt, decode, encode, status, text, unavailable, ScriptStatus,
};
use super::keys::BayKeys;
use super::log::StoredRosterChange;
use super::lua::{lua_params, LuaScript, APPEND_LOG};
use super::{RedisStore, CAS_ATTEMPTS};
use crate::model::Conversation;
use crate::store::log::LogEvent;
use crate::store::{
    new_revision, ConversationChange, ConversationStore, Created, Revisioned, RosterRule,
    StoreError, Updated,
};
use ::redis::{cmd, Value};
use async_trait::async_trait;
use std::sync::LazyLock;
use switchboard_protocol::ids::{BayId, ConversationId, ParticipantId};

/// `create_conversation`'s script (KEYS: [`CreateConversationKeys`];
/// ARGV: [`CreateConversationArgs`]).
static CREATE_CONVERSATION: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[APPEND_LOG, include_str!("conversations/create.lua")]));

/// `change_conversation`'s compare-and-set (KEYS:
/// [`ChangeConversationKeys`]; ARGV: [`ChangeConversationArgs`]).
static CHANGE_CONVERSATION: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[APPEND_LOG, include_str!("conversations/change.lua")]));

/// `conversation_revisioned`'s read (KEYS: conversations, revisions;
/// ARGV: conversation id).
static CONVERSATION_REVISIONED: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::read_only(&[include_str!("conversations/revisioned.lua")]));

lua_params! {
    /// KEYS of `conversations/create.lua`, each the [`BayKeys`] key of the
    /// same name.
    struct CreateConversationKeys of String {
        bay, conversations, revisions, log, epoch, log_meta, rosters,
    }
}

lua_params! {
    /// ARGV of `conversations/create.lua`: the conversation's id, JSON and
    /// `Roster` event JSON, the log append's arguments, the roster change
    /// JSON and the first revision.
    struct CreateConversationArgs<'a> of &'a str {
        conversation_id, conversation, event, epoch_candidate, window_ms, max_entries,
        roster_change, revision,
    }
}

lua_params! {
    /// KEYS of `conversations/change.lua`, each the [`BayKeys`] key of the
    /// same name.
    struct ChangeConversationKeys of String {
        conversations, revisions, log, epoch, log_meta, rosters,
    }
}

lua_params! {
    /// ARGV of `conversations/change.lua`: the conversation's id, the JSON
    /// the change was made on (`expected`), the new JSON and its `Roster`
    /// event JSON, the log append's arguments, the roster change JSON (the
    /// members before) and the new revision.
    struct ChangeConversationArgs<'a> of &'a str {
        conversation_id, expected, conversation, event, epoch_candidate, window_ms,
        max_entries, roster_change, revision,
    }
}

/// The `XADD` value of a roster change: who was in `conversation`
/// before the change logged at the same id, and who is after it.
fn roster_change_json(
    doing: &'static str,
    key: &str,
    conversation: &Conversation,
    before: Vec<ParticipantId>,
) -> Result<String, StoreError> {
    encode(
        doing,
        key,
        &StoredRosterChange {
            conversation: conversation.id.clone(),
            before,
            after: conversation.member_ids(),
        },
    )
}

#[async_trait]
impl ConversationStore for RedisStore {
    async fn create_conversation(
        &self,
        bay: &BayId,
        conversation: Conversation,
    ) -> Result<Created<Conversation>, StoreError> {
        let doing = "creating a conversation";
        let k = BayKeys::new(bay);
        let keys = CreateConversationKeys {
            bay: k.bay(),
            conversations: k.conversations(),
            revisions: k.revisions(),
            log: k.log(),
            epoch: k.epoch(),
            log_meta: k.log_meta(),
            rosters: k.rosters(),
        };
        let convs = &keys.conversations;
        let log = self.log_args();
        let args = CreateConversationArgs {
            conversation_id: conversation.id.as_str(),
            conversation: &encode(doing, convs, &conversation)?,
            event: &encode(doing, &keys.log, &LogEvent::roster(&conversation))?,
            epoch_candidate: &log.epoch_candidate,
            window_ms: &log.window_ms,
            max_entries: &log.max_entries,
            roster_change: &roster_change_json(doing, &keys.rosters, &conversation, Vec::new())?,
            revision: &new_revision().to_string(),
        };
        let reply = self
            .invoke_status(
                doing,
                &CREATE_CONVERSATION,
                &keys.in_order(),
                &args.in_order(),
            )
            .await?;
        match status(doing, convs, &reply)? {
            ScriptStatus::Ok => Ok(Created::Created(conversation)),
            ScriptStatus::NoBay | ScriptStatus::Exists => Ok(Created::AlreadyExists),
            other => Err(corrupt(doing, convs, format!("script said {other:?}"))),
        }
    }

    async fn conversation(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
    ) -> Result<Option<Conversation>, StoreError> {
        self.hash_record(
            "reading a conversation",
            &BayKeys::new(bay).conversations(),
            conversation.as_str(),
        )
        .await
    }

    async fn conversations(&self, bay: &BayId) -> Result<Vec<Conversation>, StoreError> {
        let mut out: Vec<Conversation> = self
            .hash_records("listing conversations", &BayKeys::new(bay).conversations())
            .await?;
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    async fn conversation_revisioned(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
    ) -> Result<Option<Revisioned<Conversation>>, StoreError> {
        let doing = "reading a conversation for a write";
        let k = BayKeys::new(bay);
        let (convs, revisions) = (k.conversations(), k.revisions());
        let reply: Value = self
            .invoke(
                doing,
                &CONVERSATION_REVISIONED,
                &[&convs, &revisions],
                &[conversation.as_str()],
            )
            .await?;
        match array(doing, &convs, &reply)? {
            [] => Ok(None),
            [json, revision] => Ok(Some(Revisioned {
                value: decode(doing, &convs, bytes(doing, &convs, json)?)?,
                revision: text(doing, &revisions, revision)?
                    .parse()
                    .map_err(|e| corrupt(doing, &revisions, e))?,
            })),
            _ => Err(corrupt(doing, &convs, "malformed conversation reply")),
        }
    }

    /// Compare-and-set: reads the conversation, applies `change` in Rust,
    /// and writes it back with its `Roster` entry, roster change and
    /// revision bump unless someone changed it meanwhile (then retries).
    async fn change_conversation(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        change: ConversationChange,
    ) -> Result<Updated<Conversation, RosterRule>, StoreError> {
        let doing = "changing a conversation";
        let k = BayKeys::new(bay);
        let keys = ChangeConversationKeys {
            conversations: k.conversations(),
            revisions: k.revisions(),
            log: k.log(),
            epoch: k.epoch(),
            log_meta: k.log_meta(),
            rosters: k.rosters(),
        };
        let convs = &keys.conversations;
        for _ in 0..CAS_ATTEMPTS {
            let raw: Option<String> = self
                .query(
                    doing,
                    convs,
                    cmd("HGET").arg(convs).arg(conversation.as_str()),
                )
                .await?;
            let Some(raw) = raw else {
                return Ok(Updated::NotFound);
            };
            let mut c: Conversation = decode(doing, convs, raw.as_bytes())?;
            let before = c.member_ids();
            match change.apply(&mut c) {
                Ok(true) => {}
                Ok(false) => return Ok(Updated::NotFound),
                // Refused as of the record just read: a linearizable answer.
                Err(rule) => return Ok(Updated::Refused(rule)),
            }
            let log = self.log_args();
            let args = ChangeConversationArgs {
                conversation_id: conversation.as_str(),
                expected: &raw,
                conversation: &encode(doing, convs, &c)?,
                event: &encode(doing, &keys.log, &LogEvent::roster(&c))?,
                epoch_candidate: &log.epoch_candidate,
                window_ms: &log.window_ms,
                max_entries: &log.max_entries,
                roster_change: &roster_change_json(doing, &keys.rosters, &c, before)?,
                revision: &new_revision().to_string(),
            };
            let reply = self
                .invoke_status(
                    doing,
                    &CHANGE_CONVERSATION,
                    &keys.in_order(),
                    &args.in_order(),
                )
                .await?;
            match status(doing, convs, &reply)? {
                ScriptStatus::Ok => return Ok(Updated::Updated(c)),
                ScriptStatus::Missing => return Ok(Updated::NotFound),
                ScriptStatus::Conflict => continue,
                other => return Err(corrupt(doing, convs, format!("script said {other:?}"))),
            }
        }
        Err(unavailable(
            doing,
            convs,
            "the conversation kept changing under concurrent updates",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::redis::lua::bound;

    #[test]
    fn scripts_bind_their_keys_and_args_in_order() {
        let create = include_str!("conversations/create.lua");
        assert_eq!(bound(create, "KEYS"), CreateConversationKeys::NAMES);
        assert_eq!(bound(create, "ARGV"), CreateConversationArgs::NAMES);
        let change = include_str!("conversations/change.lua");
        assert_eq!(bound(change, "KEYS"), ChangeConversationKeys::NAMES);
        assert_eq!(bound(change, "ARGV"), ChangeConversationArgs::NAMES);
    }
}
