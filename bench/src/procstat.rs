//! What the harness reads from `/proc`: a server's CPU time (utime+stime of
//! the process and its descendants), its peak RSS (VmHWM) and current RSS,
//! and the harness's own CPU time; plus the fd limit and CPU pinning.

use std::fs;

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`, 100 on Linux).
pub fn clk_tck() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// `(ppid, utime+stime ticks)` of one process, from `/proc/PID/stat`.
fn stat(pid: u32) -> Option<(u32, u64)> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain spaces.
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): ppid is field 4, utime 14, stime 15.
    let ppid = f.get(1)?.parse().ok()?;
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some((ppid, utime + stime))
}

/// `pid` and all its descendants (nginx's master and worker, for example).
pub fn tree(pid: u32) -> Vec<u32> {
    let mut all = Vec::new();
    if let Ok(rd) = fs::read_dir("/proc") {
        for e in rd.flatten() {
            if let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) {
                if let Some((ppid, _)) = stat(p) {
                    all.push((p, ppid));
                }
            }
        }
    }
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        for &(p, pp) in &all {
            if pp == parent && !out.contains(&p) {
                out.push(p);
            }
        }
        i += 1;
    }
    out
}

/// CPU seconds (user + system) used so far by the given processes.
pub fn cpu_seconds(pids: &[u32]) -> f64 {
    let ticks: u64 = pids.iter().filter_map(|&p| stat(p)).map(|(_, t)| t).sum();
    ticks as f64 / clk_tck()
}

/// A `/proc/PID/status` field in KiB (`VmHWM`, `VmRSS`).
pub fn status_kib(pid: u32, key: &str) -> Option<u64> {
    let s = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with(key) && l[key.len()..].starts_with(':'))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

/// This process's own CPU seconds (the load generator's cost).
pub fn self_cpu_seconds() -> f64 {
    cpu_seconds(&[std::process::id()])
}

/// CPU seconds all processes on the machine have used (all cores, user +
/// nice + system from /proc/stat). Minus the server's and the load
/// generator's own CPU it tells how much *other* work ran during a window.
pub fn machine_busy_seconds() -> f64 {
    let s = fs::read_to_string("/proc/stat").unwrap_or_default();
    let v: Vec<u64> = s
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    if v.len() < 4 {
        return 0.0;
    }
    // user + nice + system: irq/softirq time (our own loopback traffic is
    // processed there) and steal are not charged to any process.
    (v[0] + v[1] + v[2]) as f64 / clk_tck()
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit; returns `(soft, hard)`.
pub fn raise_nofile() -> (u64, u64) {
    // SAFETY: plain libc calls on a local struct.
    unsafe {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return (0, 0);
        }
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        (lim.rlim_cur, lim.rlim_max)
    }
}

/// Pins the calling thread (call it before the runtime starts, so every
/// thread inherits it) to the CPUs in a taskset-style list ("1", "0-1", "0,2").
pub fn pin_self(cpus: &str) -> bool {
    let list = parse_cpus(cpus);
    if list.is_empty() {
        return false;
    }
    // SAFETY: cpu_set_t is plain data; CPU_SET writes within it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for c in list {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

fn parse_cpus(s: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                    out.extend(a..=b);
                }
            }
            None => out.extend(part.parse::<usize>().ok()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cpu_lists() {
        assert_eq!(parse_cpus("1"), vec![1]);
        assert_eq!(parse_cpus("0-2,5"), vec![0, 1, 2, 5]);
        assert!(parse_cpus("").is_empty());
    }

    #[test]
    fn reads_own_stats() {
        let me = std::process::id();
        assert!(status_kib(me, "VmHWM").unwrap() > 0);
        assert!(tree(me).contains(&me));
        assert!(cpu_seconds(&[me]) >= 0.0);
    }
}
