mod common;

use common::*;

#[tokio::test]
async fn human_posts_and_agent_receives_over_both_transports() {
    posts_reach_both_transports(Gateway::spawn().await).await;
}

/// The same with the feeds and conversation actors on two threads of
/// their own instead of the HTTP workers' (`actor_threads`), and several
/// workers, so the post, its actor, the feed and the sessions hop threads.
#[tokio::test]
async fn posts_reach_both_transports_with_dedicated_actor_threads() {
    let opts = Opts::default()
        .env("SWITCHBOARD_ACTOR_THREADS", "2")
        .env("SWITCHBOARD_WORKERS", "3");
    posts_reach_both_transports(Gateway::spawn_with(opts).await).await;
}

async fn posts_reach_both_transports(gw: Gateway) {
    let w = World::create(&gw, "b1").await;
    let (s, first) = gw.updates(&w.rex, None, "1").await;
    assert_eq!(s, 200, "{first}");
    let cursor = first["cursor"].as_str().unwrap().to_owned();
    let mut ws = gw.ws_ready(&w.brain, None).await;
    let (_, _) = ws.read_batch().await;
    let (s, posted) = gw.post_message(&w.ana, "group", "hello @Rex").await;
    assert_eq!(s, 201, "{posted}");
    let (s, got) = gw.updates(&w.rex, Some(&cursor), "5").await;
    assert_eq!(s, 200);
    assert_eq!(got["events"][0]["message"]["id"], posted["id"]);
    assert_eq!(got["events"][0]["message"]["shouldRespond"], true);
    let (events, _) = ws.read_batch().await;
    assert_eq!(events[0]["message"]["id"], posted["id"]);
    assert_eq!(events[0]["message"]["shouldRespond"], false);
}
