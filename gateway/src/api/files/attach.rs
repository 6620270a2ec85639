//! A send's attachments (protocol §10, step 2): the two request shapes,
//! the all-or-nothing claim before the message is stored, the link after,
//! and the metadata the message keeps.
//!
//! Order of a send with files: claim every id (409 ATTACHMENT_CONFLICT,
//! nothing stored, when any cannot be had), append the message, then link
//! the claimed files to it; a send that fails in between releases them. A
//! claim lapses by itself after [`CLAIM_TTL_MS`], so a node that dies
//! mid-send leaves nothing held. The claim's token is the send's
//! idempotency key (hashed) when it has one, so a retry on any node finds
//! the files it already holds or sent and answers the first message.

use crate::error::ApiError;
use crate::files::sniff::kind_of;
use crate::state::AppState;
use serde_json::{json, Value};
use switchboard_actors::attachment_links::STORED_BAY;
use switchboard_actors::store::{now_ms, Claim, StoredFile};
use switchboard_protocol::error::ErrorCode;
use switchboard_protocol::ids::{BayId, ConversationId, MessageId, ParticipantId};

/// Most files on one message (protocol §10: "up to 10 files").
pub const MAX_ATTACHMENTS: usize = 10;

/// How long a send holds its files before they are free again, ms.
pub const CLAIM_TTL_MS: u64 = 60_000;

fn invalid(why: &str) -> ApiError {
    ApiError::new(ErrorCode::InvalidRequest, why.to_owned())
}

/// Whether `id` could be an attachment id at all (`[A-Za-z0-9_-]{1,64}`).
fn well_formed(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The attachment ids of a send, in render order, from `attachments:
/// [{attachmentId}]` (1 to 10) or the legacy `attachmentId`; empty when
/// neither is given. A `null` counts as absent.
///
/// # Errors
///
/// 400 INVALID_REQUEST for both shapes at once, an empty or longer list,
/// an item without a string `attachmentId`, or an id that is not
/// `[A-Za-z0-9_-]{1,64}` (the id is not looked up, so nothing is confirmed).
pub fn requested(
    attachments: Option<&Value>,
    attachment_id: Option<&Value>,
) -> Result<Vec<String>, ApiError> {
    let list = attachments.filter(|v| !v.is_null());
    let single = attachment_id.filter(|v| !v.is_null());
    let ids: Vec<String> = match (list, single) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                "send either attachments or the legacy attachmentId, not both",
            ))
        }
        (None, None) => return Ok(Vec::new()),
        (None, Some(id)) => vec![id
            .as_str()
            .ok_or_else(|| invalid("attachmentId must be a string"))?
            .to_owned()],
        (Some(list), None) => {
            let items = list
                .as_array()
                .ok_or_else(|| invalid("attachments must be an array of {attachmentId}"))?;
            if items.is_empty() || items.len() > MAX_ATTACHMENTS {
                return Err(invalid("attachments holds 1 to 10 items"));
            }
            items
                .iter()
                .map(|item| {
                    item.get("attachmentId")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                        .ok_or_else(|| invalid("each attachment is {\"attachmentId\": \"…\"}"))
                })
                .collect::<Result<_, _>>()?
        }
    };
    if !ids.iter().all(|id| well_formed(id)) {
        return Err(invalid("an attachmentId is not a well-formed id"));
    }
    Ok(ids)
}

/// The claim token of a send: from its idempotency key's digest when it
/// has one (a retry presents the same), else fresh.
pub fn claim_token(idempotency_digest: Option<&str>) -> String {
    match idempotency_digest {
        Some(d) => format!("k{}", &d[..d.len().min(40)]),
        None => format!("r{}", ulid::Ulid::new().to_string().to_ascii_lowercase()),
    }
}

/// Claims `ids` for `sender`'s send, all or none.
///
/// # Errors
///
/// 409 ATTACHMENT_CONFLICT when any id is unknown, another Bay's or
/// uploader's, already sent or held by another send; which one is never
/// said (protocol §10).
pub async fn claim(
    state: &AppState,
    bay: &BayId,
    sender: &ParticipantId,
    ids: &[String],
    token: &str,
) -> Result<Vec<StoredFile>, ApiError> {
    let until = now_ms() + CLAIM_TTL_MS;
    match state.store.claim_files(bay, sender, ids, token, until).await? {
        Claim::Claimed(files) => Ok(files),
        Claim::Conflict => Err(ApiError::new(
            ErrorCode::AttachmentConflict,
            "an attachment cannot be attached: each must be your own upload in this bay, not yet sent; nothing was sent (upload again and retry)",
        )),
    }
}

/// `metadata` with the files written in by the server: `attachments[]`
/// `{attachmentId, type, mimeType, sizeBytes}` in order (plus the Bay for
/// the URL signer, never shown), and `type` = the first file's type (the
/// legacy single-file shape; a sender's own `type` is replaced, since the
/// server derives it, protocol §10).
pub fn metadata_with(metadata: Option<Value>, files: &[StoredFile]) -> Value {
    let mut map = match metadata {
        Some(Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    };
    let items: Vec<Value> = files
        .iter()
        .map(|f| {
            json!({
                "attachmentId": f.id,
                "type": kind_of(&f.mime),
                "mimeType": f.mime,
                "sizeBytes": f.size,
                STORED_BAY: f.bay.as_str(),
            })
        })
        .collect();
    if let Some(first) = files.first() {
        map.insert("type".into(), kind_of(&first.mime).into());
    }
    map.insert("attachments".into(), Value::Array(items));
    Value::Object(map)
}

/// Links the claimed `ids` to the stored `message`. A failure is logged:
/// the message exists, and its files show as unavailable.
pub async fn link(
    state: &AppState,
    bay: &BayId,
    ids: &[String],
    token: &str,
    conversation: &ConversationId,
    message: &MessageId,
) {
    if let Err(e) = state
        .store
        .link_files(bay, ids, token, conversation, message)
        .await
    {
        tracing::error!("message {message} was stored but its files could not be linked: {e}");
    }
}

/// Frees the claimed `ids` after a send that stored nothing.
pub async fn release(state: &AppState, bay: &BayId, ids: &[String], token: &str) {
    if let Err(e) = state.store.release_files(bay, ids, token).await {
        // The claim lapses by itself after CLAIM_TTL_MS.
        tracing::warn!("could not release the files of a failed send: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        let list = json!([{"attachmentId": "att_1"}, {"attachmentId": "att_2"}]);
        assert_eq!(requested(Some(&list), None).unwrap(), ["att_1", "att_2"]);
        assert_eq!(requested(None, Some(&json!("att_9"))).unwrap(), ["att_9"]);
        assert!(requested(None, None).unwrap().is_empty());
        assert!(requested(Some(&Value::Null), Some(&Value::Null))
            .unwrap()
            .is_empty());
        for (a, b) in [
            (Some(list.clone()), Some(json!("att_1"))),
            (Some(json!([])), None),
            (
                Some(json!((0..11)
                    .map(|i| json!({"attachmentId": format!("att_{i}")}))
                    .collect::<Vec<_>>())),
                None,
            ),
            (Some(json!([{"id": "att_1"}])), None),
            (Some(json!([{"attachmentId": "a b"}])), None),
            (None, Some(json!(5))),
        ] {
            assert!(requested(a.as_ref(), b.as_ref()).is_err(), "{a:?} {b:?}");
        }
    }
}
