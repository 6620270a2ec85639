//! What one presence record of a large Bay costs on the Redis engine: the
//! node's write every `presence_interval`, and the publisher's read every
//! `presence_tick` (BENCHMARKS.md, "Presence records on Redis").
//!
//! ```text
//! cargo run --release -p switchboard-actors --example presence_records -- \
//!     redis://127.0.0.1:6379 [PARTICIPANTS]
//! ```
//!
//! Writes a record of PARTICIPANTS (default 10,000) entries six times
//! unchanged, and reads the Bay's records three times after each write.
//! Prints the time of each call (ms). Use a Redis of its own: it creates a
//! Bay named `bench-presence-<unix ms>`.

use std::time::{Duration, Instant};
use switchboard_actors::model::Bay;
use switchboard_actors::store::prelude::*;
use switchboard_actors::store::redis::{connect, RedisLimits};
use switchboard_actors::store::ParticipantPresence;
use switchboard_protocol::ids::{BayId, ParticipantId};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .ok_or("usage: presence_records REDIS_URL [PARTICIPANTS]")?;
    let count: u64 = args.next().map_or(Ok(10_000), |n| n.parse())?;
    let limits = RedisLimits {
        replay_window: Duration::from_secs(900),
        max_entries: 10_000,
    };
    let store = connect(&url, 4, limits).await?;
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?;
    let bay = Bay {
        id: BayId(format!("bench-presence-{}", stamp.as_millis())),
        name: "presence bench".into(),
    };
    store.create_bay(bay.clone()).await?;
    let entries: Vec<ParticipantPresence> = (0..count)
        .map(|i| ParticipantPresence {
            session: true,
            active_ms: 1_700_000_000_000 + i,
            ..ParticipantPresence::new(ParticipantId(format!("p_{i:08}_abcdefgh")))
        })
        .collect();
    let ms = |d: Duration| format!("{:.2}", d.as_secs_f64() * 1e3);
    for round in 0..6 {
        let t = Instant::now();
        store
            .set_presence(
                &bay.id,
                "bench-node",
                entries.clone(),
                Duration::from_secs(60),
            )
            .await?;
        let write = t.elapsed();
        let mut reads = Vec::new();
        for _ in 0..3 {
            let t = Instant::now();
            let read = store.presence_records(&bay.id).await?.len();
            if read != entries.len() {
                return Err(format!("read {read} entries, wrote {}", entries.len()).into());
            }
            reads.push(ms(t.elapsed()));
        }
        println!(
            "round {round}: write {} ms, reads {} ms",
            ms(write),
            reads.join(" / ")
        );
    }
    Ok(())
}
