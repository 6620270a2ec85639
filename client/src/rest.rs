//! The REST calls a client needs: `me`, `conversations`, sending, and the
//! per-conversation catch-up a listener runs after a reset (protocol §11).

use crate::error::ClientError;
use reqwest::header::{HeaderValue, AUTHORIZATION, RETRY_AFTER};
use reqwest::{RequestBuilder, Response, StatusCode};
use serde_json::{json, Value};
use std::time::Duration;

/// Base URL and token of one participant, and an HTTP client.
#[derive(Clone)]
pub struct Client {
    base: String,
    auth: HeaderValue,
    http: reqwest::Client,
}

/// What [`Client::send`] sends.
#[derive(Clone, Debug, Default)]
pub struct SendOptions {
    /// `replyToMessageId`: a message of the same conversation to quote.
    pub reply_to: Option<String>,
    /// `Idempotency-Key`: retries with the same key and body store the
    /// message once (within the replay window, on any node).
    pub idempotency_key: Option<String>,
    /// `attachments`: ids from [`Client::upload_file`], 1 to 10, in render
    /// order (protocol §10); empty sends none.
    pub attachments: Vec<String>,
}

impl Client {
    /// A client for `base_url` (e.g. `http://127.0.0.1:8080`; a trailing
    /// `/api/agent-api`, the API's own prefix, is dropped, since every
    /// call adds it) and `token` (`bay_…` or `bay_u_…`).
    ///
    /// # Errors
    /// [`ClientError::Config`] when the URL is not `http(s)://` or the
    /// token cannot be a header value.
    pub fn new(base_url: &str, token: &str) -> Result<Client, ClientError> {
        let base = base_of(base_url)?;
        let mut auth = HeaderValue::from_str(&format!("Bearer {}", token.trim()))
            .map_err(|_| ClientError::Config("the token is not a valid header value".into()))?;
        auth.set_sensitive(true);
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()?;
        Ok(Client { base, auth, http })
    }

    /// The base URL, without a trailing slash.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// `http(s)://…/api/agent-api{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("{}/api/agent-api{path}", self.base)
    }

    pub(crate) fn authorization(&self) -> &HeaderValue {
        &self.auth
    }

    pub(crate) fn http(&self) -> &reqwest::Client {
        &self.http
    }

    pub(crate) fn get(&self, path: &str) -> RequestBuilder {
        self.http
            .get(self.url(path))
            .header(AUTHORIZATION, self.auth.clone())
    }

    pub(crate) fn post(&self, path: &str) -> RequestBuilder {
        self.http
            .post(self.url(path))
            .header(AUTHORIZATION, self.auth.clone())
    }

    /// `GET /me`: `{id, name, kind, status, …, bayId}`.
    ///
    /// # Errors
    /// [`ClientError::Api`] for an error answer, [`ClientError::Http`] when
    /// none came.
    pub async fn me(&self) -> Result<Value, ClientError> {
        json_of(
            self.get("/me")
                .timeout(Duration::from_secs(30))
                .send()
                .await?,
        )
        .await
    }

    /// `GET /conversations`: a bare array `[{id, type, title, role,
    /// unreadCount, lastReadMessageId}]`.
    ///
    /// # Errors
    /// As [`Client::me`].
    pub async fn conversations(&self) -> Result<Value, ClientError> {
        json_of(
            self.get("/conversations")
                .timeout(Duration::from_secs(30))
                .send()
                .await?,
        )
        .await
    }

    /// `POST /conversations/{id}/messages` with `content`; answers the
    /// stored message (201).
    ///
    /// # Errors
    /// As [`Client::me`]; e.g. 404 `NOT_FOUND` for a conversation the
    /// caller is not in, 400 `INVALID_REPLY_TARGET`.
    pub async fn send(
        &self,
        conversation: &str,
        content: &str,
        options: &SendOptions,
    ) -> Result<Value, ClientError> {
        let mut body = json!({ "content": content });
        if let Some(r) = &options.reply_to {
            body["replyToMessageId"] = json!(r);
        }
        if !options.attachments.is_empty() {
            let items: Vec<Value> = options
                .attachments
                .iter()
                .map(|id| json!({ "attachmentId": id }))
                .collect();
            body["attachments"] = json!(items);
        }
        let mut req = self
            .http
            .post(self.url(&format!(
                "/conversations/{}/messages",
                path_segment(conversation)
            )))
            .header(AUTHORIZATION, self.auth.clone())
            .timeout(Duration::from_secs(30))
            .json(&body);
        if let Some(k) = &options.idempotency_key {
            req = req.header("Idempotency-Key", k);
        }
        json_of(req.send().await?).await
    }

    /// Messages of `conversation` strictly newer than `since` (RFC 3339),
    /// ascending, all pages.
    ///
    /// # Errors
    /// As [`Client::me`].
    pub async fn messages_since(
        &self,
        conversation: &str,
        since: &str,
    ) -> Result<Vec<Value>, ClientError> {
        const PAGE: usize = 200;
        let mut since = since.to_owned();
        let mut out = Vec::new();
        loop {
            let res = self
                .http
                .get(self.url(&format!(
                    "/conversations/{}/messages",
                    path_segment(conversation)
                )))
                .header(AUTHORIZATION, self.auth.clone())
                .query(&[("since", since.as_str()), ("limit", &PAGE.to_string())])
                .timeout(Duration::from_secs(30))
                .send()
                .await?;
            let body = json_of(res).await?;
            let page = body["messages"].as_array().cloned().unwrap_or_default();
            let full = page.len() >= PAGE;
            let last = page.last().and_then(|m| m["createdAt"].as_str());
            // `since` is exclusive at millisecond resolution: a full page
            // may end inside a millisecond that holds more messages, so the
            // next page starts a millisecond earlier and skips the ids
            // already taken.
            let next = match last {
                Some(last) if full => Some(one_ms_before(last)?),
                _ => None,
            };
            for m in page {
                let id = m["id"].as_str();
                if id.is_none() || !out.iter().any(|o: &Value| o["id"].as_str() == id) {
                    out.push(m);
                }
            }
            match next {
                Some(before) if before != since => since = before,
                _ => return Ok(out),
            }
        }
    }
}

/// The RFC 3339 time one millisecond before `at`, in the server's form
/// (UTC, milliseconds).
fn one_ms_before(at: &str) -> Result<String, ClientError> {
    let t = chrono::DateTime::parse_from_rfc3339(at).map_err(|e| {
        ClientError::Protocol(format!("a message's createdAt {at:?} is not RFC 3339: {e}"))
    })?;
    Ok((t - chrono::Duration::milliseconds(1))
        .with_timezone(&chrono::Utc)
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

/// Percent-encodes a path segment (conversation ids are `[A-Za-z0-9_-]`,
/// but a CLI argument may be anything).
pub(crate) fn path_segment(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `Retry-After` in seconds, when present.
pub(crate) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    headers
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

/// `base_url` without a trailing slash or `/api/agent-api`, checked to
/// be `http(s)://`.
fn base_of(base_url: &str) -> Result<String, ClientError> {
    let mut base = base_url.trim().trim_end_matches('/');
    if let Some(stripped) = base.strip_suffix("/api/agent-api") {
        base = stripped.trim_end_matches('/');
    }
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        return Err(ClientError::Config(format!(
            "base url must start with http:// or https://, got {base:?}"
        )));
    }
    Ok(base.to_owned())
}

/// Redeems a pairing code at `base_url` (protocol §2, `POST
/// /api/agent-api/pair`; no token needed: the code is the credential).
/// Answers the credentials to keep, `{baseUrl, token, agent: {id,
/// name}}`; the agent's previous token stops working.
///
/// # Errors
/// [`ClientError::Config`] for a base URL that is not `http(s)://`;
/// [`ClientError::Api`] with `INVALID_PAIRING_CODE` for a code that is
/// unknown, expired or used, `RATE_LIMITED` after too many attempts;
/// [`ClientError::Http`] when the gateway cannot be reached.
pub async fn pair(base_url: &str, code: &str) -> Result<Value, ClientError> {
    let url = format!("{}/api/agent-api/pair", base_of(base_url)?);
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .build()?;
    let res = http
        .post(url)
        .json(&json!({ "code": code }))
        .timeout(Duration::from_secs(30))
        .send()
        .await?;
    json_of(res).await
}

/// The JSON body of a success, or the error body as [`ClientError::Api`].
pub(crate) async fn json_of(res: Response) -> Result<Value, ClientError> {
    let status = res.status();
    if status.is_success() {
        if status == StatusCode::NO_CONTENT {
            return Ok(Value::Null);
        }
        return Ok(res.json().await?);
    }
    Err(api_error(res).await)
}

/// An error answer as [`ClientError`] (`Unauthorized` for 401,
/// `Suspended` for a 403 `ACCOUNT_SUSPENDED` / `BAY_SUSPENDED`).
pub(crate) async fn api_error(res: Response) -> ClientError {
    let status = res.status();
    let url = res.url().clone();
    let retry_after = retry_after(res.headers());
    let body: Value = res.json().await.unwrap_or(Value::Null);
    let reason = status.canonical_reason().unwrap_or("error");
    // Not the server's `{error, code, message}` (a proxy's page, an empty
    // body): the status text and the URL say more than nothing.
    let message = match body["message"].as_str() {
        Some(m) if !m.is_empty() => m.to_owned(),
        _ => format!("{reason} from {url} (no error message in the body)"),
    };
    if status == StatusCode::UNAUTHORIZED {
        return ClientError::Unauthorized { message };
    }
    let code = match body["code"].as_str() {
        Some(c) if !c.is_empty() => c.to_owned(),
        _ => reason.to_ascii_uppercase().replace([' ', '-'], "_"),
    };
    if status == StatusCode::FORBIDDEN && crate::error::SUSPENSION_CODES.contains(&code.as_str()) {
        return ClientError::Suspended { code, message };
    }
    ClientError::Api {
        status: status.as_u16(),
        code,
        message,
        retry_after,
    }
}

#[cfg(test)]
mod tests {
    use super::Client;

    #[test]
    fn the_api_prefix_in_the_base_url_is_dropped() {
        for base in [
            "http://h:1",
            "http://h:1/",
            "http://h:1/api/agent-api",
            "http://h:1/api/agent-api/",
        ] {
            let c = Client::new(base, "bay_x").unwrap();
            assert_eq!(c.url("/me"), "http://h:1/api/agent-api/me", "{base}");
        }
    }
}

#[cfg(test)]
mod paging_tests {
    use super::one_ms_before;

    /// A full page's next `since` reaches back into the millisecond the
    /// page ended in, across a second's boundary and from any offset.
    #[test]
    fn the_next_page_starts_one_millisecond_earlier() {
        assert_eq!(
            one_ms_before("2026-12-01T09:00:00.000Z").unwrap(),
            "2026-12-01T08:59:59.999Z"
        );
        assert_eq!(
            one_ms_before("2026-12-01T10:00:00.250+01:00").unwrap(),
            "2026-12-01T09:00:00.249Z"
        );
        assert!(one_ms_before("yesterday").is_err());
    }
}
