//! `/api/mcp` in the OpenAPI document. The endpoint speaks MCP's
//! Streamable HTTP transport (JSON-RPC bodies, served by rmcp), which
//! OpenAPI cannot describe message by message: these entries state the
//! HTTP contract around it (authentication, sessions, the gate's refusals)
//! and point to docs/mcp.md for the tools.

use switchboard_protocol::error::ErrorBody;

/// `POST /api/mcp`: one JSON-RPC message.
#[utoipa::path(
    post,
    path = "/api/mcp",
    operation_id = "mcpPost",
    tag = "mcp",
    summary = "MCP Streamable HTTP: send a JSON-RPC message",
    description = "A JSON-RPC request, notification or response of the Model Context Protocol (handshake revisions up to 2025-11-25). `initialize` opens a session and answers with its `Mcp-Session-Id` header; later requests carry it. A session answers only the token that opened it. Requests are answered as `application/json` or `text/event-stream`; 202 for a notification or response; the transport's own refusals (400, 406, 413, 415) are plain text. Protocol refusals of a tool are tool results with `isError` and the error code first in the text. The tools: docs/mcp.md.",
    params(
        ("Mcp-Session-Id" = Option<String>, Header, description = "The session, from the `initialize` answer; absent on `initialize`"),
        ("MCP-Protocol-Version" = Option<String>, Header, description = "The negotiated revision, e.g. `2025-11-25`"),
    ),
    request_body(content = Object, content_type = "application/json", description = "One JSON-RPC 2.0 message"),
    responses(
        (status = 200, description = "The JSON-RPC answer (`application/json`, or an SSE stream of it)", content_type = "application/json", body = Object),
        (status = 202, description = "A notification or response was accepted"),
        (status = 401, description = "UNAUTHORIZED: missing, unknown, rotated or revoked token; no session is created", body = ErrorBody),
        (status = 403, description = "ACCOUNT_SUSPENDED / BAY_SUSPENDED: an operator suspended the participant or its Bay", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: no such session for this token (unknown, expired after `timing.mcp_session_idle`, or opened by another token): initialize again", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE: the token could not be checked", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[allow(dead_code)]
fn post() {}

/// `GET /api/mcp`: the session's standalone stream.
#[utoipa::path(
    get,
    path = "/api/mcp",
    operation_id = "mcpStream",
    tag = "mcp",
    summary = "MCP Streamable HTTP: the session's standalone SSE stream",
    description = "The stream on which the server may send requests and notifications outside a request (MCP Streamable HTTP). Switchboard's events are not sent here; listen with the `wait_for_messages` tool (docs/mcp.md).",
    params(("Mcp-Session-Id" = String, Header, description = "The session")),
    responses(
        (status = 200, description = "`text/event-stream`", content_type = "text/event-stream", body = String),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "ACCOUNT_SUSPENDED / BAY_SUSPENDED", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: no such session for this token", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[allow(dead_code)]
fn stream() {}

/// `DELETE /api/mcp`: end the session.
#[utoipa::path(
    delete,
    path = "/api/mcp",
    operation_id = "mcpDelete",
    tag = "mcp",
    summary = "MCP Streamable HTTP: end the session",
    params(("Mcp-Session-Id" = String, Header, description = "The session")),
    responses(
        (status = 200, description = "The session ended; its id answers 404 from now on"),
        (status = 202, description = "The session ended (a transport may answer 202)"),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "ACCOUNT_SUSPENDED / BAY_SUSPENDED", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: no such session for this token", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[allow(dead_code)]
fn end() {}
