//! The churn scenario: does a long-lived node give back what short-lived
//! use took? Against one gateway (release build, normally on Redis) it
//! runs, per round:
//!
//! 1. `bays` Bays touched once: created through the admin API with one
//!    agent, whose token then calls `GET /me` once (authenticating starts
//!    the Bay's feed on the node and caches the token);
//! 2. `conversations` GROUPs in one Bay (a user and eight agents), one
//!    message posted in each (each post starts a conversation actor);
//! 3. `ws_cuts` WebSocket handshakes that `hello` with a cursor from before
//!    step 2 (a long replay) and are cut (TCP reset) after the first event;
//! 4. `poll_aborts` `/updates` calls aborted (TCP reset) while held.
//!
//! It samples the node (gauges of `/metrics`, RSS, fds; Redis clients)
//! before, at the peak (right after the round) and after `settle` seconds
//! of quiet, which must exceed `timing.actor_idle_timeout` plus the
//! node's 60 s housekeeping tick. Each round touches new Bays, so if the
//! "after" figures of round 2 match round 1's, what the node keeps does
//! not grow with the Bays ever touched.

use crate::admin::{redis_info, snapshot, Node};
use crate::scenario::{merge, Common};
use crate::target::anyhow_lite::{bail, Context, Result};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

/// Agents in every conversation of the big Bay, and concurrent WebSocket
/// cuts (one per agent).
const WS_LANES: usize = 8;

/// Sizes of one churn round.
#[derive(Clone, Copy, Debug)]
pub struct ChurnSizes {
    /// Bays touched once per round.
    pub bays: usize,
    /// Conversations created (and posted to once) in one Bay per round.
    pub conversations: usize,
    /// WebSocket handshakes cut mid-replay per round.
    pub ws_cuts: usize,
    /// `/updates` calls aborted while held per round.
    pub poll_aborts: usize,
    /// Rounds (each touches new Bays).
    pub rounds: usize,
    /// Quiet seconds after each round before the "after" sample.
    pub settle_secs: u64,
}

/// Runs `n` jobs, `width` at a time; counts the failed ones (the first
/// error is printed).
async fn run_all<F, Fut>(n: usize, width: usize, job: F) -> u64
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let failed = AtomicU64::new(0);
    let failed_ref = &failed;
    futures_util::stream::iter((0..n).map(&job))
        .for_each_concurrent(width, |fut| async move {
            if let Err(e) = fut.await {
                if failed_ref.fetch_add(1, Relaxed) == 0 {
                    eprintln!("churn: first failure: {e}");
                }
            }
        })
        .await;
    failed.into_inner()
}

/// A TCP connection to `addr` that closes with a reset (SO_LINGER 0)
/// when dropped: the peer sees an abort, not an orderly close.
async fn resetting_stream(addr: &str) -> Result<TcpStream> {
    let tcp = TcpStream::connect(addr).await.context("connect")?;
    tcp.set_zero_linger().context("linger")?;
    Ok(tcp)
}

/// One WebSocket that resumes from `cursor` and is cut after its first
/// `event` frame (or its first `cursor` frame, if the replay is empty):
/// returning drops the socket, which resets the connection mid-replay.
async fn cut_mid_replay(addr: &str, token: &str, cursor: &str) -> Result<()> {
    let tcp = resetting_stream(addr).await?;
    let mut req = format!("ws://{addr}/api/agent-api/ws")
        .into_client_request()
        .context("request")?;
    req.headers_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().context("header")?,
    );
    let (mut ws, _) = tokio_tungstenite::client_async(req, tcp)
        .await
        .context("handshake")?;
    ws.send(Message::text(
        json!({"t": "hello", "resume": cursor}).to_string(),
    ))
    .await
    .context("hello")?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let frame = tokio::time::timeout_at(deadline, ws.next())
            .await
            .context("no event within 10 s")?;
        match frame {
            Some(Ok(Message::Text(t))) if t.contains("\"t\":\"event\"") => return Ok(()),
            Some(Ok(Message::Text(t))) if t.contains("\"t\":\"cursor\"") => return Ok(()),
            Some(Ok(_)) => continue,
            other => bail!("socket ended before an event: {other:?}"),
        }
    }
}

/// One `/updates` call held for `hold`, then aborted.
async fn abort_held_poll(addr: &str, token: &str, hold: Duration) -> Result<()> {
    let mut tcp = resetting_stream(addr).await?;
    let req = format!(
        "GET /api/agent-api/updates?wait=30 HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\r\n"
    );
    tcp.write_all(req.as_bytes()).await.context("write")?;
    tokio::time::sleep(hold).await;
    Ok(())
}

/// The cursor `token` would resume from now (a `/updates?wait=1`).
async fn current_cursor(node: &Node, token: &str) -> Result<String> {
    let v: Value = node
        .http
        .get(node.url("/api/agent-api/updates?wait=1"))
        .bearer_auth(token)
        .send()
        .await
        .context("updates")?
        .json()
        .await
        .context("updates answer")?;
    v["cursor"]
        .as_str()
        .map(str::to_owned)
        .context("updates answer without a cursor")
}

/// One round; returns its timings and failure counts.
async fn round(node: &Node, r: usize, sizes: ChurnSizes, width: usize) -> Result<Value> {
    let t0 = Instant::now();
    // 1. Bays touched once.
    let bays_failed = run_all(sizes.bays, width, |i| async move {
        let bay = format!("churn{r}-b{i}");
        node.create_bay(&bay).await?;
        let token = node.create_participant(&bay, "agent", "agent").await?;
        match node.agent_get(&token, "/me").await? {
            200 => Ok(()),
            s => bail!("GET /me: {s}"),
        }
    })
    .await;
    let bays_secs = t0.elapsed().as_secs_f64();
    eprintln!("churn round {r}: {} bays in {bays_secs:.0} s", sizes.bays);

    // 2. Conversations in one Bay.
    let t1 = Instant::now();
    let bay = format!("churn{r}-big");
    node.create_bay(&bay).await?;
    let user = node.create_participant(&bay, "user", "user").await?;
    let mut agents = Vec::new();
    for a in 0..50 {
        agents.push(
            node.create_participant(&bay, &format!("agent{a}"), "agent")
                .await?,
        );
    }
    let (bay_ref, user_ref) = (&bay, &user);
    let members: Vec<String> = std::iter::once("user".to_owned())
        .chain((0..WS_LANES).map(|a| format!("agent{a}")))
        .collect();
    let members: Vec<&str> = members.iter().map(String::as_str).collect();
    let members_ref = &members;
    let mut conversations_failed = run_all(sizes.conversations, width, |i| async move {
        node.create_conversation(bay_ref, &format!("c{i}"), "GROUP", members_ref)
            .await
    })
    .await;
    // A cursor from after the conversations were created and before
    // anything was posted: resuming from it replays every message below
    // (agents 0–7 are in every conversation), and no roster change.
    let old_cursor = current_cursor(node, &agents[0]).await?;
    conversations_failed += run_all(sizes.conversations, width, |i| async move {
        node.post_message(user_ref, &format!("c{i}"), &format!("hello {i}"))
            .await
            .map(drop)
    })
    .await;
    let conversations_secs = t1.elapsed().as_secs_f64();
    eprintln!(
        "churn round {r}: {} conversations in {conversations_secs:.0} s",
        sizes.conversations
    );

    // 3. WebSocket handshakes cut mid-replay: one lane per agent, so no
    // socket is displaced by its own token's next one.
    let t2 = Instant::now();
    let (addr, cursor, agents_ref) = (&node.addr, &old_cursor, &agents);
    let ws_failed = AtomicU64::new(0);
    let ws_failed_ref = &ws_failed;
    run_all(WS_LANES, WS_LANES, |lane| async move {
        for _ in (lane..sizes.ws_cuts).step_by(WS_LANES) {
            if let Err(e) = cut_mid_replay(addr, &agents_ref[lane], cursor).await {
                if ws_failed_ref.fetch_add(1, Relaxed) == 0 {
                    eprintln!("churn: first ws failure: {e}");
                }
            }
        }
        Ok(())
    })
    .await;
    let ws_failed = ws_failed.into_inner();
    let ws_secs = t2.elapsed().as_secs_f64();
    eprintln!(
        "churn round {r}: {} ws cuts in {ws_secs:.0} s",
        sizes.ws_cuts
    );

    // 4. Aborted /updates, spread over the other agents.
    let t3 = Instant::now();
    let polls_failed = run_all(sizes.poll_aborts, 64, |i| async move {
        let token = &agents_ref[WS_LANES + i % (agents_ref.len() - WS_LANES)];
        abort_held_poll(addr, token, Duration::from_millis(300)).await
    })
    .await;
    let polls_secs = t3.elapsed().as_secs_f64();
    eprintln!(
        "churn round {r}: {} aborted polls in {polls_secs:.0} s",
        sizes.poll_aborts
    );
    Ok(json!({
        "bays_secs": bays_secs,
        "bays_failed": bays_failed,
        "conversations_secs": conversations_secs,
        "conversations_failed": conversations_failed,
        "ws_cut_secs": ws_secs,
        "ws_cut_failed": ws_failed,
        "poll_abort_secs": polls_secs,
        "poll_abort_failed": polls_failed,
    }))
}

/// Node and Redis figures at one instant, labelled `at`.
async fn sample_all(node: &Node, pid: Option<u32>, redis: Option<&str>, at: &str) -> Value {
    let mut v = snapshot(node, pid).await;
    if let Some(addr) = redis {
        v["redis"] = redis_info(
            addr,
            &["connected_clients", "used_memory", "blocked_clients"],
        );
    }
    v["at"] = json!(at);
    eprintln!("churn {at}: {v}");
    v
}

/// Runs the scenario (see the module docs).
///
/// # Errors
/// When the server does not start or provisioning the big Bay fails.
pub async fn churn(common: &Common, sizes: ChurnSizes) -> Result<Value> {
    let mut servers = common.start_with_env(&[])?;
    let addr = servers.addrs.first().context("no server")?.clone();
    let node = Node::new(&addr, common.inflight.max(8))?;
    let pid = servers.pids.last().copied();
    let redis = servers.aux_addrs.first().cloned();
    // Let the node settle before the baseline.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut samples = vec![sample_all(&node, pid, redis.as_deref(), "baseline").await];
    let mut rounds = Vec::new();
    for r in 1..=sizes.rounds {
        let timings = round(&node, r, sizes, common.inflight.max(1)).await?;
        samples.push(sample_all(&node, pid, redis.as_deref(), &format!("peak{r}")).await);
        let settle = Instant::now();
        while settle.elapsed() < Duration::from_secs(sizes.settle_secs) {
            tokio::time::sleep(Duration::from_secs(10)).await;
            // A scrape also prunes the node's actor tables.
            let v = snapshot(&node, pid).await;
            eprintln!(
                "churn settling {:>3} s: feeds {} conversations {} blocking {} rss {} KiB",
                settle.elapsed().as_secs(),
                v["feeds"],
                v["conversation_actors"],
                v["blocking_redis_connections"],
                v["rss_kib"]
            );
        }
        samples.push(sample_all(&node, pid, redis.as_deref(), &format!("after{r}")).await);
        rounds.push(timings);
    }
    let alive = servers.alive();
    servers.stop();
    Ok(merge(
        common.base("churn", &servers),
        json!({
            "bays_per_round": sizes.bays,
            "conversations_per_round": sizes.conversations,
            "ws_cuts_per_round": sizes.ws_cuts,
            "poll_aborts_per_round": sizes.poll_aborts,
            "settle_secs": sizes.settle_secs,
            "server_survived": alive,
            "rounds": rounds,
            "samples": samples,
        }),
    ))
}
