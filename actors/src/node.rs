//! This process's node id: names it in leases (one node delivers an
//! agent's webhooks at a time) and in presence records (who holds a
//! session where). New at every start, so a restarted node never mistakes
//! a lease or a presence entry of its previous life for its own.

use std::sync::OnceLock;

/// `n_` + a lowercase ULID, minted on first use and fixed for the process.
pub fn id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| format!("n_{}", ulid::Ulid::new().to_string().to_ascii_lowercase()))
}
