//! A WebSocket's inbound side: the client's bytes, read off the socket and
//! decoded into frames (RFC 6455 §5) for the session.
//!
//! [`Inbound`] reads through a stack buffer and keeps only the bytes that do
//! not form a whole frame yet, so an idle connection holds no read buffer
//! (BENCHMARKS.md, "WebSockets on their own socket").
//!
//! Frames are parsed here rather than by actix's `Codec`, which logs a
//! client's fragmented control frame at ERROR and reports a close frame's
//! bad code and its non-UTF-8 reason as the same error. A fragmented text
//! message is put back together (RFC 6455 §5.4: a server must accept
//! fragmentation), within the same size limit as one frame, and its UTF-8 is
//! checked as the fragments arrive (§8.1: fail at the first byte that cannot
//! start valid UTF-8).
//!
//! Oversized frames are refused as soon as their header arrives: actix's
//! decoder checks a frame's declared length against its limit only once the
//! whole payload has been buffered, so a client could make the server buffer
//! a frame of any size first. [`HeaderScan`] follows the frame headers as the
//! bytes pass (it never copies payloads) and stops the stream at the first
//! header that declares more than the limit.

use actix::{Actor, Addr, Handler, Message};
use actix_http::ws::{CloseReason, OpCode, Parser, ProtocolError};
use actix_web::web::{Bytes, BytesMut};
use bytestring::ByteString;
use futures_util::{Stream, StreamExt};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::time::{Instant, MissedTickBehavior};

/// Largest read from the socket in one call, bytes. A client sends small
/// frames (`hello`, pongs); a larger frame arrives over several reads.
const READ_CHUNK: usize = 4096;

/// One frame from the client, as the session handles it.
#[derive(Debug)]
pub enum ClientMessage {
    /// A text message (one frame, or its fragments put together); its
    /// payload is valid UTF-8.
    Text(ByteString),
    /// A binary frame, or the first fragment of a binary message (refused
    /// by the framing contract; payload dropped).
    Binary,
    /// A ping, with its payload (at most 125 bytes) to echo in the pong.
    Ping(Bytes),
    /// A pong.
    Pong,
    /// A close frame, with the client's code and reason if it gave one.
    Close(Option<CloseReason>),
}

/// Why the client's bytes stopped being frames. The stream ends after it.
#[derive(Debug)]
pub enum InboundError {
    /// A frame declared a payload above the limit (`limits.max_ws_frame_bytes`).
    TooBig,
    /// A fragmented text message grew past the same limit once put
    /// together, though each of its frames kept within it.
    MessageTooBig,
    /// A text message (or a fragment of one, as soon as it cannot be the
    /// start of valid UTF-8), or a close frame's reason, that is not UTF-8.
    NotUtf8,
    /// The bytes break RFC 6455 (reserved bits, a fragmented control frame
    /// (`ContinuationFragment`), an unmasked client frame, an unknown
    /// opcode, a control frame above 125 bytes, a close code §7.4 does not
    /// allow, a continuation with no message to continue or a new message
    /// inside one, ...).
    Protocol(ProtocolError),
    /// A close frame with a code RFC 6455 §7.4 does not allow a client to
    /// send (e.g. 999, 1005, 1006, 1015, 2999, 5000).
    BadCloseCode(u16),
    /// A frame header whose 64-bit payload length has its most
    /// significant bit set, which RFC 6455 §5.2 forbids; refused from the
    /// header, like [`InboundError::TooBig`].
    BadLength,
    /// The socket failed.
    Read(std::io::Error),
}

/// The client's frames, read from `R` (the read half of an upgraded socket).
pub struct Inbound<R> {
    io: R,
    /// Bytes read that do not form a whole frame yet. Emptied (capacity
    /// included) whenever the last frame in it was decoded.
    buf: BytesMut,
    /// Largest frame, and largest message put together from fragments, bytes.
    max_frame: usize,
    /// The fragmented text message being put together, if one is.
    fragments: Option<Fragments>,
    scan: HeaderScan,
    /// Most bytes read ahead of the frames handed on: a whole frame of the
    /// largest size allowed, header included.
    read_ahead: usize,
    /// A frame declared more than the limit: once the whole frames read
    /// before its header are handed on, the stream ends with
    /// [`InboundError::TooBig`].
    oversize: bool,
    /// Like `oversize`, for a header [`InboundError::BadLength`] refuses.
    bad_length: bool,
    /// The client's side of the socket ended (its end, or a read error,
    /// kept in `read_error` until the frames before it are handed on).
    ended: bool,
    read_error: Option<std::io::Error>,
    /// Nothing follows.
    finished: bool,
    /// Set once a close frame's header was read, decoded or not yet.
    closing: ClientClosing,
}

/// Whether the client sent a close frame: set by [`Inbound`] as soon as it
/// reads the frame's header, before the session handles the frame, so the
/// socket's task stops writing what the client no longer wants and the
/// close echo goes out at once (RFC 6455 §5.5.1: "as soon as practical").
#[derive(Clone, Default)]
pub struct ClientClosing(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl ClientClosing {
    /// Whether a close frame arrived.
    pub fn is_set(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn set(&self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

impl<R> Inbound<R> {
    /// Frames from `io`, after `early` (the bytes the HTTP layer read past
    /// the request head; usually none). Frames declaring more than
    /// `max_frame` bytes end the stream with [`InboundError::TooBig`].
    pub fn new(io: R, early: &[u8], max_frame: usize) -> Self {
        let mut inbound = Inbound {
            io,
            buf: BytesMut::new(),
            max_frame,
            fragments: None,
            scan: HeaderScan::new(max_frame),
            read_ahead: max_frame.saturating_add(14),
            oversize: false,
            bad_length: false,
            ended: false,
            read_error: None,
            finished: false,
            closing: ClientClosing::default(),
        };
        inbound.take_in(early);
        inbound
    }

    /// Set once the client sent a close frame (see [`ClientClosing`]).
    pub fn closing(&self) -> ClientClosing {
        self.closing.clone()
    }

    /// Buffers `bytes`, up to the header of a frame declaring more than
    /// the limit if they hold one (the frames before it still count).
    fn take_in(&mut self, bytes: &[u8]) {
        match self.scan.scan(bytes) {
            None => self.buf.extend_from_slice(bytes),
            Some(refused_at) => {
                self.buf.extend_from_slice(&bytes[..refused_at]);
                if self.scan.bad_length {
                    self.bad_length = true;
                } else {
                    self.oversize = true;
                }
            }
        }
        if self.scan.saw_close {
            self.closing.set();
        }
    }

    /// Whether the client's side of the socket has ended (it closed or
    /// reset the connection): the frames not handed on yet are its last.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// The socket's read side.
    pub fn get_ref(&self) -> &R {
        &self.io
    }

    /// Decodes the next whole message in `buf`, if there is one: fragments
    /// of a text message are taken in until its last.
    fn decode(&mut self) -> Option<Result<ClientMessage, InboundError>> {
        let decoded = loop {
            match Parser::parse(&mut self.buf, true, self.max_frame) {
                Ok(None) => return None,
                Ok(Some((fin, opcode, payload))) => {
                    let payload = payload.map(BytesMut::freeze).unwrap_or_default();
                    if let Some(message) = self.frame(fin, opcode, payload) {
                        break message;
                    }
                }
                // The refused header is the last thing buffered (see
                // `take_in`), so the decoder's overflow is that header's.
                Err(ProtocolError::Overflow) if self.bad_length => {
                    break Err(InboundError::BadLength)
                }
                Err(ProtocolError::Overflow) => break Err(InboundError::TooBig),
                Err(e) => break Err(InboundError::Protocol(e)),
            }
        };
        if decoded.is_err() {
            self.finished = true;
        }
        if self.buf.is_empty() {
            // Whatever capacity the last frame needed is not kept while idle.
            self.buf = BytesMut::new();
        }
        Some(decoded)
    }

    /// The session's view of one frame (RFC 6455 §5.4, §5.5); `None` for a
    /// fragment taken in that does not finish its message.
    fn frame(
        &mut self,
        fin: bool,
        opcode: OpCode,
        payload: Bytes,
    ) -> Option<Result<ClientMessage, InboundError>> {
        let protocol = |e| Some(Err(InboundError::Protocol(e)));
        Some(Ok(match (opcode, fin) {
            // §5.5: control frames must not be fragmented.
            (OpCode::Ping | OpCode::Pong | OpCode::Close, false) => {
                return protocol(ProtocolError::ContinuationFragment(opcode));
            }
            (OpCode::Ping, true) => ClientMessage::Ping(payload),
            (OpCode::Pong, true) => ClientMessage::Pong,
            (OpCode::Close, true) => match Parser::try_parse_close_payload(&payload) {
                Ok(reason) => ClientMessage::Close(reason),
                // The code alone is allowed: what failed is the reason's UTF-8.
                Err(_)
                    if payload.len() > 2
                        && Parser::try_parse_close_payload(&payload[..2]).is_ok() =>
                {
                    return Some(Err(InboundError::NotUtf8));
                }
                Err(_) if payload.len() >= 2 => {
                    let code = u16::from_be_bytes([payload[0], payload[1]]);
                    return Some(Err(InboundError::BadCloseCode(code)));
                }
                Err(e) => return protocol(e),
            },
            // §5.4: a fragmented message's fragments are not interleaved
            // with another message.
            (OpCode::Text | OpCode::Binary, _) if self.fragments.is_some() => {
                return protocol(ProtocolError::ContinuationStarted);
            }
            (OpCode::Binary, _) => ClientMessage::Binary,
            (OpCode::Text, true) => match ByteString::try_from(payload) {
                Ok(text) => ClientMessage::Text(text),
                Err(_) => return Some(Err(InboundError::NotUtf8)),
            },
            (OpCode::Text, false) => {
                self.fragments = Some(Fragments::default());
                return self.fragment(&payload, false);
            }
            (OpCode::Continue, _) if self.fragments.is_none() => {
                return protocol(ProtocolError::ContinuationNotStarted);
            }
            (OpCode::Continue, fin) => return self.fragment(&payload, fin),
            // `Parser::parse` refuses unknown opcodes itself.
            (OpCode::Bad, _) => return protocol(ProtocolError::BadOpCode),
        }))
    }

    /// Adds a fragment to the message being put together; the message once
    /// `fin`, `None` before.
    fn fragment(
        &mut self,
        payload: &[u8],
        fin: bool,
    ) -> Option<Result<ClientMessage, InboundError>> {
        let f = self.fragments.as_mut()?;
        if f.bytes.len() + payload.len() > self.max_frame {
            return Some(Err(InboundError::MessageTooBig));
        }
        f.bytes.extend_from_slice(payload);
        match std::str::from_utf8(&f.bytes[f.checked..]) {
            Ok(_) => f.checked = f.bytes.len(),
            // Cut inside a character: the next fragment may complete it.
            Err(e) if e.error_len().is_none() && !fin => f.checked += e.valid_up_to(),
            Err(_) => return Some(Err(InboundError::NotUtf8)),
        }
        if !fin {
            return None;
        }
        let whole = self.fragments.take()?.bytes.freeze();
        Some(
            ByteString::try_from(whole).map_or(Err(InboundError::NotUtf8), |text| {
                Ok(ClientMessage::Text(text))
            }),
        )
    }
}

/// A fragmented text message being put together.
#[derive(Default)]
struct Fragments {
    bytes: BytesMut,
    /// How many of `bytes` are known to be valid UTF-8; the rest is the
    /// start of a character cut by the fragment's end.
    checked: usize,
}

impl<R: AsyncRead + Unpin> Inbound<R> {
    /// Reads what the socket holds now, up to a whole frame of the largest
    /// size ahead of the frames handed on. `true` when it must be polled
    /// again once the socket is readable; `false` when it read all it may
    /// (the buffer is full, or the client's side ended).
    fn fill(&mut self, cx: &mut Context<'_>) -> bool {
        while !self.ended && !self.oversize && !self.bad_length && self.buf.len() < self.read_ahead
        {
            let mut chunk = [0u8; READ_CHUNK];
            let mut read = ReadBuf::new(&mut chunk);
            match Pin::new(&mut self.io).poll_read(cx, &mut read) {
                Poll::Pending => return true,
                Poll::Ready(Err(e)) => {
                    self.ended = true;
                    self.read_error = Some(e);
                }
                // The end of the socket; an unfinished frame is dropped.
                Poll::Ready(Ok(())) if read.filled().is_empty() => self.ended = true,
                Poll::Ready(Ok(())) => self.take_in(read.filled()),
            }
        }
        false
    }
}

impl<R: AsyncRead + Unpin> Stream for Inbound<R> {
    type Item = Result<ClientMessage, InboundError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.finished {
            return Poll::Ready(None);
        }
        // Take in everything the socket holds now (up to a whole frame of
        // the largest size), so that its end is known together with the
        // frames before it (see `pump`).
        loop {
            let waiting = this.fill(cx);
            if let Some(item) = this.decode() {
                return Poll::Ready(Some(item));
            }
            if this.oversize {
                this.finished = true;
                return Poll::Ready(Some(Err(InboundError::TooBig)));
            }
            if this.bad_length {
                this.finished = true;
                return Poll::Ready(Some(Err(InboundError::BadLength)));
            }
            if let Some(e) = this.read_error.take() {
                this.finished = true;
                return Poll::Ready(Some(Err(InboundError::Read(e))));
            }
            if this.ended {
                this.finished = true;
                return Poll::Ready(None);
            }
            if waiting {
                return Poll::Pending;
            }
            // The buffer was full, and decoding took in fragments of a
            // message without finishing it: there is room again, read on.
            if this.buf.len() < this.read_ahead {
                continue;
            }
            break;
        }
        // Read ahead to the limit without a whole frame: not possible (a
        // frame within the limit fits, a larger one is `oversize`), but
        // never stall on it.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// A client frame for the session's mailbox; `None`: the client's frames
/// ended (the socket closed, or after an [`InboundError`]).
#[derive(Message)]
#[rtype(result = "()")]
pub struct FromClient(pub Option<Result<ClientMessage, InboundError>>);

/// The session's clock: one per tick (its ping and idle-cursor checks).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Tick;

/// The connection's inbound task: hands the client's frames and a [`Tick`]
/// every `tick` to `session`, one at a time. The next frame is read only
/// once the session handled the last, so a client cannot queue work faster
/// than its session runs, and a session stalled on a client that does not
/// read stops reading it too.
///
/// A task of its own rather than streams inside the actor: an actor polls
/// everything it holds on every turn, i.e. on every delivery, and the
/// socket's read side and the clock are idle nearly always. Ends once it
/// handed over the end of the client's frames, or when the session stopped.
pub async fn pump<R, A>(mut inbound: Inbound<R>, session: Addr<A>, tick: Duration)
where
    R: AsyncRead + Unpin,
    A: Actor<Context = actix::Context<A>> + Handler<FromClient> + Handler<Tick>,
{
    let mut clock = tokio::time::interval_at(Instant::now() + tick, tick);
    clock.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            frame = inbound.next() => {
                if inbound.ended() {
                    // The client left right after this: its last frames
                    // and the end go over together, and the session takes
                    // them in one turn, stopping before anything they
                    // started runs (a `hello` from a client already gone
                    // opens nothing, so it cannot displace the client's
                    // next connection).
                    let mut next = frame;
                    while let Some(item) = next {
                        session.do_send(FromClient(Some(item)));
                        next = inbound.next().await;
                    }
                    session.do_send(FromClient(None));
                    return;
                }
                let end = frame.is_none();
                if forward(&session, FromClient(frame), &mut inbound).await.is_err() || end {
                    return;
                }
            }
            _ = clock.tick() => {
                if forward(&session, Tick, &mut inbound).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Sends `msg` to the session and waits until it is handled, reading the
/// socket ahead meanwhile (bounded by [`Inbound`]'s read-ahead) without
/// decoding: a session stalled on a long write to a slow client is not
/// handed more frames, yet a close frame the client sends is seen at once
/// ([`ClientClosing`]).
async fn forward<R, A, M>(
    session: &Addr<A>,
    msg: M,
    inbound: &mut Inbound<R>,
) -> Result<(), actix::MailboxError>
where
    R: AsyncRead + Unpin,
    A: Actor<Context = actix::Context<A>> + Handler<M>,
    M: Message<Result = ()> + Send + 'static,
{
    let mut sent = std::pin::pin!(session.send(msg));
    let mut reading = true;
    std::future::poll_fn(|cx| {
        if let Poll::Ready(res) = sent.as_mut().poll(cx) {
            return Poll::Ready(res);
        }
        if reading {
            reading = inbound.fill(cx);
        }
        Poll::Pending
    })
    .await
}

/// Where the scanner is inside the client's frame sequence.
enum Position {
    /// Reading a header: the bytes seen so far (at most 14).
    Header { bytes: [u8; 14], have: usize },
    /// Inside a payload: bytes left (u64: a header can declare up to 2^63).
    Payload { left: u64 },
}

/// Follows the client's frame headers across reads, to refuse an oversized
/// frame from its header alone.
pub struct HeaderScan {
    /// Largest payload a client frame may declare, bytes.
    max_frame: u64,
    position: Position,
    /// A close frame's header went by.
    pub saw_close: bool,
    /// The header [`HeaderScan::scan`] stopped at declared a 64-bit length
    /// with its top bit set (RFC 6455 §5.2), not an oversized payload.
    pub bad_length: bool,
}

impl HeaderScan {
    /// A scanner at the start of a frame, refusing declared payloads above `max_frame` bytes.
    pub fn new(max_frame: usize) -> Self {
        HeaderScan {
            max_frame: max_frame as u64,
            position: Position::Header {
                bytes: [0; 14],
                have: 0,
            },
            saw_close: false,
            bad_length: false,
        }
    }

    /// Follows `chunk` through the frame structure. Returns the index in
    /// `chunk` of the byte that completes the first header declaring an
    /// oversized payload, or a 64-bit length with its top bit set
    /// ([`HeaderScan::bad_length`]), if there is one (the scanner stops
    /// there).
    pub fn scan(&mut self, chunk: &[u8]) -> Option<usize> {
        let mut i = 0;
        while i < chunk.len() {
            match &mut self.position {
                Position::Payload { left } => {
                    let take = (*left).min((chunk.len() - i) as u64);
                    *left -= take;
                    i += take as usize;
                    if *left == 0 {
                        self.position = Position::Header {
                            bytes: [0; 14],
                            have: 0,
                        };
                    }
                }
                Position::Header { bytes, have } => {
                    bytes[*have] = chunk[i];
                    *have += 1;
                    i += 1;
                    if *have < 2 {
                        continue;
                    }
                    let masked = bytes[1] & 0x80 != 0;
                    let short = u64::from(bytes[1] & 0x7f);
                    let extended = match short {
                        126 => 2,
                        127 => 8,
                        _ => 0,
                    };
                    let needed = 2 + extended + if masked { 4 } else { 0 };
                    if *have < needed {
                        continue;
                    }
                    let len = match extended {
                        2 => u64::from(u16::from_be_bytes([bytes[2], bytes[3]])),
                        8 => u64::from_be_bytes(bytes[2..10].try_into().unwrap_or([0xff; 8])),
                        _ => short,
                    };
                    if extended == 8 && bytes[2] & 0x80 != 0 {
                        self.bad_length = true;
                        return Some(i - 1);
                    }
                    if len > self.max_frame {
                        return Some(i - 1);
                    }
                    if bytes[0] & 0x0f == 0x8 {
                        self.saw_close = true;
                    }
                    self.position = if len == 0 {
                        Position::Header {
                            bytes: [0; 14],
                            have: 0,
                        }
                    } else {
                        Position::Payload { left: len }
                    };
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(len: usize, declared_as: u8) -> Vec<u8> {
        let mut f = vec![0x81];
        match declared_as {
            0 => f.push(0x80 | len as u8),
            2 => {
                f.push(0x80 | 126);
                f.extend_from_slice(&(len as u16).to_be_bytes());
            }
            _ => {
                f.push(0x80 | 127);
                f.extend_from_slice(&(len as u64).to_be_bytes());
            }
        }
        f.extend_from_slice(&[1, 2, 3, 4]);
        f.extend(std::iter::repeat_n(b'a', len));
        f
    }

    #[test]
    fn passes_frames_within_the_limit_across_chunk_boundaries() {
        let mut g = HeaderScan::new(300);
        let mut bytes = frame(5, 0);
        bytes.extend(frame(300, 2));
        bytes.extend(frame(0, 0));
        bytes.extend(frame(70_000 % 300, 8));
        for piece in bytes.chunks(3) {
            assert_eq!(g.scan(piece), None);
        }
    }

    #[test]
    fn refuses_an_oversized_header_before_its_payload() {
        let mut g = HeaderScan::new(1000);
        let mut header = vec![0x81, 0x80 | 127];
        header.extend_from_slice(&(1u64 << 40).to_be_bytes());
        header.extend_from_slice(&[0, 0, 0, 0]);
        assert_eq!(g.scan(&header), Some(13), "refused from the header alone");
        let mut g = HeaderScan::new(1000);
        assert_eq!(g.scan(&frame(1001, 2)[..8]), Some(7));
        assert!(!g.bad_length);
    }

    #[test]
    fn a_64_bit_length_with_its_top_bit_set_is_no_size_but_an_error() {
        let mut g = HeaderScan::new(1000);
        let mut header = vec![0x81, 0x80 | 127];
        header.extend_from_slice(&(1u64 << 63 | 5).to_be_bytes());
        header.extend_from_slice(&[0, 0, 0, 0]);
        assert_eq!(g.scan(&header), Some(13));
        assert!(g.bad_length, "RFC 6455 §5.2: a protocol error, not a size");
    }

    type Seen = std::rc::Rc<std::cell::RefCell<Vec<String>>>;

    /// Records what the pump hands it; stops after `stop_after` items or
    /// at the end of the frames. Its first text frame starts a future (as
    /// `hello` starts the opening), which records when it runs.
    struct Recorder {
        seen: Seen,
        stop_after: usize,
        stopped: Option<tokio::sync::oneshot::Sender<()>>,
    }

    impl Actor for Recorder {
        type Context = actix::Context<Self>;

        fn stopped(&mut self, _: &mut Self::Context) {
            if let Some(tx) = self.stopped.take() {
                let _ = tx.send(());
            }
        }
    }

    impl Handler<FromClient> for Recorder {
        type Result = ();
        fn handle(&mut self, FromClient(item): FromClient, ctx: &mut actix::Context<Self>) {
            use actix::{ActorContext, ActorFutureExt, AsyncContext, WrapFuture};
            let seen = match item {
                Some(Ok(ClientMessage::Text(t))) => t.to_string(),
                Some(Ok(other)) => format!("{other:?}"),
                Some(Err(e)) => format!("error {e:?}"),
                None => "end".to_owned(),
            };
            if self.seen.borrow().is_empty() {
                ctx.spawn(async {}.into_actor(self).map(|(), act, _| {
                    act.seen.borrow_mut().push("started".to_owned());
                }));
            }
            let end = seen == "end";
            self.seen.borrow_mut().push(seen);
            if end || self.seen.borrow().len() >= self.stop_after {
                ctx.stop();
            }
        }
    }

    impl Handler<Tick> for Recorder {
        type Result = ();
        fn handle(&mut self, _: Tick, _: &mut actix::Context<Self>) {}
    }

    /// A masked client text frame.
    fn text(payload: &str) -> Vec<u8> {
        let mut out = BytesMut::new();
        actix_http::ws::Parser::write_message(
            &mut out,
            payload,
            actix_http::ws::OpCode::Text,
            true,
            true,
        );
        out.to_vec()
    }

    fn recorder(stop_after: usize) -> (Addr<Recorder>, Seen, tokio::sync::oneshot::Receiver<()>) {
        let seen = Seen::default();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let addr = Recorder {
            seen: std::rc::Rc::clone(&seen),
            stop_after,
            stopped: Some(tx),
        }
        .start();
        (addr, seen, rx)
    }

    /// A socket whose client sent `bytes` and stays open while the second
    /// end is kept.
    fn open_socket(bytes: &[u8]) -> (tokio::io::DuplexStream, tokio::io::DuplexStream) {
        use tokio::io::AsyncWriteExt;
        let (server, mut client) = tokio::io::duplex(4096);
        futures_util::FutureExt::now_or_never(client.write_all(bytes))
            .expect("fits the pipe")
            .unwrap();
        (server, client)
    }

    #[actix_rt::test]
    async fn the_pump_hands_over_frames_one_at_a_time_then_the_end() {
        let (addr, seen, stopped) = recorder(usize::MAX);
        let mut bytes = text("b");
        bytes.extend(text("c"));
        let (server, client) = open_socket(&bytes);
        // "a" came with the handshake; "b" and "c" in one read.
        let pump = actix_rt::spawn(pump(
            Inbound::new(server, &text("a"), 100),
            addr,
            Duration::from_secs(60),
        ));
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(client);
        pump.await.unwrap();
        stopped.await.unwrap();
        assert_eq!(*seen.borrow(), ["a", "started", "b", "c", "end"]);
    }

    #[actix_rt::test]
    async fn the_pump_stops_reading_once_the_session_stopped() {
        let (addr, seen, stopped) = recorder(1);
        let mut bytes = text("b");
        bytes.extend(text("c"));
        let (server, _client) = open_socket(&bytes);
        pump(
            Inbound::new(server, b"", 100),
            addr,
            Duration::from_secs(60),
        )
        .await;
        stopped.await.unwrap();
        assert_eq!(*seen.borrow(), ["b"], "nothing after the session stopped");
    }

    /// What a session is handed of `bytes` from a client whose socket ends
    /// right after them (`&[u8]` reads to its end), up to its stop.
    async fn pumped_to_the_end(bytes: &[u8]) -> Vec<String> {
        let (addr, seen, stopped) = recorder(usize::MAX);
        pump(Inbound::new(bytes, b"", 100), addr, Duration::from_secs(60)).await;
        stopped.await.unwrap();
        let seen = seen.borrow().clone();
        seen
    }

    #[actix_rt::test]
    async fn frames_from_a_client_already_gone_start_nothing() {
        let mut bytes = text("hello");
        bytes.extend(text("more"));
        assert_eq!(
            pumped_to_the_end(&bytes).await,
            ["hello", "more", "end"],
            "taken in one turn: what the first frame started never ran"
        );
    }

    #[actix_rt::test]
    async fn an_oversized_header_ends_the_stream_before_its_payload() {
        let mut bytes = text("ok");
        bytes.extend(text(&"x".repeat(200)));
        // Reading stopped at the header, before the socket's end, so the
        // frames went over one at a time.
        assert_eq!(
            pumped_to_the_end(&bytes).await,
            ["ok", "started", "error TooBig", "end"]
        );
    }
}
