//! A store that cannot write (a full disk) fails the runs that need it, with the storage error
//! as their reason and no side effect run; once it can write again, runs and resumes work on
//! the same runtime, without a restart, and everything reported durable is there.
//!
//! The disk fills through the store's fault-injection switch: redb meets a real `ENOSPC` from
//! its file and refuses every later operation until the store reopens it.

mod common;

use common::Harness;
use ryvos::testing::{fail_store_writes, Inspect};
use ryvos::{RunStatus, SessionId};
use ryvos_testkit::Reply;

#[tokio::test]
async fn a_full_disk_fails_its_runs_and_the_same_runtime_works_once_space_is_back() {
    let h = Harness::start(
        vec![
            Reply::text(&["first answer"]),
            Reply::tool_calls(&[("call_1", "bash", r#"{"command": "touch side_effect"}"#)]),
            Reply::text(&["after the disk was freed"]),
            Reply::text(&["a new session"]),
        ],
        |_| {},
    )
    .await;
    let database = h.config.database_path();
    let store = h.runtime.store().clone();

    let (_, first) = h.run(h.request("before the disk fills")).await;
    assert_eq!(first.status, RunStatus::Completed, "{:?}", first.reason);
    let session = first.session_id.clone();

    fail_store_writes(&database, true);
    let (_, full) = h
        .run(h.request("touch a file").session(session.clone()))
        .await;
    assert_eq!(full.status, RunStatus::Failed);
    let reason = full.reason.unwrap_or_default();
    assert!(reason.contains("No space left on device"), "{reason}");
    assert!(
        !h.workspace.path().join("side_effect").exists(),
        "no side effect runs before its turn is durable"
    );
    let fault = store.fault().expect("the store says it cannot write");
    assert!(fault.contains("No space left on device"), "{fault}");

    // Space is back. The store opens its file again at its next try (with backoff, at most a
    // second away): wait for a read to succeed.
    fail_store_writes(&database, false);
    let reopened = async {
        while store.session_record(&session).await.is_err() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), reopened)
        .await
        .expect("the store opens again once space is back");
    let (_, resumed) = h.run(h.request("and now?").session(session.clone())).await;
    assert_eq!(resumed.status, RunStatus::Completed, "{:?}", resumed.reason);
    assert_eq!(resumed.output, "after the disk was freed");
    assert_eq!(store.fault(), None, "the store writes again");
    let (_, fresh) = h.run(h.request("a new one")).await;
    assert_eq!(fresh.status, RunStatus::Completed, "{:?}", fresh.reason);

    // Everything reported durable is stored: both answered runs, in order.
    let history = store.load_session(&session).await.unwrap();
    let texts: Vec<String> = history
        .messages
        .iter()
        .map(|m| format!("{:?}", m.message))
        .collect();
    let at = |needle: &str| {
        texts
            .iter()
            .position(|t| t.contains(needle))
            .unwrap_or_else(|| panic!("{needle} is stored: {texts:#?}"))
    };
    assert!(at("first answer") < at("after the disk was freed"));
    let fresh_history = store
        .load_session(&SessionId::new(fresh.session_id.as_str()))
        .await
        .unwrap();
    assert!(!fresh_history.messages.is_empty());
}

/// Unmounts the tmpfs at its path when the test ends, however it ends.
struct Mounted(std::path::PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let unmounted = std::process::Command::new("umount")
            .arg("--lazy")
            .arg(&self.0)
            .status();
        if !matches!(unmounted, Ok(s) if s.success()) {
            eprintln!("could not unmount {}: {unmounted:?}", self.0.display());
        }
    }
}

/// Mounts a tmpfs of `mib` MiB at `dir`; `None` (with the reason printed) where that cannot
/// be done: not root, or no right to mount.
fn mount_tmpfs(dir: &std::path::Path, mib: u32) -> Option<Mounted> {
    // SAFETY: geteuid only reads the process's user id.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: mounting a tmpfs needs root");
        return None;
    }
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
        .arg(dir)
        .status();
    if !matches!(mounted, Ok(s) if s.success()) {
        eprintln!("skipped: a tmpfs cannot be mounted here ({mounted:?})");
        return None;
    }
    Some(Mounted(dir.to_path_buf()))
}

/// Writes zeros to `path` until the filesystem is full.
fn fill(path: &std::path::Path) {
    use std::io::Write;
    let mut file = std::fs::File::create(path).expect("the filler is created");
    let block = vec![0u8; 64 * 1024];
    while file.write_all(&block).is_ok() {}
    // What did fit is on the disk, so the space is really gone.
    file.sync_all().ok();
}

/// The `RunComplete` event of `ryvos run --json`'s output.
fn run_complete(stdout: &str) -> serde_json::Value {
    common::cli::json_lines(stdout)
        .into_iter()
        .find(|e| e["type"] == "RunComplete")
        .unwrap_or_else(|| panic!("a RunComplete in {stdout}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_daemon_whose_home_fills_up_recovers_without_a_restart_once_space_is_back() {
    let server = ryvos_testkit::ScriptedModelServer::start([
        Reply::text(&["first answer"]),
        Reply::tool_calls(&[("c1", "bash", r#"{"command": "touch side_effect"}"#)]),
        Reply::text(&["after the disk was freed"]),
        Reply::text(&["a new session"]),
    ])
    .await;
    let home = common::home::Home::new(&server, "");
    let config = std::fs::read(home.path().join("config.toml")).unwrap();
    let Some(_mounted) = mount_tmpfs(home.path(), 16) else {
        return;
    };
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let daemon = home.daemon().await;

    let (code, stdout, stderr) = home
        .ryvos(&["run", "--json", "before", "it", "fills"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let first = run_complete(&stdout);
    let session = first["session_id"].as_str().unwrap().to_owned();

    let filler = home.path().join("filler");
    fill(&filler);
    let (code, stdout, _) = home
        .ryvos(&["run", "--json", "--resume", &session, "touch", "a", "file"])
        .await;
    assert_ne!(code, 0);
    let full = run_complete(&stdout);
    assert_eq!(full["status"], "failed");
    let reason = full["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("No space left on device"), "{reason}");
    assert!(!home.workspace.path().join("side_effect").exists());
    let (code, out, _) = home.ryvos(&["status"]).await;
    assert_eq!(code, 0, "the daemon serves on");
    assert!(out.contains("DEGRADED"), "{out}");

    // Space is back; the store opens its file again at its next try (within a second).
    std::fs::remove_file(&filler).unwrap();
    let reopened = async {
        while home.ryvos(&["history", &session]).await.0 != 0 {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(20), reopened)
        .await
        .expect("the store opens again once space is back");
    let (code, stdout, stderr) = home
        .ryvos(&["run", "--json", "--resume", &session, "and", "now?"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(run_complete(&stdout)["output"], "after the disk was freed");
    let (code, _, stderr) = home.ryvos(&["run", "--json", "a", "new", "one"]).await;
    assert_eq!(code, 0, "{stderr}");
    let (_, out, _) = home.ryvos(&["status"]).await;
    assert!(!out.contains("DEGRADED"), "{out}");

    home.shutdown(daemon).await;
    // The store opens, and holds both answered runs of the session in order.
    let store = ryvos::testing::Store::open(&home.path().join("ryvos.redb"), true).unwrap();
    let history = store
        .load_session(&SessionId::new(session.as_str()))
        .await
        .unwrap();
    let texts: Vec<String> = history
        .messages
        .iter()
        .map(|m| format!("{:?}", m.message))
        .collect();
    let at = |needle: &str| texts.iter().position(|t| t.contains(needle));
    assert!(
        at("first answer") < at("after the disk was freed") && at("first answer").is_some(),
        "{texts:#?}"
    );
}
