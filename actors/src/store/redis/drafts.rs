//! Streaming drafts: the Redis engine's [`DraftStore`].

use super::*;
use crate::store::DraftStore;

#[async_trait]
impl DraftStore for RedisStore {
    async fn append_draft(
        &self,
        bay: &BayId,
        append: DraftAppend,
    ) -> Result<DraftAppended, StoreError> {
        let doing = "appending to a draft";
        let k = BayKeys::new(bay);
        let cid = append.conversation.id.clone();
        let keys = [
            k.versions(&cid),
            k.draft_text(&cid, append.message.as_str()),
            k.drafts(),
            k.log(),
            k.epoch(),
            k.log_meta(),
            k.rosters(),
            k.conversations(),
            k.revisions(),
        ];
        let version = append.version + 1;
        let text = append.text.clone();
        let event = to_text(
            doing,
            &to_value(
                doing,
                &LogEvent::Change {
                    conversation: append.conversation,
                    change: Change::Delta {
                        message: append.message.clone(),
                        offset: append.offset,
                        text: append.text,
                        version,
                    },
                },
            )?,
        )?;
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let reply = self
            .invoke_status(
                doing,
                &scripts::APPEND_DRAFT,
                &key_refs,
                &[
                    append.message.as_str(),
                    &append.version.to_string(),
                    &text,
                    &event,
                    &epoch_candidate(),
                    &self.window_ms(),
                    &self.max_entries(),
                    cid.as_str(),
                    &append.revision.to_string(),
                ],
            )
            .await?;
        Ok(match status(doing, &keys[1], &reply)? {
            ScriptStatus::Ok => {
                let entry = reply
                    .get(1)
                    .ok_or_else(|| corrupt(doing, &keys[3], "no log id"))?;
                DraftAppended::Appended {
                    entry: entry_id(doing, &keys[3], entry)?,
                    version,
                }
            }
            ScriptStatus::Conflict => DraftAppended::Conflict,
            ScriptStatus::Closed => DraftAppended::Closed,
            ScriptStatus::Stale => DraftAppended::Stale,
            ScriptStatus::Missing => DraftAppended::NotFound,
            other => return Err(corrupt(doing, &keys[1], format!("script said {other:?}"))),
        })
    }

    async fn close_draft(
        &self,
        bay: &BayId,
        change: MessageChange,
        round: Option<RoundStep>,
    ) -> Result<Changed, StoreError> {
        let doing = "ending a draft";
        let k = BayKeys::new(bay);
        let cid = &change.conversation.id;
        let mid = change.message.id.clone();
        let mut keys = message_change_keys(&k, cid).to_vec();
        keys.extend([
            k.conversation_state(cid),
            k.draft_text(cid, mid.as_str()),
            k.drafts(),
            k.draft_info(),
        ]);
        // Both outcomes of the round cap, rendered here: the script picks
        // one, so it never edits JSON.
        let render = |suppressed: bool| -> Result<(String, String), StoreError> {
            let mut message = change.message.clone();
            let mut logged = change.change.clone();
            message.routing.suppressed = suppressed;
            if let Change::Completed { message: m } = &mut logged {
                m.routing.suppressed = suppressed;
            }
            let body = to_text(doing, &to_value(doing, &message)?)?;
            let event = to_text(
                doing,
                &to_value(
                    doing,
                    &LogEvent::Change {
                        conversation: change.conversation.clone(),
                        change: logged,
                    },
                )?,
            )?;
            Ok((body, event))
        };
        let given = change.message.routing.suppressed;
        // Without a round step the given flag stands; with one, the
        // script decides and picks the matching rendering.
        let (body, event) = render(given && round.is_none())?;
        let (body_yes, event_yes) = match round {
            Some(_) => render(true)?,
            None => (String::new(), String::new()),
        };
        let kind = match round.map(|r| r.sender) {
            Some(ParticipantKind::User) => "user",
            Some(ParticipantKind::Agent) => "agent",
            None => "",
        };
        let cap = round
            .and_then(|r| r.cap)
            .map(|c| c.to_string())
            .unwrap_or_default();
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let reply = self
            .invoke_status(
                doing,
                &scripts::CLOSE_DRAFT,
                &key_refs,
                &[
                    cid.as_str(),
                    mid.as_str(),
                    &change.revision.to_string(),
                    &change.message.version.to_string(),
                    &body,
                    &event,
                    &epoch_candidate(),
                    &self.window_ms(),
                    &self.max_entries(),
                    kind,
                    &cap,
                    &body_yes,
                    &event_yes,
                    if given { "true" } else { "false" },
                ],
            )
            .await?;
        changed(doing, &keys[4], &keys[5], &reply)
    }

    async fn open_drafts(&self, bay: &BayId) -> Result<Vec<OpenDraft>, StoreError> {
        let doing = "listing open drafts";
        let k = BayKeys::new(bay);
        let (drafts, info) = (k.drafts(), k.draft_info());
        let scored: Vec<(String, i64)> = self
            .query(
                doing,
                &drafts,
                cmd("ZRANGE").arg(&drafts).arg(0).arg(-1).arg("WITHSCORES"),
            )
            .await?;
        if scored.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<&str> = scored.iter().map(|(m, _)| m.as_str()).collect();
        let infos: Vec<Option<String>> = self
            .query(doing, &info, cmd("HMGET").arg(&info).arg(&ids))
            .await?;
        Ok(scored
            .iter()
            .zip(infos)
            .filter_map(|((mid, ms), info)| {
                let info = info?;
                let (cid, author) = info.split_once(' ')?;
                Some(OpenDraft {
                    conversation: ConversationId(cid.to_owned()),
                    message: MessageId(mid.clone()),
                    author: ParticipantId(author.to_owned()),
                    last_activity: DateTime::<Utc>::from_timestamp_millis(*ms)?,
                })
            })
            .collect())
    }

    async fn draft_bays(&self) -> Result<Vec<BayId>, StoreError> {
        let doing = "listing Bays with drafts";
        let key = keys::draft_bays();
        let raw: Vec<String> = self.query(doing, &key, cmd("SMEMBERS").arg(&key)).await?;
        Ok(raw.into_iter().map(BayId).collect())
    }

    async fn prune_draft_bay(&self, bay: &BayId) -> Result<(), StoreError> {
        let doing = "pruning the draft index";
        let drafts = BayKeys::new(bay).drafts();
        let open: i64 = self
            .query(doing, &drafts, cmd("ZCARD").arg(&drafts))
            .await?;
        if open == 0 {
            // A draft opened between the two calls re-adds the Bay itself.
            let key = keys::draft_bays();
            let _: i64 = self
                .query(doing, &key, cmd("SREM").arg(&key).arg(bay.as_str()))
                .await?;
        }
        Ok(())
    }
}
