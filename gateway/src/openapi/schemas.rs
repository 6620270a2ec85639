//! Schemas of the JSON answers that handlers build with `json!` or from
//! records of other crates (`switchboard_actors::model`). Documentation
//! only: no handler serializes these types. `tests/openapi.rs` checks real
//! answers against them, and the unit tests in `openapi.rs` compare the
//! mirrors of typed answers with the types they mirror.

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
    pub id: ParticipantId,
    pub name: String,
    pub kind: ParticipantKind,
    pub status: MeStatus,
    /// Always `null`: this gateway calls no webhooks.
    #[schema(required = true, value_type = Option<String>)]
    pub webhook_url: Option<String>,
    /// `"major.minor"` (`1.12`).
    pub protocol_version: String,
    pub bay_id: BayId,
}

/// `status` of `GET /me`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum MeStatus {
    Active,
}

/// `GET /conversations`.
#[derive(Serialize, ToSchema)]
pub struct ConversationList {
    pub conversations: Vec<ConversationSummary>,
}

/// One conversation of the caller, with the caller's role in it.
#[derive(Serialize, ToSchema)]
pub struct ConversationSummary {
    pub id: ConversationId,
    #[serde(rename = "type")]
    pub kind: ConversationType,
    #[schema(required = true)]
    pub title: Option<String>,
    #[schema(required = true)]
    pub role: Option<Role>,
}

/// `GET /conversations/{id}/messages` (protocol §5, §11).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessagesPage {
    /// Ascending by `createdAt`.
    pub messages: Vec<RestMessage>,
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
    pub status: HealthStatus,
}

/// `status` of `/healthz`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum HealthStatus {
    Ok,
}

/// `GET /readyz`.
#[derive(Serialize, ToSchema)]
pub struct Readiness {
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
    Ready,
    NotReady,
}

/// Why `/readyz` answers 503.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum NotReadyReason {
    Draining,
    StoreUnavailable,
}

/// A Bay (tenant). Mirrors `switchboard_actors::model::Bay`.
#[derive(Serialize, ToSchema)]
pub struct AdminBay {
    pub id: BayId,
    pub name: String,
}

/// A participant as the admin API returns it. Mirrors
/// `switchboard_actors::model::Participant`.
#[derive(Serialize, ToSchema)]
pub struct AdminParticipant {
    pub id: ParticipantId,
    pub kind: ParticipantKind,
    pub name: String,
    /// Always `null` for users.
    #[schema(required = true)]
    pub description: Option<String>,
}

/// `POST /bays/{bay}/participants`.
#[derive(Serialize, ToSchema)]
pub struct CreatedParticipant {
    pub participant: AdminParticipant,
    /// The bearer token (`bay_u_…` for users, `bay_…` for agents). Shown
    /// only here; the server keeps its hash.
    pub token: String,
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
    pub participant_id: ParticipantId,
    pub role: Role,
}

/// A conversation as the admin API returns it.
#[derive(Serialize, ToSchema)]
pub struct AdminConversation {
    pub id: ConversationId,
    #[serde(rename = "type")]
    pub kind: ConversationType,
    #[schema(required = true)]
    pub title: Option<String>,
    pub policy: Policy,
    pub members: Vec<AdminMember>,
}
