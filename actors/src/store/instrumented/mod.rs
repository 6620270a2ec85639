//! A `Store` decorator that records each call's latency
//! (`switchboard_store_operation_seconds{op}`) and failures
//! (`switchboard_store_errors_total{op}`). Blocking log reads (the feeds'
//! tails) are recorded separately as `read_log_blocking`, since their
//! latency is mostly the wait.

mod files;

use super::log::LogEvent;
use super::pairing::{Approval, LinkRequest, PairingStore, PairingTarget, SecretHash};
use super::{
    AppendOutcome, Changed, ConversationChange, ConversationStore, Created, DirectoryStore,
    DisplacementStore, DraftAppend, DraftAppended, DraftStore, LeaseStore, LogStore, MessageChange,
    MessageStore, NewMessage, OpenDraft, Opening, ParticipantPresence, PresenceChange,
    PresenceStore, Principal, Published, ReadState, Replay, Revisioned, RosterChange, RosterRule,
    RoundStep, Store, StoreError, Updated, Webhook, WebhookStatus, WebhookStore,
};
use super::{ConnectorStore, PendingRequest};
use super::{RefreshSlot, StoredSummary, SummaryStore, SummaryWritten};
use crate::model::{Bay, Conversation, Participant, StoredMessage};
use crate::token::TokenHash;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchboard_protocol::connector::Platform;
use switchboard_protocol::cursor::{EntryId, LogPosition};
use switchboard_protocol::event::ConversationRef;
use switchboard_protocol::ids::{
    BayId, ConversationId, MessageId, ParticipantId, SessionId, TokenId,
};
use switchboard_protocol::model::ParticipantKind;
use switchboard_protocol::presence::PresenceState;

/// Histogram of store call latency, seconds, labelled by `op`.
pub const STORE_SECONDS: &str = "switchboard_store_operation_seconds";
/// Counter of failed store calls, labelled by `op`.
pub const STORE_ERRORS: &str = "switchboard_store_errors_total";

/// Wraps any engine.
pub struct Instrumented {
    inner: Arc<dyn Store>,
}

impl Instrumented {
    /// Instruments `inner`.
    pub fn new(inner: Arc<dyn Store>) -> Self {
        Instrumented { inner }
    }
}

async fn timed<T>(
    op: &'static str,
    fut: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let started = Instant::now();
    let out = fut.await;
    metrics::histogram!(STORE_SECONDS, "op" => op).record(started.elapsed().as_secs_f64());
    if out.is_err() {
        metrics::counter!(STORE_ERRORS, "op" => op).increment(1);
    }
    out
}

#[async_trait]
impl DirectoryStore for Instrumented {
    async fn ping(&self) -> Result<(), StoreError> {
        timed("ping", self.inner.ping()).await
    }
    async fn create_bay(&self, bay: Bay) -> Result<Created<Bay>, StoreError> {
        timed("create_bay", self.inner.create_bay(bay)).await
    }
    async fn bay(&self, bay: &BayId) -> Result<Option<Bay>, StoreError> {
        timed("bay", self.inner.bay(bay)).await
    }
    async fn bays(&self) -> Result<Vec<Bay>, StoreError> {
        timed("bays", self.inner.bays()).await
    }
    async fn create_participant(
        &self,
        bay: &BayId,
        participant: Participant,
        token: TokenHash,
    ) -> Result<Created<Participant>, StoreError> {
        timed(
            "create_participant",
            self.inner.create_participant(bay, participant, token),
        )
        .await
    }
    async fn participant(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<Option<Participant>, StoreError> {
        timed("participant", self.inner.participant(bay, participant)).await
    }
    async fn participants(&self, bay: &BayId) -> Result<Vec<Participant>, StoreError> {
        timed("participants", self.inner.participants(bay)).await
    }
    async fn participants_in(
        &self,
        bay: &BayId,
        ids: &[ParticipantId],
    ) -> Result<Vec<Participant>, StoreError> {
        timed("participants_in", self.inner.participants_in(bay, ids)).await
    }
    async fn set_token(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        token: Option<TokenHash>,
    ) -> Result<Updated<()>, StoreError> {
        timed("set_token", self.inner.set_token(bay, participant, token)).await
    }
    async fn set_suspended(
        &self,
        bay: &BayId,
        participant: Option<&ParticipantId>,
        suspended: bool,
    ) -> Result<Updated<bool>, StoreError> {
        timed(
            "set_suspended",
            self.inner.set_suspended(bay, participant, suspended),
        )
        .await
    }
    async fn suspended(
        &self,
        bay: &BayId,
        participant: Option<&ParticipantId>,
    ) -> Result<bool, StoreError> {
        timed("suspended", self.inner.suspended(bay, participant)).await
    }
    async fn authenticate(&self, token: &TokenHash) -> Result<Option<Principal>, StoreError> {
        timed("authenticate", self.inner.authenticate(token)).await
    }
    async fn credentials_head(&self) -> Result<EntryId, StoreError> {
        timed("credentials_head", self.inner.credentials_head()).await
    }
    async fn read_credentials(
        &self,
        after: EntryId,
        max: usize,
        block: Option<Duration>,
    ) -> Result<super::CredentialsRead, StoreError> {
        let op = if block.is_some() {
            "read_credentials_blocking"
        } else {
            "read_credentials"
        };
        timed(op, self.inner.read_credentials(after, max, block)).await
    }
}

#[async_trait]
impl ConversationStore for Instrumented {
    async fn create_conversation(
        &self,
        bay: &BayId,
        conversation: Conversation,
    ) -> Result<Created<Conversation>, StoreError> {
        timed(
            "create_conversation",
            self.inner.create_conversation(bay, conversation),
        )
        .await
    }
    async fn conversation(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
    ) -> Result<Option<Conversation>, StoreError> {
        timed("conversation", self.inner.conversation(bay, conversation)).await
    }
    async fn conversations(&self, bay: &BayId) -> Result<Vec<Conversation>, StoreError> {
        timed("conversations", self.inner.conversations(bay)).await
    }
    async fn conversations_of(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<Vec<Conversation>, StoreError> {
        timed(
            "conversations_of",
            self.inner.conversations_of(bay, participant),
        )
        .await
    }
    async fn conversation_revisioned(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
    ) -> Result<Option<Revisioned<Conversation>>, StoreError> {
        timed(
            "conversation_revisioned",
            self.inner.conversation_revisioned(bay, conversation),
        )
        .await
    }
    async fn change_conversation(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        change: ConversationChange,
    ) -> Result<Updated<Conversation, RosterRule>, StoreError> {
        timed(
            change.name(),
            self.inner.change_conversation(bay, conversation, change),
        )
        .await
    }
}

#[async_trait]
impl MessageStore for Instrumented {
    async fn append_message(
        &self,
        bay: &BayId,
        message: NewMessage,
        sender_kind: ParticipantKind,
    ) -> Result<AppendOutcome, StoreError> {
        timed(
            "append_message",
            self.inner.append_message(bay, message, sender_kind),
        )
        .await
    }
    async fn change_message(
        &self,
        bay: &BayId,
        change: MessageChange,
    ) -> Result<Changed, StoreError> {
        timed("change_message", self.inner.change_message(bay, change)).await
    }
    async fn poll_message(
        &self,
        bay: &BayId,
        poll: &str,
    ) -> Result<Option<(ConversationId, MessageId)>, StoreError> {
        timed("poll_message", self.inner.poll_message(bay, poll)).await
    }
    async fn mark_read(
        &self,
        bay: &BayId,
        conversation: &ConversationRef,
        participant: &ParticipantId,
        message: &StoredMessage,
    ) -> Result<Option<EntryId>, StoreError> {
        timed(
            "mark_read",
            self.inner
                .mark_read(bay, conversation, participant, message),
        )
        .await
    }
    async fn read_states(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        conversations: &[ConversationId],
    ) -> Result<Vec<ReadState>, StoreError> {
        timed(
            "read_states",
            self.inner.read_states(bay, participant, conversations),
        )
        .await
    }
    async fn message(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        message: &MessageId,
    ) -> Result<Option<StoredMessage>, StoreError> {
        timed("message", self.inner.message(bay, conversation, message)).await
    }
    async fn messages_since(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        since: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        timed(
            "messages_since",
            self.inner.messages_since(bay, conversation, since, limit),
        )
        .await
    }
    async fn messages_before(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        before: Option<&MessageId>,
        limit: usize,
    ) -> Result<(Vec<StoredMessage>, bool), StoreError> {
        timed(
            "messages_before",
            self.inner.messages_before(bay, conversation, before, limit),
        )
        .await
    }
}

#[async_trait]
impl DraftStore for Instrumented {
    async fn draft_authors(&self, bay: &BayId) -> Result<Vec<ParticipantId>, StoreError> {
        timed("draft_authors", self.inner.draft_authors(bay)).await
    }
    async fn append_draft(
        &self,
        bay: &BayId,
        append: DraftAppend,
    ) -> Result<DraftAppended, StoreError> {
        timed("append_draft", self.inner.append_draft(bay, append)).await
    }
    async fn close_draft(
        &self,
        bay: &BayId,
        change: MessageChange,
        round: Option<RoundStep>,
    ) -> Result<Changed, StoreError> {
        timed("close_draft", self.inner.close_draft(bay, change, round)).await
    }
    async fn open_drafts(&self, bay: &BayId) -> Result<Vec<OpenDraft>, StoreError> {
        timed("open_drafts", self.inner.open_drafts(bay)).await
    }
    async fn draft_bays(&self) -> Result<Vec<BayId>, StoreError> {
        timed("draft_bays", self.inner.draft_bays()).await
    }
    async fn prune_draft_bay(&self, bay: &BayId) -> Result<(), StoreError> {
        timed("prune_draft_bay", self.inner.prune_draft_bay(bay)).await
    }
}

#[async_trait]
impl LogStore for Instrumented {
    async fn log_head(&self, bay: &BayId) -> Result<LogPosition, StoreError> {
        timed("log_head", self.inner.log_head(bay)).await
    }
    async fn read_log(
        &self,
        bay: &BayId,
        after: &LogPosition,
        max: usize,
        block: Option<Duration>,
    ) -> Result<Replay, StoreError> {
        let op = if block.is_some() {
            "read_log_blocking"
        } else {
            "read_log"
        };
        timed(op, self.inner.read_log(bay, after, max, block)).await
    }
    async fn append_control(&self, bay: &BayId, event: LogEvent) -> Result<EntryId, StoreError> {
        timed("append_control", self.inner.append_control(bay, event)).await
    }
    async fn roster_changes(
        &self,
        bay: &BayId,
        after: &LogPosition,
    ) -> Result<Vec<RosterChange>, StoreError> {
        timed("roster_changes", self.inner.roster_changes(bay, after)).await
    }
}

#[async_trait]
impl DisplacementStore for Instrumented {
    async fn open_session(
        &self,
        bay: &BayId,
        token: &TokenId,
        session: &SessionId,
    ) -> Result<EntryId, StoreError> {
        timed("open_session", self.inner.open_session(bay, token, session)).await
    }
    async fn openings_head(&self, bay: &BayId) -> Result<EntryId, StoreError> {
        timed("openings_head", self.inner.openings_head(bay)).await
    }
    async fn read_openings(
        &self,
        bay: &BayId,
        after: EntryId,
        max: usize,
        block: Option<Duration>,
    ) -> Result<Vec<Opening>, StoreError> {
        let op = if block.is_some() {
            "read_openings_blocking"
        } else {
            "read_openings"
        };
        timed(op, self.inner.read_openings(bay, after, max, block)).await
    }
}

#[async_trait]
impl WebhookStore for Instrumented {
    async fn set_webhook(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        webhook: Option<(Webhook, LogPosition)>,
    ) -> Result<(), StoreError> {
        timed(
            "set_webhook",
            self.inner.set_webhook(bay, participant, webhook),
        )
        .await
    }
    async fn webhook(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<Option<Webhook>, StoreError> {
        timed("webhook", self.inner.webhook(bay, participant)).await
    }
    async fn webhook_owners(&self) -> Result<Vec<(BayId, ParticipantId)>, StoreError> {
        timed("webhook_owners", self.inner.webhook_owners()).await
    }
    async fn webhook_position(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<Option<LogPosition>, StoreError> {
        timed(
            "webhook_position",
            self.inner.webhook_position(bay, participant),
        )
        .await
    }
    async fn set_webhook_position(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        of: &Webhook,
        position: &LogPosition,
    ) -> Result<(), StoreError> {
        timed(
            "set_webhook_position",
            self.inner
                .set_webhook_position(bay, participant, of, position),
        )
        .await
    }
    async fn webhook_status(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<WebhookStatus, StoreError> {
        timed(
            "webhook_status",
            self.inner.webhook_status(bay, participant),
        )
        .await
    }
    async fn set_webhook_status(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        of: &Webhook,
        status: &WebhookStatus,
    ) -> Result<(), StoreError> {
        timed(
            "set_webhook_status",
            self.inner.set_webhook_status(bay, participant, of, status),
        )
        .await
    }
    async fn disable_webhook(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        of: &Webhook,
        status: &WebhookStatus,
    ) -> Result<(), StoreError> {
        timed(
            "disable_webhook",
            self.inner.disable_webhook(bay, participant, of, status),
        )
        .await
    }
}

#[async_trait]
impl LeaseStore for Instrumented {
    async fn lease(&self, name: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError> {
        timed("lease", self.inner.lease(name, holder, ttl)).await
    }
    async fn release_lease(&self, name: &str, holder: &str) -> Result<(), StoreError> {
        timed("release_lease", self.inner.release_lease(name, holder)).await
    }
    async fn lease_holder(&self, name: &str) -> Result<Option<String>, StoreError> {
        timed("lease_holder", self.inner.lease_holder(name)).await
    }
    async fn take_group_lease(
        &self,
        group: &str,
        name: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        timed(
            "take_group_lease",
            self.inner.take_group_lease(group, name, holder, ttl),
        )
        .await
    }
    async fn renew_group(
        &self,
        group: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        timed("renew_group", self.inner.renew_group(group, holder, ttl)).await
    }
    async fn release_group_lease(
        &self,
        group: &str,
        name: &str,
        holder: &str,
    ) -> Result<(), StoreError> {
        timed(
            "release_group_lease",
            self.inner.release_group_lease(group, name, holder),
        )
        .await
    }
    async fn group_lease_holder(
        &self,
        group: &str,
        name: &str,
    ) -> Result<Option<String>, StoreError> {
        timed(
            "group_lease_holder",
            self.inner.group_lease_holder(group, name),
        )
        .await
    }
    async fn live_group_holders(
        &self,
        group: &str,
    ) -> Result<std::collections::HashMap<String, String>, StoreError> {
        timed("live_group_holders", self.inner.live_group_holders(group)).await
    }
}

#[async_trait]
impl crate::store::NodeStore for Instrumented {
    async fn report_node(
        &self,
        record: &crate::store::NodeRecord,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        timed("report_node", self.inner.report_node(record, ttl)).await
    }
    async fn nodes(&self) -> Result<Vec<crate::store::NodeRecord>, StoreError> {
        timed("nodes", self.inner.nodes()).await
    }
}

#[async_trait]
impl PresenceStore for Instrumented {
    async fn set_presence(
        &self,
        bay: &BayId,
        node: &str,
        entries: Vec<ParticipantPresence>,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        timed(
            "set_presence",
            self.inner.set_presence(bay, node, entries, ttl),
        )
        .await
    }
    async fn presence_records(&self, bay: &BayId) -> Result<Vec<ParticipantPresence>, StoreError> {
        timed("presence_records", self.inner.presence_records(bay)).await
    }
    async fn presence_version(&self, bay: &BayId) -> Result<Option<u64>, StoreError> {
        timed("presence_version", self.inner.presence_version(bay)).await
    }
    async fn online(&self, bay: &BayId) -> Result<Vec<ParticipantId>, StoreError> {
        timed("online", self.inner.online(bay)).await
    }
    async fn published_presence(
        &self,
        bay: &BayId,
    ) -> Result<Vec<(ParticipantId, PresenceState)>, StoreError> {
        timed("published_presence", self.inner.published_presence(bay)).await
    }
    async fn publish_presence(
        &self,
        bay: &BayId,
        changes: &[PresenceChange],
    ) -> Result<Published, StoreError> {
        timed(
            "publish_presence",
            self.inner.publish_presence(bay, changes),
        )
        .await
    }
}

#[async_trait]
impl SummaryStore for Instrumented {
    async fn summary(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
    ) -> Result<Option<StoredSummary>, StoreError> {
        timed("summary", self.inner.summary(bay, conversation)).await
    }
    async fn put_summary(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        summary: StoredSummary,
    ) -> Result<SummaryWritten, StoreError> {
        timed(
            "put_summary",
            self.inner.put_summary(bay, conversation, summary),
        )
        .await
    }
    async fn summarizer(&self, bay: &BayId) -> Result<Option<ParticipantId>, StoreError> {
        timed("summarizer", self.inner.summarizer(bay)).await
    }
    async fn set_summarizer(
        &self,
        bay: &BayId,
        participant: Option<&ParticipantId>,
    ) -> Result<(), StoreError> {
        timed(
            "set_summarizer",
            self.inner.set_summarizer(bay, participant),
        )
        .await
    }
    async fn take_summary_refresh(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        max: u32,
        window: Duration,
    ) -> Result<RefreshSlot, StoreError> {
        timed(
            "take_summary_refresh",
            self.inner
                .take_summary_refresh(bay, conversation, max, window),
        )
        .await
    }
}

#[async_trait]
impl ConnectorStore for Instrumented {
    async fn connectors(
        &self,
        bay: &BayId,
    ) -> Result<std::collections::HashMap<ParticipantId, Platform>, StoreError> {
        timed("connectors", self.inner.connectors(bay)).await
    }
    async fn connector(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<Option<Platform>, StoreError> {
        timed("connector", self.inner.connector(bay, participant)).await
    }
    async fn set_connector(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        platform: Option<Platform>,
    ) -> Result<(), StoreError> {
        timed(
            "set_connector",
            self.inner.set_connector(bay, participant, platform),
        )
        .await
    }
    async fn open_request(
        &self,
        bay: &BayId,
        request: &PendingRequest,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        timed("open_request", self.inner.open_request(bay, request, ttl)).await
    }
    async fn take_request(
        &self,
        bay: &BayId,
        connector: &ParticipantId,
        id: &str,
    ) -> Result<Option<PendingRequest>, StoreError> {
        timed("take_request", self.inner.take_request(bay, connector, id)).await
    }
}

#[async_trait]
impl PairingStore for Instrumented {
    async fn create_pairing_code(
        &self,
        code: &SecretHash,
        target: PairingTarget,
        ttl: Duration,
    ) -> Result<Created<()>, StoreError> {
        timed(
            "create_pairing_code",
            self.inner.create_pairing_code(code, target, ttl),
        )
        .await
    }
    async fn redeem_pairing_code(
        &self,
        code: &SecretHash,
    ) -> Result<Option<PairingTarget>, StoreError> {
        timed("redeem_pairing_code", self.inner.redeem_pairing_code(code)).await
    }
    async fn create_link_request(&self, request: LinkRequest) -> Result<Created<()>, StoreError> {
        timed(
            "create_link_request",
            self.inner.create_link_request(request),
        )
        .await
    }
    async fn link_request(&self, id: &str) -> Result<Option<LinkRequest>, StoreError> {
        timed("link_request", self.inner.link_request(id)).await
    }
    async fn approve_link_request(
        &self,
        id: &str,
        target: PairingTarget,
    ) -> Result<Approval, StoreError> {
        timed(
            "approve_link_request",
            self.inner.approve_link_request(id, target),
        )
        .await
    }
    async fn claim_link_request(&self, id: &str) -> Result<Option<PairingTarget>, StoreError> {
        timed("claim_link_request", self.inner.claim_link_request(id)).await
    }
}

#[async_trait]
impl super::RoomStore for Instrumented {
    async fn create_room(&self, room: super::Room) -> Result<Created<super::Room>, StoreError> {
        timed("create_room", self.inner.create_room(room)).await
    }
    async fn room(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
    ) -> Result<Option<super::Room>, StoreError> {
        timed("room", self.inner.room(bay, conversation)).await
    }
    async fn create_room_link(
        &self,
        capability: &SecretHash,
        link: super::RoomLink,
    ) -> Result<Created<()>, StoreError> {
        timed(
            "create_room_link",
            self.inner.create_room_link(capability, link),
        )
        .await
    }
    async fn room_link(
        &self,
        capability: &SecretHash,
    ) -> Result<Option<super::RoomLink>, StoreError> {
        timed("room_link", self.inner.room_link(capability)).await
    }
    async fn set_brief(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        change: super::BriefChange,
    ) -> Result<Updated<super::Room>, StoreError> {
        timed("set_brief", self.inner.set_brief(bay, conversation, change)).await
    }
    async fn rename_room(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        name: &str,
    ) -> Result<Updated<super::Room>, StoreError> {
        timed(
            "rename_room",
            self.inner.rename_room(bay, conversation, name),
        )
        .await
    }
    async fn touch_room(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        at_ms: u64,
    ) -> Result<(), StoreError> {
        timed(
            "touch_room",
            self.inner.touch_room(bay, conversation, at_ms),
        )
        .await
    }
    async fn admit_room_author(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        author: &ParticipantId,
        max: u32,
    ) -> Result<super::RoomAuthor, StoreError> {
        timed(
            "admit_room_author",
            self.inner.admit_room_author(bay, conversation, author, max),
        )
        .await
    }
    async fn room_author_joined(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        author: &ParticipantId,
    ) -> Result<(), StoreError> {
        timed(
            "room_author_joined",
            self.inner.room_author_joined(bay, conversation, author),
        )
        .await
    }
}
