//! How a [`crate::Listener`] connects, retries and falls back.

use std::time::Duration;

/// Which transport a listener uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum TransportChoice {
    /// `/ws`, falling back to `/updates` when the WebSocket cannot be had
    /// (a proxy refuses the upgrade, or it keeps dropping), and probing
    /// `/ws` again every [`ListenerConfig::probe_interval`].
    #[default]
    Auto,
    /// `/ws` only (retrying with backoff).
    Ws,
    /// `/updates` only.
    Updates,
    /// `/events` (Server-Sent Events) only.
    Sse,
}

/// Settings of a listener. [`Default`] gives the values documented on
/// each field.
#[derive(Clone, Debug)]
pub struct ListenerConfig {
    /// The transport (default [`TransportChoice::Auto`]).
    pub transport: TransportChoice,
    /// Cap of the first reconnect delay (default 250 ms); delays use full
    /// jitter and double per failed attempt.
    pub backoff_initial: Duration,
    /// Largest reconnect delay (default 30 s); a longer `Retry-After` wins.
    pub backoff_max: Duration,
    /// Event keys remembered for dedupe (default 10,000).
    pub dedupe_capacity: usize,
    /// Abnormal WebSocket ends (no close frame, errors, upgrade answered
    /// 5xx) inside [`ListenerConfig::abnormal_window`] that make `Auto`
    /// fall back to `/updates` (default 3).
    pub abnormal_closes: usize,
    /// See [`ListenerConfig::abnormal_closes`] (default 60 s).
    pub abnormal_window: Duration,
    /// How long `Auto` stays on `/updates` before probing `/ws` again
    /// (default 5 min).
    pub probe_interval: Duration,
    /// `wait` of each `/updates` call, seconds, 1–30 (default 25).
    pub updates_wait: u64,
    /// Silence after which a WebSocket or SSE stream counts as dead
    /// (default 60 s: the server pings every 20 s, and SSE heartbeats
    /// every 20 s).
    pub read_timeout: Duration,
    /// How far before the last cursor's arrival a REST catch-up starts,
    /// to allow for clock skew and delivery latency (default 60 s).
    pub catch_up_margin: Duration,
    /// Items buffered between the connection and the caller (default
    /// 256). A caller that stops reading stops the reading of the socket,
    /// which is the server's backpressure signal.
    pub buffer: usize,
}

impl Default for ListenerConfig {
    fn default() -> Self {
        ListenerConfig {
            transport: TransportChoice::Auto,
            backoff_initial: Duration::from_millis(250),
            backoff_max: Duration::from_secs(30),
            dedupe_capacity: 10_000,
            abnormal_closes: 3,
            abnormal_window: Duration::from_secs(60),
            probe_interval: Duration::from_secs(300),
            updates_wait: 25,
            read_timeout: Duration::from_secs(60),
            catch_up_margin: Duration::from_secs(60),
            buffer: 256,
        }
    }
}
