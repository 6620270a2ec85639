//! `switchboard-cli`: listen, send and look around as one participant.
//!
//! The base URL and the token come from `SWITCHBOARD_URL` and
//! `SWITCHBOARD_TOKEN` only (never a flag value, which `ps` would show).
//! `listen` prints one JSON object per line on stdout (the event's JSON;
//! one recovered over REST after a reset carries
//! `"recovered": true` besides), so `| jq` works; status goes to stderr,
//! one line per failed connection attempt included. A closed stdout
//! (`listen | head`) ends it quietly with status 0.

use clap::{Parser, Subcommand};
use futures_util::StreamExt;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use switchboard_client::{
    Client, ClientError, CursorStore, FileCursorStore, Listener, ListenerConfig, MemoryCursorStore,
    SendOptions, TransportChoice, Update,
};

#[derive(Parser)]
#[command(
    name = "switchboard-cli",
    version,
    about = "Talk to a Switchboard gateway as one participant"
)]
struct Cli {
    /// Base URL of the gateway, e.g. http://127.0.0.1:8080.
    #[arg(long = "url", env = "SWITCHBOARD_URL", hide_env_values = true)]
    url: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print every event as one JSON line, resuming from the cursor file.
    Listen {
        /// Transport: auto (WebSocket, falling back to /updates), ws, updates or sse.
        #[arg(long, value_enum, default_value_t = TransportChoice::Auto)]
        transport: TransportChoice,
        /// Where the cursor is kept between runs (atomically replaced);
        /// without it the listener starts at now every time.
        #[arg(long)]
        cursor_file: Option<PathBuf>,
    },
    /// Send a message; prints the stored message.
    Send {
        /// The conversation id.
        conversation: String,
        /// The text (1–32,000 characters).
        text: String,
        /// Quote this message of the same conversation.
        #[arg(long)]
        reply_to: Option<String>,
        /// Makes retries safe: the same key and text store one message.
        #[arg(long)]
        idempotency_key: Option<String>,
        /// A file to attach (repeat, up to 10, in render order). Each is
        /// uploaded, then one message carries them all; more than 10 is
        /// refused before anything is uploaded.
        #[arg(long = "file", value_name = "PATH")]
        files: Vec<PathBuf>,
    },
    /// Download an attachment URL (from a message's `attachmentUrl`) into
    /// a directory; prints `{path}`. Only from this server, at most 25 MB,
    /// never overwriting an existing file.
    Download {
        /// The signed URL.
        url: String,
        /// Where the file goes (created when missing).
        #[arg(long, default_value = ".")]
        dir: PathBuf,
    },
    /// Print who the token belongs to.
    Me,
    /// Print the token's conversations.
    Conversations,
    /// Ask a connector agent of the Bay to search its ingested data; waits
    /// for its answer and prints `{requestId, connectorId, platform, result}`.
    Ask {
        /// The connector's participant id.
        agent: String,
        /// What to search for.
        query: String,
        /// Most hits wanted (1–100; the server's default is 10).
        #[arg(long)]
        limit: Option<u32>,
    },
    /// Redeem a pairing code an operator minted (no SWITCHBOARD_TOKEN
    /// needed): writes `{baseUrl, token, agent}` to the credentials file
    /// (mode 0600) and prints it without the token. The agent's previous
    /// token stops working.
    Pair {
        /// The code, e.g. ABCDE-FGHJK.
        code: String,
        /// Where the credentials go (replaced atomically).
        #[arg(long)]
        credentials_file: PathBuf,
    },
}

/// The token, from the environment only.
fn token() -> Result<String, ClientError> {
    std::env::var("SWITCHBOARD_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| {
            ClientError::Config("set SWITCHBOARD_TOKEN to the participant's token".into())
        })
}

/// Why a command stopped.
enum Failure {
    /// The client failed: one JSON line on stderr, exit 1.
    Client(ClientError),
    /// Stdout is closed (`listen | head`): nobody reads any more, which is
    /// how a pipeline ends; exit 0 quietly.
    StdoutClosed,
    /// Writing stdout failed otherwise.
    Stdout(std::io::Error),
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        Failure::Client(e)
    }
}

/// Standard output, written through a duplicate of file descriptor 1.
///
/// The standard library's `stdout()` treats a closed descriptor (`EBADF`)
/// as a successful write, which would let `listen >&-` checkpoint events
/// nobody received. Duplicating the descriptor when the process starts,
/// before anything else can be opened in its place, fails at once when it
/// is closed, and every later write reports its own error.
struct Out(std::fs::File);

impl Out {
    /// Takes standard output; an error when file descriptor 1 was closed.
    ///
    /// Rust's start-up code reopens a closed descriptor 0–2 as
    /// `/dev/null`, read-write, which is how a shell's `>&-` shows up here;
    /// a shell's `> /dev/null` (and a spawner's null stdout) opens it
    /// write-only.
    #[cfg(unix)]
    fn open() -> std::io::Result<Out> {
        use rustix::fs::{fcntl_getfl, fstat, stat, OFlags};
        use std::os::fd::AsFd;
        let fd = std::io::stdout().as_fd().try_clone_to_owned()?;
        let null = stat("/dev/null").map(|s| s.st_rdev).ok();
        let rdev = fstat(&fd).map(|s| s.st_rdev).ok();
        let read_write = fcntl_getfl(&fd).is_ok_and(|f| f.contains(OFlags::RDWR));
        if null.is_some() && rdev == null && read_write {
            return Err(std::io::Error::other(
                "file descriptor 1 was closed when the process started (>&-)",
            ));
        }
        Ok(Out(std::fs::File::from(fd)))
    }

    /// Takes standard output.
    #[cfg(windows)]
    fn open() -> std::io::Result<Out> {
        use std::os::windows::io::AsHandle;
        let handle = std::io::stdout().as_handle().try_clone_to_owned()?;
        Ok(Out(std::fs::File::from(handle)))
    }

    /// Writes one JSON line and flushes it; returns only once the line was
    /// handed to the operating system, so a checkpoint that follows never
    /// covers a line that was not written.
    fn json(&mut self, v: &serde_json::Value) -> Result<(), Failure> {
        let line = format!("{v}\n");
        self.0
            .write_all(line.as_bytes())
            .and_then(|()| self.0.flush())
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::BrokenPipe => Failure::StdoutClosed,
                _ => Failure::Stdout(e),
            })
    }
}

async fn listen(
    out: &mut Out,
    client: Client,
    transport: TransportChoice,
    cursor_file: Option<PathBuf>,
) -> Result<(), Failure> {
    let store: Arc<dyn CursorStore> = match cursor_file {
        Some(path) => {
            let store = FileCursorStore::locked(path).map_err(ClientError::Store)?;
            if store.is_blank() {
                eprintln!(
                    "switchboard-cli: {} is empty: starting without a cursor (at now)",
                    store.path().display()
                );
            }
            Arc::new(store)
        }
        None => Arc::new(MemoryCursorStore::new()),
    };
    let config = ListenerConfig {
        transport,
        ..ListenerConfig::default()
    };
    let mut listener = Listener::start(client, store, config)?;
    while let Some(update) = listener.next().await {
        match update? {
            Update::TransportChanged(t) => {
                eprintln!("switchboard-cli: listening over {}", t.as_str())
            }
            Update::Retrying {
                transport,
                reason,
                delay,
            } => {
                if delay.is_zero() {
                    eprintln!("switchboard-cli: {}: {reason}", transport.as_str());
                } else {
                    eprintln!(
                        "switchboard-cli: {}: {reason}; retrying in {:.1} s",
                        transport.as_str(),
                        delay.as_secs_f64()
                    );
                }
            }
            Update::CatchUp { since, reset } => {
                if reset {
                    eprintln!(
                        "switchboard-cli: the server cannot resume from the cursor (reset): catching up over REST"
                    );
                }
                eprintln!(
                    "switchboard-cli: catching up over REST: messages since {since} (after the newest one taken, where known), printed with \"recovered\": true"
                );
            }
            // Rebuilt from REST after a reset, not sent by the server:
            // marked, so a consumer can tell (and e.g. not answer twice).
            Update::Recovered { raw, .. } => {
                let mut marked = raw;
                if let Some(object) = marked.as_object_mut() {
                    object.insert("recovered".into(), serde_json::Value::Bool(true));
                }
                out.json(&marked)?;
            }
            other => {
                if let Some(raw) = other.raw() {
                    out.json(raw)?;
                }
            }
        }
    }
    Ok(())
}

/// A REST call's error, with the URL and the cause named for a 404. A
/// route the server does not serve (its `no such route`, or an answer that
/// is no Switchboard error at all) means the base URL is wrong: a bad
/// setting, so `INVALID_CONFIG` and exit status 2, like a usage error. Any
/// other 404 is the server's answer about a record (an unknown
/// conversation or message, or one this token may not see).
fn at_url(method: &str, url: String, e: ClientError) -> ClientError {
    match e {
        ClientError::Api {
            status: 404,
            code,
            message,
            retry_after,
        } => {
            let said = if message.is_empty() {
                String::new()
            } else {
                format!(" ({message})")
            };
            let no_route =
                message == "no such route" || message.ends_with("(no error message in the body)");
            if no_route {
                return ClientError::Config(format!(
                    "{method} {url} answered 404{said}: check the base URL (scheme://host:port of a Switchboard gateway, without /api/agent-api)"
                ));
            }
            ClientError::Api {
                status: 404,
                code,
                message: format!(
                    "{method} {url} answered 404{said}: no such conversation, message or file for this token (it may not be a member)"
                ),
                retry_after,
            }
        }
        other => other,
    }
}

/// Writes `creds` to `path` readable by its owner only (0600 on unix),
/// through a temporary file renamed over it, so a reader never sees half.
fn write_credentials(path: &std::path::Path, creds: &serde_json::Value) -> Result<(), ClientError> {
    let tmp = path.with_extension("tmp");
    let failed =
        |e: std::io::Error| ClientError::Config(format!("cannot write {}: {e}", path.display()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&tmp).map_err(failed)?;
    file.write_all(format!("{creds}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(failed)?;
    std::fs::rename(&tmp, path).map_err(failed)
}

async fn run(cli: Cli, out: &mut Out) -> Result<(), Failure> {
    if let Command::Pair {
        code,
        credentials_file,
    } = &cli.command
    {
        let creds = switchboard_client::pair(&cli.url, code).await?;
        write_credentials(credentials_file, &creds)?;
        // Never the token on stdout: it lives in the file only.
        return out.json(&serde_json::json!({
            "baseUrl": creds["baseUrl"],
            "agent": creds["agent"],
            "credentialsFile": credentials_file,
        }));
    }
    let client = Client::new(&cli.url, &token()?)?;
    match cli.command {
        Command::Listen {
            transport,
            cursor_file,
        } => listen(out, client, transport, cursor_file).await,
        Command::Send {
            conversation,
            text,
            reply_to,
            idempotency_key,
            files,
        } => {
            if files.len() > switchboard_client::MAX_FILES {
                return Err(ClientError::Config(format!(
                    "at most {} files per message",
                    switchboard_client::MAX_FILES
                ))
                .into());
            }
            let mut attachments = Vec::with_capacity(files.len());
            for path in &files {
                let up = client
                    .upload_file(path)
                    .await
                    .map_err(|e| at_url("POST", client.url("/attachments"), e))?;
                attachments.push(up["attachmentId"].as_str().unwrap_or_default().to_owned());
            }
            let options = SendOptions {
                reply_to,
                idempotency_key,
                attachments,
            };
            let url = client.url(&format!("/conversations/{conversation}/messages"));
            let sent = client
                .send(&conversation, &text, &options)
                .await
                .map_err(|e| at_url("POST", url, e))?;
            out.json(&sent)?;
            Ok(())
        }
        Command::Download { url, dir } => {
            let path = client
                .download(&url, &dir)
                .await
                .map_err(|e| at_url("GET", url.clone(), e))?;
            out.json(&serde_json::json!({ "path": path }))
        }
        Command::Me => {
            let me = client.me().await;
            out.json(&me.map_err(|e| at_url("GET", client.url("/me"), e))?)
        }
        Command::Conversations => {
            let list = client.conversations().await;
            out.json(&list.map_err(|e| at_url("GET", client.url("/conversations"), e))?)
        }
        Command::Ask {
            agent,
            query,
            limit,
        } => {
            let url = client.url(&format!("/agents/{agent}/ask"));
            let answer = client.ask(&agent, &query, limit).await;
            out.json(&answer.map_err(|e| at_url("POST", url, e))?)
        }
        Command::Pair { .. } => unreachable!("handled before the token is read"),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // First, before the runtime opens anything that could take its number.
    let mut out = match Out::open() {
        Ok(out) => out,
        Err(e) => {
            eprintln!(
                "{}",
                serde_json::json!({ "error": "STDOUT", "message": format!("stdout is not open: {e}") })
            );
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .worker_threads(2)
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("switchboard-cli: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(run(cli, &mut out));
    // Stop the listener's tasks now rather than at exit.
    runtime.shutdown_background();
    match result {
        Ok(()) | Err(Failure::StdoutClosed) => ExitCode::SUCCESS,
        Err(Failure::Stdout(e)) => {
            eprintln!(
                "{}",
                serde_json::json!({ "error": "STDOUT", "message": format!("writing stdout failed: {e}") })
            );
            ExitCode::FAILURE
        }
        Err(Failure::Client(e)) => {
            // Errors as one JSON line on stderr, like the server's bodies.
            let code = match &e {
                ClientError::Displaced => "DISPLACED",
                ClientError::Unauthorized { .. } => "UNAUTHORIZED",
                ClientError::Suspended { code, .. } => code.as_str(),
                ClientError::Api { code, .. } => code.as_str(),
                ClientError::MessageTooBig { .. } => "MESSAGE_TOO_BIG",
                ClientError::Protocol(_) => "PROTOCOL_ERROR",
                ClientError::Http(_) => "HTTP",
                ClientError::Store(_) => "CURSOR_STORE",
                ClientError::Config(_) => "INVALID_CONFIG",
            };
            eprintln!(
                "{}",
                serde_json::json!({ "error": code, "message": switchboard_client::error_chain(&e) })
            );
            // Bad settings are bad arguments, like clap's usage errors.
            if matches!(e, ClientError::Config(_)) {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
