//! Attachments: the memory engine's [`FileStore`]. Every operation runs
//! under the store's one lock, so claims and links are atomic as a whole.

use super::{now_ms, MemoryStore};
use crate::store::StoreError;
use crate::store::{Claim, Created, FileEntry, FileLink, FilePage, FileStore, StoredFile};
use async_trait::async_trait;
use std::collections::HashMap;
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId};

/// The area's state, inside the store's one lock.
#[derive(Default)]
pub(super) struct FileState {
    /// (Bay, attachment id) → the file and its state.
    files: HashMap<(BayId, String), FileEntry>,
    /// (Bay, conversation) → the last library `seq` handed out.
    seqs: HashMap<(BayId, ConversationId), u64>,
}

impl FileState {
    /// Whether `entry` may be claimed by `uploader` with `token` at `now`.
    fn claimable(entry: &FileEntry, uploader: &ParticipantId, token: &str, now: u64) -> bool {
        if &entry.file.uploader != uploader {
            return false;
        }
        match &entry.link {
            FileLink::Unlinked => true,
            FileLink::Claimed { token: t, until_ms } => t == token || *until_ms <= now,
            FileLink::Sent { token: t, .. } => t == token,
            FileLink::Gone => false,
        }
    }
}

#[async_trait]
impl FileStore for MemoryStore {
    async fn put_file(&self, file: StoredFile) -> Result<Created<()>, StoreError> {
        let mut st = self.state.lock();
        let key = (file.bay.clone(), file.id.clone());
        if st.files.files.contains_key(&key) {
            return Ok(Created::AlreadyExists);
        }
        st.files.files.insert(
            key,
            FileEntry {
                file,
                link: FileLink::Unlinked,
            },
        );
        Ok(Created::Created(()))
    }

    async fn file(&self, bay: &BayId, id: &str) -> Result<Option<FileEntry>, StoreError> {
        let st = self.state.lock();
        Ok(st.files.files.get(&(bay.clone(), id.to_owned())).cloned())
    }

    async fn claim_files(
        &self,
        bay: &BayId,
        uploader: &ParticipantId,
        ids: &[String],
        token: &str,
        until_ms: u64,
    ) -> Result<Claim, StoreError> {
        let now = now_ms();
        let mut st = self.state.lock();
        let mut seen = std::collections::HashSet::new();
        for id in ids {
            let ok = seen.insert(id)
                && st
                    .files
                    .files
                    .get(&(bay.clone(), id.clone()))
                    .is_some_and(|e| FileState::claimable(e, uploader, token, now));
            if !ok {
                return Ok(Claim::Conflict);
            }
        }
        let mut claimed = Vec::with_capacity(ids.len());
        for id in ids {
            let entry = st
                .files
                .files
                .get_mut(&(bay.clone(), id.clone()))
                .expect("checked above under the same lock");
            if !matches!(entry.link, FileLink::Sent { .. }) {
                entry.link = FileLink::Claimed {
                    token: token.to_owned(),
                    until_ms,
                };
            }
            claimed.push(entry.file.clone());
        }
        Ok(Claim::Claimed(claimed))
    }

    async fn link_files(
        &self,
        bay: &BayId,
        ids: &[String],
        token: &str,
        conversation: &ConversationId,
        message: &MessageId,
    ) -> Result<usize, StoreError> {
        let now = now_ms();
        let mut st = self.state.lock();
        let st = &mut *st;
        let seq = st
            .files
            .seqs
            .entry((bay.clone(), conversation.clone()))
            .or_default();
        let mut linked = 0;
        for id in ids {
            let Some(entry) = st.files.files.get_mut(&(bay.clone(), id.clone())) else {
                continue;
            };
            if !matches!(&entry.link, FileLink::Claimed { token: t, .. } if t == token) {
                continue;
            }
            *seq += 1;
            entry.link = FileLink::Sent {
                conversation: conversation.clone(),
                message: message.clone(),
                seq: *seq,
                sent_at_ms: now,
                token: token.to_owned(),
            };
            linked += 1;
        }
        Ok(linked)
    }

    async fn release_files(
        &self,
        bay: &BayId,
        ids: &[String],
        token: &str,
    ) -> Result<(), StoreError> {
        let mut st = self.state.lock();
        for id in ids {
            if let Some(entry) = st.files.files.get_mut(&(bay.clone(), id.clone())) {
                if matches!(&entry.link, FileLink::Claimed { token: t, .. } if t == token) {
                    entry.link = FileLink::Unlinked;
                }
            }
        }
        Ok(())
    }

    async fn drop_message_files(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        message: &MessageId,
    ) -> Result<Vec<StoredFile>, StoreError> {
        let mut st = self.state.lock();
        let mut dropped = Vec::new();
        for ((b, _), entry) in st.files.files.iter_mut() {
            let carried = b == bay
                && matches!(&entry.link, FileLink::Sent { conversation: c, message: m, .. }
                    if c == conversation && m == message);
            if carried {
                entry.link = FileLink::Gone;
                dropped.push(entry.file.clone());
            }
        }
        Ok(dropped)
    }

    async fn conversation_files(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        before: Option<u64>,
        limit: usize,
    ) -> Result<FilePage, StoreError> {
        let st = self.state.lock();
        let mut all: Vec<(FileEntry, u64)> = st
            .files
            .files
            .iter()
            .filter(|((b, _), _)| b == bay)
            .filter_map(|(_, e)| match &e.link {
                FileLink::Sent {
                    conversation: c,
                    seq,
                    ..
                } if c == conversation => Some((e.clone(), *seq)),
                _ => None,
            })
            .collect();
        let total_files = all.len() as u64;
        let total_bytes = all.iter().map(|(e, _)| e.file.size).sum();
        all.sort_by_key(|(_, seq)| std::cmp::Reverse(*seq));
        let files = all
            .into_iter()
            .filter(|(_, seq)| before.is_none_or(|b| *seq < b))
            .take(limit)
            .map(|(e, _)| e)
            .collect();
        Ok(FilePage {
            files,
            total_files,
            total_bytes,
        })
    }

    async fn expired_uploads(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> Result<Vec<StoredFile>, StoreError> {
        let st = self.state.lock();
        Ok(st
            .files
            .files
            .values()
            .filter(|e| {
                e.file.expires_at_ms <= now_ms
                    && matches!(e.link, FileLink::Unlinked | FileLink::Claimed { .. })
            })
            .take(limit)
            .map(|e| e.file.clone())
            .collect())
    }

    async fn delete_upload(&self, bay: &BayId, id: &str, now_ms: u64) -> Result<bool, StoreError> {
        let mut st = self.state.lock();
        let key = (bay.clone(), id.to_owned());
        let deletable = st.files.files.get(&key).is_some_and(|e| match &e.link {
            FileLink::Unlinked => true,
            FileLink::Claimed { until_ms, .. } => *until_ms <= now_ms,
            _ => false,
        });
        if deletable {
            st.files.files.remove(&key);
        }
        Ok(deletable)
    }
}
