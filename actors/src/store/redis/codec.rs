//! Encoding between records and what Redis holds: JSON with holes for the
//! scripts to fill, reply parsing, and the mapping of failures onto
//! [`StoreError`].

use super::super::StoreError;
use rand::Rng;
use redis::{ErrorKind, RedisError, Value};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Display;
use std::str::FromStr;
use switchboard_protocol::cursor::EntryId;

/// A backing-service failure while `doing` something to `key`.
pub fn unavailable(doing: &'static str, key: &str, cause: impl Display) -> StoreError {
    StoreError::Unavailable {
        doing,
        cause: format!("{key}: {cause}"),
    }
}

/// Data at `key` that could not be decoded.
pub fn corrupt(doing: &'static str, key: &str, cause: impl Display) -> StoreError {
    StoreError::Corrupt {
        doing,
        cause: format!("{key}: {cause}"),
    }
}

/// Maps a client error: a value of the wrong shape (`WRONGTYPE`, a reply
/// that does not convert) is corruption; everything else — refused or
/// dropped connections, timeouts, `LOADING`, `READONLY`, `OOM`, cluster
/// errors — means the store cannot serve the request now.
pub fn from_redis(doing: &'static str, key: &str, err: RedisError) -> StoreError {
    if err.kind() == ErrorKind::TypeError || err.code() == Some("WRONGTYPE") {
        corrupt(doing, key, err)
    } else {
        unavailable(doing, key, err)
    }
}

/// Decodes a JSON record.
pub fn decode<T: DeserializeOwned>(
    doing: &'static str,
    key: &str,
    raw: &[u8],
) -> Result<T, StoreError> {
    serde_json::from_slice(raw).map_err(|e| corrupt(doing, key, e))
}

/// Encodes a record as JSON. Records always encode; a failure is reported
/// as corruption rather than a panic.
pub fn encode<T: serde::Serialize>(
    doing: &'static str,
    key: &str,
    value: &T,
) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| corrupt(doing, key, e))
}

/// A fresh random epoch candidate (12 lowercase alphanumerics). A new one is
/// passed with every call that may mint the epoch, so a Bay whose data was
/// lost never gets its old epoch back.
pub fn epoch_candidate() -> String {
    rand::rng()
        .sample_iter(rand::distr::Alphanumeric)
        .take(12)
        .map(|c| (c as char).to_ascii_lowercase())
        .collect()
}

/// Builds JSON documents with holes a Lua script fills by concatenation.
///
/// Put [`Holes::hole`] strings where values are to go (they serialise as
/// ordinary JSON strings), serialise, then [`Holes::split`] the text at the
/// quoted holes. The hole names carry a 128-bit random nonce, and a quoted
/// hole cannot occur inside an escaped JSON string, so user content cannot
/// forge one.
pub struct Holes {
    nonce: String,
}

impl Holes {
    pub fn new() -> Self {
        let n: u128 = rand::rng().random();
        Holes {
            nonce: format!("{n:032x}"),
        }
    }

    /// The placeholder value for hole `i`.
    pub fn hole(&self, i: usize) -> serde_json::Value {
        serde_json::Value::String(format!("__sb_hole_{}_{i}__", self.nonce))
    }

    /// Splits `json` at holes `0..n`, which must each occur exactly once
    /// and in that order: `n + 1` pieces.
    pub fn split(
        &self,
        doing: &'static str,
        json: &str,
        n: usize,
    ) -> Result<Vec<String>, StoreError> {
        let mut pieces = Vec::with_capacity(n + 1);
        let mut rest = json;
        for i in 0..n {
            let marker = format!("\"__sb_hole_{}_{i}__\"", self.nonce);
            let at = rest.find(&marker).ok_or_else(|| StoreError::Corrupt {
                doing,
                cause: format!("hole {i} missing from the encoded record"),
            })?;
            pieces.push(rest[..at].to_owned());
            rest = &rest[at + marker.len()..];
            if rest.contains(&marker) {
                return Err(StoreError::Corrupt {
                    doing,
                    cause: format!("hole {i} occurs twice in the encoded record"),
                });
            }
        }
        pieces.push(rest.to_owned());
        Ok(pieces)
    }
}

// ---- reply parsing ----

/// The bytes of a string reply.
pub fn bytes<'a>(doing: &'static str, key: &str, v: &'a Value) -> Result<&'a [u8], StoreError> {
    match v {
        Value::BulkString(b) => Ok(b),
        Value::SimpleString(s) => Ok(s.as_bytes()),
        Value::Okay => Ok(b"OK"),
        other => Err(corrupt(
            doing,
            key,
            format!("expected a string, got {other:?}"),
        )),
    }
}

/// A string reply as UTF-8.
pub fn text<'a>(doing: &'static str, key: &str, v: &'a Value) -> Result<&'a str, StoreError> {
    std::str::from_utf8(bytes(doing, key, v)?).map_err(|e| corrupt(doing, key, e))
}

/// The items of an array reply.
pub fn array<'a>(doing: &'static str, key: &str, v: &'a Value) -> Result<&'a [Value], StoreError> {
    match v {
        Value::Array(items) => Ok(items),
        other => Err(corrupt(
            doing,
            key,
            format!("expected an array, got {other:?}"),
        )),
    }
}

/// A stream id reply.
pub fn entry_id(doing: &'static str, key: &str, v: &Value) -> Result<EntryId, StoreError> {
    let s = text(doing, key, v)?;
    EntryId::from_str(s).map_err(|_| corrupt(doing, key, format!("bad stream id {s:?}")))
}

/// The status word a script answers first (see the `lua` module).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScriptStatus {
    /// Done.
    Ok,
    /// The record the script works on does not exist.
    Missing,
    /// The Bay does not exist.
    NoBay,
    /// The id is taken.
    Exists,
    /// A compare-and-set found another value; retry.
    Conflict,
    /// The conversation moved past the revision the caller routed with.
    Stale,
    /// The draft is not open (anymore).
    Closed,
    /// A rate-limit bucket is empty.
    Limited,
    /// One message of a batched append failed with an error (its text
    /// follows); the batch's others went on (`messages/append.lua`).
    Failed,
}

/// The status word a script answers first. An unknown word is `Corrupt`.
pub fn status(doing: &'static str, key: &str, reply: &[Value]) -> Result<ScriptStatus, StoreError> {
    let first = reply
        .first()
        .ok_or_else(|| corrupt(doing, key, "empty script reply"))?;
    Ok(match text(doing, key, first)? {
        "ok" => ScriptStatus::Ok,
        "missing" => ScriptStatus::Missing,
        "nobay" => ScriptStatus::NoBay,
        "exists" => ScriptStatus::Exists,
        "conflict" => ScriptStatus::Conflict,
        "stale" => ScriptStatus::Stale,
        "closed" => ScriptStatus::Closed,
        "limited" => ScriptStatus::Limited,
        "failed" => ScriptStatus::Failed,
        other => return Err(corrupt(doing, key, format!("script said {other:?}"))),
    })
}

/// A stream entry's id and the values of the fields asked for.
pub type EntryFields<'a, const N: usize> = (EntryId, [Option<&'a [u8]>; N]);

/// The entries of an `XRANGE`/`XREAD` entry list: `(id, values)`, the
/// values of `names` in that order (`None` where an entry lacks one).
pub fn stream_fields<'a, const N: usize>(
    doing: &'static str,
    key: &str,
    v: &'a Value,
    names: &[&str; N],
) -> Result<Vec<EntryFields<'a, N>>, StoreError> {
    array(doing, key, v)?
        .iter()
        .map(|entry| {
            let [id, fields] = array(doing, key, entry)? else {
                return Err(corrupt(doing, key, "stream entry is not [id, fields]"));
            };
            let id = entry_id(doing, key, id)?;
            let mut out = [None; N];
            for kv in array(doing, key, fields)?.chunks(2) {
                if let [k, v] = kv {
                    let k = bytes(doing, key, k)?;
                    if let Some(i) = names.iter().position(|n| n.as_bytes() == k) {
                        out[i] = Some(bytes(doing, key, v)?);
                    }
                }
            }
            Ok((id, out))
        })
        .collect()
}

/// The entries of an `XRANGE` reply: `(id, value of field)` for each entry.
pub fn stream_entries<'a>(
    doing: &'static str,
    key: &str,
    v: &'a Value,
    field: &str,
) -> Result<Vec<(EntryId, &'a [u8])>, StoreError> {
    array(doing, key, v)?
        .iter()
        .map(|entry| {
            let parts = array(doing, key, entry)?;
            let [id, fields] = parts else {
                return Err(corrupt(doing, key, "stream entry is not [id, fields]"));
            };
            let id = entry_id(doing, key, id)?;
            let fields = array(doing, key, fields)?;
            let value = fields
                .chunks(2)
                .find_map(|kv| match kv {
                    [k, v] if bytes(doing, key, k).ok() == Some(field.as_bytes()) => Some(v),
                    _ => None,
                })
                .ok_or_else(|| corrupt(doing, key, format!("entry {id} has no field {field:?}")))?;
            Ok((id, bytes(doing, key, value)?))
        })
        .collect()
}

/// Replaces the existing field `name` of a JSON object with `with`.
pub fn punch(
    doing: &'static str,
    value: &mut serde_json::Value,
    path: &[&str],
    with: serde_json::Value,
) -> Result<(), StoreError> {
    let mut at = value;
    for name in path {
        at = at
            .as_object_mut()
            .and_then(|o| o.get_mut(*name))
            .ok_or_else(|| StoreError::Corrupt {
                doing,
                cause: format!("encoded record has no field {path:?}"),
            })?;
    }
    *at = with;
    Ok(())
}

pub fn to_value<T: Serialize>(doing: &'static str, v: &T) -> Result<serde_json::Value, StoreError> {
    serde_json::to_value(v).map_err(|e| StoreError::Corrupt {
        doing,
        cause: e.to_string(),
    })
}

pub fn to_text(doing: &'static str, v: &serde_json::Value) -> Result<String, StoreError> {
    serde_json::to_string(v).map_err(|e| StoreError::Corrupt {
        doing,
        cause: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn holes_split_where_the_placeholders_were() {
        let h = Holes::new();
        let doc = json!({"a": h.hole(0), "content": "\"__sb_hole_x_0__\"", "b": {"c": h.hole(1)}});
        let text = serde_json::to_string(&doc).unwrap();
        let pieces = h.split("testing", &text, 2).unwrap();
        assert_eq!(pieces.len(), 3);
        let filled = format!("{}1{}true{}", pieces[0], pieces[1], pieces[2]);
        let back: serde_json::Value = serde_json::from_str(&filled).unwrap();
        assert_eq!(back["a"], 1);
        assert_eq!(back["b"]["c"], true);
        assert_eq!(back["content"], "\"__sb_hole_x_0__\"");
    }

    #[test]
    fn forged_holes_are_not_holes() {
        let h = Holes::new();
        let forged = h.hole(0).as_str().unwrap().to_owned();
        // The content carries the exact hole text, but escaped inside a string.
        let doc = json!({"content": format!("\"{forged}\""), "a": h.hole(0)});
        let text = serde_json::to_string(&doc).unwrap();
        let pieces = h.split("testing", &text, 1).unwrap();
        let back: serde_json::Value =
            serde_json::from_str(&format!("{}7{}", pieces[0], pieces[1])).unwrap();
        assert_eq!(back["a"], 7);
        assert_eq!(back["content"], format!("\"{forged}\""));
    }

    #[test]
    fn epoch_candidates_are_valid_and_fresh() {
        let a = epoch_candidate();
        assert!(switchboard_protocol::cursor::Epoch::is_valid(&a));
        assert_ne!(a, epoch_candidate());
    }
}
