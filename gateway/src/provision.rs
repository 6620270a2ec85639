//! Creating and changing Bays, participants and conversations: the rules
//! shared by the admin API and the `--bootstrap` loader.

use crate::error::ApiError;
use serde::Deserialize;
use switchboard_actors::model::{Bay, Conversation, Member, Participant};
use switchboard_actors::store::{Created, Store, Updated};
use switchboard_actors::token::{self, looks_like_token, TokenHash};
use switchboard_protocol::error::ErrorCode;
use switchboard_protocol::ids::{is_valid_id, BayId, ConversationId, ParticipantId};
use switchboard_protocol::model::{
    ConversationType, ParticipantKind, Policy, ReplyPolicy, Role, MAX_AGENT_ROUNDS_LIMIT,
};

/// Longest display name or title, in characters.
pub(crate) const MAX_NAME_CHARS: usize = 200;
/// Longest agent description or custom rules text, in characters.
const MAX_TEXT_CHARS: usize = 4000;

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::InvalidRequest, message)
}

/// Uses the caller's id (validated) or mints one with `prefix`.
///
/// # Errors
///
/// 400 `INVALID_REQUEST` when `id` is not 1–64 chars of `[A-Za-z0-9_-]`.
pub fn id_or_new(id: Option<String>, prefix: &str) -> Result<String, ApiError> {
    match id {
        Some(id) if is_valid_id(&id) => Ok(id),
        Some(_) => Err(invalid(
            "id must be 1-64 characters of A-Z, a-z, 0-9, _ or -",
        )),
        None => Ok(format!(
            "{prefix}{}",
            ulid::Ulid::new().to_string().to_ascii_lowercase()
        )),
    }
}

pub(crate) fn check_text(
    field: &str,
    value: &str,
    max: usize,
    required: bool,
) -> Result<(), ApiError> {
    let n = value.chars().count();
    if (required && value.trim().is_empty()) || n > max {
        return Err(invalid(format!(
            "{field} must be {} to {max} characters",
            u8::from(required)
        )));
    }
    // Names, titles and descriptions are quoted into other agents'
    // `instructions`: a line break there could pass for a server-written line.
    if field != "policy.rules" && value.chars().any(char::is_control) {
        return Err(invalid(format!(
            "{field} must not contain control characters or line breaks"
        )));
    }
    Ok(())
}

/// A conversation title as stored: checked like a name (at most 200
/// characters, no line breaks), and `None` when blank (empty or only
/// whitespace): a blank title is no title, so clients that show the
/// members' names for an untitled room do so here too.
///
/// # Errors
///
/// 400 `INVALID_REQUEST` for a title too long or with a control character.
pub(crate) fn title(value: Option<String>) -> Result<Option<String>, ApiError> {
    match value {
        Some(t) if t.trim().is_empty() => Ok(None),
        Some(t) => {
            check_text("title", &t, MAX_NAME_CHARS, false)?;
            Ok(Some(t))
        }
        None => Ok(None),
    }
}

/// Creates a Bay. 409 ALREADY_EXISTS when the id is taken.
///
/// # Errors
///
/// 400 `INVALID_REQUEST` for a bad id or name, 409 `ALREADY_EXISTS`, or
/// the store's error (503).
pub async fn create_bay(
    store: &dyn Store,
    id: Option<String>,
    name: String,
) -> Result<Bay, ApiError> {
    check_text("name", &name, MAX_NAME_CHARS, true)?;
    let bay = Bay {
        id: BayId(id_or_new(id, "b_")?),
        name,
    };
    match store.create_bay(bay).await? {
        Created::Created(bay) => Ok(bay),
        Created::AlreadyExists => Err(ApiError::new(
            ErrorCode::AlreadyExists,
            "a bay with this id exists",
        )),
    }
}

/// Gives a participant a fresh token and returns it with the token
/// (plaintext, shown once): the admin API's rotation, also run when a
/// pairing code is redeemed or a link request claimed (protocol §2). The
/// old token stops working at once; the store logs its revocation in the
/// same step, so its WebSocket closes with 4001 and its held `/updates`
/// answers 401 on every node. `None` when there is no such participant.
///
/// # Errors
///
/// The store's error (503).
pub async fn rotate_token(
    store: &dyn Store,
    bay: &BayId,
    participant: &ParticipantId,
) -> Result<Option<(Participant, String)>, ApiError> {
    let Some(p) = store.participant(bay, participant).await? else {
        return Ok(None);
    };
    let token = token::mint(p.kind);
    match store
        .set_token(bay, participant, Some(TokenHash::of(&token)))
        .await?
    {
        Updated::Updated(()) => Ok(Some((p, token))),
        Updated::NotFound => Ok(None),
    }
}

/// Input of a new participant.
#[derive(Deserialize, Debug, Clone, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewParticipant {
    /// 1–64 characters of `[A-Za-z0-9_-]`; minted when absent.
    #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub id: Option<String>,
    /// `user` or `agent`; decides the token prefix (`bay_u_…` / `bay_…`).
    pub kind: ParticipantKind,
    /// Display name, 1–200 characters, not blank, no control characters.
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = "^[^\\x00-\\x1F\\x7F-\\x9F]*[^\\x00-\\x20\\x7F-\\xA0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000][^\\x00-\\x1F\\x7F-\\x9F]*$"
    )]
    pub name: String,
    /// What an agent is for (up to 4,000 characters, no control
    /// characters); ignored for users.
    #[schema(max_length = 4000, pattern = "^[^\\x00-\\x1F\\x7F-\\x9F]*$")]
    pub description: Option<String>,
    /// Marks an agent as a connector of this platform (protocol §9); 400
    /// for a user. Also settable later with
    /// `PUT /api/admin/bays/{bay}/participants/{pid}/connector`.
    #[serde(default)]
    pub connector: Option<crate::api::connectors::ConnectorSpec>,
    /// Bootstrap only: a fixed token (demo files). The admin API always mints
    /// (and refuses this field with 400), so it is not documented there.
    #[serde(default)]
    #[schema(ignore)]
    pub token: Option<String>,
}

/// Creates a participant and returns it with its plaintext token (shown once).
///
/// # Errors
///
/// 400 `INVALID_REQUEST` for a bad id, name, description or fixed token,
/// 404 when the Bay does not exist, 409 `ALREADY_EXISTS` when the id or the
/// token is taken, or the store's error (503).
pub async fn create_participant(
    store: &dyn Store,
    bay: &BayId,
    input: NewParticipant,
) -> Result<(Participant, String), ApiError> {
    check_text("name", &input.name, MAX_NAME_CHARS, true)?;
    if let Some(d) = &input.description {
        check_text("description", d, MAX_TEXT_CHARS, false)?;
    }
    if input.connector.is_some() && input.kind != ParticipantKind::Agent {
        return Err(invalid("only an agent can be a connector"));
    }
    if store.bay(bay).await?.is_none() {
        return Err(ApiError::not_found());
    }
    let token = match input.token {
        Some(t) if !looks_like_token(&t) => {
            return Err(invalid(
                "token must start with bay_ and be 20-200 url-safe characters",
            ))
        }
        // Protocol §2: a person's token is `bay_u_…`, an agent's `bay_…`
        // and never `bay_u_…`; clients tell the two apart by the prefix.
        Some(t) if (input.kind == ParticipantKind::User) != t.starts_with("bay_u_") => {
            return Err(invalid(match input.kind {
                ParticipantKind::User => "a user's token must start with bay_u_",
                ParticipantKind::Agent => "an agent's token must not start with bay_u_",
            }))
        }
        Some(t) => t,
        None => token::mint(input.kind),
    };
    let participant = Participant {
        id: ParticipantId(id_or_new(input.id, "p_")?),
        kind: input.kind,
        name: input.name.trim().to_owned(),
        description: match input.kind {
            ParticipantKind::Agent => input.description,
            ParticipantKind::User => None,
        },
    };
    match store
        .create_participant(bay, participant, TokenHash::of(&token))
        .await?
    {
        Created::Created(p) => {
            if let Some(spec) = input.connector {
                store.set_connector(bay, &p.id, Some(spec.platform)).await?;
            }
            Ok((p, token))
        }
        Created::AlreadyExists => Err(ApiError::new(
            ErrorCode::AlreadyExists,
            "a participant with this id (or token) exists",
        )),
    }
}

/// Policy input: every field optional; `orchestratorId` is an alias of
/// `designatedAgentId` (the orchestrator is ORCHESTRATOR's designated agent).
#[derive(Deserialize, Debug, Clone, Default, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyInput {
    /// One of the five GROUP policies (protocol §4); absent keeps the current.
    pub agent_reply_policy: Option<ReplyPolicy>,
    /// An agent of the Bay: DEDICATED's agent, ORCHESTRATOR's orchestrator,
    /// ROUTER's fallback.
    pub designated_agent_id: Option<String>,
    /// Alias of `designatedAgentId`.
    pub orchestrator_id: Option<String>,
    /// Round cap, 0–5.
    #[schema(minimum = 0, maximum = 5)]
    #[serde(default, deserialize_with = "crate::api::integral::option")]
    pub max_agent_rounds: Option<i64>,
    /// Custom group rules appended to `instructions` (up to 4,000
    /// characters); blank clears them.
    #[schema(max_length = 4000)]
    pub rules: Option<String>,
}

impl PolicyInput {
    /// Applies the input over `base`, validating ranges and ids.
    ///
    /// # Errors
    ///
    /// 400 `INVALID_REQUEST` when `maxAgentRounds` is outside 0–5, `rules`
    /// is too long, or the designated agent is not an agent of the Bay.
    pub fn apply(self, mut base: Policy, participants: &[Participant]) -> Result<Policy, ApiError> {
        if let Some(p) = self.agent_reply_policy {
            base.agent_reply_policy = p;
        }
        if let Some(n) = self.max_agent_rounds {
            if !(0..=i64::from(MAX_AGENT_ROUNDS_LIMIT)).contains(&n) {
                return Err(invalid("policy.maxAgentRounds must be 0 to 5"));
            }
            base.max_agent_rounds = n as u8;
        }
        if let Some(rules) = self.rules {
            check_text("policy.rules", &rules, MAX_TEXT_CHARS, false)?;
            base.rules = (!rules.trim().is_empty()).then_some(rules);
        }
        let designated = self.designated_agent_id.or(self.orchestrator_id);
        let uses_designated = matches!(
            base.agent_reply_policy,
            ReplyPolicy::Dedicated | ReplyPolicy::Orchestrator | ReplyPolicy::Router
        );
        if !uses_designated {
            if designated.is_some() {
                return Err(invalid(
                    "policy.designatedAgentId applies only to DEDICATED, ORCHESTRATOR and ROUTER",
                ));
            }
            // Switching to MENTIONS or OPEN drops a designation that no longer means anything.
            base.designated_agent_id = None;
        }
        if let Some(id) = designated {
            let id = ParticipantId(id);
            if !participants
                .iter()
                .any(|p| p.id == id && p.kind == ParticipantKind::Agent)
            {
                return Err(invalid(
                    "policy.designatedAgentId must name an agent of this bay",
                ));
            }
            base.designated_agent_id = Some(id);
        }
        Ok(base)
    }
}

/// 400 for a policy on a DM or AGENT_CHAT.
pub fn no_direct_policy() -> ApiError {
    invalid("DM and AGENT_CHAT conversations have no reply policy (protocol §3)")
}

/// Checks that a conversation's members fit its type and its policy:
/// a DM is exactly two participants; an AGENT_CHAT is exactly one user and
/// one agent (protocol §11, `POST /conversations`); a GROUP has at least one
/// member; DEDICATED and ORCHESTRATOR need a designated agent, and any
/// designated agent (ROUTER's fallback included) must be an agent member.
///
/// # Errors
///
/// 400 `INVALID_REQUEST` naming the rule that failed.
pub fn check_shape(
    kind: ConversationType,
    members: &[Member],
    participants: &[Participant],
    policy: &Policy,
) -> Result<(), ApiError> {
    let kind_of = |id: &ParticipantId| participants.iter().find(|p| &p.id == id).map(|p| p.kind);
    match kind {
        ConversationType::Dm if members.len() != 2 => {
            return Err(invalid("a DM has exactly two distinct members"));
        }
        ConversationType::AgentChat => {
            let users = members
                .iter()
                .filter(|m| kind_of(&m.participant) == Some(ParticipantKind::User))
                .count();
            if members.len() != 2 || users != 1 {
                return Err(invalid("an AGENT_CHAT has exactly one user and one agent"));
            }
        }
        ConversationType::Group if members.is_empty() => {
            return Err(invalid("a GROUP needs at least one member"));
        }
        _ => {}
    }
    if kind.is_direct() {
        return Ok(());
    }
    match (&policy.designated_agent_id, policy.agent_reply_policy) {
        (None, ReplyPolicy::Dedicated | ReplyPolicy::Orchestrator) => Err(invalid(
            "DEDICATED and ORCHESTRATOR need policy.designatedAgentId (or orchestratorId)",
        )),
        (Some(d), _)
            if !members.iter().any(|m| &m.participant == d)
                || kind_of(d) != Some(ParticipantKind::Agent) =>
        {
            Err(invalid(
                "policy.designatedAgentId must be an agent member of the conversation",
            ))
        }
        _ => Ok(()),
    }
}

/// Input of a new conversation.
#[derive(Deserialize, Debug, Clone, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewConversation {
    /// 1–64 characters of `[A-Za-z0-9_-]`; minted when absent.
    #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub id: Option<String>,
    /// `DM`, `AGENT_CHAT` or `GROUP`; cannot be changed later.
    #[serde(rename = "type")]
    pub kind: ConversationType,
    /// Up to 200 characters.
    pub title: Option<String>,
    /// Participant ids of the Bay.
    pub members: Vec<String>,
    /// Members that get the `admin` role (they must also be in `members`).
    #[serde(default)]
    pub admins: Vec<String>,
    /// Reply policy; absent means MENTIONS with a round cap of 2.
    pub policy: Option<PolicyInput>,
}

/// Creates a conversation. Every member must be a participant of the Bay.
///
/// # Errors
///
/// 400 `INVALID_REQUEST` for a bad id, title, member, admin or policy, 404
/// when the Bay does not exist, 409 `ALREADY_EXISTS` when the id is taken,
/// or the store's error (503).
pub async fn create_conversation(
    store: &dyn Store,
    bay: &BayId,
    input: NewConversation,
) -> Result<Conversation, ApiError> {
    if store.bay(bay).await?.is_none() {
        return Err(ApiError::not_found());
    }
    let title = title(input.title)?;
    let participants = store.participants(bay).await?;
    if let Some(stray) = input
        .admins
        .iter()
        .find(|a| !input.members.iter().any(|m| m == *a))
    {
        return Err(invalid(format!(
            "admin {stray} must also be listed in members"
        )));
    }
    let mut members: Vec<Member> = Vec::new();
    for id in input.members {
        let id = ParticipantId(id);
        if !participants.iter().any(|p| p.id == id) {
            return Err(invalid(format!(
                "member {id} is not a participant of this bay"
            )));
        }
        if members.iter().all(|m| m.participant != id) {
            let role = if input.admins.iter().any(|a| a == id.as_str()) {
                Role::Admin
            } else {
                Role::Member
            };
            members.push(Member {
                participant: id,
                role,
            });
        }
    }
    if input.kind.is_direct() && input.policy.is_some() {
        return Err(no_direct_policy());
    }
    let policy = input
        .policy
        .unwrap_or_default()
        .apply(Policy::default(), &participants)?;
    check_shape(input.kind, &members, &participants, &policy)?;
    let conversation = Conversation {
        id: ConversationId(id_or_new(input.id, "c_")?),
        kind: input.kind,
        title,
        policy,
        members,
    };
    match store.create_conversation(bay, conversation).await? {
        Created::Created(c) => Ok(c),
        Created::AlreadyExists => Err(ApiError::new(
            ErrorCode::AlreadyExists,
            "a conversation with this id exists",
        )),
    }
}
