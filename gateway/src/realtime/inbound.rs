//! Refusing oversized client frames as soon as their header arrives.
//!
//! actix's WebSocket decoder checks a frame's declared length against its
//! limit only once the whole payload has been buffered, so a client could
//! make the server buffer a frame of any size before it is refused.
//! [`FrameGuard`] wraps the request payload, follows the frame headers as
//! the bytes pass (it never copies payloads) and ends the stream with an
//! error at the first header that declares more than the limit; it raises
//! [`FrameGuard::oversize_flag`] so the session can close with 1009.

use actix_web::error::PayloadError;
use actix_web::web::Bytes;
use futures_util::Stream;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

/// Where the scanner is inside the client's frame sequence.
enum Position {
    /// Reading a header: the bytes seen so far (at most 14).
    Header { bytes: [u8; 14], have: usize },
    /// Inside a payload: bytes left (u64: a header can declare up to 2^63).
    Payload { left: u64 },
}

/// The request payload of a WebSocket, with frame lengths checked early.
pub struct FrameGuard<S> {
    inner: S,
    /// Largest payload a client frame may declare, bytes.
    max_frame: u64,
    position: Position,
    oversize: Arc<AtomicBool>,
    /// Set once the guard refused a frame: the stream is over.
    done: bool,
}

impl<S> FrameGuard<S> {
    /// Guards `inner`, refusing frames that declare more than `max_frame` bytes.
    pub fn new(inner: S, max_frame: usize) -> Self {
        FrameGuard {
            inner,
            max_frame: max_frame as u64,
            position: Position::Header {
                bytes: [0; 14],
                have: 0,
            },
            oversize: Arc::new(AtomicBool::new(false)),
            done: false,
        }
    }

    /// Raised when a frame was refused for its declared size.
    pub fn oversize_flag(&self) -> Arc<AtomicBool> {
        self.oversize.clone()
    }

    /// Follows `chunk` through the frame structure. Returns false at the
    /// first header that declares an oversized payload.
    fn scan(&mut self, chunk: &[u8]) -> bool {
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
                    if len > self.max_frame {
                        return false;
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
        true
    }
}

impl<S> Stream for FrameGuard<S>
where
    S: Stream<Item = Result<Bytes, PayloadError>> + Unpin,
{
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        match Pin::new(&mut self.inner).poll_next(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                if self.scan(&chunk) {
                    Poll::Ready(Some(Ok(chunk)))
                } else {
                    self.done = true;
                    self.oversize.store(true, Ordering::Release);
                    Poll::Ready(Some(Err(PayloadError::Overflow)))
                }
            }
            other => other,
        }
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
        let mut g = FrameGuard::new(
            futures_util::stream::empty::<Result<Bytes, PayloadError>>(),
            300,
        );
        let mut bytes = frame(5, 0);
        bytes.extend(frame(300, 2));
        bytes.extend(frame(0, 0));
        bytes.extend(frame(70_000 % 300, 8));
        for piece in bytes.chunks(3) {
            assert!(g.scan(piece));
        }
    }

    #[test]
    fn refuses_an_oversized_header_before_its_payload() {
        let mut g = FrameGuard::new(
            futures_util::stream::empty::<Result<Bytes, PayloadError>>(),
            1000,
        );
        let mut header = vec![0x81, 0x80 | 127];
        header.extend_from_slice(&(1u64 << 40).to_be_bytes());
        header.extend_from_slice(&[0, 0, 0, 0]);
        assert!(!g.scan(&header), "refused from the header alone");
        let mut g = FrameGuard::new(
            futures_util::stream::empty::<Result<Bytes, PayloadError>>(),
            1000,
        );
        assert!(!g.scan(&frame(1001, 2)[..8]));
    }
}
