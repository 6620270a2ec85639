//! Conversations: rosters, titles, policies: the Redis engine's [`ConversationStore`].

use super::*;
use crate::store::ConversationStore;

#[async_trait]
impl ConversationStore for RedisStore {
    async fn create_conversation(
        &self,
        bay: &BayId,
        conversation: Conversation,
    ) -> Result<Created<Conversation>, StoreError> {
        let doing = "creating a conversation";
        let k = BayKeys::new(bay);
        let (bay_key, convs, revisions, log, epoch, meta, rosters) = (
            k.bay(),
            k.conversations(),
            k.revisions(),
            k.log(),
            k.epoch(),
            k.log_meta(),
            k.rosters(),
        );
        let json = encode(doing, &convs, &conversation)?;
        let event = encode(doing, &log, &LogEvent::roster(&conversation))?;
        let change = Self::roster_change_json(doing, &rosters, &conversation, Vec::new())?;
        let reply = self
            .invoke_status(
                doing,
                &scripts::CREATE_CONVERSATION,
                &[&bay_key, &convs, &revisions, &log, &epoch, &meta, &rosters],
                &[
                    conversation.id.as_str(),
                    &json,
                    &event,
                    &epoch_candidate(),
                    &self.window_ms(),
                    &self.max_entries(),
                    &change,
                    &new_revision().to_string(),
                ],
            )
            .await?;
        match status(doing, &convs, &reply)? {
            ScriptStatus::Ok => Ok(Created::Created(conversation)),
            ScriptStatus::NoBay | ScriptStatus::Exists => Ok(Created::AlreadyExists),
            other => Err(corrupt(doing, &convs, format!("script said {other:?}"))),
        }
    }

    async fn conversation(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
    ) -> Result<Option<Conversation>, StoreError> {
        self.hash_record(
            "reading a conversation",
            &BayKeys::new(bay).conversations(),
            conversation.as_str(),
        )
        .await
    }

    async fn conversations(&self, bay: &BayId) -> Result<Vec<Conversation>, StoreError> {
        let mut out: Vec<Conversation> = self
            .hash_records("listing conversations", &BayKeys::new(bay).conversations())
            .await?;
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    async fn conversation_revisioned(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
    ) -> Result<Option<Revisioned<Conversation>>, StoreError> {
        let doing = "reading a conversation for a write";
        let k = BayKeys::new(bay);
        let (convs, revisions) = (k.conversations(), k.revisions());
        let reply: Value = self
            .invoke(
                doing,
                &scripts::CONVERSATION_REVISIONED,
                &[&convs, &revisions],
                &[conversation.as_str()],
            )
            .await?;
        match array(doing, &convs, &reply)? {
            [] => Ok(None),
            [json, revision] => Ok(Some(Revisioned {
                value: decode(doing, &convs, bytes(doing, &convs, json)?)?,
                revision: text(doing, &revisions, revision)?
                    .parse()
                    .map_err(|e| corrupt(doing, &revisions, e))?,
            })),
            _ => Err(corrupt(doing, &convs, "malformed conversation reply")),
        }
    }

    /// Compare-and-set: reads the conversation, applies `change` in Rust,
    /// and writes it back with its `Roster` entry, roster change and
    /// revision bump unless someone changed it meanwhile (then retries).
    async fn change_conversation(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        change: ConversationChange,
    ) -> Result<Updated<Conversation>, StoreError> {
        let doing = "changing a conversation";
        let k = BayKeys::new(bay);
        let (convs, revisions, log, epoch, meta, rosters) = (
            k.conversations(),
            k.revisions(),
            k.log(),
            k.epoch(),
            k.log_meta(),
            k.rosters(),
        );
        for _ in 0..CAS_ATTEMPTS {
            let raw: Option<String> = self
                .query(
                    doing,
                    &convs,
                    cmd("HGET").arg(&convs).arg(conversation.as_str()),
                )
                .await?;
            let Some(raw) = raw else {
                return Ok(Updated::NotFound);
            };
            let mut c: Conversation = decode(doing, &convs, raw.as_bytes())?;
            let before = c.member_ids();
            if !change.apply(&mut c) {
                return Ok(Updated::NotFound);
            }
            let new = encode(doing, &convs, &c)?;
            let event = encode(doing, &log, &LogEvent::roster(&c))?;
            let roster_change = Self::roster_change_json(doing, &rosters, &c, before)?;
            let reply = self
                .invoke_status(
                    doing,
                    &scripts::CHANGE_CONVERSATION,
                    &[&convs, &revisions, &log, &epoch, &meta, &rosters],
                    &[
                        conversation.as_str(),
                        &raw,
                        &new,
                        &event,
                        &epoch_candidate(),
                        &self.window_ms(),
                        &self.max_entries(),
                        &roster_change,
                        &new_revision().to_string(),
                    ],
                )
                .await?;
            match status(doing, &convs, &reply)? {
                ScriptStatus::Ok => return Ok(Updated::Updated(c)),
                ScriptStatus::Missing => return Ok(Updated::NotFound),
                ScriptStatus::Conflict => continue,
                other => return Err(corrupt(doing, &convs, format!("script said {other:?}"))),
            }
        }
        Err(unavailable(
            doing,
            &convs,
            "the conversation kept changing under concurrent updates",
        ))
    }
}
