//! A command hook: `sh -c LINE` in the run's sandbox (its own network reach), as Claude Code
//! runs its hooks, the step's JSON on stdin, killed with everything it started at its timeout.

use super::reply::Ended;
use crate::sandbox::pipes::{capture, kill_group, Captured};
use crate::sandbox::RunSandbox;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// Bytes kept of each of stdout and stderr; the rest is read and dropped.
const CAPTURE_CAP: usize = 256 * 1024;

/// What a command hook runs with besides its line.
pub(crate) struct Running<'a> {
    pub sandbox: &'a RunSandbox,
    pub input: &'a [u8],
    pub timeout: Duration,
    /// Set in its environment: Claude Code's `CLAUDE_PROJECT_DIR`, Ryvos's ids.
    pub env: &'a [(&'static str, String)],
}

/// Runs `line` as a hook, to its end or its timeout.
pub(crate) async fn run(line: &str, running: Running<'_>) -> Ended {
    let mut command = match running.sandbox.command("sh") {
        Ok(command) => command,
        Err(e) => return Ended::Failed(format!("it cannot run: {e}")),
    };
    for (key, value) in running.env {
        command.env(key, value);
    }
    let spawned = command
        .arg("-c")
        .arg(line)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => return Ended::Failed(format!("it could not be started in its sandbox: {e}")),
    };
    let group = child.id().map(|id| id as i32);
    let input = running.input.to_vec();
    let stdin = child.stdin.take();
    // Written beside the reading: a hook may answer before it reads all of a large input, or
    // never read it (a closed pipe is its business).
    let writer = tokio::spawn(async move {
        if let Some(mut stdin) = stdin {
            stdin.write_all(&input).await.ok();
        }
    });
    let stdout = tokio::spawn(capture(child.stdout.take(), CAPTURE_CAP));
    let stderr = tokio::spawn(capture(child.stderr.take(), CAPTURE_CAP));
    let waited = tokio::time::timeout(running.timeout, child.wait()).await;
    if waited.is_err() {
        // Its session is its own: everything it started goes with it.
        kill_group(group);
    }
    writer.abort();
    let notes = command.finish().await;
    let (stdout, stderr) = (joined(stdout).await, joined(stderr).await);
    let code = match waited {
        Err(_) => {
            return Ended::Failed(format!(
                "it did not finish within {}s (timeout_secs) and was killed",
                running.timeout.as_secs()
            ))
        }
        Ok(Err(e)) => return Ended::Failed(format!("waiting for it failed: {e}")),
        Ok(Ok(status)) => status.code(),
    };
    let mut stderr = stderr;
    for note in notes {
        stderr.push('\n');
        stderr.push_str(&note);
    }
    Ended::Exited {
        code,
        stdout,
        stderr,
    }
}

/// A pipe's text once it closed (at most a moment after the group was killed).
async fn joined(task: tokio::task::JoinHandle<Captured>) -> String {
    let captured = tokio::time::timeout(Duration::from_secs(2), task)
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    String::from_utf8_lossy(&captured.bytes).into_owned()
}
