//! Running the real binaries.

use serde_json::Value;
use std::time::Duration;
use tokio::process::Command;

/// The longest a command may take before the test calls it a hang.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `command` to its end: (exit code, stdout, stderr).
pub async fn output(command: &mut Command) -> (i32, String, String) {
    let out = tokio::time::timeout(COMMAND_TIMEOUT, command.output())
        .await
        .expect("the command finished in time")
        .expect("the command started");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Each line of `stdout` as JSON.
pub fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}
