//! `frame_guard`: the gateway's inbound WebSocket stream,
//! [`Inbound`] (gateway/src/realtime/inbound.rs), which reads the client's
//! bytes, follows RFC 6455 frame headers as they arrive and ends the stream
//! at the first header that declares a payload above
//! `limits.max_ws_frame_bytes`, before the payload is buffered.
//!
//! Input: two bytes of limit (big-endian `u16`), one byte choosing how the
//! stream is cut into reads (`0`: one read; odd: the first piece arrives
//! with the handshake), then the client's bytes.
//! Properties, against an independent model of the header layout:
//! - the stream never panics, whatever the bytes and however they are cut;
//! - it yields `TooBig` only if the model refuses, and then it has read
//!   nothing past the read holding the last header byte of the first frame
//!   declaring more than the limit (none of the payload after it);
//! - when the model refuses and no `TooBig` came, an earlier error (a
//!   protocol violation, a text frame that is not UTF-8, or a fragmented
//!   message grown past the limit: `MessageTooBig`) ended the stream;
//! - nothing follows an error.

use futures_util::Stream;
use std::pin::Pin;
use std::task::{Context, Poll};
use switchboard_gateway::realtime::inbound::{Inbound, InboundError};
use tokio::io::{AsyncRead, ReadBuf};

const DICT: &[&[u8]] = &[
    &[0x81],
    &[0x01],
    &[0x88],
    &[0x89],
    &[0x8a],
    &[0x02],
    &[0x80],
    &[0x00],
    &[0x7e],
    &[0x7f],
    &[0xfe],
    &[0xff],
    &[0x81, 0x9b, 0x12, 0x34, 0x56, 0x78],
    &[0x81, 0xfe, 0x01, 0x2c],
    &[0x82, 0xff, 0, 0, 0, 0, 0, 0, 0x03, 0xe9],
    &[0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0],
    b"{\"t\":\"hello\",\"resume\":null}",
];

/// Index of the byte that completes the first header declaring more than
/// `max` bytes, if any (RFC 6455 §5.2: 2 bytes, then 2 or 8 bytes of
/// extended length for 126 / 127, then 4 bytes of mask key if masked).
fn refusal_at(stream: &[u8], max: u64) -> Option<usize> {
    let mut i = 0usize;
    loop {
        let b1 = *stream.get(i + 1)?;
        let masked = b1 & 0x80 != 0;
        let extended = match b1 & 0x7f {
            126 => 2,
            127 => 8,
            _ => 0,
        };
        let lengths = stream.get(i..i + 2 + extended)?;
        let needed = 2 + extended + if masked { 4 } else { 0 };
        if extended == 8 && lengths[2] & 0x80 != 0 {
            // A 64-bit length with its top bit set is invalid whatever the
            // limit (RFC 6455 §5.2): the decoder may refuse it as soon as
            // the length is read, before the mask key arrives.
            return Some((i + needed - 1).min(stream.len() - 1));
        }
        let header = stream.get(i..i + needed)?;
        let len = match extended {
            2 => u64::from(u16::from_be_bytes([header[2], header[3]])),
            8 => u64::from_be_bytes(header[2..10].try_into().expect("8 bytes")),
            _ => u64::from(b1 & 0x7f),
        };
        if len > max {
            return Some(i + needed - 1);
        }
        let next = (i + needed) as u64 + len;
        if next >= stream.len() as u64 {
            return None;
        }
        i = next as usize;
    }
}

fn chunks(stream: &[u8], cut: u8) -> Vec<Vec<u8>> {
    if cut == 0 {
        return vec![stream.to_vec()];
    }
    let mut out = Vec::new();
    let mut state = u32::from(cut);
    let mut rest = stream;
    while !rest.is_empty() {
        state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let n = (1 + (state >> 16) as usize % usize::from(cut.max(1))).min(rest.len());
        out.push(rest[..n].to_vec());
        rest = &rest[n..];
    }
    out
}

/// The client's side of the socket: each read returns what is left of the
/// next piece (as much as fits), and counts what was read.
struct Pieces {
    pieces: Vec<Vec<u8>>,
    next: usize,
    offset: usize,
    read: usize,
}

impl AsyncRead for Pieces {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if let Some(piece) = this.pieces.get(this.next) {
            let n = (piece.len() - this.offset).min(buf.remaining());
            buf.put_slice(&piece[this.offset..this.offset + n]);
            this.offset += n;
            this.read += n;
            if this.offset == piece.len() {
                this.next += 1;
                this.offset = 0;
            }
        }
        Poll::Ready(Ok(()))
    }
}

#[test]
fn frame_guard() {
    crate::fuzz_target!("frame_guard", DICT, |input: &[u8]| {
        let max = usize::from(u16::from_be_bytes([
            input.first().copied().unwrap_or(0),
            input.get(1).copied().unwrap_or(0),
        ]));
        let cut = input.get(2).copied().unwrap_or(0);
        let stream = input.get(3..).unwrap_or_default();
        let mut pieces = chunks(stream, cut);
        let early = if cut % 2 == 1 && !pieces.is_empty() {
            pieces.remove(0)
        } else {
            Vec::new()
        };
        // Where each read ends, to know which read held a given byte.
        let mut ends = vec![early.len()];
        for piece in &pieces {
            for part in piece.chunks(4096) {
                ends.push(ends.last().copied().unwrap_or(0) + part.len());
            }
        }
        let reader = Pieces {
            pieces,
            next: 0,
            offset: 0,
            read: 0,
        };
        let mut inbound = Inbound::new(reader, &early, max);
        let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
        let refused_byte = refusal_at(stream, max as u64);
        let mut ended_by = None;
        loop {
            match Pin::new(&mut inbound).poll_next(&mut cx) {
                Poll::Pending => panic!("an always-ready socket made the stream pend"),
                Poll::Ready(None) => break,
                Poll::Ready(Some(Ok(_))) => {}
                Poll::Ready(Some(Err(e))) => {
                    ended_by = Some(e);
                    break;
                }
            }
        }
        let read = early.len() + inbound.get_ref().read;
        match (&ended_by, refused_byte) {
            (Some(InboundError::TooBig), Some(k)) => {
                // The decoder may refuse from the length alone, before the
                // mask key; never after the read holding the header's end.
                let through = ends.iter().copied().find(|&end| end > k);
                assert!(
                    through.is_some_and(|t| read <= t),
                    "refused at byte {k} (limit {max}), read {read}; reads end at {ends:?}"
                );
                crate::deep();
            }
            (Some(InboundError::TooBig), None) => {
                panic!("TooBig, but the model refuses nothing (limit {max})")
            }
            (Some(InboundError::Read(e)), _) => panic!("read error {e}"),
            (Some(_), _) => {}
            (None, Some(k)) => {
                panic!("the model refuses at byte {k} (limit {max}); the stream ended cleanly")
            }
            (None, None) => {}
        }
        if ended_by.is_some() {
            assert!(
                matches!(Pin::new(&mut inbound).poll_next(&mut cx), Poll::Ready(None)),
                "nothing follows an error"
            );
        }
    });
}
