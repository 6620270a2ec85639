//! Messages: appends, changes, history, read markers: the Redis engine's [`MessageStore`].

use super::*;
use crate::store::MessageStore;

#[async_trait]
impl MessageStore for RedisStore {
    async fn append_message(
        &self,
        bay: &BayId,
        mut new: NewMessage,
        sender_kind: ParticipantKind,
    ) -> Result<AppendOutcome, StoreError> {
        let doing = "appending a message";
        // Versions count changes after the append, from 0 (the versions
        // hash starts empty).
        new.message.version = 0;
        let k = BayKeys::new(bay);
        let cid = &new.conversation.id;
        let idempotency = new.idempotency.as_ref();
        let keys = [
            k.conversations(),
            k.revisions(),
            k.conversation_state(cid),
            k.messages(cid),
            k.message_ids(cid),
            k.log(),
            k.epoch(),
            k.log_meta(),
            k.rosters(),
            k.bodies(cid),
            k.reads(cid),
            k.polls(),
            k.idempotency(idempotency.map_or("none", |i| i.key.as_str())),
            k.draft_text(cid, new.message.id.as_str()),
            k.drafts(),
            k.draft_info(),
        ];
        let draft = new.message.is_streaming();
        let (msgs, log) = (&keys[3], &keys[5]);
        // The message with holes for `createdAt`, `routing.suppressed` and
        // `seq`, and the log event with a hole for the message: the script
        // stamps and fills them.
        let holes = Holes::new();
        let mut message = to_value(doing, &new.message)?;
        punch(doing, &mut message, &["created_at"], holes.hole(0))?;
        punch(
            doing,
            &mut message,
            &["routing", "suppressed"],
            holes.hole(1),
        )?;
        punch(doing, &mut message, &["seq"], holes.hole(2))?;
        let message = holes.split(doing, &to_text(doing, &message)?, 3)?;
        let event_holes = Holes::new();
        let given_suppressed = new.message.routing.suppressed;
        let message_id = new.message.id.clone();
        // The event around a hole for the message (which is in the pieces
        // above already): no second serialization of the message.
        let mut event = serde_json::json!({
            "kind": "message",
            "conversation": to_value(doing, &new.conversation)?,
            "message": null,
        });
        punch(doing, &mut event, &["message"], event_holes.hole(0))?;
        let event = event_holes.split(doing, &to_text(doing, &event)?, 1)?;
        let kind = match sender_kind {
            ParticipantKind::User => "user",
            ParticipantKind::Agent => "agent",
        };
        let cap = new.round_cap.map(|c| c.to_string()).unwrap_or_default();
        let revision = new.revision.to_string();
        let poll = new.message.poll.as_ref().map_or("", |p| p.id.as_str());
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let reply = self
            .invoke_status(
                doing,
                &scripts::APPEND_MESSAGE,
                &key_refs,
                &[
                    cid.as_str(),
                    message_id.as_str(),
                    kind,
                    &cap,
                    if given_suppressed { "true" } else { "false" },
                    &message[0],
                    &message[1],
                    &message[2],
                    &message[3],
                    &event[0],
                    &event[1],
                    &epoch_candidate(),
                    &self.window_ms(),
                    &self.max_entries(),
                    &revision,
                    idempotency.map_or("", |i| i.fingerprint.as_str()),
                    poll,
                    new.message.sender.id.as_str(),
                    if draft {
                        new.message.sender.id.as_str()
                    } else {
                        ""
                    },
                    if draft {
                        new.message.content.as_str()
                    } else {
                        ""
                    },
                ],
            )
            .await?;
        match status(doing, msgs, &reply)? {
            ScriptStatus::Ok => {}
            ScriptStatus::Stale => return Ok(AppendOutcome::Stale),
            ScriptStatus::Conflict => return Ok(AppendOutcome::KeyReused),
            ScriptStatus::Exists => {
                let first = reply
                    .get(1)
                    .map(|v| bytes(doing, msgs, v))
                    .transpose()?
                    .filter(|b| !b.is_empty())
                    .ok_or_else(|| corrupt(doing, msgs, "idempotent send lost its message"))?;
                return Ok(AppendOutcome::Duplicate(Box::new(decode(
                    doing, msgs, first,
                )?)));
            }
            ScriptStatus::Missing => {
                return Err(corrupt(
                    doing,
                    &keys[0],
                    format!("conversation {cid} vanished"),
                ))
            }
            other => return Err(corrupt(doing, msgs, format!("script said {other:?}"))),
        }
        let [_, entry, ms, suppressed, seq] = reply.as_slice() else {
            return Err(corrupt(doing, msgs, "append script gave a malformed reply"));
        };
        // The stored message is ours with the holes filled: patch them in
        // rather than decode the JSON back.
        let mut message = new.message;
        let ms: i64 = text(doing, msgs, ms)?
            .parse()
            .map_err(|e| corrupt(doing, msgs, e))?;
        message.created_at = DateTime::<Utc>::from_timestamp_millis(ms)
            .ok_or_else(|| corrupt(doing, msgs, format!("createdAt {ms} out of range")))?;
        message.routing.suppressed = text(doing, msgs, suppressed)? == "true";
        message.seq = text(doing, msgs, seq)?
            .parse()
            .map_err(|e| corrupt(doing, msgs, e))?;
        if draft {
            // The sweep's cross-Bay index lives in another slot: written
            // after the Bay's own keys; the sweep checks the Bay's set.
            let index = keys::draft_bays();
            let _: i64 = self
                .query(doing, &index, cmd("SADD").arg(&index).arg(bay.as_str()))
                .await?;
        }
        Ok(AppendOutcome::Appended(Box::new(Appended {
            entry: entry_id(doing, log, entry)?,
            message,
        })))
    }

    async fn change_message(
        &self,
        bay: &BayId,
        change: MessageChange,
    ) -> Result<Changed, StoreError> {
        let doing = "changing a message";
        let k = BayKeys::new(bay);
        let cid = &change.conversation.id;
        let keys = message_change_keys(&k, cid);
        let body = to_text(doing, &to_value(doing, &change.message)?)?;
        let event = to_text(
            doing,
            &to_value(
                doing,
                &LogEvent::Change {
                    conversation: change.conversation.clone(),
                    change: change.change,
                },
            )?,
        )?;
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let reply = self
            .invoke_status(
                doing,
                &scripts::CHANGE_MESSAGE,
                &key_refs,
                &[
                    cid.as_str(),
                    change.message.id.as_str(),
                    &change.revision.to_string(),
                    &change.message.version.to_string(),
                    &body,
                    &event,
                    &epoch_candidate(),
                    &self.window_ms(),
                    &self.max_entries(),
                ],
            )
            .await?;
        changed(doing, &keys[4], &keys[5], &reply)
    }

    async fn poll_message(
        &self,
        bay: &BayId,
        poll: &str,
    ) -> Result<Option<(ConversationId, MessageId)>, StoreError> {
        let doing = "finding a poll";
        let key = BayKeys::new(bay).polls();
        let raw: Option<String> = self
            .query(doing, &key, cmd("HGET").arg(&key).arg(poll))
            .await?;
        Ok(raw.and_then(|r| {
            let (c, m) = r.split_once(' ')?;
            Some((ConversationId(c.to_owned()), MessageId(m.to_owned())))
        }))
    }

    async fn mark_read(
        &self,
        bay: &BayId,
        conversation: &ConversationRef,
        participant: &ParticipantId,
        message: &StoredMessage,
    ) -> Result<Option<EntryId>, StoreError> {
        let doing = "moving a read marker";
        let k = BayKeys::new(bay);
        let keys = [
            k.reads(&conversation.id),
            k.log(),
            k.epoch(),
            k.log_meta(),
            k.rosters(),
            k.conversations(),
        ];
        let event = to_text(
            doing,
            &to_value(
                doing,
                &LogEvent::Change {
                    conversation: conversation.clone(),
                    change: Change::Read {
                        participant: participant.clone(),
                        message: message.id.clone(),
                    },
                },
            )?,
        )?;
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let reply = self
            .invoke_status(
                doing,
                &scripts::MARK_READ,
                &key_refs,
                &[
                    participant.as_str(),
                    &message.seq.to_string(),
                    message.id.as_str(),
                    &event,
                    conversation.id.as_str(),
                    &epoch_candidate(),
                    &self.window_ms(),
                    &self.max_entries(),
                ],
            )
            .await?;
        Ok(match status(doing, &keys[0], &reply)? {
            ScriptStatus::Ok => {
                let entry = reply
                    .get(1)
                    .ok_or_else(|| corrupt(doing, &keys[1], "no log id"))?;
                Some(entry_id(doing, &keys[1], entry)?)
            }
            ScriptStatus::Exists | ScriptStatus::Missing => None,
            other => return Err(corrupt(doing, &keys[0], format!("script said {other:?}"))),
        })
    }

    async fn read_states(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        conversations: &[ConversationId],
    ) -> Result<Vec<ReadState>, StoreError> {
        let doing = "reading read markers";
        if conversations.is_empty() {
            return Ok(Vec::new());
        }
        let k = BayKeys::new(bay);
        let keys: Vec<String> = conversations
            .iter()
            .flat_map(|c| [k.conversation_state(c), k.reads(c)])
            .collect();
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let reply: Vec<String> = self
            .invoke(
                doing,
                &scripts::READ_STATES,
                &key_refs,
                &[participant.as_str()],
            )
            .await?;
        reply
            .chunks(2)
            .map(|pair| {
                let [last, marker] = pair else {
                    return Err(corrupt(doing, &keys[0], "odd read-state reply"));
                };
                let last: u64 = last.parse().map_err(|e| corrupt(doing, &keys[0], e))?;
                let (seq, last_read) = match marker.split_once(' ') {
                    Some((seq, id)) => (
                        seq.parse::<u64>()
                            .map_err(|e| corrupt(doing, &keys[1], e))?,
                        Some(MessageId(id.to_owned())),
                    ),
                    None => (0, None),
                };
                Ok(ReadState {
                    last_read,
                    unread: last.saturating_sub(seq),
                })
            })
            .collect()
    }

    async fn message(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        message: &MessageId,
    ) -> Result<Option<StoredMessage>, StoreError> {
        let doing = "reading a message";
        let k = BayKeys::new(bay);
        let (msgs, ids, bodies) = (
            k.messages(conversation),
            k.message_ids(conversation),
            k.bodies(conversation),
        );
        let raw: Option<Vec<u8>> = self
            .invoke(
                doing,
                &scripts::MESSAGE,
                &[&msgs, &ids, &bodies],
                &[message.as_str()],
            )
            .await?;
        let mut found: Vec<StoredMessage> = raw
            .map(|r| decode(doing, &msgs, &r))
            .transpose()?
            .into_iter()
            .collect();
        self.fill_drafts(bay, &mut found).await?;
        Ok(found.pop())
    }

    async fn messages_since(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        since: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let doing = "reading messages since a time";
        if limit == 0 {
            return Ok(Vec::new());
        }
        let k = BayKeys::new(bay);
        let (key, bodies) = (k.messages(conversation), k.bodies(conversation));
        // History ids are `<createdAt ms>-0` and createdAt has ms precision:
        // "strictly after `since`" is "ms > floor(since in ms)".
        let floor = since.timestamp_millis();
        let start = if floor < 0 {
            "-".to_owned()
        } else {
            format!("{}-0", floor + 1)
        };
        let reply: Vec<Vec<u8>> = self
            .invoke(
                doing,
                &scripts::MESSAGES_SINCE,
                &[&key, &bodies],
                &[&start, &limit.min(MAX_COUNT).to_string()],
            )
            .await?;
        let mut out = reply
            .iter()
            .map(|raw| decode(doing, &key, raw))
            .collect::<Result<Vec<StoredMessage>, _>>()?;
        self.fill_drafts(bay, &mut out).await?;
        Ok(out)
    }

    async fn messages_before(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        before: Option<&MessageId>,
        limit: usize,
    ) -> Result<(Vec<StoredMessage>, bool), StoreError> {
        let doing = "reading a page of messages";
        let k = BayKeys::new(bay);
        let (msgs, ids, bodies) = (
            k.messages(conversation),
            k.message_ids(conversation),
            k.bodies(conversation),
        );
        let reply: Value = self
            .invoke(
                doing,
                &scripts::MESSAGES_BEFORE,
                &[&msgs, &ids, &bodies],
                &[
                    before.map(|m| m.as_str()).unwrap_or(""),
                    &limit.min(MAX_PAGE).to_string(),
                ],
            )
            .await?;
        let items = array(doing, &msgs, &reply)?;
        let (more, page) = items
            .split_first()
            .ok_or_else(|| corrupt(doing, &msgs, "empty page reply"))?;
        let more = matches!(more, Value::Int(1));
        let mut out = page
            .iter()
            .map(|v| decode::<StoredMessage>(doing, &msgs, bytes(doing, &msgs, v)?))
            .collect::<Result<Vec<_>, _>>()?;
        out.reverse();
        self.fill_drafts(bay, &mut out).await?;
        Ok((out, more))
    }
}
