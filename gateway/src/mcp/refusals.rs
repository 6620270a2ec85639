//! JSON answers where the MCP transport would answer plain text.
//!
//! rmcp answers its transport refusals (405, 406, 413, 415, a missing
//! session's 400) with a plain-text body, reads a body that is not JSON
//! as 415 "fail to deserialize", and takes a standard method whose
//! params have the wrong shape for a custom method it does not know
//! (-32601). Every other Switchboard route answers JSON, so the gate
//! checks a POST's body first ([`check_post`]) and rewrites what is left
//! ([`json_refusal`]):
//!
//! - a body that is not JSON: HTTP 400 with the JSON-RPC error -32700
//!   (parse error, `id: null`), as JSON-RPC 2.0 §5.1 prescribes;
//! - JSON that is no JSON-RPC message: HTTP 400, -32600 (invalid request);
//! - a standard MCP method (`tools/call`, `resources/read`, …) with params
//!   of the wrong shape: -32602 (invalid params) in-band, HTTP 200 with the
//!   request's `id`, as rmcp answers a handler's invalid params;
//! - a body over `limits.max_body_bytes`: 413 `PAYLOAD_TOO_LARGE`;
//! - any other plain-text refusal: the agent API's error body
//!   (`{error, code, message}`) with the same status, rmcp's text as the
//!   message.

use crate::error::ApiError;
use actix_web::body::MessageBody;
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use actix_web::http::StatusCode;
use actix_web::web::{Bytes, BytesMut};
use actix_web::{HttpMessage, HttpResponse, ResponseError};
use futures_util::StreamExt;
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};
use serde_json::{json, Value};
use switchboard_protocol::error::ErrorCode;

/// JSON-RPC 2.0 error codes (§5.1).
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const INVALID_PARAMS: i64 = -32602;

/// The MCP methods rmcp knows (2025-11-25): a request naming one of these
/// that rmcp could only read as a custom request had params of the wrong
/// shape.
const STANDARD_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "completion/complete",
    "logging/setLevel",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "tools/call",
    "tools/list",
];

/// Reads a POST's body (at most `max` bytes) and checks that it is a
/// JSON-RPC message of the right shape, then puts it back for rmcp.
/// Bodies not sent as JSON are left to rmcp (its 415 is rewritten by
/// [`json_refusal`]).
///
/// # Errors
/// The answer to send instead of calling rmcp (see the module docs).
pub async fn check_post(req: &mut ServiceRequest, max: usize) -> Result<(), HttpResponse> {
    let is_json = matches!(
        req.mime_type(),
        Ok(Some(m)) if m.subtype() == actix_web::mime::JSON || m.suffix() == Some(actix_web::mime::JSON)
    );
    if !is_json {
        return Ok(());
    }
    let body = read_body(req.take_payload(), max).await?;
    let message = serde_json::from_slice::<Value>(&body)
        .map_err(|e| jsonrpc_error(StatusCode::BAD_REQUEST, Value::Null, PARSE_ERROR, e))?;
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let standard = message
        .get("method")
        .and_then(Value::as_str)
        .is_some_and(|m| STANDARD_METHODS.contains(&m));
    match serde_json::from_value::<ClientJsonRpcMessage>(message) {
        // A standard request whose params are not even an object.
        Err(_) if standard && id != Value::Null => {
            let why = "params must be an object of the method's shape";
            return Err(jsonrpc_error(StatusCode::OK, id, INVALID_PARAMS, why));
        }
        Err(e) => {
            return Err(jsonrpc_error(
                StatusCode::BAD_REQUEST,
                id,
                INVALID_REQUEST,
                e,
            ))
        }
        Ok(JsonRpcMessage::Request(r)) => {
            if let ClientRequest::CustomRequest(custom) = &r.request {
                if STANDARD_METHODS.contains(&custom.method.as_str()) {
                    let why = format!("params of {} do not have its shape", custom.method);
                    return Err(jsonrpc_error(StatusCode::OK, id, INVALID_PARAMS, why));
                }
            }
        }
        Ok(_) => {}
    }
    req.set_payload(Payload::from(body));
    Ok(())
}

/// The whole body, or 413 past `max` bytes / 400 when it cannot be read.
async fn read_body(mut payload: Payload, max: usize) -> Result<Bytes, HttpResponse> {
    let mut body = BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| {
            ApiError::new(ErrorCode::MalformedRequest, format!("unreadable body: {e}"))
                .error_response()
        })?;
        if body.len() + chunk.len() > max {
            return Err(ApiError::new(
                ErrorCode::PayloadTooLarge,
                format!("the body is larger than this gateway accepts ({max} bytes)"),
            )
            .error_response());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

/// A JSON-RPC error response with `status`.
fn jsonrpc_error(status: StatusCode, id: Value, code: i64, why: impl ToString) -> HttpResponse {
    HttpResponse::build(status).json(json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": code, "message": why.to_string()},
    }))
}

/// rmcp's answer, with a plain-text (or empty) refusal rewritten as the
/// agent API's JSON error body; anything else unchanged.
pub async fn json_refusal<B: MessageBody + 'static>(res: ServiceResponse<B>) -> ServiceResponse {
    let status = res.status();
    let is_json = res
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("json"));
    if status.as_u16() < 400 || is_json {
        return res.map_into_boxed_body();
    }
    let (req, res) = res.into_parts();
    let kept: Vec<_> = res
        .headers()
        .iter()
        .filter(|(name, _)| *name != CONTENT_TYPE && *name != CONTENT_LENGTH)
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    let text = actix_web::body::to_bytes_limited(res.into_body(), 4096)
        .await
        .ok()
        .and_then(Result::ok)
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let code = match status {
        StatusCode::NOT_FOUND => ErrorCode::NotFound,
        StatusCode::METHOD_NOT_ALLOWED => ErrorCode::MethodNotAllowed,
        StatusCode::PAYLOAD_TOO_LARGE => ErrorCode::PayloadTooLarge,
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ErrorCode::UnsupportedMediaType,
        StatusCode::FORBIDDEN => ErrorCode::Forbidden,
        s if s.is_server_error() => ErrorCode::Internal,
        _ => ErrorCode::InvalidRequest,
    };
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("refused").to_owned()
    } else {
        text
    };
    let mut answer = ApiError::new(code, message).error_response();
    // The error's own status may differ (e.g. 406 has no code of its
    // own): the transport's status stands.
    *answer.status_mut() = status;
    // rmcp's other headers (`Allow` on its 405) stand too.
    for (name, value) in kept {
        answer.headers_mut().insert(name, value);
    }
    ServiceResponse::new(req, answer.map_into_boxed_body())
}
