//! Cards an agent may attach to `send_message` (protocol v1.11):
//! `card = { type, payload }` with `type` `card.calendar` or `card.email`.
//!
//! [`validate_card`] is the one gate: it refuses what the protocol refuses
//! (`CARD_WITH_ATTACHMENTS`, `CARD_TYPE_NOT_SENDABLE`, `INVALID_CARD_PAYLOAD`
//! with the field named) and returns a [`Card`] whose payload holds only the
//! known fields, in a normal form every app can render. Payloads are strict
//! because the room renders them as styled cards with actions (Add to
//! calendar): an unknown or malformed field is a sender bug worth naming, not
//! something to guess at.
//!
//! Decisions the protocol leaves open, made here:
//! - A JSON `null` for an optional field means "absent" and is dropped.
//! - Every string that is given must hold a non-whitespace character; strings
//!   are otherwise kept verbatim (the sender's text is theirs).
//! - Dates are RFC 3339 date-times WITH an offset (`2026-09-21T10:00:00+02:00`,
//!   `…Z`); a date-time without an offset is refused because the room's
//!   readers live in different time zones. Calendar `start`/`end` may instead
//!   both be date-only `YYYY-MM-DD` (an all-day event); mixing the two forms
//!   is refused. Date-times are normalized to RFC 3339 keeping the offset
//!   (`Z` for UTC, fractional seconds only when present).
//! - `end` may equal `start` but not precede it.
//! - An `address` is checked lightly (`local@domain`, no whitespace), not
//!   against RFC 5322: the card only displays it.
//! - `{ name, address }` objects need at least one of the two.

use crate::error::ErrorCode;
use chrono::{DateTime, NaiveDate, SecondsFormat};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Maximum characters of a short card string: `title`, `location`,
/// `subject`, `snippet`, every `name` and `address` (this crate's cap; the
/// protocol sets none).
pub const MAX_CARD_STRING_CHARS: usize = 2_000;

/// Maximum characters of the long text fields `card.calendar` `notes` and
/// `card.email` `body`; the same as a message's `content` (32,000 chars).
pub const MAX_CARD_TEXT_CHARS: usize = 32_000;

/// Maximum entries of `card.calendar` `attendees` (this crate's cap).
pub const MAX_ATTENDEES: usize = 100;

/// `card.type` values an agent may send (protocol v1.11). `card.decision`
/// exists on the wire but only `request_approval` creates it, so it is not
/// here: nobody can draw buttons the server cannot honour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
pub enum CardType {
    /// `card.calendar`: an event, with an Add to calendar action in the apps.
    #[serde(rename = "card.calendar")]
    Calendar,
    /// `card.email`: an email summary.
    #[serde(rename = "card.email")]
    Email,
}

impl CardType {
    /// The wire form: `card.calendar` or `card.email`.
    pub fn as_str(self) -> &'static str {
        match self {
            CardType::Calendar => "card.calendar",
            CardType::Email => "card.email",
        }
    }

    /// Parses the wire form; `None` for `card.decision` and anything else.
    pub fn from_wire(s: &str) -> Option<Self> {
        match s {
            "card.calendar" => Some(CardType::Calendar),
            "card.email" => Some(CardType::Email),
            _ => None,
        }
    }
}

/// A validated card, as stored with its message and echoed to readers:
/// `{ "type": "card.calendar" | "card.email", "payload": { … } }`.
///
/// Invariant (when built by [`validate_card`]): `payload` is an object
/// holding only the known fields of `kind`, each well-formed, with nulls
/// dropped and date-times normalized.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(examples(json!({
    "type": "card.calendar",
    "payload": {
        "title": "Launch review",
        "start": "2026-09-21T10:00:00+02:00",
        "end": "2026-09-21T11:00:00+02:00",
        "attendees": [{"name": "Ana", "address": "ana@example.com"}]
    }
})))]
pub struct Card {
    /// `type` on the wire.
    #[serde(rename = "type")]
    pub kind: CardType,
    /// The normalized payload: `card.calendar` `{ title?, start?, end?,
    /// location?, attendees?: [{ name?, address? }], notes? }` or
    /// `card.email` `{ subject?, from?: { name?, address? }, snippet?,
    /// body?, timestamp? }`.
    #[schema(value_type = Object)]
    pub payload: Value,
}

/// Why a card was refused: a 400 with `code`, naming the offending field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CardError {
    /// `CARD_WITH_ATTACHMENTS`, `CARD_TYPE_NOT_SENDABLE` or
    /// `INVALID_CARD_PAYLOAD` (protocol v1.11).
    pub code: ErrorCode,
    /// Dotted path of the offending field relative to the card, e.g.
    /// `type`, `payload.attendees[1].address`; `None` for
    /// `CARD_WITH_ATTACHMENTS`, which is about the message, not a field.
    pub field: Option<String>,
    /// Lowercase human text naming the field, for the error body's `message`.
    pub message: String,
}

impl CardError {
    fn payload(field: impl Into<String>, what: &str) -> Self {
        let field = field.into();
        CardError {
            code: ErrorCode::InvalidCardPayload,
            message: format!("{field} {what}"),
            field: Some(field),
        }
    }
}

/// Validates a raw `card` of a `send_message` body (protocol v1.11).
///
/// `has_attachments` is whether the same message carries attachments; the
/// caller knows that, and it is checked first (`CARD_WITH_ATTACHMENTS`: one
/// shape per message). Then `type` (`CARD_TYPE_NOT_SENDABLE` for
/// `card.decision`, any other string, or a missing or non-string `type`),
/// then the shape (`INVALID_CARD_PAYLOAD`): `card` must be an object with
/// only `type` and `payload`, and `payload` an object of the type's fields.
/// A `card` that is not an object at all is `INVALID_CARD_PAYLOAD` naming
/// `card`. Unknown fields are reported before missing ones, so a misspelt
/// `titel` is named rather than "needs title or start".
pub fn validate_card(raw: &Value, has_attachments: bool) -> Result<Card, CardError> {
    if has_attachments {
        return Err(CardError {
            code: ErrorCode::CardWithAttachments,
            field: None,
            message: "a message carries either a card or attachments, not both".into(),
        });
    }
    let Some(card) = raw.as_object() else {
        return Err(CardError::payload("card", "must be an object"));
    };
    let kind = match card.get("type") {
        Some(Value::String(s)) => CardType::from_wire(s).ok_or_else(|| not_sendable(s))?,
        _ => {
            return Err(CardError {
                code: ErrorCode::CardTypeNotSendable,
                field: Some("type".into()),
                message: "type must be \"card.calendar\" or \"card.email\"".into(),
            })
        }
    };
    reject_unknown(card, "", &["type", "payload"])?;
    let payload = match card.get("payload") {
        Some(Value::Object(p)) => p,
        Some(Value::Null) | None => return Err(CardError::payload("payload", "is required")),
        Some(_) => return Err(CardError::payload("payload", "must be an object")),
    };
    let payload = match kind {
        CardType::Calendar => calendar(payload)?,
        CardType::Email => email(payload)?,
    };
    Ok(Card {
        kind,
        payload: Value::Object(payload),
    })
}

fn not_sendable(s: &str) -> CardError {
    // Echo a bounded prefix only: the type is caller-controlled.
    let shown: String = s.chars().take(64).collect();
    CardError {
        code: ErrorCode::CardTypeNotSendable,
        field: Some("type".into()),
        message: format!(
            "type \"{shown}\" cannot be sent: only \"card.calendar\" and \"card.email\" can"
        ),
    }
}

/// `card.calendar`: `title`, `start`, `end`, `location`, `attendees`, `notes`;
/// needs `title` or `start`; `end` not before `start`.
fn calendar(p: &Map<String, Value>) -> Result<Map<String, Value>, CardError> {
    const KNOWN: &[&str] = &["title", "start", "end", "location", "attendees", "notes"];
    reject_unknown(p, "payload.", KNOWN)?;
    let mut out = Map::new();
    let title = string(p, "payload.", "title", MAX_CARD_STRING_CHARS)?;
    let start = opt(p, "start")
        .map(|v| calendar_time(v, "payload.start"))
        .transpose()?;
    let end = opt(p, "end")
        .map(|v| calendar_time(v, "payload.end"))
        .transpose()?;
    let location = string(p, "payload.", "location", MAX_CARD_STRING_CHARS)?;
    let notes = string(p, "payload.", "notes", MAX_CARD_TEXT_CHARS)?;
    let attendees = match opt(p, "attendees") {
        None => None,
        Some(Value::Array(list)) => {
            if list.len() > MAX_ATTENDEES {
                return Err(CardError::payload(
                    "payload.attendees",
                    &format!("has more than {MAX_ATTENDEES} entries"),
                ));
            }
            let list = list
                .iter()
                .enumerate()
                .map(|(i, a)| name_address(a, &format!("payload.attendees[{i}]")))
                .collect::<Result<Vec<_>, _>>()?;
            Some(Value::Array(list))
        }
        Some(_) => return Err(CardError::payload("payload.attendees", "must be an array")),
    };
    if title.is_none() && start.is_none() {
        return Err(CardError::payload(
            "payload.title",
            "or payload.start is required on a calendar card",
        ));
    }
    if let (Some(s), Some(e)) = (&start, &end) {
        match (s, e) {
            (When::Date(s), When::Date(e)) if e < s => {
                return Err(CardError::payload("payload.end", "is before payload.start"))
            }
            (When::DateTime(s), When::DateTime(e)) if e < s => {
                return Err(CardError::payload("payload.end", "is before payload.start"))
            }
            (When::Date(_), When::DateTime(_)) => {
                return Err(CardError::payload(
                    "payload.end",
                    "must be a date like payload.start (e.g. 2026-09-21)",
                ))
            }
            (When::DateTime(_), When::Date(_)) => {
                return Err(CardError::payload(
                    "payload.end",
                    "must be a date-time with an offset like payload.start",
                ))
            }
            _ => {}
        }
    }
    put(&mut out, "title", title);
    put(&mut out, "start", start.map(When::wire));
    put(&mut out, "end", end.map(When::wire));
    put(&mut out, "location", location);
    put(&mut out, "attendees", attendees);
    put(&mut out, "notes", notes);
    Ok(out)
}

/// `card.email`: `subject`, `from`, `snippet`, `body`, `timestamp`; needs
/// `subject` or `from`.
fn email(p: &Map<String, Value>) -> Result<Map<String, Value>, CardError> {
    const KNOWN: &[&str] = &["subject", "from", "snippet", "body", "timestamp"];
    reject_unknown(p, "payload.", KNOWN)?;
    let mut out = Map::new();
    let subject = string(p, "payload.", "subject", MAX_CARD_STRING_CHARS)?;
    let from = opt(p, "from")
        .map(|v| name_address(v, "payload.from"))
        .transpose()?;
    let snippet = string(p, "payload.", "snippet", MAX_CARD_STRING_CHARS)?;
    let body = string(p, "payload.", "body", MAX_CARD_TEXT_CHARS)?;
    let timestamp = match opt(p, "timestamp") {
        None => None,
        Some(Value::String(s)) => match date_time(s) {
            Some(dt) => Some(Value::String(dt)),
            None => {
                return Err(CardError::payload(
                    "payload.timestamp",
                    "must be an rfc 3339 date-time with an offset",
                ))
            }
        },
        Some(_) => return Err(CardError::payload("payload.timestamp", "must be a string")),
    };
    if subject.is_none() && from.is_none() {
        return Err(CardError::payload(
            "payload.subject",
            "or payload.from is required on an email card",
        ));
    }
    put(&mut out, "subject", subject);
    put(&mut out, "from", from);
    put(&mut out, "snippet", snippet);
    put(&mut out, "body", body);
    put(&mut out, "timestamp", timestamp);
    Ok(out)
}

/// `{ name, address }` (an attendee or `from`): at least one of the two.
fn name_address(v: &Value, path: &str) -> Result<Value, CardError> {
    let Value::Object(o) = v else {
        return Err(CardError::payload(path, "must be an object"));
    };
    let prefix = format!("{path}.");
    reject_unknown(o, &prefix, &["name", "address"])?;
    let name = string(o, &prefix, "name", MAX_CARD_STRING_CHARS)?;
    let address = string(o, &prefix, "address", MAX_CARD_STRING_CHARS)?;
    if let Some(Value::String(a)) = &address {
        if !looks_like_address(a) {
            return Err(CardError::payload(
                format!("{prefix}address"),
                "must be an email address (local@domain)",
            ));
        }
    }
    if name.is_none() && address.is_none() {
        return Err(CardError::payload(path, "needs a name or an address"));
    }
    let mut out = Map::new();
    put(&mut out, "name", name);
    put(&mut out, "address", address);
    Ok(Value::Object(out))
}

/// A calendar instant: either a whole day or a date-time with an offset.
enum When {
    Date(NaiveDate),
    DateTime(DateTime<chrono::FixedOffset>),
}

impl When {
    fn wire(self) -> Value {
        Value::String(match self {
            When::Date(d) => d.format("%Y-%m-%d").to_string(),
            When::DateTime(dt) => dt.to_rfc3339_opts(SecondsFormat::AutoSi, true),
        })
    }
}

fn calendar_time(v: &Value, path: &str) -> Result<When, CardError> {
    let Value::String(s) = v else {
        return Err(CardError::payload(path, "must be a string"));
    };
    if let Some(d) = date_only(s) {
        return Ok(When::Date(d));
    }
    DateTime::parse_from_rfc3339(s)
        .map(When::DateTime)
        .map_err(|_| {
            CardError::payload(
                path,
                "must be an rfc 3339 date-time with an offset or a date like 2026-09-21",
            )
        })
}

/// Exactly `YYYY-MM-DD` (chrono alone would also take `2026-9-1`).
fn date_only(s: &str) -> Option<NaiveDate> {
    let b = s.as_bytes();
    let shaped = b.len() == 10
        && b.iter().enumerate().all(|(i, c)| {
            if i == 4 || i == 7 {
                *c == b'-'
            } else {
                c.is_ascii_digit()
            }
        });
    shaped
        .then(|| NaiveDate::parse_from_str(s, "%Y-%m-%d").ok())
        .flatten()
}

fn date_time(s: &str) -> Option<String> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|dt| dt.to_rfc3339_opts(SecondsFormat::AutoSi, true))
}

fn looks_like_address(a: &str) -> bool {
    match a.split_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.is_empty()
                && !domain.contains('@')
                && !a.chars().any(char::is_whitespace)
        }
        None => false,
    }
}

/// The value of an optional field; `null` counts as absent.
fn opt<'a>(o: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    o.get(key).filter(|v| !v.is_null())
}

/// An optional non-blank string of at most `max` chars.
fn string(
    o: &Map<String, Value>,
    prefix: &str,
    key: &str,
    max: usize,
) -> Result<Option<Value>, CardError> {
    match opt(o, key) {
        None => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => {
            Err(CardError::payload(format!("{prefix}{key}"), "is empty"))
        }
        Some(Value::String(s)) if s.chars().count() > max => Err(CardError::payload(
            format!("{prefix}{key}"),
            &format!("is longer than {max} characters"),
        )),
        Some(v @ Value::String(_)) => Ok(Some(v.clone())),
        Some(_) => Err(CardError::payload(
            format!("{prefix}{key}"),
            "must be a string",
        )),
    }
}

fn reject_unknown(o: &Map<String, Value>, prefix: &str, known: &[&str]) -> Result<(), CardError> {
    match o.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => {
            let shown: String = k.chars().take(64).collect();
            Err(CardError::payload(
                format!("{prefix}{shown}"),
                "is not a known field",
            ))
        }
        None => Ok(()),
    }
}

fn put(out: &mut Map<String, Value>, key: &str, v: Option<Value>) {
    if let Some(v) = v {
        out.insert(key.to_owned(), v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every refusal kind: (card, has_attachments, code, field).
    #[test]
    fn refusals() {
        use ErrorCode::{CardTypeNotSendable as NotSendable, CardWithAttachments as WithAtt};
        const BAD: ErrorCode = ErrorCode::InvalidCardPayload;
        let long = "x".repeat(MAX_CARD_STRING_CHARS + 1);
        let text = "x".repeat(MAX_CARD_TEXT_CHARS + 1);
        let many: Vec<Value> = (0..=MAX_ATTENDEES)
            .map(|i| json!({ "address": format!("a{i}@x.io") }))
            .collect();
        let cal = |payload: Value| json!({ "type": "card.calendar", "payload": payload });
        let mail = |payload: Value| json!({ "type": "card.email", "payload": payload });
        #[rustfmt::skip]
        let table: Vec<(Value, bool, ErrorCode, Option<&str>)> = vec![
            // Attachments are checked before anything else.
            (cal(json!({ "title": "t" })), true, WithAtt, None),
            (json!({ "type": "card.decision" }), true, WithAtt, None),
            // type
            (json!({ "type": "card.decision", "payload": {} }), false, NotSendable, Some("type")),
            (json!({ "type": "card.poll", "payload": {} }), false, NotSendable, Some("type")),
            (json!({ "type": "CARD.CALENDAR", "payload": {} }), false, NotSendable, Some("type")),
            (json!({ "payload": { "title": "t" } }), false, NotSendable, Some("type")),
            (json!({ "type": null, "payload": {} }), false, NotSendable, Some("type")),
            (json!({ "type": 7, "payload": {} }), false, NotSendable, Some("type")),
            // card / payload shape
            (json!("card.calendar"), false, BAD, Some("card")),
            (json!(null), false, BAD, Some("card")),
            (json!({ "type": "card.email", "payload": { "subject": "s" }, "extra": 1 }), false, BAD, Some("extra")),
            (json!({ "type": "card.calendar" }), false, BAD, Some("payload")),
            (json!({ "type": "card.calendar", "payload": null }), false, BAD, Some("payload")),
            (json!({ "type": "card.calendar", "payload": [] }), false, BAD, Some("payload")),
            // calendar: required-either, unknown fields, types, blanks, caps
            (cal(json!({})), false, BAD, Some("payload.title")),
            (cal(json!({ "location": "Room 1", "title": null })), false, BAD, Some("payload.title")),
            (cal(json!({ "titel": "t" })), false, BAD, Some("payload.titel")),
            (cal(json!({ "title": "t", "subject": "s" })), false, BAD, Some("payload.subject")),
            (cal(json!({ "title": 5 })), false, BAD, Some("payload.title")),
            (cal(json!({ "title": "" })), false, BAD, Some("payload.title")),
            (cal(json!({ "title": "  \n" })), false, BAD, Some("payload.title")),
            (cal(json!({ "title": long })), false, BAD, Some("payload.title")),
            (cal(json!({ "title": "t", "location": ["a"] })), false, BAD, Some("payload.location")),
            (cal(json!({ "title": "t", "location": "" })), false, BAD, Some("payload.location")),
            (cal(json!({ "title": "t", "notes": text })), false, BAD, Some("payload.notes")),
            // calendar: dates
            (cal(json!({ "start": 1_758_448_800 })), false, BAD, Some("payload.start")),
            (cal(json!({ "start": "" })), false, BAD, Some("payload.start")),
            (cal(json!({ "start": "tomorrow" })), false, BAD, Some("payload.start")),
            (cal(json!({ "start": "2026-09-21T10:00:00" })), false, BAD, Some("payload.start")),
            (cal(json!({ "start": "2026-9-21" })), false, BAD, Some("payload.start")),
            (cal(json!({ "start": "2026-02-30" })), false, BAD, Some("payload.start")),
            (cal(json!({ "start": "2026-09-21T25:00:00Z" })), false, BAD, Some("payload.start")),
            (cal(json!({ "title": "t", "end": "21/09/2026" })), false, BAD, Some("payload.end")),
            (cal(json!({ "start": "2026-09-21T10:00:00Z", "end": "2026-09-21T09:59:59Z" })), false, BAD, Some("payload.end")),
            // 10:00+02:00 is 08:00Z: an end at 09:00Z is after it, 07:00Z before.
            (cal(json!({ "start": "2026-09-21T10:00:00+02:00", "end": "2026-09-21T07:00:00Z" })), false, BAD, Some("payload.end")),
            (cal(json!({ "start": "2026-09-22", "end": "2026-09-21" })), false, BAD, Some("payload.end")),
            (cal(json!({ "start": "2026-09-21", "end": "2026-09-21T10:00:00Z" })), false, BAD, Some("payload.end")),
            (cal(json!({ "start": "2026-09-21T10:00:00Z", "end": "2026-09-22" })), false, BAD, Some("payload.end")),
            // calendar: attendees
            (cal(json!({ "title": "t", "attendees": { "name": "a" } })), false, BAD, Some("payload.attendees")),
            (cal(json!({ "title": "t", "attendees": many })), false, BAD, Some("payload.attendees")),
            (cal(json!({ "title": "t", "attendees": ["ana@x.io"] })), false, BAD, Some("payload.attendees[0]")),
            (cal(json!({ "title": "t", "attendees": [{ "name": "a" }, {}] })), false, BAD, Some("payload.attendees[1]")),
            (cal(json!({ "title": "t", "attendees": [{ "name": "a" }, { "address": "nope" }] })), false, BAD, Some("payload.attendees[1].address")),
            (cal(json!({ "title": "t", "attendees": [{ "name": "a", "address": "a b@x.io" }] })), false, BAD, Some("payload.attendees[0].address")),
            (cal(json!({ "title": "t", "attendees": [{ "name": "a", "address": "a@b@x.io" }] })), false, BAD, Some("payload.attendees[0].address")),
            (cal(json!({ "title": "t", "attendees": [{ "name": "a", "email": "a@x.io" }] })), false, BAD, Some("payload.attendees[0].email")),
            (cal(json!({ "title": "t", "attendees": [{ "name": 3 }] })), false, BAD, Some("payload.attendees[0].name")),
            (cal(json!({ "title": "t", "attendees": [{ "name": "" }] })), false, BAD, Some("payload.attendees[0].name")),
            // email
            (mail(json!({})), false, BAD, Some("payload.subject")),
            (mail(json!({ "snippet": "hi" })), false, BAD, Some("payload.subject")),
            (mail(json!({ "subject": "s", "to": "b@x.io" })), false, BAD, Some("payload.to")),
            (mail(json!({ "subject": "s", "title": "t" })), false, BAD, Some("payload.title")),
            (mail(json!({ "subject": true })), false, BAD, Some("payload.subject")),
            (mail(json!({ "subject": "" })), false, BAD, Some("payload.subject")),
            (mail(json!({ "from": "ana@x.io" })), false, BAD, Some("payload.from")),
            (mail(json!({ "from": {} })), false, BAD, Some("payload.from")),
            (mail(json!({ "from": { "address": "ana" } })), false, BAD, Some("payload.from.address")),
            (mail(json!({ "from": { "name": "Ana", "id": "ana" } })), false, BAD, Some("payload.from.id")),
            (mail(json!({ "subject": "s", "snippet": long })), false, BAD, Some("payload.snippet")),
            (mail(json!({ "subject": "s", "body": text })), false, BAD, Some("payload.body")),
            (mail(json!({ "subject": "s", "body": 12 })), false, BAD, Some("payload.body")),
            (mail(json!({ "subject": "s", "timestamp": 1_758_448_800 })), false, BAD, Some("payload.timestamp")),
            (mail(json!({ "subject": "s", "timestamp": "2026-09-21" })), false, BAD, Some("payload.timestamp")),
            (mail(json!({ "subject": "s", "timestamp": "2026-09-21T10:00:00" })), false, BAD, Some("payload.timestamp")),
            (mail(json!({ "subject": "s", "timestamp": "" })), false, BAD, Some("payload.timestamp")),
        ];
        for (raw, has_attachments, code, field) in table {
            let err = validate_card(&raw, has_attachments).expect_err(&raw.to_string());
            assert_eq!(err.code, code, "{raw}: {err:?}");
            assert_eq!(err.field.as_deref(), field, "{raw}: {err:?}");
            if let Some(field) = field {
                assert!(err.message.contains(field), "{raw}: {err:?}");
                if code == BAD {
                    let rest = err.message.replace(field, "");
                    assert!(!rest.chars().any(char::is_uppercase), "{err:?}");
                }
            }
        }
    }

    /// Accepted cards and their normalized form: (card, normalized payload).
    #[test]
    fn accepted_and_normalized() {
        let max = "x".repeat(MAX_CARD_STRING_CHARS);
        let body = "y".repeat(MAX_CARD_TEXT_CHARS);
        let full_list: Vec<Value> = (0..MAX_ATTENDEES)
            .map(|i| json!({ "address": format!("a{i}@x.io") }))
            .collect();
        #[rustfmt::skip]
        let table: Vec<(Value, CardType, Value)> = vec![
            (
                json!({ "type": "card.calendar", "payload": {
                    "title": "Launch review",
                    "start": "2026-09-21T10:00:00+02:00",
                    "end": "2026-09-21 11:30:00.250+02:00",
                    "location": null,
                    "attendees": [{ "name": "Ana", "address": "ana@example.com" }, { "name": "Rex" }],
                    "notes": "  bring the numbers  "
                } }),
                CardType::Calendar,
                json!({
                    "title": "Launch review",
                    "start": "2026-09-21T10:00:00+02:00",
                    "end": "2026-09-21T11:30:00.250+02:00",
                    "attendees": [{ "name": "Ana", "address": "ana@example.com" }, { "name": "Rex" }],
                    "notes": "  bring the numbers  "
                }),
            ),
            // `start` alone suffices; +00:00 becomes Z.
            (
                json!({ "type": "card.calendar", "payload": { "start": "2026-09-21T08:00:00+00:00" } }),
                CardType::Calendar,
                json!({ "start": "2026-09-21T08:00:00Z" }),
            ),
            // All-day, one day long (end may equal start); equal instants too.
            (
                json!({ "type": "card.calendar", "payload": { "title": "Offsite", "start": "2026-09-21", "end": "2026-09-21" } }),
                CardType::Calendar,
                json!({ "title": "Offsite", "start": "2026-09-21", "end": "2026-09-21" }),
            ),
            (
                json!({ "type": "card.calendar", "payload": { "start": "2026-09-21T10:00:00+02:00", "end": "2026-09-21T08:00:00Z" } }),
                CardType::Calendar,
                json!({ "start": "2026-09-21T10:00:00+02:00", "end": "2026-09-21T08:00:00Z" }),
            ),
            // `end` without `start`, caps reached exactly, empty attendee list.
            (
                json!({ "type": "card.calendar", "payload": { "title": max, "end": "2026-09-21", "attendees": [] } }),
                CardType::Calendar,
                json!({ "title": max, "end": "2026-09-21", "attendees": [] }),
            ),
            (
                json!({ "type": "card.calendar", "payload": { "title": "t", "attendees": full_list } }),
                CardType::Calendar,
                json!({ "title": "t", "attendees": full_list }),
            ),
            (
                json!({ "type": "card.email", "payload": {
                    "subject": "Q3 numbers",
                    "from": { "name": "Ana", "address": "ana@example.com" },
                    "snippet": "Here are…",
                    "body": body,
                    "timestamp": "2026-09-21T10:00:00.5Z"
                } }),
                CardType::Email,
                json!({
                    "subject": "Q3 numbers",
                    "from": { "name": "Ana", "address": "ana@example.com" },
                    "snippet": "Here are…",
                    "body": body,
                    "timestamp": "2026-09-21T10:00:00.500Z"
                }),
            ),
            // `from` alone suffices, with just an address; nulls dropped.
            (
                json!({ "type": "card.email", "payload": { "from": { "address": "ana@example.com", "name": null }, "subject": null } }),
                CardType::Email,
                json!({ "from": { "address": "ana@example.com" } }),
            ),
        ];
        for (raw, kind, payload) in table {
            let card = validate_card(&raw, false).unwrap_or_else(|e| panic!("{raw}: {e:?}"));
            assert_eq!(card.kind, kind, "{raw}");
            assert_eq!(card.payload, payload, "{raw}");
            // Normalizing is idempotent: the stored form validates to itself.
            let again = validate_card(&serde_json::to_value(&card).unwrap(), false).unwrap();
            assert_eq!(again, card);
        }
    }

    #[test]
    fn card_serializes_with_wire_type() {
        let card = validate_card(
            &json!({ "type": "card.email", "payload": { "subject": "s" } }),
            false,
        )
        .unwrap();
        let wire = serde_json::to_value(&card).unwrap();
        assert_eq!(
            wire,
            json!({ "type": "card.email", "payload": { "subject": "s" } })
        );
        assert_eq!(serde_json::from_value::<Card>(wire).unwrap(), card);
        for kind in [CardType::Calendar, CardType::Email] {
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
            assert_eq!(CardType::from_wire(kind.as_str()), Some(kind));
        }
        assert_eq!(CardType::from_wire("card.decision"), None);
    }
}
