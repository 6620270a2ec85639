//! Streaming drafts: the Redis engine's [`DraftStore`]. A draft is open
//! while its id is in the Bay's `drafts` index (opened by the message
//! append, `messages/append.lua`); its text so far lives apart from its
//! body. Scripts: `drafts/append.lua` (one flush window's delta) and
//! `drafts/close.lua` (completion, with the round step).

use super::codec::{corrupt, entry_id, status, to_text, to_value, ScriptStatus};
use super::keys::{self, BayKeys};
use super::lua::{lua_params, LuaScript, APPEND_LOG, REVISION, ROUND_STEP};
use super::{change_event, changed, RedisStore};
use crate::store::log::Change;
use crate::store::{
    Changed, DraftAppend, DraftAppended, DraftStore, MessageChange, OpenDraft, RoundStep,
    StoreError,
};
use ::redis::cmd;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::sync::LazyLock;
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId};
use switchboard_protocol::model::ParticipantKind;

/// `append_draft`'s script (KEYS: [`AppendDraftKeys`]; ARGV:
/// [`AppendDraftArgs`]).
static APPEND_DRAFT: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(&[APPEND_LOG, REVISION, include_str!("drafts/append.lua")]));

/// `close_draft`'s script (KEYS: [`CloseDraftKeys`]; ARGV:
/// [`CloseDraftArgs`]).
static CLOSE_DRAFT: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(&[
        APPEND_LOG,
        REVISION,
        ROUND_STEP,
        include_str!("drafts/close.lua"),
    ])
});

lua_params! {
    /// KEYS of `drafts/append.lua`, each the [`BayKeys`] key of the same
    /// name (`draft_text` of the draft).
    struct AppendDraftKeys of String {
        versions, draft_text, drafts, log, epoch, log_meta, rosters, conversations, revisions,
    }
}

lua_params! {
    /// ARGV of `drafts/append.lua`: the draft, the version the text was
    /// written against, the text and its `message.delta` event JSON, the
    /// log append's arguments, and the conversation with the revision the
    /// append was authorized with.
    struct AppendDraftArgs<'a> of &'a str {
        message_id, version, text, event, epoch_candidate, window_ms, max_entries,
        conversation_id, revision,
    }
}

lua_params! {
    /// KEYS of `drafts/close.lua`, each the [`BayKeys`] key of the same
    /// name (of the draft's conversation; `draft_text` of the draft).
    struct CloseDraftKeys of String {
        conversations, revisions, message_ids, versions, bodies, log, epoch, log_meta, rosters,
        conversation_state, draft_text, drafts, draft_info,
    }
}

impl CloseDraftKeys {
    fn new(bay: &BayId, cid: &ConversationId, mid: &MessageId) -> Self {
        let k = BayKeys::new(bay);
        CloseDraftKeys {
            conversations: k.conversations(),
            revisions: k.revisions(),
            message_ids: k.message_ids(cid),
            versions: k.versions(cid),
            bodies: k.bodies(cid),
            log: k.log(),
            epoch: k.epoch(),
            log_meta: k.log_meta(),
            rosters: k.rosters(),
            conversation_state: k.conversation_state(cid),
            draft_text: k.draft_text(cid, mid.as_str()),
            drafts: k.drafts(),
            draft_info: k.draft_info(),
        }
    }
}

lua_params! {
    /// ARGV of `drafts/close.lua`: the revision the completion was
    /// authorized with, the new version, the body and event with
    /// `suppressed` false (or as given, without a round step), the log
    /// append's arguments, the round step (`sender_kind` `user`/`agent`,
    /// `''` for none; `round_cap` `''` for none), the body and event with
    /// `suppressed` true, and the given flag.
    struct CloseDraftArgs<'a> of &'a str {
        conversation_id, message_id, revision, version, body, event,
        epoch_candidate, window_ms, max_entries, sender_kind, round_cap,
        body_suppressed, event_suppressed, given_suppressed,
    }
}

/// A completed draft's final body and log event, rendered for each
/// outcome of the round cap: the script picks one, so it never edits JSON.
struct Endings {
    /// Without a round step the given flag stands (`body`, `event`); with
    /// one, these have `suppressed` false and the `*_suppressed` true.
    body: String,
    event: String,
    body_suppressed: String,
    event_suppressed: String,
}

impl Endings {
    fn render(
        doing: &'static str,
        change: &MessageChange,
        round: Option<RoundStep>,
    ) -> Result<Self, StoreError> {
        let given = change.message.routing.suppressed;
        let (body, event) = Self::rendered(doing, change, given && round.is_none())?;
        let (body_suppressed, event_suppressed) = match round {
            Some(_) => Self::rendered(doing, change, true)?,
            None => (String::new(), String::new()),
        };
        Ok(Endings {
            body,
            event,
            body_suppressed,
            event_suppressed,
        })
    }

    /// The body and the logged change with `routing.suppressed` set to
    /// `suppressed`.
    fn rendered(
        doing: &'static str,
        change: &MessageChange,
        suppressed: bool,
    ) -> Result<(String, String), StoreError> {
        let mut message = change.message.clone();
        let mut logged = change.change.clone();
        message.routing.suppressed = suppressed;
        if let Change::Completed { message: m } = &mut logged {
            m.routing.suppressed = suppressed;
        }
        let body = to_text(doing, &to_value(doing, &message)?)?;
        let event = change_event(doing, change.conversation.clone(), logged)?;
        Ok((body, event))
    }
}

#[async_trait]
impl DraftStore for RedisStore {
    async fn append_draft(
        &self,
        bay: &BayId,
        append: DraftAppend,
    ) -> Result<DraftAppended, StoreError> {
        let doing = "appending to a draft";
        let k = BayKeys::new(bay);
        let cid = append.conversation.id.clone();
        let keys = AppendDraftKeys {
            versions: k.versions(&cid),
            draft_text: k.draft_text(&cid, append.message.as_str()),
            drafts: k.drafts(),
            log: k.log(),
            epoch: k.epoch(),
            log_meta: k.log_meta(),
            rosters: k.rosters(),
            conversations: k.conversations(),
            revisions: k.revisions(),
        };
        let version = append.version + 1;
        let delta = Change::Delta {
            message: append.message.clone(),
            offset: append.offset,
            text: append.text.clone(),
            version,
        };
        let log = self.log_args();
        let args = AppendDraftArgs {
            message_id: append.message.as_str(),
            version: &append.version.to_string(),
            text: &append.text,
            event: &change_event(doing, append.conversation, delta)?,
            epoch_candidate: &log.epoch_candidate,
            window_ms: &log.window_ms,
            max_entries: &log.max_entries,
            conversation_id: cid.as_str(),
            revision: &append.revision.to_string(),
        };
        let reply = self
            .invoke_status(doing, &APPEND_DRAFT, &keys.in_order(), &args.in_order())
            .await?;
        Ok(match status(doing, &keys.draft_text, &reply)? {
            ScriptStatus::Ok => {
                let entry = reply
                    .get(1)
                    .ok_or_else(|| corrupt(doing, &keys.log, "no log id"))?;
                DraftAppended::Appended {
                    entry: entry_id(doing, &keys.log, entry)?,
                    version,
                }
            }
            ScriptStatus::Conflict => DraftAppended::Conflict,
            ScriptStatus::Closed => DraftAppended::Closed,
            ScriptStatus::Stale => DraftAppended::Stale,
            ScriptStatus::Missing => DraftAppended::NotFound,
            other => {
                return Err(corrupt(
                    doing,
                    &keys.draft_text,
                    format!("script said {other:?}"),
                ))
            }
        })
    }

    async fn close_draft(
        &self,
        bay: &BayId,
        change: MessageChange,
        round: Option<RoundStep>,
    ) -> Result<Changed, StoreError> {
        let doing = "ending a draft";
        let keys = CloseDraftKeys::new(bay, &change.conversation.id, &change.message.id);
        let endings = Endings::render(doing, &change, round)?;
        let log = self.log_args();
        let args = CloseDraftArgs {
            conversation_id: change.conversation.id.as_str(),
            message_id: change.message.id.as_str(),
            revision: &change.revision.to_string(),
            version: &change.message.version.to_string(),
            body: &endings.body,
            event: &endings.event,
            epoch_candidate: &log.epoch_candidate,
            window_ms: &log.window_ms,
            max_entries: &log.max_entries,
            sender_kind: match round.map(|r| r.sender) {
                Some(ParticipantKind::User) => "user",
                Some(ParticipantKind::Agent) => "agent",
                None => "",
            },
            round_cap: &round
                .and_then(|r| r.cap)
                .map(|c| c.to_string())
                .unwrap_or_default(),
            body_suppressed: &endings.body_suppressed,
            event_suppressed: &endings.event_suppressed,
            given_suppressed: if change.message.routing.suppressed {
                "true"
            } else {
                "false"
            },
        };
        let reply = self
            .invoke_status(doing, &CLOSE_DRAFT, &keys.in_order(), &args.in_order())
            .await?;
        changed(doing, &keys.bodies, &keys.log, &reply)
    }

    async fn open_drafts(&self, bay: &BayId) -> Result<Vec<OpenDraft>, StoreError> {
        let doing = "listing open drafts";
        let k = BayKeys::new(bay);
        let (drafts, info) = (k.drafts(), k.draft_info());
        let scored: Vec<(String, i64)> = self
            .query(
                doing,
                &drafts,
                cmd("ZRANGE").arg(&drafts).arg(0).arg(-1).arg("WITHSCORES"),
            )
            .await?;
        if scored.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<&str> = scored.iter().map(|(m, _)| m.as_str()).collect();
        let infos: Vec<Option<String>> = self
            .query(doing, &info, cmd("HMGET").arg(&info).arg(&ids))
            .await?;
        Ok(scored
            .iter()
            .zip(infos)
            .filter_map(|((mid, ms), info)| {
                let info = info?;
                let (cid, author) = info.split_once(' ')?;
                Some(OpenDraft {
                    conversation: ConversationId(cid.to_owned()),
                    message: MessageId(mid.clone()),
                    author: ParticipantId(author.to_owned()),
                    last_activity: DateTime::<Utc>::from_timestamp_millis(*ms)?,
                })
            })
            .collect())
    }

    async fn draft_bays(&self) -> Result<Vec<BayId>, StoreError> {
        let doing = "listing Bays with drafts";
        let key = keys::draft_bays();
        let raw: Vec<String> = self.query(doing, &key, cmd("SMEMBERS").arg(&key)).await?;
        Ok(raw.into_iter().map(BayId).collect())
    }

    async fn prune_draft_bay(&self, bay: &BayId) -> Result<(), StoreError> {
        let doing = "pruning the draft index";
        let drafts = BayKeys::new(bay).drafts();
        let open: i64 = self
            .query(doing, &drafts, cmd("ZCARD").arg(&drafts))
            .await?;
        if open == 0 {
            // A draft opened between the two calls re-adds the Bay itself.
            let key = keys::draft_bays();
            let _: i64 = self
                .query(doing, &key, cmd("SREM").arg(&key).arg(bay.as_str()))
                .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::redis::lua::bound;

    #[test]
    fn scripts_bind_their_keys_and_args_in_order() {
        let append = include_str!("drafts/append.lua");
        assert_eq!(bound(append, "KEYS"), AppendDraftKeys::NAMES);
        assert_eq!(bound(append, "ARGV"), AppendDraftArgs::NAMES);
        let close = include_str!("drafts/close.lua");
        assert_eq!(bound(close, "KEYS"), CloseDraftKeys::NAMES);
        assert_eq!(bound(close, "ARGV"), CloseDraftArgs::NAMES);
    }
}
