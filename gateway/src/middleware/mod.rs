//! HTTP middleware: request ids and access logs with secrets redacted.

pub mod request_log;
