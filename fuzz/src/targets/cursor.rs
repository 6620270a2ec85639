//! `cursor`: [`LogPosition::decode`], the opaque cursor of `/updates` and
//! `/ws` `resume` (protocol §11), on arbitrary strings.
//!
//! Each input is decoded twice: as it is (a wire cursor) and base64url-
//! encoded first, so the mutations also explore the plaintext layout
//! `1.<epoch>.<ms>-<seq>` behind the base64. Properties:
//! - decoding never panics and is deterministic;
//! - anything accepted has a valid epoch, and re-encodes to a cursor of at
//!   most 128 characters, without `.`, that decodes to the same position
//!   (round trip) and re-encodes to itself (a fixed point);
//! - an accepted wire cursor is at most 128 characters (the documented cap).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use switchboard_protocol::cursor::{CursorError, Epoch, LogPosition};

const DICT: &[&[u8]] = &[
    b"1.",
    b".",
    b"-",
    b"MS",
    b"4x",
    b"MS5",
    b"k3x9",
    b"0",
    b"18446744073709551615",
    b"18446744073709551616",
    b"+",
    b"=",
    b"==",
    b"_",
    b"/",
    b"A",
    b"AAAA",
    b" ",
    b"1.e.0-0",
    b"1.abcdefghijklmnopqrstuvwxyz012345.1-1",
    b"1764500000000-7",
];

fn check_one(cursor: &str) {
    let first = LogPosition::decode(cursor);
    assert_eq!(
        first,
        LogPosition::decode(cursor),
        "decode is deterministic"
    );
    match first {
        Err(CursorError::Malformed) => {}
        Ok(pos) => {
            crate::deep();
            assert!(
                cursor.len() <= 128,
                "accepted a {}-byte cursor",
                cursor.len()
            );
            assert!(
                Epoch::is_valid(&pos.epoch.0),
                "accepted epoch {:?}",
                pos.epoch
            );
            let wire = pos.encode();
            assert!(wire.len() <= 128, "encode made an undecodable {wire}");
            assert!(!wire.contains('.'), "encoded cursor {wire} is not opaque");
            let again = LogPosition::decode(&wire).unwrap_or_else(|e| {
                panic!("{cursor:?} decoded to {pos:?}, whose encoding {wire} fails: {e}")
            });
            assert_eq!(again, pos, "round trip through {wire}");
            assert_eq!(again.encode(), wire, "encode is a fixed point");
        }
    }
}

#[test]
fn cursor() {
    crate::fuzz_target!("cursor", DICT, |input: &[u8]| {
        let text = String::from_utf8_lossy(input);
        check_one(&text);
        check_one(&URL_SAFE_NO_PAD.encode(input));
    });
}
