//! A WebSocket's outbound side: the frames its session wrote that the socket
//! has not taken yet.
//!
//! The session encodes frames straight into its [`Outbox`]; the socket's task
//! (`socket::serve`) takes everything in it as one write. A `cursor` frame
//! closes each write that carries events: every delivery the session handled
//! since the last write shares it (docs/architecture.md, "The cursor
//! invariant", rule 1: it names a position that covers every event before
//! it), so a burst of events costs one cursor
//! frame and one write, not one per event.
//!
//! Backpressure: the session runs only while the socket's task polls it, and
//! that task polls it only once the socket accepted the previous write. A
//! client that stops reading therefore stalls its session; the feed notices
//! the growing [`Backlog`](switchboard_actors::session::Backlog) and abandons
//! the session, and the socket's task then writes [`slow_consumer_close`]
//! instead of what the outbox holds; the client resumes from its last cursor.

use crate::error::SessionEnd;
use actix_http::ws::{CloseCode, CloseReason as WsCloseReason, OpCode, Parser};
use actix_web::web::{Bytes, BytesMut};
use std::cell::RefCell;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::Instant;
use switchboard_actors::session::CloseReason;
use switchboard_protocol::cursor::{EntryId, Epoch, LogPosition};
use switchboard_protocol::frame::ServerFrame;

/// Longest close reason, bytes: a control frame carries at most 125 bytes,
/// two of them the close code (RFC 6455 §5.5).
const MAX_CLOSE_REASON: usize = 123;

/// An outbox shared by a session and its socket's task (one worker thread).
pub type SharedOutbox = Rc<RefCell<Outbox>>;

/// Encoded frames waiting for the socket (server frames are unmasked).
pub struct Outbox {
    buf: BytesMut,
    /// The epoch `cursor` frames name, once the session is live.
    epoch: Epoch,
    /// Events were queued since the last `cursor` frame: the entry the
    /// frame closing the next write names.
    cursor_due: Option<EntryId>,
    /// When the last `cursor` frame was queued (for the idle cursor frame).
    last_cursor_at: Instant,
    /// A close frame is queued: nothing may follow it.
    closed: bool,
    /// Waits for the socket to take what is queued (see [`flushed`]).
    flush_waiter: Option<Waker>,
}

impl Outbox {
    /// An empty outbox, shared.
    pub fn shared() -> SharedOutbox {
        Rc::new(RefCell::new(Outbox {
            buf: BytesMut::new(),
            epoch: Epoch(String::new()),
            cursor_due: None,
            last_cursor_at: Instant::now(),
            closed: false,
            flush_waiter: None,
        }))
    }

    /// Queues a text frame with `payload` (JSON).
    pub fn text(&mut self, payload: &[u8]) {
        if !self.closed {
            Parser::write_message(&mut self.buf, payload, OpCode::Text, true, false);
        }
    }

    /// The session went live in `epoch`: its `cursor` frames name it.
    pub fn go_live(&mut self, epoch: Epoch) {
        self.epoch = epoch;
    }

    /// Events were just queued and the session's position is `through`: a
    /// `cursor` frame at `through` (or later, see [`Outbox::advance`])
    /// closes the next write.
    pub fn cursor_after(&mut self, through: EntryId) {
        if !self.closed {
            self.cursor_due = Some(through);
        }
    }

    /// The session's position moved to `through` without events: a `cursor`
    /// frame already due names it instead.
    pub fn advance(&mut self, through: EntryId) {
        if let Some(due) = &mut self.cursor_due {
            *due = through;
        }
    }

    /// Queues a `cursor` frame at `entry` now.
    pub fn cursor(&mut self, entry: EntryId) {
        if self.closed {
            return;
        }
        self.cursor_due = None;
        self.last_cursor_at = Instant::now();
        self.buf
            .extend_from_slice(&cursor_frame(&self.epoch, entry));
    }

    /// When the last `cursor` frame was queued.
    pub fn last_cursor_at(&self) -> Instant {
        self.last_cursor_at
    }

    /// Queues a ping with an empty payload.
    pub fn ping(&mut self) {
        if !self.closed {
            Parser::write_message(&mut self.buf, b"", OpCode::Ping, true, false);
        }
    }

    /// Queues the pong answering a ping's `payload`.
    pub fn pong(&mut self, payload: &[u8]) {
        if !self.closed {
            Parser::write_message(&mut self.buf, payload, OpCode::Pong, true, false);
        }
    }

    /// Queues a close frame (with `reason`, or none to echo a client's close
    /// without one); nothing is queued after it. A reason longer than a
    /// close frame can carry (123 bytes, RFC 6455 §5.5) is cut at a
    /// character boundary; the `error` frame before it has the whole text.
    pub fn close(&mut self, mut reason: Option<WsCloseReason>) {
        if let Some(text) = reason.as_mut().and_then(|r| r.description.as_mut()) {
            let mut end = text.len().min(MAX_CLOSE_REASON);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
        }
        if !self.closed {
            self.closed = true;
            self.cursor_due = None;
            Parser::write_close(&mut self.buf, reason, false);
        }
    }

    /// Answers a client's close: what is queued and not written yet is
    /// dropped (the client no longer reads it; it resumes from the last
    /// `cursor` frame it got) and the close echo is all that goes out.
    pub fn close_now(&mut self, reason: Option<WsCloseReason>) {
        if !self.closed {
            self.buf.clear();
        }
        self.close(reason);
    }

    /// Whether a close frame is queued (or went out).
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Whether there is anything to write.
    pub fn has_output(&self) -> bool {
        !self.buf.is_empty() || self.cursor_due.is_some()
    }

    /// Everything queued, closed by the due `cursor` frame, as one write.
    /// The outbox keeps no buffer afterwards (an idle session holds none).
    pub fn take(&mut self) -> Option<Bytes> {
        if let Some(entry) = self.cursor_due {
            self.cursor(entry);
        }
        if let Some(waiter) = self.flush_waiter.take() {
            waiter.wake();
        }
        if self.buf.is_empty() {
            return None;
        }
        Some(std::mem::take(&mut self.buf).freeze())
    }
}

/// Resolves once the socket took everything `outbox` holds now. The session
/// runs only after the socket accepted its last write, so a session that
/// awaits this before queueing more (a replay's next page) holds one
/// write's worth of frames at a time, however far back its client resumed.
pub async fn flushed(outbox: SharedOutbox) {
    std::future::poll_fn(|cx| {
        let mut outbox = outbox.borrow_mut();
        if outbox.has_output() {
            outbox.flush_waiter = Some(cx.waker().clone());
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await
}

/// The encoded `cursor` frame of `entry` in `epoch`. Every session of a Bay
/// that a batch reaches names the same position, and a worker runs many
/// sessions: each worker thread renders a position's frame once and shares
/// the bytes.
fn cursor_frame(epoch: &Epoch, entry: EntryId) -> Bytes {
    thread_local! {
        static LAST: RefCell<Option<(LogPosition, Bytes)>> = const { RefCell::new(None) };
    }
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if let Some((cached, frame)) = last.as_ref() {
            if cached.entry == entry && cached.epoch == *epoch {
                return frame.clone();
            }
        }
        let pos = LogPosition {
            epoch: epoch.clone(),
            entry,
        };
        let cursor = pos.encode();
        let json = ServerFrame::Cursor { cursor: &cursor }.to_json();
        let mut frame = BytesMut::new();
        Parser::write_message(&mut frame, json, OpCode::Text, true, false);
        let frame = frame.freeze();
        *last = Some((pos, frame.clone()));
        frame
    })
}

/// The `error` frame and the close frame of a slow consumer
/// ([`CloseReason::TooSlow`]: `SLOW_CONSUMER`, 1008), encoded.
pub fn slow_consumer_close() -> Bytes {
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

#[cfg(test)]
mod tests {
    use super::*;
    use actix_codec::Decoder;
    use actix_http::ws::{Codec, Frame};

    /// The text frames in `bytes`, decoded as a client would.
    fn texts(bytes: Bytes) -> Vec<String> {
        let mut buf = BytesMut::from(&bytes[..]);
        let mut codec = Codec::new().client_mode();
        let mut out = Vec::new();
        while let Some(frame) = codec.decode(&mut buf).unwrap() {
            match frame {
                Frame::Text(t) => out.push(String::from_utf8(t.to_vec()).unwrap()),
                Frame::Close(_) => out.push("<close>".into()),
                other => out.push(format!("{other:?}")),
            }
        }
        out
    }

    fn entry(seq: u64) -> EntryId {
        EntryId { ms: 1, seq }
    }

    fn encoded(seq: u64) -> String {
        LogPosition {
            epoch: Epoch("e7".into()),
            entry: entry(seq),
        }
        .encode()
    }

    #[test]
    fn one_cursor_frame_closes_each_write_that_carries_events() {
        let outbox = Outbox::shared();
        let mut o = outbox.borrow_mut();
        o.go_live(Epoch("e7".into()));
        assert!(o.take().is_none(), "nothing queued, nothing written");
        o.text(br#"{"t":"event","n":1}"#);
        o.cursor_after(entry(1));
        o.text(br#"{"t":"event","n":2}"#);
        o.cursor_after(entry(2));
        o.advance(entry(3));
        let frames = texts(o.take().unwrap());
        assert_eq!(frames.len(), 3, "two events and one cursor: {frames:?}");
        assert!(frames[2].contains(&encoded(3)), "{frames:?}");
        assert!(o.take().is_none(), "the cursor went out with the write");
        o.advance(entry(4));
        assert!(o.take().is_none(), "no events, no cursor frame");
        o.cursor(entry(5));
        let frames = texts(o.take().unwrap());
        assert_eq!(frames.len(), 1);
        assert!(frames[0].contains(&encoded(5)), "{frames:?}");
    }

    #[test]
    fn nothing_follows_a_close_frame() {
        let outbox = Outbox::shared();
        let mut o = outbox.borrow_mut();
        o.text(b"{}");
        o.cursor_after(entry(1));
        o.close(None);
        o.text(b"{}");
        o.ping();
        let frames = texts(o.take().unwrap());
        assert_eq!(frames, vec!["{}".to_owned(), "<close>".to_owned()]);
    }

    #[test]
    fn a_long_close_reason_is_cut_to_what_a_control_frame_carries() {
        let outbox = Outbox::shared();
        let mut o = outbox.borrow_mut();
        // 2-byte characters: 123 bytes would split one.
        o.close(Some(WsCloseReason {
            code: CloseCode::Other(4002),
            description: Some("é".repeat(200)),
        }));
        let bytes = o.take().unwrap();
        let mut buf = BytesMut::from(&bytes[..]);
        match Codec::new().client_mode().decode(&mut buf).unwrap() {
            Some(Frame::Close(Some(reason))) => {
                assert_eq!(reason.code, CloseCode::Other(4002));
                assert_eq!(reason.description, Some("é".repeat(61)));
            }
            other => panic!("{other:?}"),
        }
        assert!(
            bytes.len() <= 2 + 125,
            "one control frame of at most 125 bytes"
        );
    }

    #[test]
    fn the_slow_consumer_close_is_an_error_frame_then_1008() {
        let frames = texts(slow_consumer_close());
        assert!(frames[0].contains("SLOW_CONSUMER"), "{frames:?}");
        assert_eq!(frames[1], "<close>");
    }
}
