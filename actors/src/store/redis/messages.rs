//! Messages: appends, changes, history, read markers: the Redis engine's
//! [`MessageStore`]. Each method's script is beside it in `messages/`
//! (the append, its largest, with its Rust in `messages/append.rs`, and
//! the per-Bay batching of appends in `messages/batch.rs`);
//! `messages/body_of.lua` reads a history entry's body and
//! `messages/iso_ms.lua` formats `createdAt`.

mod append;
pub(super) mod batch;

use super::codec::{
    array, bytes, corrupt, decode, entry_id, status, to_text, to_value, ScriptStatus,
};
use super::keys::BayKeys;
use super::lua::{lua_params, LuaScript, APPEND_LOG, REVISION};
use super::{change_event, changed, RedisStore, MAX_COUNT, MAX_PAGE};
use crate::model::StoredMessage;
use crate::store::log::Change;
use crate::store::{
    AppendOutcome, Appended, Changed, MessageChange, MessageStore, NewMessage, ReadState,
    StoreError,
};
use ::redis::{cmd, Value};
use append::{MessageKeys, Stamped};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::ops::ControlFlow;
use std::sync::LazyLock;
use switchboard_protocol::cursor::EntryId;
use switchboard_protocol::event::ConversationRef;
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId};
use switchboard_protocol::model::ParticipantKind;

/// `body_of(bodies, fields)`: the JSON of a history entry's message.
const BODY_OF: &str = include_str!("messages/body_of.lua");

/// `iso_ms(ms)`: a Unix time in ms as `createdAt` (RFC 3339, ms, `Z`).
const ISO_MS: &str = include_str!("messages/iso_ms.lua");

/// `newer_marker(a, b)`: the newer of two read markers (the explicit one
/// in `reads`, the one a post set in the state hash).
const MARKER: &str = include_str!("messages/marker.lua");

/// `change_message`'s script (KEYS: [`ChangeKeys`]; ARGV: [`ChangeArgs`]).
static CHANGE_MESSAGE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[APPEND_LOG, REVISION, include_str!("messages/change.lua")]));

/// `mark_read`'s script (KEYS: [`MarkReadKeys`]; ARGV: [`MarkReadArgs`]).
static MARK_READ: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[APPEND_LOG, MARKER, include_str!("messages/mark_read.lua")]));

/// `read_states`' script: per conversation, the newest `seq`, the
/// participant's marker and the deleted messages after it.
static READ_STATES: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::read_only(&[MARKER, include_str!("messages/read_states.lua")]));

/// `message`'s script (KEYS: [`HistoryKeys`]; ARGV: the message id).
static MESSAGE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::read_only(&[BODY_OF, include_str!("messages/message.lua")]));

/// `messages_since`' script (KEYS: history, bodies; ARGV: first stream
/// id, count).
static MESSAGES_SINCE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::read_only(&[BODY_OF, include_str!("messages/since.lua")]));

/// `messages_before`' script (KEYS: [`HistoryKeys`]; ARGV: before id,
/// limit).
static MESSAGES_BEFORE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::read_only(&[BODY_OF, include_str!("messages/before.lua")]));

/// An open draft's text so far and version (KEYS: draft text, versions;
/// ARGV: message id).
static DRAFT_STATE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::read_only(&[include_str!("messages/draft_state.lua")]));

/// `iso_ms` alone, for [`RedisStore::lua_format_ms`].
static FORMAT_MS: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[ISO_MS, include_str!("messages/format_ms.lua")]));

lua_params! {
    /// KEYS of `messages/change.lua`, each the [`BayKeys`] key of the same
    /// name (of the message's conversation).
    struct ChangeKeys of String {
        conversations, revisions, message_ids, versions, bodies, log, epoch, log_meta, rosters,
        deleted,
    }
}

lua_params! {
    /// ARGV of `messages/change.lua`: the revision the change was
    /// authorized with, the new version, the message JSON after the
    /// change, the log event JSON, the log append's arguments, then the
    /// message's `seq` when the change deletes it (else empty).
    struct ChangeArgs<'a> of &'a str {
        conversation_id, message_id, revision, version, body, event,
        epoch_candidate, window_ms, max_entries, deleted_seq,
    }
}

lua_params! {
    /// KEYS of `messages/mark_read.lua`, each the [`BayKeys`] key of the
    /// same name (`reads` and `conversation_state` of the conversation).
    struct MarkReadKeys of String {
        reads, log, epoch, log_meta, rosters, conversations, conversation_state,
    }
}

lua_params! {
    /// ARGV of `messages/mark_read.lua`: who reads, the message's `seq`
    /// and id, the `read.updated` event JSON, the conversation, then the
    /// log append's arguments.
    struct MarkReadArgs<'a> of &'a str {
        participant_id, seq, message_id, event, conversation_id,
        epoch_candidate, window_ms, max_entries,
    }
}

lua_params! {
    /// KEYS of the history reads by id (`messages/message.lua`,
    /// `messages/before.lua`), of one conversation.
    struct HistoryKeys of String { messages, message_ids, bodies }
}

impl HistoryKeys {
    fn new(bay: &BayId, conversation: &ConversationId) -> Self {
        let k = BayKeys::new(bay);
        HistoryKeys {
            messages: k.messages(conversation),
            message_ids: k.message_ids(conversation),
            bodies: k.bodies(conversation),
        }
    }
}

#[async_trait]
impl MessageStore for RedisStore {
    async fn append_message(
        &self,
        bay: &BayId,
        mut new: NewMessage,
        sender_kind: ParticipantKind,
    ) -> Result<AppendOutcome, StoreError> {
        let doing = "appending a message";
        // Versions count changes after the append, from 0 (the versions
        // hash starts empty).
        new.message.version = 0;
        let keys = MessageKeys::new(bay, &new);
        let part = append::part(doing, &keys, &new, sender_kind)?;
        let reply = self.appends.append(doing, bay, part).await?;
        let stamped = match Stamped::from_reply(doing, bay, &keys, &new, &reply)? {
            ControlFlow::Continue(stamped) => stamped,
            ControlFlow::Break(outcome) => return Ok(outcome),
        };
        let draft = new.message.is_streaming();
        let message = stamped.fill(doing, &keys.messages, new.message)?;
        if draft {
            self.index_draft_bay(doing, bay).await?;
        }
        Ok(AppendOutcome::Appended(Box::new(Appended {
            entry: stamped.entry,
            message,
        })))
    }

    async fn change_message(
        &self,
        bay: &BayId,
        change: MessageChange,
    ) -> Result<Changed, StoreError> {
        let doing = "changing a message";
        let k = BayKeys::new(bay);
        let cid = &change.conversation.id;
        let keys = ChangeKeys {
            conversations: k.conversations(),
            revisions: k.revisions(),
            message_ids: k.message_ids(cid),
            versions: k.versions(cid),
            bodies: k.bodies(cid),
            log: k.log(),
            epoch: k.epoch(),
            log_meta: k.log_meta(),
            rosters: k.rosters(),
            deleted: k.deleted(cid),
        };
        let log = self.log_args();
        let deleted_seq = match change.message.deleted_at {
            Some(_) => change.message.seq.to_string(),
            None => String::new(),
        };
        let args = ChangeArgs {
            conversation_id: cid.as_str(),
            message_id: change.message.id.as_str(),
            revision: &change.revision.to_string(),
            version: &change.message.version.to_string(),
            body: &to_text(doing, &to_value(doing, &change.message)?)?,
            event: &change_event(doing, change.conversation.clone(), change.change)?,
            epoch_candidate: &log.epoch_candidate,
            window_ms: &log.window_ms,
            max_entries: &log.max_entries,
            deleted_seq: &deleted_seq,
        };
        let reply = self
            .invoke_status(doing, &CHANGE_MESSAGE, &keys.in_order(), &args.in_order())
            .await?;
        changed(doing, &keys.bodies, &keys.log, &reply)
    }

    async fn poll_message(
        &self,
        bay: &BayId,
        poll: &str,
    ) -> Result<Option<(ConversationId, MessageId)>, StoreError> {
        let doing = "finding a poll";
        let key = BayKeys::new(bay).polls();
        let raw: Option<String> = self
            .query(doing, &key, cmd("HGET").arg(&key).arg(poll))
            .await?;
        Ok(raw.and_then(|r| {
            let (c, m) = r.split_once(' ')?;
            Some((ConversationId(c.to_owned()), MessageId(m.to_owned())))
        }))
    }

    async fn mark_read(
        &self,
        bay: &BayId,
        conversation: &ConversationRef,
        participant: &ParticipantId,
        message: &StoredMessage,
    ) -> Result<Option<EntryId>, StoreError> {
        let doing = "moving a read marker";
        let k = BayKeys::new(bay);
        let keys = MarkReadKeys {
            reads: k.reads(&conversation.id),
            log: k.log(),
            epoch: k.epoch(),
            log_meta: k.log_meta(),
            rosters: k.rosters(),
            conversations: k.conversations(),
            conversation_state: k.conversation_state(&conversation.id),
        };
        let read = Change::Read {
            participant: participant.clone(),
            message: message.id.clone(),
        };
        let log = self.log_args();
        let args = MarkReadArgs {
            participant_id: participant.as_str(),
            seq: &message.seq.to_string(),
            message_id: message.id.as_str(),
            event: &change_event(doing, conversation.clone(), read)?,
            conversation_id: conversation.id.as_str(),
            epoch_candidate: &log.epoch_candidate,
            window_ms: &log.window_ms,
            max_entries: &log.max_entries,
        };
        let reply = self
            .invoke_status(doing, &MARK_READ, &keys.in_order(), &args.in_order())
            .await?;
        Ok(match status(doing, &keys.reads, &reply)? {
            ScriptStatus::Ok => {
                let entry = reply
                    .get(1)
                    .ok_or_else(|| corrupt(doing, &keys.log, "no log id"))?;
                Some(entry_id(doing, &keys.log, entry)?)
            }
            ScriptStatus::Exists | ScriptStatus::Missing => None,
            other => {
                return Err(corrupt(
                    doing,
                    &keys.reads,
                    format!("script said {other:?}"),
                ))
            }
        })
    }

    async fn read_states(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        conversations: &[ConversationId],
    ) -> Result<Vec<ReadState>, StoreError> {
        let doing = "reading read markers";
        if conversations.is_empty() {
            return Ok(Vec::new());
        }
        let k = BayKeys::new(bay);
        let keys: Vec<String> = conversations
            .iter()
            .flat_map(|c| [k.conversation_state(c), k.reads(c), k.deleted(c)])
            .collect();
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let reply: Vec<String> = self
            .invoke(doing, &READ_STATES, &key_refs, &[participant.as_str()])
            .await?;
        reply
            .chunks(3)
            .map(|triple| {
                let [last, marker, deleted] = triple else {
                    return Err(corrupt(doing, &keys[0], "odd read-state reply"));
                };
                let deleted: u64 = deleted.parse().map_err(|e| corrupt(doing, &keys[2], e))?;
                let last: u64 = last.parse().map_err(|e| corrupt(doing, &keys[0], e))?;
                let (seq, last_read) = match marker.split_once(' ') {
                    Some((seq, id)) => (
                        seq.parse::<u64>()
                            .map_err(|e| corrupt(doing, &keys[1], e))?,
                        Some(MessageId(id.to_owned())),
                    ),
                    None => (0, None),
                };
                Ok(ReadState {
                    last_read,
                    unread: last.saturating_sub(seq).saturating_sub(deleted),
                })
            })
            .collect()
    }

    async fn message(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        message: &MessageId,
    ) -> Result<Option<StoredMessage>, StoreError> {
        let doing = "reading a message";
        let keys = HistoryKeys::new(bay, conversation);
        let raw: Option<Vec<u8>> = self
            .invoke(doing, &MESSAGE, &keys.in_order(), &[message.as_str()])
            .await?;
        let mut found: Vec<StoredMessage> = raw
            .map(|r| decode(doing, &keys.messages, &r))
            .transpose()?
            .into_iter()
            .collect();
        self.fill_drafts(bay, &mut found).await?;
        Ok(found.pop())
    }

    async fn messages_since(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        since: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let doing = "reading messages since a time";
        if limit == 0 {
            return Ok(Vec::new());
        }
        let k = BayKeys::new(bay);
        let (key, bodies) = (k.messages(conversation), k.bodies(conversation));
        // History ids are `<createdAt ms>-0` and createdAt has ms precision:
        // "strictly after `since`" is "ms > floor(since in ms)".
        let floor = since.timestamp_millis();
        let start = if floor < 0 {
            "-".to_owned()
        } else {
            format!("{}-0", floor + 1)
        };
        let reply: Vec<Vec<u8>> = self
            .invoke(
                doing,
                &MESSAGES_SINCE,
                &[&key, &bodies],
                &[&start, &limit.min(MAX_COUNT).to_string()],
            )
            .await?;
        let mut out = reply
            .iter()
            .map(|raw| decode(doing, &key, raw))
            .collect::<Result<Vec<StoredMessage>, _>>()?;
        self.fill_drafts(bay, &mut out).await?;
        Ok(out)
    }

    async fn messages_before(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        before: Option<&MessageId>,
        limit: usize,
    ) -> Result<(Vec<StoredMessage>, bool), StoreError> {
        let doing = "reading a page of messages";
        let keys = HistoryKeys::new(bay, conversation);
        let msgs = &keys.messages;
        let reply: Value = self
            .invoke(
                doing,
                &MESSAGES_BEFORE,
                &keys.in_order(),
                &[
                    before.map(|m| m.as_str()).unwrap_or(""),
                    &limit.min(MAX_PAGE).to_string(),
                ],
            )
            .await?;
        let items = array(doing, msgs, &reply)?;
        let (more, page) = items
            .split_first()
            .ok_or_else(|| corrupt(doing, msgs, "empty page reply"))?;
        let more = matches!(more, Value::Int(1));
        let mut out = page
            .iter()
            .map(|v| decode::<StoredMessage>(doing, msgs, bytes(doing, msgs, v)?))
            .collect::<Result<Vec<_>, _>>()?;
        out.reverse();
        self.fill_drafts(bay, &mut out).await?;
        Ok((out, more))
    }
}

impl RedisStore {
    /// Brings open drafts among `messages` up to date: their body keeps
    /// the text they opened with; the text so far and the version live
    /// apart (see `drafts/append.lua`).
    async fn fill_drafts(
        &self,
        bay: &BayId,
        messages: &mut [StoredMessage],
    ) -> Result<(), StoreError> {
        let doing = "reading a draft";
        let k = BayKeys::new(bay);
        for m in messages.iter_mut().filter(|m| m.is_streaming()) {
            let (text_key, versions) = (
                k.draft_text(&m.conversation_id, m.id.as_str()),
                k.versions(&m.conversation_id),
            );
            let (text, version): (Option<String>, Option<u64>) = self
                .invoke(
                    doing,
                    &DRAFT_STATE,
                    &[&text_key, &versions],
                    &[m.id.as_str()],
                )
                .await?;
            // Missing text: the draft ended between the two reads; the
            // body read first is still a consistent older state.
            if let Some(text) = text {
                m.content = text;
                m.version = version.unwrap_or(m.version);
            }
        }
        Ok(())
    }

    /// Formats a Unix time in ms with the Lua formatter `append_message`
    /// uses for `createdAt` (for tests that check it against chrono).
    #[doc(hidden)]
    pub async fn lua_format_ms(&self, ms: u64) -> Result<String, StoreError> {
        self.invoke("formatting a time", &FORMAT_MS, &[], &[&ms.to_string()])
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::redis::lua::bound;

    #[test]
    fn scripts_bind_their_keys_and_args_in_order() {
        let change = include_str!("messages/change.lua");
        assert_eq!(bound(change, "KEYS"), ChangeKeys::NAMES);
        assert_eq!(bound(change, "ARGV"), ChangeArgs::NAMES);
        let mark_read = include_str!("messages/mark_read.lua");
        assert_eq!(bound(mark_read, "KEYS"), MarkReadKeys::NAMES);
        assert_eq!(bound(mark_read, "ARGV"), MarkReadArgs::NAMES);
        for body in [
            include_str!("messages/message.lua"),
            include_str!("messages/before.lua"),
        ] {
            assert_eq!(bound(body, "KEYS"), HistoryKeys::NAMES);
        }
    }
}
