//! The settings types, their defaults (the embedded `default.toml`) and the
//! ways to print them.

use std::fmt;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The text of `config/default.toml`, compiled in.
///
/// It is the single source of the built-in defaults: [`Settings::default`]
/// parses it, so the documented file and the running defaults cannot drift.
pub const DEFAULT_TOML: &str = include_str!("../default.toml");

/// What a secret is replaced with by [`Settings::masked`] and `Debug`.
pub const MASK: &str = "********";

/// Every setting of a Switchboard node. See `config/default.toml` for the
/// meaning, unit and protocol rule of each field.
///
/// `Debug` masks the secrets (`admin_token`, the password in `redis.url`,
/// `webhooks.secret_key`); `Serialize` does not — use [`Settings::masked`] before showing it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Listener address, `host:port`.
    pub bind: String,
    /// Storage engine.
    pub store: StoreKind,
    /// Redis connection, used when `store` is [`StoreKind::Redis`].
    pub redis: RedisSettings,
    /// File of Bays, participants and tokens loaded at start-up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap: Option<PathBuf>,
    /// Bearer token of the admin API. Secret. Invariant (validated): not empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_token: Option<String>,
    /// Log line format.
    pub log_format: LogFormat,
    /// actix-web worker threads; `None` = one per CPU core. Invariant: not `Some(0)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<usize>,
    /// Dedicated threads for the Bay feeds and conversation actors; 0 =
    /// none: they share the HTTP workers' threads (no cross-thread hop
    /// between a request, its actors and the sessions it reaches).
    pub actor_threads: usize,
    /// How long a Bay's log keeps events for replay (protocol §11: 15 min).
    /// Invariant: not zero.
    #[serde(with = "humantime_serde")]
    pub replay_window: Duration,
    /// Cap on the entries of one Bay's log, whatever their age. Invariant: at least 1.
    pub replay_max_entries: usize,
    /// Request, size and connection limits.
    pub limits: Limits,
    /// Timeouts and intervals.
    pub timing: Timing,
    /// Push delivery to agents' webhooks (protocol §11, "Webhook contract v2").
    pub webhooks: WebhookSettings,
    /// The URL clients reach this deployment at, `http(s)://host[:port]`
    /// with an optional path prefix and no trailing slash: the `baseUrl`
    /// pairing hands out and the root of link-request approve URLs.
    /// `None` = taken from each request (its scheme and `Host`).
    /// Invariant (validated): `http://` or `https://`, no query or fragment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_url: Option<String>,
    /// Pairing codes and reverse linking (protocol §2).
    pub pairing: PairingSettings,
    /// Rooms shared by capability link (docs/rooms.md).
    pub rooms: RoomsSettings,
    /// Attachments and the file library (protocol §10).
    pub files: FileSettings,
    /// Trusted reverse proxies and the header naming the client behind them.
    pub proxy: crate::proxy::ProxySettings,
}

/// Storage engine of the node.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// In process, single node; state is lost on exit.
    #[default]
    Memory,
    /// Shared Redis; many nodes.
    Redis,
}

/// Format of log lines.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Redis connection settings.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisSettings {
    /// `redis://`, `rediss://`, `redis+unix://` or `unix://` URL. May hold a password (secret).
    /// With `cluster`: one or more `redis://` / `rediss://` seed URLs separated
    /// by commas (see [`RedisSettings::seeds`]).
    pub url: String,
    /// Talk to a Redis Cluster: `url` lists seed nodes, and every command is
    /// routed to the node serving its key's slot.
    pub cluster: bool,
    /// Multiplexed connections per node, used round-robin. Invariant: at least 1.
    pub connections: usize,
}

impl RedisSettings {
    /// The URLs in `url`: the seed nodes with `cluster` (split at the commas
    /// that start another URL, so a comma inside a password stays put),
    /// otherwise `url` itself.
    pub fn seeds(&self) -> Vec<&str> {
        if self.cluster {
            split_urls(&self.url)
        } else {
            vec![self.url.as_str()]
        }
    }
}

/// Splits a comma-separated list of URLs. A comma starts a new URL only
/// when what follows it (spaces and more commas aside) begins with
/// `<scheme>://`, so a comma inside a password does not split. Empty items
/// are dropped; spaces and commas around each URL are trimmed.
pub fn split_urls(list: &str) -> Vec<&str> {
    let separator = |c: char| c == ',' || c.is_whitespace();
    let starts_url = |rest: &str| {
        let rest = rest.trim_start_matches(separator);
        rest.split_once("://").is_some_and(|(scheme, _)| {
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        })
    };
    let mut out = Vec::new();
    let mut start = 0;
    for (i, _) in list.match_indices(',') {
        if starts_url(&list[i + 1..]) {
            out.push(list[start..i].trim_matches(separator));
            start = i + 1;
        }
    }
    out.push(list[start..].trim_matches(separator));
    out.retain(|u| !u.is_empty());
    out
}

/// Rate, size and connection limits. Every field is at least 1 unless it says otherwise.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// `/updates` calls per token per minute (protocol §11: 20/min, its own bucket).
    pub updates_per_minute: u32,
    /// Agent API calls per token per minute, `/updates` excluded (protocol §11: 60/min).
    pub agent_requests_per_minute: u32,
    /// Longest message `content`, in Unicode characters.
    pub max_content_chars: usize,
    /// Largest HTTP request body, in bytes.
    pub max_body_bytes: usize,
    /// Largest WebSocket frame from a client, in bytes.
    pub max_ws_frame_bytes: usize,
    /// Concurrent connections per client IP on this node; 0 = unlimited.
    pub max_connections_per_ip: usize,
    /// Concurrent connections on this node.
    pub max_connections: usize,
    /// Long-polls held at once per client IP on this node, counting
    /// `GET /updates`, `GET …/messages/wait` and the MCP tool
    /// `wait_for_messages` together; more answer 429 `RATE_LIMITED` with
    /// Retry-After. 0 = unlimited.
    pub max_held_polls_per_ip: usize,
    /// MCP sessions one token may hold open on this node at once; an
    /// `initialize` past it answers 429 `RATE_LIMITED` (docs/mcp.md). 0 =
    /// unlimited.
    pub max_mcp_sessions_per_token: usize,
    /// Bytes queued for one WebSocket and not yet taken by the socket before
    /// the session is closed as too slow (bounded memory per slow consumer).
    pub max_outbound_queue_bytes: usize,
    /// Largest conversation, in members, whose members are sent each
    /// other's `presence.updated` events. Presence in a room of N is N²
    /// deliveries while it connects, so larger rooms carry none (their
    /// members still see `presence` in `GET /agents`).
    pub presence_max_members: usize,
    /// `GET …/summary?refresh=1` calls allowed per conversation within
    /// [`Limits::summary_refresh_window`], counted across nodes; more answer
    /// 429 `SUMMARY_REFRESH_LIMITED` with Retry-After (BayChat CLI 0.6.0
    /// tells its users "3 per 5 minutes").
    pub summary_refresh_max: u32,
    /// The sliding window of [`Limits::summary_refresh_max`].
    #[serde(with = "humantime_serde")]
    pub summary_refresh_window: Duration,
}

/// Timeouts and intervals. Every duration is non-zero unless it says otherwise.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timing {
    /// `/updates` hold time when `wait` is absent or unparsable (protocol §11: 25 s).
    #[serde(with = "humantime_serde")]
    pub updates_wait_default: Duration,
    /// Lower clamp of `wait` (protocol §11: 1 s). Invariant: `>= 1s`, `<= updates_wait_default`.
    #[serde(with = "humantime_serde")]
    pub updates_wait_min: Duration,
    /// Upper clamp of `wait` (protocol §11: 30 s). Invariant: `>= updates_wait_default`, `<= 30s`.
    #[serde(with = "humantime_serde")]
    pub updates_wait_max: Duration,
    /// Time a WebSocket has to send `hello` (protocol §11: 10 s).
    #[serde(with = "humantime_serde")]
    pub hello_timeout: Duration,
    /// Interval of server pings (protocol §11: 20 s).
    #[serde(with = "humantime_serde")]
    pub ping_interval: Duration,
    /// Consecutive missed pongs that drop a connection (protocol §11: 2). Invariant: at least 1.
    pub missed_pongs: u32,
    /// Interval of the idle `cursor` frame (protocol §11: ~25 s).
    #[serde(with = "humantime_serde")]
    pub idle_cursor_interval: Duration,
    /// Interval of the comment heartbeat of an idle `GET /events` (SSE)
    /// stream (20 s, like the WebSocket ping). Invariant: not zero.
    #[serde(with = "humantime_serde")]
    pub sse_heartbeat: Duration,
    /// How often idle sessions' cursors advance through watermarks.
    #[serde(with = "humantime_serde")]
    pub watermark_interval: Duration,
    /// How long a feed's tail waits after a short batch before reading
    /// again, so entries arriving meanwhile fan out together (zero reads at
    /// once). Bounds a feed's wake-ups per second; adds at most this to
    /// delivery latency.
    #[serde(with = "humantime_serde")]
    pub feed_linger: Duration,
    /// Lifetime of a typing indicator (protocol §11: 5 s).
    #[serde(with = "humantime_serde")]
    pub typing_ttl: Duration,
    /// How long `POST /agents/{id}/ask` and `/send` hold the caller for the
    /// connector's answer before 504 `CONNECTOR_TIMEOUT` (protocol §9); the
    /// connector may answer until then. Invariant: 1 s to 120 s.
    #[serde(with = "humantime_serde")]
    pub connector_answer_timeout: Duration,
    /// How long `GET /conversations/{id}/messages/wait` holds when the
    /// call gives no `timeout` (protocol §11 REST fallback: 25 s).
    /// Invariant: 1 s to 50 s, the range `timeout` itself takes.
    #[serde(with = "humantime_serde")]
    pub message_wait_default: Duration,
    /// How often each node refreshes its presence record of a Bay (who
    /// holds sessions there, and their activity); a record lives three
    /// intervals, so a killed node's participants go offline within about
    /// three intervals. Invariant: not zero.
    #[serde(with = "humantime_serde")]
    pub presence_interval: Duration,
    /// How long a participant stays present after its last session on a
    /// node ended (an `/updates` client between polls; a reconnect inside
    /// it changes nothing). Zero is allowed (offline at once).
    #[serde(with = "humantime_serde")]
    pub presence_linger: Duration,
    /// [`Timing::presence_linger`] for a participant whose last session
    /// was an `/updates` call: a poll loop's gap can hold a 429's
    /// `Retry-After` (the 20/min bucket) and a client's backoff, and a
    /// poller that flickers offline in it wakes every held poll of its
    /// rooms with a presence event, which under load feeds on itself.
    #[serde(with = "humantime_serde")]
    pub presence_poll_linger: Duration,
    /// How often the node holding a Bay's presence lease computes states
    /// and logs `presence.updated` events. Zero turns those events off
    /// (`GET /agents` still shows `presence`).
    #[serde(with = "humantime_serde")]
    pub presence_tick: Duration,
    /// A present participant with no send, typing or draft for this long
    /// is `idle`. Invariant: not zero.
    #[serde(with = "humantime_serde")]
    pub presence_idle_after: Duration,
    /// Grace period for open connections on shutdown; zero is allowed (close at once).
    #[serde(with = "humantime_serde")]
    pub drain_timeout: Duration,
    /// On shutdown, how long the node keeps listening while draining:
    /// `/readyz` answers 503 and new sessions get 503 with `Retry-After`,
    /// so a load balancer removing the node meanwhile drops nothing. Zero
    /// stops listening at once.
    #[serde(with = "humantime_serde")]
    pub drain_grace: Duration,
    /// Idle conversation actors stop after this long (Bay feeds never stop).
    #[serde(with = "humantime_serde")]
    pub actor_idle_timeout: Duration,
    /// How long appends to a draft are gathered before they are stored and
    /// delivered as one `message.delta` (40 ms by default). Invariant: not zero.
    #[serde(with = "humantime_serde")]
    pub draft_flush_interval: Duration,
    /// A draft whose author holds no session and appended nothing for this
    /// long fails (`message.failed`; 30 s by default). Invariant: not zero.
    #[serde(with = "humantime_serde")]
    pub draft_orphan_timeout: Duration,
    /// The most time a request body may take to arrive after the head;
    /// past it the request is answered 408 `REQUEST_TIMEOUT` and the
    /// connection closes (a trickling client holds no connection).
    #[serde(with = "humantime_serde")]
    pub request_body_timeout: Duration,
    /// An MCP session (`/api/mcp`) that made no request for this long
    /// expires: its id answers 404 and the client initializes again
    /// (10 min by default). Invariant: not zero.
    #[serde(with = "humantime_serde")]
    pub mcp_session_idle: Duration,
    /// How often the readiness canary writes a record into the store and
    /// waits for the node's own feed to read it back (1 s by default).
    /// Zero turns the canary off: `/readyz` then checks the store's ping
    /// alone.
    #[serde(with = "humantime_serde")]
    pub canary_interval: Duration,
    /// `/readyz` answers 503 `delivery_stalled` once a canary record has
    /// gone this long without coming back through the feed (2.5 s by
    /// default). Invariant: not zero.
    #[serde(with = "humantime_serde")]
    pub canary_timeout: Duration,
}

/// Pairing codes and link requests (protocol §2, "The two ways to
/// connect"). Every field is non-zero.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PairingSettings {
    /// Lifetime of a pairing code (protocol §2: 10 minutes).
    #[serde(with = "humantime_serde")]
    pub code_ttl: Duration,
    /// Lifetime of a link request, approved or not.
    #[serde(with = "humantime_serde")]
    pub link_ttl: Duration,
    /// `POST /pair` attempts per client IP per minute (guessing codes).
    pub redeem_per_minute: u32,
    /// `POST /link-requests` per client IP per minute.
    pub link_requests_per_minute: u32,
}

/// Rooms shared by capability link (docs/rooms.md): who may create them,
/// their limits and lifetime. Every rate is a GCRA bucket of `*_burst`
/// calls refilled at `*_per_minute` (or per hour); every count is at least 1.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoomsSettings {
    /// Only the admin token may `POST /rooms` (the admin token is always accepted).
    pub admin_only_creation: bool,
    /// `POST /rooms` per client IP per hour.
    pub create_per_hour: u32,
    /// Burst of `POST /rooms` per client IP.
    pub create_burst: u32,
    /// Participant writes (sends, pins, reactions) per public room per minute.
    pub public_writes_per_minute: u32,
    /// Burst of participant writes per public room.
    pub public_write_burst: u32,
    /// Participant writes per private room per minute.
    pub private_writes_per_minute: u32,
    /// Burst of participant writes per private room.
    pub private_write_burst: u32,
    /// Owner management calls (deletions) per room per minute.
    pub owner_per_minute: u32,
    /// Burst of owner management calls per room.
    pub owner_burst: u32,
    /// Dynamic reads (READ, FOLLOW, history) per client IP per minute.
    pub reads_per_minute: u32,
    /// Burst of dynamic reads per client IP.
    pub read_burst: u32,
    /// FOLLOWs one client IP may hold waiting at once on a node, across rooms.
    pub max_waiting_per_ip: u32,
    /// Distinct link authors one room admits; a new name past it is 403
    /// `ROOM_AUTHORS_FULL`, the authors it has keep writing.
    pub max_authors: u32,
    /// Longest FOLLOW hold (`wait`, the protocol's 25 s).
    #[serde(with = "humantime_serde")]
    pub max_wait: Duration,
    /// A room without an authorized read or write for this long expires…
    #[serde(with = "humantime_serde")]
    pub inactivity_timeout: Duration,
    /// …once this grace has passed too; its links then answer 410.
    #[serde(with = "humantime_serde")]
    pub expiry_grace: Duration,
}

/// The hard cap of one upload, bytes (protocol §10: "max 25MB hard cap").
pub const FILE_HARD_CAP_BYTES: u64 = 25 * 1024 * 1024;

/// Where attachment bytes live.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileBackend {
    /// A directory on local disk (`files.dir`).
    #[default]
    Local,
    /// S3-compatible object storage (`files.s3`).
    S3,
}

/// Attachments and the file library (protocol §10). `Debug` masks the S3
/// secret key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSettings {
    /// Where the bytes live.
    pub backend: FileBackend,
    /// Directory of the local backend; created when missing.
    pub dir: PathBuf,
    /// Largest upload, bytes. Invariant (validated): 1 to [`FILE_HARD_CAP_BYTES`].
    pub max_bytes: u64,
    /// Per-Bay caps (Bay id → bytes), each at most `max_bytes` in effect.
    #[serde(default)]
    pub bay_max_bytes: std::collections::BTreeMap<String, u64>,
    /// How long an upload never attached to a message is kept (protocol
    /// §10: 24 h). Invariant: not zero.
    #[serde(with = "humantime_serde")]
    pub unlinked_ttl: Duration,
    /// Lifetime of a signed attachment URL (protocol §10: about 1 h).
    /// Invariant: not zero.
    #[serde(with = "humantime_serde")]
    pub url_ttl: Duration,
    /// Interval of each node's sweep of expired uploads. Invariant: not zero.
    #[serde(with = "humantime_serde")]
    pub sweep_interval: Duration,
    /// The object storage of the `s3` backend.
    pub s3: S3Settings,
}

impl FileSettings {
    /// The upload cap of `bay`, bytes: its own cap when it has one, never
    /// above `max_bytes` nor the hard cap.
    pub fn cap_for(&self, bay: &str) -> u64 {
        let cap = self.max_bytes.min(FILE_HARD_CAP_BYTES);
        self.bay_max_bytes
            .get(bay)
            .map_or(cap, |own| (*own).min(cap))
    }
}

/// S3-compatible object storage settings (`files.s3`).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct S3Settings {
    /// Endpoint URL; `None` = AWS S3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Bucket; required with the `s3` backend (validated).
    pub bucket: String,
    /// Region.
    pub region: String,
    /// Access key id; `None` = from the AWS environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_key_id: Option<String>,
    /// Secret access key. Secret. `None` = from the AWS environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_access_key: Option<String>,
}

impl fmt::Debug for S3Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Settings")
            .field("endpoint", &self.endpoint)
            .field("bucket", &self.bucket)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field(
                "secret_access_key",
                &self.secret_access_key.as_ref().map(|_| MASK),
            )
            .finish()
    }
}

impl Default for FileSettings {
    /// `[files]` of the embedded `default.toml`.
    fn default() -> Self {
        Settings::default().files
    }
}

/// Push delivery to agents' webhooks (protocol §11, "Webhook contract v2";
/// deliveries are signed as the Standard Webhooks spec says).
///
/// `Debug` masks `secret_key`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookSettings {
    /// Accept `http://` webhook URLs as well as `https://` (for tests and
    /// local development; never in production).
    pub allow_http: bool,
    /// Deliver to loopback, private, link-local, CGNAT, documentation and
    /// cloud-metadata addresses too (SSRF defence off; for tests).
    pub allow_private_destinations: bool,
    /// Longest one delivery attempt may take, connecting included. Invariant: not zero.
    #[serde(with = "humantime_serde")]
    pub attempt_timeout: Duration,
    /// Upper bound of the first retry's delay: delays are drawn with full
    /// jitter from `[0, min(retry_max, retry_initial × 2^n)]`. Invariant: not zero.
    #[serde(with = "humantime_serde")]
    pub retry_initial: Duration,
    /// Cap of the retry delay. Invariant: `>= retry_initial`.
    #[serde(with = "humantime_serde")]
    pub retry_max: Duration,
    /// Deliveries in flight at once on this node. Invariant: at least 1.
    pub max_concurrent: usize,
    /// Lifetime of the lease under which one node at a time delivers an
    /// agent's webhooks; the holder renews it while it works, and another
    /// node takes over at most this long after the holder dies. Invariant: not zero.
    #[serde(with = "humantime_serde")]
    pub lease_ttl: Duration,
    /// Longest an idle delivery worker goes without reading its webhook
    /// record and its agent's standing from the store. Workers wake on the
    /// Bay's log (a new record, or the control entry logged when a webhook
    /// is set, replaced or removed, or a suspension changes), so this is a
    /// backstop only. Invariant: not zero.
    #[serde(with = "humantime_serde")]
    pub idle_recheck: Duration,
    /// Bytes of a webhook's response body read at most (the rest is
    /// discarded). Invariant: at least 1.
    pub max_response_bytes: usize,
    /// Key that seals webhook signing secrets at rest: 32 bytes in standard
    /// base64 (44 characters). Secret. Every node of a deployment must share
    /// it; `None` = the gateway uses a key of its own. Invariant (validated):
    /// decodes to exactly 32 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_key: Option<String>,
}

impl Default for Settings {
    /// The embedded `config/default.toml`, parsed.
    fn default() -> Self {
        static DEFAULTS: OnceLock<Settings> = OnceLock::new();
        DEFAULTS
            .get_or_init(|| {
                // The file is compiled in and a test parses it, so this cannot fail at run time.
                toml::from_str(DEFAULT_TOML).expect("embedded config/default.toml is valid")
            })
            .clone()
    }
}

impl Default for RedisSettings {
    /// `[redis]` of the embedded `default.toml`.
    fn default() -> Self {
        Settings::default().redis
    }
}

impl Default for Limits {
    /// `[limits]` of the embedded `default.toml`.
    fn default() -> Self {
        Settings::default().limits
    }
}

impl Default for Timing {
    /// `[timing]` of the embedded `default.toml`.
    fn default() -> Self {
        Settings::default().timing
    }
}

impl Default for PairingSettings {
    /// `[pairing]` of the embedded `default.toml`.
    fn default() -> Self {
        Settings::default().pairing
    }
}

impl Default for RoomsSettings {
    /// `[rooms]` of the embedded `default.toml`.
    fn default() -> Self {
        Settings::default().rooms
    }
}

impl Default for WebhookSettings {
    /// `[webhooks]` of the embedded `default.toml`.
    fn default() -> Self {
        Settings::default().webhooks
    }
}

impl Settings {
    /// A copy safe to print or log: `admin_token` and `webhooks.secret_key`
    /// become [`MASK`] and the password in `redis.url` (userinfo or a
    /// `pass` / `password` query parameter) is masked.
    pub fn masked(&self) -> Settings {
        let mut masked = self.clone();
        if masked.admin_token.is_some() {
            masked.admin_token = Some(MASK.to_owned());
        }
        if masked.webhooks.secret_key.is_some() {
            masked.webhooks.secret_key = Some(MASK.to_owned());
        }
        if masked.files.s3.secret_access_key.is_some() {
            masked.files.s3.secret_access_key = Some(MASK.to_owned());
        }
        masked.redis.url = mask_url_password(&self.redis.url);
        masked
    }

    /// The settings as pretty TOML, loadable again with `--config`.
    ///
    /// Secrets are included as they are: call [`Settings::masked`] first to
    /// print them.
    pub fn to_toml(&self) -> String {
        // Every field is a string, integer, duration string or table with no
        // `None` inside arrays, all of which TOML can express.
        toml::to_string_pretty(self).expect("settings always serialize to TOML")
    }
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("bind", &self.bind)
            .field("store", &self.store)
            .field("redis", &self.redis)
            .field("bootstrap", &self.bootstrap)
            .field("admin_token", &self.admin_token.as_ref().map(|_| MASK))
            .field("log_format", &self.log_format)
            .field("workers", &self.workers)
            .field("actor_threads", &self.actor_threads)
            .field("replay_window", &self.replay_window)
            .field("replay_max_entries", &self.replay_max_entries)
            .field("limits", &self.limits)
            .field("timing", &self.timing)
            .field("webhooks", &self.webhooks)
            .field("public_url", &self.public_url)
            .field("pairing", &self.pairing)
            .field("rooms", &self.rooms)
            .field("files", &self.files)
            .field("proxy", &self.proxy)
            .finish()
    }
}

impl fmt::Debug for WebhookSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookSettings")
            .field("allow_http", &self.allow_http)
            .field(
                "allow_private_destinations",
                &self.allow_private_destinations,
            )
            .field("attempt_timeout", &self.attempt_timeout)
            .field("retry_initial", &self.retry_initial)
            .field("retry_max", &self.retry_max)
            .field("max_concurrent", &self.max_concurrent)
            .field("lease_ttl", &self.lease_ttl)
            .field("idle_recheck", &self.idle_recheck)
            .field("max_response_bytes", &self.max_response_bytes)
            .field("secret_key", &self.secret_key.as_ref().map(|_| MASK))
            .finish()
    }
}

impl fmt::Debug for RedisSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisSettings")
            .field("url", &mask_url_password(&self.url))
            .field("cluster", &self.cluster)
            .field("connections", &self.connections)
            .finish()
    }
}

/// Replaces the password of a URL with [`MASK`]: the part after `:` in the
/// userinfo (`redis://user:secret@host` → `redis://user:********@host`) and
/// the value of `pass=` / `password=` query parameters (redis-rs reads those
/// for unix sockets). A comma-separated list of URLs (cluster seeds, see
/// [`split_urls`]) is masked URL by URL. Anything else is returned unchanged.
pub fn mask_url_password(url: &str) -> String {
    let urls = split_urls(url);
    if urls.len() > 1 {
        return urls
            .into_iter()
            .map(mask_one_url)
            .collect::<Vec<_>>()
            .join(",");
    }
    mask_one_url(url)
}

fn mask_one_url(url: &str) -> String {
    let (head, query) = match url.split_once('?') {
        Some((head, query)) => (head, Some(query)),
        None => (url, None),
    };
    let mut out = String::with_capacity(url.len());
    match head.split_once("://") {
        Some((scheme, rest)) => {
            out.push_str(scheme);
            out.push_str("://");
            let authority_end = rest.find('/').unwrap_or(rest.len());
            let (authority, path) = rest.split_at(authority_end);
            match authority.rsplit_once('@') {
                Some((userinfo, host)) => {
                    match userinfo.split_once(':') {
                        Some((user, _password)) => {
                            out.push_str(user);
                            out.push(':');
                            out.push_str(MASK);
                        }
                        None => out.push_str(userinfo),
                    }
                    out.push('@');
                    out.push_str(host);
                }
                None => out.push_str(authority),
            }
            out.push_str(path);
        }
        None => out.push_str(head),
    }
    if let Some(query) = query {
        out.push('?');
        let params: Vec<String> = query
            .split('&')
            .map(|param| match param.split_once('=') {
                Some((name, _)) if name == "pass" || name == "password" => {
                    format!("{name}={MASK}")
                }
                _ => param.to_owned(),
            })
            .collect();
        out.push_str(&params.join("&"));
    }
    out
}
