//! Benchmark harness for Switchboard and its peers. See `BENCHMARKS.md` at
//! the repository root for the scenarios, the commands and the results.

pub mod procstat;
pub mod runner;
pub mod scenario;
pub mod server;
pub mod stamp;
pub mod stats;
pub mod target;
pub mod webhooks;
