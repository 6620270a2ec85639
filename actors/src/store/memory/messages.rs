//! Messages: appends, changes, history, read markers: the memory engine's [`MessageStore`].

use super::*;
use crate::store::MessageStore;

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
        let b = st.bays.get_mut(bay).ok_or_else(|| StoreError::Corrupt {
            doing: "appending a message",
            cause: format!("bay {bay} vanished"),
        })?;
        let conv = b
            .conversations
            .get_mut(&new.conversation.id)
            .ok_or_else(|| StoreError::Corrupt {
                doing: "appending a message",
                cause: format!("conversation {} vanished", new.conversation.id),
            })?;
        if conv.revision != new.revision {
            return Ok(AppendOutcome::Stale);
        }
        let now_ms = now_ms();
        if let Some(idem) = &new.idempotency {
            b.idempotency.retain(|_, s| s.expires_ms > now_ms);
            if let Some(seen) = b.idempotency.get(&idem.key) {
                if seen.fingerprint != idem.fingerprint {
                    return Ok(AppendOutcome::KeyReused);
                }
                let first = b
                    .conversations
                    .get(&seen.conversation)
                    .and_then(|c| c.position(&seen.message).map(|i| c.messages[i].clone()))
                    .ok_or_else(|| StoreError::Corrupt {
                        doing: "appending a message",
                        cause: format!("idempotent send {} vanished", seen.message),
                    })?;
                return Ok(AppendOutcome::Duplicate(Box::new(first)));
            }
            b.idempotency.insert(
                idem.key.clone(),
                IdempotentSend {
                    fingerprint: idem.fingerprint.clone(),
                    conversation: new.conversation.id.clone(),
                    message: new.message.id.clone(),
                    expires_ms: now_ms + self.limits.replay_window.as_millis() as u64,
                },
            );
        }
        let conv = b
            .conversations
            .get_mut(&new.conversation.id)
            .ok_or_else(|| StoreError::Corrupt {
                doing: "appending a message",
                cause: format!("conversation {} vanished", new.conversation.id),
            })?;
        let mut message = new.message;
        message.seq = conv.last_seq() + 1;
        // Versions count changes after the append, from 0 on every engine.
        message.version = 0;
        // Posting reads everything before the post.
        conv.reads
            .insert(message.sender.id.clone(), (message.seq, message.id.clone()));
        if let Some(poll) = &message.poll {
            b.polls.insert(
                poll.id.clone(),
                (new.conversation.id.clone(), message.id.clone()),
            );
        }
        // History is ordered by createdAt (the `since` poll relies on it):
        // stamp here, strictly after the previous message, at wire precision.
        let floor = conv
            .messages
            .last()
            .map(|m| m.created_at + chrono::Duration::milliseconds(1));
        let now = Utc::now().trunc_subsecs(3);
        message.created_at = floor.map_or(now, |f| f.max(now));
        if message.is_streaming() {
            // A draft counts for the round cap when it completes.
            b.drafts.insert(
                message.id.clone(),
                OpenDraft {
                    conversation: new.conversation.id.clone(),
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
                message: message.clone(),
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
                change: change.change,
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
                change: Change::Read {
                    participant: participant.clone(),
                    message: message.id.clone(),
                },
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
                ReadState {
                    last_read,
                    unread: conv.last_seq().saturating_sub(seq),
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
