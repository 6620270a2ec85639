//! The REST catch-up after a `reset` (or 409 `CURSOR_EXPIRED`): what the
//! lost cursor can no longer replay is read from each conversation's
//! messages and handed to the caller as [`Update::Recovered`]. Every
//! transport's [`Ctx`] runs it the same way, so it is part of their
//! shared contract.

use super::{http_refusal, wire_time, Ctx, Ended, Internal};
use crate::dedupe::key_of;
use crate::error::ClientError;
use crate::update::Update;
use serde_json::{json, Value};
use switchboard_protocol::event::Event;

impl Ctx {
    /// Reads every conversation's messages over REST and delivers those
    /// the caller has not taken, as `message` events, conversation by
    /// conversation in ascending order: in a conversation with a watermark
    /// strictly after it (same-millisecond messages told apart by id),
    /// elsewhere from `since`.
    pub(super) async fn catch_up(&mut self, reset: bool) -> Result<(), Ended> {
        let since = wire_time(self.since);
        self.send(Internal::Item(Ok(Update::CatchUp {
            since: since.clone(),
            reset,
        })))
        .await?;
        let started = self.floored(chrono::Utc::now() - self.margin());
        let conversations = self
            .client
            .conversations()
            .await
            .map_err(|e| http_refusal(&self.client.url("/conversations"), e))?;
        for conversation in conversations.as_array().cloned().unwrap_or_default() {
            let Some(id) = conversation["id"].as_str() else {
                continue;
            };
            let mark = self.delivered.get(id).cloned();
            // `?since=` is exclusive: a millisecond earlier brings back the
            // watermark's own millisecond, whose other messages may be new.
            let from = match &mark {
                Some((at, _)) => wire_time(*at - chrono::Duration::milliseconds(1)),
                None => since.clone(),
            };
            let messages = match self.client.messages_since(id, &from).await {
                Ok(m) => m,
                // Left (or removed from) the conversation since the list.
                Err(ClientError::Api {
                    status: 403 | 404, ..
                }) => continue,
                Err(e) => {
                    let url = self.client.url(&format!("/conversations/{id}/messages"));
                    return Err(http_refusal(&url, e));
                }
            };
            for message in messages {
                if let Some((at, ids)) = &mark {
                    let created = message["createdAt"]
                        .as_str()
                        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                        .map(|t| t.with_timezone(&chrono::Utc));
                    let taken = match created {
                        Some(c) => {
                            c < *at
                                || (c == *at
                                    && ids
                                        .iter()
                                        .any(|i| Some(i.as_str()) == message["id"].as_str()))
                        }
                        None => false,
                    };
                    if taken {
                        continue;
                    }
                }
                let Some(raw) = recovered_event(&conversation, &message) else {
                    continue;
                };
                if !self.dedupe.insert(key_of(&raw)) {
                    continue;
                }
                let Ok(event) = serde_json::from_value::<Event>(raw.clone()) else {
                    continue;
                };
                self.took(&raw);
                self.send(Internal::Item(Ok(Update::Recovered {
                    event: Box::new(event),
                    raw,
                })))
                .await?;
            }
        }
        self.since = started;
        Ok(())
    }
}

/// The `message` event a REST message stands for (protocol §11: the REST
/// shape is the event's `message` plus fields events leave out), or `None`
/// for a tombstone.
fn recovered_event(conversation: &Value, message: &Value) -> Option<Value> {
    if !message["deletedAt"].is_null() {
        return None;
    }
    let mut view = serde_json::Map::new();
    for field in [
        "id",
        "senderId",
        "senderType",
        "content",
        "createdAt",
        "metadata",
        "sender",
        "mentions",
        "replyTo",
        "shouldRespond",
    ] {
        view.insert(field.to_owned(), message[field].clone());
    }
    Some(json!({
        "type": "message",
        "conversationId": conversation["id"],
        "message": view,
        "conversation": {
            "id": conversation["id"],
            "type": conversation["type"],
            "title": conversation["title"],
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::recovered_event;
    use serde_json::json;
    use switchboard_protocol::event::Event;

    #[test]
    fn a_rest_message_becomes_the_message_event() {
        let conversation = json!({"id":"c1","type":"GROUP","title":"Room","role":"member"});
        let message = json!({"conversationId":"c1","id":"msg_1","senderId":"ana","senderType":"USER",
            "content":"hi","createdAt":"2026-12-01T00:00:00.000Z","metadata":null,
            "sender":{"id":"ana","name":"Ana","kind":"user","role":"member"},"mentions":[],
            "replyTo":null,"shouldRespond":false,"editedAt":null,"deletedAt":null,
            "reactions":[],"cardPayload":null,"poll":null});
        let raw = recovered_event(&conversation, &message).unwrap();
        let event: Event = serde_json::from_value(raw.clone()).unwrap();
        assert_eq!(event.conversation_id().map(|c| c.0.as_str()), Some("c1"));
        assert!(raw["message"].get("reactions").is_none());
        let mut deleted = message.clone();
        deleted["deletedAt"] = json!("2026-12-01T00:00:01.000Z");
        assert!(recovered_event(&conversation, &deleted).is_none());
    }
}
