//! Each tool of `/api/mcp`, calling the same functions as its REST route
//! (never an HTTP call to ourselves), and the text it answers with.
//!
//! A refusal of the protocol (not a member, a closed poll, a spent budget)
//! is a tool error (`isError: true`) whose text starts with the error code,
//! e.g. `NOT_PARTICIPANT: you are not a participant of this conversation`:
//! the model reads it and carries on. JSON-RPC errors are left to the
//! protocol itself (an unknown tool, a malformed request).

use super::{listen, render, CallScope};
use crate::api;
use crate::api::files::attach;
use crate::api::messages::send::{checked_content, post, Send};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;
use serde_json::{json, Value};
use switchboard_actors::conversation::{Action, TypingOutcome};
use switchboard_protocol::card::validate_card;
use switchboard_protocol::error::ErrorCode;
use switchboard_protocol::ids::ConversationId;

/// What a tool answers: its text, the JSON behind it
/// (`structuredContent`) and whether it is a refusal.
pub struct Answer {
    /// Tool text, rendered as the CLI renders it.
    pub text: String,
    /// The REST answer the text was made from.
    pub data: Value,
    /// `isError`: a refusal, its code first in `text`.
    pub error: bool,
}

impl Answer {
    /// A successful answer.
    pub fn ok(text: impl Into<String>, data: impl serde::Serialize) -> Self {
        Answer {
            text: text.into(),
            data: serde_json::to_value(data).unwrap_or(Value::Null),
            error: false,
        }
    }

    /// The tool error of a refusal: `CODE: message`, plus when to retry.
    pub fn refusal(e: &ApiError) -> Self {
        let mut text = format!("{}: {}", e.code.as_str(), e.message);
        if let Some(after) = e.retry_after {
            text.push_str(&format!(" (retry in {} s)", after.as_secs().max(1)));
        }
        Answer {
            text,
            data: json!({"error": {"code": e.code.as_str(), "message": e.message}}),
            error: true,
        }
    }
}

/// Runs tool `name` with `args` for the caller of `scope`, in `session`;
/// `None` for a tool this endpoint does not have.
pub async fn call(
    scope: CallScope,
    session: Option<String>,
    name: &str,
    args: Value,
) -> Option<Answer> {
    let (state, caller) = (&scope.state, &scope.caller);
    // The held call draws on the /updates budget like /updates; every
    // other tool on the agent budget like its REST route (protocol §11).
    let budget = if name == "wait_for_messages" {
        state.limits.check_updates(&caller.principal.token).await
    } else {
        state.limits.check_agent(&caller.principal).await
    };
    let result = match budget {
        Err(e) => Err(e),
        Ok(()) => match name {
            "list_conversations" => list_conversations(state, caller).await,
            "get_room_context" => room_context(state, caller, &args).await,
            "get_conversation_summary" => summary(state, caller, &args).await,
            "get_messages" => messages(state, caller, &args).await,
            "send_message" => send_message(state, caller, &args).await,
            "create_poll" => create_poll(state, caller, &args).await,
            "vote_in_poll" => vote(state, caller, &args).await,
            "set_typing" => typing(state, caller, &args).await,
            "react_to_message" => react(state, caller, &args).await,
            "list_files" => list_files(state, caller, &args).await,
            "get_file" => get_file(state, caller, &args).await,
            "wait_for_messages" => listen::wait(&scope, session.as_deref(), &args).await,
            _ => return None,
        },
    };
    Some(result.unwrap_or_else(|e| Answer::refusal(&e)))
}

/// A required string argument.
fn text_arg(args: &Value, name: &str) -> Result<String, ApiError> {
    args[name].as_str().map(str::to_owned).ok_or_else(|| {
        ApiError::new(
            ErrorCode::InvalidRequest,
            format!("{name} must be a string"),
        )
    })
}

/// An optional string argument (absent or `null`: `None`).
fn optional_text(args: &Value, name: &str) -> Result<Option<String>, ApiError> {
    match &args[name] {
        Value::Null => Ok(None),
        _ => text_arg(args, name).map(Some),
    }
}

fn conversation(args: &Value) -> Result<ConversationId, ApiError> {
    text_arg(args, "conversationId").map(ConversationId)
}

fn reader(caller: &Caller) -> &str {
    caller.principal.participant.id.as_str()
}

async fn list_conversations(state: &AppState, caller: &Caller) -> Result<Answer, ApiError> {
    let list = api::agent::conversation_list(state, caller).await?;
    let text = if list.is_empty() {
        "You are in no conversations yet. Ask the Bay owner to add this agent to a group."
            .to_owned()
    } else {
        list.iter()
            .map(|c| {
                format!(
                    "{}  [{}]  {}",
                    c["id"].as_str().unwrap_or_default(),
                    c["type"].as_str().unwrap_or_default(),
                    c["title"].as_str().unwrap_or("(untitled)")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    Ok(Answer::ok(text, json!({"conversations": list})))
}

async fn room_context(state: &AppState, caller: &Caller, args: &Value) -> Result<Answer, ApiError> {
    let envelope = api::agent::context_of(state, caller, &conversation(args)?).await?;
    let data = serde_json::to_value(&envelope).unwrap_or(Value::Null);
    Ok(Answer::ok(render::room_context(&data), data))
}

async fn summary(state: &AppState, caller: &Caller, args: &Value) -> Result<Answer, ApiError> {
    let refresh = match &args["refresh"] {
        Value::Null => false,
        Value::Bool(b) => *b,
        _ => {
            return Err(ApiError::new(
                ErrorCode::InvalidRequest,
                "refresh must be a boolean",
            ))
        }
    };
    let id = conversation(args)?;
    let answer =
        api::summary::summary_of(state, caller, &id, refresh, api::summary::DEFAULT_RECENT).await?;
    let data = serde_json::to_value(&answer).unwrap_or(Value::Null);
    let recent = data["recentMessages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut text = vec![
        render::memory_block(&data["memory"]),
        render::UNTRUSTED_REMINDER.to_owned(),
        "─── Messages after the summary boundary ───".to_owned(),
    ];
    if recent.is_empty() {
        text.push("(no messages after the summary boundary)".to_owned());
    } else {
        text.push(render::message_lines(
            &recent,
            &data["context"],
            reader(caller),
        ));
    }
    Ok(Answer::ok(text.join("\n"), data))
}

async fn messages(state: &AppState, caller: &Caller, args: &Value) -> Result<Answer, ApiError> {
    let limit = match &args["limit"] {
        Value::Null => None,
        Value::Number(n) => Some(n.to_string()),
        _ => {
            return Err(ApiError::new(
                ErrorCode::InvalidRequest,
                "limit must be an integer",
            ))
        }
    };
    let query = api::agent::MessagesQuery {
        since: optional_text(args, "since")?,
        cursor: optional_text(args, "cursor")?,
        limit,
    };
    let page = api::agent::messages_page(state, caller, &conversation(args)?, &query).await?;
    let list = page["messages"].as_array().cloned().unwrap_or_default();
    let text = render::message_lines(&list, &page["context"], reader(caller));
    Ok(Answer::ok(text, page))
}

async fn send_message(state: &AppState, caller: &Caller, args: &Value) -> Result<Answer, ApiError> {
    // The REST body's `attachments` (protocol §10): files uploaded with
    // `POST /attachments`, as `[{attachmentId}]`, checked by the same code.
    let files = args.get("attachments").filter(|v| !v.is_null());
    let card = match &args["card"] {
        Value::Null => None,
        raw => Some(
            validate_card(raw, files.is_some()).map_err(|e| ApiError::new(e.code, e.message))?,
        ),
    };
    let attachments = attach::requested(files, None)?;
    let max = state.settings.limits.max_content_chars;
    let content = checked_content(args["content"].clone(), max)?;
    let send = Send {
        conversation: conversation(args)?,
        content,
        reply_to: optional_text(args, "replyToMessageId")?,
        metadata: None,
        card,
        poll: None,
        usage: None,
        key: None,
        stream: false,
        attachments,
        budget: None,
    };
    let posted = post(state, caller, send).await?;
    let m = &posted.message;
    let text = format!(
        "Sent message {} at {}.",
        m.view.id.as_str(),
        m.view.created_at
    );
    Ok(Answer::ok(text, m))
}

async fn create_poll(state: &AppState, caller: &Caller, args: &Value) -> Result<Answer, ApiError> {
    let options = args["options"]
        .as_array()
        .and_then(|o| o.iter().map(|v| v.as_str().map(str::to_owned)).collect())
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::InvalidPoll,
                "options must be an array of strings",
            )
        })?;
    let allow_multiple = match &args["allowMultiple"] {
        Value::Null => false,
        Value::Bool(b) => *b,
        _ => {
            return Err(ApiError::new(
                ErrorCode::InvalidRequest,
                "allowMultiple must be a boolean",
            ))
        }
    };
    let body = api::polls::CreatePoll {
        conversation_id: text_arg(args, "conversationId")?,
        question: text_arg(args, "question")?,
        options,
        allow_multiple,
        client_id: None,
    };
    let (_, created) = api::polls::open_poll(state, caller, body, None).await?;
    let text = format!(
        "Poll sent. Its id is {}. Nothing blocks on it: read the tally later with get_messages, \
         where the card carries a `poll` object with the counts. Do not re-ask.",
        created.poll_id
    );
    Ok(Answer::ok(text, created))
}

async fn vote(state: &AppState, caller: &Caller, args: &Value) -> Result<Answer, ApiError> {
    let poll = text_arg(args, "pollId")?;
    let indexes: Vec<i64> = args["optionIndexes"]
        .as_array()
        .and_then(|o| o.iter().map(Value::as_i64).collect())
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::InvalidOptionIndex,
                "optionIndexes must be an array of integers",
            )
        })?;
    let answer = api::polls::act(state, caller, &poll, Action::Vote { indexes }).await?;
    let data = serde_json::to_value(&answer).unwrap_or(Value::Null);
    let labels: Vec<&str> = data["options"]
        .as_array()
        .map(|o| o.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let count = |i: usize| {
        data["poll"]["options"]
            .as_array()
            .and_then(|o| o.iter().find(|x| x["index"] == i))
            .map_or(0, |x| x["count"].as_u64().unwrap_or(0))
    };
    let tally: Vec<String> = labels
        .iter()
        .enumerate()
        .map(|(i, l)| format!("{l}: {}", count(i)))
        .collect();
    let chosen: Vec<String> = data["poll"]["mine"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter_map(Value::as_u64)
                .map(|i| {
                    labels
                        .get(i as usize)
                        .map_or(format!("#{i}"), |l| (*l).to_owned())
                })
                .collect()
        })
        .unwrap_or_default();
    let text = if chosen.is_empty() {
        format!("Vote withdrawn. The tally is now — {}.", tally.join(", "))
    } else {
        format!(
            "Voted for {}. The tally is now — {}.",
            chosen.join(" and "),
            tally.join(", ")
        )
    };
    Ok(Answer::ok(text, data))
}

async fn typing(state: &AppState, caller: &Caller, args: &Value) -> Result<Answer, ApiError> {
    let id = conversation(args)?;
    let p = &caller.principal;
    match api::typing::start_typing(state, &p.bay, &id, &p.participant.id).await? {
        TypingOutcome::Started { ttl, .. } => {
            let ms = ttl.as_millis() as u64;
            let text = format!(
                "Typing shown for {} s; call again while you keep working.",
                ms / 1000
            );
            Ok(Answer::ok(text, json!({"ok": true, "ttlMs": ms})))
        }
        TypingOutcome::NotFound => Err(ApiError::not_found()),
    }
}

async fn react(state: &AppState, caller: &Caller, args: &Value) -> Result<Answer, ApiError> {
    let id = text_arg(args, "conversationId")?;
    let message = text_arg(args, "messageId")?;
    let emoji = text_arg(args, "emoji")?;
    let answer =
        api::messages::reactions::react(state, caller, (id, message.clone()), &emoji).await?;
    Ok(Answer::ok(format!("Reacted {emoji} to {message}."), answer))
}

/// `list_files`: the REST library page, one line per file.
async fn list_files(state: &AppState, caller: &Caller, args: &Value) -> Result<Answer, ApiError> {
    let id = conversation(args)?;
    let limit = match &args["limit"] {
        Value::Null => None,
        Value::Number(n) => Some(n.to_string()),
        _ => {
            return Err(ApiError::new(
                ErrorCode::InvalidRequest,
                "limit must be an integer",
            ))
        }
    };
    let query = api::files::library::ListQuery {
        cursor: optional_text(args, "cursor")?,
        limit,
    };
    let page = api::files::library::library_page(state, caller, &id, &query).await?;
    let value = serde_json::to_value(&page).unwrap_or(Value::Null);
    let files = value["attachments"].as_array().cloned().unwrap_or_default();
    let mut text = if files.is_empty() {
        format!("No files in {}.", id.as_str())
    } else {
        files
            .iter()
            .map(|f| {
                format!(
                    "{} {} ({}, {} bytes) from {} at {}",
                    f["attachmentId"].as_str().unwrap_or_default(),
                    f["name"].as_str().unwrap_or_default(),
                    f["mimeType"].as_str().unwrap_or_default(),
                    f["sizeBytes"],
                    f["uploadedBy"].as_str().unwrap_or_default(),
                    f["sentAt"].as_str().unwrap_or_default(),
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    if let Some(next) = value["nextCursor"].as_str() {
        text.push_str(&format!("\nMore: call again with cursor {next}."));
    }
    Ok(Answer::ok(text, value))
}

/// `get_file`: one fresh signed URL, as `GET …/attachments/{aid}/link`.
async fn get_file(state: &AppState, caller: &Caller, args: &Value) -> Result<Answer, ApiError> {
    let id = conversation(args)?;
    let aid = text_arg(args, "attachmentId")?;
    let link = api::files::library::file_link_of(state, caller, &id, aid).await?;
    let value = serde_json::to_value(&link).unwrap_or(Value::Null);
    let text = format!(
        "{} ({}, {} bytes): {} (expires {}; fetch it promptly, do not share it)",
        value["name"].as_str().unwrap_or_default(),
        value["mimeType"].as_str().unwrap_or_default(),
        value["sizeBytes"],
        value["attachmentUrl"].as_str().unwrap_or_default(),
        value["expiresAt"].as_str().unwrap_or_default(),
    );
    Ok(Answer::ok(text, value))
}
