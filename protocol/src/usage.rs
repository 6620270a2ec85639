//! `usage` on a send (protocol §7, §11: `POST …/messages` takes
//! `{content, …, usage?}`): what producing the message cost, as the sender
//! reports it. The protocol names the field but not its inside, so the
//! shape here is the common one of model APIs:
//!
//! ```json
//! {"model": "deepseek-chat", "inputTokens": 812, "outputTokens": 64}
//! ```
//!
//! `model` is a string; every other field is a token count (a
//! non-negative integer), under any name the sender's model API uses
//! (`inputTokens`, `promptTokens`, `cachedTokens`, …), so a client's own
//! spelling is kept rather than refused. The gateway stores it with the
//! message and shows it on REST; it never reads it.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Most fields one `usage` may carry, `model` included.
pub const MAX_USAGE_FIELDS: usize = 16;
/// Longest field name, in bytes (ASCII letters, digits and `_`).
pub const MAX_USAGE_FIELD_NAME: usize = 64;
/// Longest `model`, in characters.
pub const MAX_USAGE_MODEL_CHARS: usize = 200;
/// Largest token count: 2^53 − 1, the largest integer every JSON reader
/// (JavaScript's included) holds exactly.
pub const MAX_USAGE_COUNT: u64 = (1 << 53) - 1;

/// A validated `usage`: the model's name, if given, and token counts by
/// the sender's field names (kept in name order).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// The model that produced the message, 1–200 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Token counts, each 0 to [`MAX_USAGE_COUNT`].
    #[serde(flatten)]
    pub counts: BTreeMap<String, u64>,
}

/// Checks a sent `usage` (`null` is no usage). On a bad shape the error
/// names the field, e.g. `usage.inputTokens must be a non-negative
/// integer (a token count)`; the gateway answers it as 400
/// `INVALID_REQUEST`.
///
/// # Errors
///
/// Not an object; more than [`MAX_USAGE_FIELDS`] fields; a field name
/// that is empty, too long or not `[A-Za-z0-9_]`; `model` not a string of
/// 1–200 characters; any other field not an integer from 0 to
/// [`MAX_USAGE_COUNT`].
pub fn validate_usage(raw: &serde_json::Value) -> Result<Option<Usage>, String> {
    let fields = match raw {
        serde_json::Value::Null => return Ok(None),
        serde_json::Value::Object(fields) => fields,
        _ => return Err("usage must be an object of token counts and `model`".into()),
    };
    if fields.len() > MAX_USAGE_FIELDS {
        return Err(format!("usage may carry at most {MAX_USAGE_FIELDS} fields"));
    }
    let mut usage = Usage {
        model: None,
        counts: BTreeMap::new(),
    };
    for (name, value) in fields {
        let well_named = !name.is_empty()
            && name.len() <= MAX_USAGE_FIELD_NAME
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !well_named {
            return Err(format!(
                "usage field names are 1 to {MAX_USAGE_FIELD_NAME} ascii letters, digits or `_`; got {name:?}"
            ));
        }
        if name == "model" {
            match value.as_str() {
                Some(m) if !m.trim().is_empty() && m.chars().count() <= MAX_USAGE_MODEL_CHARS => {
                    usage.model = Some(m.to_owned());
                }
                _ => {
                    return Err(format!(
                        "usage.model must be a string of 1 to {MAX_USAGE_MODEL_CHARS} characters"
                    ))
                }
            }
            continue;
        }
        match value.as_u64().filter(|n| *n <= MAX_USAGE_COUNT) {
            Some(n) => {
                usage.counts.insert(name.clone(), n);
            }
            None => {
                return Err(format!(
                    "usage.{name} must be a non-negative integer (a token count) of at most {MAX_USAGE_COUNT}"
                ))
            }
        }
    }
    Ok(Some(usage))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_and_model_are_kept_under_the_senders_names() {
        let raw =
            json!({"model": "m-1", "inputTokens": 812, "outputTokens": 0, "cached_tokens": 5});
        let usage = validate_usage(&raw).unwrap().unwrap();
        assert_eq!(usage.model.as_deref(), Some("m-1"));
        assert_eq!(usage.counts["inputTokens"], 812);
        assert_eq!(serde_json::to_value(&usage).unwrap(), raw);
        let back: Usage = serde_json::from_value(raw).unwrap();
        assert_eq!(back, usage);
        assert_eq!(validate_usage(&json!(null)).unwrap(), None);
    }

    #[test]
    fn bad_shapes_name_the_field() {
        for (raw, field) in [
            (json!([1]), "usage must be an object"),
            (json!("x"), "usage must be an object"),
            (json!({"inputTokens": -1}), "usage.inputTokens"),
            (json!({"inputTokens": 1.5}), "usage.inputTokens"),
            (json!({"inputTokens": "12"}), "usage.inputTokens"),
            (json!({"outputTokens": {"n": 1}}), "usage.outputTokens"),
            (json!({"inputTokens": 1u64 << 53}), "usage.inputTokens"),
            (json!({"model": 7}), "usage.model"),
            (json!({"model": " "}), "usage.model"),
            (json!({"in put": 1}), "field names"),
        ] {
            let err = validate_usage(&raw).unwrap_err();
            assert!(err.contains(field), "{raw}: {err}");
        }
        let many: serde_json::Map<_, _> = (0..=MAX_USAGE_FIELDS)
            .map(|i| (format!("t{i}"), json!(1)))
            .collect();
        assert!(validate_usage(&serde_json::Value::Object(many)).is_err());
    }
}
