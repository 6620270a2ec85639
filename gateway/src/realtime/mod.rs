//! The realtime transports: `/ws` and `/updates`, sharing one cursor.

pub mod inbound;
pub mod open;
pub mod outbound;
pub mod updates;
pub mod ws;
