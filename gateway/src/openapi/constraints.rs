//! Rules of request bodies that utoipa's derive cannot state, written into
//! the component schemas as plain JSON Schema: the items of an array of
//! strings, and rules across fields ("exactly one of", "not both").
//!
//! Each rule is the handler's, named next to it: a body that passes the
//! schema passes these checks, and one that breaks them is refused with the
//! code given (400).

use serde_json::{json, Value};

/// Visible text: at least one character that is neither whitespace nor an
/// invisible format character (zero-width space and joiners, word joiner,
/// BOM), as `switchboard_protocol::poll` counts blank.
const VISIBLE: &str = "[^\\t\\n\\x0B\\f\\r \\x85\\xA0\\u1680\\u2000-\\u200D\\u2028\\u2029\\u202F\\u205F\\u2060\\u3000\\uFEFF]";

/// Applies every rule to `doc` (the whole OpenAPI document).
pub(super) fn apply(doc: &mut Value) {
    let schemas = &mut doc["components"]["schemas"];
    // switchboard_protocol::poll::validate_poll: each answer 1–200
    // characters after trimming and not blank (400 INVALID_POLL).
    schemas["CreatePoll"]["properties"]["options"]["items"] = json!({
        "type": "string", "minLength": 1, "maxLength": 200, "pattern": VISIBLE,
    });
    // api::connectors::answer: exactly one of `result` and `error`, a
    // present `result: null` counting as given and `error: null` as absent
    // (400 INVALID_REQUEST).
    all_of(
        schemas,
        "Answer",
        json!({"oneOf": [
            {"required": ["result"]},
            {"required": ["error"], "properties": {"error": {"type": "object"}}},
        ]}),
    );
    // api::messages::send: a card or attachments, not both (400
    // CARD_WITH_ATTACHMENTS); `attachments` or the legacy `attachmentId`,
    // not both (400 INVALID_REQUEST). A `null` field counts as absent.
    let absent = |field: &str| json!({"properties": {field: {"type": "null"}}});
    all_of(
        schemas,
        "SendBody",
        json!({"anyOf": [absent("card"), absent("attachments")]}),
    );
    all_of(
        schemas,
        "SendBody",
        json!({"anyOf": [absent("attachmentId"), absent("attachments")]}),
    );
    all_of(
        schemas,
        "SendBody",
        json!({"anyOf": [absent("attachmentId"), absent("card")]}),
    );
}

/// Adds `rule` to the `allOf` of component schema `name`.
fn all_of(schemas: &mut Value, name: &str, rule: Value) {
    let schema = &mut schemas[name];
    assert!(schema.is_object(), "component schema {name} exists");
    match schema.get_mut("allOf").and_then(Value::as_array_mut) {
        Some(rules) => rules.push(rule),
        None => schema["allOf"] = json!([rule]),
    }
}
