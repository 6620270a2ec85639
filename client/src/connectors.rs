//! Connector calls (protocol §9): asking a connector agent of the Bay, and
//! a connector answering a `connector.request` event it received.

use crate::rest::{json_of, path_segment, Client};
use crate::ClientError;
use serde_json::{json, Value};
use std::time::Duration;

/// How long a relayed call may be held: the server's own bound
/// (`timing.connector_answer_timeout`, at most 120 s) plus a margin.
const HELD_CALL: Duration = Duration::from_secs(130);

impl Client {
    /// `POST /agents/{connector}/ask` `{query, limit?}`: held until the
    /// connector answers; returns `{requestId, connectorId, platform,
    /// result}`.
    ///
    /// # Errors
    /// [`ClientError::Api`] with 404 `NOT_FOUND` (no such agent in the
    /// Bay), 409 `NOT_A_CONNECTOR`, 502 `CONNECTOR_FAILED` (the connector
    /// answered with an error) or 504 `CONNECTOR_TIMEOUT`;
    /// [`ClientError::Http`] when no answer came.
    pub async fn ask(
        &self,
        connector: &str,
        query: &str,
        limit: Option<u32>,
    ) -> Result<Value, ClientError> {
        let mut body = json!({ "query": query });
        if let Some(l) = limit {
            body["limit"] = json!(l);
        }
        let path = format!("/agents/{}/ask", path_segment(connector));
        json_of(
            self.post(&path)
                .timeout(HELD_CALL)
                .json(&body)
                .send()
                .await?,
        )
        .await
    }

    /// `POST /agents/requests/{request}/answer` `{result}`: answers a
    /// `connector.request` this (connector) token received.
    ///
    /// # Errors
    /// [`ClientError::Api`] with 404 `NOT_FOUND` when the request is
    /// unknown, answered, expired or addressed to another agent.
    pub async fn answer_request(&self, request: &str, result: Value) -> Result<(), ClientError> {
        let path = format!("/agents/requests/{}/answer", path_segment(request));
        let res = self
            .post(&path)
            .timeout(Duration::from_secs(30))
            .json(&json!({ "result": result }))
            .send()
            .await?;
        json_of(res).await.map(drop)
    }
}
