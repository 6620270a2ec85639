//! Event kinds this crate does not know pass through the whole listener
//! (WebSocket transport, dedupe, stream) untouched. The server here is a
//! scripted WebSocket peer: the gateway does not emit these kinds yet.

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use switchboard_client::{
    Client, CursorStore, Listener, ListenerConfig, MemoryCursorStore, TransportChoice, Update,
};
use tokio_tungstenite::tungstenite::Message;

async fn next(listener: &mut Listener) -> Update {
    tokio::time::timeout(Duration::from_secs(10), listener.next())
        .await
        .expect("an update")
        .expect("the stream goes on")
        .expect("no error")
}

#[tokio::test]
async fn unknown_event_kinds_arrive_raw_once_and_the_cursor_is_saved() {
    let server = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = server.local_addr().unwrap();
    let delta = json!({"type": "message.delta", "conversationId": "c1", "messageId": "m1",
        "delta": "hel", "seq": 1, "conversation": {"id": "c1", "type": "GROUP", "title": null}});
    let presence = json!({"type": "presence.updated", "participantId": "ana", "status": "online"});
    let script = vec![
        json!({"t": "ready", "cursor": null}),
        json!({"t": "event", "event": delta}),
        json!({"t": "event", "event": presence}),
        // A repeat (at-least-once) is dropped.
        json!({"t": "event", "event": delta}),
        // Frame types added later are ignored.
        json!({"t": "typing", "conversationId": "c1"}),
        json!({"t": "cursor", "cursor": "c-after"}),
    ];
    let peer = tokio::spawn(async move {
        let (tcp, _) = server.accept().await.unwrap();
        let mut ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
        let hello: Value = match ws.next().await.unwrap().unwrap() {
            Message::Text(t) => serde_json::from_str(t.as_str()).unwrap(),
            other => panic!("{other:?}"),
        };
        for frame in script {
            ws.send(Message::text(frame.to_string())).await.unwrap();
        }
        // Hold the socket until the test ends.
        let _ = ws.next().await;
        hello
    });
    let store = Arc::new(MemoryCursorStore::new());
    let client = Client::new(&format!("http://{addr}"), "bay_test_token").unwrap();
    let config = ListenerConfig {
        transport: TransportChoice::Ws,
        ..ListenerConfig::default()
    };
    let mut listener = Listener::start(client, store.clone(), config).unwrap();
    assert!(matches!(
        next(&mut listener).await,
        Update::TransportChanged(_)
    ));
    match next(&mut listener).await {
        Update::Other { kind, raw } => {
            assert_eq!(kind, "message.delta");
            assert_eq!(raw, delta);
        }
        other => panic!("{other:?}"),
    }
    match next(&mut listener).await {
        Update::Other { kind, raw } => {
            assert_eq!(kind, "presence.updated");
            assert_eq!(raw, presence);
        }
        other => panic!("{other:?}"),
    }
    // The repeat was dropped: the next thing is the saved cursor, which
    // the listener stores once the caller asks past it.
    let more = tokio::time::timeout(Duration::from_millis(500), listener.next()).await;
    assert!(more.is_err(), "nothing else was handed over: {more:?}");
    assert_eq!(store.load().unwrap().unwrap().cursor, "c-after");
    drop(listener);
    let hello = peer.await.unwrap();
    assert_eq!(hello, json!({"t": "hello", "resume": null}));
}
