//! HTTP middleware: request ids and access logs with secrets redacted, the
//! deadline on request bodies, and `HEAD` answered as `GET`.

pub mod body_deadline;
pub mod head;
pub mod request_log;
