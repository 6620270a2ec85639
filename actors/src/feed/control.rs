//! The feed's control entries: the facts in the Bay's log that change who
//! may hear what, read by every node's feed in log order with the records
//! they govern. A `Roster` moves the membership index; `CredentialRevoked`
//! (4001) and `Suspension` (4004) drop the node's cached tokens and close
//! the sessions they end, whichever node wrote them.

use super::BayFeed;
use crate::session::CloseReason;
use crate::store::log::{LogEvent, LogRecord};
use crate::store::Suspension;
use switchboard_protocol::ids::SessionId;

impl BayFeed {
    /// Applies a control entry the tail read: a `Roster` moves the
    /// membership index, a `CredentialRevoked` or a `Suspension` drops
    /// cached tokens and closes the sessions it ends (4001, 4004).
    pub(super) fn apply_control(&mut self, record: &LogRecord) {
        match &record.event {
            LogEvent::Roster {
                conversation,
                members,
            } => {
                self.members
                    .insert(conversation.id.clone(), members.iter().cloned().collect());
            }
            LogEvent::CredentialRevoked { token, participant } => {
                self.tokens.revoke(&self.bay, participant);
                self.release_waiters(Some(participant));
                self.release_answer_waiters(Some(participant));
                let revoked: Vec<SessionId> = self.by_token.get(token).cloned().unwrap_or_default();
                for s in revoked {
                    self.close_session(&s, CloseReason::Revoked);
                }
            }
            LogEvent::Suspension {
                participant,
                suspended,
            } => {
                // Either way the cached answers are stale: the next request
                // asks the store, which knows the new standing.
                match participant {
                    Some(p) => self.tokens.revoke(&self.bay, p),
                    None => self.tokens.forget_bay(&self.bay),
                }
                if !suspended {
                    return;
                }
                self.release_waiters(participant.as_ref());
                self.release_answer_waiters(participant.as_ref());
                let (reason, doomed): (_, Vec<SessionId>) = match participant {
                    Some(p) => (
                        CloseReason::Suspended(Suspension::Participant),
                        self.by_token
                            .values()
                            .flatten()
                            .filter(|s| self.sessions.get(s).is_some_and(|a| a.participant == *p))
                            .cloned()
                            .collect(),
                    ),
                    None => (
                        CloseReason::Suspended(Suspension::Bay),
                        self.by_token.values().flatten().cloned().collect(),
                    ),
                };
                for s in doomed {
                    self.close_session(&s, reason);
                }
            }
            LogEvent::Message { .. }
            | LogEvent::Change { .. }
            | LogEvent::Presence { .. }
            | LogEvent::SummaryRequested { .. }
            | LogEvent::ConnectorRequest { .. }
            | LogEvent::ConnectorAnswered { .. }
            | LogEvent::WebhookChanged { .. }
            | LogEvent::Canary { .. } => {}
        }
    }
}
