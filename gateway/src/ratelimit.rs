//! Per-token rate limits (protocol §11): `/updates` (and WebSocket
//! connects) have their own bucket, 20/min by default, separate from the
//! 60/min agent budget that every other agent API call draws on. The
//! unauthenticated pairing routes have per-IP buckets instead
//! (`pairing.redeem_per_minute`, `pairing.link_requests_per_minute`): the
//! caller has no token yet, and guessing pairing codes must be slow.
//!
//! Both buckets are GCRA limiters (a bucket of `n` that refills one call
//! every `60 s / n`). Where they are counted depends on the store engine:
//!
//! - `store = "memory"`: in this process, with `governor` (one node, so
//!   per-node counting is cluster-wide counting);
//! - `store = "redis"`: in Redis ([`redis::RedisLimiter`]), one key per
//!   token and bucket, so the limits hold across every node behind a load
//!   balancer. A Redis failure in the limiter fails *open* (the call is let
//!   through, with a throttled warning): the store answers 503 on its own
//!   when Redis is really gone, and a limiter hiccup must never turn into
//!   an error for a well-behaved client.

pub mod redis;

use crate::error::ApiError;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::time::Duration;
use switchboard_actors::store::redis::keys::BayKeys;
use switchboard_actors::store::redis::Target as RedisTarget;
use switchboard_actors::store::{Budget, Principal, StoreError};
use switchboard_config::{Settings, StoreKind};
use switchboard_protocol::error::ErrorCode;
use switchboard_protocol::ids::TokenId;

/// The two buckets a token draws on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bucket {
    /// `/updates` calls and WebSocket connects.
    Updates,
    /// Every other agent API call.
    Agent,
    /// `POST /pair` attempts, per client IP.
    Pair,
    /// `POST /link-requests`, per client IP.
    Link,
}

impl Bucket {
    /// The label used in metrics and Redis keys.
    pub fn as_str(self) -> &'static str {
        match self {
            Bucket::Updates => "updates",
            Bucket::Agent => "agent",
            Bucket::Pair => "pair",
            Bucket::Link => "link",
        }
    }
}

/// The two per-token buckets, counted per node or in Redis.
pub struct RateLimits {
    backend: Backend,
}

/// The per-node buckets, one keyed limiter per [`Bucket`].
struct MemoryBuckets {
    updates: DefaultKeyedRateLimiter<TokenId>,
    agent: DefaultKeyedRateLimiter<TokenId>,
    pair: DefaultKeyedRateLimiter<TokenId>,
    link: DefaultKeyedRateLimiter<TokenId>,
}

impl MemoryBuckets {
    fn of(&self, bucket: Bucket) -> &DefaultKeyedRateLimiter<TokenId> {
        match bucket {
            Bucket::Updates => &self.updates,
            Bucket::Agent => &self.agent,
            Bucket::Pair => &self.pair,
            Bucket::Link => &self.link,
        }
    }
}

enum Backend {
    /// Boxed: four limiters are large.
    Memory(Box<MemoryBuckets>),
    /// Boxed: a cluster client is large.
    Redis(Box<redis::RedisLimiter>),
}

/// Size of the per-IP pairing buckets until [`RateLimits::per_ip`] sets
/// them (the default of both `pairing.*_per_minute` settings).
const DEFAULT_PER_IP: NonZeroU32 = NonZeroU32::new(10).expect("10 is not zero");

/// The bucket key of a client IP: `ip-<address>`, or `ip-unknown` when the
/// peer address is not known. Never a token handle (16 hex digits), so
/// the two kinds of key cannot collide in one limiter or in Redis.
fn ip_key(ip: Option<IpAddr>) -> TokenId {
    TokenId(match ip {
        Some(ip) => format!("ip-{ip}"),
        None => "ip-unknown".to_owned(),
    })
}

/// The 429 of a spent agent budget, counted in the metrics.
pub fn agent_limited(wait: Duration) -> ApiError {
    metrics::counter!(crate::metrics::RATE_LIMITED, "bucket" => "agent").increment(1);
    ApiError::new(ErrorCode::RateLimited, "agent request budget exceeded").retry_after(wait)
}

/// A non-zero per-minute rate (a zero is treated as 1).
fn per_minute(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN)
}

impl RateLimits {
    /// Per-node buckets of `updates_per_minute` and `agent_per_minute`
    /// (both ≥ 1; a zero is treated as 1).
    pub fn new(updates_per_minute: u32, agent_per_minute: u32) -> Self {
        let quota = |n: u32| Quota::per_minute(per_minute(n));
        RateLimits {
            backend: Backend::Memory(Box::new(MemoryBuckets {
                updates: RateLimiter::keyed(quota(updates_per_minute)),
                agent: RateLimiter::keyed(quota(agent_per_minute)),
                pair: RateLimiter::keyed(Quota::per_minute(DEFAULT_PER_IP)),
                link: RateLimiter::keyed(Quota::per_minute(DEFAULT_PER_IP)),
            })),
        }
    }

    /// The same limits with per-IP pairing buckets of `pair_per_minute`
    /// (`POST /pair` attempts) and `link_per_minute` (`POST
    /// /link-requests`); a zero is treated as 1.
    pub fn per_ip(self, pair_per_minute: u32, link_per_minute: u32) -> Self {
        let (pair_n, link_n) = (per_minute(pair_per_minute), per_minute(link_per_minute));
        let backend = match self.backend {
            Backend::Memory(buckets) => Backend::Memory(Box::new(MemoryBuckets {
                pair: RateLimiter::keyed(Quota::per_minute(pair_n)),
                link: RateLimiter::keyed(Quota::per_minute(link_n)),
                ..*buckets
            })),
            Backend::Redis(limiter) => Backend::Redis(Box::new(limiter.per_ip(pair_n, link_n))),
        };
        RateLimits { backend }
    }

    /// Buckets counted in the Redis at `target` — one server or a Redis
    /// Cluster — (its own connection, opened on first use), shared by every
    /// node using that Redis.
    pub fn redis(target: RedisTarget, updates_per_minute: u32, agent_per_minute: u32) -> Self {
        RateLimits {
            backend: Backend::Redis(Box::new(redis::RedisLimiter::new(
                target,
                per_minute(updates_per_minute),
                per_minute(agent_per_minute),
            ))),
        }
    }

    /// The limiter the settings call for: in Redis with the redis engine
    /// (so limits are cluster-wide), per node with the memory engine.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when `redis.url` is not a valid Redis URL
    /// (the message never contains the URL).
    pub fn from_settings(settings: &Settings) -> Result<Self, StoreError> {
        let (updates, agent) = (
            settings.limits.updates_per_minute,
            settings.limits.agent_requests_per_minute,
        );
        let limits = match settings.store {
            StoreKind::Memory => Self::new(updates, agent),
            StoreKind::Redis => Self::redis(crate::redis_target(&settings.redis)?, updates, agent),
        };
        Ok(limits.per_ip(
            settings.pairing.redeem_per_minute,
            settings.pairing.link_requests_per_minute,
        ))
    }

    /// Where the buckets are counted: `"memory"` or `"redis"`.
    pub fn kind(&self) -> &'static str {
        match self.backend {
            Backend::Memory(_) => "memory",
            Backend::Redis(_) => "redis",
        }
    }

    /// Takes one `/updates` (or WebSocket connect) from `token`'s bucket.
    ///
    /// # Errors
    /// 429 `UPDATES_RATE_LIMITED` with `Retry-After` when the bucket is empty.
    pub async fn check_updates(&self, token: &TokenId) -> Result<(), ApiError> {
        self.check(Bucket::Updates, token).await.map_err(|wait| {
            metrics::counter!(crate::metrics::RATE_LIMITED, "bucket" => "updates").increment(1);
            ApiError::new(
                ErrorCode::UpdatesRateLimited,
                "too many /updates calls or WebSocket and SSE connects; slow down",
            )
            .retry_after(wait)
        })
    }

    /// Takes one agent API call from the budget of `caller`'s token. In
    /// Redis the bucket is a key of the caller's Bay
    /// (`sb:{bay}:rl:<token id>:agent`), so a post's append takes from
    /// the same bucket in its own script ([`RateLimits::agent_budget`]).
    ///
    /// # Errors
    /// 429 `RATE_LIMITED` with `Retry-After` when the budget is spent.
    pub async fn check_agent(&self, caller: &Principal) -> Result<(), ApiError> {
        let taken = match &self.backend {
            Backend::Memory(_) => self.check(Bucket::Agent, &caller.token).await,
            Backend::Redis(limiter) => {
                let key =
                    BayKeys::new(&caller.bay).rate_limit(&caller.token, Bucket::Agent.as_str());
                limiter.check_key(Bucket::Agent, &key).await
            }
        };
        taken.map_err(agent_limited)
    }

    /// The caller's agent budget for a post to take from in the append
    /// itself (one store call instead of two), when the buckets are in
    /// Redis; `None` with per-node buckets (call
    /// [`RateLimits::check_agent`] instead). A request that ends without
    /// the append taking it ([`Budget::is_taken`]) must call
    /// `check_agent` before it answers.
    pub fn agent_budget(&self, caller: &Principal) -> Option<Budget> {
        match &self.backend {
            Backend::Memory(_) => None,
            Backend::Redis(limiter) => Some(limiter.agent_budget(caller.token.clone())),
        }
    }

    /// Takes one `POST /pair` attempt from `ip`'s bucket: every attempt
    /// counts, redeemed or not, so codes cannot be guessed quickly.
    ///
    /// # Errors
    /// 429 `RATE_LIMITED` with `Retry-After` when the bucket is empty.
    pub async fn check_pair(&self, ip: Option<IpAddr>) -> Result<(), ApiError> {
        self.check(Bucket::Pair, &ip_key(ip)).await.map_err(|wait| {
            metrics::counter!(crate::metrics::RATE_LIMITED, "bucket" => "pair").increment(1);
            ApiError::new(
                ErrorCode::RateLimited,
                "too many pairing attempts from this address",
            )
            .retry_after(wait)
        })
    }

    /// Takes one `POST /link-requests` from `ip`'s bucket.
    ///
    /// # Errors
    /// 429 `RATE_LIMITED` with `Retry-After` when the bucket is empty.
    pub async fn check_link(&self, ip: Option<IpAddr>) -> Result<(), ApiError> {
        self.check(Bucket::Link, &ip_key(ip)).await.map_err(|wait| {
            metrics::counter!(crate::metrics::RATE_LIMITED, "bucket" => "link").increment(1);
            ApiError::new(
                ErrorCode::RateLimited,
                "too many link requests from this address",
            )
            .retry_after(wait)
        })
    }

    /// `Err(wait)` when `token`'s `bucket` is empty.
    async fn check(&self, bucket: Bucket, token: &TokenId) -> Result<(), Duration> {
        match &self.backend {
            Backend::Memory(buckets) => buckets
                .of(bucket)
                .check_key(token)
                .map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now())),
            Backend::Redis(limiter) => limiter.check(bucket, token).await,
        }
    }

    /// Drops the state of tokens whose buckets are full again (as if never
    /// used: governor's `retain_recent`) and gives the memory back; call
    /// periodically, so the state is bounded by the tokens active within
    /// about one refill period, not by every token ever seen. (Redis keys
    /// expire on their own.)
    pub fn shrink(&self) {
        if let Backend::Memory(buckets) = &self.backend {
            for bucket in [Bucket::Updates, Bucket::Agent, Bucket::Pair, Bucket::Link] {
                let limiter = buckets.of(bucket);
                limiter.retain_recent();
                limiter.shrink_to_fit();
            }
        }
    }

    /// Tokens with per-node bucket state, `(updates, agent)`; `None` when
    /// the buckets are counted in Redis.
    pub fn tracked_tokens(&self) -> Option<(usize, usize)> {
        match &self.backend {
            Backend::Memory(b) => Some((b.updates.len(), b.agent.len())),
            Backend::Redis(_) => None,
        }
    }
}
