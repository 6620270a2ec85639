//! Settings of a Switchboard node and how they are loaded.
//!
//! This crate owns one type, [`Settings`], its documented defaults
//! (`config/default.toml`, compiled in), the layering that builds it
//! (defaults → `--config FILE` → `SWITCHBOARD_*` environment → flags), its
//! validation, and the command line that selects it ([`Cli`]). It knows
//! nothing of actix, the store or the wire protocol beyond the numbers the
//! protocol fixes; the crates that use a setting decide what it does.
//!
//! ```no_run
//! use clap::Parser;
//! use switchboard_config::{Cli, Command, ConfigCommand};
//!
//! match Cli::parse().command {
//!     Command::Serve(args) => {
//!         let settings = args.load().unwrap_or_else(|e| panic!("{e}"));
//!         // … start the gateway with `settings`
//!     }
//!     Command::Config { command: ConfigCommand::Check(args) } => {
//!         match switchboard_config::check(&args) {
//!             Ok(toml) => print!("{toml}"),
//!             Err(e) => { eprintln!("error: {e}"); std::process::exit(1) }
//!         }
//!     }
//! }
//! ```

#![warn(missing_docs)]

mod cli;
mod env;
mod error;
mod proxy;
mod settings;
mod validate;

use std::path::Path;

use figment::providers::{Format, Json, Toml};
use figment::value::{Dict, Map};
use figment::{Figment, Metadata, Profile, Provider};

pub use crate::cli::{CheckArgs, Cli, Command, ConfigCommand, Overrides, ServeArgs};
pub use crate::env::{ignored_vars, ENV_PREFIX};
pub use crate::error::ConfigError;
pub use crate::proxy::{canonical, parse_net, ClientHeader, ProxySettings};
pub use crate::settings::{
    mask_url_password, split_urls, FileBackend, FileSettings, Limits, LogFormat, PairingSettings,
    RedisSettings, RoomsSettings, S3Settings, Settings, StoreKind, Timing, WebhookSettings,
    DEFAULT_TOML, FILE_HARD_CAP_BYTES, MASK,
};
pub use crate::validate::{UPDATES_WAIT_CEILING, UPDATES_WAIT_FLOOR, WEBHOOK_SECRET_KEY_BYTES};

/// Builds the settings from every layer, lowest first — the embedded
/// `default.toml`, `config_file` (TOML or JSON by extension), the
/// `SWITCHBOARD_*` environment, `overrides` — and validates them.
///
/// `SWITCHBOARD_CONFIG` is not read here: the CLI turns it into
/// `config_file` (`--config`).
///
/// # Errors
///
/// [`ConfigError`] naming the key and the layer that set it, or the file.
pub fn load(config_file: Option<&Path>, overrides: &Overrides) -> Result<Settings, ConfigError> {
    let figment = figment(config_file, overrides)?;
    // Lossy: environment values are strings, and "20" must fill a number.
    let settings: Settings = figment.extract_lossy().map_err(ConfigError::from_figment)?;
    settings
        .validate()
        .map_err(|error| error.with_origin_from(&figment))?;
    Ok(settings)
}

/// `switchboard config check`: the effective settings, secrets masked, as TOML.
///
/// # Errors
///
/// As [`load`].
pub fn check(args: &CheckArgs) -> Result<String, ConfigError> {
    let settings = load(args.config.as_deref(), &args.overrides)?;
    Ok(settings.masked().to_toml())
}

impl ServeArgs {
    /// [`load`] with this command line's `--config` and flags.
    ///
    /// # Errors
    ///
    /// As [`load`].
    pub fn load(&self) -> Result<Settings, ConfigError> {
        load(self.config.as_deref(), &self.overrides)
    }
}

impl CheckArgs {
    /// [`load`] with this command line's `--config` and flags.
    ///
    /// # Errors
    ///
    /// As [`load`].
    pub fn load(&self) -> Result<Settings, ConfigError> {
        load(self.config.as_deref(), &self.overrides)
    }
}

fn figment(config_file: Option<&Path>, overrides: &Overrides) -> Result<Figment, ConfigError> {
    let mut figment = Figment::from(Defaults);
    if let Some(path) = config_file {
        figment = match file_format(path)? {
            FileFormat::Toml => figment.merge(Toml::file_exact(path)),
            FileFormat::Json => figment.merge(Json::file_exact(path)),
        };
    }
    Ok(figment
        .merge(env::EnvLayer::from_process())
        .merge(cli::FlagLayer(overrides)))
}

enum FileFormat {
    Toml,
    Json,
}

/// The format of a `--config` file, after checking that it can be opened
/// (figment would silently treat a missing file as empty).
fn file_format(path: &Path) -> Result<FileFormat, ConfigError> {
    let extension = path
        .extension()
        .and_then(|extension| extension.to_str())
        .map(str::to_ascii_lowercase);
    let format = match extension.as_deref() {
        Some("toml") => FileFormat::Toml,
        Some("json") => FileFormat::Json,
        _ => {
            return Err(ConfigError::UnsupportedFormat {
                path: path.to_owned(),
            })
        }
    };
    std::fs::File::open(path).map_err(|source| ConfigError::ReadFile {
        path: path.to_owned(),
        source,
    })?;
    Ok(format)
}

/// The lowest layer: the embedded `default.toml`, named as such in errors.
struct Defaults;

impl Provider for Defaults {
    fn metadata(&self) -> Metadata {
        Metadata::named("built-in defaults")
            .interpolater(|_: &Profile, _: &[&str]| "built-in defaults".to_owned())
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        Toml::string(DEFAULT_TOML).data()
    }
}
