//! `HEAD` wherever `GET` is served (RFC 9110 §9.3.2): the `GET`'s status
//! and headers, `Content-Length` included, and no content.
//!
//! A `HEAD` of a path that [`head_as_get`] allows is routed as its `GET`,
//! so one handler answers both and the two cannot drift apart. The
//! connection still knows the request was a `HEAD` (actix-http reads that
//! from the request line), so no content is written; the body is replaced by
//! one that only reports the `GET`'s size: a download or a stream is never
//! read just to be dropped. Routes that hold the request or act on a
//! read are left out (`method_not_allowed::GET_ONLY`): `HEAD` there stays
//! 405 with `Allow: GET`.

use crate::method_not_allowed::head_as_get;
use actix_web::body::{BodySize, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::Method;
use actix_web::middleware::Next;
use actix_web::web::Bytes;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Middleware just before routing: a `HEAD` that [`head_as_get`] allows
/// runs as a `GET`, and its answer keeps only the content's size.
pub async fn head_as_get_route(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<HeadOr<impl MessageBody>>, actix_web::Error> {
    let head = req.method() == Method::HEAD && head_as_get(req.path());
    if head {
        req.head_mut().method = Method::GET;
    }
    let res = next.call(req).await?;
    Ok(res.map_body(|_, body| HeadOr { body, head }))
}

pin_project_lite::pin_project! {
    /// A response body, or for a `HEAD` only its size: the body is kept
    /// (dropped with the answer) but never read.
    pub struct HeadOr<B> {
        #[pin]
        body: B,
        head: bool,
    }
}

impl<B: MessageBody> MessageBody for HeadOr<B> {
    type Error = B::Error;

    fn size(&self) -> BodySize {
        self.body.size()
    }

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        let this = self.project();
        if *this.head {
            Poll::Ready(None)
        } else {
            this.body.poll_next(cx)
        }
    }
}
