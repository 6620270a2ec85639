//! The one error type of this crate.

use std::path::PathBuf;

use figment::error::Kind;
use figment::Figment;

/// Why settings could not be loaded. Every message names the key (dotted,
/// e.g. `timing.hello_timeout`) or the file, and where known the layer that
/// set the value (`origin`: a file, an environment variable or a flag).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The `--config` file could not be opened.
    #[error("cannot read config file `{}`: {source}", path.display())]
    ReadFile {
        /// The file as given.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },

    /// The `--config` file's extension is neither `.toml` nor `.json`.
    #[error("config file `{}` must end in .toml or .json", path.display())]
    UnsupportedFormat {
        /// The file as given.
        path: PathBuf,
    },

    /// A key that is not a setting (every struct denies unknown fields).
    #[error("unknown setting `{key}`{}; expected {expected}", in_origin(origin))]
    UnknownKey {
        /// Dotted path of the unknown key.
        key: String,
        /// The settings allowed at that level, as a readable list.
        expected: String,
        /// Where it came from.
        origin: Option<String>,
    },

    /// A value of the wrong type or out of range.
    #[error("invalid setting `{key}`{}: {message}", in_origin(origin))]
    Invalid {
        /// Dotted path of the key.
        key: String,
        /// What is wrong and what is allowed.
        message: String,
        /// Where the value came from; `None` from [`crate::Settings::validate`] alone.
        origin: Option<String>,
    },

    /// A source that could not be parsed as a whole (e.g. TOML syntax error).
    #[error("{}{message}", origin.as_ref().map(|o| format!("{o}: ")).unwrap_or_default())]
    Source {
        /// The parser's message.
        message: String,
        /// The source.
        origin: Option<String>,
    },
}

fn in_origin(origin: &Option<String>) -> String {
    match origin {
        Some(origin) => format!(" (from {origin})"),
        None => String::new(),
    }
}

impl ConfigError {
    /// The dotted key the error is about, if it is about one.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::UnknownKey { key, .. } | ConfigError::Invalid { key, .. } => Some(key),
            ConfigError::ReadFile { .. }
            | ConfigError::UnsupportedFormat { .. }
            | ConfigError::Source { .. } => None,
        }
    }

    /// An out-of-range value found by [`crate::Settings::validate`].
    pub(crate) fn invalid(key: &str, message: impl Into<String>) -> Self {
        ConfigError::Invalid {
            key: key.to_owned(),
            message: message.into(),
            origin: None,
        }
    }

    /// Adds the layer that set `key` (looked up in the figment) to a
    /// validation error.
    pub(crate) fn with_origin_from(self, figment: &Figment) -> Self {
        match self {
            ConfigError::Invalid {
                key,
                message,
                origin: None,
            } => {
                let origin = figment.find_metadata(&key).map(|metadata| {
                    let path: Vec<&str> = key.split('.').collect();
                    describe(metadata, &figment::Profile::Default, &path)
                });
                ConfigError::Invalid {
                    key,
                    message,
                    origin,
                }
            }
            other => other,
        }
    }

    /// Converts figment's error (the first one, when there are several).
    pub(crate) fn from_figment(error: figment::Error) -> Self {
        let origin = error.metadata.as_ref().map(|metadata| {
            let profile = error.profile.clone().unwrap_or_default();
            describe(metadata, &profile, &error.path)
        });
        let mut path = error.path.clone();
        match error.kind {
            Kind::UnknownField(field, expected) => {
                // figment already put the unknown field at the end of the path.
                if path.last() != Some(&field) {
                    path.push(field);
                }
                ConfigError::UnknownKey {
                    key: path.join("."),
                    expected: one_of(expected),
                    origin,
                }
            }
            Kind::MissingField(field) => {
                path.push(field.into_owned());
                ConfigError::Invalid {
                    key: path.join("."),
                    message: "missing".to_owned(),
                    origin,
                }
            }
            kind if !path.is_empty() => {
                let key = path.join(".");
                let message = match kind {
                    // Never echo a secret's value.
                    Kind::InvalidType(_, expected) | Kind::InvalidValue(_, expected)
                        if SECRET_KEYS.contains(&key.as_str()) =>
                    {
                        format!("invalid value: expected {expected}")
                    }
                    Kind::UnknownVariant(found, expected) => {
                        format!("unknown value `{found}`, expected {}", one_of(expected))
                    }
                    kind => kind.to_string(),
                };
                ConfigError::Invalid {
                    key,
                    message,
                    origin,
                }
            }
            kind => ConfigError::Source {
                message: kind.to_string().trim_end().to_owned(),
                origin,
            },
        }
    }
}

/// Keys whose values are secrets.
const SECRET_KEYS: [&str; 3] = ["admin_token", "redis.url", "webhooks.secret_key"];

/// "TOML file `x.toml`", "environment variable `SWITCHBOARD_BIND`",
/// "command-line flag `--bind`", "built-in defaults".
fn describe<K: AsRef<str>>(
    metadata: &figment::Metadata,
    profile: &figment::Profile,
    path: &[K],
) -> String {
    match &metadata.source {
        Some(figment::Source::File(file)) => {
            format!("{} `{}`", metadata.name, file.display())
        }
        _ if !path.is_empty() => metadata.interpolate(profile, path),
        _ => metadata.name.to_string(),
    }
}

fn one_of(names: &[&str]) -> String {
    match names {
        [] => "no settings here".to_owned(),
        [one] => format!("`{one}`"),
        [first, second] => format!("`{first}` or `{second}`"),
        many => {
            let quoted: Vec<String> = many.iter().map(|name| format!("`{name}`")).collect();
            format!("one of {}", quoted.join(", "))
        }
    }
}
