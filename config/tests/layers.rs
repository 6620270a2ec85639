//! Loading through every layer: defaults < file < environment < flags.
//!
//! Every test that loads runs inside `figment::Jail`, which holds a global
//! lock, gives each test its own temporary working directory and restores
//! the environment afterwards, so tests that set variables never race.

// `Jail`'s closures must return `figment::Error`, which is large; fine in tests.
#![allow(clippy::result_large_err)]

use std::path::Path;
use std::time::Duration;

use clap::Parser;
use figment::Jail;
use switchboard_config::{
    check, load, CheckArgs, Cli, Command, ConfigCommand, ConfigError, LogFormat, Overrides,
    Settings, StoreKind, MASK,
};

/// Lets `?` carry our error out of a Jail closure.
fn jailed<T>(result: Result<T, ConfigError>) -> Result<T, figment::Error> {
    result.map_err(|e| figment::Error::from(e.to_string()))
}

fn load_err(file: Option<&str>, overrides: &Overrides) -> ConfigError {
    match load(file.map(Path::new), overrides) {
        Ok(settings) => panic!("expected an error, loaded {settings:?}"),
        Err(error) => error,
    }
}

#[test]
fn nothing_set_loads_the_defaults() {
    Jail::expect_with(|_| {
        let settings = jailed(load(None, &Overrides::default()))?;
        assert_eq!(settings, Settings::default());
        Ok(())
    });
}

#[test]
fn each_layer_wins_over_the_ones_below() {
    Jail::expect_with(|jail| {
        jail.create_file(
            "sb.toml",
            r#"
            bind = "0.0.0.0:1001"
            replay_window = "5m"
            log_format = "json"
            [timing]
            hello_timeout = "3s"
            "#,
        )?;
        let file = Some(Path::new("sb.toml"));

        // File over defaults.
        let s = jailed(load(file, &Overrides::default()))?;
        assert_eq!(s.bind, "0.0.0.0:1001");
        assert_eq!(s.replay_window, Duration::from_secs(300));
        assert_eq!(s.log_format, LogFormat::Json);
        assert_eq!(s.timing.hello_timeout, Duration::from_secs(3));
        // Untouched keys keep their defaults, also inside a touched table.
        assert_eq!(s.timing.ping_interval, Duration::from_secs(20));
        assert_eq!(s.limits, Settings::default().limits);

        // Environment over file.
        jail.set_env("SWITCHBOARD_BIND", "0.0.0.0:1002");
        jail.set_env("SWITCHBOARD_TIMING__HELLO_TIMEOUT", "4s");
        let s = jailed(load(file, &Overrides::default()))?;
        assert_eq!(s.bind, "0.0.0.0:1002");
        assert_eq!(s.timing.hello_timeout, Duration::from_secs(4));
        assert_eq!(
            s.replay_window,
            Duration::from_secs(300),
            "file still applies"
        );

        // Flags over environment.
        let flags = Overrides {
            bind: Some("0.0.0.0:1003".into()),
            replay_window: Some(Duration::from_secs(120)),
            ..Overrides::default()
        };
        let s = jailed(load(file, &flags))?;
        assert_eq!(s.bind, "0.0.0.0:1003");
        assert_eq!(s.replay_window, Duration::from_secs(120));
        assert_eq!(
            s.timing.hello_timeout,
            Duration::from_secs(4),
            "env still applies"
        );
        assert_eq!(s.log_format, LogFormat::Json, "file still applies");
        Ok(())
    });
}

#[test]
fn every_documented_environment_variable_is_read() {
    Jail::expect_with(|jail| {
        jail.set_env("SWITCHBOARD_BIND", "10.0.0.1:9000");
        jail.set_env("SWITCHBOARD_BOOTSTRAP", "seed.toml");
        jail.set_env("SWITCHBOARD_REPLAY_WINDOW", "2m");
        jail.set_env("SWITCHBOARD_ADMIN_TOKEN", "12345"); // digits stay a string
        jail.set_env("SWITCHBOARD_STORE", "redis");
        jail.set_env("SWITCHBOARD_REDIS_URL", "redis://:pw@cache:6379");
        jail.set_env("SWITCHBOARD_LOG_FORMAT", "json");
        jail.set_env("SWITCHBOARD_WORKERS", "3");
        jail.set_env("SWITCHBOARD_REDIS__CONNECTIONS", "8");
        jail.set_env("SWITCHBOARD_REDIS__CLUSTER", "true");
        jail.set_env("SWITCHBOARD_LIMITS__UPDATES_PER_MINUTE", "30");
        jail.set_env("SWITCHBOARD_TIMING__HELLO_TIMEOUT", "500ms");
        jail.set_env("SWITCHBOARD_WEBHOOKS__ALLOW_HTTP", "true");
        jail.set_env("SWITCHBOARD_WEBHOOKS__ALLOW_PRIVATE_DESTINATIONS", "true");
        jail.set_env("SWITCHBOARD_WEBHOOKS__RETRY_MAX", "2m");
        jail.set_env("SWITCHBOARD_WEBHOOKS__MAX_CONCURRENT", "8");
        jail.set_env(
            "SWITCHBOARD_WEBHOOKS__SECRET_KEY",
            "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
        );
        let s = jailed(load(None, &Overrides::default()))?;
        assert_eq!(s.bind, "10.0.0.1:9000");
        assert_eq!(s.bootstrap.as_deref(), Some(Path::new("seed.toml")));
        assert_eq!(s.replay_window, Duration::from_secs(120));
        assert_eq!(s.admin_token.as_deref(), Some("12345"));
        assert_eq!(s.store, StoreKind::Redis);
        assert_eq!(s.redis.url, "redis://:pw@cache:6379");
        assert_eq!(s.log_format, LogFormat::Json);
        assert_eq!(s.workers, Some(3));
        assert_eq!(s.redis.connections, 8);
        assert!(s.redis.cluster);
        assert_eq!(s.limits.updates_per_minute, 30);
        assert_eq!(s.timing.hello_timeout, Duration::from_millis(500));
        assert!(s.webhooks.allow_http);
        assert!(s.webhooks.allow_private_destinations);
        assert_eq!(s.webhooks.retry_max, Duration::from_secs(120));
        assert_eq!(s.webhooks.max_concurrent, 8);
        assert_eq!(
            s.webhooks.secret_key.as_deref(),
            Some("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
        );
        Ok(())
    });
}

#[test]
fn canonical_redis_url_variable_wins_over_the_alias() {
    Jail::expect_with(|jail| {
        jail.set_env("SWITCHBOARD_REDIS_URL", "redis://alias:6379");
        jail.set_env("SWITCHBOARD_REDIS__URL", "redis://canonical:6379");
        let s = jailed(load(None, &Overrides::default()))?;
        assert_eq!(s.redis.url, "redis://canonical:6379");
        Ok(())
    });
}

#[test]
fn stray_switchboard_variables_are_ignored() {
    Jail::expect_with(|jail| {
        jail.set_env("SWITCHBOARD_CONFIG", "elsewhere.toml");
        jail.set_env("SWITCHBOARD_LOG", "debug");
        jail.set_env("SWITCHBOARD_SOMETHING_ELSE", "1");
        jail.set_env("SWITCHBOARDX", "1");
        // Empty counts as unset (e.g. `SWITCHBOARD_ADMIN_TOKEN=${UNSET}` in compose).
        jail.set_env("SWITCHBOARD_ADMIN_TOKEN", "");
        jail.set_env("SWITCHBOARD_BIND", "");
        let s = jailed(load(None, &Overrides::default()))?;
        assert_eq!(s, Settings::default());
        Ok(())
    });
}

#[test]
fn unknown_nested_environment_key_is_an_error_naming_the_variable() {
    Jail::expect_with(|jail| {
        jail.set_env("SWITCHBOARD_TIMING__HELO_TIMEOUT", "3s");
        let error = load_err(None, &Overrides::default());
        assert_eq!(error.key(), Some("timing.helo_timeout"));
        let message = error.to_string();
        assert!(
            message.contains("SWITCHBOARD_TIMING__HELO_TIMEOUT"),
            "{message}"
        );
        Ok(())
    });
}

#[test]
fn single_underscore_nesting_is_an_error_not_silently_ignored() {
    Jail::expect_with(|jail| {
        jail.set_env("SWITCHBOARD_LIMITS_UPDATES_PER_MINUTE", "30");
        let error = load_err(None, &Overrides::default());
        assert!(matches!(error, ConfigError::UnknownKey { .. }), "{error}");
        assert!(
            error
                .to_string()
                .contains("SWITCHBOARD_LIMITS_UPDATES_PER_MINUTE"),
            "{error}"
        );
        Ok(())
    });
}

#[test]
fn bad_environment_value_names_key_and_variable() {
    Jail::expect_with(|jail| {
        jail.set_env("SWITCHBOARD_LIMITS__UPDATES_PER_MINUTE", "lots");
        let error = load_err(None, &Overrides::default());
        assert_eq!(error.key(), Some("limits.updates_per_minute"));
        assert!(error
            .to_string()
            .contains("SWITCHBOARD_LIMITS__UPDATES_PER_MINUTE"));
        Ok(())
    });
}

#[test]
fn zero_duration_from_environment_is_an_error_naming_key_and_variable() {
    Jail::expect_with(|jail| {
        jail.set_env("SWITCHBOARD_TIMING__HELLO_TIMEOUT", "0s");
        let error = load_err(None, &Overrides::default());
        assert_eq!(error.key(), Some("timing.hello_timeout"));
        let message = error.to_string();
        assert!(message.contains("`timing.hello_timeout`"), "{message}");
        assert!(
            message.contains("SWITCHBOARD_TIMING__HELLO_TIMEOUT"),
            "{message}"
        );
        Ok(())
    });
}

#[test]
fn bad_webhook_secret_key_from_environment_names_key_and_variable_not_value() {
    Jail::expect_with(|jail| {
        jail.set_env("SWITCHBOARD_WEBHOOKS__SECRET_KEY", "dG9vLXNob3J0LWtleQ==");
        let error = load_err(None, &Overrides::default());
        assert_eq!(error.key(), Some("webhooks.secret_key"));
        let message = error.to_string();
        assert!(
            message.contains("SWITCHBOARD_WEBHOOKS__SECRET_KEY"),
            "{message}"
        );
        assert!(!message.contains("dG9vLXNob3J0LWtleQ=="), "{message}");
        Ok(())
    });
}

#[test]
fn config_check_masks_the_webhook_secret_key() {
    Jail::expect_with(|jail| {
        let key = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
        jail.set_env("SWITCHBOARD_WEBHOOKS__SECRET_KEY", key);
        let out = jailed(check(&CheckArgs {
            config: None,
            overrides: Overrides::default(),
        }))?;
        assert!(!out.contains(key), "{out}");
        assert!(out.contains(&format!("secret_key = \"{MASK}\"")), "{out}");
        Ok(())
    });
}

#[test]
fn unknown_key_in_file_names_key_and_file() {
    Jail::expect_with(|jail| {
        jail.create_file("typo.toml", "[limits]\nupdates_per_minit = 5\n")?;
        let error = load_err(Some("typo.toml"), &Overrides::default());
        assert_eq!(error.key(), Some("limits.updates_per_minit"));
        let message = error.to_string();
        assert!(message.contains("`limits.updates_per_minit`"), "{message}");
        assert!(message.contains("typo.toml"), "{message}");
        assert!(
            message.contains("updates_per_minute"),
            "lists the valid keys: {message}"
        );

        jail.create_file("top.toml", "colour = \"blue\"\n")?;
        let error = load_err(Some("top.toml"), &Overrides::default());
        assert_eq!(error.key(), Some("colour"));
        Ok(())
    });
}

#[test]
fn out_of_range_values_in_file_name_key_and_file() {
    Jail::expect_with(|jail| {
        for (body, key) in [
            ("[timing]\nmissed_pongs = 0\n", "timing.missed_pongs"),
            ("[timing]\nhello_timeout = \"0s\"\n", "timing.hello_timeout"),
            (
                "[timing]\nupdates_wait_max = \"31m\"\n",
                "timing.updates_wait_max",
            ),
            (
                "[limits]\nupdates_per_minute = 0\n",
                "limits.updates_per_minute",
            ),
            ("workers = 0\n", "workers"),
            ("store = \"postgres\"\n", "store"),
            ("replay_window = \"soon\"\n", "replay_window"),
            ("[limits]\nmax_body_bytes = -1\n", "limits.max_body_bytes"),
        ] {
            jail.create_file("bad.toml", body)?;
            let error = load_err(Some("bad.toml"), &Overrides::default());
            assert_eq!(error.key(), Some(key), "{body}: {error}");
            let message = error.to_string();
            assert!(message.contains(&format!("`{key}`")), "{message}");
            assert!(message.contains("bad.toml"), "{message}");
        }

        jail.create_file("store.toml", "store = \"postgres\"\n")?;
        let message = load_err(Some("store.toml"), &Overrides::default()).to_string();
        assert!(
            message.contains("unknown value `postgres`, expected `memory` or `redis`"),
            "{message}"
        );
        Ok(())
    });
}

#[test]
fn json_config_file_works() {
    Jail::expect_with(|jail| {
        jail.create_file(
            "sb.json",
            r#"{
                "bind": "0.0.0.0:7000",
                "store": "redis",
                "redis": { "url": "redis://r:6379", "connections": 4 },
                "limits": { "max_connections": 10 },
                "timing": { "typing_ttl": "7s" }
            }"#,
        )?;
        let s = jailed(load(Some(Path::new("sb.json")), &Overrides::default()))?;
        assert_eq!(s.bind, "0.0.0.0:7000");
        assert_eq!(s.store, StoreKind::Redis);
        assert_eq!(s.redis.connections, 4);
        assert_eq!(s.limits.max_connections, 10);
        assert_eq!(s.timing.typing_ttl, Duration::from_secs(7));

        jail.create_file("bad.json", r#"{ "timing": { "typing_tt": "7s" } }"#)?;
        let error = load_err(Some("bad.json"), &Overrides::default());
        assert_eq!(error.key(), Some("timing.typing_tt"));
        assert!(error.to_string().contains("bad.json"), "{error}");
        Ok(())
    });
}

#[test]
fn missing_or_unsupported_config_file_is_an_error_naming_it() {
    Jail::expect_with(|jail| {
        let error = load_err(Some("absent.toml"), &Overrides::default());
        assert!(matches!(error, ConfigError::ReadFile { .. }), "{error}");
        assert!(error.to_string().contains("absent.toml"), "{error}");

        jail.create_file("sb.yaml", "bind: x")?;
        let error = load_err(Some("sb.yaml"), &Overrides::default());
        assert!(
            matches!(error, ConfigError::UnsupportedFormat { .. }),
            "{error}"
        );
        assert!(error.to_string().contains("sb.yaml"), "{error}");

        jail.create_file("broken.toml", "bind = \n")?;
        let error = load_err(Some("broken.toml"), &Overrides::default());
        assert!(error.to_string().contains("broken.toml"), "{error}");
        Ok(())
    });
}

#[test]
fn flag_errors_name_the_flag() {
    Jail::expect_with(|_| {
        let flags = Overrides {
            replay_window: Some(Duration::ZERO),
            ..Overrides::default()
        };
        let error = load_err(None, &flags);
        assert_eq!(error.key(), Some("replay_window"));
        assert!(error.to_string().contains("--replay-window"), "{error}");
        Ok(())
    });
}

#[test]
fn cli_parses_serve_and_config_check() {
    Jail::expect_with(|jail| {
        let cli = Cli::try_parse_from([
            "switchboard",
            "serve",
            "--config",
            "sb.toml",
            "--bind",
            "0.0.0.0:9",
            "--store",
            "redis",
            "--redis-url",
            "redis://h:1",
            "--bootstrap",
            "seed.toml",
            "--admin-token",
            "tok",
            "--replay-window",
            "15m",
            "--log-format",
            "json",
            "--workers",
            "2",
            "--redis-cluster",
        ])
        .map_err(|e| e.to_string())?;
        let Command::Serve(args) = cli.command else {
            panic!("expected serve");
        };
        assert_eq!(args.config.as_deref(), Some(Path::new("sb.toml")));
        let o = &args.overrides;
        assert_eq!(o.bind.as_deref(), Some("0.0.0.0:9"));
        assert_eq!(o.store, Some(StoreKind::Redis));
        assert_eq!(o.redis_url.as_deref(), Some("redis://h:1"));
        assert_eq!(o.bootstrap.as_deref(), Some(Path::new("seed.toml")));
        assert_eq!(o.admin_token.as_deref(), Some("tok"));
        assert_eq!(o.replay_window, Some(Duration::from_secs(900)));
        assert_eq!(o.log_format, Some(LogFormat::Json));
        assert_eq!(o.workers, Some(2));
        assert_eq!(o.redis_cluster, Some(true));
        assert!(!format!("{o:?}").contains("tok\""), "Debug masks the token");
        let cli = Cli::try_parse_from(["switchboard", "serve", "--redis-cluster=false"])
            .map_err(|e| e.to_string())?;
        let Command::Serve(args) = cli.command else {
            panic!("expected serve");
        };
        assert_eq!(args.overrides.redis_cluster, Some(false));
        let flags = Overrides {
            redis_cluster: Some(true),
            redis_url: Some("redis://a:1,redis://b:2".into()),
            ..Overrides::default()
        };
        let s = jailed(load(None, &flags))?;
        assert!(s.redis.cluster);
        assert_eq!(s.redis.seeds(), ["redis://a:1", "redis://b:2"]);

        // --config also comes from SWITCHBOARD_CONFIG.
        jail.set_env("SWITCHBOARD_CONFIG", "from-env.json");
        let cli =
            Cli::try_parse_from(["switchboard", "config", "check"]).map_err(|e| e.to_string())?;
        let Command::Config {
            command: ConfigCommand::Check(args),
        } = cli.command
        else {
            panic!("expected config check");
        };
        assert_eq!(args.config.as_deref(), Some(Path::new("from-env.json")));

        assert!(Cli::try_parse_from(["switchboard", "serve", "--replay-window", "soon"]).is_err());
        assert!(Cli::try_parse_from(["switchboard", "serve", "--store", "postgres"]).is_err());
        Ok(())
    });
}

#[test]
fn cli_definition_is_consistent() {
    use clap::CommandFactory;
    Cli::command().debug_assert();
}

#[test]
fn config_check_prints_masked_effective_settings() {
    Jail::expect_with(|jail| {
        jail.create_file("sb.toml", "[limits]\nmax_connections = 7\n")?;
        jail.set_env("SWITCHBOARD_ADMIN_TOKEN", "very-secret");
        jail.set_env("SWITCHBOARD_REDIS_URL", "redis://user:hunter2@r:6379");
        let args = CheckArgs {
            config: Some("sb.toml".into()),
            overrides: Overrides {
                bind: Some("0.0.0.0:1".into()),
                ..Overrides::default()
            },
        };
        let out = jailed(check(&args))?;
        assert!(!out.contains("very-secret"), "{out}");
        assert!(!out.contains("hunter2"), "{out}");
        assert!(out.contains(&format!("admin_token = \"{MASK}\"")), "{out}");
        assert!(out.contains("max_connections = 7"), "{out}");
        assert!(out.contains("bind = \"0.0.0.0:1\""), "{out}");

        // The output is itself a valid config file (with secrets masked).
        jail.create_file("effective.toml", &out)?;
        let reloaded = jailed(load(
            Some(Path::new("effective.toml")),
            &Overrides::default(),
        ))?;
        assert_eq!(reloaded.limits.max_connections, 7);

        // And a bad setting is an error, not output.
        jail.set_env("SWITCHBOARD_TIMING__MISSED_PONGS", "0");
        let error = check(&args).unwrap_err();
        assert_eq!(error.key(), Some("timing.missed_pongs"));
        Ok(())
    });
}

#[test]
fn trusted_proxies_load_from_a_file_list_or_a_comma_separated_variable() {
    Jail::expect_with(|jail| {
        jail.create_file(
            "sb.toml",
            r#"
            [proxy]
            trusted = ["10.0.0.0/8", "127.0.0.1", "::1"]
            client_header = "forwarded"
            "#,
        )?;
        let s = jailed(load(Some(Path::new("sb.toml")), &Overrides::default()))?;
        let nets: Vec<String> = s.proxy.trusted.iter().map(|n| n.to_string()).collect();
        assert_eq!(nets, ["10.0.0.0/8", "127.0.0.1/32", "::1/128"]);
        assert_eq!(
            s.proxy.client_header,
            switchboard_config::ClientHeader::Forwarded
        );
        assert!(s.proxy.trusts("10.1.2.3".parse().unwrap()));
        assert!(s.proxy.trusts("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!s.proxy.trusts("192.168.0.1".parse().unwrap()));

        jail.set_env("SWITCHBOARD_PROXY__TRUSTED", "192.168.0.0/16, 172.16.0.1");
        let s = jailed(load(None, &Overrides::default()))?;
        let nets: Vec<String> = s.proxy.trusted.iter().map(|n| n.to_string()).collect();
        assert_eq!(nets, ["192.168.0.0/16", "172.16.0.1/32"]);
        Ok(())
    });
}

#[test]
fn a_trusted_proxy_that_is_no_address_is_an_error_naming_the_key() {
    Jail::expect_with(|jail| {
        jail.set_env("SWITCHBOARD_PROXY__TRUSTED", "10.0.0.0/8,nginx");
        let message = load_err(None, &Overrides::default()).to_string();
        assert!(message.contains("proxy.trusted"), "{message}");
        assert!(
            message.contains("\"nginx\" is not an IP address"),
            "{message}"
        );
        Ok(())
    });
}
