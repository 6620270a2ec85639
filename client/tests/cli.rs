//! The `switchboard-cli` binary against a real gateway (run in this test
//! process on a free port, with the demo Bay of `config/demo.toml`).

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const ANA: &str = "bay_u_demo_ana_0000000000000000000000";
const REX: &str = "bay_demo_rex_000000000000000000000000";

/// Starts a gateway with the demo Bay in this process; returns its base URL.
fn start_gateway(replay_max_entries: Option<usize>) -> String {
    start_gateway_with(replay_max_entries, None)
}

/// [`start_gateway`] with an admin token (the admin API enabled).
fn start_gateway_with(replay_max_entries: Option<usize>, admin_token: Option<&str>) -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let mut settings = switchboard_config::Settings {
        bind: format!("127.0.0.1:{port}"),
        bootstrap: Some(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/demo.toml").into()),
        workers: Some(1),
        admin_token: admin_token.map(str::to_owned),
        ..Default::default()
    };
    if let Some(n) = replay_max_entries {
        settings.replay_max_entries = n;
    }
    // Attachment bytes in a directory of this test run's own.
    settings.files.dir = std::env::temp_dir().join(format!("sb-cli-files-{port}"));
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
}

/// The gateway's base URL; started once for all tests of this file.
fn gateway() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| start_gateway(None))
}

/// A second gateway whose replay buffer keeps 3 entries: cursors expire
/// after a few messages.
fn short_log_gateway() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| start_gateway(Some(3)))
}

fn cli(token: Option<&str>) -> Command {
    cli_at(gateway(), token)
}

fn cli_at(url: &str, token: Option<&str>) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_switchboard-cli"));
    cmd.env_clear().env("SWITCHBOARD_URL", url);
    if let Some(t) = token {
        cmd.env("SWITCHBOARD_TOKEN", t);
    }
    cmd
}

/// A child's output lines, read on a thread so a test can wait with a
/// deadline.
struct Lines(std::sync::mpsc::Receiver<String>);

impl Lines {
    fn of(stream: impl std::io::Read + Send + 'static) -> Lines {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Lines(rx)
    }

    /// The next line within `patience`, `None` when none came or the
    /// stream ended.
    fn next_within(&self, patience: Duration) -> Option<String> {
        self.0.recv_timeout(patience).ok()
    }

    /// The next line as JSON (30 s patience); panics when none comes.
    fn next_json(&self) -> Value {
        let line = self
            .next_within(Duration::from_secs(30))
            .expect("a line within 30 s");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }
}

/// Waits until `path` exists (the listener saved its first cursor).
fn until_exists(path: &std::path::Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !path.exists() {
        assert!(Instant::now() < deadline, "no cursor file");
        std::thread::sleep(Duration::from_millis(20));
    }
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
    let ids: Vec<&str> = list
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
    assert_eq!(
        out.status.code(),
        Some(2),
        "a missing token is a bad argument"
    );
    let err: Value = serde_json::from_slice(&out.stderr).expect("a JSON error line");
    assert_eq!(err["error"], "INVALID_CONFIG", "{err}");
    let out = cli(Some("bay_not_a_real_token_000000000000000"))
        .arg("me")
        .output()
        .unwrap();
    let err: Value = serde_json::from_slice(&out.stderr).expect("a JSON error line");
    assert_eq!(err["error"], "UNAUTHORIZED", "{err}");
    let out = cli_at("ftp://127.0.0.1:1", Some(REX))
        .arg("me")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a bad --url is a bad argument");
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
    until_exists(&cursor_file);
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

/// The reported sequence: `listen --cursor-file` prints a mention and is
/// killed, the cursor expires, `listen` restarts with the same file. The
/// REST catch-up hands over exactly what the first run did not take
/// (each marked `"recovered": true`), never the mention again, and
/// nothing from before the first run started.
#[test]
fn a_restart_after_the_cursor_expired_hands_over_only_what_was_not_taken() {
    let url = short_log_gateway();
    let send =
        |text: &str| -> Value { json_out(cli_at(url, Some(ANA)).args(["send", "ana-rex", text])) };
    let older = send("before the first run");
    let dir = tempfile::tempdir().unwrap();
    let cursor_file = dir.path().join("rex.cursor");
    let listen = |file: &std::path::Path| {
        let mut child = KillOnDrop(
            cli_at(url, Some(REX))
                .args(["listen", "--transport", "updates", "--cursor-file"])
                .arg(file)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let lines = Lines::of(child.0.stdout.take().unwrap());
        (child, lines)
    };

    let (first_run, lines) = listen(&cursor_file);
    until_exists(&cursor_file);
    let mention = send("@Rex please look");
    let got = lines.next_json();
    assert_eq!(got["message"]["id"], mention["id"], "{got}");
    assert_eq!(got["message"]["shouldRespond"], true, "{got}");
    assert!(got.get("recovered").is_none(), "{got}");
    // The checkpoint after the mention is saved once the CLI asks for more.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(&cursor_file)
        .unwrap_or_default()
        .contains(mention["id"].as_str().unwrap())
    {
        assert!(
            Instant::now() < deadline,
            "the checkpoint never took the mention"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(first_run);

    // Away: more messages than the log keeps, so the cursor expires.
    let missed: Vec<Value> = (0..6)
        .map(|i| send(&format!("missed {i}"))["id"].clone())
        .collect();
    let (_second_run, lines) = listen(&cursor_file);
    for id in &missed {
        let got = lines.next_json();
        assert_eq!(
            &got["message"]["id"], id,
            "only what was not taken, in order: {got}"
        );
        assert_eq!(got["recovered"], true, "{got}");
    }
    let live = send("live again");
    let got = lines.next_json();
    assert_eq!(got["message"]["id"], live["id"], "{got}");
    assert!(got.get("recovered").is_none(), "{got}");
    assert_ne!(got["message"]["id"], older["id"]);
}

/// A base URL that leads nowhere (a path the gateway does not serve): every
/// transport stops with a clear error naming the URL, after saying what
/// failed; nothing retries forever.
#[test]
fn listen_stops_on_a_not_found_base_url_and_names_it() {
    let url = format!("{}/not-here", gateway());
    for transport in ["auto", "ws", "updates", "sse"] {
        let started = Instant::now();
        let out = cli_at(&url, Some(REX))
            .args(["listen", "--transport", transport])
            .output()
            .unwrap();
        assert!(started.elapsed() < Duration::from_secs(20), "{transport}");
        assert_eq!(out.status.code(), Some(1), "{transport}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.lines().last().unwrap_or_default();
        let err: Value = serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {stderr}"));
        assert_eq!(err["error"], "NOT_FOUND", "{transport}: {stderr}");
        let message = err["message"].as_str().unwrap();
        assert!(
            message.contains("/not-here/api/agent-api/"),
            "{transport}: {message}"
        );
        assert!(message.contains("base URL"), "{transport}: {message}");
    }
    // The API's own prefix in the base URL is not a mistake.
    let out = cli_at(&format!("{}/api/agent-api", gateway()), Some(REX))
        .arg("me")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Nothing listens at the URL: `listen` keeps trying, and says so on
/// stderr once per attempt with the delay before the next.
#[test]
fn listen_reports_every_failed_attempt_with_its_delay() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap();
    for transport in ["ws", "updates", "sse"] {
        let mut child = KillOnDrop(
            cli_at(&format!("http://127.0.0.1:{port}"), Some(REX))
                .args(["listen", "--transport", transport])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let lines = Lines::of(child.0.stderr.take().unwrap());
        for _ in 0..2 {
            let line = lines
                .next_within(Duration::from_secs(20))
                .unwrap_or_else(|| panic!("{transport}: no line per attempt"));
            assert!(
                line.starts_with(&format!("switchboard-cli: {transport}: ")),
                "{line}"
            );
            assert!(line.contains("retrying in "), "{line}");
            assert!(
                line.to_lowercase().contains("refused"),
                "names the cause: {line}"
            );
        }
    }
}

/// `listen | head -1`: once stdout is closed the CLI ends quietly, 0.
#[test]
fn listen_into_a_closed_pipe_exits_quietly_with_0() {
    // A gateway of its own: no other test's listener displaces this one.
    let url = start_gateway(None);
    let mut child = KillOnDrop(
        cli_at(&url, Some(REX))
            .args(["listen", "--transport", "updates"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let err = Lines::of(child.0.stderr.take().unwrap());
    // Listening once it announced the transport.
    let first = err
        .next_within(Duration::from_secs(20))
        .expect("a status line");
    assert!(first.contains("listening over updates"), "{first}");
    drop(child.0.stdout.take());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        json_out(cli_at(&url, Some(ANA)).args(["send", "ana-rex", "into a closed pipe"]));
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "still running with stdout closed"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(status.code(), Some(0));
    let rest: Vec<String> =
        std::iter::from_fn(|| err.next_within(Duration::from_secs(1))).collect();
    assert!(rest.is_empty(), "nothing on stderr: {rest:?}");
}

/// An empty cursor file is no cursor (with a note), and a cursor file that
/// cannot be written is an error that names it.
#[test]
fn cursor_file_trouble_is_clear() {
    let url = start_gateway(None);
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.cursor");
    std::fs::write(&empty, "").unwrap();
    let mut child = KillOnDrop(
        cli_at(&url, Some(REX))
            .args(["listen", "--transport", "updates", "--cursor-file"])
            .arg(&empty)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let err = Lines::of(child.0.stderr.take().unwrap());
    let note = err.next_within(Duration::from_secs(20)).expect("a note");
    assert!(
        note.contains("is empty") && note.contains("empty.cursor"),
        "{note}"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::read_to_string(&empty).unwrap().is_empty() {
        assert!(Instant::now() < deadline, "no cursor saved");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(child);

    let unwritable = dir.path().join("no-such-dir").join("rex.cursor");
    let out = cli_at(&url, Some(REX))
        .args(["listen", "--transport", "updates", "--cursor-file"])
        .arg(&unwritable)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let err: Value = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
    assert_eq!(err["error"], "CURSOR_STORE", "{stderr}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("no-such-dir/rex.cursor"),
        "{stderr}"
    );
}

/// `listen >&-`: a closed stdout is an error at once (exit 1, `STDOUT`),
/// and no cursor is saved for events nobody could read.
#[cfg(unix)]
#[test]
fn listen_with_stdout_closed_fails_before_saving_a_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let cursor_file = dir.path().join("rex.cursor");
    let mut cmd = Command::new("sh");
    cmd.env_clear()
        .env("SWITCHBOARD_URL", gateway())
        .env("SWITCHBOARD_TOKEN", REX)
        .arg("-c")
        .arg(r#"exec "$0" listen --transport updates --cursor-file "$1" >&-"#)
        .arg(env!("CARGO_BIN_EXE_switchboard-cli"))
        .arg(&cursor_file)
        .stderr(Stdio::piped());
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let err: Value = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
    assert_eq!(err["error"], "STDOUT", "{stderr}");
    assert!(!cursor_file.exists(), "no cursor saved");
}

/// A cursor file holding something the server never issued is refused,
/// naming the file, instead of being answered with a reset and a
/// catch-up that hands over old messages again.
#[test]
fn a_garbage_cursor_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("g.cursor");
    std::fs::write(&garbage, "garbage!!\n").unwrap();
    let out = cli(Some(REX))
        .args(["listen", "--transport", "updates", "--cursor-file"])
        .arg(&garbage)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "nothing delivered");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let err: Value = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
    assert_eq!(err["error"], "CURSOR_STORE", "{stderr}");
    assert!(
        err["message"].as_str().unwrap().contains("g.cursor"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&garbage).unwrap(), "garbage!!\n");
}

/// A second listener on the same cursor file stops at once with a clear
/// error; the first one keeps its file.
#[test]
fn a_second_listener_on_one_cursor_file_is_refused() {
    let url = start_gateway(None);
    let dir = tempfile::tempdir().unwrap();
    let cursor_file = dir.path().join("rex.cursor");
    let mut first = KillOnDrop(
        cli_at(&url, Some(REX))
            .args(["listen", "--transport", "updates", "--cursor-file"])
            .arg(&cursor_file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    until_exists(&cursor_file);
    let out = cli_at(&url, Some(REX))
        .args(["listen", "--transport", "updates", "--cursor-file"])
        .arg(&cursor_file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let err: Value = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
    assert_eq!(err["error"], "CURSOR_STORE", "{stderr}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("cursor file in use by another listener"),
        "{stderr}"
    );
    assert!(
        first.0.try_wait().unwrap().is_none(),
        "the first one runs on"
    );
}

/// `me` against a wrong base URL names the URL and the usual cause; an
/// unreachable server names the cause, not only "error sending request".
#[test]
fn rest_commands_name_the_url_and_the_cause() {
    let out = cli_at(&format!("{}/wrong/prefix", gateway()), Some(REX))
        .arg("me")
        .output()
        .unwrap();
    // A wrong base URL is a bad setting: exit status 2, like a usage error.
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let err: Value = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
    assert_eq!(err["error"], "INVALID_CONFIG", "{stderr}");
    let message = err["message"].as_str().unwrap();
    assert!(message.contains("/wrong/prefix/"), "{stderr}");
    assert!(message.contains("check the base URL"), "{stderr}");

    // A record the server does not have is no URL problem.
    let out = cli_at(gateway(), Some(REX))
        .args(["send", "no-such-room", "hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let err: Value = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
    assert_eq!(err["error"], "NOT_FOUND", "{stderr}");
    let message = err["message"].as_str().unwrap();
    assert!(!message.contains("base URL"), "{stderr}");
    assert!(message.contains("no such conversation"), "{stderr}");

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let out = cli_at(&format!("http://127.0.0.1:{port}"), Some(REX))
        .arg("conversations")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("onnection refused"), "{stderr}");
}

/// The admin token of the gateway [`pair_writes_the_credentials_file_and_prints_no_token`] starts.
const ADMIN: &str = "cli-test-admin-token";

/// Mints a pairing code for the demo agent `pid` through the admin API.
fn mint_code(url: &str, pid: &str) -> String {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let res = reqwest::Client::new()
            .post(format!(
                "{url}/api/admin/bays/demo/participants/{pid}/pairing-codes"
            ))
            .bearer_auth(ADMIN)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), 201);
        let body: Value = res.json().await.unwrap();
        body["code"].as_str().unwrap().to_owned()
    })
}

#[test]
fn pair_writes_the_credentials_file_and_prints_no_token() {
    let url = start_gateway_with(None, Some(ADMIN));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("credentials.json");
    let code = mint_code(&url, "scout");
    // No SWITCHBOARD_TOKEN: the code is the credential.
    let out = cli_at(&url, None)
        .args(["pair", &code, "--credentials-file"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed["agent"]["id"], "scout");
    assert_eq!(printed["baseUrl"], url.as_str());
    let creds: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let token = creds["token"].as_str().unwrap();
    assert!(token.starts_with("bay_"));
    assert!(!String::from_utf8_lossy(&out.stdout).contains(token));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // The stored token is the agent's now.
    let me = json_out(cli_at(&url, Some(token)).arg("me"));
    assert_eq!(me["id"], "scout");

    // Used: exit 1 with the code named on stderr, and the file untouched.
    let again = cli_at(&url, None)
        .args(["pair", &code, "--credentials-file"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1));
    let err: Value = serde_json::from_slice(&again.stderr).unwrap();
    assert_eq!(err["error"], "INVALID_PAIRING_CODE", "{err}");
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(kept, creds);
}

#[test]
fn send_with_files_uploads_them_and_download_saves_without_overwriting() {
    // A gateway of its own: the other tests listen on the demo rooms, and
    // a third gateway in this process checks each signs for itself.
    let url = start_gateway(None);
    let cli = |token: Option<&str>| cli_at(&url, token);
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("shot.png");
    std::fs::write(&png, b"\x89PNG\r\n\x1a\n0123456789").unwrap();
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "line one\n").unwrap();
    let sent = json_out(
        cli(Some(REX))
            .args(["send", "ana-rex", "two files", "--file"])
            .arg(&png)
            .arg("--file")
            .arg(&notes),
    );
    let items = sent["metadata"]["attachments"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{sent}");
    assert_eq!(items[0]["mimeType"], "image/png");
    assert_eq!(items[1]["mimeType"], "text/plain");
    let url = items[1]["attachmentUrl"].as_str().unwrap();
    let out_dir = dir.path().join("downloads");
    for want in ["notes.txt", "notes-1.txt"] {
        let got = json_out(
            cli(Some(ANA))
                .args(["download", url, "--dir"])
                .arg(&out_dir),
        );
        let path = std::path::PathBuf::from(got["path"].as_str().unwrap());
        assert_eq!(path.file_name().unwrap(), want);
        assert_eq!(std::fs::read(&path).unwrap(), b"line one\n");
    }
    // Eleven files are refused before anything is uploaded.
    let mut cmd = cli(Some(REX));
    cmd.args(["send", "ana-rex", "too many"]);
    for _ in 0..11 {
        cmd.arg("--file").arg(&notes);
    }
    let out = cmd.output().unwrap();
    assert!(!out.status.success());
    // Another server's URL is not fetched.
    let out = cli(Some(ANA))
        .args([
            "download",
            "http://203.0.113.9/api/agent-api/attachments/signed-content?x=1",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("outside"));
}
