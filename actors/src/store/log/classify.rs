//! What each kind of log entry is for: whom it is delivered to, whether
//! it becomes an event, what a queue is charged for it, and which
//! conversation it belongs to. Kept apart from the entry types so adding
//! an entry kind reads as one match per question.

use super::{Change, LogEvent};
use switchboard_protocol::ids::{ConversationId, ParticipantId};

impl LogEvent {
    /// The conversation whose members receive this entry as an event, for
    /// entries that are delivered (messages and changes). `Presence`
    /// entries go to a participant's peers instead: see
    /// [`LogEvent::Presence`].
    pub fn delivered_in(&self) -> Option<&ConversationId> {
        match self {
            LogEvent::Message { conversation, .. } | LogEvent::Change { conversation, .. } => {
                Some(&conversation.id)
            }
            LogEvent::Roster { .. }
            | LogEvent::CredentialRevoked { .. }
            | LogEvent::Suspension { .. }
            | LogEvent::Presence { .. }
            | LogEvent::SummaryRequested { .. }
            | LogEvent::ConnectorRequest { .. }
            | LogEvent::ConnectorAnswered { .. }
            | LogEvent::WebhookChanged { .. }
            | LogEvent::Canary { .. } => None,
        }
    }

    /// Whether the entry becomes an event for some recipients (messages,
    /// changes, presence, summary requests), as opposed to a control entry.
    pub fn is_event(&self) -> bool {
        matches!(
            self,
            LogEvent::Message { .. }
                | LogEvent::Change { .. }
                | LogEvent::Presence { .. }
                | LogEvent::SummaryRequested { .. }
                | LogEvent::ConnectorRequest { .. }
        )
    }

    /// Whether `recipient` is shown nothing of this entry although it is
    /// addressed to it: its own typing indicator, which only the other
    /// members see.
    pub fn hidden_from(&self, recipient: &ParticipantId) -> bool {
        match self {
            LogEvent::Change { change, .. } => matches!(
                &**change,
                Change::Typing { participant, .. } if participant == recipient
            ),
            _ => false,
        }
    }

    /// Bytes a session is charged for this entry while it is queued
    /// (an estimate of its frame size).
    pub fn estimated_bytes(&self) -> usize {
        match self {
            LogEvent::Message { message, .. } => message.content.len() + 512,
            LogEvent::Change { change, .. } => match &**change {
                Change::Edited { message } | Change::Completed { message } => {
                    message.content.len() + 512
                }
                Change::Delta { text, .. } => text.len() + 256,
                _ => 512,
            },
            LogEvent::Presence { .. } => 160,
            LogEvent::SummaryRequested { .. } => 320,
            LogEvent::ConnectorRequest { payload, .. } => payload.to_string().len() + 320,
            LogEvent::ConnectorAnswered { .. } => 64,
            LogEvent::Roster { .. }
            | LogEvent::CredentialRevoked { .. }
            | LogEvent::Suspension { .. }
            | LogEvent::WebhookChanged { .. }
            | LogEvent::Canary { .. } => 64,
        }
    }

    /// The `Roster` entry of `conversation` as it is now.
    pub fn roster(conversation: &crate::model::Conversation) -> Self {
        LogEvent::Roster {
            conversation: conversation.reference(),
            members: conversation.member_ids(),
        }
    }

    /// The conversation an event belongs to, if any.
    pub fn conversation(&self) -> Option<&ConversationId> {
        match self {
            LogEvent::Message { conversation, .. }
            | LogEvent::Change { conversation, .. }
            | LogEvent::Roster { conversation, .. } => Some(&conversation.id),
            LogEvent::SummaryRequested { conversation, .. } => Some(&conversation.id),
            LogEvent::CredentialRevoked { .. }
            | LogEvent::Suspension { .. }
            | LogEvent::Presence { .. }
            | LogEvent::ConnectorRequest { .. }
            | LogEvent::ConnectorAnswered { .. }
            | LogEvent::WebhookChanged { .. }
            | LogEvent::Canary { .. } => None,
        }
    }
}
