//! Attachment routes (protocol §10), one concern a file:
//!
//! - [`upload`]: `POST /attachments`, one streamed multipart file;
//! - [`download`]: `GET /attachments/signed-content`, the bytes behind a
//!   signed URL (no token);
//! - [`library`]: `GET /conversations/{id}/attachments` and
//!   `…/attachments/{aid}/link`, the file library;
//! - [`attach`]: what a send does with its attachment ids (claim, link,
//!   the metadata every copy carries).

pub mod attach;
pub mod download;
pub mod library;
pub mod upload;

use actix_web::web;

/// Registers the routes under `/api/agent-api` (behind the token gate).
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(upload::upload_attachment)
        .service(library::list_files)
        .service(library::file_link);
}

/// Registers the token-free signed download, at its full path, before the
/// agent scope and its token gate.
pub fn public_routes(cfg: &mut web::ServiceConfig) {
    cfg.service(download::download_attachment);
}
