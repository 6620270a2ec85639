//! The room protocol's limits (docs/rooms.md, "Limits"), each a setting
//! of `[rooms]`: GCRA buckets (`governor`) for creation per IP, dynamic
//! reads per IP, participant writes per room (public and private rooms
//! differ) and owner management per room, and a count of the FOLLOWs each
//! IP holds waiting. Counted per node: behind a load balancer spreading
//! one client over N nodes, a client may get up to N times the rate.
//! Every refusal is 429 RATE_LIMITED with `Retry-After`.

use crate::error::ApiError;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;
use switchboard_actors::store::{Room, Visibility};
use switchboard_config::RoomsSettings;
use switchboard_protocol::error::ErrorCode;

/// The buckets of one node.
pub struct RoomLimits {
    create: DefaultKeyedRateLimiter<String>,
    reads: DefaultKeyedRateLimiter<String>,
    public_writes: DefaultKeyedRateLimiter<String>,
    private_writes: DefaultKeyedRateLimiter<String>,
    owner: DefaultKeyedRateLimiter<String>,
    max_waiting: u32,
    waiting: Arc<Mutex<HashMap<String, u32>>>,
}

fn nz(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN)
}

/// `per` calls per `period`, in bursts of `burst`.
fn quota(per: u32, period: Duration, burst: u32) -> Quota {
    let every = period / nz(per).get();
    Quota::with_period(every.max(Duration::from_micros(1)))
        .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
        .allow_burst(nz(burst))
}

fn ip_key(ip: Option<IpAddr>) -> String {
    ip.map_or_else(|| "unknown".to_owned(), |ip| ip.to_string())
}

fn room_key(room: &Room) -> String {
    format!("{}/{}", room.bay, room.conversation)
}

fn refused(bucket: &'static str, what: &str, wait: Duration) -> ApiError {
    metrics::counter!(crate::metrics::RATE_LIMITED, "bucket" => bucket).increment(1);
    ApiError::new(ErrorCode::RateLimited, what.to_owned()).retry_after(wait)
}

fn take(limiter: &DefaultKeyedRateLimiter<String>, key: &String) -> Result<(), Duration> {
    limiter
        .check_key(key)
        .map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
}

const MINUTE: Duration = Duration::from_secs(60);

impl RoomLimits {
    /// The buckets `[rooms]` describes.
    pub fn new(s: &RoomsSettings) -> Self {
        RoomLimits {
            create: RateLimiter::keyed(quota(
                s.create_per_hour,
                Duration::from_secs(3600),
                s.create_burst,
            )),
            reads: RateLimiter::keyed(quota(s.reads_per_minute, MINUTE, s.read_burst)),
            public_writes: RateLimiter::keyed(quota(
                s.public_writes_per_minute,
                MINUTE,
                s.public_write_burst,
            )),
            private_writes: RateLimiter::keyed(quota(
                s.private_writes_per_minute,
                MINUTE,
                s.private_write_burst,
            )),
            owner: RateLimiter::keyed(quota(s.owner_per_minute, MINUTE, s.owner_burst)),
            max_waiting: s.max_waiting_per_ip,
            waiting: Arc::default(),
        }
    }

    /// Takes one room creation from `ip`'s bucket.
    ///
    /// # Errors
    /// 429 RATE_LIMITED with `Retry-After`.
    pub fn create(&self, ip: Option<IpAddr>) -> Result<(), ApiError> {
        take(&self.create, &ip_key(ip))
            .map_err(|w| refused("room_create", "too many rooms created from this address", w))
    }

    /// Takes one dynamic read (READ, FOLLOW, history) from `ip`'s bucket.
    ///
    /// # Errors
    /// 429 RATE_LIMITED with `Retry-After`.
    pub fn read(&self, ip: Option<IpAddr>) -> Result<(), ApiError> {
        take(&self.reads, &ip_key(ip))
            .map_err(|w| refused("room_read", "too many room reads from this address", w))
    }

    /// Takes one participant write (send, pin, unpin, react) from the room's bucket.
    ///
    /// # Errors
    /// 429 RATE_LIMITED with `Retry-After`.
    pub fn write(&self, room: &Room) -> Result<(), ApiError> {
        let limiter = match room.visibility {
            Visibility::Public => &self.public_writes,
            Visibility::Private => &self.private_writes,
        };
        take(limiter, &room_key(room))
            .map_err(|w| refused("room_write", "too many writes in this room", w))
    }

    /// Takes one owner management call from the room's bucket.
    ///
    /// # Errors
    /// 429 RATE_LIMITED with `Retry-After`.
    pub fn manage(&self, room: &Room) -> Result<(), ApiError> {
        take(&self.owner, &room_key(room))
            .map_err(|w| refused("room_owner", "too many owner actions in this room", w))
    }

    /// Counts a FOLLOW that holds; the count drops with the guard.
    ///
    /// # Errors
    /// 429 RATE_LIMITED with `Retry-After: 1` when `ip` holds
    /// `rooms.max_waiting_per_ip` already.
    pub fn hold(&self, ip: Option<IpAddr>) -> Result<Holding, ApiError> {
        let key = ip_key(ip);
        let mut waiting = self.waiting.lock();
        let n = waiting.entry(key.clone()).or_default();
        if *n >= self.max_waiting {
            drop(waiting);
            return Err(refused(
                "room_follow",
                "too many waiting room polls from this address",
                Duration::from_secs(1),
            ));
        }
        *n += 1;
        Ok(Holding {
            waiting: self.waiting.clone(),
            key,
        })
    }

    /// Drops the state of keys whose buckets are full again.
    pub fn shrink(&self) {
        for limiter in [
            &self.create,
            &self.reads,
            &self.public_writes,
            &self.private_writes,
            &self.owner,
        ] {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    }
}

/// One waiting FOLLOW, counted until dropped.
pub struct Holding {
    waiting: Arc<Mutex<HashMap<String, u32>>>,
    key: String,
}

impl Drop for Holding {
    fn drop(&mut self) {
        let mut waiting = self.waiting.lock();
        if let Some(n) = waiting.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                waiting.remove(&self.key);
            }
        }
    }
}
