//! What the sandbox costs a command, as the `bash` tool feels it: the time from asking for a
//! command to seeing `true` end, unconfined (`mode = "off"`), in the default sandbox
//! (bubblewrap's namespaces, `ryvos-sandbox` with Landlock and seccomp inside, the command's
//! cgroup or rlimits, no network), and with `allowed_domains` (the egress proxy and its
//! bridge), over 200 commands each.
//!
//!     cargo bench --bench sandbox_start
//!
//! Needs bubblewrap. Results are printed and written to target/ryvos-bench/sandbox_start.txt.

mod support;

use ryvos::config::{SandboxConfig, SandboxMode};
use ryvos::{Sandbox, SandboxSite, Workspace};
use std::time::Instant;
use support::{machine, percentile, publish};

const COMMANDS: usize = 200;

/// The times (ms, sorted) of `COMMANDS` runs of `true` under `config`.
async fn start_times(config: SandboxConfig) -> Vec<f64> {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(&config, SandboxSite::home(home.path())).unwrap();
    if let Some(why) = sandbox.unenforceable() {
        panic!("the sandbox cannot be measured here: {why}");
    }
    let run = sandbox.for_run(&Workspace::new(dir.path()).unwrap());
    let mut times = Vec::with_capacity(COMMANDS);
    for _ in 0..COMMANDS {
        let started = Instant::now();
        let status = run.command("true").unwrap().status().await.unwrap();
        times.push(started.elapsed().as_secs_f64() * 1000.0);
        assert!(status.success());
    }
    times.sort_by(f64::total_cmp);
    times
}

#[tokio::main]
async fn main() {
    let off = SandboxConfig {
        mode: SandboxMode::Off,
        ..SandboxConfig::default()
    };
    let proxied = SandboxConfig {
        allowed_domains: vec!["crates.io".into()],
        ..SandboxConfig::default()
    };
    let mut report = format!(
        "sandbox_start: {COMMANDS} runs of `true` each, {}\n\n| sandbox | median ms | p95 ms |\n|---|---|---|\n",
        machine()
    );
    for (name, config) in [
        ("off (unconfined)", off),
        ("default (no network)", SandboxConfig::default()),
        ("allowed_domains (proxy)", proxied),
    ] {
        let times = start_times(config).await;
        report.push_str(&format!(
            "| {name} | {:.2} | {:.2} |\n",
            percentile(&times, 0.5),
            percentile(&times, 0.95)
        ));
    }
    publish("sandbox_start.txt", &report);
}
