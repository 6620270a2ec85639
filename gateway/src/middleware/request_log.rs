//! Gives every request an id (`x-request-id`, reused from the client when
//! it sent a sane one), runs the handler inside a tracing span carrying it,
//! and logs one line per finished request.
//!
//! Tokens never reach the logs: the query string is logged with the values
//! of `token` (and any parameter whose name contains `token`, `secret` or
//! `key`) replaced by `***`, and headers are never logged.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::Next;
use metrics::{Counter, Histogram};
use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Instant;
use tracing::Instrument;

/// Response (and accepted request) header carrying the request id.
pub const REQUEST_ID: &str = "x-request-id";

/// Returns `query` with secret-looking parameter values masked. Names are
/// percent-decoded before the check (the same decoding the auth extractor
/// applies), so `?%74oken=` is masked like `?token=`.
pub fn redact_query(query: &str) -> String {
    if query.is_empty() {
        return String::new();
    }
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (name, value) in form_urlencoded::parse(query.as_bytes()) {
        if is_secret_name(&name) {
            out.append_pair(&name, "***");
        } else {
            out.append_pair(&name, &value);
        }
    }
    out.finish()
}

fn is_secret_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.contains("token") || n.contains("secret") || n.contains("key") || n.contains("password")
}

/// The `route` label of a request no route matched.
pub const UNMATCHED: &str = "unmatched";

/// The `method` label: a standard method's name, else `other`.
pub fn method_label(method: &actix_web::http::Method) -> &'static str {
    match method.as_str() {
        "GET" => "GET",
        "POST" => "POST",
        "PUT" => "PUT",
        "PATCH" => "PATCH",
        "DELETE" => "DELETE",
        "HEAD" => "HEAD",
        "OPTIONS" => "OPTIONS",
        "TRACE" => "TRACE",
        "CONNECT" => "CONNECT",
        _ => "other",
    }
}

/// The request's id: the client's `x-request-id` when it is sane (at most
/// 64 of `[A-Za-z0-9_-]`), else a new ULID.
pub fn request_id(headers: &actix_web::http::header::HeaderMap) -> String {
    headers
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| {
            v.len() <= 64
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
        .map_or_else(|| ulid::Ulid::new().to_string(), str::to_owned)
}

/// A request series' labels: method, route, status.
type SeriesKey = (&'static str, String, u16);

/// Counts and times one finished request (`switchboard_http_requests_total`,
/// `switchboard_http_request_duration_seconds`) and logs its line. `route`
/// is the matched pattern or [`UNMATCHED`].
pub fn finished(
    method: &actix_web::http::Method,
    route: String,
    status: u16,
    started: Instant,
    query: &str,
) {
    // Labels from fixed sets only: an invented method or a random path
    // must not add a series (`/metrics` would grow unbounded). That also
    // bounds this thread's cache of the series' handles, which spares each
    // request building two keys and looking them up in the registry.
    thread_local! {
        static SERIES: RefCell<HashMap<SeriesKey, (Counter, Histogram)>> =
            RefCell::new(HashMap::new());
    }
    let method_label = method_label(method);
    let seconds = started.elapsed().as_secs_f64();
    SERIES.with(|series| {
        let mut series = series.borrow_mut();
        let (count, time) = series
            .entry((method_label, route, status))
            .or_insert_with_key(|(method, route, status)| {
                let route = route.clone();
                (
                    metrics::counter!(crate::metrics::HTTP_REQUESTS, "method" => *method, "route" => route.clone(), "status" => status.to_string()),
                    metrics::histogram!(crate::metrics::HTTP_SECONDS, "method" => *method, "route" => route),
                )
            });
        count.increment(1);
        time.record(seconds);
    });
    tracing::info!(
        status,
        elapsed_ms = elapsed_ms(started),
        query = %query,
        "request finished"
    );
}

/// Logs, when dropped before [`Unanswered::answered`], that the client
/// left before its answer: a held poll or wait the client gave up on, or a
/// request whose connection broke. Such a request has no status (no
/// answer was written) and would otherwise leave no line at all.
pub struct Unanswered {
    span: tracing::Span,
    started: Instant,
    query: String,
    answered: bool,
}

impl Unanswered {
    /// Watches the request of `span` that started at `started`.
    pub fn new(span: tracing::Span, started: Instant, query: String) -> Self {
        Unanswered {
            span,
            started,
            query,
            answered: false,
        }
    }

    /// The request got its answer: nothing to log on drop.
    pub fn answered(&mut self) {
        self.answered = true;
    }

    /// The redacted query string it logs (and the request's line shows).
    pub fn query(&self) -> &str {
        &self.query
    }
}

impl Drop for Unanswered {
    fn drop(&mut self) {
        if !self.answered {
            let _enter = self.span.enter();
            tracing::info!(
                elapsed_ms = elapsed_ms(self.started),
                query = %self.query,
                "request abandoned: the client left before the answer"
            );
        }
    }
}

/// Milliseconds since `started`, to the microsecond (a log field).
fn elapsed_ms(started: Instant) -> f64 {
    (started.elapsed().as_secs_f64() * 1_000_000.0).round() / 1000.0
}

/// The middleware function (use with `actix_web::middleware::from_fn`).
///
/// # Errors
///
/// Only those of the wrapped service, passed on unchanged (and logged).
pub async fn request_log(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let id = request_id(req.headers());
    let query = redact_query(req.query_string());
    // The fields are worked out only when the span is enabled. `client` is
    // the resolved client (a trusted proxy's forwarded address), as every
    // per-IP limit sees it.
    let span = tracing::info_span!(
        "request",
        request_id = %id,
        method = %req.method(),
        path = %req.path(),
        client = %req
            .app_data::<actix_web::web::Data<crate::state::AppState>>()
            .and_then(|state| state.client_ip(req.peer_addr(), req.headers()))
            .map(|ip| ip.to_string())
            .unwrap_or_default(),
    );
    let started = Instant::now();
    let mut unanswered = Unanswered::new(span.clone(), started, query);
    let result = next.call(req).instrument(span.clone()).await;
    unanswered.answered();
    let _enter = span.enter();
    match result {
        Ok(mut res) => {
            if let Ok(v) = HeaderValue::from_str(&id) {
                res.headers_mut()
                    .insert(HeaderName::from_static(REQUEST_ID), v);
            }
            let route = res
                .request()
                .match_pattern()
                .unwrap_or_else(|| UNMATCHED.to_owned());
            finished(
                res.request().method(),
                route,
                res.status().as_u16(),
                started,
                unanswered.query(),
            );
            Ok(res)
        }
        Err(err) => {
            tracing::warn!(error = %err, query = %unanswered.query(), "request failed");
            Err(err)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{method_label, redact_query};
    use actix_web::http::Method;

    #[test]
    fn invented_methods_share_one_label() {
        assert_eq!(method_label(&Method::GET), "GET");
        assert_eq!(
            method_label(&Method::from_bytes(b"XM0001").unwrap()),
            "other"
        );
        assert_eq!(method_label(&Method::from_bytes(b"get").unwrap()), "other");
    }

    #[test]
    fn token_values_are_masked() {
        assert_eq!(redact_query("token=bay_abc&wait=5"), "token=***&wait=5");
        assert_eq!(redact_query("%74oken=bay_abc"), "token=***");
        assert_eq!(redact_query("wait=5&cursor=x"), "wait=5&cursor=x");
        assert_eq!(
            redact_query("api_key=1&Access_Token=2"),
            "api_key=***&Access_Token=***"
        );
        assert_eq!(redact_query(""), "");
    }
}
