//! The answer for a request no route matched: 405 `METHOD_NOT_ALLOWED` with
//! `Allow` when its path is served with other methods, else 404.
//!
//! Which methods a path serves comes from the OpenAPI document, which
//! lists every route with its method (`tests/openapi.rs` checks the two
//! agree), so there is no second table to keep in step.

use crate::error::ApiError;
use actix_web::http::header::{HeaderValue, ALLOW};
use actix_web::{HttpRequest, HttpResponse, ResponseError};
use std::sync::OnceLock;
use switchboard_protocol::error::ErrorCode;

/// One documented path: its segments (`None` for a `{param}`) and methods.
type Template = (Vec<Option<String>>, Vec<String>);

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
                let methods = ops
                    .as_object()
                    .map(|o| o.keys().map(|m| m.to_ascii_uppercase()).collect())
                    .unwrap_or_default();
                (segments, methods)
            })
            .collect()
    })
}

/// The methods `path` is served with (sorted, deduplicated); empty when no
/// route serves it.
///
/// When several documented paths match, the most literal one decides, as
/// OpenAPI matches ("concrete paths are matched before templated ones"):
/// `…/messages/wait` is the GET route, not the `{mid}` of `…/messages/{mid}`
/// (no message id is `wait`), so its `Allow` is `GET`.
pub fn allowed(path: &str) -> Vec<String> {
    // One leading slash: `//api/…` is not `/api/…` (the router does not
    // serve it either).
    let parts: Vec<&str> = path.strip_prefix('/').unwrap_or(path).split('/').collect();
    let matching: Vec<&Template> = templates()
        .iter()
        .filter(|(segments, _)| {
            segments.len() == parts.len()
                && segments.iter().zip(&parts).all(|(s, p)| match s {
                    Some(literal) => literal == p,
                    None => !p.is_empty(),
                })
        })
        .collect();
    let literals = |(segments, _): &Template| segments.iter().flatten().count();
    let most = matching.iter().map(|t| literals(t)).max().unwrap_or(0);
    let mut out: Vec<String> = matching
        .into_iter()
        .filter(|t| literals(t) == most)
        .flat_map(|(_, methods)| methods.iter().cloned())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The default service: 405 with `Allow`, or 404 `NOT_FOUND`.
pub async fn fallback(req: HttpRequest) -> HttpResponse {
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
    use super::allowed;

    #[test]
    fn paths_map_to_their_documented_methods() {
        assert_eq!(allowed("/api/agent-api/me"), ["GET"]);
        assert_eq!(
            allowed("/api/agent-api/conversations/c1/messages"),
            ["GET", "POST"]
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
