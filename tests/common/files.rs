//! Helpers of tests/files.rs: multipart uploads built by hand (so the
//! tests control every byte), files of known types, and a real
//! S3-compatible server (`s3s-fs`) on loopback.

use crate::common::{Gateway, Opts};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// Uploads `bytes` as `name` in the multipart field `field`.
pub async fn upload_field(
    gw: &Gateway,
    token: &str,
    field: &str,
    name: &str,
    bytes: &[u8],
) -> (u16, Value) {
    let boundary = "sb-test-boundary-7c1f";
    let mut body = Vec::with_capacity(bytes.len() + 256);
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"; filename=\"{name}\"\r\n\
             Content-Type: application/octet-stream\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let res = gw
        .http
        .post(gw.url("/api/agent-api/attachments"))
        .bearer_auth(token)
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Uploads `bytes` as `name` (field `file`).
pub async fn upload(gw: &Gateway, token: &str, name: &str, bytes: &[u8]) -> (u16, Value) {
    upload_field(gw, token, "file", name, bytes).await
}

/// Uploads and answers the attachment id (asserting 201).
pub async fn uploaded(gw: &Gateway, token: &str, name: &str, bytes: &[u8]) -> String {
    let (s, body) = upload(gw, token, name, bytes).await;
    assert_eq!(s, 201, "upload {name}: {body}");
    body["attachmentId"].as_str().unwrap().to_owned()
}

/// Filler that is not text: every byte value, in a pattern.
fn filler(n: usize, seed: u8) -> impl Iterator<Item = u8> {
    (0..n).map(move |i| (i as u8).wrapping_mul(31).wrapping_add(seed))
}

/// `n` bytes that open with the PNG signature.
pub fn png_bytes(n: usize) -> Vec<u8> {
    let mut v = vec![0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];
    v.extend(filler(n.saturating_sub(8), 7));
    v.truncate(n);
    v
}

/// `n` bytes that open as a PDF.
pub fn pdf_bytes(n: usize) -> Vec<u8> {
    let mut v = b"%PDF-1.7\n".to_vec();
    v.extend(filler(n.saturating_sub(v.len()), 3));
    v.truncate(n);
    v
}

/// `n` bytes of plain text.
pub fn text_bytes(n: usize) -> Vec<u8> {
    b"lorem ipsum dolor sit amet\n"
        .iter()
        .copied()
        .cycle()
        .take(n)
        .collect()
}

/// A zip with one stored, empty entry.
pub fn zip_bytes() -> Vec<u8> {
    let mut v = b"PK\x03\x04\x14\x00\x00\x00\x00\x00".to_vec();
    v.extend_from_slice(&[0; 16]);
    v.extend_from_slice(b"\x05\x00\x00\x00a.txt");
    v
}

/// A real `s3s-fs` on a free loopback port over a temporary directory,
/// with one bucket. Killed on drop.
pub struct S3Server {
    child: Child,
    pub port: u16,
    root: PathBuf,
}

pub const BUCKET: &str = "sb-files";
const ACCESS_KEY: &str = "sbtestaccess";
const SECRET_KEY: &str = "sbtestsecret0123456789";

impl S3Server {
    /// Starts one; `None` (with a message) only outside CI when `s3s-fs` is
    /// not installed (`cargo install s3s-fs --locked`; `.ci/run` does it).
    pub fn start() -> Option<S3Server> {
        let bin = which_s3s()?;
        let root = std::env::temp_dir().join(format!(
            "sb-s3-{}-{}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(root.join(BUCKET)).unwrap();
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut child = Command::new(&bin)
                .args(["--host", "127.0.0.1", "--port", &port.to_string()])
                .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
                .arg(&root)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start s3s-fs");
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while std::time::Instant::now() < deadline {
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Some(S3Server { child, port, root });
                }
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("s3s-fs did not start");
    }

    /// `opts` with the gateway's files in this server's bucket.
    pub fn opts(&self, opts: Opts) -> Opts {
        opts.env("SWITCHBOARD_FILES__BACKEND", "s3")
            .env(
                "SWITCHBOARD_FILES__S3__ENDPOINT",
                &format!("http://127.0.0.1:{}", self.port),
            )
            .env("SWITCHBOARD_FILES__S3__BUCKET", BUCKET)
            .env("SWITCHBOARD_FILES__S3__REGION", "us-east-1")
            .env("SWITCHBOARD_FILES__S3__ACCESS_KEY_ID", ACCESS_KEY)
            .env("SWITCHBOARD_FILES__S3__SECRET_ACCESS_KEY", SECRET_KEY)
    }

    /// Whether the bucket holds an object under `key`.
    pub fn holds(&self, key: &str) -> bool {
        self.root.join(BUCKET).join(key).is_file()
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn which_s3s() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("s3s-fs"))
                .collect()
        })
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        candidates.push(PathBuf::from(home).join(".cargo/bin/s3s-fs"));
    }
    if let Some(found) = candidates.into_iter().find(|p| p.is_file()) {
        return Some(found);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "s3s-fs is not installed, and CI must run the object-storage tests (cargo install s3s-fs --locked)"
    );
    eprintln!("skipping: s3s-fs is not installed (cargo install s3s-fs --locked)");
    None
}
