//! A real `redis-server` for a test: its own free port, its own temporary
//! directory, no persistence. Killed (and its directory removed) on drop.
//! [`RedisCluster`]: three of them forming a real Redis Cluster.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
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
        Self::start_in(extra, |_| Vec::new())
    }

    /// Starts a server with `extra` arguments and more made from its
    /// temporary directory (e.g. a file inside it).
    fn start_in(extra: &[&str], in_dir: impl Fn(&Path) -> Vec<String>) -> RedisServer {
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
                .args(in_dir(dir.path()))
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
        self.try_cmd(args).expect("redis command")
    }

    /// Runs one command on a fresh (synchronous) connection; errors too.
    pub fn try_cmd(&self, args: &[&str]) -> redis::RedisResult<redis::Value> {
        let client = redis::Client::open(self.url()).expect("redis url");
        let mut conn = client.get_connection().expect("connect to test redis");
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        c.query(&mut conn)
    }

    /// A command's reply as text (bulk, simple or verbatim string).
    pub fn text(&self, args: &[&str]) -> String {
        as_text(self.cmd(args))
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

/// A string reply as text; anything else as its debug form.
pub fn as_text(v: redis::Value) -> String {
    match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
        redis::Value::SimpleString(s) => s,
        redis::Value::VerbatimString { text, .. } => text,
        redis::Value::Int(i) => i.to_string(),
        redis::Value::Okay => "OK".into(),
        other => format!("{other:?}"),
    }
}

/// A real three-master Redis Cluster: three `redis-server --cluster-enabled
/// yes` processes (each on free ports, in its own temporary directory, no
/// persistence, `noeviction`), joined with `redis-cli --cluster create`
/// (slots split evenly, no replicas). Killed on drop.
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    pub fn start() -> RedisCluster {
        let nodes: Vec<RedisServer> = (0..3)
            .map(|n| {
                RedisServer::start_in(
                    &[
                        "--cluster-enabled",
                        "yes",
                        "--maxmemory-policy",
                        "noeviction",
                        "--cluster-node-timeout",
                        "5000",
                    ],
                    move |dir| {
                        vec![
                            "--cluster-config-file".into(),
                            dir.join(format!("nodes-{n}.conf")).display().to_string(),
                            // The bus port (default: port + 10000, maybe taken or > 65535).
                            "--cluster-port".into(),
                            free_port().to_string(),
                        ]
                    },
                )
            })
            .collect();
        let cluster = RedisCluster { nodes };
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for node in &cluster.nodes {
            create.arg(format!("127.0.0.1:{}", node.port()));
        }
        let out = create
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("cannot run redis-cli: install redis-server (apt-get install redis-server)");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        cluster.wait_ok();
        cluster
    }

    /// Waits until every node says `cluster_state:ok` and knows all three.
    pub fn wait_ok(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let infos: Vec<String> = self
                .nodes
                .iter()
                .map(|n| n.text(&["CLUSTER", "INFO"]))
                .collect();
            if infos
                .iter()
                .all(|i| i.contains("cluster_state:ok") && i.contains("cluster_known_nodes:3"))
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the cluster did not come up: {infos:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The seed URLs, one per node.
    pub fn seeds(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The seeds as one `redis.url` value (comma-separated).
    pub fn url(&self) -> String {
        self.seeds().join(",")
    }

    /// The slot of `key` (`CLUSTER KEYSLOT`).
    pub fn keyslot(&self, key: &str) -> u16 {
        self.nodes[0]
            .text(&["CLUSTER", "KEYSLOT", key])
            .parse()
            .expect("a slot number")
    }

    /// The node id of node `i` (`CLUSTER MYID`).
    pub fn node_id(&self, i: usize) -> String {
        self.nodes[i].text(&["CLUSTER", "MYID"])
    }

    /// The index of the node that serves `slot`, as node 0 sees it
    /// (`CLUSTER NODES`).
    pub fn owner_of(&self, slot: u16) -> usize {
        let id_of_owner = |i: usize| -> Option<String> {
            let nodes = self.nodes[i].text(&["CLUSTER", "NODES"]);
            nodes.lines().find_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let owns = fields.iter().skip(8).any(|range| {
                    let mut ends = range.splitn(2, '-');
                    match (ends.next().map(str::parse::<u16>), ends.next()) {
                        (Some(Ok(a)), Some(b)) => {
                            b.parse::<u16>().is_ok_and(|b| a <= slot && slot <= b)
                        }
                        (Some(Ok(a)), None) => a == slot,
                        _ => false,
                    }
                });
                owns.then(|| fields[0].to_owned())
            })
        };
        let owner = id_of_owner(0).expect("some node serves the slot");
        (0..self.nodes.len())
            .find(|&i| self.node_id(i) == owner)
            .expect("the owner is one of the nodes")
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}
