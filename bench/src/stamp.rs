//! The latency stamp carried in every message: `t=<nanos since harness
//! start>;s=<sequence number in its room>` (plus optional padding). The
//! publisher and every receiver live in the same process, so the monotonic
//! clock is shared; a receiver finds the stamp anywhere in the frame (a
//! Switchboard `event` envelope, a Pusher event, a socket.io packet or a raw
//! nchan body) without parsing the frame's JSON.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

static START: OnceLock<Instant> = OnceLock::new();

/// The harness's time origin (set on first use).
pub fn start() -> Instant {
    *START.get_or_init(Instant::now)
}

/// Nanoseconds since [`start`].
pub fn now_ns() -> u64 {
    start().elapsed().as_nanos() as u64
}

/// The instant `ns` nanoseconds after [`start`].
pub fn instant_at(ns: u64) -> Instant {
    start() + Duration::from_nanos(ns)
}

/// The message body for `seq` stamped at `stamp_ns`, padded with `pad` bytes.
pub fn payload(stamp_ns: u64, seq: u64, pad: usize) -> String {
    let mut s = format!("t={stamp_ns};s={seq}");
    if pad > 0 {
        s.push(';');
        s.extend(std::iter::repeat_n('x', pad));
    }
    s
}

fn digits(b: &[u8]) -> Option<(u64, usize)> {
    let n = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if n == 0 || n > 19 {
        return None;
    }
    let v = std::str::from_utf8(&b[..n]).ok()?.parse().ok()?;
    Some((v, n))
}

/// Finds `t=<digits>;s=<digits>` in a frame: `(seq, stamp_ns)`.
pub fn parse(frame: &[u8]) -> Option<(u64, u64)> {
    let mut from = 0;
    while let Some(i) = find(&frame[from..], b"t=") {
        let at = from + i + 2;
        if let Some((stamp, n)) = digits(&frame[at..]) {
            let rest = &frame[at + n..];
            if let Some(rest) = rest.strip_prefix(b";s=") {
                if let Some((seq, _)) = digits(rest) {
                    return Some((seq, stamp));
                }
            }
        }
        from = at;
    }
    None
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_any_envelope() {
        let p = payload(123_456, 42, 0);
        assert_eq!(parse(p.as_bytes()), Some((42, 123_456)));
        let padded = payload(7, 1, 10);
        assert_eq!(parse(padded.as_bytes()), Some((1, 7)));
        let sb = format!(
            r#"{{"t":"event","event":{{"type":"message","message":{{"content":"{p}"}}}}}}"#
        );
        assert_eq!(parse(sb.as_bytes()), Some((42, 123_456)));
        let sio = format!(r#"42["msg","{p}","1-2"]"#);
        assert_eq!(parse(sio.as_bytes()), Some((42, 123_456)));
        assert_eq!(parse(b"{\"t\":\"cursor\"}"), None);
        assert_eq!(parse(b"t=;s=1"), None);
    }
}
