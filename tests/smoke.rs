mod common;

use common::*;

#[tokio::test]
async fn human_posts_and_agent_receives_over_both_transports() {
    let gw = Gateway::spawn().await;
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
