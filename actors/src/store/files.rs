//! Attachments (protocol §10): the metadata of every uploaded file, where
//! it was sent, and each conversation's file library. The bytes live
//! outside the store (the gateway's blob storage, keyed by the attachment
//! id); the store keeps what must be shared by every node beside the
//! messages.
//!
//! An upload's life: stored [`FileLink::Unlinked`]; a send *claims* its
//! files (all or none, for a short while, so a failed send frees them),
//! the message is appended, then the claim becomes [`FileLink::Sent`] and
//! the file joins its conversation's library. An upload never sent is
//! swept once its `expires_at_ms` passes (protocol §10: 24 h). Deleting
//! the message makes its files [`FileLink::Gone`]: they leave the library
//! and their bytes are removed.

use super::{Created, StoreError};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId};

/// Prefix of attachment ids: `att_` + a lowercase ULID.
pub const ATTACHMENT_ID_PREFIX: &str = "att_";

/// One uploaded file's metadata, fixed at upload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredFile {
    /// `att_` + a lowercase ULID, minted by the gateway.
    pub id: String,
    /// The uploader's Bay; the file is invisible from any other.
    pub bay: BayId,
    /// Who uploaded it; only they may send it.
    pub uploader: ParticipantId,
    /// The filename as sent, sealed at rest (protocol §10: "encrypted at
    /// rest"); only the download's `Content-Disposition` reveals it.
    pub sealed_name: String,
    /// The MIME type sniffed from the bytes, never the sender's claim.
    pub mime: String,
    /// Size in bytes.
    pub size: u64,
    /// Upload time, Unix ms.
    pub created_at_ms: u64,
    /// When the upload is deleted if it was never sent, Unix ms.
    pub expires_at_ms: u64,
}

/// Where a file stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum FileLink {
    /// Uploaded, not sent: its uploader's alone.
    Unlinked,
    /// Held by a send in progress until `until_ms` (then free again).
    Claimed {
        /// The send's claim token.
        token: String,
        /// End of the claim, Unix ms.
        until_ms: u64,
    },
    /// Sent with `message` in `conversation`; `seq` orders the
    /// conversation's library (from 1, newest highest).
    Sent {
        /// The conversation whose library holds it.
        conversation: ConversationId,
        /// The message that carries it.
        message: MessageId,
        /// Position in the library.
        seq: u64,
        /// When it was sent, Unix ms.
        sent_at_ms: u64,
        /// The token of the send that linked it (a retried idempotent send
        /// presents the same one).
        token: String,
    },
    /// Its message was deleted: the bytes are gone (protocol §10).
    Gone,
}

/// A file and where it stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileEntry {
    /// The upload's metadata.
    pub file: StoredFile,
    /// Its state.
    pub link: FileLink,
}

/// Outcome of [`FileStore::claim_files`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// Every id is claimed for the token; the files in the order asked.
    Claimed(Vec<StoredFile>),
    /// Some id is unknown, of another Bay or uploader, sent, gone or held
    /// by another send: nothing was claimed. Which one is never said
    /// (protocol §10).
    Conflict,
}

/// One page of a conversation's library, newest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilePage {
    /// The files, newest first, each [`FileLink::Sent`] (its `seq` orders
    /// the library).
    pub files: Vec<FileEntry>,
    /// Files in the whole library.
    pub total_files: u64,
    /// Their bytes.
    pub total_bytes: u64,
}

/// Attachment metadata and the file libraries.
///
/// # Errors
///
/// Every method fails with [`StoreError::Unavailable`] when the backing
/// service cannot be reached and [`StoreError::Corrupt`] when a stored
/// record does not decode.
#[async_trait]
pub trait FileStore: Send + Sync + 'static {
    /// Stores a new upload, [`FileLink::Unlinked`]. `AlreadyExists` when its
    /// id is taken in the Bay.
    async fn put_file(&self, file: StoredFile) -> Result<Created<()>, StoreError>;

    /// The file `id` of `bay` and its state; `None` when unknown (or swept).
    async fn file(&self, bay: &BayId, id: &str) -> Result<Option<FileEntry>, StoreError>;

    /// Claims `ids` for a send by `uploader`, all or none, atomically: each
    /// must be a file of `bay` uploaded by `uploader` that is unlinked, or
    /// claimed (or sent) with this same `token` (a retried idempotent
    /// send), or whose claim lapsed. The claim lasts until `until_ms`.
    /// A repeated id is a conflict.
    async fn claim_files(
        &self,
        bay: &BayId,
        uploader: &ParticipantId,
        ids: &[String],
        token: &str,
        until_ms: u64,
    ) -> Result<Claim, StoreError>;

    /// Turns `token`'s claims on `ids` into [`FileLink::Sent`] with
    /// `message`, appending them to `conversation`'s library in order, in
    /// one atomic step. Ids no longer claimed with `token` are skipped;
    /// answers how many were linked.
    async fn link_files(
        &self,
        bay: &BayId,
        ids: &[String],
        token: &str,
        conversation: &ConversationId,
        message: &MessageId,
    ) -> Result<usize, StoreError>;

    /// Frees `token`'s claims on `ids` (the send failed); others untouched.
    async fn release_files(
        &self,
        bay: &BayId,
        ids: &[String],
        token: &str,
    ) -> Result<(), StoreError>;

    /// Marks every file sent with `message` [`FileLink::Gone`] and takes it
    /// out of the library (totals included), atomically; answers them, so
    /// their bytes can be removed. Empty when the message carried none.
    async fn drop_message_files(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        message: &MessageId,
    ) -> Result<Vec<StoredFile>, StoreError>;

    /// Up to `limit` files of `conversation`'s library, newest first,
    /// those with `seq` below `before` when given; with the library's
    /// totals.
    async fn conversation_files(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        before: Option<u64>,
        limit: usize,
    ) -> Result<FilePage, StoreError>;

    /// Up to `limit` uploads of any Bay whose `expires_at_ms` is at or
    /// before `now_ms` and that are not sent: the sweep's candidates.
    async fn expired_uploads(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> Result<Vec<StoredFile>, StoreError>;

    /// Deletes the upload `id` if it is still unsent and its claim (if any)
    /// lapsed by `now_ms`, atomically; `true` when it was deleted (the
    /// caller then removes its bytes).
    async fn delete_upload(&self, bay: &BayId, id: &str, now_ms: u64) -> Result<bool, StoreError>;
}
