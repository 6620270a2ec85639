//! Which transports a conversation's members reach the gateway on, for
//! the operator console's live view: the sessions each node's presence
//! record lists (`ws`, `updates`, `sse`, `mcp`, with the node), and the
//! agent's webhook when it has one (`webhook`, with whether its
//! deliveries are failing). docs/console.md, "Bays".

use crate::error::ApiError;
use crate::state::AppState;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use switchboard_actors::session::Transport;
use switchboard_actors::store::now_ms;
use switchboard_protocol::ids::{BayId, ParticipantId};

/// One member's ways in: `{id, transports, sessions, webhook}`, where
/// `transports` is every transport name sorted (`ws`, `updates`, `sse`,
/// `mcp`, `webhook`), `sessions` is `[{node, transports, lingering}]`
/// (one per node whose presence record shows it present; `lingering`
/// after its last session there ended, within `timing.presence_linger`)
/// and `webhook` is `null` or `{url, failing, node}` (`node`: the node
/// delivering its webhooks now, `null` between two workers).
pub(crate) async fn member_sessions(
    state: &AppState,
    bay: &BayId,
    members: &[ParticipantId],
) -> Result<Vec<Value>, ApiError> {
    let now = now_ms();
    let records = state.store.presence_records(bay).await?;
    let mut out = Vec::with_capacity(members.len());
    for member in members {
        // node → (transports, lingering), sorted by node for a stable answer.
        let mut nodes: BTreeMap<&str, (Vec<Transport>, bool)> = BTreeMap::new();
        for e in records
            .iter()
            .filter(|e| e.participant == *member && e.present_at(now))
        {
            let slot = nodes.entry(&*e.node).or_default();
            slot.0.extend(&e.transports);
            slot.1 |= !e.session;
        }
        let mut transports: Vec<&str> = Vec::new();
        let sessions: Vec<Value> = nodes
            .into_iter()
            .map(|(node, (mut via, lingering))| {
                via.sort();
                via.dedup();
                transports.extend(via.iter().map(|t| t.label()));
                json!({ "node": node, "transports": via, "lingering": lingering })
            })
            .collect();
        let webhook = match state.store.webhook(bay, member).await? {
            Some(hook) => {
                transports.push("webhook");
                let status = state.store.webhook_status(bay, member).await?;
                let group = crate::webhooks::dispatcher::lease_group(bay);
                let node = state
                    .store
                    .group_lease_holder(&group, member.as_str())
                    .await?;
                json!({ "url": hook.url, "failing": status.failing_since.is_some(), "node": node })
            }
            None => Value::Null,
        };
        transports.sort_unstable();
        transports.dedup();
        out.push(json!({
            "id": member, "transports": transports,
            "sessions": sessions, "webhook": webhook,
        }));
    }
    Ok(out)
}
