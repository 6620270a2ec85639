//! The Redis engine in cluster mode on a real three-master Redis Cluster:
//! a Bay's slot moved between masters under a live writer and a tailing
//! reader, the start-up guards on every primary, seeds, and scripts the
//! cluster has forgotten. (The whole conformance suite also runs in cluster
//! mode: `store_conformance.rs`, `redis_cluster_mode`.)

mod common;

use common::redis::{as_text, RedisCluster};
use common::{message, new_bay, new_group, new_participant, redis_cluster_store, Append, Limits};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchboard_actors::store::log::LogEvent;
use switchboard_actors::store::prelude::*;
use switchboard_actors::store::redis::{connect_cluster, RedisLimits};
use switchboard_actors::store::{Replay, Store, StoreError};
use switchboard_protocol::cursor::EntryId;
use switchboard_protocol::ids::MessageId;
use switchboard_protocol::model::{ParticipantKind, Role};

fn limits() -> RedisLimits {
    RedisLimits {
        replay_window: Duration::from_secs(900),
        max_entries: 10_000,
    }
}

/// Moves `slot` from node `src` to node `dst` the way `redis-cli --cluster
/// reshard` does, a few keys at a time with a pause between batches (so
/// the writer and the reader run into every intermediate state: keys on
/// both nodes, `ASK`, `TRYAGAIN`), then hands the slot over on every master.
fn migrate_slot(cluster: &RedisCluster, slot: u16, src: usize, dst: usize) -> usize {
    let slot_s = slot.to_string();
    let (src_id, dst_id) = (cluster.node_id(src), cluster.node_id(dst));
    let dst_port = cluster.nodes[dst].port().to_string();
    cluster.nodes[dst].cmd(&["CLUSTER", "SETSLOT", &slot_s, "IMPORTING", &src_id]);
    cluster.nodes[src].cmd(&["CLUSTER", "SETSLOT", &slot_s, "MIGRATING", &dst_id]);
    let mut moved = 0;
    loop {
        let keys = match cluster.nodes[src].cmd(&["CLUSTER", "GETKEYSINSLOT", &slot_s, "2"]) {
            redis::Value::Array(keys) => keys.into_iter().map(as_text).collect::<Vec<_>>(),
            other => panic!("GETKEYSINSLOT answered {other:?}"),
        };
        if keys.is_empty() {
            break;
        }
        let mut args = vec!["MIGRATE", "127.0.0.1", &dst_port, "", "0", "5000", "KEYS"];
        args.extend(keys.iter().map(String::as_str));
        let reply = as_text(cluster.nodes[src].cmd(&args));
        assert!(
            reply == "OK" || reply == "NOKEY",
            "MIGRATE answered {reply}"
        );
        moved += keys.len();
        std::thread::sleep(Duration::from_millis(40));
    }
    // The target first, then the source, then the rest (as redis-cli does).
    let mut order = vec![dst, src];
    order.extend((0..cluster.nodes.len()).filter(|i| *i != src && *i != dst));
    for i in order {
        cluster.nodes[i].cmd(&["CLUSTER", "SETSLOT", &slot_s, "NODE", &dst_id]);
    }
    moved
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moving_a_bays_slot_between_masters_loses_no_acknowledged_message() {
    let cluster = Arc::new(RedisCluster::start());
    let store: Arc<dyn Store> = Arc::new(redis_cluster_store(&cluster, Limits::default()).await);
    let bay = new_bay(&*store).await;
    let (ana, _) = new_participant(&*store, &bay.id, "p_ana", ParticipantKind::User).await;
    let c = new_group(&*store, &bay.id, "c_1", &[(&ana, Role::Member)], 2).await;
    let slot = cluster.keyslot(&format!("sb:{{{}}}:log", bay.id));
    let src = cluster.owner_of(slot);
    let dst = (src + 1) % cluster.nodes.len();
    let start = store.log_head(&bay.id).await.unwrap();

    let stop_writing = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicUsize::new(0));
    // The writer: one message at a time; a failed append is retried as a
    // new message (a failure may or may not have been applied, so only
    // acknowledged messages are promised).
    let writer = {
        let (store, bay, c, ana) = (store.clone(), bay.id.clone(), c.clone(), ana.clone());
        let (stop, written) = (stop_writing.clone(), written.clone());
        tokio::spawn(async move {
            let mut acked: Vec<(MessageId, EntryId)> = Vec::new();
            let mut failures = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                let m = message(&c, &ana, "moving", None);
                let id = m.message.id.clone();
                match store.append(&bay, m, ana.kind).await {
                    Ok(appended) => {
                        assert_eq!(appended.message.id, id);
                        acked.push((id, appended.entry));
                        written.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(err) => {
                        assert!(matches!(err, StoreError::Unavailable { .. }), "{err}");
                        failures.push((id, err.to_string()));
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
            (acked, failures)
        })
    };
    // The reader: tails with blocking reads, as a Bay feed does.
    let stop_reading = Arc::new(AtomicBool::new(false));
    let reader = {
        let (store, bay, stop) = (store.clone(), bay.id.clone(), stop_reading.clone());
        tokio::spawn(async move {
            let mut pos = start;
            let mut seen: Vec<(MessageId, EntryId)> = Vec::new();
            let mut errors = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                match store
                    .read_log(&bay, &pos, 50, Some(Duration::from_millis(500)))
                    .await
                {
                    Ok(Replay::Records { records, through }) => {
                        for r in &records {
                            if let LogEvent::Message { message, .. } = &r.event {
                                seen.push((message.id.clone(), r.id));
                            }
                        }
                        pos.entry = through;
                    }
                    Ok(other) => panic!("the cursor must stay valid across the move: {other:?}"),
                    Err(err) => {
                        errors.push(err.to_string());
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
            (seen, errors)
        })
    };

    // Let both run a little, move the slot, let them run a little more.
    let deadline = Instant::now() + Duration::from_secs(20);
    while written.load(Ordering::SeqCst) < 40 {
        assert!(Instant::now() < deadline, "the writer is stuck");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before_move = written.load(Ordering::SeqCst);
    let moved = {
        let cluster = cluster.clone();
        tokio::task::spawn_blocking(move || migrate_slot(&cluster, slot, src, dst))
            .await
            .unwrap()
    };
    let after_move = written.load(Ordering::SeqCst);
    let stats: Vec<String> = cluster
        .nodes
        .iter()
        .map(|n| n.text(&["INFO", "errorstats"]))
        .collect();
    eprintln!(
        "during the move: {} writes; {stats:?}",
        after_move - before_move
    );
    while written.load(Ordering::SeqCst) < after_move + 40 {
        assert!(
            Instant::now() < deadline,
            "the writer is stuck after the move"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop_writing.store(true, Ordering::SeqCst);
    let (acked, failures) = writer.await.unwrap();

    // The reader catches up with the last acknowledged entry.
    let last = acked.last().unwrap().1;
    let caught_up = Instant::now() + Duration::from_secs(10);
    loop {
        let head = store.log_head(&bay.id).await.unwrap();
        if head.entry >= last {
            break;
        }
        assert!(Instant::now() < caught_up, "the head never reached {last}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop_reading.store(true, Ordering::SeqCst);
    let (seen, read_errors) = tokio::time::timeout(Duration::from_secs(10), reader)
        .await
        .expect("the reader stops")
        .unwrap();

    // The slot really moved, and the Bay's keys with it.
    assert!(moved >= 5, "the Bay had keys to move ({moved})");
    assert_eq!(cluster.owner_of(slot), dst);
    let log_key = format!("sb:{{{}}}:log", bay.id);
    assert_eq!(
        cluster.nodes[src].text(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]),
        "0"
    );
    let on_dst: usize = cluster.nodes[dst]
        .text(&["XLEN", &log_key])
        .parse()
        .unwrap();
    assert!(on_dst >= acked.len(), "{on_dst} entries on the new master");

    // Every acknowledged message was read, once, in the order acknowledged;
    // the log has no duplicate and stays ordered.
    let acked_ids: HashSet<&MessageId> = acked.iter().map(|(id, _)| id).collect();
    let seen_acked: Vec<&(MessageId, EntryId)> = seen
        .iter()
        .filter(|(id, _)| acked_ids.contains(id))
        .collect();
    let expected: Vec<&(MessageId, EntryId)> = acked.iter().collect();
    let missing: Vec<&MessageId> = acked
        .iter()
        .filter(|(id, _)| !seen.iter().any(|(s, _)| s == id))
        .map(|(id, _)| id)
        .collect();
    assert!(
        missing.is_empty(),
        "acknowledged but never read: {missing:?} (write failures: {failures:?}, read errors: {read_errors:?})"
    );
    assert_eq!(
        seen_acked, expected,
        "same messages, same order, same entries"
    );
    let distinct: HashSet<&MessageId> = seen.iter().map(|(id, _)| id).collect();
    assert_eq!(distinct.len(), seen.len(), "no message read twice");
    assert!(seen.windows(2).all(|w| w[0].1 < w[1].1), "log order");
    // Only failed writes may show up unacknowledged (at-least-once).
    let failed: HashSet<&MessageId> = failures.iter().map(|(id, _)| id).collect();
    assert!(seen
        .iter()
        .all(|(id, _)| acked_ids.contains(id) || failed.contains(id)));
    eprintln!(
        "moved {moved} keys of slot {slot} from node {src} to node {dst}; {} messages \
         acknowledged, {} writes failed and were retried, {} read errors",
        acked.len(),
        failures.len(),
        read_errors.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_primary_must_not_evict() {
    let cluster = RedisCluster::start();
    cluster.nodes[2].cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
    let err = match connect_cluster(&cluster.seeds(), 2, limits()).await {
        Err(e @ StoreError::Unavailable { .. }) => e.to_string(),
        Err(other) => panic!("expected Unavailable, got {other:?}"),
        Ok(_) => panic!("an evicting primary must be refused"),
    };
    assert!(err.contains("allkeys-lru"), "{err}");
    let port = cluster.nodes[2].port().to_string();
    assert!(err.contains(&port), "names the primary: {err}");
    cluster.nodes[2].cmd(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    connect_cluster(&cluster.seeds(), 2, limits())
        .await
        .expect("every primary is noeviction now");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_live_seed_is_enough_and_a_dead_cluster_is_unavailable() {
    let cluster = RedisCluster::start();
    // A dead seed first, then one live node: the others are found through it.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("redis://127.0.0.1:{}", l.local_addr().unwrap().port())
    };
    let store = connect_cluster(&[dead.clone(), cluster.seeds()[1].clone()], 2, limits())
        .await
        .expect("one live seed is enough");
    let bay = new_bay(&store).await;
    assert!(store.bay(&bay.id).await.unwrap().is_some());

    let t0 = Instant::now();
    match connect_cluster(&[dead], 2, limits()).await {
        Err(StoreError::Unavailable { doing, .. }) => assert_eq!(doing, "connecting to Redis"),
        Err(other) => panic!("expected Unavailable, got {other:?}"),
        Ok(_) => panic!("nothing listens there"),
    }
    assert!(t0.elapsed() < Duration::from_secs(10));
    let none: [&str; 0] = [];
    assert!(connect_cluster(&none, 2, limits()).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_the_cluster_forgot_are_sent_again() {
    let cluster = RedisCluster::start();
    let store = redis_cluster_store(&cluster, Limits::default()).await;
    let bay = new_bay(&store).await;
    let (ana, _) = new_participant(&store, &bay.id, "p_ana", ParticipantKind::User).await;
    let c = new_group(&store, &bay.id, "c_1", &[(&ana, Role::Member)], 2).await;
    store
        .append(&bay.id, message(&c, &ana, "before", None), ana.kind)
        .await
        .unwrap();
    // A restarted or failed-over primary has an empty script cache.
    for node in &cluster.nodes {
        node.cmd(&["SCRIPT", "FLUSH"]);
    }
    let appended = store
        .append(&bay.id, message(&c, &ana, "after", None), ana.kind)
        .await
        .unwrap();
    assert_eq!(appended.message.content, "after");
    let head = store.log_head(&bay.id).await.unwrap();
    assert_eq!(head.entry, appended.entry);
}
