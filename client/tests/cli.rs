//! The `switchboard-cli` binary against a real gateway (run in this test
//! process on a free port, with the demo Bay of `config/demo.toml`).

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const ANA: &str = "bay_u_demo_ana_0000000000000000000000";
const REX: &str = "bay_demo_rex_000000000000000000000000";

/// The gateway's base URL; started once for all tests of this file.
fn gateway() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let settings = switchboard_config::Settings {
            bind: format!("127.0.0.1:{port}"),
            bootstrap: Some(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/demo.toml").into()),
            workers: Some(1),
            ..Default::default()
        };
        std::thread::spawn(move || {
            let system = actix_rt::System::new();
            let _ = system.block_on(switchboard_gateway::serve(settings));
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the gateway did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        format!("http://127.0.0.1:{port}")
    })
}

fn cli(token: Option<&str>) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_switchboard-cli"));
    cmd.env_clear().env("SWITCHBOARD_URL", gateway());
    if let Some(t) = token {
        cmd.env("SWITCHBOARD_TOKEN", t);
    }
    cmd
}

/// A child process killed when dropped, so a failing test leaves none behind.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn json_out(cmd: &mut Command) -> Value {
    let out = cmd.output().expect("run switchboard-cli");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object on stdout")
}

#[test]
fn me_and_conversations_print_json() {
    let me = json_out(cli(Some(REX)).arg("me"));
    assert_eq!(me["id"], "rex");
    let list = json_out(cli(Some(REX)).arg("conversations"));
    let ids: Vec<&str> = list["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["id"].as_str())
        .collect();
    assert!(ids.contains(&"launch"), "{list}");
}

#[test]
fn the_token_comes_from_the_environment_and_errors_are_json() {
    let out = cli(None).arg("me").output().unwrap();
    assert!(!out.status.success());
    let err: Value = serde_json::from_slice(&out.stderr).expect("a JSON error line");
    assert_eq!(err["error"], "INVALID_CONFIG", "{err}");
    let out = cli(Some("bay_not_a_real_token_000000000000000"))
        .arg("me")
        .output()
        .unwrap();
    let err: Value = serde_json::from_slice(&out.stderr).expect("a JSON error line");
    assert_eq!(err["error"], "UNAUTHORIZED", "{err}");
    // There is no token flag to leak into `ps`.
    let out = cli(Some(REX))
        .args(["--token", REX, "me"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn send_is_idempotent_with_a_key_and_listen_prints_one_json_line_per_event() {
    let dir = tempfile::tempdir().unwrap();
    let cursor_file = dir.path().join("rex.cursor");
    let mut listen = KillOnDrop(
        cli(Some(REX))
            .args(["listen", "--transport", "updates", "--cursor-file"])
            .arg(&cursor_file)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // The listener is live once it saved its first cursor.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cursor_file.exists() {
        assert!(Instant::now() < deadline, "no cursor file");
        std::thread::sleep(Duration::from_millis(20));
    }
    let first = json_out(cli(Some(ANA)).args([
        "send",
        "ana-rex",
        "hello from the cli",
        "--idempotency-key",
        "k-1",
    ]));
    let again = json_out(cli(Some(ANA)).args([
        "send",
        "ana-rex",
        "hello from the cli",
        "--idempotency-key",
        "k-1",
    ]));
    assert_eq!(first["id"], again["id"], "one message for one key");
    let reply = json_out(cli(Some(REX)).args([
        "send",
        "ana-rex",
        "a reply",
        "--reply-to",
        first["id"].as_str().unwrap(),
    ]));
    assert_eq!(reply["replyTo"]["id"], first["id"]);

    let mut lines = BufReader::new(listen.0.stdout.take().unwrap()).lines();
    let line = lines.next().unwrap().unwrap();
    let event: Value = serde_json::from_str(&line).expect("a JSON line");
    assert_eq!(event["type"], "message");
    assert_eq!(event["message"]["id"], first["id"]);
    drop(listen);
    let saved: Value = serde_json::from_slice(&std::fs::read(&cursor_file).unwrap()).unwrap();
    assert!(saved["cursor"].as_str().is_some_and(|c| !c.is_empty()));
}
