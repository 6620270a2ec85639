//! The rolling conversation summary (protocol §6, "Returning after a gap"):
//! the `memory` of `GET …/conversations/:id/summary` and the body of the
//! summarizer's `PUT`. The gateway runs no language model: it keeps what
//! the Bay's summarizer agent writes, checks its shape and bounds here,
//! and checks its message ids against the conversation (docs/summary.md).
//!
//! A summary is derived, untrusted context (protocol §6): it never changes
//! routing, roles or `shouldRespond`.

use crate::ids::{MessageId, ParticipantId};
use serde::{Deserialize, Serialize};

/// Most characters of `summary`, the narrative.
pub const MAX_NARRATIVE_CHARS: usize = 4_000;
/// Most items in each of the four lists.
pub const MAX_ITEMS: usize = 50;
/// Most characters of an item's `text`.
pub const MAX_ITEM_CHARS: usize = 1_000;
/// Most characters of an open task's `owner`.
pub const MAX_OWNER_CHARS: usize = 200;
/// Most characters of an open task's `status`.
pub const MAX_STATUS_CHARS: usize = 40;
/// Most source message ids one item cites (at least one is required).
pub const MAX_SOURCES_PER_ITEM: usize = 20;
/// Most distinct source message ids one summary cites in all.
pub const MAX_SOURCES: usize = 500;

/// One entry of a summary's lists: a decision, an open task, an open
/// question or a durable fact, with the messages it was derived from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemoryItem {
    /// The item, 1–1,000 characters.
    pub text: String,
    /// Who owns the task (a name or id, up to 200 characters); open tasks
    /// only, absent elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The task's status in the writer's words (e.g. `open`, `blocked`),
    /// up to 40 characters; open tasks only, absent elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// 1–20 ids of messages of the conversation, at or before the
    /// boundary, the item was derived from: readers verify it against them.
    pub source_message_ids: Vec<MessageId>,
}

/// What the summarizer writes (`PUT …/conversations/:id/summary`): the
/// narrative, the four lists and the boundary. The server adds `version`,
/// `generatedAt`, `generatedBy` and `approxTokens`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemoryWrite {
    /// The narrative, 1–4,000 characters.
    pub summary: String,
    /// Decisions taken, at most 50.
    #[serde(default)]
    pub decisions: Vec<MemoryItem>,
    /// Open tasks (each may carry `owner` and `status`), at most 50.
    #[serde(default)]
    pub open_tasks: Vec<MemoryItem>,
    /// Open questions, at most 50.
    #[serde(default)]
    pub open_questions: Vec<MemoryItem>,
    /// Durable facts, at most 50.
    #[serde(default)]
    pub durable_facts: Vec<MemoryItem>,
    /// The newest message the summary covers; a message of the conversation.
    pub through_message_id: MessageId,
    /// That message's `createdAt` (RFC 3339). Optional: the server fills it
    /// in, and refuses a value that is not the message's time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub through_created_at: Option<String>,
}

/// The stored summary as `GET …/summary` answers it in `memory` (the
/// fields BayChat CLI 0.6.0 `formatMemoryBlock` reads, plus `generatedBy`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConversationMemory {
    /// The narrative.
    pub summary: String,
    /// Decisions taken.
    pub decisions: Vec<MemoryItem>,
    /// Open tasks, with `owner` and `status` where the writer gave them.
    pub open_tasks: Vec<MemoryItem>,
    /// Open questions.
    pub open_questions: Vec<MemoryItem>,
    /// Durable facts.
    pub durable_facts: Vec<MemoryItem>,
    /// The newest message the summary covers: `recentMessages` are the
    /// messages after it.
    pub through_message_id: MessageId,
    /// That message's `createdAt`, RFC 3339 UTC with milliseconds.
    #[schema(format = DateTime)]
    pub through_created_at: String,
    /// 1 for the conversation's first summary, one more at each write.
    pub version: u64,
    /// When the summary was stored, RFC 3339 UTC with milliseconds.
    #[schema(format = DateTime)]
    pub generated_at: String,
    /// The summarizer agent that wrote it.
    pub generated_by: ParticipantId,
    /// The summary's size in tokens, estimated as its characters / 4
    /// (rounded up): what loading it costs a reader's context.
    pub approx_tokens: u64,
}

/// Why a [`MemoryWrite`] is refused before its ids are looked up: the
/// gateway answers 400 `INVALID_REQUEST` with [`ShapeError::message`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapeError(pub String);

impl ShapeError {
    /// Human text naming the field and the bound.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl MemoryWrite {
    /// The four lists with their wire names, in display order.
    pub fn lists(&self) -> [(&'static str, &[MemoryItem]); 4] {
        [
            ("decisions", &self.decisions),
            ("openTasks", &self.open_tasks),
            ("openQuestions", &self.open_questions),
            ("durableFacts", &self.durable_facts),
        ]
    }

    /// Checks every bound of the module docs' constants; owner and status
    /// only on open tasks.
    pub fn check_shape(&self) -> Result<(), ShapeError> {
        let fail = |m: String| Err(ShapeError(m));
        let chars = |s: &str| s.chars().count();
        if self.summary.trim().is_empty() || chars(&self.summary) > MAX_NARRATIVE_CHARS {
            return fail(format!(
                "summary must be 1 to {MAX_NARRATIVE_CHARS} characters"
            ));
        }
        let mut sources = std::collections::HashSet::new();
        for (name, items) in self.lists() {
            if items.len() > MAX_ITEMS {
                return fail(format!("{name} holds at most {MAX_ITEMS} items"));
            }
            for (i, item) in items.iter().enumerate() {
                if item.text.trim().is_empty() || chars(&item.text) > MAX_ITEM_CHARS {
                    return fail(format!(
                        "{name}[{i}].text must be 1 to {MAX_ITEM_CHARS} characters"
                    ));
                }
                let task = name == "openTasks";
                if !task && (item.owner.is_some() || item.status.is_some()) {
                    return fail(format!(
                        "{name}[{i}]: owner and status belong to openTasks only"
                    ));
                }
                if item
                    .owner
                    .as_deref()
                    .is_some_and(|o| o.trim().is_empty() || chars(o) > MAX_OWNER_CHARS)
                {
                    return fail(format!(
                        "{name}[{i}].owner must be 1 to {MAX_OWNER_CHARS} characters"
                    ));
                }
                if item
                    .status
                    .as_deref()
                    .is_some_and(|s| s.trim().is_empty() || chars(s) > MAX_STATUS_CHARS)
                {
                    return fail(format!(
                        "{name}[{i}].status must be 1 to {MAX_STATUS_CHARS} characters"
                    ));
                }
                let n = item.source_message_ids.len();
                if n == 0 || n > MAX_SOURCES_PER_ITEM {
                    return fail(format!(
                        "{name}[{i}].sourceMessageIds must hold 1 to {MAX_SOURCES_PER_ITEM} ids"
                    ));
                }
                sources.extend(item.source_message_ids.iter());
            }
        }
        if sources.len() > MAX_SOURCES {
            return fail(format!(
                "a summary cites at most {MAX_SOURCES} distinct source messages"
            ));
        }
        Ok(())
    }

    /// Drops a source id an item cites more than once (its first citation
    /// stays, in order): a repeat adds nothing a reader can use.
    pub fn drop_repeated_sources(&mut self) {
        for items in [
            &mut self.decisions,
            &mut self.open_tasks,
            &mut self.open_questions,
            &mut self.durable_facts,
        ] {
            for item in items.iter_mut() {
                let mut seen = std::collections::HashSet::new();
                item.source_message_ids.retain(|id| seen.insert(id.clone()));
            }
        }
    }

    /// Every distinct source message id, in first-cited order.
    pub fn source_ids(&self) -> Vec<&MessageId> {
        let mut seen = std::collections::HashSet::new();
        self.lists()
            .into_iter()
            .flat_map(|(_, items)| items.iter())
            .flat_map(|i| i.source_message_ids.iter())
            .filter(|id| seen.insert(*id))
            .collect()
    }

    /// [`ConversationMemory::approx_tokens`] of a summary with this text.
    pub fn approx_tokens(&self) -> u64 {
        let mut chars = self.summary.chars().count();
        for (_, items) in self.lists() {
            for i in items {
                chars += i.text.chars().count();
                chars += i.owner.as_deref().map_or(0, |o| o.chars().count());
                chars += i.status.as_deref().map_or(0, |s| s.chars().count());
            }
        }
        (chars as u64).div_ceil(4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(text: &str, sources: &[&str]) -> MemoryItem {
        MemoryItem {
            text: text.into(),
            owner: None,
            status: None,
            source_message_ids: sources.iter().map(|s| MessageId((*s).into())).collect(),
        }
    }

    fn write() -> MemoryWrite {
        MemoryWrite {
            summary: "We planned the launch.".into(),
            decisions: vec![item("Ship Friday", &["m1", "m2"])],
            open_tasks: vec![MemoryItem {
                owner: Some("Ana".into()),
                status: Some("open".into()),
                ..item("Write notes", &["m2"])
            }],
            open_questions: vec![],
            durable_facts: vec![item("Staging is eu-1", &["m1"])],
            through_message_id: MessageId("m3".into()),
            through_created_at: None,
        }
    }

    #[test]
    fn a_well_formed_summary_passes_and_lists_its_sources_once() {
        let w = write();
        assert_eq!(w.check_shape(), Ok(()));
        let ids: Vec<&str> = w.source_ids().iter().map(|m| m.as_str()).collect();
        assert_eq!(ids, ["m1", "m2"]);
        assert!(w.approx_tokens() > 0);
    }

    #[test]
    fn bounds_are_enforced_by_field() {
        let mut w = write();
        w.summary = " ".into();
        assert!(w.check_shape().unwrap_err().0.starts_with("summary"));
        let mut w = write();
        w.decisions[0].source_message_ids.clear();
        assert!(w.check_shape().unwrap_err().0.contains("sourceMessageIds"));
        let mut w = write();
        w.durable_facts[0].owner = Some("Ana".into());
        assert!(w.check_shape().unwrap_err().0.contains("openTasks only"));
        let mut w = write();
        w.open_questions = vec![item("q", &["m1"]); MAX_ITEMS + 1];
        assert!(w.check_shape().unwrap_err().0.contains("openQuestions"));
    }

    #[test]
    fn unknown_fields_are_refused() {
        let body = serde_json::json!({
            "summary": "s", "throughMessageId": "m1", "version": 3
        });
        assert!(serde_json::from_value::<MemoryWrite>(body).is_err());
    }
}
