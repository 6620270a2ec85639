//! Starting the server(s) under test, pinned with `taskset`, and reading
//! their CPU time and memory from `/proc`.

use crate::procstat;
use crate::target::anyhow_lite::{bail, Context, Result};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The servers of one run (one per node). Killed on drop.
pub struct Servers {
    children: Vec<Child>,
    /// The launched (or given) root pids.
    pub pids: Vec<u32>,
    /// Node addresses `127.0.0.1:PORT`.
    pub addrs: Vec<String>,
    /// Addresses of the `aux` processes (a Redis), in order.
    pub aux_addrs: Vec<String>,
    pub commands: Vec<String>,
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(18080)
}

impl Servers {
    /// Runs each command (`{port}` replaced by a free port) as
    /// `taskset -c CPUS sh -c 'exec COMMAND'`, so the pid is the server's
    /// own, and waits until each accepts TCP connections.
    ///
    /// `aux` commands (a Redis the nodes share) start first, on the same
    /// CPUs; `{aux_port}` in the server commands is the first one's port.
    /// They count in the CPU and memory figures but are not nodes.
    pub fn launch(
        aux: &[String],
        cmds: &[String],
        cpus: &str,
        log_dir: &std::path::Path,
    ) -> Result<Servers> {
        Self::launch_with_env(aux, cmds, cpus, log_dir, &[])
    }

    /// [`Servers::launch`] with extra environment variables for every
    /// process (aux included).
    pub fn launch_with_env(
        aux: &[String],
        cmds: &[String],
        cpus: &str,
        log_dir: &std::path::Path,
        env: &[(&str, &str)],
    ) -> Result<Servers> {
        std::fs::create_dir_all(log_dir).ok();
        let mut s = Servers {
            children: Vec::new(),
            pids: Vec::new(),
            addrs: Vec::new(),
            aux_addrs: Vec::new(),
            commands: Vec::new(),
        };
        let mut aux_port = None;
        let all: Vec<(bool, &String)> = aux
            .iter()
            .map(|c| (true, c))
            .chain(cmds.iter().map(|c| (false, c)))
            .collect();
        for (i, (is_aux, cmd)) in all.into_iter().enumerate() {
            let port = free_port();
            if is_aux && aux_port.is_none() {
                aux_port = Some(port);
            }
            let cmd = cmd
                .replace("{port}", &port.to_string())
                .replace("{aux_port}", &aux_port.unwrap_or(0).to_string());
            let log = std::fs::File::create(log_dir.join(format!("server-{i}.log")))
                .context("server log")?;
            let mut c = if cpus.is_empty() {
                let mut c = Command::new("sh");
                c.arg("-c").arg(format!("exec {cmd}"));
                c
            } else {
                let mut c = Command::new("taskset");
                c.args(["-c", cpus, "sh", "-c"]).arg(format!("exec {cmd}"));
                c
            };
            c.envs(env.iter().copied());
            // If the harness dies (killed, panics), the server gets SIGTERM.
            // SAFETY: prctl is async-signal-safe; nothing else runs in pre_exec.
            unsafe {
                c.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                    Ok(())
                });
            }
            let child = c
                .stdin(Stdio::null())
                .stdout(log.try_clone().context("log")?)
                .stderr(log)
                .spawn()
                .context(format!("spawn {cmd}"))?;
            s.pids.push(child.id());
            s.children.push(child);
            if is_aux {
                s.aux_addrs.push(format!("127.0.0.1:{port}"));
            } else {
                s.addrs.push(format!("127.0.0.1:{port}"));
            }
            s.commands.push(format!("taskset -c {cpus} {cmd}"));
            // One at a time: a node must find its Redis already listening.
            s.wait_listening(i, &format!("127.0.0.1:{port}"), log_dir)?;
        }
        // Let the process finish starting (nginx forks its worker, node loads modules).
        std::thread::sleep(Duration::from_millis(300));
        Ok(s)
    }

    /// Waits until process `i` accepts connections on `addr`.
    fn wait_listening(&mut self, i: usize, addr: &str, log_dir: &std::path::Path) -> Result<()> {
        let t0 = Instant::now();
        loop {
            if std::net::TcpStream::connect(addr).is_ok() {
                return Ok(());
            }
            if let Ok(Some(st)) = self.children[i].try_wait() {
                bail!(
                    "server {} exited with {st} before listening (log: {})",
                    self.commands[i],
                    log_dir.join(format!("server-{i}.log")).display()
                );
            }
            if t0.elapsed() > Duration::from_secs(30) {
                bail!("server {} did not listen within 30 s", self.commands[i]);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// External servers: addresses and optional pids to measure.
    pub fn external(addrs: Vec<String>, pids: Vec<u32>) -> Servers {
        Servers {
            children: Vec::new(),
            pids,
            addrs,
            aux_addrs: Vec::new(),
            commands: Vec::new(),
        }
    }

    fn all_pids(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.pids.iter().flat_map(|&p| procstat::tree(p)).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// CPU seconds used so far by the servers and their children.
    pub fn cpu_seconds(&self) -> f64 {
        procstat::cpu_seconds(&self.all_pids())
    }

    /// Sum of peak RSS (VmHWM) over the server processes, KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        self.all_pids()
            .iter()
            .filter_map(|&p| procstat::status_kib(p, "VmHWM"))
            .sum()
    }

    /// Sum of current RSS over the server processes, KiB.
    pub fn rss_kib(&self) -> u64 {
        self.all_pids()
            .iter()
            .filter_map(|&p| procstat::status_kib(p, "VmRSS"))
            .sum()
    }

    /// Whether every launched server still runs.
    pub fn alive(&mut self) -> bool {
        self.children
            .iter_mut()
            .all(|c| matches!(c.try_wait(), Ok(None)))
    }

    pub fn stop(&mut self) {
        for c in &mut self.children {
            // SIGTERM first (nginx's master then stops its worker), then kill.
            // SAFETY: kill(2) on our own child's pid.
            unsafe {
                libc::kill(c.id() as i32, libc::SIGTERM);
            }
        }
        // A profiler (callgrind) needs longer to write its output.
        let grace = std::env::var("BENCH_STOP_GRACE_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(5);
        let t0 = Instant::now();
        for c in &mut self.children {
            while t0.elapsed() < Duration::from_secs(grace) {
                if let Ok(Some(_)) = c.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        self.children.clear();
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        self.stop();
    }
}
