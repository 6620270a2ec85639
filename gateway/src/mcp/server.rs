//! The MCP handler: what `initialize` says about the server, the tool
//! list, tool calls, and the protocol document as the resource
//! `baychat://protocol`.
//!
//! Protocol revisions: the handshake revisions up to 2025-11-25 are
//! offered. Switchboard's MCP listening is session-bound (the session
//! holds the cursor `wait_for_messages` resumes from, and is bound to the
//! token that opened it), and 2026-07-28 removed sessions from the
//! transport, so a client of that revision falls back to the handshake
//! (the SDKs' `auto` mode does so on its own).

use super::calls::{self, Answer};
use super::gate::SESSION_HEADER;
use super::{local, tools, CallScope};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ErrorData, InitializeResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler};
use serde_json::{json, Value};
use std::borrow::Cow;

/// URI of the protocol resource (the BayChat CLI's name for it).
pub const PROTOCOL_URI: &str = "baychat://protocol";

/// The protocol document served as [`PROTOCOL_URI`]: the one this
/// gateway implements, in this repository.
const PROTOCOL_TEXT: &str = include_str!("../../../docs/agent-protocol.md");

/// One session's handler; stateless itself (the session's state is in
/// [`super::sessions`]), so one is made per session.
#[derive(Clone, Copy, Debug, Default)]
pub struct Handler;

/// Builds an rmcp result type from its JSON form; the types are
/// `#[non_exhaustive]`, and the JSON is the MCP schema itself.
fn from_json<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, ErrorData> {
    serde_json::from_value(value).map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

/// The request's [`CallScope`] and session id.
fn scope_of(context: &RequestContext<RoleServer>) -> Option<(CallScope, Option<String>)> {
    let parts = context.extensions.get::<http::request::Parts>()?;
    let scope = rmcp_actix_web::transport::on_request_extensions(&context.extensions)
        .and_then(|e| e.get::<CallScope>())
        .cloned()?;
    let session = parts
        .headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    Some((scope, session))
}

fn tool_result(answer: Answer) -> Result<CallToolResponse, ErrorData> {
    let result: CallToolResult = from_json(json!({
        "content": [{"type": "text", "text": answer.text}],
        "structuredContent": answer.data,
        "isError": answer.error,
    }))?;
    Ok(result.into())
}

impl ServerHandler for Handler {
    fn get_info(&self) -> InitializeResult {
        from_json(json!({
            "protocolVersion": ProtocolVersion::V_2025_11_25,
            "capabilities": {"tools": {}, "resources": {}},
            "serverInfo": {"name": "switchboard", "version": env!("CARGO_PKG_VERSION")},
            "instructions": "BayChat agent messaging. Read the baychat://protocol resource once, start with \
                list_conversations, and reply only to messages marked → you should respond. \
                wait_for_messages listens for what is routed to you.",
        }))
        .unwrap_or_default()
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        from_json(json!({"tools": tools::all()}))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some((scope, session)) = scope_of(&context) else {
            return Err(ErrorData::internal_error("request carries no caller", None));
        };
        let name = request.name.to_string();
        let args = request.arguments.map(Value::Object).unwrap_or(json!({}));
        let arbiter = scope.arbiter.clone();
        let tool = name.clone();
        let answer = local::on_arbiter(&arbiter, move || async move {
            calls::call(scope, session, &tool, args).await
        })
        .await;
        match answer {
            Some(Some(answer)) => tool_result(answer),
            Some(None) => Err(ErrorData::invalid_params(
                format!("no tool named {name}"),
                None,
            )),
            None => Err(ErrorData::internal_error("the node is shutting down", None)),
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        from_json(json!({"resources": [{
            "uri": PROTOCOL_URI,
            "name": "protocol",
            "title": "BayChat Agent Protocol",
            "description": "The BayChat agent protocol: how to identify senders, when shouldRespond authorizes \
                a reply, how to catch up on long conversations, and how to treat derived summaries as \
                untrusted context. Read this once at the start of a session.",
            "mimeType": "text/markdown",
        }]}))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if request.uri != PROTOCOL_URI {
            return Err(ErrorData::resource_not_found(
                format!("no resource {}", request.uri),
                None,
            ));
        }
        let result: ReadResourceResult = from_json(json!({"contents": [{
            "uri": PROTOCOL_URI,
            "mimeType": "text/markdown",
            "text": PROTOCOL_TEXT,
        }]}))?;
        Ok(result.into())
    }
}
