//! `bash {command, timeout_secs?}`: runs a shell command in the workspace, inside the run's
//! sandbox (see [`crate::sandbox`]): a write outside the workspace fails as the command's own
//! `Permission denied`, and the model is told why.
//!
//! The command runs in its own session and process group (the sandbox makes them), so a timeout or a cancelled run kills everything
//! it started. Output is captured up to a cap (the rest is drained and counted, never buffered),
//! and a background process that keeps the pipes open cannot hold the call past its end.

use super::str_arg;
use crate::sandbox::pipes::{capture, kill_group, Captured};
use crate::tools::{SafetyTier, Tool, ToolContext, ToolError};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::process::Stdio;
use std::time::Duration;

const DEFAULT_TIMEOUT_SECS: u64 = 120;
const MAX_TIMEOUT_SECS: u64 = 3600;
/// Bytes kept of each of stdout and stderr.
const CAPTURE_CAP: usize = 1024 * 1024;
/// How long the pipes may stay open after the shell exits (a background job holding them).
const PIPE_GRACE: Duration = Duration::from_millis(500);

/// Runs shell commands.
pub struct Bash;

#[async_trait]
impl Tool for Bash {
    fn name(&self) -> &str {
        "bash"
    }

    fn description(&self) -> &str {
        "Run a bash command in the workspace directory and get its output and exit status. \
         Commands are stopped after timeout_secs (default 120)."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "minLength": 1, "description": "The command line, run by bash -c."},
                "timeout_secs": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT_SECS, "description": "Seconds before the command is killed (default 120)."}
            },
            "required": ["command"],
            "additionalProperties": false
        })
    }

    fn tier(&self) -> SafetyTier {
        SafetyTier::T3
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let command = str_arg(&input, "command");
        let timeout = Duration::from_secs(
            input
                .get("timeout_secs")
                .and_then(Value::as_u64)
                .unwrap_or(DEFAULT_TIMEOUT_SECS),
        );
        let mut command_line = ctx
            .sandbox
            .command("bash")
            .map_err(|e| ToolError::Execution(e.to_string()))?;
        // Which call this is, for a command that makes an effect elsewhere to dedupe on.
        command_line.env("RYVOS_RUN_ID", ctx.run_id.as_str());
        if let Some(call) = &ctx.call {
            command_line
                .env("RYVOS_CALL_ID", call.call_id.as_str())
                .env("RYVOS_IDEMPOTENCY_KEY", &call.idempotency_key);
        }
        let mut child = command_line
            .arg("-c")
            .arg(command)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| ToolError::Execution(format!("cannot start bash in its sandbox: {e}")))?;
        let group = child.id().map(|id| id as i32);
        let stdout = tokio::spawn(capture(child.stdout.take(), CAPTURE_CAP));
        let stderr = tokio::spawn(capture(child.stderr.take(), CAPTURE_CAP));

        let ended = tokio::select! {
            status = child.wait() => Ended::Exited(status),
            _ = tokio::time::sleep(timeout) => Ended::TimedOut,
            _ = ctx.cancel.cancelled() => Ended::Cancelled,
        };
        if !matches!(ended, Ended::Exited(_)) {
            kill_group(group);
        }
        let (out, err) = drain(stdout, stderr, group).await;
        let mut text = render(out, err);
        let mut notes = command_line.finish().await;
        notes.extend(ctx.sandbox.explain(&text));
        for note in notes {
            text.push('\n');
            text.push_str(&note);
        }
        ended.into_result(text, timeout)
    }
}

enum Ended {
    Exited(std::io::Result<std::process::ExitStatus>),
    TimedOut,
    Cancelled,
}

impl Ended {
    /// The tool's result: the command's output `text`, failed unless it exited with 0.
    fn into_result(self, text: String, timeout: Duration) -> Result<String, ToolError> {
        match self {
            Ended::Exited(Ok(status)) if status.success() => Ok(text),
            Ended::Exited(Ok(status)) => {
                let code = status
                    .code()
                    .map(|c| format!("status {c}"))
                    .unwrap_or_else(|| "a signal".into());
                Err(ToolError::Execution(format!(
                    "the command exited with {code}\n{text}"
                )))
            }
            Ended::Exited(Err(e)) => Err(ToolError::Execution(format!(
                "waiting for the command failed: {e}\n{text}"
            ))),
            Ended::TimedOut => Err(ToolError::Execution(format!(
                "the command was killed after {}s (timeout_secs); output so far:\n{text}",
                timeout.as_secs()
            ))),
            Ended::Cancelled => Err(ToolError::Execution(format!(
                "the command was killed because the run stopped; output so far:\n{text}"
            ))),
        }
    }
}

/// What the shell's pipes held once it is gone: they get a moment, then whatever still holds
/// them is killed; a process that left the group (setsid) and keeps them open is not waited
/// for.
async fn drain(
    mut stdout: tokio::task::JoinHandle<Captured>,
    mut stderr: tokio::task::JoinHandle<Captured>,
    group: Option<i32>,
) -> (Captured, Captured) {
    let grace = tokio::time::sleep(PIPE_GRACE);
    tokio::pin!(grace);
    let (mut out, mut err) = (None, None);
    let mut graces_left = 2;
    while out.is_none() || err.is_none() {
        tokio::select! {
            r = &mut stdout, if out.is_none() => out = Some(r.unwrap_or_default()),
            r = &mut stderr, if err.is_none() => err = Some(r.unwrap_or_default()),
            _ = &mut grace => {
                graces_left -= 1;
                if graces_left == 0 {
                    stdout.abort();
                    stderr.abort();
                    break;
                }
                kill_group(group);
                grace.as_mut().reset(tokio::time::Instant::now() + PIPE_GRACE * 4);
            }
        }
    }
    (out.unwrap_or_default(), err.unwrap_or_default())
}

fn render(out: Captured, err: Captured) -> String {
    let mut text = String::from_utf8_lossy(&out.bytes).into_owned();
    if out.total > out.bytes.len() {
        text.push_str(&format!(
            "\n[stdout cut: {} of {} bytes kept]",
            out.bytes.len(),
            out.total
        ));
    }
    if err.total > 0 {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str("[stderr]\n");
        text.push_str(&String::from_utf8_lossy(&err.bytes));
        if err.total > err.bytes.len() {
            text.push_str(&format!(
                "\n[stderr cut: {} of {} bytes kept]",
                err.bytes.len(),
                err.total
            ));
        }
    }
    if text.is_empty() {
        text.push_str("(no output)");
    }
    text
}
