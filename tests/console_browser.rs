//! The operator console in a real browser: headless Chromium (Debian's
//! `chromium`) driven over WebDriver (Debian's `chromedriver`, through
//! the `fantoccini` crate). The test signs in with the admin token, sees
//! the node, lists every Bay with its counts, sees a connected agent's
//! transport (`ws`, on this node), sees a message posted over plain HTTP
//! appear live, posts as a member and reads each recipient's
//! `shouldRespond`, sees an agent go offline when its socket closes, and
//! watches the webhooks page turn a delivery's failure red without a
//! reload. It takes screenshots on the
//! way: into a temporary folder, or into `docs/console/` with
//! `SWITCHBOARD_UPDATE_SCREENSHOTS=1`.
//!
//! `.ci/run` installs Chromium and its driver; elsewhere, without them,
//! the test says so and passes, except under CI (`CI` set), where a
//! missing browser fails it.

mod common;

use common::{Gateway, Opts, World, ADMIN_TOKEN};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// The chromedriver process, killed on drop.
struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn start_browser(profile: &Path) -> (Driver, Client) {
    let port = free_port();
    let driver = Driver(
        Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts"),
    );
    // Without the background-networking flags Chromium waits on services
    // it cannot reach on a closed network.
    let args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
    ]
    .iter()
    .map(|a| a.to_string())
    .chain([format!("--user-data-dir={}", profile.display())])
    .collect::<Vec<_>>();
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({ "binary": CHROMIUM, "args": args }),
    );
    // The WebDriver client's TLS stack needs a process-wide provider
    // (the driver itself is plain HTTP on 127.0.0.1).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match ClientBuilder::rustls()
            .expect("TLS roots")
            .capabilities(caps.clone())
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
        {
            Ok(client) => return (driver, client),
            Err(e) if Instant::now() > deadline => panic!("no WebDriver session: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Waits for an element matching `css` (20 s, for a loaded machine).
async fn wait_for(client: &Client, css: &str) -> fantoccini::elements::Element {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(e) = client.find(Locator::Css(css)).await {
            return e;
        }
        if Instant::now() > deadline {
            let page = client.source().await.unwrap_or_default();
            panic!("no {css} on the page:\n{page}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the first element matching `css` holds `text` (the page
/// redraws it as events arrive).
async fn wait_for_text(client: &Client, css: &str, text: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(e) = client.find(Locator::Css(css)).await {
            if e.text().await.unwrap_or_default().contains(text) {
                return;
            }
        }
        if Instant::now() > deadline {
            let page = client.source().await.unwrap_or_default();
            panic!("no {text:?} in {css}:\n{page}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn screenshot(client: &Client, dir: &Path, name: &str) {
    let png = client.screenshot().await.expect("screenshot");
    assert!(png.starts_with(b"\x89PNG"), "{name} is a PNG");
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
}

fn browser_installed() -> bool {
    let present = Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists();
    if !present {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have {CHROMIUM} and {CHROMEDRIVER} (.ci/run installs them)"
        );
        eprintln!("skipped: {CHROMIUM} or {CHROMEDRIVER} is not installed");
    }
    present
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_watches_a_conversation_live_in_a_browser() {
    if !browser_installed() {
        return;
    }
    let gw = Gateway::spawn_with(
        Opts::default()
            .env("SWITCHBOARD_TIMING__PRESENCE_LINGER", "300ms")
            .env("SWITCHBOARD_TIMING__PRESENCE_TICK", "100ms")
            .env("SWITCHBOARD_WEBHOOKS__ALLOW_HTTP", "true")
            .env("SWITCHBOARD_WEBHOOKS__ALLOW_PRIVATE_DESTINATIONS", "true")
            .env("SWITCHBOARD_WEBHOOKS__ATTEMPT_TIMEOUT", "1s")
            .env("SWITCHBOARD_WEBHOOKS__RETRY_INITIAL", "100ms")
            .env("SWITCHBOARD_WEBHOOKS__RETRY_MAX", "1s"),
    )
    .await;
    let w = World::create(&gw, "acme").await;
    gw.create_bay("quiet").await;
    let profile = tempfile::tempdir().unwrap();
    let shots_tmp = tempfile::tempdir().unwrap();
    let shots: PathBuf = if std::env::var("SWITCHBOARD_UPDATE_SCREENSHOTS").as_deref() == Ok("1") {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/console");
        std::fs::create_dir_all(&dir).unwrap();
        dir
    } else {
        shots_tmp.path().to_path_buf()
    };
    let (_driver, client) = start_browser(profile.path()).await;

    // Sign in: the token goes into the form, not the URL.
    client.goto(&gw.url("/console")).await.unwrap();
    wait_for(&client, "#token")
        .await
        .send_keys(ADMIN_TOKEN)
        .await
        .unwrap();
    client
        .find(Locator::Css("#login-form button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for(&client, "#nodes tr[data-node]").await;
    assert!(!client
        .current_url()
        .await
        .unwrap()
        .as_str()
        .contains(ADMIN_TOKEN));
    let stored: serde_json::Value = client
        .execute(
            "return sessionStorage.getItem('switchboard.adminToken')",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        stored,
        json!(ADMIN_TOKEN),
        "kept in the tab's session storage"
    );

    // The Bays page lists every Bay of the store, idle ones too.
    client.goto(&gw.url("/console#/bays")).await.unwrap();
    wait_for(&client, r#"#bays tr[data-bay="quiet"]"#).await;
    wait_for_text(&client, r#"#bays tr[data-bay="acme"]"#, "acme").await;
    screenshot(&client, &shots, "bays").await;

    // Rex connects while the page is open; it shows Rex online, on `ws`,
    // on this node.
    client
        .goto(&gw.url("/console#/bays/acme/group"))
        .await
        .unwrap();
    wait_for(&client, r#"tr[data-member="rex"][data-presence="offline"]"#).await;
    let rex = gw.ws_ready(&w.rex, None).await;
    wait_for(&client, r#"tr[data-member="rex"][data-presence="online"]"#).await;
    let ws = wait_for(
        &client,
        r#"tr[data-member="rex"][data-transports~="ws"] span[data-transport="ws"]"#,
    )
    .await;
    let node = ws.attr("title").await.unwrap().unwrap_or_default();
    let (_, nodes) = gw.admin(reqwest::Method::GET, "/nodes", None).await;
    let me = nodes["self"].as_str().unwrap();
    assert!(node.ends_with(me), "{node} names this node {me}");

    // A message posted over plain HTTP appears live.
    let (status, sent) = gw.post_message(&w.ana, "group", "Hello from curl").await;
    assert_eq!(status, 201, "{sent}");
    let id = sent["id"].as_str().unwrap();
    let li = wait_for(&client, &format!(r#"li[data-message-id="{id}"]"#)).await;
    assert!(li.text().await.unwrap().contains("Hello from curl"));

    // Post as Ana, mentioning Rex: the page shows each verdict.
    client
        .find(Locator::Css("#post-as"))
        .await
        .unwrap()
        .select_by_value("ana")
        .await
        .unwrap();
    client
        .find(Locator::Css("#post-text"))
        .await
        .unwrap()
        .send_keys("@Rex status?")
        .await
        .unwrap();
    client
        .find(Locator::Css("#post-form button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let verdict = wait_for(&client, r#"tr[data-recipient="rex"] td.yes"#).await;
    assert_eq!(verdict.text().await.unwrap(), "true");
    wait_for(&client, r#"tr[data-recipient="scout"] td.no"#).await;
    screenshot(&client, &shots, "conversation").await;

    // The Nodes page, live: Rex's socket shows up in the node's report.
    client.goto(&gw.url("/console#/nodes")).await.unwrap();
    wait_for_text(&client, "#nodes tr[data-node]", "ws 1").await;
    screenshot(&client, &shots, "nodes").await;

    // Rex's socket closes: the conversation page shows it offline.
    client
        .goto(&gw.url("/console#/bays/acme/group"))
        .await
        .unwrap();
    wait_for(&client, r#"tr[data-member="rex"][data-presence="online"]"#).await;
    rex.close().await;
    wait_for(&client, r#"tr[data-member="rex"][data-presence="offline"]"#).await;
    screenshot(&client, &shots, "agent-offline").await;

    // The webhooks page, live: Rex gets a webhook nobody answers; the
    // page shows the failure as it is recorded, with no reload.
    client
        .goto(&gw.url("/console#/webhooks/acme"))
        .await
        .unwrap();
    wait_for(
        &client,
        r#"#webhooks tr[data-agent="rex"][data-failing="no"]"#,
    )
    .await;
    client
        .execute("document.body.dataset.mark = 'same page'", vec![])
        .await
        .unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", closed.local_addr().unwrap());
    drop(closed);
    let (status, body) = gw
        .admin(
            reqwest::Method::PUT,
            "/bays/acme/participants/rex/webhook",
            Some(json!({ "url": url })),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    wait_for_text(&client, r#"#webhooks tr[data-agent="rex"]"#, &url).await;
    gw.post_message(&w.ana, "group", "anyone there?").await;
    wait_for(
        &client,
        r#"#webhooks tr[data-agent="rex"][data-failing="yes"]"#,
    )
    .await;
    let mark: serde_json::Value = client
        .execute("return document.body.dataset.mark", vec![])
        .await
        .unwrap();
    assert_eq!(mark, json!("same page"), "updated in place, not reloaded");
    screenshot(&client, &shots, "webhooks").await;
    client.close().await.unwrap();
}
