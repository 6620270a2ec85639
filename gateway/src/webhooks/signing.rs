//! Signing webhook deliveries, and sealing the signing secrets at rest.
//!
//! Deliveries are signed as the Standard Webhooks spec says
//! (<https://www.standardwebhooks.com/>, "Signature scheme" and "Webhook
//! headers"), so receivers can verify them with any Standard Webhooks
//! library:
//!
//! - the secret is `whsec_` + standard base64 of 24 to 64 random bytes
//!   ([`new_secret`] makes 32);
//! - the signed content is `{msg_id}.{timestamp}.{body}`, the body exactly
//!   as sent;
//! - the signature is `v1,` + standard base64 of HMAC-SHA256 over that
//!   content, keyed with the decoded secret;
//! - three headers carry it: `webhook-id`, `webhook-timestamp` (Unix
//!   seconds) and `webhook-signature`.
//!
//! The gateway must keep each agent's secret to sign with it, so it stores
//! it sealed ([`SecretBox`]: ChaCha20-Poly1305 under the node's
//! `webhooks.secret_key`), never in the clear.

use std::fmt;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

/// Prefix of a symmetric Standard Webhooks secret.
pub const SECRET_PREFIX: &str = "whsec_";
/// Random bytes in a secret made by [`new_secret`].
pub const SECRET_BYTES: usize = 32;
/// Fewest bytes a secret may decode to (Standard Webhooks: at least 24 bytes).
pub const SECRET_MIN_BYTES: usize = 24;
/// Most bytes a secret may decode to (Standard Webhooks: at most 512 bits).
pub const SECRET_MAX_BYTES: usize = 64;
/// Header with the message id, the same on every attempt of a delivery.
pub const HEADER_ID: &str = "webhook-id";
/// Header with the attempt's time, Unix seconds.
pub const HEADER_TIMESTAMP: &str = "webhook-timestamp";
/// Header with the signature(s), `v1,<base64>`.
pub const HEADER_SIGNATURE: &str = "webhook-signature";
/// Length of a [`SecretBox`] key, in bytes (ChaCha20-Poly1305).
pub const SEALING_KEY_BYTES: usize = 32;
/// Length of the random nonce at the start of a sealed secret, in bytes.
const NONCE_BYTES: usize = 12;
/// Length of the Poly1305 tag that ends a sealed secret, in bytes.
const TAG_BYTES: usize = 16;
/// Associated data of every seal: a sealed value opens only as what it was
/// sealed for.
const SEAL_CONTEXT: &[u8] = b"switchboard webhook secret v1";

type HmacSha256 = Hmac<Sha256>;

/// Why a delivery could not be signed, or a secret sealed or opened. The
/// messages are lowercase and never contain a secret or a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SigningError {
    /// The signing secret does not start with `whsec_`.
    #[error("webhook secret does not start with whsec_")]
    MissingPrefix,
    /// The part after `whsec_` is not standard base64.
    #[error("webhook secret is not base64 after whsec_")]
    SecretNotBase64,
    /// The secret decodes to fewer than 24 or more than 64 bytes.
    #[error("webhook secret decodes to {0} bytes; standard webhooks wants 24 to 64")]
    SecretLength(usize),
    /// The message id is empty, contains `.` or is not visible ASCII
    /// (Standard Webhooks: the id must not contain `.`; it is also sent as
    /// a header).
    #[error("webhook message id must be non-empty visible ascii without '.'")]
    InvalidMessageId,
    /// A sealing key is not standard base64 of exactly 32 bytes.
    #[error("webhook sealing key must be 32 bytes in standard base64")]
    InvalidKey,
    /// A sealed secret is not base64, or too short to hold a nonce and a tag.
    #[error("sealed webhook secret is malformed")]
    MalformedSealed,
    /// A sealed secret does not open with this key: sealed with another
    /// key, or altered.
    #[error("sealed webhook secret does not open with this key (another key, or altered)")]
    CannotOpen,
}

/// A new signing secret: `whsec_` + standard base64 of 32 random bytes
/// (Standard Webhooks: 24 to 64 bytes), from the thread-local CSPRNG.
pub fn new_secret() -> String {
    let mut bytes = [0u8; SECRET_BYTES];
    rand::rng().fill_bytes(&mut bytes);
    format!("{SECRET_PREFIX}{}", STANDARD.encode(bytes))
}

/// The HMAC key of `secret`: the base64 after `whsec_`, decoded.
fn secret_key(secret: &str) -> Result<Vec<u8>, SigningError> {
    let encoded = secret
        .strip_prefix(SECRET_PREFIX)
        .ok_or(SigningError::MissingPrefix)?;
    let key = STANDARD
        .decode(encoded)
        .map_err(|_| SigningError::SecretNotBase64)?;
    if !(SECRET_MIN_BYTES..=SECRET_MAX_BYTES).contains(&key.len()) {
        return Err(SigningError::SecretLength(key.len()));
    }
    Ok(key)
}

/// The `webhook-signature` header value for one attempt:
/// `v1,<base64 HMAC-SHA256(key, "{msg_id}.{timestamp}.{body}")>`, key being
/// the base64 after `whsec_` in `secret`, decoded (Standard Webhooks,
/// "Signature scheme").
///
/// `msg_id` is the delivery's id (the same on every retry); `timestamp` is
/// the attempt's time in Unix seconds; `body` is the request body exactly
/// as it is sent.
///
/// # Errors
///
/// [`SigningError::MissingPrefix`], [`SigningError::SecretNotBase64`] or
/// [`SigningError::SecretLength`] for a malformed secret;
/// [`SigningError::InvalidMessageId`] for an id that is empty, contains `.`
/// or is not visible ASCII.
pub fn sign(
    secret: &str,
    msg_id: &str,
    timestamp: i64,
    body: &[u8],
) -> Result<String, SigningError> {
    let valid_id = !msg_id.is_empty() && msg_id.bytes().all(|b| b.is_ascii_graphic() && b != b'.');
    if !valid_id {
        return Err(SigningError::InvalidMessageId);
    }
    let key = secret_key(secret)?;
    let mut mac =
        <HmacSha256 as Mac>::new_from_slice(&key).expect("HMAC takes a key of any length");
    mac.update(msg_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Ok(format!(
        "v1,{}",
        STANDARD.encode(mac.finalize().into_bytes())
    ))
}

/// The three Standard Webhooks headers of one attempt, in this order:
/// `webhook-id` (`msg_id`), `webhook-timestamp` (`timestamp`, Unix seconds)
/// and `webhook-signature` ([`sign`]).
///
/// # Errors
///
/// As [`sign`].
pub fn headers(
    secret: &str,
    msg_id: &str,
    timestamp: i64,
    body: &[u8],
) -> Result<[(&'static str, String); 3], SigningError> {
    let signature = sign(secret, msg_id, timestamp, body)?;
    Ok([
        (HEADER_ID, msg_id.to_owned()),
        (HEADER_TIMESTAMP, timestamp.to_string()),
        (HEADER_SIGNATURE, signature),
    ])
}

/// Seals webhook signing secrets for storage, and opens them again, with
/// ChaCha20-Poly1305 under a 32-byte key (`webhooks.secret_key`: every node
/// of a deployment must hold the same key to open what another sealed).
///
/// A sealed secret is standard base64 of a random 12-byte nonce followed by
/// the ciphertext and its 16-byte tag. `Debug` never shows the key.
#[derive(Clone)]
pub struct SecretBox {
    cipher: ChaCha20Poly1305,
}

impl SecretBox {
    /// A box with `key`.
    pub fn new(key: &[u8; SEALING_KEY_BYTES]) -> Self {
        SecretBox {
            cipher: ChaCha20Poly1305::new(Key::from_slice(key)),
        }
    }

    /// A box with the key `key`: standard base64 of exactly 32 bytes (the
    /// form of `webhooks.secret_key`).
    ///
    /// # Errors
    ///
    /// [`SigningError::InvalidKey`] otherwise; the message never quotes it.
    pub fn from_base64(key: &str) -> Result<Self, SigningError> {
        let bytes = STANDARD.decode(key).map_err(|_| SigningError::InvalidKey)?;
        let key: [u8; SEALING_KEY_BYTES] =
            bytes.try_into().map_err(|_| SigningError::InvalidKey)?;
        Ok(SecretBox::new(&key))
    }

    /// A box with a new random key, known to this process only: what it
    /// seals no other process can open.
    pub fn random() -> Self {
        let mut key = [0u8; SEALING_KEY_BYTES];
        rand::rng().fill_bytes(&mut key);
        SecretBox::new(&key)
    }

    /// `secret`, sealed: standard base64 of a random 12-byte nonce, then the
    /// ciphertext with its 16-byte tag. Sealing the same secret twice gives
    /// different values.
    pub fn seal(&self, secret: &str) -> String {
        self.seal_as(SEAL_CONTEXT, secret)
    }

    /// `value` sealed for `context` (the associated data): it opens only
    /// with [`SecretBox::open_as`] and the same context, so a value sealed
    /// for one use (an attachment's filename) never opens as another (a
    /// webhook secret).
    pub fn seal_as(&self, context: &[u8], value: &str) -> String {
        let secret = value;
        let mut nonce = [0u8; NONCE_BYTES];
        rand::rng().fill_bytes(&mut nonce);
        let ciphertext = self
            .cipher
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: secret.as_bytes(),
                    aad: context,
                },
            )
            .expect("ChaCha20-Poly1305 seals any secret shorter than 256 GiB");
        let mut sealed = Vec::with_capacity(NONCE_BYTES + ciphertext.len());
        sealed.extend_from_slice(&nonce);
        sealed.extend_from_slice(&ciphertext);
        STANDARD.encode(sealed)
    }

    /// The secret that [`SecretBox::seal`] sealed into `sealed`.
    ///
    /// # Errors
    ///
    /// [`SigningError::MalformedSealed`] when `sealed` is not base64 or too
    /// short; [`SigningError::CannotOpen`] when it was sealed under another
    /// key or has been altered.
    pub fn open(&self, sealed: &str) -> Result<String, SigningError> {
        self.open_as(SEAL_CONTEXT, sealed)
    }

    /// The value [`SecretBox::seal_as`] sealed for `context`.
    ///
    /// # Errors
    ///
    /// As [`SecretBox::open`]; also [`SigningError::CannotOpen`] when it
    /// was sealed for another context.
    pub fn open_as(&self, context: &[u8], sealed: &str) -> Result<String, SigningError> {
        let bytes = STANDARD
            .decode(sealed)
            .map_err(|_| SigningError::MalformedSealed)?;
        if bytes.len() < NONCE_BYTES + TAG_BYTES {
            return Err(SigningError::MalformedSealed);
        }
        let (nonce, ciphertext) = bytes.split_at(NONCE_BYTES);
        let plain = self
            .cipher
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: ciphertext,
                    aad: context,
                },
            )
            .map_err(|_| SigningError::CannotOpen)?;
        String::from_utf8(plain).map_err(|_| SigningError::CannotOpen)
    }
}

impl fmt::Debug for SecretBox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretBox(********)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use standardwebhooks::{Webhook, WebhookError};

    fn now() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs() as i64
    }

    /// The headers of [`headers`], as the independent verifier takes them.
    fn header_map(signed: &[(&'static str, String); 3]) -> http::HeaderMap {
        let mut map = http::HeaderMap::new();
        for (name, value) in signed {
            map.insert(*name, value.parse().expect("a valid header value"));
        }
        map
    }

    const BODY: &[u8] =
        br#"{"event":"message.created","schemaVersion":2,"message":{"content":"h\u00e9llo"}}"#;

    /// Signed here, verified by Standard Webhooks' own library.
    #[test]
    fn standardwebhooks_verifies_our_signature() {
        let secret = new_secret();
        let signed = headers(&secret, "evt_0123456789abcdef", now(), BODY).unwrap();
        assert_eq!(signed[0], (HEADER_ID, "evt_0123456789abcdef".to_owned()));
        assert_eq!(signed[1].0, HEADER_TIMESTAMP);
        assert_eq!(signed[2].0, HEADER_SIGNATURE);
        assert!(signed[2].1.starts_with("v1,"), "{}", signed[2].1);

        let verifier = Webhook::new(&secret).unwrap();
        verifier.verify(BODY, &header_map(&signed)).unwrap();
        // The same secret without its prefix, as some receivers hold it.
        Webhook::new(secret.strip_prefix(SECRET_PREFIX).unwrap())
            .unwrap()
            .verify(BODY, &header_map(&signed))
            .unwrap();
        // And its signer agrees with ours byte for byte.
        let ts: i64 = signed[1].1.parse().unwrap();
        assert_eq!(
            verifier.sign("evt_0123456789abcdef", ts, BODY).unwrap(),
            signed[2].1
        );
    }

    /// Negative controls: the verifier refuses what it should, so the
    /// positive test above proves something.
    #[test]
    fn standardwebhooks_refuses_tampering() {
        let secret = new_secret();
        let verifier = Webhook::new(&secret).unwrap();
        let signed = headers(&secret, "evt_1", now(), BODY).unwrap();

        let mut tampered = BODY.to_vec();
        tampered[2] = b'E'; // "event" → "Event"
        assert!(matches!(
            verifier.verify(&tampered, &header_map(&signed)),
            Err(WebhookError::InvalidSignature)
        ));

        let mut other_id = signed.clone();
        other_id[0].1 = "evt_2".into();
        assert!(matches!(
            verifier.verify(BODY, &header_map(&other_id)),
            Err(WebhookError::InvalidSignature)
        ));

        let mut other_time = signed.clone();
        let ts: i64 = signed[1].1.parse().unwrap();
        other_time[1].1 = (ts - 1).to_string();
        assert!(matches!(
            verifier.verify(BODY, &header_map(&other_time)),
            Err(WebhookError::InvalidSignature)
        ));

        let other_secret = Webhook::new(&new_secret()).unwrap();
        assert!(matches!(
            other_secret.verify(BODY, &header_map(&signed)),
            Err(WebhookError::InvalidSignature)
        ));
    }

    /// A fixed vector (Svix's, from which Standard Webhooks grew): both
    /// implementations give the published signature.
    #[test]
    fn known_answer() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let (id, ts, body) = (
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232314}"#,
        );
        let expected = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
        assert_eq!(sign(secret, id, ts, body).unwrap(), expected);
        assert_eq!(
            Webhook::new(secret).unwrap().sign(id, ts, body).unwrap(),
            expected
        );
    }

    #[test]
    fn new_secrets_are_whsec_and_32_random_bytes() {
        let a = new_secret();
        let b = new_secret();
        assert_ne!(a, b);
        for secret in [&a, &b] {
            let encoded = secret.strip_prefix("whsec_").expect("whsec_ prefix");
            assert_eq!(STANDARD.decode(encoded).unwrap().len(), 32);
        }
    }

    #[test]
    fn bad_secrets_and_ids_are_refused() {
        let ok = new_secret();
        let short = format!("whsec_{}", STANDARD.encode([7u8; 23]));
        let long = format!("whsec_{}", STANDARD.encode([7u8; 65]));
        let edges = [
            format!("whsec_{}", STANDARD.encode([7u8; 24])),
            format!("whsec_{}", STANDARD.encode([7u8; 64])),
        ];
        let cases: [(&str, &str, SigningError); 8] = [
            (&ok[6..], "evt_1", SigningError::MissingPrefix),
            ("whsec_not*base64", "evt_1", SigningError::SecretNotBase64),
            (&short, "evt_1", SigningError::SecretLength(23)),
            (&long, "evt_1", SigningError::SecretLength(65)),
            (&ok, "", SigningError::InvalidMessageId),
            (&ok, "evt.1", SigningError::InvalidMessageId),
            (&ok, "evt 1", SigningError::InvalidMessageId),
            (&ok, "evt_1\n", SigningError::InvalidMessageId),
        ];
        for (secret, id, error) in cases {
            assert_eq!(sign(secret, id, 1, b"{}"), Err(error.clone()), "{id:?}");
            assert_eq!(headers(secret, id, 1, b"{}"), Err(error));
        }
        for secret in edges {
            sign(&secret, "evt_1", 1, b"{}").expect("24 and 64 bytes are allowed");
        }
        // No message quotes the secret.
        let message = sign(&long, "evt_1", 1, b"").unwrap_err().to_string();
        assert!(!message.contains(&long[6..]), "{message}");
    }

    #[test]
    fn seal_then_open_round_trips() {
        let key = STANDARD.encode([42u8; 32]);
        let sealer = SecretBox::from_base64(&key).unwrap();
        let secret = new_secret();
        let sealed = sealer.seal(&secret);
        assert!(!sealed.contains(&secret[6..]));
        assert_eq!(
            STANDARD.decode(&sealed).unwrap().len(),
            12 + secret.len() + 16
        );
        // Another node with the same key opens it.
        assert_eq!(
            SecretBox::from_base64(&key).unwrap().open(&sealed),
            Ok(secret.clone())
        );
        // A fresh nonce each time.
        assert_ne!(sealer.seal(&secret), sealed);
        let random = SecretBox::random();
        assert_eq!(random.open(&random.seal("")), Ok(String::new()));
    }

    #[test]
    fn opening_with_another_key_or_altered_fails() {
        let sealer = SecretBox::random();
        let sealed = sealer.seal(&new_secret());
        assert_eq!(
            SecretBox::random().open(&sealed),
            Err(SigningError::CannotOpen)
        );
        assert_eq!(
            SecretBox::new(&[1u8; 32]).open(&sealed),
            Err(SigningError::CannotOpen)
        );
        let mut bytes = STANDARD.decode(&sealed).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert_eq!(
            sealer.open(&STANDARD.encode(&bytes)),
            Err(SigningError::CannotOpen)
        );
        bytes[last] ^= 1;
        bytes[12] ^= 1; // the ciphertext
        assert_eq!(
            sealer.open(&STANDARD.encode(&bytes)),
            Err(SigningError::CannotOpen)
        );
        assert_eq!(
            sealer.open("not base64!"),
            Err(SigningError::MalformedSealed)
        );
        assert_eq!(
            sealer.open(&STANDARD.encode([0u8; 27])),
            Err(SigningError::MalformedSealed)
        );
    }

    #[test]
    fn sealing_keys_must_be_32_bytes_of_base64() {
        for bad in [
            String::new(),
            "not base64".to_owned(),
            STANDARD.encode([0u8; 31]),
            STANDARD.encode([0u8; 33]),
        ] {
            assert_eq!(
                SecretBox::from_base64(&bad).unwrap_err(),
                SigningError::InvalidKey,
                "{bad:?}"
            );
        }
        let key = STANDARD.encode([9u8; 32]);
        let shown = format!("{:?}", SecretBox::from_base64(&key).unwrap());
        assert!(!shown.contains(&key), "{shown}");
    }
}
