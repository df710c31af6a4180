//! The runtime's own work per turn, at a 20-message and a 2,000-message history.
//!
//! The whole loop runs with durable checkpoints (an fsync per commit) against an in-process
//! provider that answers at once. A turn's overhead is the time from the model's answer being
//! fully received to the next request leaving, minus the time spent inside the tool: actor
//! messages, token counting, events, validation, the hand-off of the turn to the store, and
//! building the next request. Per-turn work must not grow with the history, so the two figures
//! should be close.
//!
//!     cargo bench --bench turn_overhead
//!
//! Results are printed and written to target/ryvos-bench/turn_overhead.txt.

use async_trait::async_trait;
use ryvos::engine::ids::CallId;
use ryvos::engine::message::{Message, ToolCall};
use ryvos::engine::provider::{
    ChatRequest, DeltaStream, FinishReason, ProviderError, StreamDelta, Usage,
};
use ryvos::engine::store::{Store, StoredMessage, WriteBatch};
use ryvos::engine::tokens;
use ryvos::{
    Config, Provider, RunRequest, RunStatus, Runtime, SafetyTier, SessionId, Tool, ToolContext,
    ToolError,
};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};

/// Turns measured per run.
const TURNS_PER_RUN: u32 = 10;
/// Sessions (one run each) per history size.
const SESSIONS: usize = 30;

#[derive(Clone, Copy, Debug)]
enum Mark {
    RequestLeft,
    AnswerReceived,
    ToolTime(Duration),
}

/// Answers at once: a tool call for every turn but the last, then a short text.
struct InstantModel {
    marks: Arc<Mutex<Vec<(Instant, Mark)>>>,
    tool: &'static str,
}

#[async_trait]
impl Provider for InstantModel {
    fn model(&self) -> &str {
        "instant"
    }

    async fn stream(&self, request: &ChatRequest) -> Result<DeltaStream, ProviderError> {
        self.marks
            .lock()
            .unwrap()
            .push((Instant::now(), Mark::RequestLeft));
        // The run's own turns: messages after its (last) user message.
        let since_user = request
            .messages
            .iter()
            .rev()
            .take_while(|m| !matches!(m.as_ref(), Message::User { .. }))
            .count() as u32;
        let deltas = if since_user / 2 + 1 >= TURNS_PER_RUN {
            vec![
                StreamDelta::Text {
                    text: "done".into(),
                },
                StreamDelta::Finish {
                    reason: FinishReason::Stop,
                },
            ]
        } else {
            vec![
                StreamDelta::ToolCall {
                    index: 0,
                    id: Some(format!("c{since_user}")),
                    name: Some(self.tool.into()),
                    // A new input every turn: an agent making progress, not a doom loop.
                    arguments: Some(format!(r#"{{"note":"x{since_user}"}}"#)),
                },
                StreamDelta::Finish {
                    reason: FinishReason::ToolCalls,
                },
            ]
        };
        let usage = StreamDelta::Usage {
            usage: Usage {
                input_tokens: 10,
                output_tokens: 3,
            },
        };
        let marks = self.marks.clone();
        let done = futures_util::stream::poll_fn(move |_| {
            marks
                .lock()
                .unwrap()
                .push((Instant::now(), Mark::AnswerReceived));
            Poll::Ready(None)
        });
        use futures_util::StreamExt;
        Ok(Box::pin(
            futures_util::stream::iter(deltas.into_iter().chain([usage]).map(Ok)).chain(done),
        ))
    }
}

/// Does nothing, and says how long that took.
struct Noop {
    name: &'static str,
    tier: SafetyTier,
    marks: Arc<Mutex<Vec<(Instant, Mark)>>>,
}

#[async_trait]
impl Tool for Noop {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "does nothing"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"note": {"type": "string"}}})
    }
    fn tier(&self) -> SafetyTier {
        self.tier
    }
    async fn execute(&self, _input: Value, _ctx: &ToolContext) -> Result<String, ToolError> {
        let start = Instant::now();
        let out = "ok".to_string();
        self.marks
            .lock()
            .unwrap()
            .push((Instant::now(), Mark::ToolTime(start.elapsed())));
        Ok(out)
    }
}

/// Writes a session of `messages` messages (a prompt, then tool-call turns) before the
/// runtime starts.
fn seed(store: &Store, session: &SessionId, messages: u64) {
    let mut batch = WriteBatch::new(session.clone());
    for seq in 0..messages {
        let message = match seq {
            0 => Message::user("seeded history"),
            s if s % 2 == 1 => Message::Assistant {
                content: String::new(),
                tool_calls: vec![ToolCall {
                    id: CallId::new(format!("seed{s}")),
                    name: "noop".into(),
                    arguments: r#"{"note":"x"}"#.into(),
                }],
            },
            s => Message::ToolResult {
                call_id: CallId::new(format!("seed{}", s - 1)),
                name: "noop".into(),
                content: "ok".into(),
                is_error: false,
            },
        };
        batch.messages.push(StoredMessage {
            seq,
            tokens: tokens::count_message(&message),
            message: Arc::new(message),
        });
    }
    // End on a tool result, so the history is a valid conversation.
    if messages % 2 == 0 {
        batch.messages.pop();
    }
    store.write(&[batch]).expect("seeding the store");
}

/// Overheads (µs) of every turn: answer received -> next request left, less tool time.
fn overheads(marks: &[(Instant, Mark)]) -> Vec<f64> {
    let mut out = Vec::new();
    let mut received: Option<Instant> = None;
    let mut tool = Duration::ZERO;
    for (at, mark) in marks {
        match mark {
            Mark::AnswerReceived => {
                received = Some(*at);
                tool = Duration::ZERO;
            }
            Mark::ToolTime(d) => tool += *d,
            Mark::RequestLeft => {
                if let Some(r) = received.take() {
                    out.push((at.duration_since(r).saturating_sub(tool)).as_secs_f64() * 1e6);
                }
            }
        }
    }
    out
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

struct Figures {
    p50: f64,
    p99: f64,
    mean: f64,
    samples: usize,
}

/// Runs `prompt` on `session` and checks it completed.
async fn run_to_end(
    runtime: &Runtime,
    prompt: &str,
    session: &SessionId,
    workspace: &std::path::Path,
) {
    let outcome = runtime
        .run(
            RunRequest::new(prompt)
                .session(session.clone())
                .workspace(workspace),
        )
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
}

async fn measure(history: u64, tool: &'static str, tier: SafetyTier) -> Figures {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let mut config = Config::with_home(home.path());
    config.agent.max_turns = TURNS_PER_RUN + 1;
    config.agent.max_context_tokens = 10_000_000;
    // The gate decides every call (and audits it), but no person is there to be asked.
    config.security.auto_approve.push(tool.to_owned());
    let sessions: Vec<SessionId> = (0..SESSIONS).map(|_| SessionId::generate()).collect();
    {
        let store = Store::open(&config.database_path(), true).unwrap();
        for s in &sessions {
            seed(&store, s, history);
        }
    }
    let marks = Arc::new(Mutex::new(Vec::new()));
    let runtime = Runtime::builder(config)
        .provider(Arc::new(InstantModel {
            marks: marks.clone(),
            tool,
        }))
        .tool(Arc::new(Noop {
            name: "noop",
            tier: SafetyTier::T0,
            marks: marks.clone(),
        }))
        .tool(Arc::new(Noop {
            name: "touch",
            tier,
            marks: marks.clone(),
        }))
        .start()
        .await
        .unwrap();
    let mut all = Vec::new();
    for session in sessions {
        // Load the session (as a resumed session is) before measuring.
        run_to_end(&runtime, "warm up", &session, workspace.path()).await;
        marks.lock().unwrap().clear();
        run_to_end(&runtime, "measure", &session, workspace.path()).await;
        all.extend(overheads(&marks.lock().unwrap()));
    }
    runtime.shutdown().await.unwrap();
    all.sort_by(|a, b| a.total_cmp(b));
    Figures {
        p50: percentile(&all, 0.5),
        p99: percentile(&all, 0.99),
        mean: all.iter().sum::<f64>() / all.len() as f64,
        samples: all.len(),
    }
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    format!("{cpu}, {cores} cores")
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut report = format!(
        "Ryvos per-turn runtime overhead (answer received -> next request left, tool time excluded)\n\
         machine: {}\ndurable checkpoints (fsync per commit); {SESSIONS} sessions x {} turns per figure\n\n",
        machine(),
        TURNS_PER_RUN - 1
    );
    // A discarded pass first, so that neither figure carries the process's warm-up.
    rt.block_on(measure(20, "noop", SafetyTier::T0));
    let small = rt.block_on(measure(20, "noop", SafetyTier::T0));
    let large = rt.block_on(measure(2000, "noop", SafetyTier::T0));
    let effects = rt.block_on(measure(20, "touch", SafetyTier::T2));
    for (label, f) in [
        ("history    20, read-only tool   ", &small),
        ("history 2,000, read-only tool   ", &large),
        ("history    20, side-effect tool ", &effects),
    ] {
        report.push_str(&format!(
            "{label}: p50 {:8.1} us  p99 {:8.1} us  mean {:8.1} us  ({} turns)\n",
            f.p50, f.p99, f.mean, f.samples
        ));
    }
    report.push_str(&format!(
        "\nratio 2,000 / 20 (p50): {:.2}  (target <= 1.5)\n\
         target p50 at 20 messages: <= 200 us -> {}\n\
         A tool with side effects waits until its turn is durable, so its figure includes one fsync.\n",
        large.p50 / small.p50,
        if small.p50 <= 200.0 { "met" } else { "MISSED" }
    ));
    print!("{report}");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ryvos-bench");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("turn_overhead.txt"), &report).unwrap();
}
