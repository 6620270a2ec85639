//! Behaviour only the Redis engine has: data loss (FLUSHALL, an empty
//! restart) expiring cursors by epoch, the start-up guards, failures
//! reported as `Unavailable`, the key layout, the Lua date formatter, and
//! the credentials channel's trimming.
//! Every test runs its own real `redis-server`.

mod common;

use common::redis::RedisServer;
use common::{message, new_bay, new_group, new_participant, redis_store, Append, Limits};
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchboard_actors::store::log::LogEvent;
use switchboard_actors::store::prelude::*;
use switchboard_actors::store::redis::{connect, RedisLimits};
use switchboard_actors::store::{AppendOutcome, CredentialsRead, Replay, Store, StoreError};
use switchboard_actors::token::TokenHash;
use switchboard_protocol::cursor::{EntryId, LogPosition};
use switchboard_protocol::ids::{BayId, ParticipantId, TokenId};
use switchboard_protocol::model::{ParticipantKind, Role};

fn limits() -> RedisLimits {
    RedisLimits {
        replay_window: Duration::from_secs(900),
        max_entries: 10_000,
    }
}

async fn control(store: &dyn Store, bay: &BayId) -> EntryId {
    store
        .append_control(
            bay,
            LogEvent::CredentialRevoked {
                participant: ParticipantId(common::unique("p")),
                token: TokenId("0123456789abcdef".into()),
            },
        )
        .await
        .unwrap()
}

fn unavailable(r: Result<impl std::fmt::Debug, StoreError>) -> String {
    match r {
        Err(e @ StoreError::Unavailable { .. }) => e.to_string(),
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flushall_gives_old_cursors_epoch_changed() {
    let server = RedisServer::start();
    let store = redis_store(&server, Limits::default()).await;
    let bay = new_bay(&store).await;
    control(&store, &bay.id).await;
    let old_head = store.log_head(&bay.id).await.unwrap();
    let old_zero = LogPosition {
        epoch: old_head.epoch.clone(),
        entry: EntryId::ZERO,
    };

    server.cmd(&["FLUSHALL"]);

    // Never a silent skip: every old cursor is refused, whatever comes next.
    for pos in [&old_head, &old_zero] {
        assert!(matches!(
            store.read_log(&bay.id, pos, 10, None).await.unwrap(),
            Replay::EpochChanged
        ));
    }
    let new_head = store.log_head(&bay.id).await.unwrap();
    assert_ne!(new_head.epoch, old_head.epoch, "a new epoch was minted");
    assert_eq!(new_head.entry, EntryId::ZERO);
    control(&store, &bay.id).await;
    control(&store, &bay.id).await;
    assert!(matches!(
        store.read_log(&bay.id, &old_head, 10, None).await.unwrap(),
        Replay::EpochChanged
    ));
    assert!(matches!(
        store
            .read_log(&bay.id, &old_head, 10, Some(Duration::from_secs(2)))
            .await
            .unwrap(),
        Replay::EpochChanged
    ));
    // The new epoch is stable and its cursors work.
    let head2 = store.log_head(&bay.id).await.unwrap();
    assert_eq!(head2.epoch, new_head.epoch);
    match store.read_log(&bay.id, &new_head, 10, None).await.unwrap() {
        Replay::Records { records, through } => {
            assert_eq!(records.len(), 2);
            assert_eq!(through, head2.entry);
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_restart_expires_cursors_and_the_store_reconnects() {
    let mut server = RedisServer::start();
    let store = redis_store(&server, Limits::default()).await;
    let bay = new_bay(&store).await;
    control(&store, &bay.id).await;
    let old_head = store.log_head(&bay.id).await.unwrap();

    server.restart_empty();

    // The pool drops its dead connections and reconnects; the lost log
    // shows as a changed epoch. A call may fail while the pool notices.
    let deadline = Instant::now() + Duration::from_secs(10);
    let replay = loop {
        match store.read_log(&bay.id, &old_head, 10, None).await {
            Ok(r) => break r,
            Err(StoreError::Unavailable { .. }) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert!(matches!(replay, Replay::EpochChanged), "{replay:?}");
    assert_eq!(store.bay(&bay.id).await.unwrap(), None, "the data is gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_gateway_process_keeps_cursors() {
    let server = RedisServer::start();
    let first = redis_store(&server, Limits::default()).await;
    let bay = new_bay(&first).await;
    let e1 = control(&first, &bay.id).await;
    let cursor = first.log_head(&bay.id).await.unwrap();
    let e2 = control(&first, &bay.id).await;
    drop(first);

    let second = redis_store(&server, Limits::default()).await;
    match second.read_log(&bay.id, &cursor, 10, None).await.unwrap() {
        Replay::Records { records, through } => {
            assert_eq!(cursor.entry, e1);
            assert_eq!(records.iter().map(|r| r.id).collect::<Vec<_>>(), vec![e2]);
            assert_eq!(through, e2);
        }
        other => panic!("a restart must not expire cursors: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evicting_memory_policies_are_refused() {
    let lru = RedisServer::start_with(&["--maxmemory-policy", "allkeys-lru"]);
    let err = unavailable(connect(&lru.url(), 2, limits()).await.map(|_| ()));
    assert!(err.contains("maxmemory-policy"), "{err}");
    assert!(err.contains("allkeys-lru"), "{err}");
    assert!(err.contains("noeviction"), "{err}");

    let ok = RedisServer::start_with(&["--maxmemory-policy", "noeviction"]);
    connect(&ok.url(), 2, limits())
        .await
        .expect("noeviction is fine");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_config_command_only_warns() {
    let server = RedisServer::start_with(&["--rename-command", "CONFIG", ""]);
    let store = connect(&server.url(), 2, limits())
        .await
        .expect("CONFIG not permitted: warn and go on");
    store.ping().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_redis_is_unavailable() {
    // Nothing listens there once the server is gone.
    let mut server = RedisServer::start();
    let url = server.url();
    server.kill();
    let t0 = Instant::now();
    let err = unavailable(connect(&url, 2, limits()).await.map(|_| ()));
    assert!(err.contains("connecting to Redis"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(10));
    let err = unavailable(connect("not a url", 2, limits()).await.map(|_| ()));
    assert!(err.contains("redis.url"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_url_at_a_plain_server_says_the_server_does_not_speak_tls() {
    let server = RedisServer::start();
    let url = server.url().replacen("redis://", "rediss://", 1);
    let err = unavailable(connect(&url, 2, limits()).await.map(|_| ()));
    assert!(err.contains("TLS handshake"), "{err}");
    assert!(err.contains("answers plain Redis"), "{err}");
    assert!(err.contains("use a redis:// URL"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_are_unavailable_never_success() {
    let mut server = RedisServer::start();
    let store = Arc::new(redis_store(&server, Limits::default()).await);
    let bay = new_bay(&*store).await;
    let (u, token) = new_participant(&*store, &bay.id, "p_user", ParticipantKind::User).await;
    let c = new_group(&*store, &bay.id, "c_1", &[(&u, Role::Member)], 5).await;
    control(&*store, &bay.id).await;
    let head = store.log_head(&bay.id).await.unwrap();

    // A blocked tail sees the server die as an error, not as "no news".
    let tail = {
        let store = store.clone();
        let bay = bay.id.clone();
        let head = head.clone();
        tokio::spawn(async move {
            store
                .read_log(&bay, &head, 10, Some(Duration::from_secs(20)))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.kill();
    let r = tokio::time::timeout(Duration::from_secs(10), tail)
        .await
        .expect("the blocked read ends when Redis dies")
        .unwrap();
    let err = unavailable(r);
    assert!(
        err.contains(&format!("sb:{{{}}}:log", bay.id)),
        "names the key: {err}"
    );

    let t0 = Instant::now();
    unavailable(store.ping().await);
    let mut lost = message(&c, &u, "lost?", None);
    lost.revision = 1;
    let err = unavailable(store.append_message(&bay.id, lost, u.kind).await);
    assert!(err.contains("appending a message"), "{err}");
    unavailable(store.authenticate(&token).await);
    unavailable(store.read_log(&bay.id, &head, 10, None).await);
    unavailable(
        store
            .read_log(&bay.id, &head, 10, Some(Duration::from_secs(1)))
            .await,
    );
    unavailable(store.set_token(&bay.id, &u.id, None).await);
    unavailable(store.conversations(&bay.id).await);
    assert!(
        t0.elapsed() < Duration::from_secs(30),
        "failures are quick: {:?}",
        t0.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_follow_the_documented_layout() {
    let server = RedisServer::start();
    let store = redis_store(&server, Limits::default()).await;
    let bay = new_bay(&store).await;
    let (u, token) = new_participant(&store, &bay.id, "p_user", ParticipantKind::User).await;
    let c = new_group(&store, &bay.id, "c_1", &[(&u, Role::Member)], 5).await;
    store
        .append(&bay.id, message(&c, &u, "hello", Some(5)), u.kind)
        .await
        .unwrap();
    let b = &bay.id;
    let expected = [
        (format!("sb:{{{b}}}:bay"), "string"),
        (format!("sb:{{{b}}}:epoch"), "string"),
        (format!("sb:{{{b}}}:log"), "stream"),
        (format!("sb:{{{b}}}:participants"), "hash"),
        (format!("sb:{{{b}}}:participant-tokens"), "hash"),
        (format!("sb:{{{b}}}:conversations"), "hash"),
        (format!("sb:{{{b}}}:conv:c_1:msgs"), "stream"),
        (format!("sb:{{{b}}}:conv:c_1:ids"), "hash"),
        (format!("sb:{{{b}}}:conv:c_1:state"), "hash"),
        (format!("sb:{{{b}}}:conv:c_1:bodies"), "hash"),
        (format!("sb:{{{b}}}:log-meta"), "hash"),
        (format!("sb:{{{b}}}:rosters"), "stream"),
        (format!("sb:{{{b}}}:revisions"), "hash"),
        (
            format!("sb:{{tok:{}}}:{}", &token.0[..4], token.0),
            "string",
        ),
    ];
    let mut keys: Vec<String> = match server.cmd(&["KEYS", "*"]) {
        redis::Value::Array(items) => items
            .into_iter()
            .map(|v| match v {
                redis::Value::BulkString(b) => String::from_utf8(b).unwrap(),
                other => panic!("{other:?}"),
            })
            .collect(),
        other => panic!("{other:?}"),
    };
    keys.sort();
    let mut want: Vec<String> = expected.iter().map(|(k, _)| k.clone()).collect();
    // The one key outside every Bay's slot: the index of Bays (the
    // console's Bay list).
    want.push("sb:bays".into());
    want.sort();
    assert_eq!(keys, want);
    assert_eq!(
        server.cmd(&["TYPE", "sb:bays"]),
        redis::Value::SimpleString("set".into())
    );
    for (key, kind) in &expected {
        assert_eq!(
            server.cmd(&["TYPE", key]),
            redis::Value::SimpleString((*kind).into()),
            "{key}"
        );
    }
    // Every Bay key hashes to the Bay's slot (asked of a cluster-mode server).
    let cluster = RedisServer::start_with(&["--cluster-enabled", "yes"]);
    let slot = |k: &str| cluster.cmd(&["CLUSTER", "KEYSLOT", k]);
    let bay_slot = slot(&expected[0].0);
    for (key, _) in &expected[..expected.len() - 1] {
        assert_eq!(slot(key), bay_slot, "{key}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_token_pointer_never_authenticates() {
    let server = RedisServer::start();
    let store = redis_store(&server, Limits::default()).await;
    let bay = new_bay(&store).await;
    let (p, old) = new_participant(&store, &bay.id, "p_agent", ParticipantKind::Agent).await;
    let new = TokenHash::of("bay_new_token_after_rotation");
    store
        .set_token(&bay.id, &p.id, Some(new.clone()))
        .await
        .unwrap();
    // Simulate a crash between the swap and the index cleanup: the old
    // token's index entry points at the participant again.
    let owner = format!(r#"{{"bay":"{}","participant":"{}"}}"#, bay.id, p.id);
    let key = format!("sb:{{tok:{}}}:{}", &old.0[..4], old.0);
    server.cmd(&["SET", &key, &owner]);
    assert_eq!(store.authenticate(&old).await.unwrap(), None);
    assert!(store.authenticate(&new).await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecodable_records_are_corrupt() {
    let server = RedisServer::start();
    let store = redis_store(&server, Limits::default()).await;
    let bay = new_bay(&store).await;
    let (p, _) = new_participant(&store, &bay.id, "p_agent", ParticipantKind::Agent).await;
    server.cmd(&[
        "HSET",
        &format!("sb:{{{}}}:participants", bay.id),
        p.id.as_str(),
        "{not json",
    ]);
    assert!(matches!(
        store.participant(&bay.id, &p.id).await,
        Err(StoreError::Corrupt { .. })
    ));
    // A key of the wrong type.
    let other = new_bay(&store).await;
    server.cmd(&["SET", &format!("sb:{{{}}}:log", other.id), "oops"]);
    let head = LogPosition {
        epoch: switchboard_protocol::cursor::Epoch("x".into()),
        entry: EntryId::ZERO,
    };
    let r = store.read_log(&other.id, &head, 10, None).await;
    assert!(matches!(r, Err(StoreError::Corrupt { .. })), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lua_date_formatter_agrees_with_chrono() {
    let server = RedisServer::start();
    let store = redis_store(&server, Limits::default()).await;
    let mut samples: Vec<u64> = vec![
        0,
        1,
        999,
        86_399_999,
        951_782_399_999,     // 2000-02-28T23:59:59.999
        951_782_400_000,     // 2000-02-29
        951_868_800_000,     // 2000-03-01
        4_107_542_400_000,   // 2100-03-01 (2100 is not a leap year)
        4_102_444_799_999,   // 2099-12-31T23:59:59.999
        1_709_164_800_123,   // 2024-02-29
        253_402_300_799_999, // 9999-12-31T23:59:59.999
    ];
    // A deterministic spread over 1970..2200.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..300 {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        samples.push((x >> 11) % 7_258_118_400_000);
    }
    for ms in samples {
        let lua = store.lua_format_ms(ms).await.unwrap();
        let chrono = chrono::DateTime::from_timestamp_millis(ms as i64)
            .unwrap()
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        assert_eq!(lua, chrono, "{ms}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_share_rounds_and_the_log() {
    let server = RedisServer::start();
    let node_a: Arc<dyn Store> = Arc::new(redis_store(&server, Limits::default()).await);
    let node_b: Arc<dyn Store> = Arc::new(redis_store(&server, Limits::default()).await);
    let bay = new_bay(&*node_a).await;
    let (a1, _) = new_participant(&*node_a, &bay.id, "p_a1", ParticipantKind::Agent).await;
    let (a2, _) = new_participant(&*node_b, &bay.id, "p_a2", ParticipantKind::Agent).await;
    let c = new_group(
        &*node_a,
        &bay.id,
        "c_1",
        &[(&a1, Role::Member), (&a2, Role::Member)],
        3,
    )
    .await;
    let head = node_b.log_head(&bay.id).await.unwrap();
    assert_eq!(head, node_a.log_head(&bay.id).await.unwrap());

    // Node B tails while both nodes write.
    let tail = {
        let node_b = node_b.clone();
        let bay = bay.id.clone();
        let head = head.clone();
        tokio::spawn(async move {
            let mut pos = head;
            let mut seen = Vec::new();
            while seen.len() < 40 {
                match node_b
                    .read_log(&bay, &pos, 7, Some(Duration::from_secs(5)))
                    .await
                    .unwrap()
                {
                    Replay::Records { records, through } => {
                        seen.extend(records.iter().map(|r| r.id));
                        pos.entry = through;
                    }
                    other => panic!("{other:?}"),
                }
            }
            seen
        })
    };
    let writers: Vec<_> = [(node_a.clone(), a1.clone()), (node_b.clone(), a2.clone())]
        .into_iter()
        .map(|(node, sender)| {
            let bay = bay.id.clone();
            let c = c.clone();
            tokio::spawn(async move {
                let mut out = Vec::new();
                for _ in 0..20 {
                    let m = message(&c, &sender, "x", Some(3));
                    out.push(node.append(&bay, m, sender.kind).await.unwrap());
                }
                out
            })
        })
        .collect();
    let mut all = Vec::new();
    for w in writers {
        all.extend(w.await.unwrap());
    }
    let suppressed = all.iter().filter(|a| a.message.routing.suppressed).count();
    assert_eq!(
        suppressed,
        40 - 2,
        "rounds 3..=40 suppressed across both nodes"
    );
    let mut entries: Vec<EntryId> = all.iter().map(|a| a.entry).collect();
    entries.sort();
    let seen = tokio::time::timeout(Duration::from_secs(10), tail)
        .await
        .expect("the tail saw every entry")
        .unwrap();
    assert_eq!(seen, entries, "one order, no gaps, no duplicates");
}

/// Calls of `command` so far, from `INFO commandstats` (inner commands of
/// scripts are counted under their own names).
fn calls(server: &RedisServer, command: &str) -> u64 {
    let info = server.text(&["INFO", "commandstats"]);
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_append_takes_the_node_clock_and_reads_the_log_meta_once() {
    let server = RedisServer::start();
    let store = redis_store(&server, Limits::default()).await;
    let bay = new_bay(&store).await;
    let (u, _) = new_participant(&store, &bay.id, "p_user", ParticipantKind::User).await;
    let c = new_group(&store, &bay.id, "c_1", &[(&u, Role::Member)], 5).await;
    store
        .append(&bay.id, message(&c, &u, "warm", None), u.kind)
        .await
        .unwrap();
    let (time0, hget0, hmget0, set0) = (
        calls(&server, "time"),
        calls(&server, "hget"),
        calls(&server, "hmget"),
        calls(&server, "set"),
    );
    let before = chrono::Utc::now();
    let mut created = Vec::new();
    for i in 0..10 {
        let stored = store
            .append(&bay.id, message(&c, &u, &format!("m{i}"), None), u.kind)
            .await
            .unwrap();
        created.push(stored.message.created_at);
    }
    let after = chrono::Utc::now();
    assert_eq!(calls(&server, "time") - time0, 0, "no TIME per append");
    // The log meta hash is read once per append (`last` and `next_trim`
    // in one HMGET), not twice: two HGETs fewer, one HMGET more.
    let (hget, hmget) = (
        calls(&server, "hget") - hget0,
        calls(&server, "hmget") - hmget0,
    );
    assert_eq!(hmget, 20, "conversation state and log meta: {hmget}");
    assert_eq!(hget, 30, "revision and the store's own reads: {hget}");
    // The epoch comes with the meta hash (`ep`): no `SET NX` of the epoch
    // key per append (no idempotency key, no budget: no SET at all).
    assert_eq!(calls(&server, "set") - set0, 0, "no SET per append");
    // The node's clock, floored: strictly increasing, ten appends within
    // the same few ms still get ten distinct createdAt.
    assert!(created.windows(2).all(|w| w[0] < w[1]), "{created:?}");
    assert!(created[0] >= before - chrono::Duration::milliseconds(1));
    assert!(
        created[9] <= after + chrono::Duration::milliseconds(20),
        "{created:?}"
    );
}

/// A reader whose position the credentials channel trimmed past is told
/// so (`Lost`), not handed the rest as if nothing were missing: each entry
/// names the one before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credentials_reader_behind_the_trim_is_told_it_lost_changes() {
    let server = RedisServer::start();
    let store = redis_store(&server, Limits::default()).await;
    let bay = new_bay(&store).await;
    let (p, _) = new_participant(&store, &bay.id, "p_agent", ParticipantKind::Agent).await;
    let start = store.credentials_head().await.unwrap();
    for suspended in [true, false, true, false] {
        store
            .set_suspended(&bay.id, Some(&p.id), suspended)
            .await
            .unwrap();
    }
    let CredentialsRead::Changes(all) = store.read_credentials(start, 10, None).await.unwrap()
    else {
        panic!("nothing trimmed yet");
    };
    assert_eq!(all.len(), 4);
    assert_eq!(
        server.cmd(&["TYPE", "sb:{credentials}:log"]),
        redis::Value::SimpleString("stream".into())
    );
    // Two changes go, as a MAXLEN trim would take them.
    server.cmd(&["XTRIM", "sb:{credentials}:log", "MAXLEN", "=", "2"]);
    for block in [None, Some(Duration::from_millis(100))] {
        assert_eq!(
            store.read_credentials(start, 10, block).await.unwrap(),
            CredentialsRead::Lost
        );
        assert_eq!(
            store.read_credentials(all[0].id, 10, block).await.unwrap(),
            CredentialsRead::Lost
        );
        // From the last change before the trim's edge, nothing is missing.
        assert_eq!(
            store.read_credentials(all[1].id, 10, block).await.unwrap(),
            CredentialsRead::Changes(all[2..].to_vec())
        );
    }
}

/// A post's read marker lives in the conversation's state hash
/// (`r:<participant>`), written with the counters; a marker the previous
/// layout wrote for a post (in `reads`) still counts, and of the two the
/// newer one wins, in `read_states` and in `mark_read`'s forward-only check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_markers_of_either_layout_are_read() {
    let server = RedisServer::start();
    let store = redis_store(&server, Limits::default()).await;
    let bay = new_bay(&store).await;
    let (u, _) = new_participant(&store, &bay.id, "p_user", ParticipantKind::User).await;
    let (v, _) = new_participant(&store, &bay.id, "p_other", ParticipantKind::User).await;
    let c = new_group(
        &store,
        &bay.id,
        "c_1",
        &[(&u, Role::Member), (&v, Role::Member)],
        5,
    )
    .await;
    let mut posted = Vec::new();
    for i in 0..4 {
        let m = store
            .append(&bay.id, message(&c, &v, &format!("m{i}"), None), v.kind)
            .await
            .unwrap();
        posted.push(m.message);
    }
    let mine = store
        .append(&bay.id, message(&c, &u, "mine", None), u.kind)
        .await
        .unwrap()
        .message;
    let b = &bay.id;
    let state = format!("sb:{{{b}}}:conv:c_1:state");
    let reads = format!("sb:{{{b}}}:conv:c_1:reads");
    assert_eq!(
        server.text(&["HGET", &state, "r:p_user"]),
        format!("5 {}", mine.id)
    );
    assert_eq!(server.cmd(&["EXISTS", &reads]), redis::Value::Int(0));
    let states = store
        .read_states(b, &u.id, std::slice::from_ref(&c.id))
        .await
        .unwrap();
    assert_eq!(states[0].last_read.as_ref(), Some(&mine.id));
    assert_eq!(states[0].unread, 0);
    // The other participant read nothing: all but its own posts unread.
    let states = store
        .read_states(b, &v.id, std::slice::from_ref(&c.id))
        .await
        .unwrap();
    assert_eq!(states[0].last_read.as_ref(), Some(&posted[3].id));
    assert_eq!(states[0].unread, 1);
    // An older marker in `reads` (explicit, or a post of the previous
    // layout) does not move it back...
    let older = format!("2 {}", posted[1].id);
    server.cmd(&["HSET", &reads, "p_user", &older]);
    let states = store
        .read_states(b, &u.id, std::slice::from_ref(&c.id))
        .await
        .unwrap();
    assert_eq!(states[0].last_read.as_ref(), Some(&mine.id));
    let conversation = c.reference();
    assert_eq!(
        store
            .mark_read(b, &conversation, &u.id, &posted[2])
            .await
            .unwrap(),
        None,
        "behind the post's marker: nothing to log"
    );
    // ...and a newer one there (a post the previous layout stored)
    // counts: only what follows it is unread.
    server.cmd(&["HDEL", &state, "r:p_other"]);
    server.cmd(&["HSET", &reads, "p_other", &format!("5 {}", mine.id)]);
    let states = store
        .read_states(b, &v.id, std::slice::from_ref(&c.id))
        .await
        .unwrap();
    assert_eq!(states[0].last_read.as_ref(), Some(&mine.id));
    assert_eq!(states[0].unread, 0);
}

/// The revision `c` is at now (what a routed append carries).
async fn revision(
    store: &dyn Store,
    bay: &BayId,
    c: &switchboard_actors::model::Conversation,
) -> u64 {
    store
        .conversation_revisioned(bay, &c.id)
        .await
        .unwrap()
        .unwrap()
        .revision
}

/// Appends that arrive for a Bay while its batches are in Redis (two at
/// most) go together in one script (group commit), and each is answered on
/// its own: a stale revision and a message whose conversation state has
/// the wrong type fail alone, the rest are stored with `seq`, `createdAt`
/// and log ids in one order. Redis is paused (`CLIENT PAUSE … WRITE`) so
/// the first two appends are still in flight when the others arrive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_waiting_for_a_bay_go_in_one_batch_and_are_answered_apart() {
    let server = RedisServer::start();
    let store = Arc::new(redis_store(&server, Limits::default()).await);
    let bay = new_bay(&*store).await;
    let (u, _) = new_participant(&*store, &bay.id, "p_user", ParticipantKind::User).await;
    let good = new_group(&*store, &bay.id, "c_good", &[(&u, Role::Member)], 5).await;
    let broken = new_group(&*store, &bay.id, "c_broken", &[(&u, Role::Member)], 5).await;
    store
        .append(&bay.id, message(&good, &u, "warm", None), u.kind)
        .await
        .unwrap();
    let state = switchboard_actors::store::redis::keys::BayKeys::new(&bay.id)
        .conversation_state(&broken.id);
    server.cmd(&["SET", &state, "not a hash"]);
    let (good_rev, broken_rev) = (
        revision(&*store, &bay.id, &good).await,
        revision(&*store, &bay.id, &broken).await,
    );
    let evalsha0 = calls(&server, "evalsha");

    server.cmd(&["CLIENT", "PAUSE", "300", "WRITE"]);
    let send = |content: &str, conversation: &switchboard_actors::model::Conversation, rev: u64| {
        let store = store.clone();
        let bay = bay.id.clone();
        let mut m = message(conversation, &u, content, None);
        m.revision = rev;
        let kind = u.kind;
        tokio::spawn(async move { store.append_message(&bay, m, kind).await })
    };
    let first = send("first", &good, good_rev);
    let second = send("second", &good, good_rev);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut rest = Vec::new();
    for i in 0..8 {
        rest.push(send(&format!("m{i}"), &good, good_rev));
    }
    let stale = send("stale", &good, good_rev + 7);
    let failed = send("broken", &broken, broken_rev);
    let tail = send("tail", &good, good_rev);

    let appended = |o: AppendOutcome| match o {
        AppendOutcome::Appended(a) => *a,
        other => panic!("expected Appended, got {other:?}"),
    };
    let first = appended(first.await.unwrap().unwrap());
    let second = appended(second.await.unwrap().unwrap());
    let mut stored = vec![first, second];
    for r in rest {
        stored.push(appended(r.await.unwrap().unwrap()));
    }
    assert!(matches!(
        stale.await.unwrap().unwrap(),
        AppendOutcome::Stale
    ));
    match failed.await.unwrap() {
        Err(StoreError::Corrupt { cause, .. }) => assert!(cause.contains("WRONGTYPE"), "{cause}"),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    stored.push(appended(tail.await.unwrap().unwrap()));
    let batches = calls(&server, "evalsha") - evalsha0;
    // Two batches in flight at most: the first two appends, each alone,
    // then everything that waited behind them.
    assert!(batches <= 3, "{batches} calls for 11 appends");
    // The spawned senders arrive in any order; whatever it was, seq,
    // createdAt and log entries agree on it.
    stored.sort_by_key(|a| a.message.seq);
    let seqs: Vec<u64> = stored.iter().map(|a| a.message.seq).collect();
    assert_eq!(seqs, (2..=12).collect::<Vec<u64>>());
    assert!(stored.windows(2).all(|w| w[0].entry < w[1].entry));
    assert!(stored
        .windows(2)
        .all(|w| w[0].message.created_at < w[1].message.created_at));
    // The log holds exactly the stored messages, chained, after the warm-up.
    let history = store
        .messages_since(&bay.id, &good.id, chrono::DateTime::UNIX_EPOCH, 100)
        .await
        .unwrap();
    assert_eq!(history.len(), 12);
    let head = store.log_head(&bay.id).await.unwrap();
    assert_eq!(head.entry, stored.last().unwrap().entry);
}

/// A post queued behind batches stuck in Redis is answered `Unavailable`
/// within the command timeout counted from its arrival (not the stuck
/// batches' timeouts plus its own), and, never sent, is never stored:
/// its 503 is not one of those that may have been applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_queued_behind_a_stuck_batch_times_out_unsent() {
    let server = RedisServer::start();
    let store = Arc::new(redis_store(&server, Limits::default()).await);
    let bay = new_bay(&*store).await;
    let (u, _) = new_participant(&*store, &bay.id, "p_user", ParticipantKind::User).await;
    let c = new_group(&*store, &bay.id, "c_1", &[(&u, Role::Member)], 5).await;
    store
        .append(&bay.id, message(&c, &u, "warm", None), u.kind)
        .await
        .unwrap();
    let revision = revision(&*store, &bay.id, &c).await;
    server.cmd(&["CLIENT", "PAUSE", "6500", "WRITE"]);
    let started = Instant::now();
    let send = |content: &str| {
        let store = store.clone();
        let bay = bay.id.clone();
        let mut m = message(&c, &u, content, None);
        m.revision = revision;
        let kind = u.kind;
        tokio::spawn(async move { store.append_message(&bay, m, kind).await })
    };
    // Two batches in flight (stuck), then one that waits for them. The
    // pause between them keeps the first runner from taking both stuck
    // posts in one batch, which would leave the second slot to "queued".
    let first = send("stuck 1");
    // Redis counts a client held by the pause as blocked.
    let held = Instant::now();
    while !server
        .text(&["INFO", "clients"])
        .contains("blocked_clients:1")
    {
        assert!(held.elapsed() < Duration::from_secs(3), "never sent");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let second = send("stuck 2");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stuck = [first, second];
    let queued = send("queued");
    let answer = queued.await.unwrap();
    assert!(
        matches!(answer, Err(StoreError::Unavailable { .. })),
        "{answer:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "answered after {:?}: one timeout, not two",
        started.elapsed()
    );
    for s in stuck {
        let _ = s.await.unwrap();
    }
    // Once Redis resumes, the stuck scripts may well run (their 503s are
    // the ambiguous kind); the queued post was never sent.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let history = store
        .messages_since(&bay.id, &c.id, chrono::DateTime::UNIX_EPOCH, 100)
        .await
        .unwrap();
    let contents: Vec<&str> = history.iter().map(|m| m.content.as_str()).collect();
    assert!(!contents.contains(&"queued"), "{contents:?}");
}

/// A heartbeat of a node that predates record versions (no `seq`) may
/// change without a new version: while one is live the engine says it
/// has no presence version, and the publisher reads every tick.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_without_a_version_leaves_no_presence_version() {
    let server = RedisServer::start();
    let store = redis_store(&server, Limits::default()).await;
    let bay = new_bay(&store).await;
    assert!(store.presence_version(&bay.id).await.unwrap().is_some());
    let until = switchboard_actors::store::now_ms() + 60_000;
    server.cmd(&[
        "HSET",
        &format!("sb:{{{}}}:presence", bay.id),
        "old_node",
        &format!(r#"{{"until":{until},"online":["p_rex"]}}"#),
    ]);
    assert_eq!(store.presence_version(&bay.id).await.unwrap(), None);
    let records = store.presence_records(&bay.id).await.unwrap();
    assert_eq!(records.len(), 1);
    assert!(records[0].session);
}
