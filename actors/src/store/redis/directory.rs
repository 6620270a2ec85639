//! Bays, participants and tokens: the Redis engine's [`DirectoryStore`].

use super::*;
use crate::store::DirectoryStore;

#[async_trait]
impl DirectoryStore for RedisStore {
    /// Pings every shared connection in turn (round-robin): `/readyz` then
    /// also reconnects the ones a Redis restart broke, before a write would
    /// find them broken (writes are not retried).
    async fn ping(&self) -> Result<(), StoreError> {
        for _ in 0..self.shared.len() {
            let _: String = self.query("pinging Redis", "PING", &cmd("PING")).await?;
        }
        Ok(())
    }

    async fn create_bay(&self, bay: Bay) -> Result<Created<Bay>, StoreError> {
        let doing = "creating a bay";
        let key = BayKeys::new(&bay.id).bay();
        let json = encode(doing, &key, &bay)?;
        let reply: Value = self
            .query(doing, &key, cmd("SET").arg(&key).arg(json).arg("NX"))
            .await?;
        Ok(match reply {
            Value::Nil => Created::AlreadyExists,
            _ => Created::Created(bay),
        })
    }

    async fn bay(&self, bay: &BayId) -> Result<Option<Bay>, StoreError> {
        let doing = "reading a bay";
        let key = BayKeys::new(bay).bay();
        let raw: Option<Vec<u8>> = self.query(doing, &key, cmd("GET").arg(&key)).await?;
        raw.map(|r| decode(doing, &key, &r)).transpose()
    }

    async fn create_participant(
        &self,
        bay: &BayId,
        participant: Participant,
        token: TokenHash,
    ) -> Result<Created<Participant>, StoreError> {
        let doing = "creating a participant";
        let k = BayKeys::new(bay);
        let tkey = keys::token(&token);
        let owner = encode(
            doing,
            &tkey,
            &TokenOwner {
                bay: bay.clone(),
                participant: participant.id.clone(),
            },
        )?;
        // 1. Claim the token's index entry (unless a live participant holds it).
        let mut claimed = false;
        for _ in 0..CAS_ATTEMPTS {
            let current: Option<String> = self.query(doing, &tkey, cmd("GET").arg(&tkey)).await?;
            let expected = match current {
                None => String::new(),
                Some(raw) => {
                    let holder: TokenOwner = decode(doing, &tkey, raw.as_bytes())?;
                    if self.token_is_current(doing, &holder, &token).await? {
                        return Ok(Created::AlreadyExists);
                    }
                    raw
                }
            };
            let swapped: i64 = self
                .invoke(doing, &scripts::TOKEN_CLAIM, &[&tkey], &[&expected, &owner])
                .await?;
            if swapped == 1 {
                claimed = true;
                break;
            }
        }
        if !claimed {
            return Err(unavailable(doing, &tkey, "token index entry kept changing"));
        }
        // 2. Create the participant with its token, in the Bay's slot.
        let (bay_key, participants, ptokens) = (k.bay(), k.participants(), k.participant_tokens());
        let json = encode(doing, &participants, &participant)?;
        let reply = self
            .invoke_status(
                doing,
                &scripts::CREATE_PARTICIPANT,
                &[&bay_key, &participants, &ptokens],
                &[participant.id.as_str(), &json, &token.0],
            )
            .await?;
        match status(doing, &participants, &reply)? {
            ScriptStatus::Ok => Ok(Created::Created(participant)),
            ScriptStatus::NoBay | ScriptStatus::Exists => {
                // Give the claim back, unless the existing participant is
                // this very one with this very token (a concurrent create
                // of the same record, e.g. two nodes bootstrapping at once).
                let holder = TokenOwner {
                    bay: bay.clone(),
                    participant: participant.id.clone(),
                };
                if !self.token_is_current(doing, &holder, &token).await? {
                    self.release_token(doing, &token, &owner).await;
                }
                Ok(Created::AlreadyExists)
            }
            other => Err(corrupt(
                doing,
                &participants,
                format!("script said {other:?}"),
            )),
        }
    }

    async fn participant(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
    ) -> Result<Option<Participant>, StoreError> {
        self.hash_record(
            "reading a participant",
            &BayKeys::new(bay).participants(),
            participant.as_str(),
        )
        .await
    }

    async fn participants(&self, bay: &BayId) -> Result<Vec<Participant>, StoreError> {
        let mut out: Vec<Participant> = self
            .hash_records("listing participants", &BayKeys::new(bay).participants())
            .await?;
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    async fn participants_in(
        &self,
        bay: &BayId,
        ids: &[ParticipantId],
    ) -> Result<Vec<Participant>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let doing = "loading a roster's participants";
        let key = BayKeys::new(bay).participants();
        let mut c = cmd("HMGET");
        c.arg(&key);
        for id in ids {
            c.arg(id.as_str());
        }
        let raw: Vec<Option<Vec<u8>>> = self.query(doing, &key, &c).await?;
        raw.iter()
            .flatten()
            .map(|r| decode::<Participant>(doing, &key, r))
            .collect()
    }

    async fn set_token(
        &self,
        bay: &BayId,
        participant: &ParticipantId,
        token: Option<TokenHash>,
    ) -> Result<Updated<()>, StoreError> {
        let doing = "replacing a token";
        let k = BayKeys::new(bay);
        let (participants, ptokens, log, epoch, meta, rosters) = (
            k.participants(),
            k.participant_tokens(),
            k.log(),
            k.epoch(),
            k.log_meta(),
            k.rosters(),
        );
        let owner = encode(
            doing,
            &participants,
            &TokenOwner {
                bay: bay.clone(),
                participant: participant.clone(),
            },
        )?;
        // 1. Point the new token at its owner. It authenticates only once
        //    step 2 made it the participant's current token.
        if let Some(new) = &token {
            let tkey = keys::token(new);
            let _: Value = self
                .query(doing, &tkey, cmd("SET").arg(&tkey).arg(&owner))
                .await?;
        }
        // 2. Swap the participant's token and log the revocation, atomically.
        //    From here on the old token no longer authenticates.
        let holes = Holes::new();
        let mut revoked = to_value(
            doing,
            &LogEvent::CredentialRevoked {
                participant: participant.clone(),
                token: TokenId(String::new()),
            },
        )?;
        punch(doing, &mut revoked, &["token"], holes.hole(0))?;
        let revoked = holes.split(doing, &to_text(doing, &revoked)?, 1)?;
        let new_hash = token.as_ref().map(|t| t.0.as_str()).unwrap_or("");
        let reply = self
            .invoke_status(
                doing,
                &scripts::SET_TOKEN,
                &[&participants, &ptokens, &log, &epoch, &meta, &rosters],
                &[
                    participant.as_str(),
                    new_hash,
                    &epoch_candidate(),
                    &self.window_ms(),
                    &self.max_entries(),
                    &revoked[0],
                    &revoked[1],
                ],
            )
            .await?;
        match status(doing, &participants, &reply)? {
            ScriptStatus::Ok => {}
            ScriptStatus::Missing => {
                if let Some(new) = &token {
                    self.release_token(doing, new, &owner).await;
                }
                return Ok(Updated::NotFound);
            }
            other => {
                return Err(corrupt(
                    doing,
                    &participants,
                    format!("script said {other:?}"),
                ))
            }
        }
        // 3. Drop the old token's index entry (garbage collection only).
        let old = reply
            .get(1)
            .map(|v| text(doing, &ptokens, v))
            .transpose()?
            .unwrap_or("");
        if !old.is_empty() && Some(old) != token.as_ref().map(|t| t.0.as_str()) {
            self.release_token(doing, &TokenHash(old.to_owned()), &owner)
                .await;
        }
        Ok(Updated::Updated(()))
    }

    async fn authenticate(&self, token: &TokenHash) -> Result<Option<Principal>, StoreError> {
        let doing = "authenticating a token";
        let tkey = keys::token(token);
        let raw: Option<Vec<u8>> = self.query(doing, &tkey, cmd("GET").arg(&tkey)).await?;
        let Some(raw) = raw else {
            return Ok(None);
        };
        let owner: TokenOwner = decode(doing, &tkey, &raw)?;
        let k = BayKeys::new(&owner.bay);
        let (ptokens, participants) = (k.participant_tokens(), k.participants());
        let found: Option<Vec<u8>> = self
            .invoke(
                doing,
                &scripts::AUTHENTICATE,
                &[&ptokens, &participants],
                &[owner.participant.as_str(), &token.0],
            )
            .await?;
        let Some(found) = found else {
            return Ok(None);
        };
        Ok(Some(Principal {
            bay: owner.bay,
            participant: decode(doing, &participants, &found)?,
            token: token.id(),
        }))
    }
}
