//! `frame_guard`: the gateway's inbound WebSocket byte stream scanner,
//! [`FrameGuard`] (gateway/src/realtime/inbound.rs), which follows RFC 6455
//! frame headers as the client's bytes arrive and ends the stream at the
//! first header that declares a payload above `limits.max_ws_frame_bytes`.
//!
//! Input: two bytes of limit (big-endian `u16`), one byte choosing how the
//! stream is cut into chunks (`0`: one chunk), then the client's bytes.
//! Properties, against an independent model of the header layout:
//! - the guard never panics, whatever the bytes and however they are cut;
//! - it passes every chunk through unchanged until the chunk holding the
//!   last header byte of the first frame that declares more than the limit;
//!   that chunk is refused (`PayloadError::Overflow`) and the stream ends;
//! - the oversize flag is raised exactly when a chunk was refused.

use actix_web::error::PayloadError;
use actix_web::web::Bytes;
use futures_util::Stream;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use switchboard_gateway::realtime::inbound::FrameGuard;

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
        let needed = 2 + extended + if masked { 4 } else { 0 };
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

#[test]
fn frame_guard() {
    crate::fuzz_target!("frame_guard", DICT, |input: &[u8]| {
        let max = usize::from(u16::from_be_bytes([
            input.first().copied().unwrap_or(0),
            input.get(1).copied().unwrap_or(0),
        ]));
        let cut = input.get(2).copied().unwrap_or(0);
        let stream = input.get(3..).unwrap_or_default();
        let pieces = chunks(stream, cut);
        let inner = futures_util::stream::iter(
            pieces
                .iter()
                .map(|c| Ok::<Bytes, PayloadError>(Bytes::copy_from_slice(c))),
        );
        let mut guard = FrameGuard::new(inner, max);
        let flag = guard.oversize_flag();
        let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());

        let refused_byte = refusal_at(stream, max as u64);
        let mut offset = 0usize;
        let mut refused = false;
        for piece in &pieces {
            let item = match Pin::new(&mut guard).poll_next(&mut cx) {
                Poll::Ready(item) => item,
                Poll::Pending => panic!("an always-ready stream made the guard pend"),
            };
            let end = offset + piece.len();
            let refuse_here = refused_byte.is_some_and(|k| offset <= k && k < end);
            match item {
                Some(Ok(bytes)) => {
                    assert!(
                        !refuse_here,
                        "chunk {offset}..{end} passed, but byte {refused_byte:?} completes a header above {max}"
                    );
                    assert_eq!(&bytes[..], &piece[..], "chunk {offset}..{end} altered");
                }
                Some(Err(PayloadError::Overflow)) => {
                    assert!(
                        refuse_here,
                        "chunk {offset}..{end} refused; the model refuses at {refused_byte:?} (limit {max})"
                    );
                    refused = true;
                    crate::deep();
                    break;
                }
                Some(Err(e)) => panic!("unexpected error {e}"),
                None => panic!("stream ended early at {offset}"),
            }
            offset = end;
        }
        if refused {
            assert!(matches!(
                Pin::new(&mut guard).poll_next(&mut cx),
                Poll::Ready(None)
            ));
        } else {
            assert_eq!(refused_byte, None, "the model refuses, the guard did not");
            assert!(matches!(
                Pin::new(&mut guard).poll_next(&mut cx),
                Poll::Ready(None)
            ));
        }
        assert_eq!(flag.load(Ordering::Acquire), refused, "oversize flag");
    });
}
