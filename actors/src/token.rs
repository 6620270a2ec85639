//! Bearer tokens (protocol §2): agents get `bay_…`, users `bay_u_…`.
//!
//! A token carries 192 random bits. Only its SHA-256 is stored; the
//! plaintext is returned once, at creation or rotation.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};
use switchboard_protocol::ids::TokenId;
use switchboard_protocol::model::ParticipantKind;

/// SHA-256 of a token, lowercase hex (64 chars). The only form a store keeps.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct TokenHash(pub String);

impl TokenHash {
    /// Hashes a presented token.
    pub fn of(token: &str) -> Self {
        TokenHash(hex::encode(Sha256::digest(token.as_bytes())))
    }

    /// The loggable public handle: the first 16 hex digits of the hash.
    pub fn id(&self) -> TokenId {
        TokenId(self.0[..16].to_owned())
    }
}

/// Mints a fresh token for a participant of `kind`: `bay_u_` + 32 chars for
/// users, `bay_` + 32 chars for agents.
pub fn mint(kind: ParticipantKind) -> String {
    let body = loop {
        let mut bytes = [0u8; 24];
        rand::rng().fill_bytes(&mut bytes);
        let body = URL_SAFE_NO_PAD.encode(bytes);
        // An agent token must never read as a user token (`bay_u_…`).
        if kind == ParticipantKind::User || !body.starts_with("u_") {
            break body;
        }
    };
    match kind {
        ParticipantKind::User => format!("bay_u_{body}"),
        ParticipantKind::Agent => format!("bay_{body}"),
    }
}

/// Whether a string has the shape of a Switchboard token (`bay_` prefix,
/// 20–200 URL-safe chars). Cheap pre-check before hashing and a store lookup.
pub fn looks_like_token(s: &str) -> bool {
    s.starts_with("bay_")
        && (20..=200).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_tokens_have_the_protocol_prefixes() {
        let agent = mint(ParticipantKind::Agent);
        let user = mint(ParticipantKind::User);
        assert!(agent.starts_with("bay_") && !agent.starts_with("bay_u_"));
        assert!(user.starts_with("bay_u_"));
        assert!(looks_like_token(&agent) && looks_like_token(&user));
        assert_ne!(mint(ParticipantKind::Agent), agent);
    }

    #[test]
    fn hash_is_sha256_hex() {
        let h = TokenHash::of("bay_demo");
        assert_eq!(h.0.len(), 64);
        assert_eq!(h.id().0.len(), 16);
    }
}
