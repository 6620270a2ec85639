//! An independent `GET /events` client: reqwest's byte stream parsed by the
//! third-party `eventsource-stream` crate (WHATWG rules), so the tests do not
//! check our SSE framing with our own parser.

use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use serde_json::Value;
use std::time::Duration;

/// One open event stream.
pub struct Sse {
    events: BoxStream<'static, Result<Event, EventStreamError<reqwest::Error>>>,
    /// Response headers of the stream.
    pub headers: reqwest::header::HeaderMap,
}

/// What [`Sse::next_within`] saw.
#[derive(Debug)]
pub enum SseNext {
    /// One dispatched event (comments are not events).
    Event(Event),
    /// The server ended the stream.
    Ended,
    /// Nothing within the patience.
    Timeout,
}

/// How to open a stream.
#[derive(Default, Clone)]
pub struct SseOpen<'a> {
    /// `Last-Event-ID` header.
    pub last_event_id: Option<&'a str>,
    /// `?cursor=`.
    pub cursor: Option<&'a str>,
}

/// An HTTP client without a whole-request timeout (streams stay open).
pub fn stream_http() -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// Opens `GET /api/agent-api/events` at `base` (`http://host:port`).
/// `Err((status, body))` when the server did not answer 200.
pub async fn sse_at(base: &str, token: &str, open: SseOpen<'_>) -> Result<Sse, (u16, Value)> {
    let mut url = format!("{base}/api/agent-api/events");
    if let Some(c) = open.cursor {
        url.push_str(&format!("?cursor={c}"));
    }
    let mut req = stream_http()
        .get(url)
        .bearer_auth(token)
        .header("Accept", "text/event-stream");
    if let Some(id) = open.last_event_id {
        req = req.header("Last-Event-ID", id);
    }
    let res = req
        .send()
        .await
        .map_err(|e| (0, Value::String(e.to_string())))?;
    let status = res.status().as_u16();
    if status != 200 {
        return Err((status, res.json().await.unwrap_or(Value::Null)));
    }
    let headers = res.headers().clone();
    Ok(Sse {
        events: res.bytes_stream().eventsource().boxed(),
        headers,
    })
}

impl Sse {
    /// The next event within `patience`.
    pub async fn next_within(&mut self, patience: Duration) -> SseNext {
        match tokio::time::timeout(patience, self.events.next()).await {
            Err(_) => SseNext::Timeout,
            Ok(None) | Ok(Some(Err(_))) => SseNext::Ended,
            Ok(Some(Ok(e))) => SseNext::Event(e),
        }
    }

    /// The next event (30 s patience, for loaded machines); panics when none comes.
    pub async fn next_event(&mut self) -> Event {
        match self.next_within(Duration::from_secs(30)).await {
            SseNext::Event(e) => e,
            other => panic!("expected an event, got {other:?}"),
        }
    }

    /// Reads until an event named `kind` (`"message"` for unnamed ones);
    /// returns it and the events before it.
    pub async fn until(&mut self, kind: &str) -> (Event, Vec<Event>) {
        let mut before = Vec::new();
        loop {
            let e = self.next_event().await;
            if e.event == kind {
                return (e, before);
            }
            before.push(e);
        }
    }

    /// Reads `n` unnamed (data) events, skipping `cursor` events.
    pub async fn data_events(&mut self, n: usize) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        while out.len() < n {
            let e = self.next_event().await;
            if e.event == "message" {
                let v: Value = serde_json::from_str(&e.data).expect("data is JSON");
                out.push((e.id, v));
            } else {
                assert_eq!(e.event, "cursor", "unexpected {e:?}");
            }
        }
        out
    }
}
