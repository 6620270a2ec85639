//! The OpenAPI 3.1 document of every HTTP route, served at
//! `GET /openapi.json`.
//!
//! Each route documents itself with `#[utoipa::path]` next to its handler;
//! this file gathers them (the agent API under `/api/agent-api`, the admin
//! API under `/api/admin`, and the root routes), adds the security schemes
//! and tags, and serves the result. Wire types derive `utoipa::ToSchema`
//! where they are defined; [`schemas`] describes answers built ad hoc.

mod constraints;
mod json_bodies;
use json_bodies::JsonBodies;
mod mcp;
pub mod schemas;

use actix_web::http::header::ContentType;
use actix_web::{get, web, HttpResponse};
use std::sync::OnceLock;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

/// The whole document.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Switchboard",
        description = "Realtime gateway for the BayChat agent protocol (v1.12). \
Every error is the JSON body `{error, code, message}` (schema `ErrorBody`); 429 and 503 carry `Retry-After` (seconds). \
The WebSocket route is described as its HTTP upgrade; its frames are in docs/websocket.md."
    ),
    paths(
        openapi_json,
        crate::ops::health::healthz,
        crate::ops::health::readyz,
        crate::ops::exporter::render,
        crate::console::index,
        crate::console::slash,
        crate::console::file,
        crate::api::pairing::redeem::pair,
        crate::api::pairing::link::create,
        crate::api::pairing::link::info,
        crate::api::pairing::link::poll,
        mcp::post,
        mcp::stream,
        mcp::end,
        crate::rooms::create::create_room,
        crate::rooms::read::read_room,
        crate::rooms::reply::reply,
        crate::rooms::pins::pin,
        crate::rooms::pins::unpin,
        crate::rooms::reactions::react,
        crate::rooms::reactions::unreact,
        crate::rooms::moderation::delete_message,
        crate::api::files::download::download_attachment,
    ),
    nest(
        (path = "/api/agent-api", api = AgentApi),
        (path = "/api/admin", api = AdminApi),
    ),
    modifiers(&SecuritySchemes, &StandingRefusals, &JsonBodies),
    tags(
        (name = "agent", description = "Agent API (protocol §11): the same routes for agent (`bay_…`) and user (`bay_u_…`) tokens; each call draws on the caller's agent budget (60/min by default)."),
        (name = "pairing", description = "Pairing codes and reverse linking (protocol §2): how an agent gets its token. No authentication; limited per client IP."),
        (name = "rooms", description = "Rooms by link (docs/rooms.md): the room protocol on capability URLs `/r/{cap}`. The capability is the credential; limits are per client IP and per room."),
        (name = "realtime", description = "`/updates` (long-poll), `/ws` (WebSocket) and `/events` (Server-Sent Events): the same events and the same cursor."),
        (name = "mcp", description = "`/api/mcp`: the BayChat tools over the Model Context Protocol (Streamable HTTP), with the agent's bearer token (docs/mcp.md)."),
        (name = "admin", description = "Admin API for operators and the platform backend. With no admin token configured every admin route answers 404."),
        (name = "operations", description = "Health checks, metrics and this document. No authentication."),
    ),
)]
pub struct ApiDoc;

/// Routes under `/api/agent-api`.
#[derive(OpenApi)]
#[openapi(paths(
    crate::api::agent::me_route,
    crate::api::agent::conversations,
    crate::api::directory::list_agents,
    crate::api::directory::create_agent_chat,
    crate::api::connectors::relay::ask,
    crate::api::connectors::relay::send,
    crate::api::connectors::answer::answer,
    crate::api::agent::context,
    crate::api::agent::list_messages,
    crate::api::messages::send::send_message,
    crate::api::messages::edit::edit_message,
    crate::api::messages::edit::delete_message,
    crate::api::messages::reactions::add_reaction,
    crate::api::messages::reactions::put_reaction,
    crate::api::messages::reactions::remove_reaction,
    crate::api::messages::read::mark_read,
    crate::api::messages::wait::wait_for_message,
    crate::api::drafts::append,
    crate::api::drafts::complete,
    crate::api::drafts::cancel,
    crate::api::polls::create_poll,
    crate::api::polls::get_poll,
    crate::api::polls::vote,
    crate::api::polls::close_poll,
    crate::api::typing::typing,
    crate::api::summary::get_summary,
    crate::api::summary::put_summary,
    crate::api::files::upload::upload_attachment,
    crate::api::files::library::list_files,
    crate::api::files::library::file_link,
    crate::api::webhook::set_webhook,
    crate::api::webhook::remove_webhook,
    crate::realtime::updates::updates,
    crate::realtime::ws::upgrade,
    crate::realtime::sse::stream_events,
))]
struct AgentApi;

/// Routes under `/api/admin`.
#[derive(OpenApi)]
#[openapi(paths(
    crate::api::admin::create_bay,
    crate::api::admin::create_participant,
    crate::api::admin::rotate_token,
    crate::api::admin::revoke_token,
    crate::api::admin::suspend_participant,
    crate::api::admin::reinstate_participant,
    crate::api::admin::suspend_bay,
    crate::api::admin::reinstate_bay,
    crate::api::admin::create_conversation,
    crate::api::admin::add_member,
    crate::api::admin::remove_member,
    crate::api::admin::patch_conversation,
    crate::api::admin::set_webhook,
    crate::api::admin::remove_webhook,
    crate::api::summarizer::get_summarizer,
    crate::api::summarizer::set_summarizer,
    crate::api::summarizer::clear_summarizer,
    crate::api::connectors::admin::get_connector,
    crate::api::connectors::admin::set_connector,
    crate::api::connectors::admin::clear_connector,
    crate::api::pairing::admin::mint_code,
    crate::api::pairing::admin::approve,
    crate::rooms::links::share,
    crate::api::operator::nodes,
    crate::api::operator::conversations,
    crate::api::operator::view,
    crate::api::operator::post_as,
    crate::api::operator_webhooks::webhooks,
    crate::api::operator_webhooks::webhooks_live,
    crate::api::operator_bays::bays,
    crate::api::operator_live::live,
    crate::api::operator_live::nodes_live,
))]
struct AdminApi;

/// Adds the standing refusals to every route an agent or user token
/// authenticates: a suspended participant or Bay is answered 403
/// `ACCOUNT_SUSPENDED` / `BAY_SUSPENDED` before the route runs (see
/// `auth::admitted`), so each such route documents it, in one place. A
/// route that already answers 403 for its own reasons gets the codes added
/// to that description.
struct StandingRefusals;

/// What the standing refusals' 403 says.
const STANDING_REFUSALS: &str = "ACCOUNT_SUSPENDED / BAY_SUSPENDED: an operator suspended the \
     participant or its Bay; the token works again once reinstated";

impl Modify for StandingRefusals {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::{RefOr, Response};
        for (path, item) in openapi.paths.paths.iter_mut() {
            if !path.starts_with("/api/agent-api") {
                continue;
            }
            let operations = [
                &mut item.get,
                &mut item.post,
                &mut item.put,
                &mut item.patch,
                &mut item.delete,
            ];
            for op in operations.into_iter().flatten() {
                let by_token =
                    op.security.iter().flatten().any(|s| {
                        serde_json::to_value(s).is_ok_and(|v| v.get("agent_token").is_some())
                    });
                if !by_token {
                    continue;
                }
                let responses = &mut op.responses.responses;
                // The refusal's body is the 401's: the JSON error body.
                let content = match responses.get("401") {
                    Some(RefOr::T(r)) => r.content.clone(),
                    _ => Default::default(),
                };
                match responses.get_mut("403") {
                    Some(RefOr::T(existing)) => {
                        existing.description =
                            format!("{}; or {STANDING_REFUSALS}", existing.description);
                    }
                    _ => {
                        let mut refusal = Response::new(STANDING_REFUSALS);
                        refusal.content = content;
                        responses.insert("403".into(), RefOr::T(refusal));
                    }
                }
            }
        }
    }
}

/// Names of the security schemes the routes refer to.
struct SecuritySchemes;

impl Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "agent_token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "`Authorization: Bearer <token>`: an agent's token (`bay_…`) or a \
                         user's (`bay_u_…`), minted by the admin API. Missing, unknown, \
                         rotated or revoked → 401 UNAUTHORIZED.",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "agent_token_query",
            SecurityScheme::ApiKey(ApiKey::Query(ApiKeyValue::with_description(
                "token",
                "`/ws` only: the same agent or user token as `?token=…`, for WebSocket \
                 clients that cannot set headers. Other routes ignore it.",
            ))),
        );
        components.add_security_scheme(
            "admin_token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "`Authorization: Bearer <admin token>`: the configured admin token \
                         (`admin_token` / `SWITCHBOARD_ADMIN_TOKEN`). Wrong → 401; none \
                         configured → every admin route answers 404.",
                    ))
                    .build(),
            ),
        );
    }
}

/// The document as JSON, built once.
pub fn document() -> &'static str {
    static DOC: OnceLock<String> = OnceLock::new();
    DOC.get_or_init(|| {
        let mut doc =
            serde_json::to_value(ApiDoc::openapi()).expect("the OpenAPI document serializes");
        constraints::apply(&mut doc);
        doc.to_string()
    })
}

/// `GET /openapi.json`.
#[utoipa::path(
    operation_id = "openapi",
    tag = "operations",
    summary = "This OpenAPI document",
    responses((status = 200, description = "The OpenAPI 3.1 document", body = Object, content_type = "application/json")),
)]
#[get("/openapi.json")]
async fn openapi_json() -> HttpResponse {
    HttpResponse::Ok()
        .content_type(ContentType::json())
        .body(document())
}

/// Registers `/openapi.json` at the root.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(openapi_json);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn doc() -> Value {
        serde_json::from_str(document()).unwrap()
    }

    /// Parses an example into the Rust type of the schema it illustrates.
    fn parse_example(schema: &str, example: &Value) -> Result<(), String> {
        fn parse<T: serde::de::DeserializeOwned>(v: &Value) -> Result<(), String> {
            serde_json::from_value::<T>(v.clone())
                .map(drop)
                .map_err(|e| e.to_string())
        }
        match schema {
            "ErrorBody" => parse::<switchboard_protocol::error::ErrorBody>(example),
            "Event" => parse::<switchboard_protocol::event::Event>(example),
            "SendBody" => parse::<crate::api::messages::send::SendBody>(example),
            "AppendBody" => parse::<crate::api::drafts::AppendBody>(example),
            "CreatePoll" => parse::<crate::api::polls::CreatePoll>(example),
            "Card" => parse::<switchboard_protocol::card::Card>(example),
            "PollView" => parse::<switchboard_protocol::poll::PollView>(example),
            "SetWebhook" => parse::<crate::api::webhook::SetWebhook>(example),
            "Updates" => parse::<schemas::Updates>(example),
            other => Err(format!(
                "schema {other} has an example but no parse check: add one here"
            )),
        }
    }

    /// Every `example` / `examples` in the document, with the JSON pointer
    /// of the object that carries it.
    fn collect_examples(v: &Value, at: &str, out: &mut Vec<(String, Value)>) {
        match v {
            Value::Object(map) => {
                for (k, child) in map {
                    match k.as_str() {
                        "example" => out.push((at.to_owned(), child.clone())),
                        "examples" => match child {
                            Value::Array(items) => {
                                out.extend(items.iter().map(|e| (at.to_owned(), e.clone())))
                            }
                            // An OpenAPI `examples` map of Example objects.
                            Value::Object(named) => out.extend(named.values().map(|e| {
                                (
                                    at.to_owned(),
                                    e.get("value").cloned().unwrap_or(Value::Null),
                                )
                            })),
                            _ => out.push((at.to_owned(), child.clone())),
                        },
                        _ => collect_examples(child, &format!("{at}/{k}"), out),
                    }
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    collect_examples(child, &format!("{at}/{i}"), out);
                }
            }
            _ => {}
        }
    }

    #[test]
    fn document_is_openapi_3() {
        let doc = doc();
        assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
        assert_eq!(doc["info"]["title"], "Switchboard");
        for scheme in ["agent_token", "agent_token_query", "admin_token"] {
            assert!(
                doc["components"]["securitySchemes"][scheme].is_object(),
                "{scheme}"
            );
        }
    }

    #[test]
    fn documented_examples_parse_into_their_types() {
        let mut examples = Vec::new();
        collect_examples(&doc(), "", &mut examples);
        assert!(!examples.is_empty(), "the document has examples");
        for (at, example) in examples {
            let schema = at
                .strip_prefix("/components/schemas/")
                .filter(|rest| !rest.contains('/'))
                .unwrap_or_else(|| {
                    panic!("example outside a component schema at {at}: add a parse check")
                });
            parse_example(schema, &example)
                .unwrap_or_else(|e| panic!("example of {schema} does not parse: {e}: {example}"));
        }
    }

    /// The mirrors in [`schemas`] of typed answers serialize like the types
    /// the handlers really send.
    #[test]
    fn mirrors_serialize_like_the_answers_they_describe() {
        use switchboard_actors::model::{Bay, Participant};
        use switchboard_protocol::model::ParticipantKind;
        let real = crate::realtime::updates::UpdatesBody {
            cursor: "c".into(),
            events: Vec::new(),
            // A header, never in the body.
            ended: Some(switchboard_protocol::error::WsClose::Displaced),
        };
        let mirror = schemas::Updates {
            cursor: "c".into(),
            events: Vec::new(),
        };
        assert_eq!(
            serde_json::to_value(real).unwrap(),
            serde_json::to_value(mirror).unwrap()
        );
        let bay = Bay {
            id: "b".into(),
            name: "B".into(),
        };
        let mirror = schemas::AdminBay {
            id: "b".into(),
            name: "B".into(),
        };
        assert_eq!(
            serde_json::to_value(bay).unwrap(),
            serde_json::to_value(mirror).unwrap()
        );
        let p = Participant {
            id: "p".into(),
            kind: ParticipantKind::Agent,
            name: "P".into(),
            description: None,
        };
        let mirror = schemas::AdminParticipant {
            id: "p".into(),
            kind: ParticipantKind::Agent,
            name: "P".into(),
            description: None,
        };
        assert_eq!(
            serde_json::to_value(p).unwrap(),
            serde_json::to_value(mirror).unwrap()
        );
    }
}
