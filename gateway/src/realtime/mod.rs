//! The realtime transports: `/ws`, `/events` (SSE) and `/updates`, sharing
//! one cursor and one session per token.

pub mod front;
pub mod inbound;
pub mod open;
pub mod outbound;
pub mod socket;
pub mod sse;
pub mod updates;
pub mod upgrade;
pub mod ws;
