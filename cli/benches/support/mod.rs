//! What the benches share: a model that answers at once, a tool that does nothing, seeded
//! histories, and the per-turn overhead measurement.

#![allow(dead_code)]

pub mod daemon;

use async_trait::async_trait;
use ryvos::protocol::ids::CallId;
use ryvos::protocol::message::{Message, ToolCall};
use ryvos::provider::{ChatRequest, DeltaStream, FinishReason, ProviderError, StreamDelta, Usage};
use ryvos::testing::{Store, StoredMessage, Write, WriteBatch};
use ryvos::{
    Config, Provider, RunRequest, RunStatus, Runtime, SafetyTier, SessionId, Tool, ToolContext,
    ToolError,
};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};

/// Turns measured per run.
pub const TURNS_PER_RUN: u32 = 10;
/// Sessions (one run each) per history size.
pub const SESSIONS: usize = 30;

#[derive(Clone, Copy, Debug)]
pub enum Mark {
    RequestLeft,
    AnswerReceived,
    ToolTime(Duration),
}

/// Answers at once: a tool call for every turn but the last of `turns_per_run`, then a short
/// text. With `hold`, an answer waits until the semaphore gives it a permit.
pub struct InstantModel {
    pub marks: Arc<Mutex<Vec<(Instant, Mark)>>>,
    pub tool: &'static str,
    /// The one string argument of each call (`note` for the benches' own tools).
    pub argument: &'static str,
    pub turns_per_run: u32,
    /// Record marks (off for throughput runs, where the lock would be measured too).
    pub record: bool,
    pub hold: Option<Arc<tokio::sync::Semaphore>>,
}

#[async_trait]
impl Provider for InstantModel {
    fn model(&self) -> &str {
        "instant"
    }

    async fn stream(&self, request: &ChatRequest) -> Result<DeltaStream, ProviderError> {
        if let Some(hold) = &self.hold {
            let _permit = hold.acquire().await.expect("the hold is open");
        }
        if self.record {
            self.marks
                .lock()
                .unwrap()
                .push((Instant::now(), Mark::RequestLeft));
        }
        // The run's own turns: messages after its (last) user message.
        let since_user = request
            .messages
            .iter()
            .rev()
            .take_while(|m| !matches!(m.as_ref(), Message::User { .. }))
            .count() as u32;
        let deltas = if since_user / 2 + 1 >= self.turns_per_run {
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
                    arguments: Some(format!(r#"{{"{}":"x{since_user}"}}"#, self.argument)),
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
        let (marks, record) = (self.marks.clone(), self.record);
        let done = futures_util::stream::poll_fn(move |_| {
            if record {
                marks
                    .lock()
                    .unwrap()
                    .push((Instant::now(), Mark::AnswerReceived));
            }
            Poll::Ready(None)
        });
        use futures_util::StreamExt;
        Ok(Box::pin(
            futures_util::stream::iter(deltas.into_iter().chain([usage]).map(Ok)).chain(done),
        ))
    }
}

/// Does nothing, and says how long that took.
pub struct Noop {
    pub name: &'static str,
    pub tier: SafetyTier,
    pub marks: Arc<Mutex<Vec<(Instant, Mark)>>>,
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
pub async fn seed(store: &Store, session: &SessionId, messages: u64) {
    let mut stored = Vec::new();
    for seq in 0..messages {
        let message = match seq {
            0 => Message::user("seeded history"),
            s if s % 2 == 1 => Message::assistant(
                "",
                vec![ToolCall {
                    id: CallId::new(format!("seed{s}")),
                    name: "noop".into(),
                    arguments: r#"{"note":"x"}"#.into(),
                }],
            ),
            s => Message::ToolResult {
                call_id: CallId::new(format!("seed{}", s - 1)),
                name: "noop".into(),
                content: "ok".into(),
                is_error: false,
            },
        };
        stored.push(StoredMessage {
            seq,
            tokens: ryvos::testing::count_message(&message),
            message: Arc::new(message),
        });
    }
    // End on a tool result, so the history is a valid conversation.
    if messages.is_multiple_of(2) {
        stored.pop();
    }
    let batch = WriteBatch::of(session.clone(), stored.into_iter().map(Write::Message));
    store.write(&[batch]).await.expect("seeding the store");
}

/// Overheads (µs) of every turn: answer received -> next request left, less tool time.
pub fn overheads(marks: &[(Instant, Mark)]) -> Vec<f64> {
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

pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

pub struct Figures {
    pub p50: f64,
    pub p99: f64,
    pub mean: f64,
    pub samples: usize,
}

/// Runs `prompt` on `session` and checks it completed.
pub async fn run_to_end(
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

/// The per-turn overhead over `SESSIONS` sessions of `history` messages each.
pub async fn measure(history: u64, tool: &'static str, tier: SafetyTier) -> Figures {
    measure_on(Setup::default(), history, tool, tier).await
}

/// Where a measurement keeps its records and sends its telemetry.
#[derive(Clone, Copy, Default)]
pub struct Setup<'a> {
    /// The PostgreSQL database's URL (else redb).
    pub postgres: Option<&'a str>,
    /// An OTLP/HTTP collector's endpoint (else telemetry is off).
    pub otel: Option<&'a str>,
    /// Hooks, as `config.toml`'s `[hooks]` (else none).
    pub hooks: Option<&'a ryvos::config::HooksConfig>,
}

/// [`measure`] in `setup`.
pub async fn measure_on(
    setup: Setup<'_>,
    history: u64,
    tool: &'static str,
    tier: SafetyTier,
) -> Figures {
    let postgres = setup.postgres;
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let mut config = Config::with_home(home.path());
    if let Some(url) = postgres {
        config.store.backend = ryvos::config::StoreBackend::Postgres;
        config.store.url = url.to_owned();
    }
    if let Some(endpoint) = setup.otel {
        config.otel.enabled = true;
        config.otel.endpoint = endpoint.to_owned();
    }
    if let Some(hooks) = setup.hooks {
        config.hooks = hooks.clone();
    }
    config.agent.max_turns = TURNS_PER_RUN + 1;
    config.agent.max_context_tokens = 10_000_000;
    // The gate decides every call (and audits it), but no person is there to be asked.
    config.security.auto_approve.push(tool.to_owned());
    let sessions: Vec<SessionId> = (0..SESSIONS).map(|_| SessionId::generate()).collect();
    {
        let store = match postgres {
            None => Store::open(&config.database_path(), true).unwrap(),
            Some(url) => Store::connect(url, 4, true, Duration::from_secs(30), "seeder")
                .await
                .unwrap(),
        };
        for s in &sessions {
            seed(&store, s, history).await;
        }
    }
    let marks = Arc::new(Mutex::new(Vec::new()));
    let runtime = Runtime::builder(config)
        .provider(Arc::new(InstantModel {
            marks: marks.clone(),
            tool,
            argument: "note",
            turns_per_run: TURNS_PER_RUN,
            record: true,
            hold: None,
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

pub fn machine() -> String {
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

/// CPU time every process on the machine has used since boot, in milliseconds (from
/// `/proc/stat`): what a load that shares the machine with its servers costs in all.
pub fn machine_busy_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let fields: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal: all but idle and iowait.
    let busy: u64 = fields
        .iter()
        .take(8)
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, v)| v)
        .sum();
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1);
    busy as f64 * 1000.0 / ticks as f64
}

/// Resident memory of this process, in bytes.
pub fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf only reads a configuration value.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * u64::try_from(page).unwrap_or(4096)
}

/// The resident memory of process `pid`, in KiB (0 when it cannot be read).
pub fn resident_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    (status.lines())
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// How a figure stands against its target.
pub fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "NOT met"
    }
}

/// Writes `report` to target/ryvos-bench/`name` and prints it.
pub fn publish(name: &str, report: &str) {
    print!("{report}");
    save(name, report);
}

/// Writes `report` to target/ryvos-bench/`name`.
pub fn save(name: &str, report: &str) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/ryvos-bench");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), report).unwrap();
}
