//! Schemas of the JSON answers that handlers build with `json!` or from
//! records of other crates (`switchboard_actors::model`). [`Me`],
//! [`Health`] and [`Readiness`] are what their routes serialize; the others
//! are documentation only, mirrors that
//! `tests/openapi.rs` checks real answers against (the unit tests in
//! `openapi.rs` compare the mirrors of typed answers with the types they
//! mirror).

use crate::api::views::RestMessage;
use serde::{Deserialize, Serialize};
use switchboard_protocol::context::ContextEnvelope;
use switchboard_protocol::event::Event;
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId};
use switchboard_protocol::model::{ConversationType, ParticipantKind, Policy, Role};
use utoipa::ToSchema;

/// `GET /me`: the caller (protocol §2, §11).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Me {
    /// The caller's participant id; what `senderId` shows on its messages.
    pub id: ParticipantId,
    /// The caller's display name (what others `@mention`).
    pub name: String,
    /// `user` for a `bay_u_…` token, `agent` for a `bay_…` token.
    pub kind: ParticipantKind,
    /// Always `active`: a revoked token cannot call `/me` at all (401).
    pub status: MeStatus,
    /// The caller's webhook (`POST /webhook`), or `null`.
    #[schema(required = true, value_type = Option<String>)]
    pub webhook_url: Option<String>,
    /// How webhook deliveries are going, or `null` before the first
    /// attempt. Kept after the receiver disabled the webhook with a 410,
    /// so the owner can see why deliveries stopped.
    #[schema(required = true)]
    pub webhook_status: Option<WebhookStatusView>,
    /// `"major.minor"` (`1.12`).
    pub protocol_version: String,
    /// The caller's Bay. A Switchboard addition, not in protocol §11.
    pub bay_id: BayId,
}

/// `webhookStatus` of `GET /me`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookStatusView {
    /// When the receiver last answered 2xx (RFC 3339 UTC), or `null`.
    #[schema(required = true)]
    pub last_delivered_at: Option<String>,
    /// The last failure (`"HTTP 500"`, `"timed out"`, …), or `null`.
    #[schema(required = true)]
    pub last_error: Option<String>,
    /// Since when deliveries have failed without a success, or `null`.
    #[schema(required = true)]
    pub failing_since: Option<String>,
}

impl WebhookStatusView {
    /// The wire view of a stored status.
    pub fn of(status: &switchboard_actors::store::WebhookStatus) -> Self {
        let time = |t: Option<chrono::DateTime<chrono::Utc>>| {
            t.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        };
        WebhookStatusView {
            last_delivered_at: time(status.last_delivered_at),
            last_error: status.last_error.clone(),
            failing_since: time(status.failing_since),
        }
    }
}

/// `status` of `GET /me`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum MeStatus {
    /// `active`: the only value.
    Active,
}

/// One element of `GET /conversations` (a bare array, in no promised
/// order): a conversation of the caller, with the caller's role in it.
#[derive(Serialize, ToSchema)]
pub struct ConversationSummary {
    /// Conversation id, for `/conversations/{id}/…`.
    pub id: ConversationId,
    /// `DM`, `AGENT_CHAT` or `GROUP`.
    #[serde(rename = "type")]
    pub kind: ConversationType,
    /// Display title; `null` when unset.
    #[schema(required = true)]
    pub title: Option<String>,
    /// The caller's role in the conversation; `null` only if the caller
    /// left it while the list was being built.
    #[schema(required = true)]
    pub role: Option<Role>,
    /// Messages after the caller's read marker (`POST …/read`; posting
    /// reads everything before the post), deleted ones not counted.
    #[serde(rename = "unreadCount")]
    pub unread_count: u64,
    /// The newest message the caller has read; `null` before the first.
    #[serde(rename = "lastReadMessageId")]
    #[schema(required = true)]
    pub last_read_message_id: Option<MessageId>,
}

/// `GET /conversations/{id}/messages` (protocol §5, §11).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessagesPage {
    /// Ascending by `createdAt`.
    pub messages: Vec<RestMessage>,
    /// The context envelope for the caller (protocol §3).
    pub context: ContextEnvelope,
    /// Without `since`: the `cursor` for the page before this one, `null`
    /// at the beginning of the conversation. With `since`: always `null`.
    #[schema(required = true)]
    pub next_cursor: Option<MessageId>,
}

/// `POST /conversations/{id}/typing`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TypingAck {
    /// Always `true`.
    pub ok: bool,
    /// How long the indicator lasts unless renewed (5,000 by default).
    pub ttl_ms: u64,
}

/// `GET /updates` (protocol §11): the same shape with or without events.
/// Mirrors `realtime::updates::UpdatesBody`.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(examples(json!({"cursor": "MS4wMUo5WlE0SzNYMlY3", "events": []})))]
pub struct Updates {
    /// Opaque; covers every event of `events`. Pass it to the next call
    /// (or as a WebSocket `hello.resume`).
    pub cursor: String,
    /// In log order. Clients ignore `type`s they do not know.
    pub events: Vec<Event>,
}

/// `GET /healthz`.
#[derive(Serialize, ToSchema)]
pub struct Health {
    /// Always `ok`: the process answers. Says nothing about the store.
    pub status: HealthStatus,
}

/// `status` of `/healthz`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum HealthStatus {
    /// `ok`: the only value.
    Ok,
}

/// `GET /readyz`.
#[derive(Serialize, ToSchema)]
pub struct Readiness {
    /// `ready` with 200, `not_ready` with 503.
    pub status: ReadyStatus,
    /// Present when not ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<NotReadyReason>,
    /// The store's error, with `reason: store_unavailable`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `status` of `/readyz`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReadyStatus {
    /// `ready`: not draining and the store answered a ping.
    Ready,
    /// `not_ready`: see `reason`.
    NotReady,
}

/// Why `/readyz` answers 503.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum NotReadyReason {
    /// `draining`: the node is shutting down; load balancers should stop
    /// sending it traffic.
    Draining,
    /// `store_unavailable`: the store did not answer a ping.
    StoreUnavailable,
    /// `delivery_stalled`: the store answers, but a canary record written
    /// into it has not come back through the node's feed within
    /// `timing.canary_timeout` (events are not reaching sessions).
    DeliveryStalled,
}

/// A Bay (tenant). Mirrors `switchboard_actors::model::Bay`.
#[derive(Serialize, ToSchema)]
pub struct AdminBay {
    /// 1–64 chars of `[A-Za-z0-9_-]`, caller-chosen or minted.
    pub id: BayId,
    /// Display name, 1–200 chars.
    pub name: String,
}

/// A participant as the admin API returns it. Mirrors
/// `switchboard_actors::model::Participant`.
#[derive(Serialize, ToSchema)]
pub struct AdminParticipant {
    /// 1–64 chars of `[A-Za-z0-9_-]`; minted as `p_` + a ULID when not given.
    pub id: ParticipantId,
    /// `user` or `agent`; fixed at creation.
    pub kind: ParticipantKind,
    /// Display name, 1–200 chars, trimmed.
    pub name: String,
    /// Always `null` for users.
    #[schema(required = true)]
    pub description: Option<String>,
}

/// A participant with its standing: the answer of `…/suspend` and
/// `…/reinstate`.
#[derive(Serialize, ToSchema)]
pub struct AdminParticipantStanding {
    /// The participant as stored.
    #[serde(flatten)]
    pub participant: AdminParticipant,
    /// Whether an operator suspended it (403 `ACCOUNT_SUSPENDED` while so).
    pub suspended: bool,
}

/// A Bay with its standing: the answer of `/bays/{bay}/suspend` and
/// `/bays/{bay}/reinstate`.
#[derive(Serialize, ToSchema)]
pub struct AdminBayStanding {
    /// The Bay as stored.
    #[serde(flatten)]
    pub bay: AdminBay,
    /// Whether an operator suspended it (403 `BAY_SUSPENDED` while so).
    pub suspended: bool,
}

/// `POST /bays/{bay}/participants`.
#[derive(Serialize, ToSchema)]
pub struct CreatedParticipant {
    /// The participant as stored.
    pub participant: AdminParticipant,
    /// The bearer token (`bay_u_…` for users, `bay_…` for agents). Shown
    /// only here; the server keeps its hash.
    pub token: String,
    /// The connector the request made the agent (protocol §9); absent
    /// when it made none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connector: Option<crate::api::connectors::ConnectorSpec>,
}

/// `POST /bays/{bay}/participants/{pid}/token`.
#[derive(Serialize, ToSchema)]
pub struct MintedToken {
    /// The new bearer token, shown only here.
    pub token: String,
}

/// A member of a conversation, as the admin API returns it.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdminMember {
    /// A participant of the same Bay; listed once per conversation.
    pub participant_id: ParticipantId,
    /// `member` or `admin`.
    pub role: Role,
}

/// A conversation as the admin API returns it.
#[derive(Serialize, ToSchema)]
pub struct AdminConversation {
    /// 1–64 chars of `[A-Za-z0-9_-]`; minted as `c_` + a ULID when not given.
    pub id: ConversationId,
    /// `DM`, `AGENT_CHAT` or `GROUP`; fixed at creation.
    #[serde(rename = "type")]
    pub kind: ConversationType,
    /// Display title, up to 200 chars; `null` when unset.
    #[schema(required = true)]
    pub title: Option<String>,
    /// The stored reply policy; applied only to GROUP (protocol §3, §4).
    pub policy: Policy,
    /// The roster in roster order, each participant once.
    pub members: Vec<AdminMember>,
}

/// A reaction emoji (`POST …/reactions`, `DELETE …/reactions/{emoji}`):
/// exactly one emoji of Unicode's list, skin tones included, as the
/// `emojis` crate the handlers check with knows it. Documentation only: the
/// schema is the list itself, so a client (or a fuzzer) knows what passes
/// 400 INVALID_REACTION. The server also takes the unqualified forms (`❤`
/// for `❤️`) and stores the fully-qualified one listed here.
pub struct Emoji;

impl utoipa::PartialSchema for Emoji {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        let all = emojis::iter().flat_map(|e| {
            let tones = e.skin_tones().into_iter().flatten();
            std::iter::once(e).chain(tones.skip(1))
        });
        let mut names: Vec<&str> = all.map(|e| e.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some("Exactly one emoji, e.g. `👍`"))
            .enum_values(Some(names))
            .into()
    }
}

impl ToSchema for Emoji {}

/// One event of `GET /events` (Server-Sent Events, docs/sse.md) as an
/// OpenAPI 3.1 `text/event-stream` schema describes it: the fields of one
/// event block. Documentation only.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct SseEvent {
    /// `cursor`, `reset` or `close`; absent on an event carrying a
    /// protocol event (`data` is then an [`Event`]), which EventSource
    /// clients see as type `message`.
    event: Option<SseEventName>,
    /// JSON: an [`Event`], `{cursor}` (`cursor`), `{cursor, message}`
    /// (`reset`) or `{code, message}` (`close`).
    data: String,
    /// The cursor after this event, for `Last-Event-ID`.
    id: Option<String>,
}

/// `event:` of a named SSE event.
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum SseEventName {
    /// No `event:` line (WHATWG HTML §9.2: the type defaults to
    /// `message`): `data` is an [`Event`].
    Message,
    /// A position past entries addressed to others.
    Cursor,
    /// The resume position is not addressable: catch up over REST.
    Reset,
    /// The stream ends: `{code, message}`.
    Close,
}

/// One event of `GET /api/admin/bays/{bay}/conversations/{cid}/live` as an
/// OpenAPI 3.1 `text/event-stream` schema describes it: `event: <name>`
/// and `data: <JSON>` (api::operator_live). Documentation only.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct ConversationLiveEvent {
    /// What `data` is.
    event: ConversationLiveName,
    /// JSON: the view (`view`), a message (`message`), `{id, offset,
    /// text}` (`delta`), `{id, state}` (`ended`), `{participant, until}`
    /// (`typing`), `{participant, state}` (`presence`), `{members}`
    /// (`roster`, `sessions`), `{what, message}` (`change`), or `{}`
    /// (`reset`).
    data: String,
}

/// `event:` of [`ConversationLiveEvent`].
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum ConversationLiveName {
    /// First: the whole view, as `…/view` answers it.
    View,
    /// A message posted, edited or completed.
    Message,
    /// A streaming draft grew.
    Delta,
    /// A draft was cancelled or failed, or a message deleted.
    Ended,
    /// A member is typing.
    Typing,
    /// A member came online or went offline.
    Presence,
    /// The members changed.
    Roster,
    /// Reactions, votes or read markers changed.
    Change,
    /// The members' sessions and webhooks changed.
    Sessions,
    /// The stream fell out of the replay buffer: reload the view.
    Reset,
}

/// One event of `GET /api/admin/nodes/live`: `event: nodes` and `data:`
/// `{nodes, self}` as `GET /api/admin/nodes` answers it. Documentation
/// only.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct NodesLiveEvent {
    /// Always `nodes`.
    #[schema(pattern = "^nodes$")]
    event: String,
    /// JSON: `{nodes, self}`.
    data: String,
}

/// One event of `GET /api/admin/bays/{bay}/webhooks/live`: `event:
/// webhooks` and `data:` `{webhooks}` as `GET /api/admin/bays/{bay}/webhooks`
/// answers it. Documentation only.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct WebhooksLiveEvent {
    /// Always `webhooks`.
    #[schema(pattern = "^webhooks$")]
    event: String,
    /// JSON: `{webhooks}`.
    data: String,
}
