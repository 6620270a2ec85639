//! Benchmark harness for Switchboard and its peers. See `BENCHMARKS.md` at
//! the repository root for the scenarios, the commands and the results.

pub mod admin;
pub mod churn;
pub mod procstat;
pub mod runner;
pub mod scenario;
pub mod server;
pub mod soak;
pub mod stamp;
pub mod stats;
pub mod target;
pub mod webhooks;
