//! What the sandbox costs a command, as the `bash` tool feels it: the time from asking for a
//! command to seeing `true` end, unconfined (`mode = "off"`), in the default sandbox
//! (bubblewrap's namespaces, `ryvos-sandbox` with Landlock and seccomp inside, the command's
//! cgroup or rlimits, no network), and with `allowed_domains` (the egress proxy and its
//! bridge), over 200 commands each. Run as root, the default sandbox lends its commands an
//! unprivileged user (an idmapped workspace): it is measured beside `run_as = "root"`, the
//! sandbox as it was before. And what the `bash` tool does after each command: the search for
//! git code the command planted, in a workspace of 10,000 files.
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

/// The times (ms, sorted) of `COMMANDS` runs of `true` under `config`; with `finish`, the
/// command's finish (the search for planted git code) is timed too, in a workspace of
/// `files` files.
async fn start_times(config: SandboxConfig, files: usize, finish: bool) -> Vec<f64> {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    for n in 0..files {
        let sub = dir.path().join(format!("d{}", n / 100));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join(format!("f{n}")), "x").unwrap();
    }
    let sandbox = Sandbox::new(&config, SandboxSite::home(home.path())).unwrap();
    if let Some(why) = sandbox.unenforceable() {
        panic!("the sandbox cannot be measured here: {why}");
    }
    let run = sandbox.for_run(&Workspace::new(dir.path()).unwrap());
    let mut times = Vec::with_capacity(COMMANDS);
    for _ in 0..COMMANDS {
        let started = Instant::now();
        let mut command = run.command("true").unwrap();
        let status = command.status().await.unwrap();
        if finish {
            command.finish().await;
        }
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
    let kept_root = SandboxConfig {
        run_as: "root".into(),
        ..SandboxConfig::default()
    };
    // SAFETY: geteuid only reads the caller's id.
    let root = unsafe { libc::geteuid() } == 0;
    let mut rows = vec![
        ("off (unconfined)", off, 0, false),
        ("default (no network)", SandboxConfig::default(), 0, false),
        ("allowed_domains (proxy)", proxied, 0, false),
        (
            "default, then the planted-git search (10,000 files)",
            SandboxConfig::default(),
            10_000,
            true,
        ),
    ];
    if root {
        rows.insert(
            1,
            (
                "default, run_as = \"root\" (as before)",
                kept_root,
                0,
                false,
            ),
        );
    }
    for (name, config, files, finish) in rows {
        let times = start_times(config, files, finish).await;
        report.push_str(&format!(
            "| {name} | {:.2} | {:.2} |\n",
            percentile(&times, 0.5),
            percentile(&times, 0.95)
        ));
    }
    publish("sandbox_start.txt", &report);
}
