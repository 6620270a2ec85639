//! Appending a message (`append.lua`, which appends a batch of them; see
//! `batch.rs`): the script's named KEYS and ARGV, the Bay's and each
//! message's, the message and event JSON with holes the script fills
//! (`createdAt`, `routing.suppressed`, `seq`, and the message inside the
//! event), and what its answer for one message means.

use super::batch::Part;
use super::ISO_MS;
use crate::model::StoredMessage;
use crate::store::redis::codec::{
    bytes, corrupt, decode, entry_id, punch, status, text, to_text, to_value, unavailable, Holes,
    ScriptStatus,
};
use crate::store::redis::keys::{self, BayKeys};
use crate::store::redis::lua::{
    lua_params, LuaScript, APPEND_LOG, REVISION, ROUND_STEP, TAKE_BUDGET,
};
use crate::store::redis::RedisStore;
use crate::store::{AppendOutcome, NewMessage, StoreError};
use ::redis::{cmd, Value};
use chrono::{DateTime, SecondsFormat, Utc};
use std::ops::ControlFlow;
use std::sync::LazyLock;
use std::time::Duration;
use switchboard_protocol::cursor::EntryId;
use switchboard_protocol::ids::{BayId, TokenId};
use switchboard_protocol::model::ParticipantKind;

/// The append's script (KEYS: [`AppendKeys`], then [`MessageKeys`] per
/// message; ARGV: [`AppendArgs`], then [`MessageArgs`] per message).
pub(super) static APPEND_MESSAGES: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(&[
        APPEND_LOG,
        REVISION,
        ROUND_STEP,
        TAKE_BUDGET,
        ISO_MS,
        include_str!("append.lua"),
    ])
});

lua_params! {
    /// The first KEYS of `append.lua`, the batch's Bay's: each the
    /// [`BayKeys`] key of the same name.
    pub(super) struct AppendKeys of String {
        conversations, revisions, log, epoch, log_meta, rosters, polls, drafts, draft_info,
    }
}

impl AppendKeys {
    /// The Bay keys every append in `bay` touches.
    pub(super) fn new(bay: &BayId) -> Self {
        let k = BayKeys::new(bay);
        AppendKeys {
            conversations: k.conversations(),
            revisions: k.revisions(),
            log: k.log(),
            epoch: k.epoch(),
            log_meta: k.log_meta(),
            rosters: k.rosters(),
            polls: k.polls(),
            drafts: k.drafts(),
            draft_info: k.draft_info(),
        }
    }
}

lua_params! {
    /// The KEYS of one message of `append.lua`: each the [`BayKeys`] key of
    /// the same name, of the message's conversation; `idempotency` is the
    /// send's key (a placeholder key when it has none), `draft_text` the
    /// message's and `budget` the sender's agent bucket (`rate_limit`; a
    /// placeholder when the message carries no budget).
    pub(super) struct MessageKeys of String {
        conversation_state, messages, message_ids, bodies, idempotency, draft_text, budget,
    }
}

impl MessageKeys {
    /// The keys an append of `new` in `bay` touches beyond the Bay's.
    pub(super) fn new(bay: &BayId, new: &NewMessage) -> Self {
        let k = BayKeys::new(bay);
        let cid = &new.conversation.id;
        let idempotency = new.idempotency.as_ref().map_or("none", |i| i.key.as_str());
        MessageKeys {
            conversation_state: k.conversation_state(cid),
            messages: k.messages(cid),
            message_ids: k.message_ids(cid),
            bodies: k.bodies(cid),
            idempotency: k.idempotency(idempotency),
            draft_text: k.draft_text(cid, new.message.id.as_str()),
            budget: match &new.budget {
                Some(b) => k.rate_limit(&b.token, "agent"),
                None => k.rate_limit(&TokenId("none".into()), "agent"),
            },
        }
    }
}

lua_params! {
    /// The first ARGV of `append.lua`: the log append's
    /// [`LogArgs`](crate::store::redis::log::LogArgs), once per batch.
    pub(super) struct AppendArgs<'a> of &'a str { epoch_candidate, window_ms, max_entries }
}

lua_params! {
    /// The ARGV of one message of `append.lua`. `sender_kind` is `user` or
    /// `agent`, `round_cap` `''` for none, `given_suppressed`
    /// `true`/`false`; `message_0..3` are the message JSON around its
    /// holes for `createdAt`, `routing.suppressed` and `seq`, `event_0..1`
    /// the log event around the message; `revision` is the one the message
    /// was routed with; `fingerprint` and `poll_id` are `''` for none;
    /// `draft_author` (`''` unless the message is an open draft) and
    /// `draft_content` its text so far; `clock_ms` is the node's clock
    /// (Unix ms) and `clock_iso` the same time as `createdAt` is written
    /// (RFC 3339, ms, `Z`): the script floors it after the previous
    /// message; `budget_interval` (µs, `''` for no budget) and
    /// `budget_burst` shape the sender's bucket.
    struct MessageArgs<'a> of &'a str {
        conversation_id, message_id, sender_kind, round_cap, given_suppressed,
        message_0, message_1, message_2, message_3, event_0, event_1,
        revision, fingerprint, poll_id, sender_id, draft_author, draft_content,
        clock_ms, clock_iso, budget_interval, budget_burst,
    }
}

/// The JSON pieces the script concatenates around what it stamps.
struct Pieces {
    /// The message around the holes for `createdAt`, `routing.suppressed`
    /// and `seq`: four pieces.
    message: Vec<String>,
    /// The log event around the hole for the message: two pieces.
    event: Vec<String>,
}

impl Pieces {
    /// Renders `new`'s message with three holes and its log event with
    /// one (the message itself, already in the pieces above: no second
    /// serialization of the message).
    fn render(doing: &'static str, new: &NewMessage) -> Result<Self, StoreError> {
        let holes = Holes::new();
        let mut message = to_value(doing, &new.message)?;
        punch(doing, &mut message, &["created_at"], holes.hole(0))?;
        punch(
            doing,
            &mut message,
            &["routing", "suppressed"],
            holes.hole(1),
        )?;
        punch(doing, &mut message, &["seq"], holes.hole(2))?;
        let message = holes.split(doing, &to_text(doing, &message)?, 3)?;
        let event_holes = Holes::new();
        let mut event = serde_json::json!({
            "kind": "message",
            "conversation": to_value(doing, &new.conversation)?,
            "message": null,
        });
        punch(doing, &mut event, &["message"], event_holes.hole(0))?;
        let event = event_holes.split(doing, &to_text(doing, &event)?, 1)?;
        Ok(Pieces { message, event })
    }
}

/// What the script stamped on an appended message, and its log entry.
pub(super) struct Stamped {
    pub entry: EntryId,
    /// `createdAt` in Unix ms.
    created_ms: i64,
    suppressed: bool,
    seq: u64,
}

impl Stamped {
    /// Reads the script's reply: `Continue` with the stamps when the
    /// message was stored, `Break` with the outcome when nothing was
    /// (stale revision, spent budget, idempotent retry, reused key).
    /// Every answer but `stale`, `missing` and `failed` means the script
    /// reached the budget: `new`'s is marked taken. `failed` (an error
    /// inside the script for this message) is `Corrupt` for a key of the
    /// wrong type, else `Unavailable`, as a lone command's error is.
    pub(super) fn from_reply(
        doing: &'static str,
        bay: &BayId,
        keys: &MessageKeys,
        new: &NewMessage,
        reply: &[Value],
    ) -> Result<ControlFlow<AppendOutcome, Stamped>, StoreError> {
        let msgs = keys.messages.as_str();
        let cid = &new.conversation.id;
        let status = status(doing, msgs, reply)?;
        if let Some(b) = &new.budget {
            if !matches!(
                status,
                ScriptStatus::Stale | ScriptStatus::Missing | ScriptStatus::Failed
            ) {
                b.mark_taken();
            }
        }
        let done = match status {
            ScriptStatus::Ok => return Self::parse(doing, keys, reply).map(ControlFlow::Continue),
            ScriptStatus::Failed => {
                let cause = reply
                    .get(1)
                    .map(|v| text(doing, msgs, v))
                    .transpose()?
                    .unwrap_or("no error text");
                return Err(if cause.starts_with("WRONGTYPE") {
                    corrupt(doing, msgs, cause)
                } else {
                    unavailable(doing, msgs, cause)
                });
            }
            ScriptStatus::Stale => AppendOutcome::Stale,
            ScriptStatus::Conflict => AppendOutcome::KeyReused,
            ScriptStatus::Limited => {
                let wait: u64 = reply
                    .get(1)
                    .map(|v| text(doing, &keys.budget, v))
                    .transpose()?
                    .and_then(|w| w.parse().ok())
                    .ok_or_else(|| corrupt(doing, &keys.budget, "no wait in a refusal"))?;
                AppendOutcome::RateLimited(Duration::from_micros(wait.max(1)))
            }
            ScriptStatus::Exists => {
                let first = reply
                    .get(1)
                    .map(|v| bytes(doing, msgs, v))
                    .transpose()?
                    .filter(|b| !b.is_empty())
                    .ok_or_else(|| corrupt(doing, msgs, "idempotent send lost its message"))?;
                AppendOutcome::Duplicate(Box::new(decode(doing, msgs, first)?))
            }
            ScriptStatus::Missing => {
                return Err(corrupt(
                    doing,
                    &BayKeys::new(bay).conversations(),
                    format!("conversation {cid} vanished"),
                ))
            }
            other => return Err(corrupt(doing, msgs, format!("script said {other:?}"))),
        };
        Ok(ControlFlow::Break(done))
    }

    /// The `{'ok', log id, createdAt ms, suppressed, seq}` reply.
    /// Errors name the conversation's key: the reply is the script's.
    fn parse(doing: &'static str, keys: &MessageKeys, reply: &[Value]) -> Result<Self, StoreError> {
        let msgs = keys.messages.as_str();
        let [_, entry, ms, suppressed, seq] = reply else {
            return Err(corrupt(doing, msgs, "append script gave a malformed reply"));
        };
        Ok(Stamped {
            entry: entry_id(doing, msgs, entry)?,
            created_ms: text(doing, msgs, ms)?
                .parse()
                .map_err(|e| corrupt(doing, msgs, e))?,
            suppressed: text(doing, msgs, suppressed)? == "true",
            seq: text(doing, msgs, seq)?
                .parse()
                .map_err(|e| corrupt(doing, msgs, e))?,
        })
    }

    /// The stored message: ours with the holes filled (patched in rather
    /// than decoding the JSON back).
    pub(super) fn fill(
        &self,
        doing: &'static str,
        msgs: &str,
        mut message: StoredMessage,
    ) -> Result<StoredMessage, StoreError> {
        let ms = self.created_ms;
        message.created_at = DateTime::<Utc>::from_timestamp_millis(ms)
            .ok_or_else(|| corrupt(doing, msgs, format!("createdAt {ms} out of range")))?;
        message.routing.suppressed = self.suppressed;
        message.seq = self.seq;
        Ok(message)
    }
}

/// `new`'s part of a batched append (its version already 0): its keys
/// and arguments, in the script's order.
pub(super) fn part(
    doing: &'static str,
    keys: &MessageKeys,
    new: &NewMessage,
    sender_kind: ParticipantKind,
) -> Result<Part, StoreError> {
    let pieces = Pieces::render(doing, new)?;
    let m = &new.message;
    let budget = &new.budget;
    let draft = m.is_streaming();
    let now = Utc::now();
    let clock_ms = now.timestamp_millis().to_string();
    let clock_iso = now.to_rfc3339_opts(SecondsFormat::Millis, true);
    let args = MessageArgs {
        conversation_id: new.conversation.id.as_str(),
        message_id: m.id.as_str(),
        sender_kind: match sender_kind {
            ParticipantKind::User => "user",
            ParticipantKind::Agent => "agent",
        },
        round_cap: &new.round_cap.map(|c| c.to_string()).unwrap_or_default(),
        given_suppressed: if m.routing.suppressed {
            "true"
        } else {
            "false"
        },
        message_0: &pieces.message[0],
        message_1: &pieces.message[1],
        message_2: &pieces.message[2],
        message_3: &pieces.message[3],
        event_0: &pieces.event[0],
        event_1: &pieces.event[1],
        revision: &new.revision.to_string(),
        fingerprint: new
            .idempotency
            .as_ref()
            .map_or("", |i| i.fingerprint.as_str()),
        poll_id: m.poll.as_ref().map_or("", |p| p.id.as_str()),
        sender_id: m.sender.id.as_str(),
        draft_author: if draft { m.sender.id.as_str() } else { "" },
        draft_content: if draft { m.content.as_str() } else { "" },
        clock_ms: &clock_ms,
        clock_iso: &clock_iso,
        budget_interval: &budget
            .as_ref()
            .map(|b| b.interval_us.to_string())
            .unwrap_or_default(),
        budget_burst: &budget
            .as_ref()
            .map(|b| b.burst.to_string())
            .unwrap_or_default(),
    };
    Ok(Part {
        keys: keys.in_order().into_iter().map(str::to_owned).collect(),
        args: args.in_order().into_iter().map(str::to_owned).collect(),
    })
}

impl RedisStore {
    /// Notes `bay` in the sweep's cross-Bay index of Bays with open
    /// drafts. It lives in another slot, so it is written after the Bay's
    /// own keys; the sweep checks the Bay's set.
    pub(super) async fn index_draft_bay(
        &self,
        doing: &'static str,
        bay: &BayId,
    ) -> Result<(), StoreError> {
        let index = keys::draft_bays();
        let _: i64 = self
            .query(doing, &index, cmd("SADD").arg(&index).arg(bay.as_str()))
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::redis::lua::bindings;

    #[test]
    fn the_append_binds_its_keys_and_args_in_order() {
        let body = include_str!("append.lua");
        assert_eq!(
            bindings(body, "KEYS"),
            [AppendKeys::NAMES, MessageKeys::NAMES]
        );
        assert_eq!(
            bindings(body, "ARGV"),
            [AppendArgs::NAMES, MessageArgs::NAMES]
        );
        // The per-message counts the script steps by.
        assert!(body.contains(&format!(
            "local KEYS_EACH, ARGS_EACH = {}, {}",
            MessageKeys::NAMES.len(),
            MessageArgs::NAMES.len()
        )));
        assert!(body.contains(&format!(
            "10 + i * KEYS_EACH, {} + i * ARGS_EACH",
            AppendArgs::NAMES.len() + 1
        )));
        assert!(body.contains(&format!(
            "(#ARGV - {}) / ARGS_EACH",
            AppendArgs::NAMES.len()
        )));
        assert!(body.contains(&format!("unpack(KEYS, 1, {})", AppendKeys::NAMES.len())));
    }
}
