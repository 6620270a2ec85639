//! One session of each transport. Each `run` holds its connection until it
//! ends and says how ([`crate::listener::Ended`]); the listener's loop
//! decides what comes next.

pub mod sse;
pub mod updates;
pub mod ws;
