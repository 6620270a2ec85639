//! Running one command or script: bounded by [`COMMAND_TIMEOUT`], errors
//! naming what was being done and the key, and reads (only reads) retried
//! over the same connection while it reconnects after a break.

use super::codec::{corrupt, decode, from_redis, unavailable};
use super::connection::{Connection, Shared};
use super::lua::LuaScript;
use super::{RedisStore, COMMAND_TIMEOUT};
use crate::store::StoreError;
use ::redis::{cmd, Cmd, FromRedisValue, Value};
use std::future::Future;
use std::time::Duration;

/// First pause before a read is retried on a connection that just failed
/// (the connection manager reconnects meanwhile, e.g. after a Redis
/// restart); it doubles per retry up to [`MAX_RECONNECT_PAUSE`].
const RECONNECT_PAUSE: Duration = Duration::from_millis(25);
/// Longest pause before a retry: reads give up after 25+50+100+200 ms.
const MAX_RECONNECT_PAUSE: Duration = Duration::from_millis(200);

impl RedisStore {
    /// Runs `fut` under [`COMMAND_TIMEOUT`].
    pub(super) async fn timed<T>(
        &self,
        doing: &'static str,
        key: &str,
        fut: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        timed(doing, key, fut).await
    }

    /// One JSON record stored as field `field` of hash `key` (`None` when absent).
    pub(super) async fn hash_record<T: serde::de::DeserializeOwned>(
        &self,
        doing: &'static str,
        key: &str,
        field: &str,
    ) -> Result<Option<T>, StoreError> {
        let raw: Option<Vec<u8>> = self
            .query(doing, key, cmd("HGET").arg(key).arg(field))
            .await?;
        raw.map(|r| decode(doing, key, &r)).transpose()
    }

    /// Every JSON record of hash `key`, in Redis's order.
    pub(super) async fn hash_records<T: serde::de::DeserializeOwned>(
        &self,
        doing: &'static str,
        key: &str,
    ) -> Result<Vec<T>, StoreError> {
        let raw: Vec<Vec<u8>> = self.query(doing, key, cmd("HVALS").arg(key)).await?;
        raw.iter().map(|r| decode(doing, key, r)).collect()
    }

    /// Runs one command on a shared connection.
    pub(super) async fn query<T: FromRedisValue>(
        &self,
        doing: &'static str,
        key: &str,
        command: &Cmd,
    ) -> Result<T, StoreError> {
        run_on(
            &self.shared,
            doing,
            key,
            is_read(command),
            |mut conn| async move { command.query_async(&mut conn).await },
        )
        .await
    }

    /// Runs one script on a shared connection: [`invoke_on`].
    pub(super) async fn invoke<T: FromRedisValue>(
        &self,
        doing: &'static str,
        script: &LuaScript,
        keys: &[&str],
        args: &[&str],
    ) -> Result<T, StoreError> {
        invoke_on(&self.shared, doing, script, keys, args).await
    }

    /// Invokes a script that answers with a status-first array.
    pub(super) async fn invoke_status(
        &self,
        doing: &'static str,
        script: &LuaScript,
        keys: &[&str],
        args: &[&str],
    ) -> Result<Vec<Value>, StoreError> {
        let reply: Value = self.invoke(doing, script, keys, args).await?;
        match reply {
            Value::Array(items) if !items.is_empty() => Ok(items),
            other => Err(corrupt(
                doing,
                keys.first().copied().unwrap_or("-"),
                format!("unexpected script reply {other:?}"),
            )),
        }
    }
}

/// Runs `fut` under [`COMMAND_TIMEOUT`]: past it, `Unavailable` naming
/// `doing` and `key`.
async fn timed<T>(
    doing: &'static str,
    key: &str,
    fut: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    tokio::time::timeout(COMMAND_TIMEOUT, fut)
        .await
        .map_err(|_| unavailable(doing, key, "timed out"))?
}

/// Runs one script on one of `shared`'s connections (`EVALSHA`, loading it
/// first when the server does not know it yet), under
/// [`COMMAND_TIMEOUT`]. The first of `keys` names the script's main key in
/// errors. Retried like a read only when the script is
/// [read-only](LuaScript::read_only).
pub(super) async fn invoke_on<T: FromRedisValue, K: AsRef<str>, A: AsRef<str>>(
    shared: &Shared,
    doing: &'static str,
    script: &LuaScript,
    keys: &[K],
    args: &[A],
) -> Result<T, StoreError> {
    let key = keys.first().map_or("-", AsRef::as_ref);
    let mut invocation = script.script().prepare_invoke();
    for k in keys {
        invocation.key(k.as_ref());
    }
    for a in args {
        invocation.arg(a.as_ref());
    }
    let invocation = &invocation;
    run_on(
        shared,
        doing,
        key,
        script.is_read_only(),
        |mut conn| async move { invocation.invoke_async(&mut conn).await },
    )
    .await
}

/// Runs `call` on one of `shared`'s connections under [`COMMAND_TIMEOUT`];
/// when `retry` (a read), again on the same connection while its manager
/// reconnects it ([`worth_retrying`]).
async fn run_on<T, F, Fut>(
    shared: &Shared,
    doing: &'static str,
    key: &str,
    retry: bool,
    call: F,
) -> Result<T, StoreError>
where
    F: Fn(Connection) -> Fut,
    Fut: Future<Output = ::redis::RedisResult<T>>,
{
    timed(doing, key, async {
        let conn = shared.get();
        let mut pause = RECONNECT_PAUSE;
        loop {
            match call(conn.clone()).await {
                Err(e) if retry && worth_retrying(&e, pause) => {
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                }
                other => return other.map_err(|e| from_redis(doing, key, e)),
            }
        }
    })
    .await
}

/// Whether a read that failed with `e` is worth another try after `pause`.
/// A connection that just broke (reset, broken pipe) is being reconnected:
/// retried with doubling pauses up to [`MAX_RECONNECT_PAUSE`]. A failed
/// reconnection (Redis refuses or is gone) gets one more quick try, then
/// the caller answers 503 at once rather than wait for an outage to end.
fn worth_retrying(e: &::redis::RedisError, pause: Duration) -> bool {
    if e.is_connection_dropped() {
        pause <= MAX_RECONNECT_PAUSE
    } else {
        (e.is_io_error() || e.is_connection_refusal()) && pause == RECONNECT_PAUSE
    }
}

/// Whether `command` only reads: those are retried once after a broken
/// connection. Writes are not (a write whose reply was lost may have been
/// applied; the caller answers 503 and the client decides).
fn is_read(command: &Cmd) -> bool {
    const READS: [&[u8]; 10] = [
        b"GET",
        b"HGET",
        b"HMGET",
        b"HVALS",
        b"XRANGE",
        b"XREVRANGE",
        b"PING",
        b"INFO",
        b"CONFIG",
        b"EXISTS",
    ];
    matches!(
        command.args_iter().next(),
        Some(::redis::Arg::Simple(name)) if READS.iter().any(|r| name.eq_ignore_ascii_case(r))
    )
}
