//! What a webhook delivery carries (protocol §11, "Webhook contract v2").
//!
//! A message becomes `message.created` with exactly the v2 table's fields:
//! `event`, `eventId`, `schemaVersion`, `conversationId`, `conversation`,
//! `sender`, `participants`, `policy`, `you`, `instructions`, `mentions`,
//! `history` (up to 20 prior turns, oldest first) and `message`. The
//! roster, policy and primer are the conversation's at delivery time;
//! `shouldRespond` and `mentions` are the message's own, as on `/ws`.
//!
//! Lifecycle events (`message.updated`, `reaction.added`, …) go in the same
//! envelope: `event` is their type, `eventId` and `schemaVersion` as above,
//! and the rest is the `/ws` event's fields.
//!
//! `eventId` is derived from the log entry and the recipient, so every
//! retry of one event to one agent carries the same id: receivers dedupe
//! on it (it is also the Standard Webhooks `webhook-id`).
//!
//! One message goes to every agent of its room, and its N bodies differ
//! only in `eventId`, `you`, `instructions` (the reader's primer) and
//! `message.shouldRespond`. So a `message.created` body is rendered in two
//! steps: [`SharedBody`], everything the agents share (roster, policy,
//! history, message, and the primer's roster paragraph, JSON-escaped), is
//! rendered once per message by whichever of the node's workers gets to it
//! first and kept in [`Bodies`], a small cache of the node's workers keyed
//! by Bay, log epoch and entry; each delivery then writes its own fields
//! around it ([`SharedBody::body_for`]), byte for byte the body a render
//! from scratch gives.
//!
//! Snapshot rule: the conversation, its roster and its history are read
//! when the message's first delivery on this node is rendered; every
//! delivery of that message on the node rendered within
//! [`SNAPSHOT_MAX_AGE`] of it carries that same snapshot. A delivery
//! rendered later (an agent far behind, or a message evicted from the
//! cache) reads the conversation again, at its own delivery time.

use crate::api::views::Room;
use parking_lot::Mutex;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchboard_actors::model::StoredMessage;
use switchboard_actors::store::log::LogRecord;
use switchboard_actors::store::{Store, StoreError};
use switchboard_protocol::context::{ParticipantView, PolicyView};
use switchboard_protocol::cursor::{EntryId, Epoch, LogPosition};
use switchboard_protocol::event::{ConversationRef, Event, MessageView, ReplyToView, SenderView};
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId};
use switchboard_protocol::model::{Policy, SenderType};
use switchboard_protocol::routing::{is_orchestrator, policy_view, Primer, YOU_MARK};
use tokio::sync::OnceCell;

/// `schemaVersion` of every delivery (protocol §11: v2).
pub const SCHEMA_VERSION: u8 = 2;
/// Prior turns in `history` (protocol §11: "up to 20").
pub const HISTORY_TURNS: usize = 20;

/// The stable id of `record`'s delivery to `agent`: `evt_` + 32 hex digits
/// of SHA-256 over the Bay, the agent, the log epoch and the entry id.
pub fn event_id(bay: &BayId, agent: &ParticipantId, epoch: &Epoch, record: &LogRecord) -> String {
    let mut h = Sha256::new();
    for part in [
        bay.as_str(),
        agent.as_str(),
        epoch.0.as_str(),
        &record.id.to_string(),
    ] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    format!("evt_{}", &hex::encode(h.finalize())[..32])
}

/// `you` of a v2 body.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WebhookYou {
    /// The receiving agent.
    pub agent_id: ParticipantId,
    /// Whether it orchestrates this conversation.
    pub is_orchestrator: bool,
    /// Its verdict for this message (protocol §4): speak only when true.
    pub should_respond: bool,
}

/// One `history` turn.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Turn {
    /// The turn's message id.
    pub id: MessageId,
    /// Who wrote it.
    pub sender_id: ParticipantId,
    /// Their display name as written.
    pub sender_name: String,
    /// `USER` or `AGENT`.
    pub sender_type: SenderType,
    /// Its text (`""` for a deleted message).
    pub content: String,
    /// RFC 3339 UTC, milliseconds.
    pub created_at: String,
    /// The message it quoted, or `null`.
    pub reply_to: Option<ReplyToView>,
}

/// `message` of a v2 body.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WebhookMessage {
    /// The message id.
    pub id: MessageId,
    /// Its sender.
    pub sender_id: ParticipantId,
    /// `USER` or `AGENT`.
    pub sender_type: SenderType,
    /// The text.
    pub content: String,
    /// The metadata object, or `null`.
    pub metadata: Option<serde_json::Value>,
    /// RFC 3339 UTC, milliseconds.
    pub created_at: String,
    /// The message it quotes, or `null`.
    pub reply_to: Option<ReplyToView>,
    /// The recipient's verdict (the same as `you.shouldRespond`).
    pub should_respond: bool,
}

/// A `message.created` delivery, field for field the v2 table.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MessageCreated {
    /// Always `message.created`.
    pub event: &'static str,
    /// Stable per message and agent: dedupe on it.
    pub event_id: String,
    /// Always 2.
    pub schema_version: u8,
    /// The conversation's id.
    pub conversation_id: ConversationId,
    /// `{id, type, title}`.
    pub conversation: ConversationRef,
    /// `{id, name, kind, role}` of the sender.
    pub sender: SenderView,
    /// The full roster, `description` included.
    pub participants: Vec<ParticipantView>,
    /// The policy with `effectiveRule` and `policyApplies`.
    pub policy: PolicyView,
    /// The receiving agent and its verdict.
    pub you: WebhookYou,
    /// The agent's primer for this room.
    pub instructions: String,
    /// Agent ids mentioned in the message.
    pub mentions: Vec<ParticipantId>,
    /// Up to 20 prior turns, oldest first.
    pub history: Vec<Turn>,
    /// The message.
    pub message: WebhookMessage,
}

fn turn(m: &StoredMessage) -> Turn {
    Turn {
        id: m.id.clone(),
        sender_id: m.sender.id.clone(),
        sender_name: m.sender.name.clone(),
        sender_type: m.sender.kind.sender_type(),
        content: m.content.clone(),
        created_at: m.created_at_wire(),
        reply_to: m.reply_to.clone(),
    }
}

/// Messages whose [`SharedBody`] a node keeps ([`Bodies`]).
pub const CACHED_MESSAGES: usize = 64;
/// How long a [`SharedBody`] serves further deliveries of its message (the
/// snapshot rule, module docs).
pub const SNAPSHOT_MAX_AGE: Duration = Duration::from_secs(5);

/// What one delivery sends: `message.created` as the shared part of its
/// message and this agent's own fields, or a lifecycle event's body.
pub enum Body {
    /// A `message.created` body, written out by [`Body::bytes`].
    Created {
        /// The message's shared part.
        shared: Arc<SharedBody>,
        /// The receiving agent.
        agent: ParticipantId,
        /// Its verdict for the message.
        should_respond: bool,
        /// The delivery's `eventId`.
        event_id: String,
    },
    /// Any other event, rendered whole.
    Other(Vec<u8>),
}

impl Body {
    /// The JSON body.
    pub fn bytes(&self) -> Vec<u8> {
        match self {
            Body::Created {
                shared,
                agent,
                should_respond,
                event_id,
            } => shared.body_for(agent, *should_respond, event_id),
            Body::Other(bytes) => bytes.clone(),
        }
    }
}

/// What every agent's `message.created` body of one message shares,
/// serialized once: see the module docs.
pub struct SharedBody {
    /// `"schemaVersion":…` through `"policy":{…}`, without braces.
    head: Vec<u8>,
    /// `"mentions":…` through `"message":{…` up to and including
    /// `"shouldRespond":`.
    tail: Vec<u8>,
    /// The primer's roster paragraph, JSON-escaped (no quotes).
    roster: Vec<u8>,
    /// Per roster member, where in `roster` its ` (you)` goes.
    marks: Vec<usize>,
    /// The room as read, for each reader's own paragraphs.
    room: Room,
    reference: ConversationRef,
    /// The policy as the envelope states it (`you.isOrchestrator`).
    policy: Policy,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SharedHead<'a> {
    schema_version: u8,
    conversation_id: &'a ConversationId,
    conversation: &'a ConversationRef,
    sender: &'a SenderView,
    participants: Vec<ParticipantView>,
    policy: PolicyView,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SharedTail<'a> {
    mentions: &'a [ParticipantId],
    history: Vec<Turn>,
    message: SharedMessage<'a>,
}

/// [`WebhookMessage`] but its last field, `shouldRespond`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SharedMessage<'a> {
    id: &'a MessageId,
    sender_id: &'a ParticipantId,
    sender_type: SenderType,
    content: &'a str,
    metadata: &'a Option<serde_json::Value>,
    created_at: &'a str,
    reply_to: &'a Option<ReplyToView>,
}

/// `s` as the inside of a JSON string (escaped, without its quotes).
fn escaped(s: &str) -> Vec<u8> {
    let mut quoted = serde_json::to_vec(s).unwrap_or_default();
    quoted.pop();
    quoted.remove(0);
    quoted
}

/// `value`'s JSON object without its `{`, and without its last `strip`
/// bytes.
fn inner<T: Serialize>(value: &T, strip: usize) -> Vec<u8> {
    let mut json = serde_json::to_vec(value).unwrap_or_default();
    json.truncate(json.len().saturating_sub(strip));
    json.remove(0);
    json
}

impl SharedBody {
    /// The shared part of `message`'s bodies (`conversation` as logged
    /// with it), given the room as read and the `history` before it.
    pub fn new(
        room: Room,
        conversation_id: &ConversationId,
        conversation: &ConversationRef,
        message: &MessageView,
        history: Vec<Turn>,
    ) -> Self {
        let policy = room.effective_policy();
        let head = inner(
            &SharedHead {
                schema_version: SCHEMA_VERSION,
                conversation_id,
                conversation,
                sender: &message.sender,
                participants: room.participant_views(&policy),
                policy: policy_view(room.conversation.kind, &policy),
            },
            1,
        );
        let mut tail = inner(
            &SharedTail {
                mentions: &message.mentions,
                history,
                message: SharedMessage {
                    id: &message.id,
                    sender_id: &message.sender_id,
                    sender_type: message.sender_type,
                    content: &message.content,
                    metadata: &message.metadata,
                    created_at: &message.created_at,
                    reply_to: &message.reply_to,
                },
            },
            2,
        );
        tail.extend_from_slice(br#","shouldRespond":"#);
        let reference = room.conversation.reference();
        let paragraph =
            Primer::new(&reference, &room.conversation.policy, &room.roster).roster_paragraph();
        let mut roster = Vec::with_capacity(paragraph.text.len() + paragraph.text.len() / 16);
        let mut marks = Vec::with_capacity(paragraph.marks.len());
        let mut from = 0;
        for &at in &paragraph.marks {
            roster.extend_from_slice(&escaped(&paragraph.text[from..at]));
            marks.push(roster.len());
            from = at;
        }
        roster.extend_from_slice(&escaped(&paragraph.text[from..]));
        SharedBody {
            head,
            tail,
            roster,
            marks,
            room,
            reference,
            policy,
        }
    }

    /// The whole body for `agent`: `{"event":…,"eventId":…,` the shared
    /// head, `"you":…,"instructions":…,` the shared tail, then the agent's
    /// `shouldRespond`; the same bytes as serializing [`MessageCreated`].
    pub fn body_for(&self, agent: &ParticipantId, should_respond: bool, event_id: &str) -> Vec<u8> {
        let primer = Primer::new(
            &self.reference,
            &self.room.conversation.policy,
            &self.room.roster,
        );
        let around = primer.around_roster(agent);
        let you = WebhookYou {
            agent_id: agent.clone(),
            is_orchestrator: is_orchestrator(self.room.conversation.kind, &self.policy, agent),
            should_respond,
        };
        let mut out = Vec::with_capacity(
            self.head.len()
                + self.tail.len()
                + self.roster.len()
                + around.before.len()
                + around.after.len()
                + 256,
        );
        out.extend_from_slice(br#"{"event":"message.created","eventId":"#);
        serde_json::to_writer(&mut out, event_id).unwrap_or_default();
        out.push(b',');
        out.extend_from_slice(&self.head);
        out.extend_from_slice(br#","you":"#);
        serde_json::to_writer(&mut out, &you).unwrap_or_default();
        out.extend_from_slice(br#","instructions":""#);
        out.extend_from_slice(&escaped(&around.before));
        match around.reader.and_then(|i| self.marks.get(i)) {
            Some(&at) => {
                out.extend_from_slice(&self.roster[..at]);
                out.extend_from_slice(YOU_MARK.as_bytes());
                out.extend_from_slice(&self.roster[at..]);
            }
            None => out.extend_from_slice(&self.roster),
        }
        out.extend_from_slice(&escaped(&around.after));
        out.extend_from_slice(b"\",");
        out.extend_from_slice(&self.tail);
        out.extend_from_slice(if should_respond {
            b"true}}"
        } else {
            b"false}}"
        });
        out
    }
}

/// Reads what [`SharedBody`] needs from the store, `None` when the
/// conversation no longer exists.
async fn read_shared(
    store: &dyn Store,
    bay: &BayId,
    conversation_id: &ConversationId,
    conversation: &ConversationRef,
    message: &MessageView,
) -> Result<Option<Arc<SharedBody>>, StoreError> {
    let Some(current) = store.conversation(bay, conversation_id).await? else {
        return Ok(None);
    };
    let members = store.participants_in(bay, &current.member_ids()).await?;
    let room = Room::new(current, &members);
    let (mut before, _) = store
        .messages_before(bay, conversation_id, Some(&message.id), HISTORY_TURNS)
        .await?;
    crate::api::views::refresh_previews(store, bay, conversation_id, &mut before).await?;
    let history = before.iter().map(turn).collect();
    Ok(Some(Arc::new(SharedBody::new(
        room,
        conversation_id,
        conversation,
        message,
        history,
    ))))
}

type BodyKey = (BayId, Epoch, EntryId);
type BodyCell = Arc<OnceCell<Option<Arc<SharedBody>>>>;

/// The [`SharedBody`]s of the messages the node's workers are delivering:
/// at most [`CACHED_MESSAGES`], each for [`SNAPSHOT_MAX_AGE`]. Workers
/// that reach a message while its first renderer still reads the store
/// wait for that render rather than make their own.
#[derive(Default)]
pub struct Bodies {
    slots: Mutex<Slots>,
}

#[derive(Default)]
struct Slots {
    map: HashMap<BodyKey, (BodyCell, Instant, u64)>,
    /// Insertion order, oldest first, with each slot's generation.
    order: VecDeque<(BodyKey, u64)>,
    next: u64,
}

impl Bodies {
    /// The body delivering `event` (projected for `agent` from the record
    /// logged `at`) to `agent`, or `None` when the conversation no longer
    /// exists.
    ///
    /// # Errors
    ///
    /// Store failures reading the conversation, its roster or its history.
    pub async fn render(
        &self,
        store: &dyn Store,
        bay: &BayId,
        at: &LogPosition,
        agent: &ParticipantId,
        event: &Event,
        event_id: &str,
    ) -> Result<Option<Body>, StoreError> {
        let Event::Message {
            conversation_id,
            message,
            conversation,
        } = event
        else {
            return Ok(Some(Body::Other(lifecycle(event, event_id))));
        };
        let cell = self.cell((bay.clone(), at.epoch.clone(), at.entry));
        let shared = cell
            .get_or_try_init(|| read_shared(store, bay, conversation_id, conversation, message))
            .await?;
        Ok(shared.clone().map(|shared| Body::Created {
            shared,
            agent: agent.clone(),
            should_respond: message.should_respond,
            event_id: event_id.to_owned(),
        }))
    }

    /// The slot of `key`: the cached one while fresh, else a new one (the
    /// oldest slots make room).
    fn cell(&self, key: BodyKey) -> BodyCell {
        let mut slots = self.slots.lock();
        if let Some((cell, born, _)) = slots.map.get(&key) {
            if born.elapsed() < SNAPSHOT_MAX_AGE {
                return cell.clone();
            }
        }
        let generation = slots.next;
        slots.next += 1;
        let cell = BodyCell::default();
        slots
            .map
            .insert(key.clone(), (cell.clone(), Instant::now(), generation));
        slots.order.push_back((key, generation));
        while slots.map.len() > CACHED_MESSAGES {
            let Some((old, generation)) = slots.order.pop_front() else {
                break;
            };
            if slots
                .map
                .get(&old)
                .is_some_and(|(_, _, g)| *g == generation)
            {
                slots.map.remove(&old);
            }
        }
        // Replaced slots leave stale entries in `order`; keep it bounded.
        if slots.order.len() > 4 * CACHED_MESSAGES {
            let Slots { map, order, .. } = &mut *slots;
            order.retain(|(k, g)| map.get(k).is_some_and(|(_, _, live)| live == g));
        }
        cell
    }
}

/// A lifecycle event's body: the `/ws` event with `type` renamed `event`,
/// plus `eventId` and `schemaVersion`.
fn lifecycle(event: &Event, event_id: &str) -> Vec<u8> {
    let mut value = serde_json::to_value(event).unwrap_or_default();
    if let Some(map) = value.as_object_mut() {
        if let Some(kind) = map.remove("type") {
            map.insert("event".into(), kind);
        }
        map.insert("eventId".into(), event_id.into());
        map.insert("schemaVersion".into(), SCHEMA_VERSION.into());
    }
    serde_json::to_vec(&value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_actors::model::{Conversation, Member, Participant};
    use switchboard_protocol::model::{ConversationType, ParticipantKind, ReplyPolicy, Role};

    fn id(s: &str) -> ParticipantId {
        ParticipantId(s.into())
    }

    /// A body rendered from scratch, field by field, as each delivery
    /// rendered it before the shared part was split out.
    fn from_scratch(
        room: &Room,
        conversation: &ConversationRef,
        message: &MessageView,
        history: &[Turn],
        agent: &ParticipantId,
        event_id: &str,
    ) -> Vec<u8> {
        let envelope = room.envelope(agent);
        let body = MessageCreated {
            event: "message.created",
            event_id: event_id.to_owned(),
            schema_version: SCHEMA_VERSION,
            conversation_id: conversation.id.clone(),
            conversation: conversation.clone(),
            sender: message.sender.clone(),
            participants: envelope.participants,
            policy: envelope.policy,
            you: WebhookYou {
                agent_id: agent.clone(),
                is_orchestrator: envelope.you.is_orchestrator,
                should_respond: message.should_respond,
            },
            instructions: envelope.instructions,
            mentions: message.mentions.clone(),
            history: history.to_vec(),
            message: WebhookMessage {
                id: message.id.clone(),
                sender_id: message.sender_id.clone(),
                sender_type: message.sender_type,
                content: message.content.clone(),
                metadata: message.metadata.clone(),
                created_at: message.created_at.clone(),
                reply_to: message.reply_to.clone(),
                should_respond: message.should_respond,
            },
        };
        serde_json::to_vec(&body).unwrap()
    }

    fn room(policy: Policy, members: usize) -> Room {
        let mut participants = vec![Participant {
            id: id("usr_ana"),
            kind: ParticipantKind::User,
            name: "Ana \"the boss\"".into(),
            description: Some("never shown".into()),
        }];
        for i in 0..members {
            participants.push(Participant {
                id: id(&format!("agt_{i}")),
                kind: ParticipantKind::Agent,
                name: format!("Agent {i} ✓"),
                description: (i % 3 != 0)
                    .then(|| format!("Does \"{i}\"\n\ttasks — \\ and </script> \u{1}")),
            });
        }
        let conversation = Conversation {
            id: ConversationId("cnv_1".into()),
            kind: ConversationType::Group,
            title: Some("Ops \"room\"".into()),
            policy,
            members: participants
                .iter()
                .enumerate()
                .map(|(i, p)| Member {
                    participant: p.id.clone(),
                    role: if i == 0 { Role::Admin } else { Role::Member },
                })
                .collect(),
        };
        Room::new(conversation, &participants)
    }

    fn message(should_respond: bool) -> MessageView {
        let sender = SenderView {
            id: id("usr_ana"),
            name: "Ana \"the boss\"".into(),
            kind: ParticipantKind::User,
            role: Some(Role::Admin),
        };
        MessageView {
            id: MessageId("msg_2".into()),
            sender_id: sender.id.clone(),
            sender_type: SenderType::User,
            content: "@Agent 1 ✓ please \"look\"\n".into(),
            created_at: "2026-12-01T10:00:00.000Z".into(),
            metadata: Some(serde_json::json!({"addressedAgents": ["agt_1"], "k": [1, null]})),
            sender,
            mentions: vec![id("agt_1")],
            reply_to: Some(ReplyToView {
                id: MessageId("msg_1".into()),
                sender_id: id("agt_2"),
                sender_type: SenderType::Agent,
                preview: "earlier \"answer\"".into(),
            }),
            should_respond,
        }
    }

    fn history() -> Vec<Turn> {
        vec![Turn {
            id: MessageId("msg_1".into()),
            sender_id: id("agt_2"),
            sender_name: "Agent 2 ✓".into(),
            sender_type: SenderType::Agent,
            content: "earlier \"answer\"".into(),
            created_at: "2026-12-01T09:59:00.000Z".into(),
            reply_to: None,
        }]
    }

    #[test]
    fn a_spliced_body_is_the_body_rendered_from_scratch() {
        let policies = [
            Policy {
                agent_reply_policy: ReplyPolicy::Orchestrator,
                designated_agent_id: Some(id("agt_1")),
                max_agent_rounds: 3,
                rules: Some("Be \"kind\".\nNo emojis.".into()),
            },
            Policy {
                agent_reply_policy: ReplyPolicy::Dedicated,
                designated_agent_id: Some(id("agt_4")),
                ..Policy::default()
            },
            Policy {
                agent_reply_policy: ReplyPolicy::Orchestrator,
                designated_agent_id: Some(id("usr_ana")),
                ..Policy::default()
            },
            Policy::default(),
        ];
        let conversation = ConversationRef {
            id: ConversationId("cnv_1".into()),
            kind: ConversationType::Group,
            title: Some("Ops \"room\" (as logged)".into()),
        };
        for policy in policies {
            let room = room(policy, 6);
            let shared = SharedBody::new(
                Room::new(room.conversation.clone(), &participants_of(&room)),
                &conversation.id,
                &conversation,
                &message(true),
                history(),
            );
            // The orchestrator / designated agent, agents with and without a
            // description, the user, and an agent no longer on the roster;
            // one of them told not to respond.
            for (agent, should_respond) in [
                ("agt_1", true),
                ("agt_0", true),
                ("agt_2", false),
                ("agt_4", true),
                ("usr_ana", true),
                ("agt_gone", true),
            ] {
                let agent = id(agent);
                let event_id = format!("evt_{agent}");
                let want = from_scratch(
                    &room,
                    &conversation,
                    &message(should_respond),
                    &history(),
                    &agent,
                    &event_id,
                );
                let got = shared.body_for(&agent, should_respond, &event_id);
                let parsed: serde_json::Value = serde_json::from_slice(&got).unwrap();
                let wanted: serde_json::Value = serde_json::from_slice(&want).unwrap();
                assert_eq!(parsed, wanted, "{agent}");
                assert_eq!(
                    String::from_utf8(got).unwrap(),
                    String::from_utf8(want).unwrap(),
                    "{agent}: the same bytes, field order included"
                );
                assert_eq!(parsed["you"]["shouldRespond"], should_respond);
                assert_eq!(parsed["message"]["shouldRespond"], should_respond);
                let instructions = parsed["instructions"].as_str().unwrap();
                let on_roster = room.roster.iter().any(|m| m.id == agent);
                assert_eq!(
                    instructions.matches(YOU_MARK).count(),
                    usize::from(on_roster)
                );
            }
        }
    }

    fn participants_of(room: &Room) -> Vec<Participant> {
        room.roster
            .iter()
            .map(|m| Participant {
                id: m.id.clone(),
                kind: m.kind,
                name: m.name.clone(),
                description: match m.kind {
                    ParticipantKind::Agent => m.description.clone(),
                    ParticipantKind::User => Some("never shown".into()),
                },
            })
            .collect()
    }

    #[tokio::test]
    async fn one_render_serves_every_agent_of_a_message() {
        let bodies = Bodies::default();
        let key = (
            BayId("bay".into()),
            Epoch("e".into()),
            EntryId { ms: 1, seq: 0 },
        );
        let first = bodies.cell(key.clone());
        let again = bodies.cell(key.clone());
        assert!(Arc::ptr_eq(&first, &again));
        // Bounded: the oldest messages make room.
        for ms in 2..(2 + CACHED_MESSAGES as u64) {
            bodies.cell((key.0.clone(), key.1.clone(), EntryId { ms, seq: 0 }));
        }
        assert_eq!(bodies.slots.lock().map.len(), CACHED_MESSAGES);
        assert!(!Arc::ptr_eq(&first, &bodies.cell(key)));
    }
}
