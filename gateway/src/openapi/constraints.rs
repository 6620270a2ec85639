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

/// An id: 1–64 characters of `[A-Za-z0-9_-]`.
const ID: &str = "^[A-Za-z0-9_-]{1,64}$";

/// Blank text: only whitespace (Rust's `char::is_whitespace`, what
/// `str::trim` removes), or nothing.
const BLANK: &str =
    "^[\\t\\n\\x0B\\f\\r \\x85\\xA0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]*$";

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
    // api::files::attach::requested: 1 to 10 attachments, each id 1–64
    // characters of `[A-Za-z0-9_-]` like every id the server mints (400
    // INVALID_REQUEST); whether it names an upload of the caller's is the
    // store's (409 ATTACHMENT_CONFLICT).
    let send = &mut schemas["SendBody"]["properties"];
    send["attachments"]["minItems"] = json!(1);
    send["attachments"]["maxItems"] = json!(crate::api::files::attach::MAX_ATTACHMENTS);
    send["attachmentId"]["pattern"] = json!(ID);
    schemas["AttachmentRef"]["properties"]["attachmentId"]["pattern"] = json!(ID);
    // switchboard_protocol::poll (validate_vote): each index counts from
    // zero, below the number of answers (at most MAX_OPTIONS), and none
    // twice (400 INVALID_OPTION_INDEX).
    let votes = &mut schemas["VoteBody"]["properties"]["optionIndexes"];
    votes["uniqueItems"] = json!(true);
    votes["items"]["minimum"] = json!(0);
    votes["items"]["maximum"] = json!(switchboard_protocol::poll::MAX_OPTIONS - 1);
    // provision::create_participant: only an agent can be a connector
    // (400 INVALID_REQUEST).
    all_of(
        schemas,
        "NewParticipant",
        json!({"anyOf": [
            {"properties": {"kind": {"const": "agent"}}},
            absent("connector"),
        ]}),
    );
    // provision::create_conversation and check_shape: a GROUP needs a
    // member, a DM and an AGENT_CHAT two (two distinct participants of the
    // Bay, one user and one agent for an AGENT_CHAT, which only the store
    // can tell), and only a GROUP takes a policy (400 INVALID_REQUEST).
    let of_type = |kind: &str| json!({"properties": {"type": {"const": kind}}});
    let not_type = |kind: &str| json!({"properties": {"type": {"not": {"const": kind}}}});
    let members_at_least =
        |n: u64| json!({"properties": {"members": {"type": "array", "minItems": n}}});
    all_of(
        schemas,
        "NewConversation",
        json!({"anyOf": [not_type("GROUP"), members_at_least(1)]}),
    );
    for direct in ["DM", "AGENT_CHAT"] {
        all_of(
            schemas,
            "NewConversation",
            json!({"anyOf": [not_type(direct), members_at_least(2)]}),
        );
    }
    all_of(
        schemas,
        "NewConversation",
        json!({"anyOf": [of_type("GROUP"), absent("policy")]}),
    );
    // provision::title: a blank title (empty or only whitespace) is no
    // title; any other is at most 200 characters without control
    // characters (400 INVALID_REQUEST). The same on create and on PATCH,
    // where `null` clears it.
    for schema in ["NewConversation", "ConversationPatch"] {
        let title = &mut schemas[schema]["properties"]["title"];
        assert!(title.is_object(), "{schema} has a title");
        let description = title.get("description").cloned();
        *title = json!({"anyOf": [
            {"type": "null"},
            {"type": "string", "pattern": BLANK},
            {"type": "string", "maxLength": 200, "pattern": "^[^\\x00-\\x1F\\x7F-\\x9F]*$"},
        ]});
        if let Some(d) = description {
            title["description"] = d;
        }
    }
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
