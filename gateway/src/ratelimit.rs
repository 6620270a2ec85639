//! Per-token rate limits (protocol §11): `/updates` (and WebSocket
//! connects) have their own bucket, 20/min by default, separate from the
//! 60/min agent budget that every other agent API call draws on.
//!
//! Buckets are GCRA limiters from `governor`, kept per node.

use crate::error::ApiError;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use std::num::NonZeroU32;
use std::time::Duration;
use switchboard_protocol::error::ErrorCode;
use switchboard_protocol::ids::TokenId;

/// The two per-token buckets.
pub struct RateLimits {
    updates: DefaultKeyedRateLimiter<TokenId>,
    agent: DefaultKeyedRateLimiter<TokenId>,
}

impl RateLimits {
    /// Buckets of `updates_per_minute` and `agent_per_minute` (both ≥ 1;
    /// a zero is treated as 1).
    pub fn new(updates_per_minute: u32, agent_per_minute: u32) -> Self {
        let quota = |n: u32| Quota::per_minute(NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN));
        RateLimits {
            updates: RateLimiter::keyed(quota(updates_per_minute)),
            agent: RateLimiter::keyed(quota(agent_per_minute)),
        }
    }

    /// Takes one `/updates` (or WebSocket connect) from `token`'s bucket.
    ///
    /// # Errors
    /// 429 `UPDATES_RATE_LIMITED` with `Retry-After` when the bucket is empty.
    pub fn check_updates(&self, token: &TokenId) -> Result<(), ApiError> {
        check(&self.updates, token).map_err(|wait| {
            metrics::counter!(crate::metrics::RATE_LIMITED, "bucket" => "updates").increment(1);
            ApiError::new(
                ErrorCode::UpdatesRateLimited,
                "too many /updates calls; slow the poll loop",
            )
            .retry_after(wait)
        })
    }

    /// Takes one agent API call from `token`'s budget.
    ///
    /// # Errors
    /// 429 `RATE_LIMITED` with `Retry-After` when the budget is spent.
    pub fn check_agent(&self, token: &TokenId) -> Result<(), ApiError> {
        check(&self.agent, token).map_err(|wait| {
            metrics::counter!(crate::metrics::RATE_LIMITED, "bucket" => "agent").increment(1);
            ApiError::new(ErrorCode::RateLimited, "agent request budget exceeded").retry_after(wait)
        })
    }

    /// Drops state of idle keys; call periodically.
    pub fn shrink(&self) {
        self.updates.retain_recent();
        self.agent.retain_recent();
    }
}

fn check(limiter: &DefaultKeyedRateLimiter<TokenId>, token: &TokenId) -> Result<(), Duration> {
    limiter
        .check_key(token)
        .map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
}
