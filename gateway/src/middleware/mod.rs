//! HTTP middleware: request ids and access logs with secrets redacted, and
//! the deadline on request bodies.

pub mod body_deadline;
pub mod request_log;
