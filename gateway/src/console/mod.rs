//! The operator console at `/console`: plain HTML, CSS and JavaScript
//! compiled into the binary (no build step, nothing from a CDN), served
//! without authentication like any login page. Everything it shows comes
//! from the admin API (`/api/admin/nodes`, `…/conversations`, `…/live`,
//! `…/webhooks`, see [`crate::api::operator`]), called with the admin
//! token the operator enters once; the page keeps it in the tab's session
//! storage and sends it as a header, never in a URL. docs/console.md
//! describes the pages.

use actix_web::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, X_FRAME_OPTIONS};
use actix_web::{get, web, HttpResponse};

/// The assets: (file name under `/console/`, content type, bytes).
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "console.js",
        "text/javascript; charset=utf-8",
        include_str!("console.js"),
    ),
    (
        "console.css",
        "text/css; charset=utf-8",
        include_str!("console.css"),
    ),
];

const INDEX: &str = include_str!("index.html");

/// Scripts, styles and data from this origin only; never framed (the
/// page holds an admin token).
const POLICY: &str =
    "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

fn asset(content_type: &str, body: &'static str) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(content_type)
        .insert_header((CONTENT_SECURITY_POLICY, POLICY))
        .insert_header((X_FRAME_OPTIONS, "DENY"))
        // Small files; a new binary must show its own console at once.
        .insert_header((CACHE_CONTROL, "no-cache"))
        .body(body)
}

/// `GET /console`: the page.
#[utoipa::path(
    operation_id = "console",
    tag = "operations",
    summary = "Operator console (HTML)",
    description = "The web console: nodes, Bays and their conversations live, webhook health. Asks for the admin token, which it keeps in the tab's session storage. docs/console.md.",
    responses((status = 200, description = "The page", content_type = "text/html", body = String)),
)]
#[get("/console")]
async fn index() -> HttpResponse {
    asset("text/html; charset=utf-8", INDEX)
}

/// `GET /console/`: a permanent redirect to the page, so that the address
/// typed with its trailing slash (as consoles are usually typed) works.
#[utoipa::path(
    operation_id = "consoleSlash",
    tag = "operations",
    summary = "Operator console, trailing slash",
    description = "308 to `/console`.",
    responses((status = 308, description = "To the page", headers(("Location" = String, description = "/console")))),
)]
#[get("/console/")]
async fn slash() -> HttpResponse {
    HttpResponse::PermanentRedirect()
        .insert_header((actix_web::http::header::LOCATION, "/console"))
        .finish()
}

/// `GET /console/{file}`: the page's script and style sheet; 404 for
/// anything else.
#[utoipa::path(
    operation_id = "consoleAsset",
    tag = "operations",
    summary = "Operator console asset",
    params(("file" = String, Path, description = "`console.js` or `console.css`")),
    responses(
        (status = 200, description = "The asset", content_type = "text/plain", body = String),
        (status = 404, description = "NOT_FOUND: no such asset", body = switchboard_protocol::error::ErrorBody),
    ),
)]
#[get("/console/{file}")]
async fn file(path: web::Path<String>) -> Result<HttpResponse, crate::error::ApiError> {
    let name = path.into_inner();
    ASSETS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, ct, body)| asset(ct, body))
        .ok_or_else(crate::error::ApiError::not_found)
}

/// Registers the console's routes at the root.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(index).service(slash).service(file);
}
