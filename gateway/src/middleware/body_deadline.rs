//! A deadline on request bodies (`timing.request_body_timeout`, 60 s).
//!
//! actix bounds the time to a request's head (`client_request_timeout`)
//! but not to its body: a client that declares a `Content-Length` and
//! then trickles bytes, or sends none, holds its connection and a worker's
//! handler for as long as it likes (slowloris). Every body therefore comes
//! through [`Deadlined`], which ends the body stream with an error once the
//! deadline passes; the handler's read fails, and the answer becomes 408
//! `REQUEST_TIMEOUT` whatever the handler made of the failed read. actix
//! then closes the connection, since the body was not read to its end.
//!
//! Not yet closed: a chunked body that stalls gets its 408 (marked
//! `Connection: close`), but actix-http keeps reading the rest of the body
//! to discard it, so the connection stays until the client ends it.
//!
//! The deadline runs from the head to the body's end, whatever the route:
//! at the default an upload of `files.max_bytes` (25 MB) needs about
//! 3.5 Mbit/s. Requests without a body are not affected.

use crate::error::ApiError;
use crate::malformed::EndAfterAnswer;
use crate::state::AppState;
use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::error::PayloadError;
use actix_web::http::header::{CONTENT_LENGTH, TRANSFER_ENCODING};
use actix_web::middleware::Next;
use actix_web::web::{self, Bytes};
use actix_web::HttpMessage;
use futures_util::Stream;
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;
use switchboard_protocol::error::ErrorCode;

/// 408 `REQUEST_TIMEOUT` for a body not complete `limit`
/// (`timing.request_body_timeout`) after its head; the long-poll's front
/// (`realtime/front.rs`) answers it too.
pub fn body_timed_out(limit: Duration) -> ApiError {
    ApiError::new(
        ErrorCode::RequestTimeout,
        format!(
            "the request body did not arrive within {} s (timing.request_body_timeout)",
            limit.as_secs()
        ),
    )
}

/// Middleware around the whole app: puts every request body under the
/// deadline, and answers 408 when it passed.
pub async fn body_deadline(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    let Some(limit) = req
        .app_data::<web::Data<AppState>>()
        .map(|s| s.settings.timing.request_body_timeout)
    else {
        return Ok(next.call(req).await?.map_into_left_body());
    };
    let headers = req.headers();
    let has_body = headers.contains_key(TRANSFER_ENCODING)
        || headers
            .get(CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0");
    if !has_body {
        return Ok(next.call(req).await?.map_into_left_body());
    }
    let expired = Rc::new(Cell::new(false));
    let end_reading = req.conn_data::<EndAfterAnswer>().cloned();
    let body = req.take_payload();
    let deadlined = Deadlined::new(body, limit, expired.clone());
    req.set_payload(Payload::Stream {
        payload: Box::pin(deadlined),
    });
    let res = next.call(req).await?;
    if !expired.get() {
        return Ok(res.map_into_left_body());
    }
    // The rest of the body stays unread: the connection ends after this
    // answer. Left to itself actix-http would go on reading a chunked body
    // to its end to discard it, holding the connection as long as the
    // client trickles (or sends nothing).
    if let Some(end) = end_reading {
        end.set();
    }
    let refusal = body_timed_out(limit);
    let mut res = res.error_response(refusal);
    // The rest of the body may still come: the connection cannot carry
    // another request.
    res.response_mut()
        .head_mut()
        .set_connection_type(actix_web::http::ConnectionType::Close);
    Ok(res.map_into_right_body())
}

/// A body stream that fails once `deadline` passed before its end.
struct Deadlined {
    inner: Payload,
    sleep: Pin<Box<tokio::time::Sleep>>,
    expired: Rc<Cell<bool>>,
    done: bool,
}

impl Deadlined {
    fn new(inner: Payload, limit: Duration, expired: Rc<Cell<bool>>) -> Self {
        Deadlined {
            inner,
            sleep: Box::pin(tokio::time::sleep(limit)),
            expired,
            done: false,
        }
    }
}

impl Stream for Deadlined {
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        match Pin::new(&mut self.inner).poll_next(cx) {
            Poll::Ready(None) => {
                self.done = true;
                Poll::Ready(None)
            }
            Poll::Ready(Some(item)) => Poll::Ready(Some(item)),
            Poll::Pending => match self.sleep.as_mut().poll(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(()) => {
                    self.done = true;
                    self.expired.set(true);
                    Poll::Ready(Some(Err(PayloadError::Io(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "the request body did not arrive in time",
                    )))))
                }
            },
        }
    }
}
