//! Signed, expiring attachment URLs (protocol §10: "the signature is the
//! credential and it expires (~1h)").
//!
//! A URL is `<base>/api/agent-api/attachments/signed-content?bay=<bay>&id=
//! <attachment id>&exp=<unix seconds>&sig=<hex>`, where `sig` is
//! HMAC-SHA256 of `bay`, `id` and `exp` under a key derived from the
//! deployment's sealing key, so a URL minted on any node verifies on every
//! other. Nothing is stored per URL: each delivery mints its own.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::time::Duration;

type HmacSha256 = Hmac<Sha256>;

/// Path of the signed download route.
pub const SIGNED_CONTENT_PATH: &str = "/api/agent-api/attachments/signed-content";

/// Why a signed URL is refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// The signature does not match its fields (altered or forged).
    BadSignature,
    /// `exp` has passed.
    Expired,
}

/// Mints and checks attachment URLs.
pub struct UrlSigner {
    key: [u8; 32],
    base: String,
    ttl: Duration,
}

impl UrlSigner {
    /// A signer whose URLs start with `base` (`http(s)://host[:port]`, no
    /// trailing slash) and last `ttl`, keyed from the sealing key.
    pub fn new(sealing_key: &[u8; 32], base: &str, ttl: Duration) -> Self {
        // A key of its own: a URL signature never doubles as anything the
        // sealing key protects.
        let mut mac = HmacSha256::new_from_slice(sealing_key).expect("HMAC takes any key");
        mac.update(b"switchboard attachment url key v1");
        UrlSigner {
            key: mac.finalize().into_bytes().into(),
            base: base.trim_end_matches('/').to_owned(),
            ttl,
        }
    }

    fn mac(&self, bay: &str, id: &str, exp: u64) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.key).expect("HMAC takes any key");
        // Length-prefixed, so no two field lists sign alike.
        for part in [bay.as_bytes(), id.as_bytes(), exp.to_string().as_bytes()] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        mac
    }

    /// The URL of attachment `id` of `bay`, expiring `ttl` after `now`
    /// (Unix seconds), with that expiry.
    pub fn url_at(&self, bay: &str, id: &str, now: u64) -> (String, u64) {
        let exp = now + self.ttl.as_secs().max(1);
        let sig = hex::encode(self.mac(bay, id, exp).finalize().into_bytes());
        let query = form_urlencoded::Serializer::new(String::new())
            .append_pair("bay", bay)
            .append_pair("id", id)
            .append_pair("exp", &exp.to_string())
            .append_pair("sig", &sig)
            .finish();
        (format!("{}{SIGNED_CONTENT_PATH}?{query}", self.base), exp)
    }

    /// [`UrlSigner::url_at`] from the current time.
    pub fn url(&self, bay: &str, id: &str) -> (String, u64) {
        self.url_at(bay, id, unix_now())
    }

    /// Checks a presented URL's fields at `now` (Unix seconds); the
    /// signature is compared in constant time.
    pub fn verify(
        &self,
        bay: &str,
        id: &str,
        exp: u64,
        sig: &str,
        now: u64,
    ) -> Result<(), Refused> {
        let sig = hex::decode(sig).map_err(|_| Refused::BadSignature)?;
        self.mac(bay, id, exp)
            .verify_slice(&sig)
            .map_err(|_| Refused::BadSignature)?;
        if exp <= now {
            return Err(Refused::Expired);
        }
        Ok(())
    }
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(url: &str) -> (String, String, u64, String) {
        let query = url.split_once('?').unwrap().1;
        let get = |k: &str| {
            form_urlencoded::parse(query.as_bytes())
                .find(|(n, _)| n == k)
                .unwrap()
                .1
                .into_owned()
        };
        (
            get("bay"),
            get("id"),
            get("exp").parse().unwrap(),
            get("sig"),
        )
    }

    #[test]
    fn a_url_verifies_until_it_expires_and_not_once_altered() {
        let signer = UrlSigner::new(&[7; 32], "http://h:1/", Duration::from_secs(3600));
        let (url, exp) = signer.url_at("bay_1", "att_1", 1000);
        assert!(url.starts_with("http://h:1/api/agent-api/attachments/signed-content?"));
        assert_eq!(exp, 4600);
        let (bay, id, exp, sig) = fields(&url);
        assert_eq!(signer.verify(&bay, &id, exp, &sig, 4599), Ok(()));
        assert_eq!(
            signer.verify(&bay, &id, exp, &sig, 4600),
            Err(Refused::Expired)
        );
        assert_eq!(
            signer.verify(&bay, "att_2", exp, &sig, 1),
            Err(Refused::BadSignature)
        );
        assert_eq!(
            signer.verify(&bay, &id, exp + 1, &sig, 1),
            Err(Refused::BadSignature)
        );
        assert_eq!(
            signer.verify("bay_2", &id, exp, &sig, 1),
            Err(Refused::BadSignature)
        );
        assert_eq!(
            signer.verify(&bay, &id, exp, "zz", 1),
            Err(Refused::BadSignature)
        );
        let other = UrlSigner::new(&[8; 32], "http://h:1", Duration::from_secs(3600));
        assert_eq!(
            other.verify(&bay, &id, exp, &sig, 1),
            Err(Refused::BadSignature)
        );
    }
}
