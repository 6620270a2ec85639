//! Exact JSON of every server frame, the event and the error body: the
//! wire contract (protocol §11) pinned byte for byte.

use switchboard_protocol::error::{ErrorBody, ErrorCode};
use switchboard_protocol::event::{ConversationRef, Event, MessageView, ReplyToView, SenderView};
use switchboard_protocol::frame::{ClientFrame, ServerFrame};
use switchboard_protocol::ids::{ConversationId, MessageId, ParticipantId};
use switchboard_protocol::model::{ConversationType, ParticipantKind, Role, SenderType};

fn event() -> Event {
    Event::Message {
        conversation_id: ConversationId("c_123".into()),
        message: MessageView {
            id: MessageId("m1".into()),
            sender_id: ParticipantId("ana".into()),
            sender_type: SenderType::User,
            content: "hi @Rex".into(),
            created_at: "2026-11-30T12:00:00.000Z".into(),
            metadata: None,
            sender: SenderView {
                id: ParticipantId("ana".into()),
                name: "Ana".into(),
                kind: ParticipantKind::User,
                role: Some(Role::Admin),
            },
            mentions: vec![ParticipantId("rex".into())],
            reply_to: Some(ReplyToView {
                id: MessageId("m0".into()),
                sender_id: ParticipantId("rex".into()),
                sender_type: SenderType::Agent,
                preview: "earlier".into(),
            }),
            should_respond: true,
        },
        conversation: ConversationRef {
            id: ConversationId("c_123".into()),
            kind: ConversationType::Group,
            title: Some("Standup".into()),
        },
    }
}

const EVENT_JSON: &str = r#"{"type":"message","conversationId":"c_123","message":{"id":"m1","senderId":"ana","senderType":"USER","content":"hi @Rex","createdAt":"2026-11-30T12:00:00.000Z","metadata":null,"sender":{"id":"ana","name":"Ana","kind":"user","role":"admin"},"mentions":["rex"],"replyTo":{"id":"m0","senderId":"rex","senderType":"AGENT","preview":"earlier"},"shouldRespond":true},"conversation":{"id":"c_123","type":"GROUP","title":"Standup"}}"#;

#[test]
fn event_json_is_exact() {
    assert_eq!(serde_json::to_string(&event()).unwrap(), EVENT_JSON);
}

#[test]
fn presence_updated_json_is_exact() {
    use switchboard_protocol::presence::PresenceState;
    let e = Event::PresenceUpdated {
        participant_id: ParticipantId("rex".into()),
        state: PresenceState::Thinking,
        at: "2026-12-01T04:00:00.123Z".into(),
    };
    assert_eq!(
        serde_json::to_string(&e).unwrap(),
        r#"{"type":"presence.updated","participantId":"rex","state":"thinking","at":"2026-12-01T04:00:00.123Z"}"#
    );
    assert_eq!(e.conversation_id(), None);
}

#[test]
fn server_frames_are_exact() {
    let e = event();
    let cases = [
        (
            ServerFrame::Ready {
                cursor: Some("abc"),
            },
            r#"{"t":"ready","cursor":"abc"}"#.to_owned(),
        ),
        (
            ServerFrame::Ready { cursor: None },
            r#"{"t":"ready","cursor":null}"#.to_owned(),
        ),
        (
            ServerFrame::Cursor { cursor: "abc" },
            r#"{"t":"cursor","cursor":"abc"}"#.to_owned(),
        ),
        (ServerFrame::Reset, r#"{"t":"reset"}"#.to_owned()),
        (
            ServerFrame::Error {
                code: switchboard_protocol::error::WsClose::Displaced,
                message: "x",
            },
            r#"{"t":"error","code":"DISPLACED","message":"x"}"#.to_owned(),
        ),
        (
            ServerFrame::Event { event: &e },
            format!(r#"{{"t":"event","event":{EVENT_JSON}}}"#),
        ),
    ];
    for (frame, json) in cases {
        assert_eq!(frame.to_json(), json);
    }
}

#[test]
fn client_hello_parses_and_unknown_fields_or_frames_do_not() {
    let hello = |s: &str| serde_json::from_str::<ClientFrame>(s);
    assert_eq!(
        hello(r#"{"t":"hello","resume":"u1f"}"#).unwrap(),
        ClientFrame::Hello {
            resume: Some("u1f".into())
        }
    );
    assert_eq!(
        hello(r#"{"t":"hello","resume":null}"#).unwrap(),
        ClientFrame::Hello { resume: None }
    );
    assert_eq!(
        hello(r#"{"t":"hello"}"#).unwrap(),
        ClientFrame::Hello { resume: None }
    );
    assert!(hello(r#"{"t":"hello","resume":null,"extra":1}"#).is_err());
    assert!(hello(r#"{"t":"bye"}"#).is_err());
    assert!(hello(r#"{"resume":null}"#).is_err());
    assert!(hello(r#"{"t":"hello","resume":5}"#).is_err());
}

#[test]
fn error_body_json_is_exact() {
    let body = ErrorBody::new(ErrorCode::CursorExpired, "cursor expired");
    assert_eq!(
        serde_json::to_string(&body).unwrap(),
        r#"{"error":"cursor_expired","code":"CURSOR_EXPIRED","message":"cursor expired"}"#
    );
}
