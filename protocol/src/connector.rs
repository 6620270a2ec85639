//! Connector agents (protocol §9): bridges to an external platform whose
//! ingested data other agents of the Bay can query (`ask`) and through
//! which they can send outbound (`send`). The gateway relays each call to
//! the connector as a `connector.request` event and holds the caller until
//! the connector answers (docs/connectors.md).

use serde::{Deserialize, Serialize};

/// The platforms a connector may bridge (protocol §9).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    /// Telegram.
    Telegram,
    /// Gmail.
    Gmail,
    /// Slack.
    Slack,
    /// WhatsApp.
    Whatsapp,
    /// Discord.
    Discord,
}

impl Platform {
    /// The wire name (`telegram`, `gmail`, `slack`, `whatsapp`, `discord`).
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Telegram => "telegram",
            Platform::Gmail => "gmail",
            Platform::Slack => "slack",
            Platform::Whatsapp => "whatsapp",
            Platform::Discord => "discord",
        }
    }

    /// The platform a wire name names, `None` for any other string.
    pub fn parse(name: &str) -> Option<Self> {
        [
            Platform::Telegram,
            Platform::Gmail,
            Platform::Slack,
            Platform::Whatsapp,
            Platform::Discord,
        ]
        .into_iter()
        .find(|p| p.as_str() == name)
    }
}

/// What a relayed call asks of the connector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RequestKind {
    /// `POST /agents/{id}/ask`: search the connector's ingested data.
    Ask,
    /// `POST /agents/{id}/send`: send outbound on the connector's platform.
    Send,
}

impl RequestKind {
    /// `ask` or `send`.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestKind::Ask => "ask",
            RequestKind::Send => "send",
        }
    }
}

/// Longest `query` of an `ask`, in characters.
pub const MAX_QUERY_CHARS: usize = 4_000;

/// Largest `limit` of an `ask`; also its default when absent is
/// [`DEFAULT_ASK_LIMIT`].
pub const MAX_ASK_LIMIT: u32 = 100;

/// `limit` of an `ask` that gives none.
pub const DEFAULT_ASK_LIMIT: u32 = 10;

/// Largest payload of a `send`, and largest `result` or error message a
/// connector may answer with, in bytes of compact JSON: both travel
/// through the Bay's event log.
pub const MAX_RELAYED_BYTES: usize = 64 * 1024;

/// Why an `ask` body is refused: the message names the field.
///
/// # Errors
///
/// `query` missing, empty after trimming or longer than
/// [`MAX_QUERY_CHARS`]; `limit` outside 1–[`MAX_ASK_LIMIT`].
pub fn check_ask(query: &str, limit: Option<u32>) -> Result<(), String> {
    if query.trim().is_empty() {
        return Err("query must be a non-empty string".into());
    }
    if query.chars().count() > MAX_QUERY_CHARS {
        return Err(format!("query is longer than {MAX_QUERY_CHARS} characters"));
    }
    if let Some(l) = limit {
        if !(1..=MAX_ASK_LIMIT).contains(&l) {
            return Err(format!(
                "limit must be an integer from 1 to {MAX_ASK_LIMIT}"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platforms_round_trip_by_name() {
        for name in ["telegram", "gmail", "slack", "whatsapp", "discord"] {
            let p = Platform::parse(name).expect(name);
            assert_eq!(p.as_str(), name);
            assert_eq!(serde_json::to_value(p).unwrap(), name);
        }
        assert_eq!(Platform::parse("Slack"), None);
        assert_eq!(Platform::parse("irc"), None);
    }

    #[test]
    fn ask_bounds() {
        assert!(check_ask("invoices from march", None).is_ok());
        assert!(check_ask("x", Some(1)).is_ok());
        assert!(check_ask("x", Some(MAX_ASK_LIMIT)).is_ok());
        assert!(check_ask("  ", None).unwrap_err().contains("query"));
        assert!(check_ask("x", Some(0)).unwrap_err().contains("limit"));
        assert!(check_ask("x", Some(MAX_ASK_LIMIT + 1))
            .unwrap_err()
            .contains("limit"));
        let long = "é".repeat(MAX_QUERY_CHARS + 1);
        assert!(check_ask(&long, None).unwrap_err().contains("longer"));
    }
}
