//! Ending the connection of a WebSocket session its feed gave up on.
//!
//! A WebSocket actor only runs while its response stream is polled, and the
//! HTTP layer polls it only when the socket accepts more bytes. A client
//! that stops reading therefore stalls its actor; the feed notices the
//! growing [`Backlog`] and abandons the session. [`Drained`] wraps the
//! response stream and ends it as soon as it is polled after that, which
//! closes the connection; the client resumes from its last cursor.

use actix_web::web::Bytes;
use futures_util::Stream;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use switchboard_actors::session::Backlog;

/// The WebSocket response stream, ended once the session is abandoned.
pub struct Drained<S> {
    inner: S,
    backlog: Arc<Backlog>,
}

impl<S> Drained<S> {
    /// Wraps `inner`, watching `backlog`.
    pub fn new(inner: S, backlog: Arc<Backlog>) -> Self {
        Drained { inner, backlog }
    }
}

impl<S, E> Stream for Drained<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    type Item = Result<Bytes, E>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.backlog.is_abandoned() {
            return Poll::Ready(None);
        }
        Pin::new(&mut self.inner).poll_next(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    #[actix_rt::test]
    async fn ends_the_stream_once_the_backlog_is_abandoned() {
        let backlog = Backlog::bounded(10);
        let chunks: Vec<Result<Bytes, ()>> =
            vec![Ok(Bytes::from_static(b"a")), Ok(Bytes::from_static(b"b"))];
        let mut s = Drained::new(futures_util::stream::iter(chunks), backlog.clone());
        assert!(s.next().await.is_some());
        assert!(!backlog.charge(11));
        assert!(s.next().await.is_none(), "abandoned: the stream ends");
    }
}
