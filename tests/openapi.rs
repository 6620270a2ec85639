//! `GET /openapi.json`: an OpenAPI 3 document that lists exactly the routes
//! the server serves, with the right methods, and whose schemas match the
//! JSON the server really sends (answers and error bodies, checked with a
//! small validator for the JSON Schema subset the document uses).

mod common;

use common::*;
use reqwest::header::{HeaderMap, CONTENT_TYPE, RETRY_AFTER};
use reqwest::Method;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// The routes under `/api/` that need no credential (protocol §2:
/// pairing and linking come before an agent has a token).
const PUBLIC: &[&str] = &[
    "/api/agent-api/pair",
    "/api/agent-api/link-requests",
    "/api/agent-api/link-requests/{id}/info",
    "/api/agent-api/link-requests/{id}",
    "/api/agent-api/attachments/signed-content",
];

/// Every route the server serves: (method, path template). Adding a route
/// means adding it here and documenting it with `#[utoipa::path]`.
const ROUTES: &[(&str, &str)] = &[
    ("GET", "/api/agent-api/me"),
    ("GET", "/api/agent-api/conversations"),
    ("GET", "/api/agent-api/agents"),
    ("POST", "/api/agent-api/agents/{id}/ask"),
    ("POST", "/api/agent-api/agents/{id}/send"),
    ("POST", "/api/agent-api/agents/requests/{requestId}/answer"),
    ("POST", "/api/agent-api/conversations"),
    ("GET", "/api/agent-api/conversations/{id}/context"),
    ("GET", "/api/agent-api/conversations/{id}/messages"),
    ("POST", "/api/agent-api/conversations/{id}/messages"),
    ("POST", "/api/agent-api/conversations/{id}/typing"),
    ("PATCH", "/api/agent-api/conversations/{id}/messages/{mid}"),
    ("DELETE", "/api/agent-api/conversations/{id}/messages/{mid}"),
    (
        "POST",
        "/api/agent-api/conversations/{id}/messages/{mid}/reactions",
    ),
    (
        "DELETE",
        "/api/agent-api/conversations/{id}/messages/{mid}/reactions/{emoji}",
    ),
    (
        "PUT",
        "/api/agent-api/conversations/{id}/messages/{mid}/reaction",
    ),
    ("POST", "/api/agent-api/conversations/{id}/read"),
    ("GET", "/api/agent-api/conversations/{id}/messages/wait"),
    (
        "POST",
        "/api/agent-api/conversations/{id}/messages/{mid}/append",
    ),
    (
        "POST",
        "/api/agent-api/conversations/{id}/messages/{mid}/complete",
    ),
    (
        "POST",
        "/api/agent-api/conversations/{id}/messages/{mid}/cancel",
    ),
    ("POST", "/api/agent-api/attachments"),
    ("GET", "/api/agent-api/attachments/signed-content"),
    ("GET", "/api/agent-api/conversations/{id}/attachments"),
    (
        "GET",
        "/api/agent-api/conversations/{id}/attachments/{aid}/link",
    ),
    ("POST", "/api/agent-api/polls"),
    ("GET", "/api/agent-api/polls/{id}"),
    ("POST", "/api/agent-api/polls/{id}/vote"),
    ("POST", "/api/agent-api/polls/{id}/close"),
    ("POST", "/api/agent-api/webhook"),
    ("DELETE", "/api/agent-api/webhook"),
    ("PUT", "/api/admin/bays/{bay}/participants/{pid}/webhook"),
    ("DELETE", "/api/admin/bays/{bay}/participants/{pid}/webhook"),
    ("GET", "/api/agent-api/updates"),
    ("GET", "/api/agent-api/ws"),
    ("GET", "/api/agent-api/events"),
    ("POST", "/api/mcp"),
    ("GET", "/api/mcp"),
    ("DELETE", "/api/mcp"),
    ("POST", "/api/admin/bays"),
    ("POST", "/api/admin/bays/{bay}/participants"),
    ("POST", "/api/admin/bays/{bay}/participants/{pid}/token"),
    ("DELETE", "/api/admin/bays/{bay}/participants/{pid}/token"),
    ("POST", "/api/admin/bays/{bay}/participants/{pid}/suspend"),
    ("POST", "/api/admin/bays/{bay}/participants/{pid}/reinstate"),
    ("POST", "/api/admin/bays/{bay}/suspend"),
    ("POST", "/api/admin/bays/{bay}/reinstate"),
    ("POST", "/api/admin/bays/{bay}/conversations"),
    ("POST", "/api/admin/bays/{bay}/conversations/{cid}/members"),
    (
        "DELETE",
        "/api/admin/bays/{bay}/conversations/{cid}/members/{pid}",
    ),
    ("PATCH", "/api/admin/bays/{bay}/conversations/{cid}"),
    ("GET", "/api/admin/bays/{bay}/summarizer"),
    ("PUT", "/api/admin/bays/{bay}/summarizer"),
    ("DELETE", "/api/admin/bays/{bay}/summarizer"),
    ("GET", "/api/admin/bays/{bay}/participants/{pid}/connector"),
    ("PUT", "/api/admin/bays/{bay}/participants/{pid}/connector"),
    (
        "DELETE",
        "/api/admin/bays/{bay}/participants/{pid}/connector",
    ),
    ("GET", "/api/agent-api/conversations/{id}/summary"),
    ("PUT", "/api/agent-api/conversations/{id}/summary"),
    ("POST", "/api/agent-api/pair"),
    ("POST", "/api/agent-api/link-requests"),
    ("GET", "/api/agent-api/link-requests/{id}/info"),
    ("GET", "/api/agent-api/link-requests/{id}"),
    (
        "POST",
        "/api/admin/bays/{bay}/participants/{pid}/pairing-codes",
    ),
    ("POST", "/api/admin/link-requests/{id}/approve"),
    ("POST", "/api/admin/bays/{bay}/conversations/{cid}/links"),
    ("POST", "/rooms"),
    ("GET", "/r/{cap}"),
    ("POST", "/r/{cap}"),
    ("POST", "/r/{cap}/pins"),
    ("DELETE", "/r/{cap}/pins/{id}"),
    ("POST", "/r/{cap}/reactions"),
    ("DELETE", "/r/{cap}/reactions"),
    ("DELETE", "/r/{cap}/messages/{id}"),
    ("GET", "/api/admin/nodes"),
    ("GET", "/api/admin/nodes/live"),
    ("GET", "/api/admin/bays/{bay}/conversations"),
    ("GET", "/api/admin/bays/{bay}/conversations/{cid}/view"),
    ("GET", "/api/admin/bays/{bay}/conversations/{cid}/live"),
    ("POST", "/api/admin/bays/{bay}/conversations/{cid}/messages"),
    ("GET", "/api/admin/bays/{bay}/webhooks"),
    ("GET", "/api/admin/bays/{bay}/webhooks/live"),
    ("GET", "/api/admin/bays"),
    ("GET", "/console"),
    ("GET", "/console/"),
    ("GET", "/console/{file}"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/openapi.json"),
];

const HTTP_METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

async fn fetch_doc(gw: &Gateway) -> Value {
    let res = gw.http.get(gw.url("/openapi.json")).send().await.unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let ct = res.headers()[CONTENT_TYPE].to_str().unwrap().to_owned();
    assert!(ct.starts_with("application/json"), "{ct}");
    res.json().await.unwrap()
}

fn documented_routes(doc: &Value) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, _) in item.as_object().unwrap() {
            if HTTP_METHODS.contains(&method.as_str()) {
                out.insert((method.to_ascii_uppercase(), path.clone()));
            }
        }
    }
    out
}

#[tokio::test]
async fn document_is_openapi_3_and_lists_exactly_the_served_routes() {
    let gw = Gateway::spawn().await;
    let doc = fetch_doc(&gw).await;
    let version = doc["openapi"].as_str().expect("openapi version");
    assert!(version.starts_with("3."), "{version}");
    assert!(doc["info"]["title"].is_string() && doc["info"]["version"].is_string());

    let listed: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    let documented = documented_routes(&doc);
    let missing: Vec<_> = listed.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&listed).collect();
    assert!(missing.is_empty(), "served but not documented: {missing:?}");
    assert!(extra.is_empty(), "documented but not served: {extra:?}");

    // Every operation answers something, and every error answer it
    // documents is the JSON error body.
    for (method, path) in &documented {
        let op = &doc["paths"][path][method.to_ascii_lowercase()];
        let responses = op["responses"].as_object().unwrap();
        assert!(!responses.is_empty(), "{method} {path}");
        for (status, response) in responses {
            let code: u16 = status.parse().unwrap();
            let schema = &response["content"]["application/json"]["schema"];
            // A malformed MCP body is answered with a JSON-RPC error (-32700
            // / -32600), as MCP clients read it.
            let jsonrpc = path == "/api/mcp" && code == 400;
            if code >= 400
                && !(path == "/readyz" || (path.ends_with("/ws") && code == 400) || jsonrpc)
            {
                assert_eq!(
                    schema["$ref"], "#/components/schemas/ErrorBody",
                    "{method} {path} {status}"
                );
            }
            if code == 429 || (code == 503 && path != "/readyz") {
                assert!(
                    response["headers"]["Retry-After"].is_object(),
                    "{method} {path} {status} documents Retry-After"
                );
            }
        }
        // Authenticated routes name their scheme; the pairing routes say
        // they need none (one empty requirement).
        if PUBLIC.contains(&path.as_str()) {
            assert_eq!(op["security"], json!([{}]), "{method} {path}");
        } else if path.starts_with("/api/") {
            let want = if path.starts_with("/api/admin") {
                "admin_token"
            } else {
                "agent_token"
            };
            let names: Vec<&str> = op["security"]
                .as_array()
                .unwrap_or_else(|| panic!("{method} {path} has security"))
                .iter()
                .flat_map(|req| req.as_object().unwrap().keys().map(String::as_str))
                .collect();
            assert!(names.contains(&want), "{method} {path}: {names:?}");
        }
    }

    let schemes = &doc["components"]["securitySchemes"];
    for name in ["agent_token", "admin_token"] {
        assert_eq!(schemes[name]["type"], "http", "{name}");
        assert_eq!(schemes[name]["scheme"], "bearer", "{name}");
    }
    assert_eq!(schemes["agent_token_query"]["in"], "query");
    assert_eq!(schemes["agent_token_query"]["name"], "token");
    assert!(doc["paths"]["/api/agent-api/ws"]["get"]["description"]
        .as_str()
        .unwrap()
        .contains("docs/websocket.md"));

    // The validator the other tests rely on has teeth.
    let spec = Spec { doc: doc.clone() };
    let error_ref = json!({"$ref": "#/components/schemas/ErrorBody"});
    let good = json!({"error": "not_found", "code": "NOT_FOUND", "message": "not found"});
    spec.check(&error_ref, &good, "").unwrap();
    for bad in [
        json!({"error": "nope", "code": "NOPE", "message": "m"}),
        json!({"error": "not_found", "code": "NOT_FOUND"}),
        json!({"error": "not_found", "code": "NOT_FOUND", "message": "m", "extra": 1}),
        json!({"error": 1, "code": "NOT_FOUND", "message": "m"}),
    ] {
        assert!(spec.check(&error_ref, &bad, "").is_err(), "{bad}");
    }
    let event_ref = json!({"$ref": "#/components/schemas/Event"});
    let example = doc["components"]["schemas"]["Event"]["examples"][0].clone();
    spec.check(&event_ref, &example, "").unwrap();
    for (pointer, value) in [
        ("/type", json!("reaction")),
        ("/message/senderType", json!("user")),
        ("/message/replyTo", json!("m1")),
        ("/conversation/title", json!(7)),
    ] {
        let mut bad = example.clone();
        *bad.pointer_mut(pointer).unwrap() = value;
        assert!(spec.check(&event_ref, &bad, "").is_err(), "{pointer}");
    }
    let mut flattened = example["message"].clone();
    flattened["conversationId"] = json!("g");
    // The fields REST adds beside the event's (docs/messages.md).
    flattened["editedAt"] = json!(null);
    flattened["deletedAt"] = json!(null);
    flattened["reactions"] = json!([{"emoji": "👍", "count": 1, "mine": false}]);
    flattened["cardPayload"] = json!(null);
    flattened["poll"] = json!(null);
    flattened["state"] = json!("complete");
    flattened["version"] = json!(0);
    flattened["usage"] = json!(null);
    let rest_ref = json!({"$ref": "#/components/schemas/RestMessage"});
    spec.check(&rest_ref, &flattened, "").unwrap();
    flattened["stray"] = json!(true);
    assert!(spec.check(&rest_ref, &flattened, "").is_err());

    let error_body = &doc["components"]["schemas"]["ErrorBody"];
    for field in ["error", "code", "message"] {
        assert!(error_body["properties"][field].is_object(), "{field}");
        assert!(
            error_body["required"]
                .as_array()
                .unwrap()
                .contains(&json!(field)),
            "{field} is required"
        );
    }
}

/// Replaces `{param}`s of a template with `value`s.
fn fill(template: &str, value: &str) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        let end = rest[start..].find('}').unwrap() + start;
        out.push_str(&rest[..start]);
        out.push_str(value);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// `method path` with the agent `token`.
async fn as_agent(gw: &Gateway, method: Method, path: &str, token: &str) -> reqwest::Response {
    let req = gw.http.request(method, gw.url(path)).bearer_auth(token);
    req.send().await.unwrap()
}

/// A new Bay with one agent named `name`: its token.
async fn new_agent(gw: &Gateway, name: &str) -> String {
    let (_, _, bay) = admin(gw, Method::POST, "/bays", Some(json!({"name": name}))).await;
    let bay = bay["id"].as_str().unwrap().to_owned();
    let (_, _, p) = admin(
        gw,
        Method::POST,
        &format!("/bays/{bay}/participants"),
        Some(json!({"kind": "agent", "name": name})),
    )
    .await;
    p["token"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn every_listed_route_is_served_with_its_method() {
    let gw = Gateway::spawn().await;
    let token = new_agent(&gw, "Rex").await;
    for (method, template) in ROUTES {
        let mut url = gw.url(&fill(template, "x"));
        if template.ends_with("/updates") {
            url.push_str("?wait=1");
        }
        let mut req = gw
            .http
            .request(Method::from_bytes(method.as_bytes()).unwrap(), url);
        req = if template.starts_with("/api/admin") {
            req.bearer_auth(ADMIN_TOKEN)
        } else {
            req.bearer_auth(&token)
        };
        if *method != "GET" && *method != "DELETE" {
            req = req.json(&json!({}));
        }
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        // An event stream does not end: its status is the answer.
        let streaming = res
            .headers()
            .get("content-type")
            .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
        let body: Value = if streaming {
            Value::Null
        } else {
            res.json().await.unwrap_or(Value::Null)
        };
        assert!(
            status != 405 && !(status == 404 && body["message"] == "no such route"),
            "{method} {template} is not served: {status} {body}"
        );
    }
    // And the default service really answers that way: a served path with
    // another method is 405 with `Allow`; an unknown path is 404.
    for (method, path, allow) in [
        (Method::DELETE, "/healthz", "GET, HEAD"),
        (
            Method::PUT,
            "/api/agent-api/conversations/c/messages",
            "GET, HEAD, POST",
        ),
        (Method::POST, "/api/agent-api/me", "GET, HEAD"),
        (Method::GET, "/api/agent-api/polls", "POST"),
    ] {
        let res = gw
            .http
            .request(method.clone(), gw.url(path))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let allowed = res
            .headers()
            .get("allow")
            .map(|v| v.to_str().unwrap().to_owned());
        let body: Value = res.json().await.unwrap_or(Value::Null);
        common::assert_error(status, &body, 405, "METHOD_NOT_ALLOWED");
        assert_eq!(allowed.as_deref(), Some(allow), "{method} {path}");
    }
    let res = gw.http.get(gw.url("/nope")).send().await.unwrap();
    let status = res.status().as_u16();
    let body: Value = res.json().await.unwrap_or(Value::Null);
    common::assert_error(status, &body, 404, "NOT_FOUND");
}

/// `HEAD` is a `GET` without content (RFC 9110 §9.3.2) where `GET` only
/// reads; where it holds the request or acts it is 405 `Allow: GET`.
#[tokio::test]
async fn head_answers_as_get_without_content_except_on_holding_routes() {
    let gw = Gateway::spawn().await;
    let token = new_agent(&gw, "Hal").await;
    for path in [
        "/api/agent-api/me",
        "/api/agent-api/conversations",
        "/api/agent-api/agents",
        "/api/agent-api/conversations/nope/messages",
        "/openapi.json",
        "/healthz",
    ] {
        let get = as_agent(&gw, Method::GET, path, &token).await;
        let get_status = get.status();
        let get_len = get.bytes().await.unwrap().len();
        let head = as_agent(&gw, Method::HEAD, path, &token).await;
        assert_eq!(head.status(), get_status, "HEAD {path}");
        let declared: usize = head.headers()["content-length"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(declared, get_len, "HEAD {path}: the GET's length");
        assert!(
            head.bytes().await.unwrap().is_empty(),
            "HEAD {path}: no content"
        );
    }
    // Without a token, the same 401 as the GET.
    let head = gw
        .http
        .head(gw.url("/api/agent-api/me"))
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), 401);
    for path in [
        "/api/agent-api/updates",
        "/api/agent-api/events",
        "/api/agent-api/ws",
        "/api/agent-api/conversations/c/messages/wait",
    ] {
        let res = as_agent(&gw, Method::HEAD, path, &token).await;
        assert_eq!(res.status(), 405, "HEAD {path}");
        assert_eq!(res.headers()["allow"], "GET", "HEAD {path}");
    }
    // A summary's `?refresh=1` asks the summarizer: no HEAD there either.
    let res = as_agent(
        &gw,
        Method::HEAD,
        "/api/agent-api/conversations/c/summary?refresh=1",
        &token,
    )
    .await;
    assert_eq!(res.status(), 405);
    // The keep-alive connection still serves a GET after those.
    let res = as_agent(&gw, Method::GET, "/api/agent-api/me", &token).await;
    assert_eq!(res.status(), 200);
}

/// A method a path is not served with is 405 even without a credential:
/// `GET` of pairing's `POST`-only route (which takes no token) names
/// `POST`, rather than the agent API's 401.
#[tokio::test]
async fn a_wrong_method_without_a_token_is_405() {
    let gw = Gateway::spawn().await;
    let res = gw
        .http
        .get(gw.url("/api/agent-api/pair"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["allow"], "POST");
    let status = res.status().as_u16();
    let body: Value = res.json().await.unwrap();
    common::assert_error(status, &body, 405, "METHOD_NOT_ALLOWED");
    // The same on the admin API and MCP, which have gates of their own.
    for (method, path, allow) in [
        (Method::PUT, "/api/admin/bays", "GET, HEAD, POST"),
        (Method::HEAD, "/api/admin/nodes/live", "GET"),
        (Method::PUT, "/api/mcp", "DELETE, GET, POST"),
    ] {
        let res = gw
            .http
            .request(method.clone(), gw.url(path))
            .bearer_auth("not-a-token")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 405, "{method} {path}");
        assert_eq!(res.headers()["allow"], allow, "{method} {path}");
    }
    // A served method without a token is still 401.
    for path in ["/api/agent-api/me", "/api/admin/bays"] {
        let res = gw.http.get(gw.url(path)).send().await.unwrap();
        assert_eq!(res.status(), 401, "{path}");
    }
}

// ---- real answers against the documented schemas ----

/// The document plus a validator for the JSON Schema subset it uses:
/// `$ref`, `type` (string or array, with `null`), `enum`, `properties`,
/// `required`, `additionalProperties: false`, `items`, `oneOf`, `allOf`,
/// `minimum` / `maximum`, `minLength` / `maxLength`.
///
/// Answers are checked strictly: an object may carry no property that its
/// schema does not list (unless the schema lists none, a free-form object).
struct Spec {
    doc: Value,
}

impl Spec {
    fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value {
        match schema["$ref"].as_str() {
            Some(r) => {
                let name = r
                    .strip_prefix("#/components/schemas/")
                    .unwrap_or_else(|| panic!("unsupported $ref {r}"));
                let target = &self.doc["components"]["schemas"][name];
                assert!(target.is_object(), "dangling $ref {r}");
                self.resolve(target)
            }
            None => schema,
        }
    }

    /// Property names a schema declares (through `$ref` and `allOf`);
    /// `None` for a free-form object.
    fn declared(&self, schema: &Value) -> Option<BTreeSet<String>> {
        let schema = self.resolve(schema);
        let mut names = BTreeSet::new();
        let mut any = false;
        if let Some(props) = schema["properties"].as_object() {
            any = true;
            names.extend(props.keys().cloned());
        }
        if let Some(parts) = schema["allOf"].as_array() {
            for part in parts {
                if let Some(n) = self.declared(part) {
                    any = true;
                    names.extend(n);
                }
            }
        }
        any.then_some(names)
    }

    fn check(&self, schema: &Value, v: &Value, at: &str) -> Result<(), String> {
        self.check_inner(schema, v, at, true)
    }

    fn check_inner(&self, schema: &Value, v: &Value, at: &str, strict: bool) -> Result<(), String> {
        let schema = self.resolve(schema);
        if let Some(alternatives) = schema["oneOf"].as_array() {
            let ok = alternatives
                .iter()
                .filter(|alt| self.check_inner(alt, v, at, true).is_ok())
                .count();
            if ok != 1 {
                return Err(format!(
                    "{at}: {v} matches {ok} of the oneOf alternatives {}",
                    Value::Array(alternatives.clone())
                ));
            }
        }
        if let Some(parts) = schema["allOf"].as_array() {
            for part in parts {
                self.check_inner(part, v, at, false)?;
            }
        }
        if let Some(t) = schema.get("type") {
            let types: Vec<&str> = match t {
                Value::String(s) => vec![s.as_str()],
                Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                _ => return Err(format!("{at}: bad type {t}")),
            };
            let fits = types.iter().any(|t| match *t {
                "null" => v.is_null(),
                "string" => v.is_string(),
                "boolean" => v.is_boolean(),
                "integer" => v.is_i64() || v.is_u64(),
                "number" => v.is_number(),
                "array" => v.is_array(),
                "object" => v.is_object(),
                _ => false,
            });
            if !fits {
                return Err(format!("{at}: {v} is not of type {t}"));
            }
        }
        if let Some(values) = schema["enum"].as_array() {
            if !values.contains(v) {
                return Err(format!("{at}: {v} is not one of {}", schema["enum"]));
            }
        }
        if let Some(n) = v.as_f64() {
            if schema["minimum"].as_f64().is_some_and(|min| n < min)
                || schema["maximum"].as_f64().is_some_and(|max| n > max)
            {
                return Err(format!("{at}: {n} is out of range"));
            }
        }
        if let Some(s) = v.as_str() {
            let len = s.chars().count() as u64;
            if schema["minLength"].as_u64().is_some_and(|min| len < min)
                || schema["maxLength"].as_u64().is_some_and(|max| len > max)
            {
                return Err(format!("{at}: {v} has a length out of range"));
            }
        }
        if let Some(items) = v.as_array() {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    self.check_inner(item_schema, item, &format!("{at}/{i}"), true)?;
                }
            }
        }
        if let Some(obj) = v.as_object() {
            if let Some(required) = schema["required"].as_array() {
                for name in required.iter().filter_map(Value::as_str) {
                    if !obj.contains_key(name) {
                        return Err(format!("{at}: required `{name}` is missing in {v}"));
                    }
                }
            }
            if let Some(props) = schema["properties"].as_object() {
                for (name, prop) in props {
                    if let Some(value) = obj.get(name) {
                        self.check_inner(prop, value, &format!("{at}/{name}"), true)?;
                    }
                }
            }
            let closed = schema["additionalProperties"] == json!(false);
            if strict || closed {
                if let Some(declared) = self.declared(schema) {
                    if let Some(stray) = obj.keys().find(|k| !declared.contains(*k)) {
                        return Err(format!("{at}: `{stray}` is not documented (in {v})"));
                    }
                }
            }
        }
        Ok(())
    }

    /// Asserts that `status` is a documented answer of `method template`,
    /// and that the answer (headers and body) matches the documentation.
    #[track_caller]
    fn answer(&self, method: &str, template: &str, status: u16, headers: &HeaderMap, body: &Value) {
        let op = &self.doc["paths"][template][method.to_ascii_lowercase()];
        assert!(op.is_object(), "{method} {template} is not documented");
        let response = &op["responses"][status.to_string()];
        assert!(
            response.is_object(),
            "{method} {template} answered {status}, which is not documented: {body}"
        );
        for (name, _) in response["headers"].as_object().into_iter().flatten() {
            assert!(
                headers.contains_key(name.as_str()),
                "{method} {template} {status}: header {name} is documented but missing"
            );
        }
        match response["content"].as_object() {
            None => assert!(
                body.is_null(),
                "{method} {template} {status}: documented without a body, got {body}"
            ),
            Some(content) => {
                if let Some(json) = content.get("application/json") {
                    self.check(&json["schema"], body, "")
                        .unwrap_or_else(|e| panic!("{method} {template} {status}: {e}"));
                }
            }
        }
        if status >= 400 && body.is_object() {
            // The code the server sent is one the description names.
            let code = body["code"].as_str().unwrap_or_default();
            let description = response["description"].as_str().unwrap_or_default();
            assert!(
                description.contains(code),
                "{method} {template} {status}: {code} is not in the description {description:?}"
            );
        }
    }
}

enum Body {
    None,
    Json(Value),
    Raw(&'static str, &'static str),
}

async fn call(
    gw: &Gateway,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Body,
) -> (u16, HeaderMap, Value) {
    let mut req = gw.http.request(method, gw.url(path));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    req = match body {
        Body::None => req,
        Body::Json(v) => req.json(&v),
        Body::Raw(content_type, text) => req.header(CONTENT_TYPE, content_type).body(text),
    };
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    let text = res.text().await.unwrap();
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    (status, headers, body)
}

async fn admin(
    gw: &Gateway,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (u16, HeaderMap, Value) {
    let body = body.map_or(Body::None, Body::Json);
    call(
        gw,
        method,
        &format!("/api/admin{path}"),
        Some(ADMIN_TOKEN),
        body,
    )
    .await
}

/// Checks one call against the document; returns its body.
macro_rules! expect {
    ($spec:expr, $status:expr, $method:literal $template:literal, $call:expr) => {{
        let (status, headers, body) = $call;
        assert_eq!(status, $status, "{} {}: {body}", $method, $template);
        $spec.answer($method, $template, status, &headers, &body);
        body
    }};
}

#[tokio::test]
async fn real_answers_match_the_documented_schemas() {
    let gw = Gateway::spawn().await;
    let spec = Spec {
        doc: fetch_doc(&gw).await,
    };
    const BAYS: &str = "/api/admin/bays";

    // ---- admin API ----
    expect!(spec, 201, "POST" "/api/admin/bays",
        admin(&gw, Method::POST, "/bays", Some(json!({"id": "b1", "name": "B1"}))).await);
    expect!(spec, 409, "POST" "/api/admin/bays",
        admin(&gw, Method::POST, "/bays", Some(json!({"id": "b1", "name": "B1"}))).await);
    expect!(spec, 401, "POST" "/api/admin/bays",
        call(&gw, Method::POST, BAYS, Some("wrong"), Body::Json(json!({"name": "x"}))).await);
    expect!(spec, 400, "POST" "/api/admin/bays",
        call(&gw, Method::POST, BAYS, Some(ADMIN_TOKEN), Body::Raw("application/json", "{")).await);
    expect!(spec, 415, "POST" "/api/admin/bays",
        call(&gw, Method::POST, BAYS, Some(ADMIN_TOKEN), Body::Raw("text/plain", "{}")).await);
    let mut tokens = std::collections::HashMap::new();
    for (id, kind, name) in [
        ("ana", "user", "Ana"),
        ("ben", "user", "Ben"),
        ("rex", "agent", "Rex"),
    ] {
        let created = expect!(spec, 201, "POST" "/api/admin/bays/{bay}/participants",
            admin(&gw, Method::POST, "/bays/b1/participants",
                Some(json!({"id": id, "kind": kind, "name": name, "description": "d"}))).await);
        tokens.insert(id, created["token"].as_str().unwrap().to_owned());
    }
    expect!(spec, 404, "POST" "/api/admin/bays/{bay}/participants",
        admin(&gw, Method::POST, "/bays/nope/participants",
            Some(json!({"kind": "agent", "name": "X"}))).await);
    expect!(spec, 400, "POST" "/api/admin/bays/{bay}/participants",
        admin(&gw, Method::POST, "/bays/b1/participants",
            Some(json!({"kind": "robot", "name": "X"}))).await);
    expect!(spec, 201, "POST" "/api/admin/bays/{bay}/conversations",
        admin(&gw, Method::POST, "/bays/b1/conversations", Some(json!({
            "id": "g", "type": "GROUP", "title": "Launch", "members": ["ana", "rex"],
            "admins": ["ana"], "policy": {"agentReplyPolicy": "MENTIONS", "maxAgentRounds": 2}
        }))).await);
    expect!(spec, 201, "POST" "/api/admin/bays/{bay}/conversations",
        admin(&gw, Method::POST, "/bays/b1/conversations",
            Some(json!({"id": "dm", "type": "DM", "members": ["ana", "rex"]}))).await);
    expect!(spec, 409, "POST" "/api/admin/bays/{bay}/conversations",
        admin(&gw, Method::POST, "/bays/b1/conversations",
            Some(json!({"id": "dm", "type": "DM", "members": ["ana", "rex"]}))).await);
    expect!(spec, 200, "POST" "/api/admin/bays/{bay}/conversations/{cid}/members",
        admin(&gw, Method::POST, "/bays/b1/conversations/g/members",
            Some(json!({"participantId": "ben", "role": "member"}))).await);
    expect!(spec, 400, "POST" "/api/admin/bays/{bay}/conversations/{cid}/members",
        admin(&gw, Method::POST, "/bays/b1/conversations/g/members",
            Some(json!({"participantId": "nobody"}))).await);
    expect!(spec, 404, "POST" "/api/admin/bays/{bay}/conversations/{cid}/members",
        admin(&gw, Method::POST, "/bays/b1/conversations/nope/members",
            Some(json!({"participantId": "ben"}))).await);
    expect!(spec, 200, "PATCH" "/api/admin/bays/{bay}/conversations/{cid}",
        admin(&gw, Method::PATCH, "/bays/b1/conversations/g",
            Some(json!({"title": "Launch room", "policy": {"maxAgentRounds": 3, "rules": "be brief"}}))).await);
    expect!(spec, 400, "PATCH" "/api/admin/bays/{bay}/conversations/{cid}",
        admin(&gw, Method::PATCH, "/bays/b1/conversations/g",
            Some(json!({"policy": {"maxAgentRounds": 9}}))).await);
    expect!(spec, 204, "DELETE" "/api/admin/bays/{bay}/conversations/{cid}/members/{pid}",
        admin(&gw, Method::DELETE, "/bays/b1/conversations/g/members/ben", None).await);
    expect!(spec, 404, "DELETE" "/api/admin/bays/{bay}/conversations/{cid}/members/{pid}",
        admin(&gw, Method::DELETE, "/bays/b1/conversations/g/members/ben", None).await);
    expect!(spec, 204, "DELETE" "/api/admin/bays/{bay}/participants/{pid}/token",
        admin(&gw, Method::DELETE, "/bays/b1/participants/ben/token", None).await);
    let minted = expect!(spec, 201, "POST" "/api/admin/bays/{bay}/participants/{pid}/token",
        admin(&gw, Method::POST, "/bays/b1/participants/ben/token", None).await);
    tokens.insert("ben", minted["token"].as_str().unwrap().to_owned());
    expect!(spec, 404, "POST" "/api/admin/bays/{bay}/participants/{pid}/token",
        admin(&gw, Method::POST, "/bays/b1/participants/nobody/token", None).await);

    // ---- standing: suspension refuses every agent route with a documented 403 ----
    let (ana, rex, ben) = (&tokens["ana"], &tokens["rex"], &tokens["ben"]);
    let api = |p: &str| format!("/api/agent-api{p}");
    expect!(spec, 200, "POST" "/api/admin/bays/{bay}/participants/{pid}/suspend",
        admin(&gw, Method::POST, "/bays/b1/participants/ben/suspend", None).await);
    expect!(spec, 404, "POST" "/api/admin/bays/{bay}/participants/{pid}/suspend",
        admin(&gw, Method::POST, "/bays/b1/participants/nobody/suspend", None).await);
    for (method, template, path) in [
        ("GET", "/api/agent-api/me", "/me"),
        (
            "GET",
            "/api/agent-api/conversations/{id}/context",
            "/conversations/g/context",
        ),
        ("GET", "/api/agent-api/updates", "/updates?wait=1"),
        ("GET", "/api/agent-api/ws", "/ws"),
        ("GET", "/api/agent-api/events", "/events"),
    ] {
        let (status, headers, body) =
            call(&gw, Method::GET, &api(path), Some(ben), Body::None).await;
        assert_eq!(
            (status, &body["code"]),
            (403, &json!("ACCOUNT_SUSPENDED")),
            "{path}: {body}"
        );
        spec.answer(method, template, status, &headers, &body);
    }
    expect!(spec, 200, "POST" "/api/admin/bays/{bay}/participants/{pid}/reinstate",
        admin(&gw, Method::POST, "/bays/b1/participants/ben/reinstate", None).await);
    expect!(spec, 404, "POST" "/api/admin/bays/{bay}/participants/{pid}/reinstate",
        admin(&gw, Method::POST, "/bays/nope/participants/ben/reinstate", None).await);
    expect!(spec, 200, "POST" "/api/admin/bays/{bay}/suspend",
        admin(&gw, Method::POST, "/bays/b1/suspend", None).await);
    expect!(spec, 404, "POST" "/api/admin/bays/{bay}/suspend",
        admin(&gw, Method::POST, "/bays/nope/suspend", None).await);
    expect!(spec, 403, "GET" "/api/agent-api/me",
        call(&gw, Method::GET, &api("/me"), Some(ana), Body::None).await);
    expect!(spec, 200, "POST" "/api/admin/bays/{bay}/reinstate",
        admin(&gw, Method::POST, "/bays/b1/reinstate", None).await);
    expect!(spec, 404, "POST" "/api/admin/bays/{bay}/reinstate",
        admin(&gw, Method::POST, "/bays/nope/reinstate", None).await);

    // ---- agent API ----
    for token in [ana, rex] {
        expect!(spec, 200, "GET" "/api/agent-api/me",
            call(&gw, Method::GET, &api("/me"), Some(token), Body::None).await);
    }
    expect!(spec, 401, "GET" "/api/agent-api/me",
        call(&gw, Method::GET, &api("/me"), None, Body::None).await);
    expect!(spec, 401, "GET" "/api/agent-api/me",
        call(&gw, Method::GET, &api("/me"), Some("bay_not_a_real_token_000"), Body::None).await);
    let list = expect!(spec, 200, "GET" "/api/agent-api/conversations",
        call(&gw, Method::GET, &api("/conversations"), Some(rex), Body::None).await);
    assert_eq!(list.as_array().unwrap().len(), 2);
    expect!(spec, 200, "GET" "/api/agent-api/conversations/{id}/context",
        call(&gw, Method::GET, &api("/conversations/g/context"), Some(rex), Body::None).await);
    expect!(spec, 200, "GET" "/api/agent-api/conversations/{id}/context",
        call(&gw, Method::GET, &api("/conversations/dm/context"), Some(ana), Body::None).await);
    expect!(spec, 403, "GET" "/api/agent-api/conversations/{id}/context",
        call(&gw, Method::GET, &api("/conversations/g/context"), Some(ben), Body::None).await);

    // A poll before anything is posted: start at now.
    let first = expect!(spec, 200, "GET" "/api/agent-api/updates",
        call(&gw, Method::GET, &api("/updates?wait=1"), Some(rex), Body::None).await);
    let cursor = first["cursor"].as_str().unwrap().to_owned();

    let posted = expect!(spec, 201, "POST" "/api/agent-api/conversations/{id}/messages",
        call(&gw, Method::POST, &api("/conversations/g/messages"), Some(ana),
            Body::Json(json!({"content": "hello @Rex", "metadata": {"k": 1}}))).await);
    expect!(spec, 201, "POST" "/api/agent-api/conversations/{id}/messages",
        call(&gw, Method::POST, &api("/conversations/g/messages"), Some(rex),
            Body::Json(json!({"content": "on it", "replyToMessageId": posted["id"]}))).await);
    for (body, what) in [
        (Body::Json(json!({"content": ""})), "empty content"),
        (Body::Json(json!({"content": 5})), "content not a string"),
        (
            Body::Json(json!({"content": "x", "replyToMessageId": "nope"})),
            "foreign reply target",
        ),
        (
            Body::Json(json!({"content": "x", "metadata": [1]})),
            "metadata not an object",
        ),
        (
            Body::Json(json!({"content": "x", "attachments": []})),
            "attachments",
        ),
        (Body::Json(json!({"nothing": true})), "no content"),
        (Body::Raw("application/json", "{"), "not JSON"),
    ] {
        let (status, headers, body) = call(
            &gw,
            Method::POST,
            &api("/conversations/g/messages"),
            Some(ana),
            body,
        )
        .await;
        assert_eq!(status, 400, "{what}: {body}");
        spec.answer(
            "POST",
            "/api/agent-api/conversations/{id}/messages",
            status,
            &headers,
            &body,
        );
    }
    expect!(spec, 415, "POST" "/api/agent-api/conversations/{id}/messages",
        call(&gw, Method::POST, &api("/conversations/g/messages"), Some(ana),
            Body::Raw("text/plain", "hi")).await);
    expect!(spec, 404, "POST" "/api/agent-api/conversations/{id}/messages",
        call(&gw, Method::POST, &api("/conversations/g/messages"), Some(ben),
            Body::Json(json!({"content": "let me in"}))).await);

    let page = expect!(spec, 200, "GET" "/api/agent-api/conversations/{id}/messages",
        call(&gw, Method::GET, &api("/conversations/g/messages?limit=1"), Some(rex), Body::None).await);
    assert!(page["nextCursor"].is_string(), "{page}");
    expect!(spec, 200, "GET" "/api/agent-api/conversations/{id}/messages",
        call(&gw, Method::GET, &api("/conversations/g/messages?since=2000-01-01T00:00:00Z"),
            Some(rex), Body::None).await);
    for query in ["limit=0", "since=yesterday", "cursor=nope"] {
        expect!(spec, 400, "GET" "/api/agent-api/conversations/{id}/messages",
            call(&gw, Method::GET, &api(&format!("/conversations/g/messages?{query}")),
                Some(rex), Body::None).await);
    }
    expect!(spec, 403, "GET" "/api/agent-api/conversations/{id}/messages",
        call(&gw, Method::GET, &api("/conversations/g/messages"), Some(ben), Body::None).await);

    expect!(spec, 200, "POST" "/api/agent-api/conversations/{id}/typing",
        call(&gw, Method::POST, &api("/conversations/g/typing"), Some(rex), Body::None).await);
    expect!(spec, 404, "POST" "/api/agent-api/conversations/{id}/typing",
        call(&gw, Method::POST, &api("/conversations/nope/typing"), Some(rex), Body::None).await);

    // `usage` on a send, shown on REST; the BayChat CLI's shapes.
    let costed = expect!(spec, 201, "POST" "/api/agent-api/conversations/{id}/messages",
        call(&gw, Method::POST, &api("/conversations/g/messages"), Some(rex),
            Body::Json(json!({"content": "done", "usage": {"model": "m", "inputTokens": 9}}))).await);
    assert_eq!(costed["usage"], json!({"model": "m", "inputTokens": 9}));
    expect!(spec, 200, "GET" "/api/agent-api/conversations/{id}/messages",
        call(&gw, Method::GET, &api("/conversations/g/messages"), Some(ana), Body::None).await);
    expect!(spec, 400, "POST" "/api/agent-api/conversations/{id}/messages",
        call(&gw, Method::POST, &api("/conversations/g/messages"), Some(rex),
            Body::Json(json!({"content": "x", "usage": {"inputTokens": -1}}))).await);
    // Files (protocol §10): upload, send, library, link, signed download.
    const PNG: &str = "multipart/form-data; boundary=XyZ";
    let up = expect!(spec, 201, "POST" "/api/agent-api/attachments",
        call(&gw, Method::POST, &api("/attachments"), Some(rex), Body::Raw(PNG,
            "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"n.txt\"\r\n\r\nnotes\r\n--XyZ--\r\n")).await);
    expect!(spec, 415, "POST" "/api/agent-api/attachments",
        call(&gw, Method::POST, &api("/attachments"), Some(rex), Body::Raw(PNG,
            "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x\"\r\n\r\n\x7fELF\u{0}\u{0}\r\n--XyZ--\r\n")).await);
    expect!(spec, 400, "POST" "/api/agent-api/attachments",
        call(&gw, Method::POST, &api("/attachments"), Some(rex), Body::Raw(PNG, "--XyZ--\r\n")).await);
    let with_file = expect!(spec, 201, "POST" "/api/agent-api/conversations/{id}/messages",
        call(&gw, Method::POST, &api("/conversations/g/messages"), Some(rex),
            Body::Json(json!({"content": "notes", "attachments": [{"attachmentId": up["attachmentId"]}]}))).await);
    expect!(spec, 409, "POST" "/api/agent-api/conversations/{id}/messages",
        call(&gw, Method::POST, &api("/conversations/g/messages"), Some(rex),
            Body::Json(json!({"content": "again", "attachments": [{"attachmentId": up["attachmentId"]}]}))).await);
    expect!(spec, 200, "GET" "/api/agent-api/conversations/{id}/attachments",
        call(&gw, Method::GET, &api("/conversations/g/attachments"), Some(ana), Body::None).await);
    expect!(spec, 400, "GET" "/api/agent-api/conversations/{id}/attachments",
        call(&gw, Method::GET, &api("/conversations/g/attachments?limit=500"), Some(ana), Body::None).await);
    expect!(spec, 403, "GET" "/api/agent-api/conversations/{id}/attachments",
        call(&gw, Method::GET, &api("/conversations/g/attachments"), Some(ben), Body::None).await);
    let aid = up["attachmentId"].as_str().unwrap();
    let link = expect!(spec, 200, "GET" "/api/agent-api/conversations/{id}/attachments/{aid}/link",
        call(&gw, Method::GET, &api(&format!("/conversations/g/attachments/{aid}/link")), Some(ana), Body::None).await);
    expect!(spec, 404, "GET" "/api/agent-api/conversations/{id}/attachments/{aid}/link",
        call(&gw, Method::GET, &api("/conversations/g/attachments/att_nope/link"), Some(ana), Body::None).await);
    let url = link["attachmentUrl"].as_str().unwrap();
    let path = &url[url.find("/api/").unwrap()..];
    let (status, headers, _) = call(&gw, Method::GET, path, None, Body::None).await;
    assert_eq!(status, 200);
    spec.answer(
        "GET",
        "/api/agent-api/attachments/signed-content",
        status,
        &headers,
        &Value::Null,
    );
    expect!(spec, 403, "GET" "/api/agent-api/attachments/signed-content",
        call(&gw, Method::GET, &path.replace("sig=", "sig=0"), None, Body::None).await);
    let mid = with_file["id"].as_str().unwrap();
    call(
        &gw,
        Method::DELETE,
        &api(&format!("/conversations/g/messages/{mid}")),
        Some(rex),
        Body::None,
    )
    .await;
    expect!(spec, 410, "GET" "/api/agent-api/attachments/signed-content",
        call(&gw, Method::GET, path, None, Body::None).await);

    let created = expect!(spec, 201, "POST" "/api/agent-api/polls",
        call(&gw, Method::POST, &api("/polls"), Some(rex),
            Body::Json(json!({"conversationId": "g", "question": "Q?", "options": ["A", "B"]}))).await);
    let poll = created["pollId"].as_str().unwrap().to_owned();
    expect!(spec, 200, "GET" "/api/agent-api/polls/{id}",
        call(&gw, Method::GET, &api(&format!("/polls/{poll}")), Some(ana), Body::None).await);
    expect!(spec, 200, "POST" "/api/agent-api/polls/{id}/vote",
        call(&gw, Method::POST, &api(&format!("/polls/{poll}/vote")), Some(ana),
            Body::Json(json!({"optionIndexes": [1]}))).await);
    let mid = created["id"].as_str().unwrap().to_owned();
    expect!(spec, 200, "PUT" "/api/agent-api/conversations/{id}/messages/{mid}/reaction",
        call(&gw, Method::PUT, &api(&format!("/conversations/g/messages/{mid}/reaction")), Some(ana),
            Body::Json(json!({"emoji": "👍"}))).await);
    expect!(spec, 400, "PUT" "/api/agent-api/conversations/{id}/messages/{mid}/reaction",
        call(&gw, Method::PUT, &api(&format!("/conversations/g/messages/{mid}/reaction")), Some(ana),
            Body::Json(json!({"emoji": "no"}))).await);

    let got = expect!(spec, 200, "GET" "/api/agent-api/updates",
        call(&gw, Method::GET, &api(&format!("/updates?wait=5&cursor={cursor}")),
            Some(rex), Body::None).await);
    assert!(!got["events"].as_array().unwrap().is_empty(), "{got}");
    expect!(spec, 409, "GET" "/api/agent-api/updates",
        call(&gw, Method::GET, &api("/updates?wait=1&cursor=garbage"), Some(rex), Body::None).await);
    expect!(spec, 401, "GET" "/api/agent-api/updates",
        call(&gw, Method::GET, &api("/updates?wait=1"), None, Body::None).await);

    // ---- /ws: refused before the upgrade, or 101 ----
    expect!(spec, 401, "GET" "/api/agent-api/ws",
        call(&gw, Method::GET, &api("/ws"), Some("bay_not_a_real_token_000"), Body::None).await);
    expect!(spec, 400, "GET" "/api/agent-api/ws",
        call(&gw, Method::GET, &api("/ws"), Some(rex), Body::None).await);
    for url in [
        format!("ws://{}/api/agent-api/ws", gw.addr),
        format!("ws://{}/api/agent-api/ws?token={rex}", gw.addr),
    ] {
        let mut req = url.as_str().into_client_request().unwrap();
        if !url.contains("token=") {
            req.headers_mut()
                .insert("Authorization", format!("Bearer {rex}").parse().unwrap());
        }
        let (_stream, res) = tokio_tungstenite::connect_async(req)
            .await
            .expect("upgrade");
        let status = res.status().as_u16();
        assert_eq!(status, 101);
        spec.answer(
            "GET",
            "/api/agent-api/ws",
            status,
            &HeaderMap::new(),
            &Value::Null,
        );
    }

    // ---- /events: refused before the stream, or 200 text/event-stream ----
    expect!(spec, 401, "GET" "/api/agent-api/events",
        call(&gw, Method::GET, &api("/events"), None, Body::None).await);
    let res = gw
        .http
        .get(gw.url(&api("/events")))
        .bearer_auth(rex)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    assert_eq!(headers[CONTENT_TYPE], "text/event-stream");
    spec.answer(
        "GET",
        "/api/agent-api/events",
        status,
        &headers,
        &Value::Null,
    );
    drop(res);

    // ---- pairing and linking (no credential) ----
    let minted = expect!(spec, 201, "POST" "/api/admin/bays/{bay}/participants/{pid}/pairing-codes",
        admin(&gw, Method::POST, "/bays/b1/participants/rex/pairing-codes", None).await);
    expect!(spec, 400, "POST" "/api/admin/bays/{bay}/participants/{pid}/pairing-codes",
        admin(&gw, Method::POST, "/bays/b1/participants/ana/pairing-codes", None).await);
    expect!(spec, 404, "POST" "/api/admin/bays/{bay}/participants/{pid}/pairing-codes",
        admin(&gw, Method::POST, "/bays/b1/participants/nope/pairing-codes", None).await);
    let pair = "/api/agent-api/pair";
    expect!(spec, 200, "POST" "/api/agent-api/pair",
        call(&gw, Method::POST, pair, None, Body::Json(json!({"code": minted["code"]}))).await);
    expect!(spec, 400, "POST" "/api/agent-api/pair",
        call(&gw, Method::POST, pair, None, Body::Json(json!({"code": minted["code"]}))).await);
    let links = "/api/agent-api/link-requests";
    let link = expect!(spec, 201, "POST" "/api/agent-api/link-requests",
        call(&gw, Method::POST, links, None, Body::Json(json!({"name": "Laptop"}))).await);
    expect!(spec, 400, "POST" "/api/agent-api/link-requests",
        call(&gw, Method::POST, links, None, Body::Json(json!({"name": ""}))).await);
    let id = link["id"].as_str().unwrap();
    let secret = link["pollSecret"].as_str().unwrap();
    expect!(spec, 200, "GET" "/api/agent-api/link-requests/{id}/info",
        call(&gw, Method::GET, &format!("{links}/{id}/info"), None, Body::None).await);
    expect!(spec, 404, "GET" "/api/agent-api/link-requests/{id}/info",
        call(&gw, Method::GET, &format!("{links}/lr_nope/info"), None, Body::None).await);
    let poll = format!("{links}/{id}?secret={secret}");
    expect!(spec, 200, "GET" "/api/agent-api/link-requests/{id}",
        call(&gw, Method::GET, &poll, None, Body::None).await);
    expect!(spec, 200, "POST" "/api/admin/link-requests/{id}/approve",
        admin(&gw, Method::POST, &format!("/link-requests/{id}/approve"),
            Some(json!({"bay": "b1", "participantId": "rex"}))).await);
    expect!(spec, 409, "POST" "/api/admin/link-requests/{id}/approve",
        admin(&gw, Method::POST, &format!("/link-requests/{id}/approve"),
            Some(json!({"bay": "b1", "participantId": "rex"}))).await);
    expect!(spec, 404, "POST" "/api/admin/link-requests/{id}/approve",
        admin(&gw, Method::POST, "/link-requests/lr_nope/approve", Some(json!({"bay": "b1"}))).await);
    let collected = expect!(spec, 200, "GET" "/api/agent-api/link-requests/{id}",
        call(&gw, Method::GET, &poll, None, Body::None).await);
    expect!(spec, 404, "GET" "/api/agent-api/link-requests/{id}",
        call(&gw, Method::GET, &poll, None, Body::None).await);
    assert!(collected["token"]
        .as_str()
        .is_some_and(|t| t.starts_with("bay_")));

    // ---- rooms by link ----
    let created = expect!(spec, 201, "POST" "/rooms",
        call(&gw, Method::POST, "/rooms", None, Body::Json(json!({"name": "lab", "brief": "Hi"}))).await);
    let cap = |role: &str| {
        created["links"][role]
            .as_str()
            .unwrap()
            .rsplit('/')
            .next()
            .unwrap()
            .to_owned()
    };
    let (guest, owner) = (
        format!("/r/{}", cap("guest")),
        format!("/r/{}", cap("owner")),
    );
    let read = expect!(spec, 200, "GET" "/r/{cap}",
        call(&gw, Method::GET, &format!("{guest}?format=json"), None, Body::None).await);
    expect!(spec, 404, "GET" "/r/{cap}",
        call(&gw, Method::GET, "/r/AAAAAAAAAAAAAAAAAAAAAA", None, Body::None).await);
    let sent = expect!(spec, 201, "POST" "/r/{cap}",
        call(&gw, Method::POST, &guest, None, Body::Json(json!({"author": "A", "body": "x", "client_id": "k"}))).await);
    expect!(spec, 200, "POST" "/r/{cap}",
        call(&gw, Method::POST, &guest, None, Body::Json(json!({"author": "A", "body": "x", "client_id": "k"}))).await);
    expect!(spec, 409, "POST" "/r/{cap}",
        call(&gw, Method::POST, &guest, None, Body::Json(json!({"author": "A", "body": "y", "client_id": "k"}))).await);
    let id = sent["id"].as_str().unwrap().to_owned();
    expect!(spec, 200, "POST" "/r/{cap}/reactions",
        call(&gw, Method::POST, &format!("{guest}/reactions"), None, Body::Json(json!({"message_id": id, "author": "A", "emoji": "👍"}))).await);
    expect!(spec, 200, "DELETE" "/r/{cap}/reactions",
        call(&gw, Method::DELETE, &format!("{guest}/reactions"), None, Body::Json(json!({"message_id": id, "author": "A", "emoji": "👍"}))).await);
    expect!(spec, 200, "POST" "/r/{cap}/pins",
        call(&gw, Method::POST, &format!("{guest}/pins"), None, Body::Json(json!({"message_id": id}))).await);
    expect!(spec, 200, "DELETE" "/r/{cap}/pins/{id}",
        call(&gw, Method::DELETE, &format!("{guest}/pins/{id}"), None, Body::None).await);
    expect!(spec, 403, "DELETE" "/r/{cap}/messages/{id}",
        call(&gw, Method::DELETE, &format!("{guest}/messages/{id}"), None, Body::None).await);
    expect!(spec, 200, "DELETE" "/r/{cap}/messages/{id}",
        call(&gw, Method::DELETE, &format!("{owner}/messages/{id}"), None, Body::None).await);
    expect!(spec, 410, "POST" "/r/{cap}",
        call(&gw, Method::POST, &guest, None, Body::Json(json!({"author": "A", "body": "x", "client_id": "k"}))).await);
    assert!(read["cursor"].is_string());
    expect!(spec, 201, "POST" "/api/admin/bays/{bay}/conversations/{cid}/links",
        admin(&gw, Method::POST, "/bays/b1/conversations/g/links", Some(json!({"role": "reader"}))).await);

    // ---- operations ----
    expect!(spec, 200, "GET" "/healthz",
        call(&gw, Method::GET, "/healthz", None, Body::None).await);
    expect!(spec, 200, "GET" "/readyz",
        call(&gw, Method::GET, "/readyz", None, Body::None).await);
    let (status, headers, body) = call(&gw, Method::GET, "/metrics", None, Body::None).await;
    assert_eq!(status, 200);
    let ct = headers[CONTENT_TYPE].to_str().unwrap();
    assert!(
        spec.doc["paths"]["/metrics"]["get"]["responses"]["200"]["content"][ct].is_object(),
        "/metrics content-type {ct} is documented"
    );
    assert!(body.as_str().unwrap().contains("switchboard_"));
}

#[tokio::test]
async fn rate_limits_and_body_limits_answer_as_documented() {
    let gw = Gateway::spawn_with(
        Opts::default()
            .env("SWITCHBOARD_LIMITS__UPDATES_PER_MINUTE", "1")
            .env("SWITCHBOARD_LIMITS__AGENT_REQUESTS_PER_MINUTE", "2")
            .env("SWITCHBOARD_LIMITS__MAX_BODY_BYTES", "1024"),
    )
    .await;
    let spec = Spec {
        doc: fetch_doc(&gw).await,
    };
    admin(
        &gw,
        Method::POST,
        "/bays",
        Some(json!({"id": "b", "name": "B"})),
    )
    .await;
    let (_, _, p) = admin(
        &gw,
        Method::POST,
        "/bays/b/participants",
        Some(json!({"id": "rex", "kind": "agent", "name": "Rex"})),
    )
    .await;
    let rex = p["token"].as_str().unwrap().to_owned();
    admin(
        &gw,
        Method::POST,
        "/bays/b/conversations",
        Some(json!({"id": "dm", "type": "AGENT_CHAT", "members": ["rex"]})),
    )
    .await;

    let updates = "/api/agent-api/updates?wait=1";
    expect!(spec, 200, "GET" "/api/agent-api/updates",
        call(&gw, Method::GET, updates, Some(&rex), Body::None).await);
    let (status, headers, body) = call(&gw, Method::GET, updates, Some(&rex), Body::None).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["code"], "UPDATES_RATE_LIMITED");
    assert!(headers.contains_key(RETRY_AFTER));
    spec.answer("GET", "/api/agent-api/updates", status, &headers, &body);
    // A real handshake: a malformed one is refused before the bucket.
    let mut req = format!("ws://{}/api/agent-api/ws", gw.addr)
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("Authorization", format!("Bearer {rex}").parse().unwrap());
    let res = match tokio_tungstenite::connect_async(req).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(res)) => res,
        other => panic!(
            "expected a refusal, got {:?}",
            other.map(|(_, r)| r.status())
        ),
    };
    let status = res.status().as_u16();
    let body: Value = serde_json::from_slice(res.body().as_deref().unwrap_or(b"")).unwrap();
    assert_eq!(status, 429, "{body}");
    spec.answer("GET", "/api/agent-api/ws", status, res.headers(), &body);

    let big = "x".repeat(2048);
    let (status, headers, body) = call(
        &gw,
        Method::POST,
        "/api/agent-api/conversations/dm/messages",
        Some(&rex),
        Body::Json(json!({"content": big})),
    )
    .await;
    assert_eq!(status, 413, "{body}");
    spec.answer(
        "POST",
        "/api/agent-api/conversations/{id}/messages",
        status,
        &headers,
        &body,
    );
    let (status, headers, body) = admin(
        &gw,
        Method::POST,
        "/bays",
        Some(json!({"name": "x".repeat(2048)})),
    )
    .await;
    assert_eq!(status, 413, "{body}");
    spec.answer("POST", "/api/admin/bays", status, &headers, &body);

    // The agent budget: 2/min.
    let mut last = (0, HeaderMap::new(), Value::Null);
    for _ in 0..3 {
        last = call(
            &gw,
            Method::GET,
            "/api/agent-api/me",
            Some(&rex),
            Body::None,
        )
        .await;
    }
    let (status, headers, body) = last;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["code"], "RATE_LIMITED");
    spec.answer("GET", "/api/agent-api/me", status, &headers, &body);
}
