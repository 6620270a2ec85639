//! The files area's calls, timed like every other area's (split from
//! the rest only to keep each file short).

use super::{timed, Instrumented};
use crate::store::{Claim, FileEntry, FilePage, FileStore, StoredFile};
use crate::store::{Created, StoreError};
use async_trait::async_trait;
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId};

#[async_trait]
impl FileStore for Instrumented {
    async fn put_file(&self, file: StoredFile) -> Result<Created<()>, StoreError> {
        timed("put_file", self.inner.put_file(file)).await
    }
    async fn file(&self, bay: &BayId, id: &str) -> Result<Option<FileEntry>, StoreError> {
        timed("file", self.inner.file(bay, id)).await
    }
    async fn claim_files(
        &self,
        bay: &BayId,
        uploader: &ParticipantId,
        ids: &[String],
        token: &str,
        until_ms: u64,
    ) -> Result<Claim, StoreError> {
        timed(
            "claim_files",
            self.inner.claim_files(bay, uploader, ids, token, until_ms),
        )
        .await
    }
    async fn link_files(
        &self,
        bay: &BayId,
        ids: &[String],
        token: &str,
        conversation: &ConversationId,
        message: &MessageId,
    ) -> Result<usize, StoreError> {
        timed(
            "link_files",
            self.inner
                .link_files(bay, ids, token, conversation, message),
        )
        .await
    }
    async fn release_files(
        &self,
        bay: &BayId,
        ids: &[String],
        token: &str,
    ) -> Result<(), StoreError> {
        timed("release_files", self.inner.release_files(bay, ids, token)).await
    }
    async fn drop_message_files(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        message: &MessageId,
    ) -> Result<Vec<StoredFile>, StoreError> {
        timed(
            "drop_message_files",
            self.inner.drop_message_files(bay, conversation, message),
        )
        .await
    }
    async fn conversation_files(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        before: Option<u64>,
        limit: usize,
    ) -> Result<FilePage, StoreError> {
        timed(
            "conversation_files",
            self.inner
                .conversation_files(bay, conversation, before, limit),
        )
        .await
    }
    async fn expired_uploads(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> Result<Vec<StoredFile>, StoreError> {
        timed("expired_uploads", self.inner.expired_uploads(now_ms, limit)).await
    }
    async fn delete_upload(&self, bay: &BayId, id: &str, now_ms: u64) -> Result<bool, StoreError> {
        timed("delete_upload", self.inner.delete_upload(bay, id, now_ms)).await
    }
}
