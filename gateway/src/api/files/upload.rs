//! `POST /attachments`: one file, multipart field `file`, streamed to the
//! blob storage (protocol §10, step 1 of sending a file).
//!
//! The first [`SNIFF_BYTES`] decide the type before anything is stored;
//! the rest goes to storage chunk by chunk, counted against the Bay's cap,
//! so neither a large file nor a lying `Content-Length` is ever held whole.

use crate::auth::Caller;
use crate::error::ApiError;
use crate::files::sniff::{sniff, SNIFF_BYTES};
use crate::files::storage::BlobWriter;
use crate::files::Files;
use crate::state::AppState;
use actix_multipart::{Field, Multipart};
use actix_web::{post, web, HttpMessage, HttpRequest, HttpResponse};
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use serde::Serialize;
use switchboard_actors::store::{now_ms, Created, StoredFile, ATTACHMENT_ID_PREFIX};
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use utoipa::ToSchema;

/// Longest filename kept, in characters; a longer one is cut.
const MAX_NAME_CHARS: usize = 255;

/// The multipart body of `POST /attachments`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct UploadForm {
    /// The file: its bytes decide the type; its filename (the part's
    /// `Content-Disposition` `filename`) is kept sealed and given back
    /// on download.
    #[schema(value_type = String, format = Binary)]
    file: Vec<u8>,
}

/// `201` of `POST /attachments`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Uploaded {
    /// `att_` + a ULID: send it in `attachments[].attachmentId`.
    attachment_id: String,
    /// Size in bytes.
    size: u64,
    /// The type sniffed from the bytes.
    mime_type: String,
}

/// `POST /attachments` (multipart, one field `file`) → 201
/// `{attachmentId, size, mimeType}`.
#[utoipa::path(
    operation_id = "uploadAttachment",
    tag = "agent",
    summary = "Upload one file",
    description = "Upload ONE file as `multipart/form-data`, field `file` (protocol §10); call it once per file, then send the ids with a message. The type is sniffed from the bytes, never taken from the part's `Content-Type` or the name: jpg, png, gif, webp, pdf, doc, docx, xlsx, pptx, txt, csv or zip (text is `text/csv` when the name ends in `.csv`). The size is capped per Bay (`files.max_bytes`, `files.bay_max_bytes`; 25 MB at most). An upload never attached to a message is deleted after `files.unlinked_ttl` (24 h by default).",
    request_body(content = UploadForm, content_type = "multipart/form-data"),
    responses(
        (status = 201, description = "Stored", body = Uploaded),
        (status = 400, description = "INVALID_REQUEST: not multipart, no `file` field, or more than one file", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 413, description = "FILE_TOO_LARGE: above the Bay's cap (25 MB at most)", body = ErrorBody),
        (status = 415, description = "UNSUPPORTED_FILE_TYPE: the bytes are not an allowed type; UNSUPPORTED_MEDIA_TYPE: the body is not `multipart/form-data`", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED: the agent request budget is spent", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 500, description = "INTERNAL", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE: the store or the file storage cannot serve now", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[post("/attachments")]
pub(super) async fn upload_attachment(
    state: web::Data<AppState>,
    caller: Caller,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    state.limits.check_agent(&caller.principal).await?;
    let multipart = matches!(
        req.mime_type(),
        Ok(Some(m)) if m.type_() == actix_web::mime::MULTIPART && m.subtype() == actix_web::mime::FORM_DATA
    );
    if !multipart {
        return Err(ApiError::new(
            ErrorCode::UnsupportedMediaType,
            "an upload must be sent as multipart/form-data with a `file` field",
        ));
    }
    let bay = &caller.principal.bay;
    let cap = state.files.settings().cap_for(bay.as_str());
    let declared = req
        .headers()
        .get(actix_web::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    // Multipart framing adds a few hundred bytes; a body far beyond the
    // cap is refused before a byte of it is read.
    if declared.is_some_and(|n| n > cap + 64 * 1024) {
        return Err(too_large(cap));
    }
    let mut form = Multipart::new(req.headers(), payload);
    let mut stored: Option<Uploaded> = None;
    while let Some(field) = form.next().await {
        let field = field.map_err(|e| invalid(&format!("malformed multipart body: {e}")))?;
        if field.name() != Some("file") {
            drain(field).await?;
            continue;
        }
        if stored.is_some() {
            return Err(invalid("send one file per upload (one `file` field)"));
        }
        stored = Some(store_field(&state, &caller, field, cap).await?);
    }
    let uploaded = stored.ok_or_else(|| invalid("the multipart body has no `file` field"))?;
    Ok(HttpResponse::Created().json(uploaded))
}

/// Reads one `file` part: sniffs it, streams it to storage and records it.
async fn store_field(
    state: &AppState,
    caller: &Caller,
    mut field: Field,
    cap: u64,
) -> Result<Uploaded, ApiError> {
    let name = clean_name(
        field
            .content_disposition()
            .and_then(|cd| cd.get_filename())
            .unwrap_or(""),
    );
    let mut head = BytesMut::new();
    // Whether the whole file fit in the sniff window.
    let mut complete = false;
    while head.len() < SNIFF_BYTES {
        match field.next().await {
            Some(chunk) => head.extend_from_slice(&chunk.map_err(read_error)?),
            None => {
                complete = true;
                break;
            }
        }
    }
    if head.len() as u64 > cap {
        return Err(too_large(cap));
    }
    if head.is_empty() {
        // Nothing to sniff or show: an empty upload is nearly always a
        // client's failed read, so say so rather than store it.
        return Err(invalid("the file is empty (0 bytes)"));
    }
    let mime = sniff(&head, &name, complete).ok_or_else(|| {
        ApiError::new(
            ErrorCode::UnsupportedFileType,
            "this file type is not allowed: jpg, jpeg, png, gif, webp, pdf, doc, docx, xlsx, pptx, txt, csv or zip",
        )
    })?;
    let bay = &caller.principal.bay;
    let id = format!(
        "{ATTACHMENT_ID_PREFIX}{}",
        ulid::Ulid::new().to_string().to_ascii_lowercase()
    );
    let key = Files::key(bay, &id);
    let mut writer = state.files.blobs().writer(&key);
    let rest = (!complete).then_some(&mut field);
    let size = match copy(&mut *writer, head.freeze(), rest, cap).await {
        Ok(size) => size,
        Err(e) => {
            writer.abort().await;
            return Err(e);
        }
    };
    writer.finish().await.map_err(storage_error)?;
    let now = now_ms();
    let ttl = state.files.settings().unlinked_ttl.as_millis() as u64;
    let file = StoredFile {
        id: id.clone(),
        bay: bay.clone(),
        uploader: caller.principal.participant.id.clone(),
        sealed_name: state.files.seal_name(&name),
        mime: mime.to_owned(),
        size,
        created_at_ms: now,
        expires_at_ms: now + ttl,
    };
    match state.store.put_file(file).await {
        Ok(Created::Created(())) => Ok(Uploaded {
            attachment_id: id,
            size,
            mime_type: mime.to_owned(),
        }),
        other => {
            // Nothing refers to the bytes: take them away again.
            let _ = state.files.blobs().delete(&key).await;
            match other {
                Err(e) => Err(e.into()),
                _ => Err(ApiError::new(
                    ErrorCode::Internal,
                    "attachment id collision",
                )),
            }
        }
    }
}

/// Writes `head`, then the rest of `field` (when the part did not end
/// within the head: a finished part must not be polled again), to
/// `writer`, counting against `cap`; answers the size.
async fn copy(
    writer: &mut dyn BlobWriter,
    head: Bytes,
    field: Option<&mut Field>,
    cap: u64,
) -> Result<u64, ApiError> {
    let mut size = head.len() as u64;
    writer.write(head).await.map_err(storage_error)?;
    let Some(field) = field else {
        return Ok(size);
    };
    while let Some(chunk) = field.next().await {
        let chunk = chunk.map_err(read_error)?;
        size += chunk.len() as u64;
        if size > cap {
            return Err(too_large(cap));
        }
        writer.write(chunk).await.map_err(storage_error)?;
    }
    Ok(size)
}

/// Reads and drops a part that is not `file`.
async fn drain(mut field: Field) -> Result<(), ApiError> {
    while let Some(chunk) = field.next().await {
        chunk.map_err(read_error)?;
    }
    Ok(())
}

/// The last path segment of a sent filename, without control characters,
/// at most [`MAX_NAME_CHARS`]; `file` when nothing is left.
fn clean_name(raw: &str) -> String {
    let base = raw.rsplit(['/', '\\']).next().unwrap_or("");
    let name: String = base
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_NAME_CHARS)
        .collect();
    match name.trim() {
        "" | "." | ".." => "file".to_owned(),
        n => n.to_owned(),
    }
}

fn invalid(why: &str) -> ApiError {
    ApiError::new(ErrorCode::InvalidRequest, why.to_owned())
}

fn too_large(cap: u64) -> ApiError {
    ApiError::new(
        ErrorCode::FileTooLarge,
        format!("the file is larger than the {cap}-byte limit for files here"),
    )
}

fn read_error(e: actix_multipart::MultipartError) -> ApiError {
    invalid(&format!("the upload could not be read: {e}"))
}

fn storage_error(e: crate::files::storage::BlobError) -> ApiError {
    tracing::warn!("file storage: {e}");
    ApiError::new(
        ErrorCode::Unavailable,
        "the file storage cannot take the file now",
    )
    .retry_after(std::time::Duration::from_secs(5))
}

#[cfg(test)]
mod tests {
    use super::clean_name;

    #[test]
    fn names_lose_paths_and_controls() {
        assert_eq!(clean_name("C:\\Users\\me\\spec.pdf"), "spec.pdf");
        assert_eq!(clean_name("../../etc/passwd"), "passwd");
        assert_eq!(clean_name("a\r\nb.txt"), "ab.txt");
        assert_eq!(clean_name(""), "file");
        assert_eq!(clean_name(".."), "file");
        assert_eq!(clean_name(&"x".repeat(300)).len(), 255);
    }
}
