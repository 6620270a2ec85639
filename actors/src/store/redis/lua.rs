//! The engine's Lua: how scripts are composed and called, and the
//! fragments several areas share.
//!
//! Each area keeps its scripts beside the Rust that builds their keys and
//! arguments (`messages.rs` and `messages/*.lua`, …); a script is its
//! shared fragments followed by its body, concatenated once
//! ([`LuaScript`]). Every script runs atomically on the server (Redis runs
//! one script at a time) and touches only keys of one hash-tag slot, so it
//! stays valid on Redis Cluster.
//!
//! Conventions: scripts never build JSON themselves beyond concatenating
//! pieces prepared in Rust (see `codec::Holes`), so no `cjson` round trip
//! can alter numbers or empty arrays in stored records. Scripts answer with
//! a status string first (`ok`, `missing`, `exists`, `conflict`, …; read
//! in Rust as `codec::ScriptStatus`) and never put `nil` inside a table
//! (it would truncate the reply). A script with more than a couple of
//! KEYS or ARGV names them with [`lua_params!`]: the Rust struct's field
//! order is the order the script receives them in, and the body binds
//! them to locals of the same names on its first lines
//! (`local log, epoch = unpack(KEYS)`); each area's tests check that both
//! sides list the same names in the same order.
//!
//! Shared fragments (each defines `local function`s; a script lists the
//! ones it calls before its body, a fragment's own dependencies first):
//!
//! - [`APPEND_LOG`] (`lua/append_log.lua`): `now_ms` and `append_log`, the
//!   log append with epoch minting and trimming that every script writing
//!   the log calls (its ARGV come from `log::LogArgs`), and its three steps
//!   `log_open`, `log_add`, `log_close` for a script that appends several
//!   entries at once (the batched message append).
//! - [`ROUND_STEP`] (`lua/round_step.lua`): the round counter of
//!   protocol §4, as `next_round` in Rust (appends and draft completions).
//! - [`REVISION`] (`lua/revision.lua`): `revision_of`, the revision check
//!   of every write routed at a conversation revision.
//! - [`PUBLISH_CREDENTIALS`] (`lua/publish_credentials.lua`): the append to
//!   the credentials channel of every change of a token's standing.
//! - [`TAKE_BUDGET`] (`lua/budget.lua`): `take_budget`, one call from a
//!   rate-limit bucket (the append's, and the gateway's limiter).

use redis::Script;

/// `now_ms()` and `append_log(log, epoch, meta, rosters, candidate,
/// window, maxlen, event)`: appends a log entry, minting the epoch if it
/// is missing and trimming to the replay window and entry cap.
pub const APPEND_LOG: &str = include_str!("lua/append_log.lua");

/// `round_step(rounds, kind, cap, suppressed)`: one step of the round
/// counter (protocol §4, "Round caps").
pub const ROUND_STEP: &str = include_str!("lua/round_step.lua");

/// `revision_of(conversations, revisions, cid)`: a conversation's revision,
/// or false when it does not exist.
pub const REVISION: &str = include_str!("lua/revision.lua");

/// `publish_credentials(credentials, kept, change)`: appends a change to
/// the credentials channel (chained to the entry before it), trimmed to
/// about `kept` entries.
pub const PUBLISH_CREDENTIALS: &str = include_str!("lua/publish_credentials.lua");
/// `take_budget(key, interval, burst[, now])`: one call from a GCRA
/// bucket; false when taken, else the wait in µs (`now`, µs of the Redis
/// clock, read with `TIME` when not given).
pub const TAKE_BUDGET: &str = include_str!("lua/budget.lua");

/// One script of the engine: its fragments and body, and whether it may
/// be retried after a broken connection.
pub struct LuaScript {
    script: Script,
    read_only: bool,
}

impl LuaScript {
    /// A script that is never retried after a broken connection (a write
    /// whose reply was lost may have been applied). `parts` are
    /// concatenated in order: fragments first, then the body.
    pub fn new(parts: &[&str]) -> Self {
        LuaScript {
            script: Script::new(&parts.concat()),
            read_only: false,
        }
    }

    /// A script that changes nothing a client could observe twice, so it
    /// may be retried after a broken connection like a read. (The log
    /// readers only mint a missing epoch with `SET NX` and fill the meta
    /// hash, both idempotent.)
    pub fn read_only(parts: &[&str]) -> Self {
        LuaScript {
            script: Script::new(&parts.concat()),
            read_only: true,
        }
    }

    /// The script to invoke.
    pub fn script(&self) -> &Script {
        &self.script
    }

    /// Whether the script may be retried (see [`LuaScript::read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }
}

/// Declares the named KEYS or ARGV of one script: a struct with one field
/// per value, of type `$ty` (`String` for keys built from `BayKeys`,
/// `&str` for arguments), declared in the order the script receives them.
/// `in_order()` gives the values in that order for `invoke`; under test,
/// `NAMES` gives the field names, which must be the locals the script's
/// body binds (checked with `bound` in tests).
macro_rules! lua_params {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident $(<$lt:lifetime>)? of $ty:ty {
            $($(#[$field_meta:meta])* $field:ident),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name $(<$lt>)? {
            $($(#[$field_meta])* pub $field: $ty,)*
        }

        impl $(<$lt>)? $name $(<$lt>)? {
            /// The field names, in the script's order.
            #[cfg(test)]
            pub const NAMES: &'static [&'static str] = &[$(stringify!($field)),*];

            /// The values, in the script's order.
            pub fn in_order(&self) -> Vec<&str> {
                vec![$(::std::convert::AsRef::<str>::as_ref(&self.$field)),*]
            }
        }
    };
}
pub(super) use lua_params;

/// The names a script's `body` binds `table` (`"KEYS"` or `"ARGV"`) to:
/// the locals of its first `local a, b, … = unpack(KEYS)` statement.
#[cfg(test)]
pub fn bound(body: &str, table: &str) -> Vec<String> {
    bindings(body, table)
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("the script does not bind {table}"))
}

/// The names of every `local a, b, … = unpack(KEYS…)` statement of
/// `body`, in order: a script that binds a slice of `table` at a time
/// (`unpack(KEYS, k, k + 6)`, the batched append) has several.
#[cfg(test)]
pub fn bindings(body: &str, table: &str) -> Vec<Vec<String>> {
    let pattern = format!("= unpack({table}");
    body.match_indices(&pattern)
        .map(|(end, _)| {
            let start = body[..end].rfind("local ").expect("a local binding") + "local ".len();
            body[start..end]
                .split(',')
                .map(|name| name.trim().to_owned())
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_reads_a_multi_line_binding() {
        let body = "local a, b,\n  c = unpack(KEYS)\nlocal x = unpack(ARGV)\n";
        assert_eq!(bound(body, "KEYS"), ["a", "b", "c"]);
        assert_eq!(bound(body, "ARGV"), ["x"]);
        let sliced = "local a = unpack(KEYS, 1, 1)\nlocal b, c = unpack(KEYS, k, k + 1)\n";
        assert_eq!(bindings(sliced, "KEYS"), [vec!["a"], vec!["b", "c"]]);
    }
}
