//! The embedded engine: everything in process memory, nothing to install.
//!
//! One mutex guards all state, which makes every write (history + log +
//! round counter) trivially atomic. Each Bay's log gets a random epoch when
//! it is first touched in this process, so cursors from an earlier process
//! are expired (409 / `reset`) instead of silently re-based: the log they
//! named is gone.

use super::log::{Change, LogEvent, LogRecord};
use super::{
    new_revision, next_round, AppendOutcome, Appended, Changed, ConversationChange, Created,
    DraftAppend, DraftAppended, MessageChange, NewMessage, OpenDraft, Opening, ParticipantPresence,
    PresenceChange, Principal, Published, ReadState, Replay, Revisioned, RosterChange, RoundStep,
    Store, StoreError, Updated, Webhook, WebhookStatus, OPENINGS_KEPT,
};
use crate::model::{Bay, Conversation, Participant, StoredMessage};
use crate::token::TokenHash;
use async_trait::async_trait;
use chrono::{DateTime, SubsecRound, Utc};
use parking_lot::Mutex;
use rand::Rng;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use switchboard_protocol::cursor::{EntryId, Epoch, LogPosition};
use switchboard_protocol::event::ConversationRef;
use switchboard_protocol::ids::{
    BayId, ConversationId, MessageId, ParticipantId, SessionId, TokenId,
};
use switchboard_protocol::model::ParticipantKind;
use switchboard_protocol::presence::PresenceState;
use tokio::sync::watch;

/// Replay-buffer limits of the memory engine.
#[derive(Clone, Copy, Debug)]
pub struct MemoryLimits {
    /// Entries older than this are trimmed (protocol §11: 15 minutes).
    pub replay_window: Duration,
    /// Safety cap on entries kept per Bay, whatever their age.
    pub max_entries: usize,
}

/// The embedded store engine.
pub struct MemoryStore {
    limits: MemoryLimits,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    bays: HashMap<BayId, BayState>,
    /// Token hash → owner. Invariant: exactly the tokens of live participants.
    tokens: HashMap<TokenHash, (BayId, ParticipantId)>,
    /// Each Bay's event log, created on first touch (a read of an unknown
    /// Bay still gets a log, so cursors behave uniformly).
    logs: HashMap<BayId, Log>,
    /// Lease name → (holder, expiry in Unix ms).
    leases: HashMap<String, (String, u64)>,
}

struct BayState {
    bay: Bay,
    participants: HashMap<ParticipantId, ParticipantState>,
    conversations: HashMap<ConversationId, ConversationState>,
    /// Poll id → where its `card.poll` message lives.
    polls: HashMap<String, (ConversationId, MessageId)>,
    /// Idempotency key → the send it answered, until it expires.
    idempotency: HashMap<String, IdempotentSend>,
    /// Webhooks by owner, with their delivery position.
    webhooks: HashMap<ParticipantId, WebhookState>,
    /// Delivery status by owner; outlives the webhook.
    webhook_status: HashMap<ParticipantId, WebhookStatus>,
    /// Node → (its presence record, expiry in Unix ms).
    presence: HashMap<String, (Vec<ParticipantPresence>, u64)>,
    /// Published presence states; absent = `offline`.
    published: HashMap<ParticipantId, PresenceState>,
    /// Open drafts by message id: conversation, author, last activity.
    drafts: HashMap<MessageId, OpenDraft>,
}

/// A webhook with where its deliveries stand.
struct WebhookState {
    webhook: Webhook,
    position: LogPosition,
}

/// A remembered idempotent send.
struct IdempotentSend {
    fingerprint: String,
    conversation: ConversationId,
    message: MessageId,
    /// Forgotten after the replay window, like the Redis key's TTL.
    expires_ms: u64,
}

struct ParticipantState {
    participant: Participant,
    token: Option<TokenHash>,
}

struct ConversationState {
    conversation: Conversation,
    /// History, oldest first. Never trimmed (the replay buffer is the log).
    messages: Vec<StoredMessage>,
    /// Consecutive agent messages since the last human one (protocol §4).
    agent_rounds: u32,
    /// New at creation and at each change; appends routed with another are stale.
    revision: u64,
    /// Read markers: participant → `seq` of the newest message read.
    reads: HashMap<ParticipantId, (u64, MessageId)>,
}

impl ConversationState {
    /// `seq` of the newest message (0 when there is none).
    fn last_seq(&self) -> u64 {
        self.messages.last().map_or(0, |m| m.seq)
    }

    fn position(&self, message: &MessageId) -> Option<usize> {
        self.messages.iter().rposition(|m| &m.id == message)
    }
}

struct Log {
    epoch: Epoch,
    entries: VecDeque<Arc<LogRecord>>,
    /// The roster changes among `entries`, oldest first, trimmed with them.
    rosters: VecDeque<RosterChange>,
    /// Id of the newest entry ever appended (the head).
    last: EntryId,
    /// Id of the newest entry trimmed away. A cursor below it is expired.
    max_deleted: EntryId,
    /// Wakes tails when `last` moves.
    head_tx: watch::Sender<EntryId>,
    /// The displacement channel: the newest [`OPENINGS_KEPT`] openings.
    openings: VecDeque<Opening>,
    /// Wakes openings tails with the newest opening's id.
    openings_tx: watch::Sender<EntryId>,
}

impl Log {
    fn new() -> Self {
        let epoch: String = rand::rng()
            .sample_iter(rand::distr::Alphanumeric)
            .take(10)
            .map(|c| (c as char).to_ascii_lowercase())
            .collect();
        Log {
            epoch: Epoch(epoch),
            entries: VecDeque::new(),
            rosters: VecDeque::new(),
            last: EntryId::ZERO,
            max_deleted: EntryId::ZERO,
            head_tx: watch::channel(EntryId::ZERO).0,
            openings: VecDeque::new(),
            openings_tx: watch::channel(EntryId::ZERO).0,
        }
    }

    fn append(&mut self, event: LogEvent, limits: &MemoryLimits) -> EntryId {
        let now = now_ms();
        let id = if now > self.last.ms {
            EntryId::new(now, 0)
        } else {
            self.last.next()
        };
        self.entries.push_back(Arc::new(LogRecord::new(id, event)));
        self.last = id;
        self.trim(now, limits);
        self.head_tx.send_replace(id);
        id
    }

    /// Drops entries older than the replay window (like Redis `XTRIM MINID`)
    /// and beyond the entry cap (like `MAXLEN`).
    fn trim(&mut self, now: u64, limits: &MemoryLimits) {
        let min_ms = now.saturating_sub(limits.replay_window.as_millis() as u64);
        while let Some(front) = self.entries.front() {
            if front.id.ms < min_ms || self.entries.len() > limits.max_entries {
                self.max_deleted = front.id;
                self.entries.pop_front();
            } else {
                break;
            }
        }
        while self
            .rosters
            .front()
            .is_some_and(|r| r.at <= self.max_deleted)
        {
            self.rosters.pop_front();
        }
    }

    /// Appends a `Roster` entry for `after` and remembers who was a member
    /// `before` it.
    fn append_roster(
        &mut self,
        before: Vec<ParticipantId>,
        after: &Conversation,
        limits: &MemoryLimits,
    ) -> EntryId {
        let at = self.append(LogEvent::roster(after), limits);
        // The append may have trimmed; an entry it just wrote never is.
        self.rosters.push_back(RosterChange {
            at,
            conversation: after.id.clone(),
            before,
            after: after.member_ids(),
        });
        at
    }

    fn open(&mut self, token: &TokenId, session: &SessionId) -> EntryId {
        let last = *self.openings_tx.borrow();
        let now = now_ms();
        let id = if now > last.ms {
            EntryId::new(now, 0)
        } else {
            last.next()
        };
        self.openings.push_back(Opening {
            id,
            token: token.clone(),
            session: session.clone(),
        });
        if self.openings.len() > OPENINGS_KEPT {
            self.openings.pop_front();
        }
        self.openings_tx.send_replace(id);
        id
    }

    fn openings_after(&self, after: EntryId, max: usize) -> Vec<Opening> {
        let start = self.openings.partition_point(|o| o.id <= after);
        self.openings
            .iter()
            .skip(start)
            .take(max)
            .cloned()
            .collect()
    }

    fn read(&self, after: &LogPosition, max: usize) -> Replay {
        if after.epoch != self.epoch {
            return Replay::EpochChanged;
        }
        if after.entry < self.max_deleted || after.entry > self.last {
            return Replay::Expired;
        }
        let start = self.entries.partition_point(|r| r.id <= after.entry);
        let records: Vec<_> = self.entries.iter().skip(start).take(max).cloned().collect();
        Replay::page(records, max, after.entry, self.last)
    }
}

fn log_of<'a>(logs: &'a mut HashMap<BayId, Log>, bay: &BayId) -> &'a mut Log {
    logs.entry(bay.clone()).or_insert_with(Log::new)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl MemoryStore {
    /// Creates an empty store.
    pub fn new(limits: MemoryLimits) -> Self {
        MemoryStore {
            limits,
            state: Mutex::new(State::default()),
        }
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    async fn create_bay(&self, bay: Bay) -> Result<Created<Bay>, StoreError> {
        let mut st = self.state.lock();
        if st.bays.contains_key(&bay.id) {
            return Ok(Created::AlreadyExists);
        }
        st.bays.insert(
            bay.id.clone(),
            BayState {
                bay: bay.clone(),
                participants: HashMap::new(),
                conversations: HashMap::new(),
                polls: HashMap::new(),
                idempotency: HashMap::new(),
                webhooks: HashMap::new(),
                webhook_status: HashMap::new(),
                presence: HashMap::new(),
                drafts: HashMap::new(),
                published: HashMap::new(),
            },
        );
        Ok(Created::Created(bay))
    }

    async fn bay(&self, bay: &BayId) -> Result<Option<Bay>, StoreError> {
        Ok(self.state.lock().bays.get(bay).map(|b| b.bay.clone()))
    }

    async fn create_participant(
        &self,
        bay: &BayId,
        participant: Participant,
        token: TokenHash,
    ) -> Result<Created<Participant>, StoreError> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let Some(b) = st.bays.get_mut(bay) else {
            return Ok(Created::AlreadyExists);
        };
        if b.participants.contains_key(&participant.id) || st.tokens.contains_key(&token) {
            return Ok(Created::AlreadyExists);
        }
        st.tokens
            .insert(token.clone(), (bay.clone(), participant.id.clone()));
        b.participants.insert(
            participant.id.clone(),
            ParticipantState {
                participant: participant.clone(),
                token: Some(token),
            },
        );
        Ok(Created::Created(participant))
    }

    async fn participant(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<Option<Participant>, StoreError> {
        Ok(self
            .state
            .lock()
            .bays
            .get(bay)
            .and_then(|b| b.participants.get(participant))
            .map(|p| p.participant.clone()))
    }

    async fn participants(&self, bay: &BayId) -> Result<Vec<Participant>, StoreError> {
        let st = self.state.lock();
        let mut out: Vec<Participant> = st
            .bays
            .get(bay)
            .map(|b| {
                b.participants
                    .values()
                    .map(|p| p.participant.clone())
                    .collect()
            })
            .unwrap_or_default();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    async fn participants_in(
        &self,
        bay: &BayId,
        ids: &[ParticipantId],
    ) -> Result<Vec<Participant>, StoreError> {
        let st = self.state.lock();
        Ok(st
            .bays
            .get(bay)
            .map(|b| {
                ids.iter()
                    .filter_map(|id| b.participants.get(id).map(|p| p.participant.clone()))
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn set_token(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        token: Option<TokenHash>,
    ) -> Result<Updated<()>, StoreError> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let Some(b) = st.bays.get_mut(bay) else {
            return Ok(Updated::NotFound);
        };
        let Some(p) = b.participants.get_mut(participant) else {
            return Ok(Updated::NotFound);
        };
        let old = std::mem::replace(&mut p.token, token.clone());
        if let Some(new) = token {
            st.tokens.insert(new, (bay.clone(), participant.clone()));
        }
        if let Some(old) = old {
            st.tokens.remove(&old);
            log_of(&mut st.logs, bay).append(
                LogEvent::CredentialRevoked {
                    participant: participant.clone(),
                    token: old.id(),
                },
                &self.limits,
            );
        }
        Ok(Updated::Updated(()))
    }

    async fn authenticate(&self, token: &TokenHash) -> Result<Option<Principal>, StoreError> {
        let st = self.state.lock();
        let Some((bay, pid)) = st.tokens.get(token) else {
            return Ok(None);
        };
        Ok(st
            .bays
            .get(bay)
            .and_then(|b| b.participants.get(pid))
            .map(|p| Principal {
                bay: bay.clone(),
                participant: p.participant.clone(),
                token: token.id(),
            }))
    }

    async fn create_conversation(
        &self,
        bay: &BayId,
        conversation: Conversation,
    ) -> Result<Created<Conversation>, StoreError> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let Some(b) = st.bays.get_mut(bay) else {
            return Ok(Created::AlreadyExists);
        };
        if b.conversations.contains_key(&conversation.id) {
            return Ok(Created::AlreadyExists);
        }
        log_of(&mut st.logs, bay).append_roster(Vec::new(), &conversation, &self.limits);
        b.conversations.insert(
            conversation.id.clone(),
            ConversationState {
                conversation: conversation.clone(),
                messages: Vec::new(),
                agent_rounds: 0,
                revision: new_revision(),
                reads: HashMap::new(),
            },
        );
        Ok(Created::Created(conversation))
    }

    async fn conversation(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
    ) -> Result<Option<Conversation>, StoreError> {
        Ok(self
            .state
            .lock()
            .bays
            .get(bay)
            .and_then(|b| b.conversations.get(conversation))
            .map(|c| c.conversation.clone()))
    }

    async fn conversation_revisioned(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
    ) -> Result<Option<Revisioned<Conversation>>, StoreError> {
        Ok(self
            .state
            .lock()
            .bays
            .get(bay)
            .and_then(|b| b.conversations.get(conversation))
            .map(|c| Revisioned {
                value: c.conversation.clone(),
                revision: c.revision,
            }))
    }

    async fn conversations(&self, bay: &BayId) -> Result<Vec<Conversation>, StoreError> {
        let st = self.state.lock();
        let mut out: Vec<Conversation> = st
            .bays
            .get(bay)
            .map(|b| {
                b.conversations
                    .values()
                    .map(|c| c.conversation.clone())
                    .collect()
            })
            .unwrap_or_default();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    async fn change_conversation(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        change: ConversationChange,
    ) -> Result<Updated<Conversation>, StoreError> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let Some(c) = st
            .bays
            .get_mut(bay)
            .and_then(|b| b.conversations.get_mut(conversation))
        else {
            return Ok(Updated::NotFound);
        };
        let before = c.conversation.member_ids();
        if !change.apply(&mut c.conversation) {
            return Ok(Updated::NotFound);
        }
        c.revision = new_revision();
        let snapshot = c.conversation.clone();
        log_of(&mut st.logs, bay).append_roster(before, &snapshot, &self.limits);
        Ok(Updated::Updated(snapshot))
    }

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

    async fn append_draft(
        &self,
        bay: &BayId,
        append: DraftAppend,
    ) -> Result<DraftAppended, StoreError> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let Some(b) = st.bays.get_mut(bay) else {
            return Ok(DraftAppended::NotFound);
        };
        let Some(conv) = b.conversations.get_mut(&append.conversation.id) else {
            return Ok(DraftAppended::NotFound);
        };
        if conv.revision != append.revision {
            return Ok(DraftAppended::Stale);
        }
        let Some(at) = conv.position(&append.message) else {
            return Ok(DraftAppended::NotFound);
        };
        let message = &mut conv.messages[at];
        if !message.is_streaming() {
            return Ok(DraftAppended::Closed);
        }
        if message.version != append.version {
            return Ok(DraftAppended::Conflict);
        }
        message.version += 1;
        message.content.push_str(&append.text);
        let version = message.version;
        if let Some(d) = b.drafts.get_mut(&append.message) {
            d.last_activity = Utc::now();
        }
        let entry = log_of(&mut st.logs, bay).append(
            LogEvent::Change {
                conversation: append.conversation,
                change: Change::Delta {
                    message: append.message,
                    offset: append.offset,
                    text: append.text,
                    version,
                },
            },
            &self.limits,
        );
        Ok(DraftAppended::Appended { entry, version })
    }

    async fn close_draft(
        &self,
        bay: &BayId,
        mut change: MessageChange,
        round: Option<RoundStep>,
    ) -> Result<Changed, StoreError> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let Some(b) = st.bays.get_mut(bay) else {
            return Ok(Changed::NotFound);
        };
        let Some(conv) = b.conversations.get_mut(&change.conversation.id) else {
            return Ok(Changed::NotFound);
        };
        if conv.revision != change.revision {
            return Ok(Changed::Stale);
        }
        let Some(at) = conv.position(&change.message.id) else {
            return Ok(Changed::NotFound);
        };
        let current = &conv.messages[at];
        if !current.is_streaming() || current.version + 1 != change.message.version {
            return Ok(Changed::Conflict);
        }
        if let Some(step) = round {
            let suppressed;
            (conv.agent_rounds, suppressed) = next_round(
                conv.agent_rounds,
                step.sender,
                step.cap,
                change.message.routing.suppressed,
            );
            change.message.routing.suppressed = suppressed;
            if let Change::Completed { message } = &mut change.change {
                message.routing.suppressed = suppressed;
            }
        }
        conv.messages[at] = change.message;
        b.drafts.remove(&conv.messages[at].id);
        let entry = log_of(&mut st.logs, bay).append(
            LogEvent::Change {
                conversation: change.conversation,
                change: change.change,
            },
            &self.limits,
        );
        Ok(Changed::Changed(entry))
    }

    async fn open_drafts(&self, bay: &BayId) -> Result<Vec<OpenDraft>, StoreError> {
        let st = self.state.lock();
        let mut out: Vec<OpenDraft> = st
            .bays
            .get(bay)
            .map(|b| b.drafts.values().cloned().collect())
            .unwrap_or_default();
        out.sort_by_key(|d| d.last_activity);
        Ok(out)
    }

    async fn draft_bays(&self) -> Result<Vec<BayId>, StoreError> {
        let st = self.state.lock();
        Ok(st
            .bays
            .iter()
            .filter(|(_, b)| !b.drafts.is_empty())
            .map(|(id, _)| id.clone())
            .collect())
    }

    async fn prune_draft_bay(&self, _bay: &BayId) -> Result<(), StoreError> {
        // The list above is computed, never stored: nothing to prune.
        Ok(())
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

    async fn set_webhook(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        webhook: Option<(Webhook, LogPosition)>,
    ) -> Result<(), StoreError> {
        let mut st = self.state.lock();
        let Some(b) = st.bays.get_mut(bay) else {
            return Ok(());
        };
        match webhook {
            Some((webhook, position)) => {
                b.webhooks
                    .insert(participant.clone(), WebhookState { webhook, position });
                b.webhook_status.remove(participant);
            }
            None => {
                b.webhooks.remove(participant);
            }
        }
        Ok(())
    }

    async fn webhook(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<Option<Webhook>, StoreError> {
        Ok(self.with_webhook(bay, participant, |w| w.webhook.clone()))
    }

    async fn webhook_owners(&self) -> Result<Vec<(BayId, ParticipantId)>, StoreError> {
        let st = self.state.lock();
        Ok(st
            .bays
            .iter()
            .flat_map(|(bay, b)| b.webhooks.keys().map(|p| (bay.clone(), p.clone())))
            .collect())
    }

    async fn webhook_position(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<Option<LogPosition>, StoreError> {
        Ok(self.with_webhook(bay, participant, |w| w.position.clone()))
    }

    async fn set_webhook_position(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        of: &Webhook,
        position: &LogPosition,
    ) -> Result<(), StoreError> {
        let mut st = self.state.lock();
        if let Some(w) = st
            .bays
            .get_mut(bay)
            .and_then(|b| b.webhooks.get_mut(participant))
            .filter(|w| &w.webhook == of)
        {
            w.position = position.clone();
        }
        Ok(())
    }

    async fn webhook_status(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<WebhookStatus, StoreError> {
        let st = self.state.lock();
        Ok(st
            .bays
            .get(bay)
            .and_then(|b| b.webhook_status.get(participant).cloned())
            .unwrap_or_default())
    }

    async fn set_webhook_status(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        of: &Webhook,
        status: &WebhookStatus,
    ) -> Result<(), StoreError> {
        let mut st = self.state.lock();
        if let Some(b) = st.bays.get_mut(bay) {
            if b.webhooks
                .get(participant)
                .is_some_and(|w| &w.webhook == of)
            {
                b.webhook_status.insert(participant.clone(), status.clone());
            }
        }
        Ok(())
    }

    async fn disable_webhook(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        of: &Webhook,
        status: &WebhookStatus,
    ) -> Result<(), StoreError> {
        let mut st = self.state.lock();
        if let Some(b) = st.bays.get_mut(bay) {
            if b.webhooks
                .get(participant)
                .is_some_and(|w| &w.webhook == of)
            {
                b.webhooks.remove(participant);
                b.webhook_status.insert(participant.clone(), status.clone());
            }
        }
        Ok(())
    }

    async fn lease(&self, name: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError> {
        let now = now_ms();
        let mut st = self.state.lock();
        let free = match st.leases.get(name) {
            None => true,
            Some((h, until)) => h == holder || *until <= now,
        };
        if free {
            st.leases.insert(
                name.to_owned(),
                (holder.to_owned(), now + ttl.as_millis() as u64),
            );
        }
        Ok(free)
    }

    async fn release_lease(&self, name: &str, holder: &str) -> Result<(), StoreError> {
        let mut st = self.state.lock();
        if st.leases.get(name).is_some_and(|(h, _)| h == holder) {
            st.leases.remove(name);
        }
        Ok(())
    }

    async fn set_presence(
        &self,
        bay: &BayId,
        node: &str,
        entries: &[ParticipantPresence],
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let mut st = self.state.lock();
        if let Some(b) = st.bays.get_mut(bay) {
            b.presence.insert(
                node.to_owned(),
                (entries.to_vec(), now_ms() + ttl.as_millis() as u64),
            );
        }
        Ok(())
    }

    async fn presence_records(&self, bay: &BayId) -> Result<Vec<ParticipantPresence>, StoreError> {
        let now = now_ms();
        let mut st = self.state.lock();
        let Some(b) = st.bays.get_mut(bay) else {
            return Ok(Vec::new());
        };
        b.presence.retain(|_, (_, until)| *until > now);
        Ok(b.presence
            .values()
            .flat_map(|(entries, _)| entries.iter().cloned())
            .collect())
    }

    async fn published_presence(
        &self,
        bay: &BayId,
    ) -> Result<Vec<(ParticipantId, PresenceState)>, StoreError> {
        let st = self.state.lock();
        let mut out: Vec<(ParticipantId, PresenceState)> = st
            .bays
            .get(bay)
            .map(|b| b.published.iter().map(|(p, s)| (p.clone(), *s)).collect())
            .unwrap_or_default();
        out.sort();
        Ok(out)
    }

    async fn publish_presence(
        &self,
        bay: &BayId,
        changes: &[PresenceChange],
    ) -> Result<Published, StoreError> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let Some(b) = st.bays.get_mut(bay) else {
            return Ok(Published::Conflict);
        };
        let current = |p: &ParticipantId| {
            b.published
                .get(p)
                .copied()
                .unwrap_or(PresenceState::Offline)
        };
        if changes.iter().any(|c| current(&c.participant) != c.from) {
            return Ok(Published::Conflict);
        }
        let log = log_of(&mut st.logs, bay);
        let mut ids = Vec::with_capacity(changes.len());
        for c in changes {
            if c.to == PresenceState::Offline {
                b.published.remove(&c.participant);
            } else {
                b.published.insert(c.participant.clone(), c.to);
            }
            ids.push(log.append(
                LogEvent::Presence {
                    participant: c.participant.clone(),
                    state: c.to,
                    at: c.at,
                },
                &self.limits,
            ));
        }
        Ok(Published::Logged(ids))
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

    async fn log_head(&self, bay: &BayId) -> Result<LogPosition, StoreError> {
        let mut st = self.state.lock();
        let log = log_of(&mut st.logs, bay);
        Ok(LogPosition {
            epoch: log.epoch.clone(),
            entry: log.last,
        })
    }

    async fn read_log(
        &self,
        bay: &BayId,
        after: &LogPosition,
        max: usize,
        block: Option<Duration>,
    ) -> Result<Replay, StoreError> {
        let (replay, mut head_rx) = {
            let mut st = self.state.lock();
            let log = log_of(&mut st.logs, bay);
            (log.read(after, max), log.head_tx.subscribe())
        };
        let Some(block) = block else {
            return Ok(replay);
        };
        match &replay {
            Replay::Records { records, .. } if records.is_empty() => {}
            _ => return Ok(replay),
        }
        head_rx.mark_unchanged();
        let deadline = tokio::time::Instant::now() + block;
        loop {
            match tokio::time::timeout_at(deadline, head_rx.changed()).await {
                Ok(Ok(())) => {
                    if *head_rx.borrow_and_update() > after.entry {
                        let mut st = self.state.lock();
                        return Ok(log_of(&mut st.logs, bay).read(after, max));
                    }
                }
                // Timed out, or the log was dropped: report what we had.
                Ok(Err(_)) | Err(_) => return Ok(replay),
            }
        }
    }

    async fn append_control(&self, bay: &BayId, event: LogEvent) -> Result<EntryId, StoreError> {
        let mut st = self.state.lock();
        Ok(log_of(&mut st.logs, bay).append(event, &self.limits))
    }

    async fn roster_changes(
        &self,
        bay: &BayId,
        after: &LogPosition,
    ) -> Result<Vec<RosterChange>, StoreError> {
        let mut st = self.state.lock();
        let log = log_of(&mut st.logs, bay);
        if log.epoch != after.epoch {
            return Ok(Vec::new());
        }
        let start = log.rosters.partition_point(|r| r.at <= after.entry);
        Ok(log.rosters.iter().skip(start).cloned().collect())
    }

    async fn open_session(
        &self,
        bay: &BayId,
        token: &TokenId,
        session: &SessionId,
    ) -> Result<EntryId, StoreError> {
        let mut st = self.state.lock();
        Ok(log_of(&mut st.logs, bay).open(token, session))
    }

    async fn openings_head(&self, bay: &BayId) -> Result<EntryId, StoreError> {
        let mut st = self.state.lock();
        let head = *log_of(&mut st.logs, bay).openings_tx.borrow();
        Ok(head)
    }

    async fn read_openings(
        &self,
        bay: &BayId,
        after: EntryId,
        max: usize,
        block: Option<Duration>,
    ) -> Result<Vec<Opening>, StoreError> {
        let mut rx = match self.openings_or_wait(bay, after, max) {
            Ok(found) => return Ok(found),
            Err(rx) => rx,
        };
        let Some(block) = block else {
            return Ok(Vec::new());
        };
        let deadline = tokio::time::Instant::now() + block;
        loop {
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {
                    if *rx.borrow_and_update() > after {
                        return Ok(self.openings_or_wait(bay, after, max).unwrap_or_default());
                    }
                }
                Ok(Err(_)) | Err(_) => return Ok(Vec::new()),
            }
        }
    }
}

impl MemoryStore {
    /// Openings after `after`, or a receiver to wait on when there are none.
    fn openings_or_wait(
        &self,
        bay: &BayId,
        after: EntryId,
        max: usize,
    ) -> Result<Vec<Opening>, watch::Receiver<EntryId>> {
        let mut st = self.state.lock();
        let log = log_of(&mut st.logs, bay);
        let found = log.openings_after(after, max);
        if found.is_empty() {
            let mut rx = log.openings_tx.subscribe();
            rx.mark_unchanged();
            Err(rx)
        } else {
            Ok(found)
        }
    }

    fn with_webhook<T>(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        f: impl FnOnce(&WebhookState) -> T,
    ) -> Option<T> {
        let st = self.state.lock();
        st.bays
            .get(bay)
            .and_then(|b| b.webhooks.get(participant))
            .map(f)
    }

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
