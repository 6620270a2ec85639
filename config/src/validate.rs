//! Range checks that serde's types cannot express.

use std::net::SocketAddr;
use std::time::Duration;

use base64::Engine;

use crate::{
    ConfigError, FileBackend, FileSettings, Limits, PairingSettings, RedisSettings, RoomsSettings,
    Settings, Timing, WebhookSettings, FILE_HARD_CAP_BYTES,
};

/// Most threads `workers` or `actor_threads` may ask for: each is an OS
/// thread with its own runtime, and more than this is a typo, not a
/// machine.
pub const MAX_THREADS: usize = 1024;

/// Protocol §11: the `wait` of `GET /updates` is clamped to 1–30 s, so the
/// configurable clamp must stay inside that range.
pub const UPDATES_WAIT_FLOOR: Duration = Duration::from_secs(1);
/// See [`UPDATES_WAIT_FLOOR`].
pub const UPDATES_WAIT_CEILING: Duration = Duration::from_secs(30);

/// Length of `webhooks.secret_key` once base64-decoded: a ChaCha20-Poly1305
/// key, which seals webhook signing secrets at rest.
pub const WEBHOOK_SECRET_KEY_BYTES: usize = 32;

/// URL schemes a Redis URL may use.
const REDIS_SCHEMES: [&str; 4] = ["redis", "rediss", "redis+unix", "unix"];
/// URL schemes a Redis Cluster seed may use (the cluster announces TCP addresses).
const CLUSTER_SCHEMES: [&str; 2] = ["redis", "rediss"];

impl Settings {
    /// Checks every range and cross-field rule, section by section in the
    /// order of the settings file, so the first offending key is reported.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] naming the first offending key (dotted, e.g.
    /// `timing.hello_timeout`), with what is allowed.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_bind(&self.bind)?;
        check_redis(&self.redis)?;
        self.check_node()?;
        non_zero("replay_window", self.replay_window)?;
        at_least_one("replay_max_entries", self.replay_max_entries)?;
        check_limits(&self.limits)?;
        check_timing(&self.timing)?;
        check_webhooks(&self.webhooks)?;
        if let Some(url) = &self.public_url {
            check_public_url(url)?;
        }
        check_pairing(&self.pairing)?;
        check_rooms(&self.rooms)?;
        check_files(&self.files)
    }

    /// The node's own top-level keys: `admin_token`, `workers` and
    /// `actor_threads` (at most [`MAX_THREADS`]).
    fn check_node(&self) -> Result<(), ConfigError> {
        if let Some(token) = &self.admin_token {
            if token.is_empty() {
                return Err(ConfigError::invalid(
                    "admin_token",
                    "must not be empty (leave it unset for no admin token)",
                ));
            }
        }
        if self.workers == Some(0) {
            return Err(ConfigError::invalid(
                "workers",
                "must be at least 1 (leave it unset for one per CPU core)",
            ));
        }
        if self.workers.is_some_and(|n| n > MAX_THREADS) {
            return Err(ConfigError::invalid(
                "workers",
                format!("must be at most {MAX_THREADS} (one per CPU core is the usual choice)"),
            ));
        }
        if self.actor_threads > MAX_THREADS {
            return Err(ConfigError::invalid(
                "actor_threads",
                format!("must be at most {MAX_THREADS} (0 = the HTTP workers' threads)"),
            ));
        }
        Ok(())
    }
}

/// The `[redis]` section: a URL the client accepts (see
/// [`check_redis_url`]) and at least one connection.
fn check_redis(redis: &RedisSettings) -> Result<(), ConfigError> {
    check_redis_url(&redis.url, redis.cluster)?;
    at_least_one("redis.connections", redis.connections)
}

/// The `[limits]` section: every limit at least 1, except
/// `max_connections_per_ip`, where 0 means unlimited.
fn check_limits(limits: &Limits) -> Result<(), ConfigError> {
    at_least_one(
        "limits.updates_per_minute",
        limits.updates_per_minute as usize,
    )?;
    at_least_one(
        "limits.agent_requests_per_minute",
        limits.agent_requests_per_minute as usize,
    )?;
    at_least_one("limits.max_content_chars", limits.max_content_chars)?;
    at_least_one("limits.max_body_bytes", limits.max_body_bytes)?;
    at_least_one("limits.max_ws_frame_bytes", limits.max_ws_frame_bytes)?;
    // limits.max_connections_per_ip: 0 means unlimited, every value is valid.
    at_least_one("limits.max_connections", limits.max_connections)?;
    at_least_one(
        "limits.max_outbound_queue_bytes",
        limits.max_outbound_queue_bytes,
    )?;
    at_least_one("limits.presence_max_members", limits.presence_max_members)?;
    at_least_one(
        "limits.summary_refresh_max",
        limits.summary_refresh_max as usize,
    )?;
    non_zero(
        "limits.summary_refresh_window",
        limits.summary_refresh_window,
    )
}

/// The `[timing]` section: the `/updates` wait clamp (see
/// [`check_updates_wait`]), then every interval and timeout that must not
/// be zero.
fn check_timing(timing: &Timing) -> Result<(), ConfigError> {
    check_updates_wait(timing)?;
    non_zero("timing.hello_timeout", timing.hello_timeout)?;
    non_zero("timing.ping_interval", timing.ping_interval)?;
    at_least_one("timing.missed_pongs", timing.missed_pongs as usize)?;
    non_zero("timing.idle_cursor_interval", timing.idle_cursor_interval)?;
    non_zero("timing.sse_heartbeat", timing.sse_heartbeat)?;
    non_zero("timing.watermark_interval", timing.watermark_interval)?;
    non_zero("timing.typing_ttl", timing.typing_ttl)?;
    let answer = timing.connector_answer_timeout;
    if !(Duration::from_secs(1)..=Duration::from_secs(120)).contains(&answer) {
        return Err(ConfigError::invalid(
            "timing.connector_answer_timeout",
            format!("is {}, must be from 1s to 120s", show(answer)),
        ));
    }
    let wait = timing.message_wait_default;
    if !(Duration::from_secs(1)..=Duration::from_secs(50)).contains(&wait) {
        return Err(ConfigError::invalid(
            "timing.message_wait_default",
            format!("is {}, must be from 1s to 50s", show(wait)),
        ));
    }
    non_zero("timing.draft_flush_interval", timing.draft_flush_interval)?;
    non_zero("timing.draft_orphan_timeout", timing.draft_orphan_timeout)?;
    non_zero("timing.mcp_session_idle", timing.mcp_session_idle)?;
    if timing.request_body_timeout < Duration::from_secs(1) {
        return Err(ConfigError::invalid(
            "timing.request_body_timeout",
            format!(
                "is {}, must be at least 1s",
                show(timing.request_body_timeout)
            ),
        ));
    }
    non_zero("timing.presence_interval", timing.presence_interval)?;
    // timing.presence_linger and presence_poll_linger: zero is valid
    // (offline as the session ends).
    // timing.presence_tick: zero is valid (no presence.updated events).
    non_zero("timing.presence_idle_after", timing.presence_idle_after)?;
    non_zero("timing.canary_timeout", timing.canary_timeout)?;
    // timing.drain_timeout: zero is valid (close connections at once).
    non_zero("timing.actor_idle_timeout", timing.actor_idle_timeout)
}

/// `timing.updates_wait_min` ≤ `updates_wait_default` ≤
/// `updates_wait_max`, all within [`UPDATES_WAIT_FLOOR`] and
/// [`UPDATES_WAIT_CEILING`] (protocol §11: `wait` is clamped to 1–30 s).
fn check_updates_wait(timing: &Timing) -> Result<(), ConfigError> {
    if timing.updates_wait_min < UPDATES_WAIT_FLOOR {
        return Err(ConfigError::invalid(
            "timing.updates_wait_min",
            format!(
                "is {}, must be at least 1s (protocol §11: wait is clamped to 1–30 s)",
                show(timing.updates_wait_min)
            ),
        ));
    }
    if timing.updates_wait_max > UPDATES_WAIT_CEILING {
        return Err(ConfigError::invalid(
            "timing.updates_wait_max",
            format!(
                "is {}, must be at most 30s (protocol §11: wait is clamped to 1–30 s)",
                show(timing.updates_wait_max)
            ),
        ));
    }
    if timing.updates_wait_default < timing.updates_wait_min {
        return Err(ConfigError::invalid(
            "timing.updates_wait_default",
            format!(
                "is {}, must be at least timing.updates_wait_min ({})",
                show(timing.updates_wait_default),
                show(timing.updates_wait_min)
            ),
        ));
    }
    if timing.updates_wait_default > timing.updates_wait_max {
        return Err(ConfigError::invalid(
            "timing.updates_wait_default",
            format!(
                "is {}, must be at most timing.updates_wait_max ({})",
                show(timing.updates_wait_default),
                show(timing.updates_wait_max)
            ),
        ));
    }
    Ok(())
}

/// `public_url`: an absolute `http(s)://` URL with a host, no query,
/// fragment or trailing slash (clients append `/api/agent-api/…` to it).
fn check_public_url(url: &str) -> Result<(), ConfigError> {
    let bad = |why: &str| Err(ConfigError::invalid("public_url", why.to_owned()));
    let Some((scheme, rest)) = url.split_once("://") else {
        return bad("must start with http:// or https://");
    };
    if scheme != "http" && scheme != "https" {
        return bad("must start with http:// or https://");
    }
    let host = rest.split('/').next().unwrap_or("");
    if host.is_empty() || host.contains('@') {
        return bad("must name a host (and no user or password)");
    }
    if rest.contains(['?', '#', ' ']) {
        return bad("must not have a query, a fragment or spaces");
    }
    if url.ends_with('/') {
        return bad("must not end with '/' (clients append /api/agent-api/... to it)");
    }
    Ok(())
}

/// The `[files]` section: caps within protocol §10's 25 MB, durations not
/// zero, and a bucket when the backend is `s3`.
fn check_files(files: &FileSettings) -> Result<(), ConfigError> {
    if files.max_bytes == 0 || files.max_bytes > FILE_HARD_CAP_BYTES {
        return Err(ConfigError::invalid(
            "files.max_bytes",
            format!("must be 1 to {FILE_HARD_CAP_BYTES} bytes (the 25 MB hard cap)"),
        ));
    }
    if let Some((bay, _)) = files.bay_max_bytes.iter().find(|(_, cap)| **cap == 0) {
        return Err(ConfigError::invalid(
            "files.bay_max_bytes",
            format!("the cap of {bay} must be at least 1 byte"),
        ));
    }
    non_zero("files.unlinked_ttl", files.unlinked_ttl)?;
    non_zero("files.url_ttl", files.url_ttl)?;
    non_zero("files.sweep_interval", files.sweep_interval)?;
    if files.backend == FileBackend::S3 && files.s3.bucket.trim().is_empty() {
        return Err(ConfigError::invalid(
            "files.s3.bucket",
            "must be set when files.backend is \"s3\"".to_owned(),
        ));
    }
    Ok(())
}

/// The `[pairing]` section: lifetimes not zero, rates at least 1.
fn check_pairing(pairing: &PairingSettings) -> Result<(), ConfigError> {
    non_zero("pairing.code_ttl", pairing.code_ttl)?;
    non_zero("pairing.link_ttl", pairing.link_ttl)?;
    at_least_one(
        "pairing.redeem_per_minute",
        pairing.redeem_per_minute as usize,
    )?;
    at_least_one(
        "pairing.link_requests_per_minute",
        pairing.link_requests_per_minute as usize,
    )
}

/// The `[rooms]` section: durations not zero, counts at least 1.
fn check_rooms(rooms: &RoomsSettings) -> Result<(), ConfigError> {
    non_zero("rooms.max_wait", rooms.max_wait)?;
    non_zero("rooms.inactivity_timeout", rooms.inactivity_timeout)?;
    for (key, n) in [
        ("rooms.create_per_hour", rooms.create_per_hour),
        ("rooms.create_burst", rooms.create_burst),
        (
            "rooms.public_writes_per_minute",
            rooms.public_writes_per_minute,
        ),
        ("rooms.public_write_burst", rooms.public_write_burst),
        (
            "rooms.private_writes_per_minute",
            rooms.private_writes_per_minute,
        ),
        ("rooms.private_write_burst", rooms.private_write_burst),
        ("rooms.owner_per_minute", rooms.owner_per_minute),
        ("rooms.owner_burst", rooms.owner_burst),
        ("rooms.reads_per_minute", rooms.reads_per_minute),
        ("rooms.read_burst", rooms.read_burst),
        ("rooms.max_waiting_per_ip", rooms.max_waiting_per_ip),
        ("rooms.max_authors", rooms.max_authors),
    ] {
        at_least_one(key, n as usize)?;
    }
    Ok(())
}

/// The `[webhooks]` section: timeouts and the retry backoff not zero,
/// `retry_max` ≥ `retry_initial`, and the sealing key well formed when set
/// (see [`check_secret_key`]).
fn check_webhooks(webhooks: &WebhookSettings) -> Result<(), ConfigError> {
    non_zero("webhooks.attempt_timeout", webhooks.attempt_timeout)?;
    non_zero("webhooks.retry_initial", webhooks.retry_initial)?;
    if webhooks.retry_max < webhooks.retry_initial {
        return Err(ConfigError::invalid(
            "webhooks.retry_max",
            format!(
                "is {}, must be at least webhooks.retry_initial ({})",
                show(webhooks.retry_max),
                show(webhooks.retry_initial)
            ),
        ));
    }
    at_least_one("webhooks.max_concurrent", webhooks.max_concurrent)?;
    non_zero("webhooks.lease_ttl", webhooks.lease_ttl)?;
    non_zero("webhooks.idle_recheck", webhooks.idle_recheck)?;
    at_least_one("webhooks.max_response_bytes", webhooks.max_response_bytes)?;
    if let Some(key) = &webhooks.secret_key {
        check_secret_key(key)?;
    }
    Ok(())
}

/// `webhooks.secret_key`: standard base64 (with padding) of exactly
/// [`WEBHOOK_SECRET_KEY_BYTES`] bytes. The messages never quote the value.
fn check_secret_key(key: &str) -> Result<(), ConfigError> {
    const KEY: &str = "webhooks.secret_key";
    const HOW: &str = "e.g. the output of `openssl rand -base64 32`, or unset for a key \
                       of the node's own";
    match base64::engine::general_purpose::STANDARD.decode(key) {
        Ok(bytes) if bytes.len() == WEBHOOK_SECRET_KEY_BYTES => Ok(()),
        Ok(bytes) => Err(ConfigError::invalid(
            KEY,
            format!(
                "decodes to {} bytes, must be exactly {WEBHOOK_SECRET_KEY_BYTES} bytes \
                 in standard base64 ({HOW})",
                bytes.len()
            ),
        )),
        Err(_) => Err(ConfigError::invalid(
            KEY,
            format!(
                "is not standard base64: must be {WEBHOOK_SECRET_KEY_BYTES} bytes \
                 in standard base64 ({HOW})"
            ),
        )),
    }
}

fn show(duration: Duration) -> humantime::FormattedDuration {
    humantime::format_duration(duration)
}

fn non_zero(key: &str, value: Duration) -> Result<(), ConfigError> {
    if value.is_zero() {
        return Err(ConfigError::invalid(
            key,
            "must be a duration greater than zero, e.g. \"500ms\" or \"10s\"",
        ));
    }
    Ok(())
}

fn at_least_one(key: &str, value: usize) -> Result<(), ConfigError> {
    if value == 0 {
        return Err(ConfigError::invalid(key, "is 0, must be at least 1"));
    }
    Ok(())
}

/// `host:port` with a numeric port: a socket address, or a host name
/// (resolved by the listener, not here, so validation never does DNS).
fn check_bind(bind: &str) -> Result<(), ConfigError> {
    if bind.parse::<SocketAddr>().is_ok() {
        return Ok(());
    }
    let valid = match bind.rsplit_once(':') {
        Some((host, port)) => {
            !host.is_empty()
                && !host.contains(char::is_whitespace)
                && (!host.contains(':') || (host.starts_with('[') && host.ends_with(']')))
                && port.parse::<u16>().is_ok()
        }
        None => false,
    };
    if valid {
        Ok(())
    } else {
        Err(ConfigError::invalid(
            "bind",
            format!("{bind:?} is not host:port, e.g. \"127.0.0.1:8080\" or \"[::]:8080\""),
        ))
    }
}

/// The scheme of `url` when it is one of `schemes` and something follows it.
fn scheme_of<'a>(url: &'a str, schemes: &[&str]) -> Option<&'a str> {
    match url.split_once("://") {
        Some((scheme, rest)) if schemes.contains(&scheme) && !rest.is_empty() => Some(scheme),
        _ => None,
    }
}

/// The `/<db>` part of a `scheme://authority/<db>?…` URL ("" when none).
fn database_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    rest.split_once('/').map_or("", |(_, db)| db)
}

/// What is wrong with the host, port or database of a `redis://` or
/// `rediss://` URL, if anything: the checks redis-rs makes when the node
/// starts, so `config check` catches them first. Never quotes the URL.
fn tcp_url_problem(url: &str) -> Option<&'static str> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    let authority = rest.split('/').next().unwrap_or("");
    // Userinfo may contain '@' and ':' (a password): the host follows the last '@'.
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let port = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split_once(']')
            .map(|(_, p)| p.strip_prefix(':').unwrap_or(""))
    } else {
        Some(host_port.rsplit_once(':').map_or("", |(_, p)| p))
    };
    let host = host_port
        .trim_end_matches(|c: char| c.is_ascii_digit())
        .trim_end_matches(':');
    if host.is_empty() {
        return Some("names no host");
    }
    match port {
        None => return Some("has an unclosed [IPv6] host"),
        Some("") => {}
        Some(p) if p.parse::<u16>().is_ok_and(|p| p > 0) => {}
        Some(_) => return Some("has a port that is not a number from 1 to 65535"),
    }
    let db = database_of(url);
    if !db.is_empty() && db.parse::<u32>().is_err() {
        return Some("has a database that is not a number (redis://host:port/<db>)");
    }
    None
}

fn check_redis_url(url: &str, cluster: bool) -> Result<(), ConfigError> {
    // The URL may hold a password: no message below echoes it.
    let seeds = crate::settings::split_urls(url);
    if !cluster {
        if seeds.len() > 1 {
            return Err(ConfigError::invalid(
                "redis.url",
                "lists several URLs: set redis.cluster = true to use them as Redis Cluster seeds",
            ));
        }
        return match scheme_of(url, &REDIS_SCHEMES) {
            Some("redis" | "rediss") => match tcp_url_problem(url) {
                Some(problem) => Err(ConfigError::invalid("redis.url", problem)),
                None => Ok(()),
            },
            Some(_) => Ok(()),
            None => Err(ConfigError::invalid(
                "redis.url",
                "must be a redis://, rediss://, redis+unix:// or unix:// URL",
            )),
        };
    }
    let mut schemes = Vec::with_capacity(seeds.len());
    for seed in &seeds {
        match scheme_of(seed, &CLUSTER_SCHEMES) {
            Some(scheme) => schemes.push(scheme),
            None => {
                return Err(ConfigError::invalid(
                    "redis.url",
                    "with redis.cluster, must be one or more redis:// or rediss:// URLs \
                     separated by commas",
                ))
            }
        }
        if !matches!(database_of(seed), "" | "0") {
            return Err(ConfigError::invalid(
                "redis.url",
                "names a database: a Redis Cluster has database 0 only (drop the /<db>)",
            ));
        }
        if let Some(problem) = tcp_url_problem(seed) {
            return Err(ConfigError::invalid("redis.url", problem));
        }
    }
    if schemes.is_empty() {
        return Err(ConfigError::invalid(
            "redis.url",
            "with redis.cluster, must name at least one seed node",
        ));
    }
    if schemes.iter().any(|s| *s != schemes[0]) {
        return Err(ConfigError::invalid(
            "redis.url",
            "mixes redis:// and rediss:// seeds: a cluster is reached with TLS or without",
        ));
    }
    Ok(())
}
