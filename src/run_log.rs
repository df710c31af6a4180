//! Run logs: JSON lines under `$RYVOS_HOME/logs/<session_id>/`, at three levels.
//!
//! - `runs.jsonl`  (L1): one line per run when it ends — status, output, turns, tokens, duration.
//! - `turns.jsonl` (L2): one line per turn when it is durable — model, tokens, tools called.
//! - `tools.jsonl` (L3): one line per tool call — input, outcome, output, duration.
//!
//! The logger follows the runtime's global event stream on a thread of its own, so file I/O never
//! runs on the async workers. Every line is written and flushed at once, so a crash keeps what
//! was logged. A logger that falls behind says how many events it missed, in the log itself.

use ryvos_protocol::event::{CallPurpose, Event, EventKind};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::broadcast;

/// The log files of one session.
pub const LEVELS: [&str; 3] = ["runs.jsonl", "turns.jsonl", "tools.jsonl"];

/// Starts the logger thread on `events`; it ends when the stream closes.
pub fn spawn(
    dir: PathBuf,
    events: broadcast::Receiver<Arc<Event>>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("ryvos-run-log".into())
        .spawn(move || RunLogger::new(dir).follow(events))
}

#[derive(Default)]
struct TurnSoFar {
    model: String,
    input_tokens: u64,
    output_tokens: u64,
    estimated: bool,
    tools: Vec<String>,
}

impl TurnSoFar {
    /// Takes the model and the usage of the turn's `ModelUsage`.
    fn took(&mut self, usage: &EventKind) {
        if let EventKind::ModelUsage {
            model,
            input_tokens,
            output_tokens,
            estimated,
            ..
        } = usage
        {
            self.model = model.clone();
            self.input_tokens = *input_tokens;
            self.output_tokens = *output_tokens;
            self.estimated = *estimated;
        }
    }
}

struct RunLogger {
    dir: PathBuf,
    /// Per run and turn: what the turn did so far. A turn is logged when its checkpoint is
    /// durable, which may be after the next turn has begun (commits overlap model calls).
    turns: HashMap<(String, u32), TurnSoFar>,
    /// Per run: the turn of its latest model call, which the tool calls that follow belong to.
    current: HashMap<String, u32>,
    /// Tool calls started (input, when).
    calls: HashMap<String, (Value, Instant)>,
    /// Open log files by (session, level file), kept while the session's run goes on.
    files: HashMap<(String, &'static str), File>,
}

impl RunLogger {
    fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            turns: HashMap::new(),
            current: HashMap::new(),
            calls: HashMap::new(),
            files: HashMap::new(),
        }
    }

    fn follow(mut self, mut events: broadcast::Receiver<Arc<Event>>) {
        loop {
            match events.blocking_recv() {
                Ok(event) => self.record(&event),
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!("the run logger fell behind and missed {missed} events");
                }
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }

    fn record(&mut self, event: &Event) {
        let run = event.run_id.as_str();
        let base = |extra: Value| {
            let mut line = json!({"ts_ms": ryvos_actors::now_ms(), "session_id": event.session_id, "run_id": event.run_id});
            if let (Some(line), Value::Object(extra)) = (line.as_object_mut(), extra) {
                line.extend(extra);
            }
            line
        };
        match &event.kind {
            // A summary's or a verdict's call is not the turn's.
            EventKind::ModelUsage {
                turn,
                purpose: CallPurpose::Turn,
                ..
            } => {
                self.current.insert(run.to_owned(), *turn);
                let so_far = self.turns.entry((run.to_owned(), *turn)).or_default();
                so_far.took(&event.kind);
            }
            EventKind::ToolStart { call_id, input, .. } => {
                self.calls
                    .insert(call_id.to_string(), (input.clone(), Instant::now()));
            }
            EventKind::ToolEnd {
                call_id,
                name,
                is_error,
                output,
            } => {
                let (input, started) = self
                    .calls
                    .remove(call_id.as_str())
                    .unwrap_or((Value::Null, Instant::now()));
                let turn = self.current.get(run).copied().unwrap_or_default();
                self.turns
                    .entry((run.to_owned(), turn))
                    .or_default()
                    .tools
                    .push(name.clone());
                let line = base(
                    json!({"level": 3, "call_id": call_id, "tool": name, "input": input,
                    "is_error": is_error, "output": output, "duration_ms": started.elapsed().as_millis() as u64}),
                );
                self.append(&event.session_id.to_string(), "tools.jsonl", &line);
            }
            EventKind::CheckpointSaved { turn } => {
                let t = self
                    .turns
                    .remove(&(run.to_owned(), *turn))
                    .unwrap_or_default();
                let line = base(
                    json!({"level": 2, "turn": turn, "model": t.model, "input_tokens": t.input_tokens,
                    "output_tokens": t.output_tokens, "usage_estimated": t.estimated, "tools": t.tools}),
                );
                self.append(&event.session_id.to_string(), "turns.jsonl", &line);
            }
            EventKind::RunComplete { .. } => {
                // Turns never made durable are not logged as turns.
                self.turns.retain(|(r, _), _| r != run);
                self.current.remove(run);
                let mut line = base(json!({"level": 1}));
                if let (Some(line), Ok(Value::Object(fields))) =
                    (line.as_object_mut(), serde_json::to_value(&event.kind))
                {
                    line.extend(fields);
                }
                let session = event.session_id.to_string();
                self.append(&session, "runs.jsonl", &line);
                // The run is over: its session's files are closed until it runs again.
                self.files.retain(|(s, _), _| *s != session);
            }
            _ => {}
        }
    }

    fn append(&mut self, session: &str, file: &'static str, line: &Value) {
        if !ryvos_protocol::ids::SessionId::is_well_formed(session) {
            tracing::error!("not logging for the malformed session id {session:?}");
            return;
        }
        let path = self.dir.join(session).join(file);
        // The whole line in one write: formatted straight into an unbuffered File, every
        // fragment of the JSON would be a system call of its own.
        let mut text = line.to_string();
        text.push('\n');
        let written = match self.files.entry((session.to_owned(), file)) {
            std::collections::hash_map::Entry::Occupied(open) => {
                open.into_mut().write_all(text.as_bytes())
            }
            std::collections::hash_map::Entry::Vacant(slot) => path
                .parent()
                .map_or(Ok(()), |dir| {
                    std::fs::DirBuilder::new()
                        .recursive(true)
                        .mode(0o700)
                        .create(dir)
                })
                .and_then(|_| {
                    OpenOptions::new()
                        .create(true)
                        .append(true)
                        .mode(0o600)
                        .open(&path)
                })
                .and_then(|f| slot.insert(f).write_all(text.as_bytes())),
        };
        // A File is unbuffered: each line is in the file once written, so a crash keeps it.
        if let Err(e) = written {
            tracing::error!("writing the run log {}: {e}", path.display());
            self.files.remove(&(session.to_owned(), file));
        }
    }
}

/// A session's log lines, all levels, in the order they were written.
pub fn read_session_logs(logs_dir: &Path, session: &str) -> std::io::Result<Vec<Value>> {
    if !ryvos_protocol::ids::SessionId::is_well_formed(session) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("'{session}' is not a session id"),
        ));
    }
    let dir = logs_dir.join(session);
    if !dir.is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no logs for session {session} in {}", logs_dir.display()),
        ));
    }
    let mut lines = Vec::new();
    for file in LEVELS {
        let Ok(text) = std::fs::read_to_string(dir.join(file)) else {
            continue;
        };
        // A crash may leave a last line half-written; it is skipped.
        lines.extend(
            text.lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok()),
        );
    }
    // Within a millisecond, a tool call comes before its turn, and a turn before its run's end.
    lines.sort_by_key(|l| {
        let level = l["level"].as_u64().unwrap_or(0);
        (l["ts_ms"].as_u64().unwrap_or(0), std::cmp::Reverse(level))
    });
    Ok(lines)
}
