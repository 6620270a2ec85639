//! Pairing codes and poll secrets: how they are minted and how a
//! presented code is read.
//!
//! A pairing code is typed by a person, so it is short and unambiguous:
//! ten symbols of Crockford's base32 (no I, L, O or U), 50 bits, shown as
//! `ABCDE-FGHJK`. With a 10-minute life and the per-IP limit on attempts,
//! guessing one is hopeless. A poll secret is only ever handled by
//! software, so it is 256 random bits in base64url.

use base64::Engine;
use rand::RngCore;

/// Crockford's base32 alphabet.
const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
/// Symbols of a pairing code.
pub const CODE_LEN: usize = 10;

/// A fresh pairing code, `XXXXX-XXXXX`.
pub fn mint_code() -> String {
    let mut bytes = [0u8; CODE_LEN];
    rand::rng().fill_bytes(&mut bytes);
    // 256 is a multiple of 32: taking the low five bits is unbiased.
    let symbols: String = bytes
        .iter()
        .map(|b| ALPHABET[usize::from(b & 31)] as char)
        .collect();
    format!("{}-{}", &symbols[..5], &symbols[5..])
}

/// The canonical form of a presented code: case, dashes and spaces
/// ignored, and the look-alikes Crockford's base32 allows read as their
/// digits (O as 0, I and L as 1). `None` when it cannot be a code (wrong
/// length or symbol); the caller answers that exactly like an unknown code.
pub fn normalise(presented: &str) -> Option<String> {
    let mut out = String::with_capacity(CODE_LEN);
    for c in presented.chars() {
        let c = match c.to_ascii_uppercase() {
            '-' | ' ' => continue,
            'O' => '0',
            'I' | 'L' => '1',
            c => c,
        };
        if !c.is_ascii() || !ALPHABET.contains(&(c as u8)) {
            return None;
        }
        out.push(c);
    }
    (out.len() == CODE_LEN).then_some(out)
}

/// A fresh poll secret: 32 random bytes, base64url without padding.
pub fn mint_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_codes_read_back_however_they_are_typed() {
        for _ in 0..100 {
            let code = mint_code();
            assert_eq!(code.len(), CODE_LEN + 1);
            let canonical = normalise(&code).expect("a minted code reads");
            assert_eq!(
                normalise(&code.to_ascii_lowercase()),
                Some(canonical.clone())
            );
            assert_eq!(normalise(&code.replace('-', " ")), Some(canonical));
        }
        assert_eq!(normalise("oooo0-iiiil"), Some("0000011111".into()));
    }

    #[test]
    fn what_cannot_be_a_code_is_refused() {
        assert_eq!(normalise(""), None);
        assert_eq!(normalise("ABCDE-FGHJ"), None, "too short");
        assert_eq!(normalise("ABCDE-FGHJKM"), None, "too long");
        assert_eq!(normalise("ABCDE-FGHJU"), None, "U is not a symbol");
        assert_eq!(normalise("ABCDE-FGHJ\u{e9}"), None);
    }
}
