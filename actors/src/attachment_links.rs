//! Signed attachment URLs on every copy of a message (protocol §10).
//!
//! A message stores its files as `metadata.attachments[]` `{attachmentId,
//! type, mimeType, sizeBytes, bay}`, without URLs (`bay`, the file's Bay,
//! is for the signer only and never leaves the server): a URL is a credential that
//! expires (about 1 h), so each copy handed to a reader gets fresh ones.
//! Every agent-facing copy (REST, `/updates`, `/ws`, SSE, webhooks,
//! replays) is rendered through [`crate::model::StoredMessage::wire_metadata`],
//! which calls [`decorate`]; the gateway installs the signer that mints
//! the URLs once at start ([`install`]), since only it holds the key and
//! knows its public address. A process that runs several gateways (tests
//! do) also installs each one's signer on that gateway's own threads
//! ([`install_for_thread`]), which wins over the process-wide one.

use parking_lot::RwLock;
use std::sync::Arc;

/// Mints the download URL of one attachment, valid from now.
pub trait LinkSigner: Send + Sync + 'static {
    /// An absolute, signed, expiring URL of the bytes of attachment
    /// `attachment_id` of Bay `bay`.
    fn url(&self, bay: &str, attachment_id: &str) -> String;
}

/// The key of an item's Bay in stored metadata; removed from every copy.
pub const STORED_BAY: &str = "bay";

static SIGNER: RwLock<Option<Arc<dyn LinkSigner>>> = RwLock::new(None);

thread_local! {
    static THREAD_SIGNER: std::cell::RefCell<Option<Arc<dyn LinkSigner>>> =
        const { std::cell::RefCell::new(None) };
}

/// Installs the process's signer (a later call replaces it).
pub fn install(signer: Arc<dyn LinkSigner>) {
    *SIGNER.write() = Some(signer);
}

/// Installs `signer` for the current thread only; it wins over
/// [`install`]'s on this thread.
pub fn install_for_thread(signer: Arc<dyn LinkSigner>) {
    THREAD_SIGNER.with(|s| *s.borrow_mut() = Some(signer));
}

/// The signer in force on this thread.
fn current() -> Option<Arc<dyn LinkSigner>> {
    THREAD_SIGNER
        .with(|s| s.borrow().clone())
        .or_else(|| SIGNER.read().clone())
}

/// Adds `attachmentUrl` to each item of `metadata.attachments` and the
/// legacy single-file mirror of the first one (`metadata.attachmentId` /
/// `metadata.attachmentUrl`, protocol §10). Metadata without attachments
/// is left as it is; without a signer, URLs are left out.
pub fn decorate(metadata: &mut serde_json::Value) {
    let Some(map) = metadata.as_object_mut() else {
        return;
    };
    let Some(serde_json::Value::Array(items)) = map.get_mut("attachments") else {
        return;
    };
    let signer = current();
    let mut first: Option<(serde_json::Value, Option<String>)> = None;
    for item in items.iter_mut() {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        let Some(id) = item
            .get("attachmentId")
            .and_then(|v| v.as_str())
            .map(str::to_owned)
        else {
            continue;
        };
        let bay = match item.remove(STORED_BAY) {
            Some(serde_json::Value::String(bay)) => bay,
            _ => continue,
        };
        let url = signer.as_ref().map(|s| s.url(&bay, &id));
        if let Some(url) = &url {
            item.insert("attachmentUrl".into(), url.clone().into());
        }
        if first.is_none() {
            first = Some((id.into(), url));
        }
    }
    if let Some((id, url)) = first {
        map.insert("attachmentId".into(), id);
        if let Some(url) = url {
            map.insert("attachmentUrl".into(), url.into());
        }
    }
}
