//! Rate-limit buckets counted in Redis, shared by every node.
//!
//! One key per token and bucket, `sb:{rl:<token id>}:<bucket>` (the hash
//! tag keeps each key in its own slot, so this works on Redis Cluster too),
//! holding the GCRA "theoretical arrival time" in microseconds of the
//! Redis clock. One Lua script reads it, decides and writes it back — one
//! atomic step, so two nodes taking from one bucket at once never both get
//! the last call — and sets a TTL at which the key means "bucket full"
//! anyway, so idle tokens cost nothing. The Redis clock (`TIME`) is the only
//! clock, so node clock skew does not matter.
//!
//! The limiter has its own connection (opened on first use, reopened after
//! a failure), never one of the store's shared connections: to the one
//! server, or with `redis.cluster` a cluster connection of its own that
//! sends each bucket's script to the master serving its slot (following
//! `MOVED` / `ASK` and retrying `TRYAGAIN` while a slot moves, within the
//! call's bound). Every call is
//! bounded (connect and reply within `CALL_TIMEOUT`: 1 s). A failure fails
//! open: the call is allowed, a warning is logged (at most once per
//! `WARN_EVERY` (10 s), counting the calls let through), and Redis is left alone
//! for `BACKOFF` (1 s), so an outage adds no latency to every request.

use super::Bucket;
use parking_lot::Mutex;
use redis::Script;
use std::num::NonZeroU32;
use std::sync::LazyLock;
use std::time::{Duration, Instant};
use switchboard_actors::store::redis::{Connection, Target, TAKE_BUDGET};
use switchboard_actors::store::Budget;
use switchboard_protocol::ids::TokenId;

/// Longest a limiter call (connecting included) may take before it fails open.
const CALL_TIMEOUT: Duration = Duration::from_secs(1);
/// After a failure, calls are let through without asking Redis for this long.
const BACKOFF: Duration = Duration::from_secs(1);
/// At most one "failing open" warning per this interval.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// GCRA take: `KEYS[1]` the bucket, `ARGV[1]` the emission interval (µs),
/// `ARGV[2]` the burst (bucket size). Answers `{1, 0}` when a call was
/// taken, `{0, wait µs}` when the bucket is empty. The take itself is the
/// store's `take_budget` fragment, which a post's append runs too.
static TAKE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{TAKE_BUDGET}\n{}",
        r#"
local wait = take_budget(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]))
if wait then return {0, wait} end
return {1, 0}
"#
    ))
});

/// The Redis key of `token`'s `bucket`, in a slot of its own. (The agent
/// budget is a key of the token's Bay instead, `sb:{bay}:rl:<token
/// id>:agent`, so a post's append can take from it:
/// [`RateLimits::check_agent`](super::RateLimits::check_agent).)
pub fn key(token: &TokenId, bucket: Bucket) -> String {
    format!("sb:{{rl:{}}}:{}", token.0, bucket.as_str())
}

/// One bucket's shape: `burst` calls, refilled one per `interval_us`.
#[derive(Clone, Copy, Debug)]
struct Shape {
    interval_us: u64,
    burst: u32,
}

impl Shape {
    fn per_minute(n: NonZeroU32) -> Self {
        Shape {
            interval_us: (60_000_000 / u64::from(n.get())).max(1),
            burst: n.get(),
        }
    }
}

/// Buckets in Redis. See the module docs.
pub struct RedisLimiter {
    target: Target,
    conn: tokio::sync::Mutex<Option<Connection>>,
    updates: Shape,
    agent: Shape,
    pair: Shape,
    link: Shape,
    trouble: Mutex<Trouble>,
}

#[derive(Default)]
struct Trouble {
    /// Calls are let through without asking Redis until then.
    skip_until: Option<Instant>,
    last_warned: Option<Instant>,
    /// Calls let through since the last warning.
    let_through: u64,
}

impl RedisLimiter {
    /// A limiter on the Redis at `target` (one server or a cluster);
    /// nothing is opened until first use.
    pub fn new(
        target: Target,
        updates_per_minute: NonZeroU32,
        agent_per_minute: NonZeroU32,
    ) -> Self {
        RedisLimiter {
            target,
            conn: tokio::sync::Mutex::new(None),
            updates: Shape::per_minute(updates_per_minute),
            agent: Shape::per_minute(agent_per_minute),
            pair: Shape::per_minute(super::DEFAULT_PER_IP),
            link: Shape::per_minute(super::DEFAULT_PER_IP),
            trouble: Mutex::new(Trouble::default()),
        }
    }

    /// The same limiter with the per-IP pairing buckets of the given sizes
    /// (`POST /pair` attempts, `POST /link-requests`).
    pub fn per_ip(mut self, pair_per_minute: NonZeroU32, link_per_minute: NonZeroU32) -> Self {
        self.pair = Shape::per_minute(pair_per_minute);
        self.link = Shape::per_minute(link_per_minute);
        self
    }

    /// Takes one call from `token`'s `bucket` (its key of [`key`]):
    /// `Err(wait)` when it is empty. Never fails otherwise (a Redis
    /// failure lets the call through).
    pub async fn check(&self, bucket: Bucket, token: &TokenId) -> Result<(), Duration> {
        self.check_key(bucket, &key(token, bucket)).await
    }

    /// The agent budget of `token` as a post's append takes it.
    pub fn agent_budget(&self, token: TokenId) -> Budget {
        let mut b = Budget::per_minute(token, self.agent.burst);
        b.interval_us = self.agent.interval_us;
        b
    }

    /// Takes one call from the bucket at `key`, shaped as `bucket`:
    /// `Err(wait)` when it is empty. Never fails otherwise.
    pub async fn check_key(&self, bucket: Bucket, key: &str) -> Result<(), Duration> {
        if self.backing_off() {
            return Ok(());
        }
        let shape = match bucket {
            Bucket::Updates => self.updates,
            Bucket::Agent => self.agent,
            Bucket::Pair => self.pair,
            Bucket::Link => self.link,
        };
        match tokio::time::timeout(CALL_TIMEOUT, self.take(key, shape)).await {
            Ok(Ok((1, _))) => Ok(()),
            Ok(Ok((_, wait_us))) => Err(Duration::from_micros(wait_us.max(1) as u64)),
            Ok(Err(err)) => {
                self.fail_open(&err.to_string()).await;
                Ok(())
            }
            Err(_) => {
                self.fail_open("timed out").await;
                Ok(())
            }
        }
    }

    /// Runs the script on the limiter's connection (opening it if needed).
    async fn take(&self, key: &str, shape: Shape) -> redis::RedisResult<(i64, i64)> {
        let mut conn = {
            let mut slot = self.conn.lock().await;
            match &*slot {
                Some(c) => c.clone(),
                None => {
                    let c = self.target.connect(Some(CALL_TIMEOUT)).await?;
                    *slot = Some(c.clone());
                    c
                }
            }
        };
        TAKE.key(key)
            .arg(shape.interval_us)
            .arg(shape.burst)
            .invoke_async(&mut conn)
            .await
    }

    fn backing_off(&self) -> bool {
        let mut t = self.trouble.lock();
        match t.skip_until {
            Some(until) if Instant::now() < until => {
                t.let_through += 1;
                true
            }
            _ => false,
        }
    }

    /// Drops the connection (the next call after the backoff reopens it),
    /// and warns now and then.
    async fn fail_open(&self, cause: &str) {
        *self.conn.lock().await = None;
        let now = Instant::now();
        let mut t = self.trouble.lock();
        t.skip_until = Some(now + BACKOFF);
        t.let_through += 1;
        if t.last_warned
            .is_none_or(|at| now.duration_since(at) >= WARN_EVERY)
        {
            tracing::warn!(
                error = cause,
                calls_let_through = t.let_through,
                "rate limiter cannot reach Redis; failing open (calls are not rate-limited until it answers)"
            );
            t.last_warned = Some(now);
            t.let_through = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::process::{Child, Command, Stdio};

    fn token(s: &str) -> TokenId {
        TokenId(s.to_owned())
    }

    fn n(v: u32) -> NonZeroU32 {
        NonZeroU32::new(v).unwrap()
    }

    fn single(url: &str) -> Target {
        Target::single(url).unwrap()
    }

    fn free_port() -> u16 {
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    /// A throwaway redis-server (no persistence), killed on drop.
    struct Server(Child, u16);

    impl Server {
        fn start() -> Server {
            Self::start_on(free_port())
        }

        fn start_on(port: u16) -> Server {
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server must be installed (apt-get install redis-server)");
            // Killed (and waited for) on drop, also if it never answers.
            let server = Server(child, port);
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
                    let mut buf = [0u8; 16];
                    if s.write_all(b"PING\r\n").is_ok()
                        && s.read(&mut buf)
                            .is_ok_and(|k| buf[..k].starts_with(b"+PONG"))
                    {
                        return server;
                    }
                }
                assert!(Instant::now() < deadline, "redis-server did not start");
                std::thread::sleep(Duration::from_millis(20));
            }
        }

        fn url(&self) -> String {
            format!("redis://127.0.0.1:{}", self.1)
        }
    }

    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[test]
    fn keys_are_hash_tagged_per_token() {
        assert_eq!(
            key(&token("0123456789abcdef"), Bucket::Updates),
            "sb:{rl:0123456789abcdef}:updates"
        );
        assert_eq!(
            key(&token("0123456789abcdef"), Bucket::Agent),
            "sb:{rl:0123456789abcdef}:agent"
        );
    }

    #[tokio::test]
    async fn an_unreachable_redis_fails_open_quickly() {
        // Nothing listens on a port we just freed.
        let url = format!("redis://127.0.0.1:{}", free_port());
        let limiter = RedisLimiter::new(single(&url), n(1), n(1));
        let started = Instant::now();
        for _ in 0..50 {
            assert_eq!(limiter.check(Bucket::Agent, &token("t")).await, Ok(()));
        }
        assert!(started.elapsed() < Duration::from_secs(3));
    }

    #[tokio::test]
    async fn buckets_are_shared_between_limiters_and_separate_per_token_and_kind() {
        let server = Server::start();
        // Two limiters on one Redis = two nodes.
        let a = RedisLimiter::new(single(&server.url()), n(3), n(5));
        let b = RedisLimiter::new(single(&server.url()), n(3), n(5));
        let t = token("aaaaaaaaaaaaaaaa");
        for i in 0..3 {
            let node = if i % 2 == 0 { &a } else { &b };
            assert_eq!(node.check(Bucket::Updates, &t).await, Ok(()), "call {i}");
        }
        let wait = b.check(Bucket::Updates, &t).await.unwrap_err();
        // 3/min: one call every 20 s.
        assert!(
            wait > Duration::from_secs(15) && wait <= Duration::from_secs(20),
            "{wait:?}"
        );
        assert!(a.check(Bucket::Updates, &t).await.is_err());
        // The agent budget and other tokens are untouched.
        for _ in 0..5 {
            assert_eq!(a.check(Bucket::Agent, &t).await, Ok(()));
        }
        assert!(b.check(Bucket::Agent, &t).await.is_err());
        assert_eq!(
            a.check(Bucket::Updates, &token("bbbbbbbbbbbbbbbb")).await,
            Ok(())
        );
    }

    /// At 3 a minute (one call every 20 s) a test takes milliseconds, so
    /// real time cannot refill the bucket; moving the bucket's stored time
    /// back stands in for the time passing.
    #[tokio::test]
    async fn a_bucket_refills_at_its_rate_and_its_key_expires() {
        let server = Server::start();
        let limiter = RedisLimiter::new(single(&server.url()), n(3), n(3));
        let t = token("cccccccccccccccc");
        let client = redis::Client::open(server.url()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let k = key(&t, Bucket::Agent);
        for i in 0..3 {
            assert_eq!(limiter.check(Bucket::Agent, &t).await, Ok(()), "call {i}");
        }
        let wait = limiter.check(Bucket::Agent, &t).await.unwrap_err();
        assert!(
            wait > Duration::from_secs(15) && wait <= Duration::from_secs(20),
            "{wait:?}"
        );
        // The key lives until the bucket would be full again (60 s), not forever.
        let ttl: i64 = redis::cmd("PTTL")
            .arg(&k)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(ttl > 40_000 && ttl <= 61_000, "{ttl}");
        // 20 s later: exactly one call more.
        let rewind = |by_secs: i64| {
            let (k, mut conn) = (k.clone(), conn.clone());
            async move {
                let tat: String = redis::cmd("GET")
                    .arg(&k)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                let tat: i64 = tat.parse().unwrap();
                let _: () = redis::cmd("SET")
                    .arg(&k)
                    .arg((tat - by_secs * 1_000_000).to_string())
                    .arg("KEEPTTL")
                    .query_async(&mut conn)
                    .await
                    .unwrap();
            }
        };
        rewind(20).await;
        assert_eq!(limiter.check(Bucket::Agent, &t).await, Ok(()));
        assert!(limiter.check(Bucket::Agent, &t).await.is_err());
        // A minute later: the whole bucket, and no more.
        rewind(60).await;
        for i in 0..3 {
            assert_eq!(limiter.check(Bucket::Agent, &t).await, Ok(()), "call {i}");
        }
        assert!(limiter.check(Bucket::Agent, &t).await.is_err());
    }

    #[tokio::test]
    async fn the_limiter_comes_back_after_redis_returns() {
        let server = Server::start();
        let url = server.url();
        let port = server.1;
        let limiter = RedisLimiter::new(single(&url), n(2), n(2));
        let t = token("dddddddddddddddd");
        assert_eq!(limiter.check(Bucket::Agent, &t).await, Ok(()));
        drop(server);
        // Down: fail open, however many calls.
        for _ in 0..5 {
            assert_eq!(limiter.check(Bucket::Agent, &t).await, Ok(()));
        }
        // Back (empty): counted again once the backoff is over.
        let _server = Server::start_on(port);
        tokio::time::sleep(BACKOFF + Duration::from_millis(300)).await;
        let mut results = Vec::new();
        for _ in 0..3 {
            results.push(limiter.check(Bucket::Agent, &t).await.is_ok());
        }
        assert_eq!(results, [true, true, false]);
    }
}
