//! The command line: `switchboard serve [...]` and `switchboard config check [...]`.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use figment::value::{Dict, Map, Value};
use figment::{Error, Metadata, Profile, Provider};

use crate::settings::{mask_url_password, LogFormat, StoreKind, MASK};

/// `switchboard`: the command line of the gateway binary.
#[derive(Debug, clap::Parser)]
#[command(
    name = "switchboard",
    version,
    about = "Realtime gateway for the BayChat agent protocol"
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands of `switchboard`.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Run the gateway.
    Serve(ServeArgs),
    /// Inspect the settings.
    Config {
        /// What to do with them.
        #[command(subcommand)]
        command: ConfigCommand,
    },
}

/// The subcommands of `switchboard config`.
#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// Print the effective settings (secrets masked) as TOML and exit 0, or
    /// print the error naming the key and exit non-zero.
    Check(CheckArgs),
}

/// Arguments of `switchboard serve`.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct ServeArgs {
    /// Config file over the built-in defaults: TOML (*.toml) or JSON (*.json).
    #[arg(short = 'c', long, value_name = "FILE", env = "SWITCHBOARD_CONFIG")]
    pub config: Option<PathBuf>,
    /// Flags over the file and the environment.
    #[command(flatten)]
    pub overrides: Overrides,
}

/// Arguments of `switchboard config check`: the same as `serve`, so that
/// `check` shows exactly what `serve` would run with.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct CheckArgs {
    /// Config file over the built-in defaults: TOML (*.toml) or JSON (*.json).
    #[arg(short = 'c', long, value_name = "FILE", env = "SWITCHBOARD_CONFIG")]
    pub config: Option<PathBuf>,
    /// Flags over the file and the environment.
    #[command(flatten)]
    pub overrides: Overrides,
}

/// The settings that have a command-line flag: the highest layer. A `None`
/// leaves the lower layers' value.
///
/// `Debug` masks `admin_token` and the password in `redis_url`.
#[derive(Clone, Default, PartialEq, Eq, clap::Args)]
pub struct Overrides {
    /// Listener address, host:port [setting: bind].
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<String>,
    /// Storage engine [setting: store].
    #[arg(long, value_enum, value_name = "KIND")]
    pub store: Option<StoreKind>,
    /// Redis URL, used with --store redis; with --redis-cluster, seed URLs
    /// separated by commas [setting: redis.url].
    #[arg(long, value_name = "URL")]
    pub redis_url: Option<String>,
    /// Talk to a Redis Cluster (`--redis-cluster` or `--redis-cluster=false`)
    /// [setting: redis.cluster].
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true"
    )]
    pub redis_cluster: Option<bool>,
    /// File of Bays, participants and tokens to load at start-up [setting: bootstrap].
    #[arg(long, value_name = "FILE")]
    pub bootstrap: Option<PathBuf>,
    /// Bearer token of the admin API; prefer SWITCHBOARD_ADMIN_TOKEN, flags show in `ps`
    /// [setting: admin_token].
    #[arg(long, value_name = "TOKEN")]
    pub admin_token: Option<String>,
    /// How long events stay replayable, e.g. 15m [setting: replay_window].
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub replay_window: Option<Duration>,
    /// Log line format [setting: log_format].
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub log_format: Option<LogFormat>,
    /// actix-web worker threads; default one per CPU core [setting: workers].
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
}

impl fmt::Debug for Overrides {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Overrides")
            .field("bind", &self.bind)
            .field("store", &self.store)
            .field(
                "redis_url",
                &self.redis_url.as_deref().map(mask_url_password),
            )
            .field("redis_cluster", &self.redis_cluster)
            .field("bootstrap", &self.bootstrap)
            .field("admin_token", &self.admin_token.as_ref().map(|_| MASK))
            .field("replay_window", &self.replay_window)
            .field("log_format", &self.log_format)
            .field("workers", &self.workers)
            .finish()
    }
}

/// The flags as a figment layer; errors name the flag (`--replay-window`).
pub(crate) struct FlagLayer<'a>(pub(crate) &'a Overrides);

impl Provider for FlagLayer<'_> {
    fn metadata(&self) -> Metadata {
        Metadata::named("command line").interpolater(|_: &Profile, keys: &[&str]| {
            format!("command-line flag `--{}`", keys.join("-").replace('_', "-"))
        })
    }

    fn data(&self) -> Result<Map<Profile, Dict>, Error> {
        let o = self.0;
        let mut dict = Dict::new();
        let mut set = |path: &[&str], value: Value| {
            let path: Vec<String> = path.iter().map(|key| (*key).to_owned()).collect();
            crate::env::insert(&mut dict, &path, value);
        };
        if let Some(bind) = &o.bind {
            set(&["bind"], bind.clone().into());
        }
        if let Some(store) = o.store {
            set(&["store"], enum_name(store).into());
        }
        if let Some(url) = &o.redis_url {
            set(&["redis", "url"], url.clone().into());
        }
        if let Some(cluster) = o.redis_cluster {
            set(&["redis", "cluster"], cluster.into());
        }
        if let Some(bootstrap) = &o.bootstrap {
            let path = bootstrap.to_str().ok_or_else(|| {
                Error::from(format!(
                    "--bootstrap {} is not valid UTF-8",
                    bootstrap.display()
                ))
            })?;
            set(&["bootstrap"], path.to_owned().into());
        }
        if let Some(token) = &o.admin_token {
            set(&["admin_token"], token.clone().into());
        }
        if let Some(window) = o.replay_window {
            set(
                &["replay_window"],
                humantime::format_duration(window).to_string().into(),
            );
        }
        if let Some(format) = o.log_format {
            set(&["log_format"], enum_name(format).into());
        }
        if let Some(workers) = o.workers {
            set(&["workers"], workers.into());
        }
        Ok(Profile::Default.collect(dict))
    }
}

/// The serde name of a unit variant (`"redis"`).
fn enum_name<T: serde::Serialize>(value: T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        // Only called with StoreKind and LogFormat, whose variants are all unit variants.
        other => unreachable!("unit variant serializes to a string, got {other:?}"),
    }
}
