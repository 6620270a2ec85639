//! `ws_frame`: inbound WebSocket text frames, parsed exactly as
//! `WsSession::on_text` (gateway/src/realtime/ws.rs) parses them —
//! `serde_json::from_str::<ClientFrame>` — then the `resume` handling of
//! `on_hello`, plus the server frames' `to_json` on the same text.
//!
//! Properties:
//! - parsing never panics and is deterministic;
//! - the parse agrees with an independent model of the frame grammar
//!   (protocol §11, docs/websocket.md): a JSON object whose keys are `t`
//!   (exactly once, the string `"hello"`) and optionally `resume` (once,
//!   a string or `null`), nothing else. Everything else is a framing
//!   violation (close 4002). Known finding, tolerated until fixed (see
//!   [`TOLERATE_ARRAY_FRAMES`]): serde also accepts the array form
//!   `["hello"]` / `["hello", <resume>]`;
//! - an accepted frame, written back as JSON, parses to the same frame;
//! - `resume` classification never panics, and a blank `resume` means
//!   "start at now", as documented;
//! - every server frame built from the text serializes to JSON that parses
//!   back to the same fields (`to_json` would panic otherwise).

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::{json, Value};
use switchboard_protocol::cursor::LogPosition;
use switchboard_protocol::error::WsClose;
use switchboard_protocol::frame::{ClientFrame, ServerFrame};

const DICT: &[&[u8]] = &[
    b"{",
    b"}",
    b"\"t\"",
    b"\"hello\"",
    b"\"resume\"",
    b":",
    b",",
    b"null",
    b"true",
    b"1e400",
    b"-0",
    b"[]",
    b"{}",
    b"\"\"",
    b"\"HELLO\"",
    b"\"ready\"",
    "\"\\u0074\"".as_bytes(),
    "\"\\ud800\"".as_bytes(),
    "\"\\u0000\"".as_bytes(),
    b"\\",
    b"\"MS5rM3g5LjE3NjQ1MDAwMDAwMDAtNw\"",
    b" ",
    b"\n",
    b"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
];

/// A JSON object's entries in order, duplicates kept (serde_json's `Value`
/// would keep only the last of a duplicated key).
struct Entries(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Entries;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = map.next_entry::<String, Value>()? {
                    out.push(entry);
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// Finding 1 of docs/fuzzing.md: `ClientFrame` (protocol/src/frame.rs) is
/// an internally tagged serde enum, and serde also deserializes those from
/// a JSON array (tag first, then the fields by position), so `on_text`
/// accepts `["hello"]` and `["hello","<cursor>"]` as a `hello` although
/// docs/websocket.md allows only the object form. While this is true the
/// model accepts the array form too, so the rest of the grammar is still
/// checked; [`array_frames_are_accepted`] fails once the parse is fixed —
/// then set this to `false`.
const TOLERATE_ARRAY_FRAMES: bool = true;

/// The array form serde accepts (see [`TOLERATE_ARRAY_FRAMES`]).
fn array_form(text: &str) -> Option<ClientFrame> {
    let items: Vec<Value> = serde_json::from_str(text).ok()?;
    match items.as_slice() {
        [t] if t == "hello" => Some(ClientFrame::Hello { resume: None }),
        [t, Value::Null] if t == "hello" => Some(ClientFrame::Hello { resume: None }),
        [t, Value::String(r)] if t == "hello" => Some(ClientFrame::Hello {
            resume: Some(r.clone()),
        }),
        _ => None,
    }
}

/// The frame grammar of docs/websocket.md, written without serde's derive.
fn model(text: &str) -> Option<ClientFrame> {
    if TOLERATE_ARRAY_FRAMES && text.trim_start().starts_with('[') {
        return array_form(text);
    }
    let Entries(entries) = serde_json::from_str(text).ok()?;
    let mut t = None;
    let mut resume = None;
    for (key, value) in entries {
        match key.as_str() {
            "t" if t.is_none() => t = Some(value),
            "resume" if resume.is_none() => resume = Some(value),
            _ => return None,
        }
    }
    if t? != json!("hello") {
        return None;
    }
    let resume = match resume {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => return None,
    };
    Some(ClientFrame::Hello { resume })
}

/// `on_hello`'s reading of `resume`: (position, undecodable).
fn classify(resume: Option<&str>) -> (Option<LogPosition>, bool) {
    match resume.map(str::trim).map(LogPosition::decode) {
        None => (None, false),
        Some(Err(_)) if resume.is_some_and(|r| r.trim().is_empty()) => (None, false),
        Some(Ok(p)) => (Some(p), false),
        Some(Err(_)) => (None, true),
    }
}

fn check_server_frames(text: &str) {
    let frames = [
        (
            ServerFrame::Ready { cursor: Some(text) },
            json!({"t": "ready", "cursor": text}),
        ),
        (
            ServerFrame::Ready { cursor: None },
            json!({"t": "ready", "cursor": null}),
        ),
        (
            ServerFrame::Cursor { cursor: text },
            json!({"t": "cursor", "cursor": text}),
        ),
        (ServerFrame::Reset, json!({"t": "reset"})),
    ];
    let errors = WsClose::ALL.map(|code| {
        (
            ServerFrame::Error {
                code,
                message: text,
            },
            json!({"t": "error", "code": code.as_str(), "message": text}),
        )
    });
    for (frame, expected) in frames.into_iter().chain(errors) {
        let wire = frame.to_json();
        let parsed: Value = serde_json::from_str(&wire)
            .unwrap_or_else(|e| panic!("server frame {wire} is not JSON: {e}"));
        assert_eq!(parsed, expected, "server frame {wire}");
        assert!(!wire.contains('\n'), "server frame {wire} spans lines");
    }
}

#[test]
fn ws_frame() {
    crate::fuzz_target!("ws_frame", DICT, |input: &[u8]| {
        let text = String::from_utf8_lossy(input);
        let parsed = serde_json::from_str::<ClientFrame>(&text).ok();
        assert_eq!(
            parsed,
            serde_json::from_str::<ClientFrame>(&text).ok(),
            "deterministic"
        );
        assert_eq!(
            parsed,
            model(&text),
            "ClientFrame parse vs the documented grammar"
        );
        if let Some(ClientFrame::Hello { resume }) = &parsed {
            crate::deep();
            let written = match resume {
                Some(r) => json!({"t": "hello", "resume": r}),
                None => json!({"t": "hello"}),
            }
            .to_string();
            let again: ClientFrame = serde_json::from_str(&written)
                .unwrap_or_else(|e| panic!("re-serialized frame {written} refused: {e}"));
            assert_eq!(&again, parsed.as_ref().unwrap(), "re-parse of {written}");
            let (position, undecodable) = classify(resume.as_deref());
            if resume.as_deref().is_some_and(|r| r.trim().is_empty()) {
                assert_eq!((position.is_none(), undecodable), (true, false));
            }
            if let Some(p) = position {
                assert_eq!(LogPosition::decode(&p.encode()), Ok(p));
            }
        }
        check_server_frames(&text);
    });
}

/// Pins finding 1 (see [`TOLERATE_ARRAY_FRAMES`]): fails once `ClientFrame`
/// refuses the array form, as docs/websocket.md says it should.
#[test]
fn array_frames_are_accepted() {
    let parse = |s: &str| serde_json::from_str::<ClientFrame>(s).ok();
    assert_eq!(
        parse(r#"["hello"]"#),
        Some(ClientFrame::Hello { resume: None }),
        "fixed: set TOLERATE_ARRAY_FRAMES to false and delete this test"
    );
    assert_eq!(
        parse(r#"["hello","MS5rM3g5LjE3NjQ1MDAwMDAwMDAtNw"]"#),
        Some(ClientFrame::Hello {
            resume: Some("MS5rM3g5LjE3NjQ1MDAwMDAwMDAtNw".into())
        })
    );
}
