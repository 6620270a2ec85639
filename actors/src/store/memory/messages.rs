//! Messages: appends, changes, history, read markers: the memory engine's [`MessageStore`].

use super::log::log_of;
use super::{now_ms, now_us, BayState, ConversationState, MemoryStore};
use crate::model::StoredMessage;
use crate::store::log::{Change, LogEvent};
use crate::store::{
    next_round, AppendOutcome, Appended, Budget, Changed, Idempotency, MessageChange, MessageStore,
    NewMessage, OpenDraft, ReadState, StoreError,
};
use async_trait::async_trait;
use chrono::{DateTime, SubsecRound, Utc};
use std::collections::HashMap;
use std::time::Duration;
use switchboard_protocol::cursor::EntryId;
use switchboard_protocol::event::ConversationRef;
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId, TokenId};
use switchboard_protocol::model::ParticipantKind;

/// Takes one call from `budget`'s bucket (GCRA, as `lua/budget.lua`):
/// `Err(wait)` when it is empty. Buckets full again are dropped, so the
/// map holds only tokens active within about a minute.
fn take_budget(buckets: &mut HashMap<TokenId, u64>, budget: &Budget) -> Result<(), Duration> {
    let now = now_us();
    let (interval, burst) = (budget.interval_us, u64::from(budget.burst));
    buckets.retain(|_, tat| *tat > now);
    let tat = buckets.get(&budget.token).copied().unwrap_or(now).max(now);
    let new_tat = tat + interval;
    let allow_at = new_tat.saturating_sub(burst * interval);
    if now < allow_at {
        return Err(Duration::from_micros(allow_at - now));
    }
    buckets.insert(budget.token.clone(), new_tat);
    Ok(())
}

/// A remembered idempotent send.
pub(super) struct IdempotentSend {
    fingerprint: String,
    conversation: ConversationId,
    message: MessageId,
    /// Forgotten after the replay window, like the Redis key's TTL.
    expires_ms: u64,
}

#[async_trait]
impl MessageStore for MemoryStore {
    async fn append_message(
        &self,
        bay: &BayId,
        new: NewMessage,
        sender_kind: ParticipantKind,
    ) -> Result<AppendOutcome, StoreError> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let b = st
            .bays
            .get_mut(bay)
            .ok_or_else(|| vanished(format!("bay {bay} vanished")))?;
        let cid = &new.conversation.id;
        let conv = b
            .conversations
            .get(cid)
            .ok_or_else(|| vanished(format!("conversation {cid} vanished")))?;
        if conv.revision != new.revision {
            return Ok(AppendOutcome::Stale);
        }
        if let Some(budget) = &new.budget {
            budget.mark_taken();
            if let Err(wait) = take_budget(&mut b.budgets, budget) {
                return Ok(AppendOutcome::RateLimited(wait));
            }
        }
        if let Some(idem) = &new.idempotency {
            let window_ms = self.limits.replay_window.as_millis() as u64;
            if let Some(earlier) = idempotent_send(b, idem, &new, window_ms)? {
                return Ok(earlier);
            }
        }
        let conv = b
            .conversations
            .get_mut(cid)
            .ok_or_else(|| vanished(format!("conversation {cid} vanished")))?;
        let mut message = conv.stamp(new.message);
        if let Some(poll) = &message.poll {
            b.polls
                .insert(poll.id.clone(), (cid.clone(), message.id.clone()));
        }
        if message.is_streaming() {
            // A draft counts for the round cap when it completes.
            b.drafts.insert(
                message.id.clone(),
                OpenDraft {
                    conversation: cid.clone(),
                    message: message.id.clone(),
                    author: message.sender.id.clone(),
                    last_activity: Utc::now(),
                },
            );
        } else {
            (conv.agent_rounds, message.routing.suppressed) = next_round(
                conv.agent_rounds,
                sender_kind,
                new.round_cap,
                message.routing.suppressed,
            );
        }
        conv.messages.push(message.clone());
        let entry = log_of(&mut st.logs, bay).append(
            LogEvent::Message {
                conversation: new.conversation,
                message: Box::new(message.clone()),
            },
            &self.limits,
        );
        Ok(AppendOutcome::Appended(Box::new(Appended {
            message,
            entry,
        })))
    }

    async fn change_message(
        &self,
        bay: &BayId,
        change: MessageChange,
    ) -> Result<Changed, StoreError> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let Some(conv) = st
            .bays
            .get_mut(bay)
            .and_then(|b| b.conversations.get_mut(&change.conversation.id))
        else {
            return Ok(Changed::NotFound);
        };
        if conv.revision != change.revision {
            return Ok(Changed::Stale);
        }
        let Some(at) = conv.position(&change.message.id) else {
            return Ok(Changed::NotFound);
        };
        if conv.messages[at].version + 1 != change.message.version {
            return Ok(Changed::Conflict);
        }
        conv.messages[at] = change.message;
        let entry = log_of(&mut st.logs, bay).append(
            LogEvent::Change {
                conversation: change.conversation,
                change: Box::new(change.change),
            },
            &self.limits,
        );
        Ok(Changed::Changed(entry))
    }

    async fn poll_message(
        &self,
        bay: &BayId,
        poll: &str,
    ) -> Result<Option<(ConversationId, MessageId)>, StoreError> {
        let st = self.state.lock();
        Ok(st.bays.get(bay).and_then(|b| b.polls.get(poll).cloned()))
    }

    async fn mark_read(
        &self,
        bay: &BayId,
        conversation: &ConversationRef,
        participant: &ParticipantId,
        message: &StoredMessage,
    ) -> Result<Option<EntryId>, StoreError> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let Some(conv) = st
            .bays
            .get_mut(bay)
            .and_then(|b| b.conversations.get_mut(&conversation.id))
        else {
            return Ok(None);
        };
        if conv
            .reads
            .get(participant)
            .is_some_and(|(seq, _)| *seq >= message.seq)
        {
            return Ok(None);
        }
        conv.reads
            .insert(participant.clone(), (message.seq, message.id.clone()));
        let entry = log_of(&mut st.logs, bay).append(
            LogEvent::Change {
                conversation: conversation.clone(),
                change: Box::new(Change::Read {
                    participant: participant.clone(),
                    message: message.id.clone(),
                }),
            },
            &self.limits,
        );
        Ok(Some(entry))
    }

    async fn read_states(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        conversations: &[ConversationId],
    ) -> Result<Vec<ReadState>, StoreError> {
        let st = self.state.lock();
        Ok(conversations
            .iter()
            .map(|c| {
                let Some(conv) = st.bays.get(bay).and_then(|b| b.conversations.get(c)) else {
                    return ReadState::default();
                };
                let (seq, last_read) = match conv.reads.get(participant) {
                    Some((seq, id)) => (*seq, Some(id.clone())),
                    None => (0, None),
                };
                // Tombstones are not unread: history is in `seq` order.
                let after = &conv.messages[conv.messages.partition_point(|m| m.seq <= seq)..];
                let deleted = after.iter().filter(|m| m.deleted_at.is_some()).count() as u64;
                ReadState {
                    last_read,
                    unread: conv.last_seq().saturating_sub(seq).saturating_sub(deleted),
                }
            })
            .collect())
    }

    async fn message(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        message: &MessageId,
    ) -> Result<Option<StoredMessage>, StoreError> {
        Ok(self.with_history(bay, conversation, |msgs| {
            msgs.iter().rev().find(|m| &m.id == message).cloned()
        }))
    }

    async fn messages_since(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        since: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        Ok(self.with_history(bay, conversation, |msgs| {
            let start = msgs.partition_point(|m| m.created_at <= since);
            msgs[start..].iter().take(limit).cloned().collect()
        }))
    }

    async fn messages_before(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        before: Option<&MessageId>,
        limit: usize,
    ) -> Result<(Vec<StoredMessage>, bool), StoreError> {
        Ok(self.with_history(bay, conversation, |msgs| {
            let end = match before {
                Some(id) => msgs.iter().position(|m| &m.id == id).unwrap_or(0),
                None => msgs.len(),
            };
            let start = end.saturating_sub(limit);
            (msgs[start..end].to_vec(), start > 0)
        }))
    }
}

/// An append's record gone missing under the lock (a Bay or conversation
/// the caller just read): corruption, not an outcome.
fn vanished(cause: String) -> StoreError {
    StoreError::Corrupt {
        doing: "appending a message",
        cause,
    }
}

/// Checks and remembers the send's idempotency key `idem` in `b` (keys
/// are forgotten `window_ms` after their send, like the Redis key's TTL):
/// `Some` outcome when the key was used before — the first send's message
/// as it is now, or `KeyReused` for another request — and nothing may be
/// stored; `None` when the send is new (the key now remembers it).
fn idempotent_send(
    b: &mut BayState,
    idem: &Idempotency,
    new: &NewMessage,
    window_ms: u64,
) -> Result<Option<AppendOutcome>, StoreError> {
    let now_ms = now_ms();
    b.idempotency.retain(|_, s| s.expires_ms > now_ms);
    if let Some(seen) = b.idempotency.get(&idem.key) {
        if seen.fingerprint != idem.fingerprint {
            return Ok(Some(AppendOutcome::KeyReused));
        }
        let first = b
            .conversations
            .get(&seen.conversation)
            .and_then(|c| c.position(&seen.message).map(|i| c.messages[i].clone()))
            .ok_or_else(|| vanished(format!("idempotent send {} vanished", seen.message)))?;
        return Ok(Some(AppendOutcome::Duplicate(Box::new(first))));
    }
    b.idempotency.insert(
        idem.key.clone(),
        IdempotentSend {
            fingerprint: idem.fingerprint.clone(),
            conversation: new.conversation.id.clone(),
            message: new.message.id.clone(),
            expires_ms: now_ms + window_ms,
        },
    );
    Ok(None)
}

impl ConversationState {
    /// Stamps `message` as the conversation's next: `seq` one past the
    /// newest, version 0 (versions count changes after the append, on
    /// every engine), and `createdAt` now at wire precision but strictly
    /// after the previous message, so history stays ordered by it (the
    /// `since` poll relies on it). Posting reads everything before the
    /// post: the sender's read marker moves to it.
    fn stamp(&mut self, mut message: StoredMessage) -> StoredMessage {
        message.seq = self.last_seq() + 1;
        message.version = 0;
        self.reads
            .insert(message.sender.id.clone(), (message.seq, message.id.clone()));
        let floor = self
            .messages
            .last()
            .map(|m| m.created_at + chrono::Duration::milliseconds(1));
        let now = Utc::now().trunc_subsecs(3);
        message.created_at = floor.map_or(now, |f| f.max(now));
        message
    }
}

impl MemoryStore {
    /// `f` of the history of `conversation` in `bay` (the default when
    /// there is none).
    fn with_history<T: Default>(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        f: impl FnOnce(&[StoredMessage]) -> T,
    ) -> T {
        let st = self.state.lock();
        st.bays
            .get(bay)
            .and_then(|b| b.conversations.get(conversation))
            .map(|c| f(&c.messages))
            .unwrap_or_default()
    }
}
