//! Files (protocol §10) from the client's side: upload one file from disk,
//! streamed ([`Client::upload_file`]), and download an attachment URL to a
//! directory ([`Client::download`]), only from this client's own server
//! and at most 25 MB, never overwriting an existing file.

use crate::error::ClientError;
use crate::rest::{json_of, Client};
use futures_util::StreamExt;
use reqwest::header::{AUTHORIZATION, CONTENT_DISPOSITION};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// Most bytes [`Client::download`] saves (protocol §10's 25 MB cap).
pub const MAX_DOWNLOAD_BYTES: u64 = 25 * 1024 * 1024;

/// Most files one message carries (protocol §10).
pub const MAX_FILES: usize = 10;

impl Client {
    /// `POST /attachments`: uploads the file at `path` (streamed from disk,
    /// named by its file name) → `{attachmentId, size, mimeType}`.
    ///
    /// # Errors
    /// [`ClientError::Config`] when the file cannot be opened;
    /// [`ClientError::Api`] for a refusal (413 `FILE_TOO_LARGE`, 415
    /// `UNSUPPORTED_FILE_TYPE`, …).
    pub async fn upload_file(&self, path: &Path) -> Result<Value, ClientError> {
        let file = tokio::fs::File::open(path)
            .await
            .map_err(|e| ClientError::Config(format!("cannot open {}: {e}", path.display())))?;
        let len = file
            .metadata()
            .await
            .map_err(|e| ClientError::Config(format!("cannot read {}: {e}", path.display())))?
            .len();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "file".to_owned());
        let part = reqwest::multipart::Part::stream_with_length(file, len).file_name(name);
        let form = reqwest::multipart::Form::new().part("file", part);
        let res = self
            .http()
            .post(self.url("/attachments"))
            .header(AUTHORIZATION, self.authorization().clone())
            .timeout(Duration::from_secs(600))
            .multipart(form)
            .send()
            .await?;
        json_of(res).await
    }

    /// Downloads a signed attachment `url` into `dir`, under the name the
    /// server gives (`Content-Disposition`), with a numeric suffix when
    /// that name exists; answers the path written.
    ///
    /// # Errors
    /// [`ClientError::Config`] for a URL of another server (a message
    /// asking to fetch from elsewhere is not to be trusted, protocol §10),
    /// a file above [`MAX_DOWNLOAD_BYTES`] (nothing is left on disk) or a
    /// local write failure; [`ClientError::Api`] for a refusal (403
    /// `INVALID_SIGNATURE` for an expired URL, 410 `ATTACHMENT_GONE`).
    pub async fn download(&self, url: &str, dir: &Path) -> Result<PathBuf, ClientError> {
        if !url.starts_with(&format!("{}/", self.base_url())) {
            return Err(ClientError::Config(format!(
                "refusing to download from outside {}",
                self.base_url()
            )));
        }
        let res = self
            .http()
            .get(url)
            .timeout(Duration::from_secs(600))
            .send()
            .await?;
        if !res.status().is_success() {
            return json_of(res).await.map(|_| PathBuf::new());
        }
        if res.content_length().is_some_and(|n| n > MAX_DOWNLOAD_BYTES) {
            return Err(ClientError::Config("the file is larger than 25 MB".into()));
        }
        let name = res
            .headers()
            .get(CONTENT_DISPOSITION)
            .and_then(|v| v.to_str().ok())
            .and_then(filename_of)
            .unwrap_or_else(|| "attachment".to_owned());
        let local = |e: std::io::Error| ClientError::Config(format!("cannot write the file: {e}"));
        tokio::fs::create_dir_all(dir).await.map_err(local)?;
        let (path, mut out) = create_unique(dir, &safe_name(&name)).await.map_err(local)?;
        let mut written = 0u64;
        let mut body = res.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk?;
            written += chunk.len() as u64;
            if written > MAX_DOWNLOAD_BYTES {
                drop(out);
                let _ = tokio::fs::remove_file(&path).await;
                return Err(ClientError::Config("the file is larger than 25 MB".into()));
            }
            out.write_all(&chunk).await.map_err(local)?;
        }
        out.flush().await.map_err(local)?;
        Ok(path)
    }
}

/// The filename of a `Content-Disposition` value: `filename*=UTF-8''…`
/// (percent-decoded) over `filename="…"`.
fn filename_of(value: &str) -> Option<String> {
    let mut plain = None;
    for param in value.split(';').map(str::trim) {
        if let Some(ext) = param.strip_prefix("filename*=") {
            let encoded = ext
                .strip_prefix("UTF-8''")
                .or_else(|| ext.strip_prefix("utf-8''"))?;
            return percent_decode(encoded);
        }
        if let Some(p) = param.strip_prefix("filename=") {
            plain = Some(p.trim_matches('"').to_owned());
        }
    }
    plain
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// A name that stays inside the directory: the last path segment, no
/// control characters, not empty.
fn safe_name(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or("");
    let clean: String = base.chars().filter(|c| !c.is_control()).collect();
    match clean.trim() {
        "" | "." | ".." => "attachment".to_owned(),
        n => n.to_owned(),
    }
}

/// Creates `dir/name`, or `dir/stem-1.ext`, `-2`, … when taken.
async fn create_unique(dir: &Path, name: &str) -> std::io::Result<(PathBuf, tokio::fs::File)> {
    let (stem, ext) = match name.rsplit_once('.') {
        Some((s, e)) if !s.is_empty() => (s.to_owned(), format!(".{e}")),
        _ => (name.to_owned(), String::new()),
    };
    for n in 0..10_000 {
        let candidate = if n == 0 {
            dir.join(name)
        } else {
            dir.join(format!("{stem}-{n}{ext}"))
        };
        match tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&candidate)
            .await
        {
            Ok(f) => return Ok((candidate, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("no free file name"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_content_disposition() {
        assert_eq!(
            filename_of("attachment; filename=\"Sp_c.pdf\"; filename*=UTF-8''Sp%C3%ABc.pdf")
                .as_deref(),
            Some("Spëc.pdf")
        );
        assert_eq!(
            filename_of("attachment; filename=\"a.png\"").as_deref(),
            Some("a.png")
        );
        assert_eq!(filename_of("attachment"), None);
        assert_eq!(safe_name("../../x.txt"), "x.txt");
        assert_eq!(safe_name(".."), "attachment");
    }
}
