//! CI smoke: the smallest S1 (3 subscribers, 5 messages) against the debug
//! Switchboard binary and against the ceiling server. Asserts correctness
//! only — every message reaches every subscriber, no publish fails — and
//! never a timing.

use std::path::PathBuf;
use switchboard_bench::scenario::{smoke, Common};
use switchboard_bench::target::System;

fn common(system: System, server: String) -> Common {
    Common {
        system,
        label: system.name().into(),
        servers: vec![server],
        aux: Vec::new(),
        addrs: Vec::new(),
        pids: Vec::new(),
        // No pinning in CI: whatever cores the runner has.
        server_cpus: String::new(),
        client_cpus: String::new(),
        concurrency: 8,
        inflight: 4,
        src_addrs: 2,
        pad: 0,
        bays: 1,
        log_dir: std::env::temp_dir().join(format!("switchboard-bench-smoke-{}", system.name())),
        dist_file: None,
    }
}

fn assert_no_loss(v: &serde_json::Value) {
    assert_eq!(v["published_ok"], 5, "{v}");
    assert_eq!(v["publish_errors"], 0, "{v}");
    assert_eq!(v["expected_deliveries"], 15, "{v}");
    assert_eq!(v["lost"], 0, "{v}");
}

fn switchboard_debug_bin() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest.join("..").join("target"));
    target.join("debug").join("switchboard")
}

#[tokio::test]
async fn smallest_s1_loses_nothing_on_switchboard() {
    switchboard_bench::stamp::start();
    let bin = switchboard_debug_bin();
    // `cargo test --workspace` builds it; `-p switchboard-bench` alone may
    // not. A missing binary is a failure, never a pass.
    assert!(
        bin.exists(),
        "{} is not built: run `cargo build --bin switchboard` or `cargo test --workspace`",
        bin.display()
    );
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/switchboard.sh");
    let cmd = format!(
        "env SWITCHBOARD_BIN={} bash {} run {{port}}",
        bin.display(),
        script.display()
    );
    let v = smoke(&common(System::Switchboard, cmd), 3, 5)
        .await
        .expect("smoke run");
    assert_no_loss(&v);
}

#[tokio::test]
async fn smallest_s1_loses_nothing_on_the_ceiling() {
    switchboard_bench::stamp::start();
    let cmd = format!(
        "{} 127.0.0.1:{{port}}",
        env!("CARGO_BIN_EXE_switchboard-bench-ceiling")
    );
    let v = smoke(&common(System::Ceiling, cmd), 3, 5)
        .await
        .expect("smoke run");
    assert_no_loss(&v);
}
