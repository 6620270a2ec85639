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
    description = "A JSON-RPC request, notification or response of the Model Context Protocol (handshake revisions up to 2025-11-25). `initialize` opens a session and answers with its `Mcp-Session-Id` header; later requests carry it. A session answers only the token that opened it. A request is answered as `text/event-stream` (the JSON-RPC answer as one SSE event) or `application/json` (a refusal); 202 for a notification or response. A body that is not JSON is 400 with the JSON-RPC error -32700, JSON that is no JSON-RPC message 400 with -32600, a standard method with params of the wrong shape -32602 in-band (200); the transport's own refusals (400, 405, 406, 413, 415) carry the API's error body. Opening a session draws on the agent budget, and a token holds at most `limits.max_mcp_sessions_per_token` sessions on a node (429). Protocol refusals of a tool are tool results with `isError` and the error code first in the text. The tools: docs/mcp.md.",
    params(
        ("Mcp-Session-Id" = Option<String>, Header, description = "The session, from the `initialize` answer; absent on `initialize`"),
        ("MCP-Protocol-Version" = Option<String>, Header, description = "The negotiated revision, e.g. `2025-11-25`"),
    ),
    request_body(content = Object, content_type = "application/json", description = "One JSON-RPC 2.0 message"),
    responses(
        (status = 200, description = "The JSON-RPC answer: an SSE stream carrying it, or a JSON-RPC error (-32602) as JSON", content(
            (String = "text/event-stream"),
            (Object = "application/json"),
        )),
        (status = 202, description = "A notification or response was accepted"),
        (status = 400, description = "A body that is not JSON (JSON-RPC -32700) or no JSON-RPC message (-32600), as a JSON-RPC error; INVALID_REQUEST: a request outside a session that is not `initialize`", content(
            (Object = "application/json"),
        )),
        (status = 401, description = "UNAUTHORIZED: missing, unknown, rotated or revoked token; no session is created", body = ErrorBody),
        (status = 403, description = "ACCOUNT_SUSPENDED / BAY_SUSPENDED: an operator suspended the participant or its Bay", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: no such session for this token (unknown, expired after `timing.mcp_session_idle`, or opened by another token): initialize again", body = ErrorBody),
        (status = 406, description = "INVALID_REQUEST: the client does not accept both `application/json` and `text/event-stream`", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE: the body is over `limits.max_body_bytes`", body = ErrorBody),
        (status = 415, description = "UNSUPPORTED_MEDIA_TYPE: the body is not sent as `application/json`", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED: opening a session past the agent budget or past `limits.max_mcp_sessions_per_token`", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
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
    description = "The session's standalone stream (MCP Streamable HTTP): every event routed to the agent as the notification `notifications/baychat/event {cursor, event}`, the SSE `id:` being the cursor; `Last-Event-ID` resumes after it (docs/mcp.md, \"The session's event stream\").",
    params(("Mcp-Session-Id" = String, Header, description = "The session")),
    responses(
        (status = 200, description = "`text/event-stream`", content_type = "text/event-stream", body = String),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "ACCOUNT_SUSPENDED / BAY_SUSPENDED", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: no such session for this token", body = ErrorBody),
        (status = 405, description = "METHOD_NOT_ALLOWED (with `Allow: POST, DELETE`): the session listens with `wait_for_messages`, its stream was displaced, or another connection of the token is listening", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED: the `/updates` connect bucket or a connection cap", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
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
        (status = 204, description = "The session ended; its id answers 404 from now on"),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "ACCOUNT_SUSPENDED / BAY_SUSPENDED", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: no such session for this token", body = ErrorBody),
        (status = 503, description = "STORE_UNAVAILABLE", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    security(("agent_token" = [])),
)]
#[allow(dead_code)]
fn end() {}
