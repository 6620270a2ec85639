//! The environment layer: `SWITCHBOARD_*` variables.
//!
//! Which variables are read:
//!
//! - `SWITCHBOARD_<KEY>` for a top-level setting (`SWITCHBOARD_BIND`,
//!   `SWITCHBOARD_REPLAY_WINDOW`, …), a double underscore for nesting
//!   (`SWITCHBOARD_TIMING__HELLO_TIMEOUT` → `timing.hello_timeout`).
//!   The prefix is matched without regard to case; the rest is lowercased.
//! - `SWITCHBOARD_REDIS_URL`, an alias of `SWITCHBOARD_REDIS__URL`
//!   (`redis.url`). When both are set, `SWITCHBOARD_REDIS__URL` wins.
//!
//! Which are errors and which are ignored:
//!
//! - A variable whose first segment names a setting or starts with a section
//!   name and `_` (`SWITCHBOARD_TIMING__HELO_TIMEOUT`,
//!   `SWITCHBOARD_LIMITS_UPDATES_PER_MINUTE` with a single underscore) is
//!   clearly meant for these settings, so an unknown key there is an error
//!   naming the variable, exactly like an unknown key in a file.
//! - Every other `SWITCHBOARD_*` variable is ignored: `SWITCHBOARD_CONFIG`
//!   (read by the CLI for `--config`) and names other tools may use. A
//!   misspelt top-level setting (`SWITCHBOARD_ACTOR_THRADS`) lands here
//!   too, so the binary warns about each ([`ignored_vars`]).
//!
//! An empty value counts as unset (as `VAR=` from a shell or compose file
//! with an unset substitution usually means). Values are taken as strings; numbers are read from them when the setting
//! is a number (figment's lossy extraction), so a token or URL of digits
//! stays a string.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::sync::Arc;

use figment::value::{Dict, Map, Value};
use figment::{Error, Metadata, Profile, Provider};

/// Prefix of every environment variable read.
pub const ENV_PREFIX: &str = "SWITCHBOARD_";

/// The top-level keys of [`crate::Settings`] (a test keeps this in step).
pub(crate) const TOP_LEVEL_KEYS: [&str; 18] = [
    "bind",
    "store",
    "redis",
    "bootstrap",
    "admin_token",
    "log_format",
    "workers",
    "actor_threads",
    "replay_window",
    "replay_max_entries",
    "limits",
    "timing",
    "webhooks",
    "public_url",
    "pairing",
    "rooms",
    "files",
    "proxy",
];

/// The top-level keys that are tables.
const SECTIONS: [&str; 8] = [
    "redis", "limits", "timing", "webhooks", "pairing", "rooms", "files", "proxy",
];

/// A snapshot of the `SWITCHBOARD_*` variables that are settings.
#[derive(Clone, Debug)]
pub(crate) struct EnvLayer {
    /// Sorted by variable name, so that a later entry for the same key wins
    /// deterministically (`…REDIS_URL` < `…REDIS__URL`).
    entries: Vec<Entry>,
}

#[derive(Clone, Debug)]
struct Entry {
    var: String,
    path: Vec<String>,
    /// `None` when the value is not valid UTF-8.
    value: Option<String>,
}

impl EnvLayer {
    /// Reads the process environment now.
    pub(crate) fn from_process() -> Self {
        Self::from_vars(std::env::vars_os())
    }

    /// Keeps the variables of `vars` that are settings.
    pub(crate) fn from_vars(vars: impl IntoIterator<Item = (OsString, OsString)>) -> Self {
        let mut entries: Vec<Entry> = vars
            .into_iter()
            .filter_map(|(name, value)| {
                // A name that is not UTF-8 cannot be one of ours.
                let var = name.into_string().ok()?;
                let path = key_path(&var)?;
                if value.is_empty() {
                    return None;
                }
                Some(Entry {
                    var,
                    path,
                    value: value.into_string().ok(),
                })
            })
            .collect();
        entries.sort_by(|a, b| a.var.cmp(&b.var));
        EnvLayer { entries }
    }
}

/// The `SWITCHBOARD_*` variables of the process environment that set
/// nothing (see the module docs), `SWITCHBOARD_CONFIG` excepted, sorted:
/// for a warning, since a misspelt top-level setting is one of them.
pub fn ignored_vars() -> Vec<String> {
    let mut out: Vec<String> = std::env::vars_os()
        .filter_map(|(name, _)| name.into_string().ok())
        .filter(|var| {
            var.get(..ENV_PREFIX.len())
                .is_some_and(|p| p.eq_ignore_ascii_case(ENV_PREFIX))
                && !var.eq_ignore_ascii_case("SWITCHBOARD_CONFIG")
                && key_path(var).is_none()
        })
        .collect();
    out.sort();
    out
}

/// The dotted path a variable sets, or `None` when it is not a setting.
fn key_path(var: &str) -> Option<Vec<String>> {
    let prefix = var.get(..ENV_PREFIX.len())?;
    if !prefix.eq_ignore_ascii_case(ENV_PREFIX) {
        return None;
    }
    let rest = var[ENV_PREFIX.len()..].to_ascii_lowercase();
    if rest == "redis_url" {
        return Some(vec!["redis".to_owned(), "url".to_owned()]);
    }
    let path: Vec<String> = rest.split("__").map(str::to_owned).collect();
    let first = path[0].as_str();
    let ours = TOP_LEVEL_KEYS.contains(&first)
        || SECTIONS.iter().any(|section| {
            first
                .strip_prefix(section)
                .is_some_and(|r| r.starts_with('_'))
        });
    ours.then_some(path)
}

impl Provider for EnvLayer {
    fn metadata(&self) -> Metadata {
        let vars: Arc<BTreeMap<String, String>> = Arc::new(
            self.entries
                .iter()
                .map(|entry| (entry.path.join("."), entry.var.clone()))
                .collect(),
        );
        Metadata::named("environment").interpolater(move |_: &Profile, keys: &[&str]| {
            let var = vars
                .get(&keys.join("."))
                .cloned()
                .unwrap_or_else(|| format!("{ENV_PREFIX}{}", keys.join("__").to_ascii_uppercase()));
            format!("environment variable `{var}`")
        })
    }

    fn data(&self) -> Result<Map<Profile, Dict>, Error> {
        let mut dict = Dict::new();
        for entry in &self.entries {
            let value = entry.value.clone().ok_or_else(|| {
                Error::from(format!(
                    "environment variable `{}` is not valid UTF-8",
                    entry.var
                ))
            })?;
            insert(&mut dict, &entry.path, Value::from(value));
        }
        Ok(Profile::Default.collect(dict))
    }
}

/// Sets `path` in `dict` to `value`, creating (or replacing non-table values
/// with) tables on the way.
pub(crate) fn insert(dict: &mut Dict, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut current = dict;
    for key in parents {
        let slot = current
            .entry(key.clone())
            .or_insert_with(|| Value::from(Dict::new()));
        if !matches!(slot, Value::Dict(..)) {
            *slot = Value::from(Dict::new());
        }
        current = match slot {
            Value::Dict(_, inner) => inner,
            _ => unreachable!("slot was just made a table"),
        };
    }
    current.insert(last.clone(), value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_paths() {
        let path = |var: &str| key_path(var).map(|p| p.join("."));
        assert_eq!(path("SWITCHBOARD_BIND").as_deref(), Some("bind"));
        assert_eq!(path("switchboard_bind").as_deref(), Some("bind"));
        assert_eq!(path("SWITCHBOARD_REDIS_URL").as_deref(), Some("redis.url"));
        assert_eq!(path("SWITCHBOARD_REDIS__URL").as_deref(), Some("redis.url"));
        assert_eq!(
            path("SWITCHBOARD_TIMING__HELLO_TIMEOUT").as_deref(),
            Some("timing.hello_timeout")
        );
        assert_eq!(
            path("SWITCHBOARD_LIMITS_UPDATES_PER_MINUTE").as_deref(),
            Some("limits_updates_per_minute")
        );
        assert_eq!(
            path("SWITCHBOARD_WEBHOOKS__ALLOW_HTTP").as_deref(),
            Some("webhooks.allow_http")
        );
        assert_eq!(
            path("SWITCHBOARD_WEBHOOKS_ALLOW_HTTP").as_deref(),
            Some("webhooks_allow_http")
        );
        assert_eq!(path("SWITCHBOARD_CONFIG"), None);
        assert_eq!(path("SWITCHBOARD_LOG"), None);
        assert_eq!(path("SWITCHBOARD_"), None);
        assert_eq!(path("SWITCH"), None);
        assert_eq!(path("OTHER_BIND"), None);
        assert_eq!(path("SWITCHBOARDÉ_BIND"), None);
    }

    #[test]
    fn top_level_keys_match_the_settings_fields() {
        let full = crate::Settings {
            bootstrap: Some("b".into()),
            admin_token: Some("t".into()),
            workers: Some(1),
            public_url: Some("https://chat.example".into()),
            ..crate::Settings::default()
        };
        let table: toml::Table = toml::from_str(&full.to_toml()).expect("to_toml parses");
        let mut fields: Vec<&str> = table.keys().map(String::as_str).collect();
        let mut keys = TOP_LEVEL_KEYS.to_vec();
        fields.sort_unstable();
        keys.sort_unstable();
        assert_eq!(fields, keys);
        for section in SECTIONS {
            assert!(table[section].is_table(), "{section}");
        }
    }
}
