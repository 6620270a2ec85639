//! `GET /attachments/signed-content`: the bytes of a sent file, for
//! whoever holds a valid signed URL (protocol §10: no token; the signature
//! is the credential and it expires). Streamed, with single byte ranges.

use crate::error::ApiError;
use crate::files::signing::{unix_now, Refused};
use crate::files::storage::BlobError;
use crate::files::Files;
use crate::state::AppState;
use actix_web::http::header::{
    self, ByteRangeSpec, ContentDisposition, DispositionParam, DispositionType, ExtendedValue,
    Header as _, Range,
};
use actix_web::http::StatusCode;
use actix_web::{get, web, HttpRequest, HttpResponse};
use futures_util::StreamExt;
use serde::Deserialize;
use switchboard_actors::store::{FileLink, StoredFile};
use switchboard_protocol::error::{ErrorBody, ErrorCode};
use switchboard_protocol::ids::BayId;
use utoipa::IntoParams;

/// The query of a signed URL; every field is checked by the signature.
#[derive(Deserialize, IntoParams)]
pub(crate) struct Signed {
    /// The file's Bay.
    bay: Option<String>,
    /// The attachment id.
    id: Option<String>,
    /// Expiry, Unix seconds.
    exp: Option<String>,
    /// HMAC-SHA256 of the fields above, hex.
    sig: Option<String>,
}

/// `GET /attachments/signed-content?bay=&id=&exp=&sig=` → the bytes. A
/// `HEAD` is this `GET` without the body (`middleware/head.rs`): checked
/// the same way, and the file is not read.
#[utoipa::path(
    operation_id = "downloadAttachment",
    tag = "agent",
    summary = "Download a file by its signed URL",
    description = "The URL comes from a message's `metadata.attachments[].attachmentUrl` (or `metadata.attachmentUrl`) or from `GET …/attachments/{aid}/link`; it needs no token and expires (about 1 h, `files.url_ttl`). Answers the bytes with `Content-Type` (the sniffed type), `Content-Length` and `Content-Disposition: attachment` carrying the real filename (protocol §10: names are never in metadata). A single `Range: bytes=…` is honoured (206, or 416 when it lies outside the file).",
    params(Signed),
    responses(
        (status = 200, description = "The file's bytes", content_type = "application/octet-stream"),
        (status = 206, description = "The requested range"),
        (status = 403, description = "INVALID_SIGNATURE: altered, forged or expired URL", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: no such file", body = ErrorBody),
        (status = 410, description = "ATTACHMENT_GONE: the message carrying it was deleted", body = ErrorBody),
        (status = 416, description = "RANGE_NOT_SATISFIABLE: the range lies outside the file (`Content-Range: bytes */<size>`)", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE or UNAVAILABLE: the store or the file storage cannot serve now", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(()),
)]
#[get("/api/agent-api/attachments/signed-content")]
pub(super) async fn download_attachment(
    state: web::Data<AppState>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    signed_content(&state, &req).await
}

/// Verifies the signed URL of `req` and serves its file. A query that
/// does not parse (a field given twice, say) is an altered URL: 403 like
/// any other, not the query extractor's 400.
async fn signed_content(state: &AppState, req: &HttpRequest) -> Result<HttpResponse, ApiError> {
    let query = web::Query::<Signed>::from_query(req.query_string()).map_err(|_| {
        ApiError::new(
            ErrorCode::InvalidSignature,
            "a signed url carries bay, id, exp and sig, each once",
        )
    })?;
    let (bay, id) = verified(state, &query)?;
    let Some(entry) = state.store.file(&bay, &id).await? else {
        return Err(ApiError::not_found());
    };
    match entry.link {
        FileLink::Sent { .. } => {}
        FileLink::Gone => {
            return Err(ApiError::new(
                ErrorCode::AttachmentGone,
                "the message carrying this file was deleted, and the file with it",
            ))
        }
        _ => return Err(ApiError::not_found()),
    }
    serve(state, req, &entry.file).await
}

/// The Bay and id of a URL whose signature holds and has not expired.
fn verified(state: &AppState, q: &Signed) -> Result<(BayId, String), ApiError> {
    let refused = |why: &str| ApiError::new(ErrorCode::InvalidSignature, why.to_owned());
    let (Some(bay), Some(id), Some(exp), Some(sig)) = (&q.bay, &q.id, &q.exp, &q.sig) else {
        return Err(refused("a signed url carries bay, id, exp and sig"));
    };
    let exp: u64 = exp
        .parse()
        .map_err(|_| refused("the signature does not match"))?;
    match state.files.signer().verify(bay, id, exp, sig, unix_now()) {
        Ok(()) => Ok((BayId(bay.clone()), id.clone())),
        Err(Refused::BadSignature) => Err(refused("the signature does not match")),
        Err(Refused::Expired) => Err(refused(
            "this link expired: read the message again, or ask …/attachments/{id}/link, for a fresh one",
        )),
    }
}

/// Streams `file` (or the range asked) with its headers.
async fn serve(
    state: &AppState,
    req: &HttpRequest,
    file: &StoredFile,
) -> Result<HttpResponse, ApiError> {
    let size = file.size;
    let range = match Range::parse(req) {
        Ok(Range::Bytes(specs)) if specs.len() == 1 => match satisfiable(&specs[0], size) {
            Some(r) => Some(r),
            None => {
                return Ok(HttpResponse::build(StatusCode::RANGE_NOT_SATISFIABLE)
                    .insert_header((header::CONTENT_RANGE, format!("bytes */{size}")))
                    .json(ErrorBody::new(
                        ErrorCode::RangeNotSatisfiable,
                        format!("the range lies outside the file ({size} bytes)"),
                    )))
            }
        },
        // No range, several (not served: the whole file instead), or one
        // in a unit other than bytes.
        _ => None,
    };
    let key = Files::key(&file.bay, &file.id);
    let blob = state
        .files
        .blobs()
        .read(&key, range.clone())
        .await
        .map_err(|e| match e {
            BlobError::NotFound => {
                ApiError::new(ErrorCode::AttachmentGone, "the bytes of this file are gone")
            }
            other => {
                tracing::warn!("file storage: {other}");
                ApiError::new(ErrorCode::Unavailable, "the file storage cannot serve now")
                    .retry_after(std::time::Duration::from_secs(5))
            }
        })?;
    let name = state
        .files
        .name_of(file)
        .unwrap_or_else(|| "file".to_owned());
    let mut answer = match &range {
        Some(r) => {
            let mut b = HttpResponse::build(StatusCode::PARTIAL_CONTENT);
            b.insert_header((
                header::CONTENT_RANGE,
                format!("bytes {}-{}/{size}", r.start, r.end - 1),
            ));
            b
        }
        None => HttpResponse::Ok(),
    };
    let length = blob.range.end - blob.range.start;
    answer
        .insert_header((header::CONTENT_TYPE, file.mime.as_str()))
        .insert_header(disposition(&name))
        .insert_header((header::ACCEPT_RANGES, "bytes"))
        .insert_header((header::CACHE_CONTROL, "private, no-store"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .no_chunking(length);
    Ok(answer.streaming(
        blob.body
            .map(|r| r.map_err(|e| std::io::Error::other(e.to_string()))),
    ))
}

/// The byte range `spec` asks of a `size`-byte file, end exclusive;
/// `None` when it lies outside.
fn satisfiable(spec: &ByteRangeSpec, size: u64) -> Option<std::ops::Range<u64>> {
    spec.to_satisfiable_range(size)
        .map(|(start, end)| start..end + 1)
}

/// `attachment; filename="<ascii>"; filename*=UTF-8''<name>`: the real
/// name for every client, the ASCII fallback for old ones (RFC 6266).
fn disposition(name: &str) -> ContentDisposition {
    let ascii: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '_'
            }
        })
        .filter(|c| *c != '"' && *c != '\\')
        .collect();
    let mut parameters = vec![DispositionParam::Filename(ascii)];
    if !name.is_ascii() {
        parameters.push(DispositionParam::FilenameExt(ExtendedValue {
            charset: header::Charset::Ext("UTF-8".into()),
            language_tag: None,
            value: name.as_bytes().to_vec(),
        }));
    }
    ContentDisposition {
        disposition: DispositionType::Attachment,
        parameters,
    }
}
