//! WebSocket upgrades, taken off the HTTP stack.
//!
//! actix-http hands every request that asks for a WebSocket upgrade
//! (`Upgrade: websocket`), and every `CONNECT`, to this service together
//! with its connection instead of to the actix-web app. The service runs the
//! same checks as the app's `/ws` route, in its order (drain, credential,
//! handshake, then [`admit`]: connection caps and connect bucket), answers
//! the handshake itself and then
//! serves the socket directly (`socket::serve`), so an upgraded connection
//! keeps none of the HTTP dispatcher's buffers. Refusals carry the JSON
//! error body of the agent API and close the connection.

use super::ws::{admit, handshake_refusal, refuse_if_draining, Admitted};
use crate::auth::authenticate_head;
use crate::error::ApiError;
use crate::malformed::JsonBadRequest;
use crate::middleware::request_log;
use crate::state::AppState;
use actix_codec::{Framed, FramedParts};
use actix_http::body::{BodySize, MessageBody};
use actix_http::h1::{Codec, Message};
use actix_http::header::{HeaderName, HeaderValue, CONTENT_LENGTH, TRANSFER_ENCODING};
use actix_http::{ConnectionType, Method, Request, Response, Version};
use actix_service::{fn_service, ServiceFactory};
use actix_web::web::Bytes;
use actix_web::{HttpResponse, ResponseError};
use futures_util::future::LocalBoxFuture;
use futures_util::SinkExt;
use std::time::Instant;
use switchboard_protocol::error::ErrorCode;
use tokio::net::TcpStream;
use tracing::Instrument;

/// The one path served as a WebSocket (protocol §11).
pub const WS_PATH: &str = "/api/agent-api/ws";

/// A request that asked for an upgrade, with its connection.
pub type Upgrade = (Request, Framed<Socket, Codec>);

/// An HTTP connection's socket (see `malformed.rs`).
pub type Socket = JsonBadRequest<TcpStream>;

/// The upgrade service of one worker (see the module docs). It never fails:
/// a refusal is an answer, and a connection that breaks is simply over.
pub fn service(
    state: AppState,
) -> impl ServiceFactory<Upgrade, Config = (), Response = (), Error = actix_web::Error, InitError = ()>
{
    fn_service(move |(req, framed): Upgrade| {
        let state = state.clone();
        // Boxed: the dispatcher stores this future inline, and every HTTP
        // connection's task is sized for it.
        let fut: LocalBoxFuture<'static, Result<(), actix_web::Error>> = Box::pin(async move {
            upgrade(state, req, framed).await;
            Ok(())
        });
        fut
    })
}

/// Admits and serves one upgrade, or answers why not. Logged, counted and
/// given an `x-request-id` like every request the app serves.
async fn upgrade(state: AppState, req: Request, mut framed: Framed<Socket, Codec>) {
    let started = Instant::now();
    let head = req.head();
    let id = request_log::request_id(&head.headers);
    let query = request_log::redact_query(head.uri.query().unwrap_or(""));
    let route = if head.uri.path() == WS_PATH {
        WS_PATH
    } else {
        request_log::UNMATCHED
    };
    let span = tracing::info_span!("request", request_id = %id, method = %head.method, path = %head.uri.path());
    let outcome = decide(&state, &req).instrument(span.clone()).await;
    let (mut res, body, admitted) = match outcome {
        Ok((accept, admitted)) => (accept, Bytes::new(), Some(admitted)),
        Err(res) => {
            let (res, body) = head_and_body(res).await;
            (res, body, None)
        }
    };
    if let Ok(v) = HeaderValue::from_str(&id) {
        res.headers_mut()
            .insert(HeaderName::from_static(request_log::REQUEST_ID), v);
    }
    span.in_scope(|| {
        request_log::finished(
            &head.method,
            route.to_owned(),
            res.status().as_u16(),
            started,
            &query,
        )
    });
    let Some(admitted) = admitted else {
        return answer(&mut framed, res, body).await;
    };
    if framed
        .send(Message::Item((res, BodySize::None)))
        .await
        .is_err()
    {
        return;
    }
    // Nothing of the HTTP exchange outlives the handshake: the request (its
    // header map) and the dispatcher's buffers are freed here, not when the
    // connection ends.
    drop(req);
    let (io, early) = {
        let FramedParts { io, read_buf, .. } = framed.into_parts();
        // The socket leaves the HTTP wrapper: frames pass untouched.
        let (io, unread) = io.into_parts();
        (io, Bytes::from([&read_buf[..], &unread[..]].concat()))
    };
    // A task of its own: the HTTP connection's task (the dispatcher, its
    // timers and this future's slot, about 4 KiB) ends here. A drain closes
    // every WebSocket itself (through its feed, or the drain watch before
    // `hello`) before the server stops, so the server need not wait on them.
    actix_rt::spawn(admitted.serve(io, early));
}

/// The 101 and the admitted session, or the refusal. After the checks only
/// this service makes (method, path, HTTP version, no body) they run in the
/// app route's order: drain, credential, handshake, caps and bucket.
async fn decide(state: &AppState, req: &Request) -> Result<(Response<()>, Admitted), HttpResponse> {
    let head = req.head();
    let refused = |err: ApiError| err.error_response();
    if head.method == Method::CONNECT {
        let err = ApiError::new(ErrorCode::MethodNotAllowed, "CONNECT is not served here");
        return Err(refused(err));
    }
    if head.uri.path() != WS_PATH {
        let err = ApiError::new(
            ErrorCode::NotFound,
            format!("WebSocket upgrades are served only at {WS_PATH}"),
        );
        return Err(refused(err));
    }
    if head.version < Version::HTTP_11 {
        // RFC 6455 §4.1: the opening handshake is an HTTP/1.1 request.
        let err = ApiError::new(
            ErrorCode::InvalidRequest,
            "a WebSocket handshake needs HTTP/1.1",
        );
        return Err(refused(err));
    }
    let carries_body = head.headers.get(CONTENT_LENGTH).is_some_and(|v| v != "0")
        || head.headers.contains_key(TRANSFER_ENCODING);
    if carries_body {
        // Its bytes would be read as the client's first frames.
        let err = ApiError::new(
            ErrorCode::InvalidRequest,
            "not a valid WebSocket handshake: it carries a body",
        );
        return Err(refused(err));
    }
    refuse_if_draining(state).map_err(refused)?;
    let query = head.uri.query().unwrap_or("");
    let caller = authenticate_head(state, &head.headers, query, true)
        .await
        .map_err(refused)?;
    let mut accept = actix_http::ws::handshake(head).map_err(handshake_refusal)?;
    let admitted = admit(
        state,
        caller,
        state.client_ip(req.peer_addr(), &head.headers),
    )
    .await
    .map_err(refused)?;
    Ok((accept.finish().drop_body(), admitted))
}

/// `res` as a head and a body to write (also `front.rs`).
pub(crate) async fn head_and_body(res: HttpResponse) -> (Response<()>, Bytes) {
    let (res, body) = Response::from(res).into_parts();
    let body = actix_http::body::to_bytes(body).await.unwrap_or_default();
    (res, body)
}

/// Writes `res` with `body`, marked as the connection's last answer.
async fn answer(framed: &mut Framed<Socket, Codec>, mut res: Response<()>, body: Bytes) {
    res.head_mut().set_connection_type(ConnectionType::Close);
    let size = body.size();
    // Head and body in one write: a WebSocket client reading a refusal
    // takes the body only from what arrived with the head.
    let _ = async {
        framed.feed(Message::Item((res, size))).await?;
        if !body.is_empty() {
            framed.feed(Message::Chunk(Some(body))).await?;
        }
        framed.feed(Message::Chunk(None)).await?;
        framed.flush().await
    }
    .await;
}
