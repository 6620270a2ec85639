//! Logging set-up: human-readable lines by default, JSON with
//! `--log-format json`. Level from `RUST_LOG` (default [`DEFAULT_FILTER`]).

use switchboard_config::LogFormat;
use tracing_subscriber::EnvFilter;

/// The filter without `RUST_LOG`: `info`, but nothing from actix-http's
/// HTTP/1 dispatcher. It logs every request head a client could not
/// write (a bad header, too many headers) at ERROR as "stream error",
/// which lets any client raise error-level alerts at will (such clients
/// get their JSON 400, `malformed.rs`). `RUST_LOG` replaces the whole
/// filter.
pub const DEFAULT_FILTER: &str = "info,actix_http::h1::dispatcher=off";

/// Installs the global subscriber. Safe to call once per process.
pub fn init(format: LogFormat) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    // Colours only for a terminal: redirected logs stay plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}
