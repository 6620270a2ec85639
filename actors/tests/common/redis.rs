//! A real `redis-server` for a test: its own free port, its own temporary
//! directory, no persistence. Killed (and its directory removed) on drop.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RedisServer {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl RedisServer {
    /// Starts a server with the default test configuration.
    pub fn start() -> RedisServer {
        Self::start_with(&[])
    }

    /// Starts a server with extra `redis-server` arguments
    /// (e.g. `["--maxmemory-policy", "allkeys-lru"]`).
    pub fn start_with(extra: &[&str]) -> RedisServer {
        let mut last_err = String::new();
        // A port found free may be taken before the server binds it; retry.
        for _ in 0..5 {
            let port = free_port();
            let dir = tempfile::tempdir().expect("temp dir for redis-server");
            let log = std::fs::File::create(dir.path().join("redis.log")).expect("log file");
            let child = Command::new("redis-server")
                .arg("--port")
                .arg(port.to_string())
                .args(["--bind", "127.0.0.1"])
                .arg("--dir")
                .arg(dir.path())
                .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
                .args(extra)
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log file"))
                .stderr(log)
                .spawn()
                .expect("cannot run redis-server: install it (apt-get install redis-server)");
            let mut server = RedisServer { child, port, dir };
            match server.wait_ready() {
                Ok(()) => return server,
                Err(e) => last_err = e,
            }
        }
        panic!("redis-server did not start: {last_err}");
    }

    /// Starts a one-node Redis Cluster that owns every slot. Scripts whose
    /// keys span slots fail there with `CROSSSLOT`, so running the engine
    /// against it checks that every script stays within one Bay's slot.
    pub fn start_cluster() -> RedisServer {
        let server = Self::start_with(&["--cluster-enabled", "yes"]);
        server.cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let info = match server.cmd(&["CLUSTER", "INFO"]) {
                redis::Value::BulkString(b) => String::from_utf8(b).unwrap_or_default(),
                redis::Value::VerbatimString { text, .. } => text,
                _ => String::new(),
            };
            if info.contains("cluster_state:ok") {
                return server;
            }
            assert!(Instant::now() < deadline, "cluster did not come up: {info}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                let log =
                    std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default();
                return Err(format!("exited with {status}: {log}"));
            }
            if let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) {
                let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
                let mut buf = [0u8; 64];
                if s.write_all(b"PING\r\n").is_ok() {
                    if let Ok(n) = s.read(&mut buf) {
                        if buf[..n].starts_with(b"+PONG") {
                            return Ok(());
                        }
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err("not answering PING after 10 s".into())
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Runs one command on a fresh (synchronous) connection.
    pub fn cmd(&self, args: &[&str]) -> redis::Value {
        let client = redis::Client::open(self.url()).expect("redis url");
        let mut conn = client.get_connection().expect("connect to test redis");
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        c.query(&mut conn).expect("redis command")
    }

    /// Kills the server and starts a new, empty one on the same port (a
    /// Redis that lost its data).
    pub fn restart_empty(&mut self) {
        self.kill();
        let log = std::fs::File::create(self.dir.path().join("redis.log")).expect("log file");
        self.child = Command::new("redis-server")
            .arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1"])
            .arg("--dir")
            .arg(self.dir.path())
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .expect("restart redis-server");
        self.wait_ready().expect("restarted redis-server");
    }

    /// Stops the server now (the rest of the test sees it gone).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}
