//! The built-in defaults: the embedded `default.toml`, the protocol's numbers,
//! validation, masking and printing. No environment is touched here.

use std::path::PathBuf;
use std::time::Duration;

use switchboard_config::{
    mask_url_password, ClientHeader, ConfigError, FileBackend, FileSettings, Limits, LogFormat,
    PairingSettings, ProxySettings, RedisSettings, RoomsSettings, S3Settings, Settings, StoreKind,
    Timing, WebhookSettings, DEFAULT_TOML, MASK,
};

/// A valid `webhooks.secret_key`: 32 bytes in standard base64.
const KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[test]
fn defaults_equal_the_protocol_values() {
    let expected = Settings {
        bind: "127.0.0.1:8080".into(),
        store: StoreKind::Memory,
        redis: RedisSettings {
            url: "redis://127.0.0.1:6379".into(),
            cluster: false,
            connections: 4,
        },
        bootstrap: None,
        admin_token: None,
        log_format: LogFormat::Text,
        workers: None,
        actor_threads: 0,
        // protocol §11: the replay buffer holds content for up to 15 minutes
        replay_window: secs(15 * 60),
        replay_max_entries: 1_000_000,
        limits: Limits {
            updates_per_minute: 20,        // protocol §11: /updates bucket 20/min
            agent_requests_per_minute: 60, // protocol §11: 60 req/min agent budget
            max_content_chars: 32_000,
            max_body_bytes: 524_288,
            max_ws_frame_bytes: 65_536,
            max_connections_per_ip: 1000,
            max_held_polls_per_ip: 100,
            max_mcp_sessions_per_token: 16,
            max_connections: 100_000,
            max_outbound_queue_bytes: 1_048_576,
            presence_max_members: 100,
            summary_refresh_max: 3, // BayChat CLI 0.6.0: "3 per 5 minutes"
            summary_refresh_window: secs(5 * 60),
        },
        timing: Timing {
            updates_wait_default: secs(25), // protocol §11: absent wait → 25
            updates_wait_min: secs(1),      // protocol §11: clamped to 1–30
            updates_wait_max: secs(30),
            hello_timeout: secs(10), // protocol §11: hello within 10 seconds
            ping_interval: secs(20), // protocol §11: pings every 20 seconds
            missed_pongs: 2,         // protocol §11: drops one that misses two
            idle_cursor_interval: secs(25), // protocol §11: cursor every ~25s while idle
            sse_heartbeat: secs(20),
            watermark_interval: secs(1),
            feed_linger: Duration::ZERO,
            typing_ttl: secs(5), // protocol §11: typing has a 5s TTL
            connector_answer_timeout: secs(30),
            message_wait_default: secs(25), // protocol §11 REST fallback: wait 25 s
            draft_flush_interval: Duration::from_millis(40),
            draft_orphan_timeout: secs(30),
            request_body_timeout: secs(60),
            mcp_session_idle: secs(600),
            canary_interval: secs(1),
            canary_timeout: Duration::from_millis(2500),
            presence_interval: secs(2),
            presence_linger: Duration::from_millis(2500),
            presence_poll_linger: Duration::from_secs(10),
            presence_tick: Duration::from_millis(500),
            presence_idle_after: secs(300),
            drain_timeout: secs(10),
            drain_grace: secs(3),
            actor_idle_timeout: secs(60),
        },
        webhooks: WebhookSettings {
            allow_http: false,                 // https only
            allow_private_destinations: false, // SSRF defence on
            attempt_timeout: secs(10),
            retry_initial: secs(1),
            retry_max: secs(10 * 60),
            max_concurrent: 64,
            lease_ttl: secs(8),
            idle_recheck: secs(30),
            max_response_bytes: 65_536,
            secret_key: None,
        },
        public_url: None, // taken from each request
        pairing: PairingSettings {
            code_ttl: secs(10 * 60), // protocol §2: 10-minute codes
            link_ttl: secs(10 * 60),
            redeem_per_minute: 10,
            link_requests_per_minute: 10,
        },
        rooms: RoomsSettings {
            admin_only_creation: false,
            create_per_hour: 60,
            create_burst: 5,
            public_writes_per_minute: 120,
            public_write_burst: 10,
            private_writes_per_minute: 600,
            private_write_burst: 50,
            owner_per_minute: 30,
            owner_burst: 5,
            reads_per_minute: 1200,
            read_burst: 60,
            max_waiting_per_ip: 50,
            max_authors: 50,
            max_wait: secs(25),
            inactivity_timeout: secs(30 * 24 * 3600),
            expiry_grace: secs(60),
        },
        files: FileSettings {
            backend: FileBackend::Local,
            dir: PathBuf::from("switchboard-files"),
            max_bytes: 25 * 1024 * 1024, // protocol §10: the 25 MB hard cap
            bay_max_bytes: Default::default(),
            unlinked_ttl: secs(24 * 3600), // protocol §10: unsent uploads go after 24 h
            url_ttl: secs(3600),           // protocol §10: URLs expire in about 1 h
            sweep_interval: secs(60),
            s3: S3Settings {
                endpoint: None,
                bucket: String::new(),
                region: "us-east-1".into(),
                access_key_id: None,
                secret_access_key: None,
            },
        },
        // No peer is trusted: forwarding headers are ignored.
        proxy: ProxySettings {
            trusted: vec![],
            client_header: ClientHeader::XForwardedFor,
        },
    };
    assert_eq!(Settings::default(), expected);
    assert_eq!(WebhookSettings::default(), expected.webhooks);
    assert_eq!(FileSettings::default(), expected.files);
    assert_eq!(Limits::default(), expected.limits);
    assert_eq!(Timing::default(), expected.timing);
    assert_eq!(RedisSettings::default(), expected.redis);
    assert_eq!(StoreKind::default(), StoreKind::Memory);
    assert_eq!(LogFormat::default(), LogFormat::Text);
}

#[test]
fn embedded_default_toml_parses_and_validates() {
    let parsed: Settings = toml::from_str(DEFAULT_TOML).expect("default.toml parses");
    assert_eq!(parsed, Settings::default());
    parsed.validate().expect("defaults are valid");
}

#[test]
fn embedded_default_toml_is_the_file_on_disk() {
    let on_disk = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/default.toml"))
        .expect("config/default.toml exists");
    assert_eq!(on_disk, DEFAULT_TOML);
}

/// The optional settings are shown commented out; uncommented, each example parses.
#[test]
fn commented_out_examples_in_default_toml_parse() {
    let uncommented: String = DEFAULT_TOML
        .lines()
        .map(|line| {
            for key in ["bootstrap", "admin_token", "workers"] {
                if let Some(rest) = line.strip_prefix(&format!("# {key} = ")) {
                    return format!("{key} = {rest}\n");
                }
            }
            format!("{line}\n")
        })
        .collect();
    let parsed: Settings = toml::from_str(&uncommented).expect("examples parse");
    assert_eq!(parsed.bootstrap, Some(PathBuf::from("bootstrap.toml")));
    assert_eq!(parsed.admin_token.as_deref(), Some("change-me"));
    assert_eq!(parsed.workers, Some(4));
    parsed.validate().expect("examples are valid");
}

/// Every `key = value` line in default.toml has a comment right above it.
#[test]
fn every_setting_in_default_toml_is_documented() {
    let mut previous = "";
    for line in DEFAULT_TOML.lines() {
        let trimmed = line.trim();
        let is_setting = !trimmed.is_empty()
            && !trimmed.starts_with('#')
            && !trimmed.starts_with('[')
            && trimmed.contains(" = ");
        if is_setting {
            assert!(
                previous.starts_with('#'),
                "`{trimmed}` in default.toml has no comment above it"
            );
        }
        previous = trimmed;
    }
}

fn invalid_key(settings: &Settings) -> String {
    match settings.validate() {
        Err(ConfigError::Invalid { key, .. }) => key,
        other => panic!("expected an invalid key, got {other:?}"),
    }
}

#[test]
fn a_public_url_with_a_path_prefix_is_valid() {
    for url in [
        "https://chat.example",
        "http://127.0.0.1:8080",
        "https://chat.example/sb",
    ] {
        let settings = Settings {
            public_url: Some(url.into()),
            ..Settings::default()
        };
        assert!(settings.validate().is_ok(), "{url}");
    }
}

#[test]
fn out_of_range_values_name_their_key() {
    type Spoil = fn(&mut Settings);
    let cases: Vec<(&str, Spoil)> = vec![
        ("bind", |s| s.bind = "nowhere".into()),
        ("bind", |s| s.bind = "host:99999".into()),
        ("redis.url", |s| s.redis.url = "http://x".into()),
        ("redis.url", |s| {
            s.redis.url = "redis://a:1,redis://b:2".into();
        }),
        ("redis.url", |s| {
            s.redis.cluster = true;
            s.redis.url = "redis+unix:///run/redis.sock".into();
        }),
        ("redis.url", |s| {
            s.redis.cluster = true;
            s.redis.url = "redis://a:1,http://b:2".into();
        }),
        ("redis.url", |s| {
            s.redis.cluster = true;
            s.redis.url = "redis://a:1,rediss://b:2".into();
        }),
        ("redis.url", |s| {
            s.redis.cluster = true;
            s.redis.url = " , ".into();
        }),
        ("redis.url", |s| {
            s.redis.cluster = true;
            s.redis.url = "redis://a:1,redis://b:2/3".into();
        }),
        ("redis.url", |s| {
            s.redis.url = "redis://127.0.0.1:99999".into()
        }),
        ("redis.url", |s| s.redis.url = "redis://127.0.0.1:0".into()),
        ("redis.url", |s| s.redis.url = "redis://h:1/abc".into()),
        ("redis.url", |s| {
            s.redis.url = "redis://:secret@:6379".into()
        }),
        ("redis.url", |s| s.redis.url = "rediss://[::1:6379".into()),
        ("redis.url", |s| {
            s.redis.cluster = true;
            s.redis.url = "redis://a:1,redis://b:70000".into();
        }),
        ("redis.connections", |s| s.redis.connections = 0),
        ("admin_token", |s| s.admin_token = Some(String::new())),
        ("workers", |s| s.workers = Some(0)),
        ("workers", |s| s.workers = Some(1025)),
        ("actor_threads", |s| s.actor_threads = 1025),
        ("replay_window", |s| s.replay_window = Duration::ZERO),
        ("replay_max_entries", |s| s.replay_max_entries = 0),
        ("limits.updates_per_minute", |s| {
            s.limits.updates_per_minute = 0
        }),
        ("limits.agent_requests_per_minute", |s| {
            s.limits.agent_requests_per_minute = 0
        }),
        ("limits.max_content_chars", |s| {
            s.limits.max_content_chars = 0
        }),
        ("limits.max_body_bytes", |s| s.limits.max_body_bytes = 0),
        ("limits.max_ws_frame_bytes", |s| {
            s.limits.max_ws_frame_bytes = 0
        }),
        ("limits.max_connections", |s| s.limits.max_connections = 0),
        ("limits.max_outbound_queue_bytes", |s| {
            s.limits.max_outbound_queue_bytes = 0
        }),
        ("limits.presence_max_members", |s| {
            s.limits.presence_max_members = 0
        }),
        ("timing.updates_wait_min", |s| {
            s.timing.updates_wait_min = Duration::from_millis(500)
        }),
        ("timing.updates_wait_max", |s| {
            s.timing.updates_wait_max = secs(31 * 60)
        }),
        ("timing.updates_wait_default", |s| {
            s.timing.updates_wait_default = secs(31)
        }),
        ("timing.updates_wait_default", |s| {
            s.timing.updates_wait_min = secs(10);
            s.timing.updates_wait_default = secs(5);
        }),
        ("timing.updates_wait_default", |s| {
            s.timing.updates_wait_max = secs(20);
        }),
        ("timing.hello_timeout", |s| {
            s.timing.hello_timeout = Duration::ZERO
        }),
        ("timing.ping_interval", |s| {
            s.timing.ping_interval = Duration::ZERO
        }),
        ("timing.missed_pongs", |s| s.timing.missed_pongs = 0),
        ("timing.idle_cursor_interval", |s| {
            s.timing.idle_cursor_interval = Duration::ZERO
        }),
        ("timing.sse_heartbeat", |s| {
            s.timing.sse_heartbeat = Duration::ZERO
        }),
        ("timing.watermark_interval", |s| {
            s.timing.watermark_interval = Duration::ZERO
        }),
        ("timing.typing_ttl", |s| {
            s.timing.typing_ttl = Duration::ZERO
        }),
        ("timing.connector_answer_timeout", |s| {
            s.timing.connector_answer_timeout = Duration::from_millis(500)
        }),
        ("timing.message_wait_default", |s| {
            s.timing.message_wait_default = Duration::from_secs(51)
        }),
        ("timing.presence_interval", |s| {
            s.timing.presence_interval = Duration::ZERO
        }),
        ("timing.presence_idle_after", |s| {
            s.timing.presence_idle_after = Duration::ZERO
        }),
        ("timing.actor_idle_timeout", |s| {
            s.timing.actor_idle_timeout = Duration::ZERO
        }),
        ("webhooks.attempt_timeout", |s| {
            s.webhooks.attempt_timeout = Duration::ZERO
        }),
        ("webhooks.retry_initial", |s| {
            s.webhooks.retry_initial = Duration::ZERO
        }),
        ("webhooks.retry_max", |s| s.webhooks.retry_max = secs(0)),
        ("webhooks.retry_max", |s| {
            s.webhooks.retry_initial = secs(5);
            s.webhooks.retry_max = secs(4);
        }),
        ("webhooks.max_concurrent", |s| s.webhooks.max_concurrent = 0),
        ("webhooks.lease_ttl", |s| {
            s.webhooks.lease_ttl = Duration::ZERO
        }),
        ("webhooks.idle_recheck", |s| {
            s.webhooks.idle_recheck = Duration::ZERO
        }),
        ("webhooks.max_response_bytes", |s| {
            s.webhooks.max_response_bytes = 0
        }),
        ("webhooks.secret_key", |s| {
            s.webhooks.secret_key = Some(String::new())
        }),
        ("webhooks.secret_key", |s| {
            // 31 bytes.
            s.webhooks.secret_key = Some("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZQ==".into())
        }),
        ("webhooks.secret_key", |s| {
            // 33 bytes.
            s.webhooks.secret_key = Some("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWYw".into())
        }),
        ("webhooks.secret_key", |s| {
            // URL-safe alphabet, not standard base64.
            s.webhooks.secret_key = Some("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNk-_8=".into())
        }),
        ("webhooks.secret_key", |s| {
            s.webhooks.secret_key = Some("not base64 at all!".into())
        }),
        ("public_url", |s| s.public_url = Some("chat.example".into())),
        ("public_url", |s| {
            s.public_url = Some("ftp://chat.example".into())
        }),
        ("public_url", |s| s.public_url = Some("https://".into())),
        ("public_url", |s| {
            s.public_url = Some("https://chat.example/".into())
        }),
        ("public_url", |s| {
            s.public_url = Some("https://chat.example/?x=1".into())
        }),
        ("public_url", |s| {
            s.public_url = Some("https://u:p@chat.example".into())
        }),
        ("pairing.code_ttl", |s| s.pairing.code_ttl = Duration::ZERO),
        ("pairing.link_ttl", |s| s.pairing.link_ttl = Duration::ZERO),
        ("pairing.redeem_per_minute", |s| {
            s.pairing.redeem_per_minute = 0
        }),
        ("pairing.link_requests_per_minute", |s| {
            s.pairing.link_requests_per_minute = 0
        }),
    ];
    for (key, spoil) in cases {
        let mut settings = Settings::default();
        spoil(&mut settings);
        assert_eq!(invalid_key(&settings), key, "{settings:?}");
        let message = settings.validate().unwrap_err().to_string();
        assert!(message.contains(&format!("`{key}`")), "{message}");
    }
}

/// A wrong `webhooks.secret_key` is refused without quoting it.
#[test]
fn bad_webhook_secret_key_is_not_echoed() {
    for bad in ["c2hvcnQtc2VjcmV0LXZhbHVl", "this is not base64, not at all"] {
        let mut settings = Settings::default();
        settings.webhooks.secret_key = Some(bad.into());
        let message = settings.validate().unwrap_err().to_string();
        assert!(message.contains("`webhooks.secret_key`"), "{message}");
        assert!(message.contains("32 bytes"), "{message}");
        assert!(!message.contains(bad), "{message}");
    }
}

#[test]
fn edge_values_that_make_sense_are_valid() {
    let mut settings = Settings::default();
    settings.limits.max_connections_per_ip = 0; // unlimited
    settings.timing.drain_timeout = Duration::ZERO; // close at once
    settings.timing.updates_wait_min = secs(30);
    settings.timing.updates_wait_default = secs(30);
    settings.bind = "[::]:0".into();
    settings.redis.url = "rediss://user:pw@redis.example:6380/2".into();
    settings.workers = Some(1);
    settings.webhooks.secret_key = Some(KEY.into());
    settings.webhooks.retry_max = settings.webhooks.retry_initial; // no growth
    settings.webhooks.max_concurrent = 1;
    settings.webhooks.allow_http = true;
    settings.webhooks.allow_private_destinations = true;
    settings.validate().expect("valid");
    settings.bind = "localhost:8080".into();
    settings.redis.url = "redis+unix:///run/redis.sock".into();
    settings.validate().expect("valid");
    // A comma inside a password is not a second URL.
    settings.redis.url = "redis://u:pa,ss@h:1".into();
    settings.validate().expect("valid");
    settings.redis.cluster = true;
    for seeds in [
        "redis://10.0.0.1:6379",
        "redis://10.0.0.1:6379,redis://10.0.0.2:6379, redis://10.0.0.3:6379",
        "rediss://u:pw@a:6380,rediss://u:pw@b:6380/0",
        "redis://a:6379/?protocol=resp3",
    ] {
        settings.redis.url = seeds.into();
        settings.validate().expect(seeds);
    }
}

#[test]
fn cluster_seeds_split_at_commas_that_start_a_url() {
    let mut redis = RedisSettings {
        url: "redis://a:1, redis://b:2,,rediss://u:pa,ss@c:3".into(),
        cluster: true,
        connections: 1,
    };
    assert_eq!(
        redis.seeds(),
        ["redis://a:1", "redis://b:2", "rediss://u:pa,ss@c:3"]
    );
    redis.cluster = false;
    assert_eq!(redis.seeds(), [redis.url.as_str()]);
}

#[test]
fn masking_hides_the_admin_token_redis_password_and_webhook_key() {
    let settings = Settings {
        admin_token: Some("s3cret-token".into()),
        redis: RedisSettings {
            url: "redis://default:hunter2@db:6379/0".into(),
            cluster: false,
            connections: 16,
        },
        webhooks: WebhookSettings {
            secret_key: Some(KEY.into()),
            ..WebhookSettings::default()
        },
        ..Settings::default()
    };

    let masked = settings.masked();
    assert_eq!(masked.admin_token.as_deref(), Some(MASK));
    assert_eq!(masked.webhooks.secret_key.as_deref(), Some(MASK));
    assert_eq!(
        masked.redis.url,
        format!("redis://default:{MASK}@db:6379/0")
    );
    // Nothing else changes, and the original keeps its secrets.
    assert_eq!(masked.bind, settings.bind);
    assert_eq!(settings.admin_token.as_deref(), Some("s3cret-token"));

    for shown in [
        masked.to_toml(),
        format!("{settings:?}"),
        format!("{masked:?}"),
        format!("{:?}", settings.webhooks),
    ] {
        assert!(!shown.contains("s3cret-token"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(!shown.contains(KEY), "{shown}");
    }
    assert_eq!(settings.webhooks.secret_key.as_deref(), Some(KEY));
    // No token stays no token.
    assert_eq!(Settings::default().masked().admin_token, None);
    assert_eq!(Settings::default().masked().webhooks.secret_key, None);
}

#[test]
fn url_password_masking_cases() {
    for (url, masked) in [
        ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379"),
        ("redis://:pw@h:1", "redis://:********@h:1"),
        ("redis://user@h:1", "redis://user@h:1"),
        ("rediss://u:p@ss@h/3", "rediss://u:********@h/3"),
        (
            "unix:///tmp/r.sock?db=1&pass=pw",
            "unix:///tmp/r.sock?db=1&pass=********",
        ),
        (
            "redis+unix:///tmp/r.sock?password=pw",
            "redis+unix:///tmp/r.sock?password=********",
        ),
        ("not a url", "not a url"),
        (
            "redis://:pw@a:1,redis://:pw@b:2",
            "redis://:********@a:1,redis://:********@b:2",
        ),
        (
            "rediss://u:p,w@a:1, rediss://u:p,w@b:2",
            "rediss://u:********@a:1,rediss://u:********@b:2",
        ),
    ] {
        assert_eq!(mask_url_password(url), masked, "{url}");
    }
}

#[test]
fn to_toml_round_trips() {
    let mut settings = Settings {
        bootstrap: Some("seed.toml".into()),
        admin_token: Some("tok".into()),
        workers: Some(3),
        store: StoreKind::Redis,
        log_format: LogFormat::Json,
        ..Settings::default()
    };
    settings.timing.watermark_interval = Duration::from_millis(250);
    settings.webhooks.secret_key = Some(KEY.into());
    settings.webhooks.retry_max = Duration::from_secs(90);
    let text = settings.to_toml();
    assert!(text.contains("[webhooks]"), "{text}");
    assert!(text.contains("retry_max = \"1m 30s\""), "{text}");
    assert!(text.contains("replay_window = \"15m\""), "{text}");
    assert!(text.contains("watermark_interval = \"250ms\""), "{text}");
    assert!(text.contains("store = \"redis\""), "{text}");
    let parsed: Settings = toml::from_str(&text).expect("to_toml output parses");
    assert_eq!(parsed, settings);
}

#[test]
fn serde_names_of_the_enums() {
    assert_eq!(
        serde_json::to_string(&StoreKind::Redis).unwrap(),
        "\"redis\""
    );
    assert_eq!(
        serde_json::to_string(&StoreKind::Memory).unwrap(),
        "\"memory\""
    );
    assert_eq!(serde_json::to_string(&LogFormat::Json).unwrap(), "\"json\"");
    assert_eq!(serde_json::to_string(&LogFormat::Text).unwrap(), "\"text\"");
}

#[test]
fn file_settings_are_checked_and_the_s3_secret_is_masked() {
    let invalid = |change: fn(&mut Settings)| {
        let mut settings = Settings::default();
        change(&mut settings);
        settings.validate().unwrap_err().to_string()
    };
    // Protocol §10: 25 MB is the hard cap, whatever the setting says.
    let m = invalid(|s| s.files.max_bytes = 25 * 1024 * 1024 + 1);
    assert!(m.contains("`files.max_bytes`"), "{m}");
    assert!(invalid(|s| s.files.max_bytes = 0).contains("`files.max_bytes`"));
    let m = invalid(|s| s.files.unlinked_ttl = Duration::ZERO);
    assert!(m.contains("`files.unlinked_ttl`"), "{m}");
    let m = invalid(|s| s.files.backend = FileBackend::S3);
    assert!(m.contains("`files.s3.bucket`"), "{m}");
    let mut settings = Settings::default();
    settings.files.bay_max_bytes.insert("b1".into(), 1000);
    assert_eq!(settings.files.cap_for("b1"), 1000);
    assert_eq!(settings.files.cap_for("b2"), 25 * 1024 * 1024);
    settings.files.bay_max_bytes.insert("b3".into(), 1 << 40);
    assert_eq!(
        settings.files.cap_for("b3"),
        25 * 1024 * 1024,
        "never above the cap"
    );
    settings.files.s3.secret_access_key = Some("s3cr3t-value".into());
    assert!(!format!("{settings:?}").contains("s3cr3t-value"));
    assert!(!settings.masked().to_toml().contains("s3cr3t-value"));
}
