//! The cap on long-polls held at once per client IP
//! (`limits.max_held_polls_per_ip`): `GET /updates`, `GET …/messages/wait`
//! and the MCP tool `wait_for_messages` count together.
//!
//! A held poll costs a request slot in every proxy on the way, and a
//! client looping on many tokens (or many conversations' waits) could hold
//! thousands; the connection cap alone does not see the conversation
//! waits. Each admitted poll holds a [`HeldPollPermit`] until it answers.

use crate::error::ApiError;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use switchboard_protocol::error::ErrorCode;

/// How long a refused client is told to wait: about one poll's hold ends
/// in this time on a busy address.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// Held polls per client IP on this node.
pub struct HeldPolls {
    /// 0 = unlimited.
    max_per_ip: usize,
    /// Invariant: no entry is 0 (removed with its last permit), so the map
    /// is bounded by the addresses holding polls now.
    per_ip: Mutex<HashMap<IpAddr, usize>>,
}

impl HeldPolls {
    /// A cap of `max_per_ip` polls per address (0 = unlimited).
    pub fn new(max_per_ip: usize) -> Arc<Self> {
        Arc::new(HeldPolls {
            max_per_ip,
            per_ip: Mutex::new(HashMap::new()),
        })
    }

    /// Admits one held poll from `ip` (`None`: no address known, not counted).
    ///
    /// # Errors
    /// 429 `RATE_LIMITED` with Retry-After when `ip` holds its maximum.
    pub fn admit(self: &Arc<Self>, ip: Option<IpAddr>) -> Result<HeldPollPermit, ApiError> {
        if let Some(ip) = ip {
            let mut per_ip = self.per_ip.lock();
            let n = per_ip.entry(ip).or_default();
            if self.max_per_ip > 0 && *n >= self.max_per_ip {
                if *n == 0 {
                    per_ip.remove(&ip);
                }
                return Err(ApiError::new(
                    ErrorCode::RateLimited,
                    "too many long-polls held from this address; wait for one to answer",
                )
                .retry_after(RETRY_AFTER));
            }
            *n += 1;
        }
        Ok(HeldPollPermit {
            polls: self.clone(),
            ip,
        })
    }

    /// Addresses holding at least one poll.
    pub fn tracked(&self) -> usize {
        self.per_ip.lock().len()
    }
}

/// One admitted held poll; frees its slot when dropped.
pub struct HeldPollPermit {
    polls: Arc<HeldPolls>,
    ip: Option<IpAddr>,
}

impl Drop for HeldPollPermit {
    fn drop(&mut self) {
        if let Some(ip) = self.ip {
            let mut per_ip = self.polls.per_ip.lock();
            if let Some(n) = per_ip.get_mut(&ip) {
                *n -= 1;
                if *n == 0 {
                    per_ip.remove(&ip);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_each_address_and_frees_on_drop() {
        let polls = HeldPolls::new(2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let first = polls.admit(Some(a)).unwrap();
        let _second = polls.admit(Some(a)).unwrap();
        let refused = polls.admit(Some(a)).err().unwrap();
        assert_eq!(refused.code, ErrorCode::RateLimited);
        let _other = polls.admit(Some(b)).unwrap();
        drop(first);
        assert!(polls.admit(Some(a)).is_ok());
        assert!(polls.admit(None).is_ok());
    }

    #[test]
    fn zero_is_unlimited_and_entries_go_with_their_last_permit() {
        let polls = HeldPolls::new(0);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let held: Vec<_> = (0..50).map(|_| polls.admit(Some(a)).unwrap()).collect();
        assert_eq!(polls.tracked(), 1);
        drop(held);
        assert_eq!(polls.tracked(), 0);
    }
}
