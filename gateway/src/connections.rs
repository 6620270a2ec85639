//! Admission of realtime connections (WebSockets, SSE streams and held `/updates`):
//! a cap per client IP and a cap per node. Each admitted connection holds a
//! [`ConnectionPermit`]; dropping it frees the slot and lowers the
//! `switchboard_connections{transport}` gauge.

use crate::error::ApiError;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use switchboard_protocol::error::ErrorCode;
use switchboard_protocol::ids::TokenId;

/// Which transport a connection uses (the metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// `GET /ws`: label `ws`.
    Ws,
    /// A held `GET /updates`: label `updates`.
    Updates,
    /// `GET /events` (Server-Sent Events): label `sse`.
    Sse,
}

impl Transport {
    /// The `transport` label value.
    pub fn label(self) -> &'static str {
        match self {
            Transport::Ws => "ws",
            Transport::Updates => "updates",
            Transport::Sse => "sse",
        }
    }
}

/// Counts live connections per IP and in total.
pub struct ConnectionLimiter {
    /// 0 = unlimited.
    max_per_ip: usize,
    max_total: usize,
    /// Invariant: `total` equals the sum of `per_ip` values.
    state: Mutex<Counts>,
}

#[derive(Default)]
struct Counts {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
    /// Live permits per token: a token that holds exactly one may connect
    /// again past the caps, since the new connection displaces the old one.
    per_token: HashMap<TokenId, usize>,
}

impl ConnectionLimiter {
    /// A limiter with the configured caps (`max_per_ip` 0 = unlimited).
    pub fn new(max_per_ip: usize, max_total: usize) -> Arc<Self> {
        Arc::new(ConnectionLimiter {
            max_per_ip,
            max_total,
            state: Mutex::new(Counts::default()),
        })
    }

    /// Admits one connection from `ip`.
    ///
    /// # Errors
    /// 503 `UNAVAILABLE` when the node is full; 429 `RATE_LIMITED` when the
    /// IP holds its maximum; both with `Retry-After`.
    pub fn admit(
        self: &Arc<Self>,
        ip: Option<IpAddr>,
        token: &TokenId,
        transport: Transport,
    ) -> Result<ConnectionPermit, ApiError> {
        let mut st = self.state.lock();
        // A reconnect of a token that holds one connection here replaces
        // it (one connection per token), so it may pass the caps: a client
        // with a stale socket is not locked out. Only one: until the new
        // connection opens (on `hello`) nothing is replaced, and a token
        // must not hold more than one slot past the caps meanwhile.
        let replaces = st.per_token.get(token) == Some(&1);
        if st.total >= self.max_total && !replaces {
            return Err(ApiError::new(
                ErrorCode::Unavailable,
                "this node holds its maximum number of connections",
            )
            .retry_after(Duration::from_secs(5)));
        }
        if let Some(ip) = ip {
            let n = st.per_ip.entry(ip).or_default();
            if self.max_per_ip > 0 && *n >= self.max_per_ip && !replaces {
                return Err(ApiError::new(
                    ErrorCode::RateLimited,
                    "too many connections from this address",
                )
                .retry_after(Duration::from_secs(5)));
            }
            *n += 1;
        }
        st.total += 1;
        *st.per_token.entry(token.clone()).or_default() += 1;
        metrics::gauge!(crate::metrics::CONNECTIONS, "transport" => transport.label())
            .increment(1.0);
        Ok(ConnectionPermit {
            limiter: self.clone(),
            ip,
            token: token.clone(),
            transport,
        })
    }

    /// Connections currently admitted.
    pub fn total(&self) -> usize {
        self.state.lock().total
    }

    /// Entries of the admission counters, `(client IPs, tokens)`: each is
    /// removed with its last connection, so both return to zero when every
    /// connection closed.
    pub fn tracked(&self) -> (usize, usize) {
        let st = self.state.lock();
        (st.per_ip.len(), st.per_token.len())
    }
}

/// One admitted connection; frees its slot when dropped.
pub struct ConnectionPermit {
    limiter: Arc<ConnectionLimiter>,
    ip: Option<IpAddr>,
    token: TokenId,
    transport: Transport,
}

impl Drop for ConnectionPermit {
    fn drop(&mut self) {
        let mut st = self.limiter.state.lock();
        st.total = st.total.saturating_sub(1);
        if let Some(n) = st.per_token.get_mut(&self.token) {
            *n -= 1;
            if *n == 0 {
                st.per_token.remove(&self.token);
            }
        }
        if let Some(ip) = self.ip {
            if let Some(n) = st.per_ip.get_mut(&ip) {
                *n -= 1;
                if *n == 0 {
                    st.per_ip.remove(&ip);
                }
            }
        }
        metrics::gauge!(crate::metrics::CONNECTIONS, "transport" => self.transport.label())
            .decrement(1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_per_ip_and_per_node_and_frees_on_drop() {
        let l = ConnectionLimiter::new(2, 3);
        let t = |n: &str| TokenId(n.into());
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let p1 = l.admit(Some(a), &t("t1"), Transport::Ws).unwrap();
        let _p2 = l.admit(Some(a), &t("t2"), Transport::Ws).unwrap();
        let code = |r: Result<ConnectionPermit, ApiError>| r.err().map(|e| e.code);
        assert_eq!(
            code(l.admit(Some(a), &t("t5"), Transport::Ws)),
            Some(ErrorCode::RateLimited)
        );
        let _p3 = l.admit(Some(b), &t("t3"), Transport::Updates).unwrap();
        assert_eq!(
            code(l.admit(Some(b), &t("t4"), Transport::Ws)),
            Some(ErrorCode::Unavailable)
        );
        drop(p1);
        assert_eq!(l.total(), 2);
        assert!(l.admit(Some(a), &t("t1"), Transport::Ws).is_ok());
    }

    #[test]
    fn a_token_holding_one_connection_may_reconnect_past_the_caps_once() {
        let l = ConnectionLimiter::new(1, 1);
        let tok = TokenId("t".into());
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let _old = l.admit(Some(ip), &tok, Transport::Ws).unwrap();
        assert!(l
            .admit(Some(ip), &TokenId("other".into()), Transport::Ws)
            .is_err());
        let new = l.admit(Some(ip), &tok, Transport::Ws);
        assert!(new.is_ok(), "the reconnect displaces the old one");
        // Nothing is displaced before the new connection says hello: a
        // third connection of the token would hold a second extra slot.
        assert!(l.admit(Some(ip), &tok, Transport::Ws).is_err());
        drop(new);
        assert!(l.admit(Some(ip), &tok, Transport::Ws).is_ok());
    }
}
