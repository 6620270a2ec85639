//! Ending the connection of a WebSocket session its feed gave up on.
//!
//! A WebSocket actor only runs while its output stream is polled, and the
//! socket's task (`socket::serve`) polls it only when the socket accepted
//! the previous write. A client that stops reading therefore stalls its
//! actor; the feed notices the growing [`Backlog`] and abandons the session.
//! [`Drained`] wraps the output stream and, as soon as it is polled after that, writes the
//! `error` frame and close of [`CloseReason::TooSlow`] (`SLOW_CONSUMER`,
//! 1008) behind what the socket already holds and ends the stream, which
//! closes the connection; the client resumes from its last cursor.

use crate::error::SessionEnd;
use actix_http::ws::{CloseCode, CloseReason as WsCloseReason, OpCode, Parser};
use actix_web::web::{Bytes, BytesMut};
use futures_util::Stream;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use switchboard_actors::session::{Backlog, CloseReason};
use switchboard_protocol::frame::ServerFrame;

/// The WebSocket output stream, closed once the session is abandoned.
pub struct Drained<S> {
    inner: S,
    backlog: Arc<Backlog>,
    /// Set once the closing frames went out; nothing follows them.
    finished: bool,
}

impl<S> Drained<S> {
    /// Wraps `inner`, watching `backlog`.
    pub fn new(inner: S, backlog: Arc<Backlog>) -> Self {
        Drained {
            inner,
            backlog,
            finished: false,
        }
    }
}

/// The `error` frame and the close frame of a slow consumer, encoded as a
/// server writes them (unmasked).
fn slow_consumer_close() -> Bytes {
    let end = SessionEnd::of(CloseReason::TooSlow);
    let error = ServerFrame::Error {
        code: end.ws,
        message: end.message,
    }
    .to_json();
    let mut out = BytesMut::new();
    Parser::write_message(&mut out, error, OpCode::Text, true, false);
    Parser::write_close(
        &mut out,
        Some(WsCloseReason {
            code: CloseCode::Other(end.ws.close_code()),
            description: Some(end.message.to_owned()),
        }),
        false,
    );
    out.freeze()
}

impl<S, E> Stream for Drained<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    type Item = Result<Bytes, E>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.finished {
            return Poll::Ready(None);
        }
        if !self.backlog.is_abandoned() {
            match Pin::new(&mut self.inner).poll_next(cx) {
                // The session may stop on being abandoned before this stream
                // sees the flag: it still owes the client the close.
                Poll::Ready(None) if self.backlog.is_abandoned() => {}
                other => return other,
            }
        }
        self.finished = true;
        Poll::Ready(Some(Ok(slow_consumer_close())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    #[actix_rt::test]
    async fn closes_the_stream_once_the_backlog_is_abandoned() {
        let backlog = Backlog::bounded(10);
        let chunks: Vec<Result<Bytes, ()>> =
            vec![Ok(Bytes::from_static(b"a")), Ok(Bytes::from_static(b"b"))];
        let mut s = Drained::new(futures_util::stream::iter(chunks), backlog.clone());
        assert!(s.next().await.is_some());
        assert!(!backlog.charge(11));
        let close = s.next().await.unwrap().unwrap();
        assert_eq!(
            close,
            slow_consumer_close(),
            "abandoned: the close goes out"
        );
        assert!(s.next().await.is_none(), "then the stream ends");
    }
}
