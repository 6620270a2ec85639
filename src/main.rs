//! The `switchboard` binary: `switchboard serve` runs the gateway,
//! `switchboard config check` validates and prints the effective settings.

use clap::Parser;

/// jemalloc rather than glibc malloc: actix-http keeps an 8 KiB read and an
/// 8 KiB write buffer per connection, and jemalloc's page-aligned size
/// classes leave their unwritten pages out of RSS (glibc's chunk headers
/// touch them); memory freed after a reconnect storm goes back to the OS.
/// mimalloc measured worse here (BENCHMARKS.md, "Allocator").
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
use switchboard_config::{check, Cli, Command, ConfigCommand};

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    // Before logging starts, so on stderr whatever the log format.
    for var in switchboard_config::ignored_vars() {
        eprintln!("warning: environment variable {var} is not a setting; ignored");
    }
    match cli.command {
        Command::Serve(args) => {
            let settings = match args.load() {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("error: {e}");
                    return std::process::ExitCode::from(2);
                }
            };
            switchboard_gateway::telemetry::init(settings.log_format);
            let system = actix_rt::System::new();
            match system.block_on(switchboard_gateway::serve(settings)) {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!(error = %e, "switchboard failed");
                    eprintln!("error: {e}");
                    // Exit without tearing the actix system down: actors a
                    // failed start left behind, never run, would be started
                    // by the teardown outside any reactor, and panic.
                    std::process::exit(1);
                }
            }
        }
        Command::Config {
            command: ConfigCommand::Check(args),
        } => match check(&args).and_then(|report| {
            // The bootstrap file is part of what `serve` would load: check it too.
            if let Some(path) = &args.load()?.bootstrap {
                if let Err(e) = switchboard_gateway::bootstrap::check_file(path) {
                    eprintln!("error: {e}");
                    std::process::exit(2);
                }
            }
            Ok(report)
        }) {
            Ok(report) => {
                print!("{report}");
                std::process::ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                std::process::ExitCode::from(2)
            }
        },
    }
}
