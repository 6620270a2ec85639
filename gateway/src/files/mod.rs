//! Attachments (protocol §10), the node's side of them: where the bytes
//! live ([`storage`]), what a file is ([`sniff`]), its signed URLs
//! ([`signing`]), and [`Files`], which the routes (`api/files/`) and the
//! send path use. Metadata lives in the store (`FileStore`).

pub mod signing;
pub mod sniff;
pub mod storage;

use crate::webhooks::signing::SecretBox;
use signing::UrlSigner;
use std::sync::Arc;
use storage::{BlobError, BlobStore, ObjectBlobs};
use switchboard_actors::attachment_links::{self, LinkSigner};
use switchboard_actors::store::prelude::*;
use switchboard_actors::store::{now_ms, StoredFile};
use switchboard_config::{FileSettings, Settings};
use switchboard_protocol::ids::{BayId, ConversationId, MessageId};

/// Associated data of a sealed filename: it opens only as a filename.
const NAME_CONTEXT: &[u8] = b"switchboard attachment filename v1";

/// Uploads deleted per sweep round at most.
const SWEEP_BATCH: usize = 100;

/// The node's attachments: bytes, URLs, sealed names. Cheap to clone.
#[derive(Clone)]
pub struct Files {
    inner: Arc<Inner>,
}

struct Inner {
    blobs: Arc<dyn BlobStore>,
    signer: UrlSigner,
    names: SecretBox,
    settings: FileSettings,
    store: Arc<dyn Store>,
}

/// Signs the URLs of every copy of a message (installed process-wide).
struct Links(Arc<Inner>);

impl LinkSigner for Links {
    fn url(&self, bay: &str, attachment_id: &str) -> String {
        self.0.signer.url(bay, attachment_id).0
    }
}

/// The root of the URLs this node mints: `public_url`, else the first
/// listener's address (an unspecified IP as loopback).
pub fn public_base(settings: &Settings, listeners: &[std::net::TcpListener]) -> String {
    if let Some(url) = &settings.public_url {
        return url.clone();
    }
    match listeners.first().and_then(|l| l.local_addr().ok()) {
        Some(mut addr) => {
            if addr.ip().is_unspecified() {
                addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
            }
            format!("http://{addr}")
        }
        None => format!("http://{}", settings.bind),
    }
}

impl Files {
    /// Opens the backend of `settings.files`, and installs this node's
    /// URL signer for every copy of a message. `key` is the deployment's
    /// sealing key (shared with the webhook secrets); `base` the root of
    /// minted URLs.
    ///
    /// # Errors
    ///
    /// [`BlobError::Backend`] when the backend cannot be opened.
    pub fn new(
        settings: &Settings,
        store: Arc<dyn Store>,
        key: &[u8; 32],
        base: &str,
    ) -> Result<Self, BlobError> {
        let blobs: Arc<dyn BlobStore> = Arc::new(ObjectBlobs::from_settings(&settings.files)?);
        Ok(Self::with_blobs(settings, store, key, base, blobs))
    }

    /// As [`Files::new`], over the given blob storage.
    pub fn with_blobs(
        settings: &Settings,
        store: Arc<dyn Store>,
        key: &[u8; 32],
        base: &str,
        blobs: Arc<dyn BlobStore>,
    ) -> Self {
        let inner = Arc::new(Inner {
            blobs,
            signer: UrlSigner::new(key, base, settings.files.url_ttl),
            names: SecretBox::new(key),
            settings: settings.files.clone(),
            store,
        });
        let links: Arc<dyn LinkSigner> = Arc::new(Links(inner.clone()));
        attachment_links::install(links.clone());
        attachment_links::install_for_thread(links);
        Files { inner }
    }

    /// Makes this node's signer the one of the current thread (each HTTP
    /// worker calls it), so gateways sharing a process sign for themselves.
    pub fn sign_on_this_thread(&self) {
        attachment_links::install_for_thread(Arc::new(Links(self.inner.clone())));
    }

    /// The blob storage.
    pub fn blobs(&self) -> &dyn BlobStore {
        &*self.inner.blobs
    }

    /// The URL signer.
    pub fn signer(&self) -> &UrlSigner {
        &self.inner.signer
    }

    /// The `[files]` settings.
    pub fn settings(&self) -> &FileSettings {
        &self.inner.settings
    }

    /// `name`, sealed for storage.
    pub fn seal_name(&self, name: &str) -> String {
        self.inner.names.seal_as(NAME_CONTEXT, name)
    }

    /// The filename sealed in `file`; `None` when it does not open (sealed
    /// under another key).
    pub fn name_of(&self, file: &StoredFile) -> Option<String> {
        self.inner
            .names
            .open_as(NAME_CONTEXT, &file.sealed_name)
            .ok()
    }

    /// The blob key of attachment `id` of `bay`.
    pub fn key(bay: &BayId, id: &str) -> String {
        format!("{bay}/{id}")
    }

    /// After `message` was deleted: its files are gone (protocol §10),
    /// out of the library, and their bytes removed. Failures are logged:
    /// the delete itself already happened.
    pub async fn forget_message(
        &self,
        bay: &BayId,
        conversation: &ConversationId,
        message: &MessageId,
    ) {
        let dropped = match self
            .inner
            .store
            .drop_message_files(bay, conversation, message)
            .await
        {
            Ok(files) => files,
            Err(e) => {
                tracing::warn!("could not drop the files of deleted message {message}: {e}");
                return;
            }
        };
        for file in dropped {
            if let Err(e) = self.blobs().delete(&Self::key(bay, &file.id)).await {
                tracing::warn!("could not delete the bytes of {}: {e}", file.id);
            }
        }
    }

    /// Starts this node's sweep of expired, never-sent uploads (protocol
    /// §10: "deleted after 24h"), every `files.sweep_interval`. Every node
    /// sweeps; the store deletes each upload once.
    pub fn start_sweep(&self) {
        let files = self.clone();
        actix_rt::spawn(async move {
            let mut tick = tokio::time::interval(files.inner.settings.sweep_interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if let Err(e) = files.sweep_once().await {
                    tracing::warn!("upload sweep failed: {e}");
                }
            }
        });
    }

    /// One sweep round: deletes up to [`SWEEP_BATCH`] expired uploads.
    async fn sweep_once(&self) -> Result<(), switchboard_actors::store::StoreError> {
        let store = &self.inner.store;
        let now = now_ms();
        for file in store.expired_uploads(now, SWEEP_BATCH).await? {
            if store.delete_upload(&file.bay, &file.id, now).await? {
                if let Err(e) = self.blobs().delete(&Self::key(&file.bay, &file.id)).await {
                    tracing::warn!("could not delete the bytes of {}: {e}", file.id);
                }
            }
        }
        Ok(())
    }
}
