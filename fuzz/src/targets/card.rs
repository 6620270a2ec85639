//! `card`: the `card` of `send_message` bodies (protocol v1.11), through
//! the one public gate every card passes, [`validate_card`].
//!
//! Input: arbitrary bytes, decoded as JSON (bodies that are not JSON are
//! the extractor's `INVALID_JSON`, see `http` in docs/fuzzing.md). The value
//! is validated as a card, and, when it looks like a whole `SendBody`
//! (`{content, card, attachments, …}`), its `card` is validated with
//! `has_attachments` taken from the body, as the route does.
//!
//! Properties:
//! - never panics; deterministic;
//! - with attachments every card is `CARD_WITH_ATTACHMENTS`, no field;
//! - a refusal is `CARD_TYPE_NOT_SENDABLE` (field `type`) or
//!   `INVALID_CARD_PAYLOAD` naming a field that its message contains, the
//!   rest of the message lowercase;
//! - an accepted card keeps the type it was sent with; its payload holds
//!   only the type's known fields, every string non-blank and within its
//!   cap, at least one of the required pair, `end` not before `start`;
//! - normalizing is idempotent (the stored card validates to itself) and
//!   the `Card` serde round trip is lossless.

use chrono::{DateTime, NaiveDate};
use serde_json::Value;
use switchboard_protocol::card::{
    validate_card, Card, CardType, MAX_ATTENDEES, MAX_CARD_STRING_CHARS, MAX_CARD_TEXT_CHARS,
};
use switchboard_protocol::error::ErrorCode;

const DICT: &[&[u8]] = &[
    b"\"type\"",
    b"\"payload\"",
    b"\"card.calendar\"",
    b"\"card.email\"",
    b"\"card.decision\"",
    b"\"title\"",
    b"\"start\"",
    b"\"end\"",
    b"\"location\"",
    b"\"attendees\"",
    b"\"notes\"",
    b"\"subject\"",
    b"\"from\"",
    b"\"snippet\"",
    b"\"body\"",
    b"\"timestamp\"",
    b"\"name\"",
    b"\"address\"",
    b"\"attachments\"",
    b"\"content\"",
    b"\"card\"",
    b"null",
    b"\"2026-09-21T10:00:00+02:00\"",
    b"\"2026-09-21T23:59:60Z\"",
    b"\"2026-09-21T10:00:00.123456789-23:59\"",
    b"\"2026-09-21 10:00:00z\"",
    b"\"2026-09-21\"",
    b"\"0000-01-01\"",
    b"\"9999-12-31T23:59:59-23:59\"",
    b"\"+10000-01-01\"",
    b"\"2026-02-29\"",
    b"\"ana@example.com\"",
    b"\"a@b@c\"",
    b"\"@\"",
    b"\" \"",
    b"\"\"",
    b"[{\"name\":\"Ana\"}]",
    b"{}",
    b"[]",
    b"1.5",
    b"true",
    b",",
    b":",
    b"{",
    b"}",
    b"T",
    b"Z",
    b"+14:00",
    b".5",
];

fn is_blank(s: &str) -> bool {
    s.trim().is_empty()
}

fn check_string(payload: &Value, key: &str, cap: usize) {
    if let Some(v) = payload.get(key) {
        let s = v
            .as_str()
            .unwrap_or_else(|| panic!("{key} is not a string: {v}"));
        assert!(!is_blank(s), "{key} is blank");
        assert!(s.chars().count() <= cap, "{key} is above {cap} chars");
    }
}

fn check_name_address(v: &Value, path: &str) {
    let o = v
        .as_object()
        .unwrap_or_else(|| panic!("{path} is not an object"));
    assert!(
        o.keys().all(|k| k == "name" || k == "address"),
        "{path}: {v}"
    );
    assert!(!o.is_empty(), "{path} is empty");
    check_string(v, "name", MAX_CARD_STRING_CHARS);
    check_string(v, "address", MAX_CARD_STRING_CHARS);
    if let Some(a) = o.get("address").and_then(Value::as_str) {
        let (local, domain) = a.split_once('@').expect("address has an @");
        assert!(!local.is_empty() && !domain.is_empty() && !domain.contains('@'));
        assert!(!a.chars().any(char::is_whitespace));
    }
}

enum When {
    Date(NaiveDate),
    Time(DateTime<chrono::FixedOffset>),
}

fn when(v: &Value) -> When {
    let s = v.as_str().expect("a string");
    if s.len() == 10 {
        if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
            return When::Date(d);
        }
    }
    When::Time(
        DateTime::parse_from_rfc3339(s).unwrap_or_else(|e| panic!("stored {s} unparsable: {e}")),
    )
}

fn check_accepted(raw: &Value, card: &Card) {
    assert_eq!(
        raw.get("type").and_then(Value::as_str),
        Some(card.kind.as_str())
    );
    let p = card.payload.as_object().expect("the payload is an object");
    assert!(p.values().all(|v| !v.is_null()), "nulls are dropped");
    match card.kind {
        CardType::Calendar => {
            const KNOWN: &[&str] = &["title", "start", "end", "location", "attendees", "notes"];
            assert!(p.keys().all(|k| KNOWN.contains(&k.as_str())), "{p:?}");
            assert!(p.contains_key("title") || p.contains_key("start"));
            check_string(&card.payload, "title", MAX_CARD_STRING_CHARS);
            check_string(&card.payload, "location", MAX_CARD_STRING_CHARS);
            check_string(&card.payload, "notes", MAX_CARD_TEXT_CHARS);
            if let Some(list) = p.get("attendees") {
                let list = list.as_array().expect("attendees is an array");
                assert!(list.len() <= MAX_ATTENDEES);
                for (i, a) in list.iter().enumerate() {
                    check_name_address(a, &format!("attendees[{i}]"));
                }
            }
            if let (Some(s), Some(e)) = (p.get("start"), p.get("end")) {
                match (when(s), when(e)) {
                    (When::Date(s), When::Date(e)) => assert!(s <= e, "end before start"),
                    (When::Time(s), When::Time(e)) => assert!(s <= e, "end before start"),
                    _ => panic!("start and end mix a date and a date-time"),
                }
            }
        }
        CardType::Email => {
            const KNOWN: &[&str] = &["subject", "from", "snippet", "body", "timestamp"];
            assert!(p.keys().all(|k| KNOWN.contains(&k.as_str())), "{p:?}");
            assert!(p.contains_key("subject") || p.contains_key("from"));
            check_string(&card.payload, "subject", MAX_CARD_STRING_CHARS);
            check_string(&card.payload, "snippet", MAX_CARD_STRING_CHARS);
            check_string(&card.payload, "body", MAX_CARD_TEXT_CHARS);
            if let Some(from) = p.get("from") {
                check_name_address(from, "from");
            }
            if let Some(t) = p.get("timestamp") {
                assert!(matches!(when(t), When::Time(_)), "timestamp {t}");
            }
        }
    }
    // Idempotent: what is stored and echoed validates to itself.
    let stored = serde_json::to_value(card).expect("a card serializes");
    let again = validate_card(&stored, false)
        .unwrap_or_else(|e| panic!("stored card {stored} refused: {e:?}"));
    assert_eq!(&again, card, "normalizing {raw} is not idempotent");
    let wire = serde_json::to_string(card).expect("a card serializes");
    let back: Card = serde_json::from_str(&wire).expect("a card deserializes");
    assert_eq!(&back, card, "serde round trip of {wire}");
}

fn check_card(raw: &Value) {
    let with_attachments = validate_card(raw, true).expect_err("attachments");
    assert_eq!(with_attachments.code, ErrorCode::CardWithAttachments);
    assert_eq!(with_attachments.field, None);

    let result = validate_card(raw, false);
    assert_eq!(result, validate_card(raw, false), "deterministic");
    match result {
        Ok(card) => check_accepted(raw, &card),
        Err(err) => {
            let field = err.field.as_deref().expect("a refusal names its field");
            assert!(err.message.contains(field), "{err:?}");
            match err.code {
                ErrorCode::CardTypeNotSendable => assert_eq!(field, "type"),
                ErrorCode::InvalidCardPayload => {
                    let rest = err.message.replacen(field, "", 1);
                    assert!(
                        !rest.chars().any(char::is_uppercase),
                        "message not lowercase: {err:?}"
                    );
                }
                other => panic!("unexpected code {other:?}: {err:?}"),
            }
        }
    }
}

#[test]
fn card() {
    crate::fuzz_target!("card", DICT, |input: &[u8]| {
        let Ok(value) = serde_json::from_slice::<Value>(input) else {
            return;
        };
        crate::deep();
        check_card(&value);
        // A whole send body: its card, with attachments as the route sees them.
        if let Some(card) = value.get("card").filter(|c| !c.is_null()) {
            let has_attachments = value
                .get("attachments")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty());
            if has_attachments {
                assert!(validate_card(card, true).is_err());
            }
            check_card(card);
        }
    });
}
