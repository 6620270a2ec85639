//! Which methods a path serves, and the answer for a request no route
//! matched: 405 `METHOD_NOT_ALLOWED` with `Allow` when its path is served
//! with other methods, else 404.
//!
//! Which methods a path serves comes from the OpenAPI document, which
//! lists every route with its method (`tests/openapi.rs` checks the two
//! agree), so there is no second table to keep in step. `HEAD` is served
//! wherever `GET` is (RFC 9110 §9.3.2, `middleware/head.rs`) except on
//! the routes in [`GET_ONLY`].

use crate::error::ApiError;
use actix_web::http::header::{HeaderValue, ALLOW};
use actix_web::{HttpRequest, HttpResponse, ResponseError};
use std::sync::OnceLock;
use switchboard_protocol::error::ErrorCode;

/// One documented path: its segments (`None` for a `{param}`), methods, and
/// whether its `HEAD` is its `GET` (no route of its own, not [`GET_ONLY`]).
type Template = (Vec<Option<String>>, Vec<String>, bool);

/// `GET` operations (OpenAPI `operationId`) not also served as `HEAD`: they
/// hold the request open until something happens (a long-poll, a stream, an
/// upgrade), or the read itself acts (a link request's poll collects the
/// token; a room link's `GET` may send; a summary's `?refresh=1` asks the
/// summarizer). A `HEAD` there is 405.
pub const GET_ONLY: &[&str] = &[
    "getUpdates",
    "openWebSocket",
    "streamEvents",
    "waitForMessage",
    "mcpStream",
    "pollLinkRequest",
    "readRoom",
    "getSummary",
    "adminConversationLive",
    "adminNodesLive",
    "adminWebhooksLive",
];

fn templates() -> &'static [Template] {
    static TEMPLATES: OnceLock<Vec<Template>> = OnceLock::new();
    TEMPLATES.get_or_init(|| {
        let doc: serde_json::Value =
            serde_json::from_str(crate::openapi::document()).unwrap_or_default();
        let Some(paths) = doc["paths"].as_object() else {
            return Vec::new();
        };
        paths
            .iter()
            .map(|(path, ops)| {
                let segments = path
                    .trim_start_matches('/')
                    .split('/')
                    .map(|s| (!s.starts_with('{')).then(|| s.to_owned()))
                    .collect();
                let mut methods: Vec<String> = ops
                    .as_object()
                    .map(|o| o.keys().map(|m| m.to_ascii_uppercase()).collect())
                    .unwrap_or_default();
                let get_id = ops["get"]["operationId"].as_str().unwrap_or_default();
                let head_as_get = methods.iter().any(|m| m == "GET")
                    && !methods.iter().any(|m| m == "HEAD")
                    && !GET_ONLY.contains(&get_id);
                if head_as_get {
                    methods.push("HEAD".to_owned());
                }
                (segments, methods, head_as_get)
            })
            .collect()
    })
}

/// The documented paths that `path` is: the most literal of those it fits.
fn matching(path: &str) -> Vec<&'static Template> {
    // One leading slash: `//api/…` is not `/api/…` (the router does not
    // serve it either).
    let parts: Vec<&str> = path.strip_prefix('/').unwrap_or(path).split('/').collect();
    let matching: Vec<&Template> = templates()
        .iter()
        .filter(|(segments, _, _)| {
            segments.len() == parts.len()
                && segments.iter().zip(&parts).all(|(s, p)| match s {
                    Some(literal) => literal == p,
                    None => !p.is_empty(),
                })
        })
        .collect();
    let literals = |(segments, _, _): &Template| segments.iter().flatten().count();
    let most = matching.iter().map(|t| literals(t)).max().unwrap_or(0);
    matching
        .into_iter()
        .filter(|t| literals(t) == most)
        .collect()
}

/// The methods `path` is served with (sorted, deduplicated); empty when no
/// route serves it.
///
/// When several documented paths match, the most literal one decides, as
/// OpenAPI matches ("concrete paths are matched before templated ones"):
/// `…/messages/wait` is the GET route, not the `{mid}` of `…/messages/{mid}`
/// (no message id is `wait`), so its `Allow` is `GET` (a wait holds, so no
/// `HEAD`).
pub fn allowed(path: &str) -> Vec<String> {
    let mut out: Vec<String> = matching(path)
        .into_iter()
        .flat_map(|(_, methods, _)| methods.iter().cloned())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Whether a `HEAD` of `path` is answered as its `GET` without the content
/// (`middleware/head.rs`): `GET` is served there, the path is not in
/// [`GET_ONLY`], and no route of its own takes `HEAD`.
pub fn head_as_get(path: &str) -> bool {
    matching(path)
        .iter()
        .any(|(_, _, head_as_get)| *head_as_get)
}

/// The 405 of a request whose path is served, but not with its method;
/// `None` when the path is not served at all or is served with it. The
/// credential gates (agent API, admin API, MCP) answer this before their
/// 401: a method a path does not take is refused whatever the credential.
pub fn wrong_method(req: &HttpRequest) -> Option<HttpResponse> {
    let methods = allowed(req.path());
    (!methods.is_empty() && !methods.iter().any(|m| m == req.method().as_str()))
        .then(|| answer(req))
}

/// The default service: 405 with `Allow`, or 404 `NOT_FOUND`.
pub async fn fallback(req: HttpRequest) -> HttpResponse {
    answer(&req)
}

/// 405 with `Allow`, or 404 `NOT_FOUND`.
fn answer(req: &HttpRequest) -> HttpResponse {
    let methods = allowed(req.path());
    // A path documented with this very method that no route took (a
    // spelling the router reads differently) is not a 405 either.
    if methods.is_empty() || methods.iter().any(|m| m == req.method().as_str()) {
        return ApiError::new(ErrorCode::NotFound, "no such route").error_response();
    }
    let mut res = ApiError::new(
        ErrorCode::MethodNotAllowed,
        format!(
            "{} is not served here; allowed: {}",
            req.method(),
            methods.join(", ")
        ),
    )
    .error_response();
    if let Ok(v) = HeaderValue::from_str(&methods.join(", ")) {
        res.headers_mut().insert(ALLOW, v);
    }
    res
}

#[cfg(test)]
mod tests {
    use super::{allowed, head_as_get, GET_ONLY};

    /// A renamed operation would silently lose its exclusion.
    #[test]
    fn every_get_only_operation_is_a_documented_get() {
        let doc: serde_json::Value = serde_json::from_str(crate::openapi::document()).unwrap();
        let gets: Vec<&str> = doc["paths"]
            .as_object()
            .unwrap()
            .values()
            .filter_map(|ops| ops["get"]["operationId"].as_str())
            .collect();
        for id in GET_ONLY {
            assert!(gets.contains(id), "{id} is not a documented GET");
        }
    }

    #[test]
    fn head_is_get_only_where_get_just_reads() {
        assert!(head_as_get("/api/agent-api/me"));
        assert!(head_as_get("/openapi.json"));
        assert!(!head_as_get("/api/agent-api/updates"));
        assert!(!head_as_get(
            "/api/agent-api/conversations/c1/messages/wait"
        ));
        assert!(!head_as_get("/r/abc"));
        assert!(head_as_get("/api/agent-api/attachments/signed-content"));
        assert!(!head_as_get("/api/agent-api/nope"));
        assert_eq!(allowed("/api/agent-api/updates"), ["GET"]);
    }

    #[test]
    fn paths_map_to_their_documented_methods() {
        assert_eq!(allowed("/api/agent-api/me"), ["GET", "HEAD"]);
        assert_eq!(
            allowed("/api/agent-api/conversations/c1/messages"),
            ["GET", "HEAD", "POST"]
        );
        // `…/messages/wait` is the GET route; the `{mid}` path it also
        // fits is not what it names.
        assert_eq!(
            allowed("/api/agent-api/conversations/c1/messages/wait"),
            ["GET"]
        );
        assert_eq!(
            allowed("/api/agent-api/conversations/c1/messages/m1"),
            ["DELETE", "PATCH"]
        );
        assert!(allowed("/api/agent-api/nope").is_empty());
        assert!(allowed("/api/agent-api/conversations//messages").is_empty());
        assert!(allowed("//api/agent-api/me").is_empty());
    }
}
