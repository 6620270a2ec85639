//! Where attachment bytes live: a small contract ([`BlobStore`]) and its
//! one implementation over the `object_store` crate, which gives both
//! backends of `files.backend`: a directory on local disk (`local`, the
//! default) and S3-compatible object storage (`s3`).
//!
//! Both directions stream. A write goes through `object_store`'s buffered
//! writer: at most [`PART_BYTES`] are held before they go out as one part
//! of a multipart upload (S3's smallest part), with at most
//! [`PARTS_IN_FLIGHT`] parts in flight, so a 25 MB upload never sits
//! whole in memory. A read is the backend's byte stream, range included.

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::stream::{BoxStream, StreamExt};
use object_store::buffered::BufWriter;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use std::ops::Range;
use std::sync::Arc;
use switchboard_config::{FileBackend, FileSettings};
use tokio::io::AsyncWriteExt;

/// Bytes a write holds before they go out as one part (5 MiB, the
/// smallest part S3 accepts).
pub const PART_BYTES: usize = 5 * 1024 * 1024;

/// Parts of one write in flight at once.
pub const PARTS_IN_FLIGHT: usize = 2;

/// Why a blob operation failed.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    /// No blob under that key.
    #[error("no such file")]
    NotFound,
    /// The backend failed (disk, network, credentials, bucket).
    #[error("file storage failed: {0}")]
    Backend(String),
}

impl From<object_store::Error> for BlobError {
    fn from(e: object_store::Error) -> Self {
        match e {
            object_store::Error::NotFound { .. } => BlobError::NotFound,
            other => BlobError::Backend(other.to_string()),
        }
    }
}

/// A blob being read: its whole size, the range served and the bytes.
pub struct Blob {
    /// Size of the whole blob, bytes.
    pub size: u64,
    /// The byte range `body` holds (`0..size` for the whole blob).
    pub range: Range<u64>,
    /// The bytes of `range`, streamed from the backend.
    pub body: BoxStream<'static, Result<Bytes, BlobError>>,
}

/// A blob being written; nothing is visible under its key until
/// [`BlobWriter::finish`].
#[async_trait(?Send)]
pub trait BlobWriter {
    /// Appends `chunk`.
    async fn write(&mut self, chunk: Bytes) -> Result<(), BlobError>;
    /// Completes the blob.
    async fn finish(self: Box<Self>) -> Result<(), BlobError>;
    /// Drops what was written; the key stays empty.
    async fn abort(self: Box<Self>);
}

/// The bytes of attachments, keyed `<bay>/<attachment id>`.
#[async_trait]
pub trait BlobStore: Send + Sync + 'static {
    /// A writer for a new blob under `key`.
    fn writer(&self, key: &str) -> Box<dyn BlobWriter>;
    /// The blob under `key`, or the bytes `range` of it (the caller checks
    /// the range against the stored size first).
    async fn read(&self, key: &str, range: Option<Range<u64>>) -> Result<Blob, BlobError>;
    /// The size of the blob under `key`, bytes.
    async fn size(&self, key: &str) -> Result<u64, BlobError>;
    /// Deletes the blob under `key`; deleting a missing one is not an error.
    async fn delete(&self, key: &str) -> Result<(), BlobError>;
}

/// [`BlobStore`] over any `object_store` backend.
pub struct ObjectBlobs {
    store: Arc<dyn ObjectStore>,
}

impl ObjectBlobs {
    /// The backend `files` names: `files.dir` (created when missing) or
    /// the `files.s3` bucket.
    ///
    /// # Errors
    ///
    /// [`BlobError::Backend`] when the directory cannot be created or the
    /// S3 settings do not build a client.
    pub fn from_settings(files: &FileSettings) -> Result<Self, BlobError> {
        let store: Arc<dyn ObjectStore> = match files.backend {
            FileBackend::Local => {
                std::fs::create_dir_all(&files.dir).map_err(|e| {
                    BlobError::Backend(format!("cannot create {}: {e}", files.dir.display()))
                })?;
                Arc::new(object_store::local::LocalFileSystem::new_with_prefix(
                    &files.dir,
                )?)
            }
            FileBackend::S3 => {
                let s3 = &files.s3;
                let mut builder = object_store::aws::AmazonS3Builder::from_env()
                    .with_bucket_name(&s3.bucket)
                    .with_region(&s3.region);
                if let Some(endpoint) = &s3.endpoint {
                    builder = builder
                        .with_endpoint(endpoint)
                        .with_allow_http(endpoint.starts_with("http://"));
                }
                if let Some(id) = &s3.access_key_id {
                    builder = builder.with_access_key_id(id);
                }
                if let Some(secret) = &s3.secret_access_key {
                    builder = builder.with_secret_access_key(secret);
                }
                Arc::new(builder.build()?)
            }
        };
        Ok(ObjectBlobs { store })
    }
}

/// A write through `object_store`'s buffered multipart writer.
struct ObjectWriter {
    inner: BufWriter,
}

#[async_trait(?Send)]
impl BlobWriter for ObjectWriter {
    async fn write(&mut self, chunk: Bytes) -> Result<(), BlobError> {
        self.inner
            .write_all(&chunk)
            .await
            .map_err(|e| BlobError::Backend(e.to_string()))
    }

    async fn finish(mut self: Box<Self>) -> Result<(), BlobError> {
        self.inner
            .shutdown()
            .await
            .map_err(|e| BlobError::Backend(e.to_string()))
    }

    async fn abort(mut self: Box<Self>) {
        if let Err(e) = self.inner.abort().await {
            tracing::warn!("aborting a partial upload failed: {e}");
        }
    }
}

#[async_trait]
impl BlobStore for ObjectBlobs {
    fn writer(&self, key: &str) -> Box<dyn BlobWriter> {
        let inner = BufWriter::with_capacity(self.store.clone(), Path::from(key), PART_BYTES)
            .with_max_concurrency(PARTS_IN_FLIGHT);
        Box::new(ObjectWriter { inner })
    }

    async fn read(&self, key: &str, range: Option<Range<u64>>) -> Result<Blob, BlobError> {
        let options = GetOptions {
            range: range.map(GetRange::Bounded),
            ..GetOptions::default()
        };
        let got = self
            .store
            .get_opts(&Path::from(key), options)
            .await
            .map_err(BlobError::from)?;
        let size = got.meta.size;
        let range = got.range.clone();
        let body = got
            .into_stream()
            .map(|r| r.map_err(BlobError::from))
            .boxed();
        Ok(Blob { size, range, body })
    }

    async fn size(&self, key: &str) -> Result<u64, BlobError> {
        Ok(self.store.head(&Path::from(key)).await?.size)
    }

    async fn delete(&self, key: &str) -> Result<(), BlobError> {
        match self.store.delete(&Path::from(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
