//! `--bootstrap FILE`: loads Bays, participants (optionally with fixed
//! tokens, for demos) and conversations at start, through the same rules as
//! the admin API. Objects that already exist are left as they are, so a
//! restart against a persistent store is harmless.
//!
//! The node then keeps the file applied ([`keep_seeded`]): every
//! [`RESEED_CHECK`] it looks up the file's Bays, and when one is gone —
//! Bays are never deleted, so only a store that lost its data (`FLUSHALL`,
//! a Redis restarted without persistence) lacks one — it applies the file
//! again, logging it at WARN. Applying is idempotent, so several nodes
//! doing it at once create each object once.
//!
//! File shape (TOML, or JSON with the same structure):
//! ```toml
//! [[bays]]
//! id = "demo"
//! name = "Demo Bay"
//! [[bays.participants]]
//! id = "ana"
//! kind = "user"
//! name = "Ana"
//! token = "bay_u_demo_ana_0000000000000000"   # optional; minted when absent
//! [[bays.conversations]]
//! id = "launch"
//! type = "GROUP"
//! title = "Launch room"
//! members = ["ana"]
//! policy = { agentReplyPolicy = "MENTIONS", maxAgentRounds = 2 }
//! ```

use crate::error::ApiError;
use crate::provision::{self, NewConversation, NewParticipant};
use serde::Deserialize;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use switchboard_actors::store::Store;
use switchboard_actors::token::TokenHash;
use switchboard_protocol::error::ErrorCode;
use switchboard_protocol::ids::BayId;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    bays: Vec<BayEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BayEntry {
    id: String,
    name: String,
    #[serde(default)]
    participants: Vec<NewParticipant>,
    #[serde(default)]
    conversations: Vec<NewConversation>,
}

/// A participant whose token the bootstrap file fixed (printed at start-up
/// so a demo user can copy it; minted tokens are never printed).
#[derive(Debug, Clone)]
pub struct FixedToken {
    /// Id of the participant's Bay.
    pub bay: String,
    /// The participant's id (as given, or minted).
    pub participant: String,
    /// Display name as written in the file.
    pub name: String,
    /// The plaintext bearer token from the file (`bay_u_…` for users,
    /// `bay_…` for agents). Secret outside demos.
    pub token: String,
}

/// Why a bootstrap file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    /// The file could not be read.
    #[error("cannot read bootstrap file {path}: {cause}")]
    Read {
        /// The file, as given on the command line.
        path: String,
        /// The I/O error, as text.
        cause: String,
    },
    /// The file is not valid TOML / JSON of the expected shape (unknown
    /// keys are refused).
    #[error("bootstrap file {path} is invalid: {cause}")]
    Parse {
        /// The file, as given on the command line.
        path: String,
        /// The parser's message, with line and column where it has them.
        cause: String,
    },
    /// An entry was refused: a duplicate id or token in the file, or a rule
    /// of the admin API (id format, lengths, unknown member…).
    #[error("bootstrap file {path}: {what}: {cause}")]
    Apply {
        /// The file, as given on the command line.
        path: String,
        /// Which entry, e.g. `conversation "launch" of bay "demo"`.
        what: String,
        /// Why it was refused, a lowercase phrase.
        cause: String,
    },
}

/// Names an entry of the file in an error: `conversation "launch" of bay
/// "demo"`, or by position when it has no id (`participant #2 of bay "demo"`).
fn label(what: &str, id: Option<&str>, index: usize, bay: &str) -> String {
    match id {
        Some(id) => format!("{what} {id:?} of bay {bay:?}"),
        None => format!("{what} #{} (no id) of bay {bay:?}", index + 1),
    }
}

/// Refuses a file that gives one id (or one fixed token) to two entries.
/// Applied one by one, the second would be taken for an object that already
/// exists and be skipped without a word.
fn check_unique(file: &File) -> Result<(), (String, String)> {
    use std::collections::HashMap;
    let mut bays = HashSet::new();
    let mut tokens: HashMap<&str, String> = HashMap::new();
    for bay in &file.bays {
        if !bays.insert(bay.id.as_str()) {
            return Err((
                format!("bay {:?}", bay.id),
                "the id is used by an earlier bay of the file".into(),
            ));
        }
        let mut participants = HashSet::new();
        for (i, p) in bay.participants.iter().enumerate() {
            let me = label("participant", p.id.as_deref(), i, &bay.id);
            if p.id.is_none() {
                return Err((
                    me,
                    "an id is required, so that loading the file again (a restart against a persistent store) finds the same participant".into(),
                ));
            }
            if let Some(id) = &p.id {
                if !participants.insert(id.as_str()) {
                    return Err((
                        me,
                        "the id is used by an earlier participant of this bay".into(),
                    ));
                }
            }
            if let Some(t) = &p.token {
                if let Some(first) = tokens.insert(t.as_str(), me.clone()) {
                    return Err((me, format!("the token is also given to {first}")));
                }
            }
        }
        let mut conversations = HashSet::new();
        for (i, c) in bay.conversations.iter().enumerate() {
            if c.id.is_none() {
                return Err((
                    label("conversation", None, i, &bay.id),
                    "an id is required, so that loading the file again (a restart against a persistent store) finds the same conversation".into(),
                ));
            }
            if let Some(id) = &c.id {
                if !conversations.insert(id.as_str()) {
                    return Err((
                        label("conversation", Some(id), i, &bay.id),
                        "the id is used by an earlier conversation of this bay".into(),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Reads and checks a bootstrap file without applying it (for
/// `switchboard config check`): it parses, and ids and tokens are unique.
///
/// # Errors
///
/// [`BootstrapError`] naming the file and the problem.
pub fn check_file(path: &Path) -> Result<(), BootstrapError> {
    read(path).map(|_| ())
}

fn read(path: &Path) -> Result<File, BootstrapError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| BootstrapError::Read {
        path: shown.clone(),
        cause: e.to_string(),
    })?;
    let file: File = if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
    {
        serde_json::from_str(&text).map_err(|e| e.to_string())
    } else {
        toml::from_str(&text).map_err(|e| e.to_string())
    }
    .map_err(|cause| BootstrapError::Parse {
        path: shown.clone(),
        cause,
    })?;
    check_unique(&file).map_err(|(what, cause)| BootstrapError::Apply {
        path: shown.clone(),
        what,
        cause,
    })?;
    Ok(file)
}

/// Loads `path` into `store`. Returns the participants with fixed tokens.
///
/// # Errors
///
/// [`BootstrapError`] for an unreadable or invalid file, or for the first
/// entry the admin API's rules refuse; entries applied before it stay.
pub async fn load(store: &dyn Store, path: &Path) -> Result<Vec<FixedToken>, BootstrapError> {
    let shown = path.display().to_string();
    let file = read(path)?;
    let apply = |what: String| {
        let path = shown.clone();
        move |e: ApiError| BootstrapError::Apply {
            path,
            what,
            cause: e.message,
        }
    };
    let exists = |e: &ApiError| e.code == ErrorCode::AlreadyExists;
    let mut fixed = Vec::new();
    for bay in file.bays {
        match provision::create_bay(store, Some(bay.id.clone()), bay.name).await {
            Ok(_) => {}
            Err(e) if exists(&e) => {}
            Err(e) => return Err(apply(format!("bay {:?}", bay.id))(e)),
        }
        let bay_id = BayId(bay.id.clone());
        for (i, p) in bay.participants.into_iter().enumerate() {
            let label = label("participant", p.id.as_deref(), i, &bay.id);
            let token = p.token.clone();
            let name = p.name.clone();
            let id = p.id.clone().unwrap_or_default();
            let created = match provision::create_participant(store, &bay_id, p).await {
                Ok(_) => true,
                Err(e) if exists(&e) => false,
                Err(e) => return Err(apply(label)(e)),
            };
            if let Some(token) = token {
                // On a restart against a persistent store the participant
                // exists already: show its fixed token only while it still
                // authenticates as that participant (it may have been rotated).
                let still_valid = created
                    || store
                        .authenticate(&TokenHash::of(&token))
                        .await
                        .map_err(|e| apply(label.clone())(e.into()))?
                        .is_some_and(|p| p.bay == bay_id && p.participant.id.as_str() == id);
                if still_valid {
                    fixed.push(FixedToken {
                        bay: bay.id.clone(),
                        participant: id,
                        name,
                        token,
                    });
                }
            }
        }
        for (i, c) in bay.conversations.into_iter().enumerate() {
            let label = label("conversation", c.id.as_deref(), i, &bay.id);
            match provision::create_conversation(store, &bay_id, c).await {
                Ok(_) => {}
                Err(e) if exists(&e) => {}
                Err(e) => return Err(apply(label)(e)),
            }
        }
    }
    Ok(fixed)
}

/// How often a node started with `--bootstrap` checks that the file's Bays
/// are still in the store (one read per Bay of the file).
pub const RESEED_CHECK: Duration = Duration::from_secs(2);

/// Keeps `path`, already applied at start, applied: every [`RESEED_CHECK`]
/// looks up each of its Bays, and when one is missing from the store
/// (emptied, or restarted without persistence) applies the file again
/// with [`load`], logging a WARN. A store that cannot be reached is asked
/// again at the next check. Runs on the current tokio runtime until the
/// process ends; a file that no longer reads is logged and retried.
pub fn keep_seeded(store: Arc<dyn Store>, path: PathBuf) {
    let bays: Vec<BayId> = match read(&path) {
        Ok(file) => file.bays.into_iter().map(|b| BayId(b.id)).collect(),
        Err(e) => {
            tracing::warn!(error = %e, "bootstrap file unreadable; it will not be applied again");
            return;
        }
    };
    if bays.is_empty() {
        return;
    }
    tokio::spawn(async move {
        let mut every = tokio::time::interval(RESEED_CHECK);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        every.tick().await;
        loop {
            every.tick().await;
            let Some(gone) = missing_bay(&*store, &bays).await else {
                continue;
            };
            tracing::warn!(
                bay = %gone,
                file = %path.display(),
                "a bootstrapped Bay is missing from the store (emptied, or restarted without persistence): applying the bootstrap file again"
            );
            match load(&*store, &path).await {
                Ok(_) => tracing::warn!(file = %path.display(), "bootstrap file applied again"),
                Err(e) => {
                    tracing::warn!(error = %e, "bootstrap file not applied again; retrying")
                }
            }
        }
    });
}

/// The first of `bays` the store does not have; `None` when it has them
/// all, or cannot say (unreachable: asked again at the next check).
async fn missing_bay<'a>(store: &dyn Store, bays: &'a [BayId]) -> Option<&'a BayId> {
    for bay in bays {
        match store.bay(bay).await {
            Ok(Some(_)) => {}
            Ok(None) => return Some(bay),
            Err(e) => {
                tracing::debug!(error = %e, "cannot check the bootstrapped Bays");
                return None;
            }
        }
    }
    None
}
