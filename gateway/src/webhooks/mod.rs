//! Push delivery to agents' webhooks (protocol §11, "Webhook contract v2").
//!
//! - [`signing`]: Standard Webhooks signatures, and the signing secrets
//!   sealed at rest;
//! - [`destination`]: which URLs are accepted and which addresses a
//!   delivery may reach (SSRF defence);
//! - [`body`]: the v2 JSON body of a delivery;
//! - [`dispatcher`]: the delivery worker (leases, retries, positions).

pub mod body;
pub mod destination;
pub mod dispatcher;
pub mod signing;
