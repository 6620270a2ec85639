//! A real nginx in front of gateway nodes, running the shipped
//! `deploy/nginx/switchboard.conf` (only its `listen` and upstream `server`
//! lines are replaced by the test's addresses), and a two-node deployment
//! on one Redis behind it. Used by tests/loadbalancer.rs and tests/client.rs.

use super::*;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const SHIPPED: &str = include_str!("../../deploy/nginx/switchboard.conf");

/// A real nginx as the test user: its own port, and pid file, logs and
/// temp paths in its own temporary directory; `daemon off`,
/// `master_process on` (single-process nginx cannot reload: its new
/// configuration cycle mixes up descriptors), one worker. Stopped on drop
/// with SIGTERM to the master, which takes its worker with it.
pub struct Nginx {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
    upstreams: Vec<String>,
    /// Counts reloads; each reloaded config answers it at `/__generation`.
    generation: std::sync::atomic::AtomicU32,
}

impl Nginx {
    /// nginx in front of `upstreams` (host:port), with the shipped config.
    pub fn start(upstreams: &[&str]) -> Nginx {
        let mut last = String::new();
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .expect("a free port");
            match Self::try_start(upstreams, port) {
                Ok(n) => return n,
                Err(e) => last = e,
            }
        }
        panic!("nginx did not start: {last}");
    }

    fn try_start(upstreams: &[&str], port: u16) -> Result<Nginx, String> {
        let dir = tempfile::tempdir().expect("temp dir for nginx");
        let d = dir.path().display().to_string();
        std::fs::write(dir.path().join("switchboard.conf"), site(upstreams, port))
            .expect("write site config");
        let main = format!(
            "daemon off;\n\
             master_process on;\n\
             worker_processes 1;\n\
             pid {d}/nginx.pid;\n\
             error_log {d}/error.log info;\n\
             events {{ worker_connections 1024; }}\n\
             http {{\n\
             \x20   access_log {d}/access.log;\n\
             \x20   client_body_temp_path {d}/client_body;\n\
             \x20   proxy_temp_path {d}/proxy;\n\
             \x20   fastcgi_temp_path {d}/fastcgi;\n\
             \x20   uwsgi_temp_path {d}/uwsgi;\n\
             \x20   scgi_temp_path {d}/scgi;\n\
             \x20   include {d}/switchboard.conf;\n\
             }}\n"
        );
        let conf = dir.path().join("nginx.conf");
        std::fs::write(&conf, main).expect("write nginx.conf");
        let log = std::fs::File::create(dir.path().join("stderr.log")).expect("log");
        let mut child = Command::new(nginx_bin())
            .arg("-p")
            .arg(dir.path())
            .arg("-e")
            .arg(dir.path().join("error.log"))
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("cannot run nginx: install it (apt-get install nginx)");
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                let err = std::fs::read_to_string(dir.path().join("error.log")).unwrap_or_default();
                return Err(format!("nginx exited with {status}: {err}"));
            }
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(Nginx {
                    child,
                    port,
                    dir,
                    upstreams: upstreams.iter().map(|u| u.to_string()).collect(),
                    generation: Default::default(),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        unsafe_kill(child.id(), "-TERM");
        let _ = child.wait();
        Err("nginx did not listen within 10 s".into())
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }

    /// The shipped site config for this nginx's port and upstreams.
    pub fn shipped_site(&self) -> String {
        let upstreams: Vec<&str> = self.upstreams.iter().map(String::as_str).collect();
        site(&upstreams, self.port)
    }

    /// Replaces the site config, reloads nginx (`nginx -s reload`) and
    /// waits until new connections get the new config (connections already
    /// open stay with the old workers until they close, as in production).
    pub fn reload(&self, site_text: &str) {
        use std::sync::atomic::Ordering;
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let listen = format!("    listen 127.0.0.1:{};\n", self.port);
        assert!(
            site_text.contains(&listen),
            "the site must listen on this nginx's port"
        );
        let marked = site_text.replacen(
            &listen,
            &format!("{listen}    location = /__generation {{ return 200 \"{generation}\"; }}\n"),
            1,
        );
        std::fs::write(self.dir.path().join("switchboard.conf"), marked).expect("write site");
        let old_workers = self.workers();
        let out = Command::new(nginx_bin())
            .arg("-p")
            .arg(self.dir.path())
            .arg("-e")
            .arg(self.dir.path().join("error.log"))
            .arg("-c")
            .arg(self.dir.path().join("nginx.conf"))
            .arg("-s")
            .arg("reload")
            .output()
            .expect("run nginx -s reload");
        assert!(
            out.status.success(),
            "nginx -s reload: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.served_generation() != Some(generation) {
            assert!(
                Instant::now() < deadline,
                "nginx did not take the new config"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // Old workers accept no new connection once they are shutting down
        // (they keep the ones they hold, as in production); until then a
        // new connection could still reach the old config.
        while old_workers.iter().any(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| !String::from_utf8_lossy(&c).contains("shutting down"))
                .unwrap_or(false)
        }) {
            assert!(
                Instant::now() < deadline,
                "old nginx workers kept accepting"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The worker processes of this nginx (children of its master).
    fn workers(&self) -> Vec<u32> {
        let master = self.child.id().to_string();
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .ok()
                    .and_then(|stat| {
                        // `pid (comm) state ppid …`: comm may hold spaces.
                        let after = stat.rsplit_once(')')?.1.to_owned();
                        after.split_whitespace().nth(1).map(|p| p == master)
                    })
                    .unwrap_or(false)
            })
            .collect()
    }

    /// The generation the config serving new connections answers.
    fn served_generation(&self) -> Option<u32> {
        use std::io::{Read, Write};
        let mut sock = std::net::TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        sock.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        sock.write_all(b"GET /__generation HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .ok()?;
        let mut buf = String::new();
        sock.read_to_string(&mut buf).ok()?;
        buf.starts_with("HTTP/1.1 200")
            .then(|| buf.rsplit("\r\n\r\n").next()?.trim().parse().ok())
            .flatten()
    }
}

/// `site` with WebSocket upgrades refused the way a proxy that does not
/// know WebSockets refuses them: the `Upgrade` and `Connection` headers
/// are not forwarded, so the node sees a plain GET and answers 400.
pub fn refusing_upgrades(site: &str) -> String {
    let out = site
        .replace(
            "proxy_set_header Upgrade $http_upgrade;",
            "proxy_set_header Upgrade \"\";",
        )
        .replace(
            "proxy_set_header Connection $switchboard_connection;",
            "proxy_set_header Connection \"\";",
        );
    assert_ne!(out, site, "the site config no longer forwards upgrades");
    out
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGKILL would orphan the worker, which would keep the port.
        unsafe_kill(self.child.id(), "-TERM");
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The shipped site config with the test's listen address and upstreams.
pub fn site(upstreams: &[&str], port: u16) -> String {
    let mut out = String::new();
    let mut servers_written = false;
    let mut listen_replaced = false;
    for line in SHIPPED.lines() {
        let t = line.trim_start();
        if t.starts_with("server switchboard-") {
            if !servers_written {
                for u in upstreams {
                    out.push_str(&format!("    server {u} max_fails=1 fail_timeout=10s;\n"));
                }
                servers_written = true;
            }
            continue;
        }
        if t == "listen 80;" {
            out.push_str(&format!("    listen 127.0.0.1:{port};\n"));
            listen_replaced = true;
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    assert!(
        servers_written && listen_replaced,
        "deploy/nginx/switchboard.conf no longer has `server switchboard-…` and `listen 80;` lines"
    );
    out
}

/// The nginx binary: on the PATH, or Debian's `/usr/sbin/nginx` (not on
/// every user's PATH).
pub fn nginx_bin() -> std::path::PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("nginx"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| "/usr/sbin/nginx".into())
}

/// Two nodes on one Redis, and nginx in front of them.
pub struct Deployment {
    pub redis: RedisServer,
    pub nodes: Vec<Gateway>,
    pub lb: Nginx,
}

impl Deployment {
    /// Waits until `n` `/updates` calls are held across the nodes.
    pub async fn until_held(&self, n: usize) {
        let held = eventually(Duration::from_secs(20), || async {
            let mut sum = 0.0;
            for node in &self.nodes {
                sum += node.metric("switchboard_held_polls").await;
            }
            sum == n as f64
        })
        .await;
        assert!(held, "expected {n} held polls behind the proxy");
    }
}

impl Deployment {
    pub async fn start() -> Deployment {
        let redis = RedisServer::start(false);
        let opts = Opts::default()
            .redis(&redis.url())
            // Behind a proxy every client comes from the proxy's address.
            .env("SWITCHBOARD_LIMITS__MAX_CONNECTIONS_PER_IP", "0");
        let mut nodes = Vec::new();
        for _ in 0..2 {
            nodes.push(Gateway::spawn_with(opts.clone()).await);
        }
        let addrs: Vec<&str> = nodes.iter().map(|g| g.addr.as_str()).collect();
        let lb = Nginx::start(&addrs);
        Deployment { redis, nodes, lb }
    }
}

/// `site` with WebSocket connections cut after `secs` seconds of silence
/// (a proxy with a short read timeout): upgrades succeed, then the proxy
/// drops the connection without a close frame.
pub fn cutting_sockets(site: &str, secs: u32) -> String {
    let at = site
        .find("location = /api/agent-api/ws {")
        .expect("the site config has a /ws location");
    let (head, tail) = site.split_at(at);
    let cut = format!("proxy_read_timeout {secs}s;");
    let tail = tail.replacen("proxy_read_timeout 75s;", &cut, 1);
    assert!(
        tail.contains(&cut),
        "the /ws location no longer sets proxy_read_timeout 75s"
    );
    format!("{head}{tail}")
}
