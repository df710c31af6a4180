//! The load generator: the real runtime under many sessions, long histories, held runs, and
//! through `ryvosd` over its socket, each figure beside its target.
//!
//!     cargo bench --bench load
//!
//! In-process figures use a model that answers at once (no HTTP) and a tool that does
//! nothing, so what is measured is the runtime: actors, events, token counting, the security
//! gate, and durable checkpoints (an fsync per grouped commit). The daemon figures use the
//! real binaries and the scripted model server on 127.0.0.1. The PostgreSQL figures use a
//! server the bench starts (the Debian `postgresql` package, with `fsync` on), and are left
//! out, saying why, where it is not installed. Results are printed and written to
//! target/ryvos-bench/load.txt.

mod support;

use async_trait::async_trait;
use ryvos::protocol::{Run, RunParams};
use ryvos::provider::{ChatRequest, DeltaStream, FinishReason, ProviderError, StreamDelta};
use ryvos::{Config, EventKind, Provider, RunRequest, RunStatus, Runtime, SafetyTier};
use ryvos_client::Client;
use ryvos_testkit::{Reply, ScriptedModelServer};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::daemon::{command, start_daemon, stop_daemon};
use support::{machine, measure, percentile, resident_bytes, InstantModel, Noop};

/// A runtime answering with `model`, with the no-op tool, durable checkpoints, and room for
/// `sessions` runs at once.
async fn runtime(home: &std::path::Path, model: Arc<dyn Provider>, sessions: usize) -> Runtime {
    let mut config = Config::with_home(home);
    config.agent.max_turns = support::TURNS_PER_RUN + 1;
    config.agent.max_context_tokens = 10_000_000;
    config.daemon.max_in_flight_runs = sessions + 16;
    // Sessions stay in memory for the whole measurement.
    config.agent.session_idle_secs = 3_600;
    config.security.auto_approve.push("noop".into());
    Runtime::builder(config)
        .provider(model)
        .tool(Arc::new(Noop {
            name: "noop",
            tier: SafetyTier::T0,
            marks: Arc::default(),
        }))
        .start()
        .await
        .unwrap()
}

fn instant_model(
    turns_per_run: u32,
    hold: Option<Arc<tokio::sync::Semaphore>>,
) -> Arc<InstantModel> {
    Arc::new(InstantModel {
        marks: Arc::default(),
        tool: "noop",
        argument: "note",
        turns_per_run,
        record: false,
        hold,
    })
}

/// Runs `count` new sessions at once, one run each; returns the seconds it took.
async fn run_sessions(runtime: &Runtime, workspace: &std::path::Path, count: usize) -> f64 {
    let started = Instant::now();
    let mut handles = Vec::with_capacity(count);
    for n in 0..count {
        let request = RunRequest::new(format!("task {n}")).workspace(workspace);
        handles.push(runtime.run(request).await.unwrap());
    }
    for handle in handles {
        let outcome = handle.outcome().await.unwrap();
        assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    }
    started.elapsed().as_secs_f64()
}

/// Turns per second with `sessions` sessions running at once (each run: TURNS_PER_RUN turns).
async fn throughput(sessions: usize) -> f64 {
    let (home, workspace) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let runtime = runtime(
        home.path(),
        instant_model(support::TURNS_PER_RUN, None),
        sessions,
    )
    .await;
    run_sessions(&runtime, workspace.path(), sessions.min(16)).await;
    let secs = run_sessions(&runtime, workspace.path(), sessions).await;
    runtime.shutdown().await.unwrap();
    (sessions as f64 * f64::from(support::TURNS_PER_RUN)) / secs
}

/// Resident bytes per idle session (10,000 created, each after one run) and per session with
/// a run in flight (1,000 held at the model).
async fn memory() -> (f64, f64) {
    let (home, workspace) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let hold = Arc::new(tokio::sync::Semaphore::new(0));
    let held = instant_model(1, Some(hold.clone()));
    let free = instant_model(1, None);
    let switch = Arc::new(Switch {
        held,
        free,
        holding: AtomicBool::new(false),
        arrived: AtomicUsize::new(0),
    });
    let runtime = runtime(home.path(), switch.clone(), 2_000).await;
    run_sessions(&runtime, workspace.path(), 200).await;
    let before = resident_bytes();
    for _ in 0..20 {
        run_sessions(&runtime, workspace.path(), 500).await;
    }
    let idle = (resident_bytes().saturating_sub(before)) as f64 / 10_000.0;

    switch.holding.store(true, Ordering::SeqCst);
    let before = resident_bytes();
    let mut handles = Vec::new();
    for n in 0..1_000 {
        let request = RunRequest::new(format!("held {n}")).workspace(workspace.path());
        handles.push(runtime.run(request).await.unwrap());
    }
    while switch.arrived.load(Ordering::SeqCst) < 1_000 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let active = (resident_bytes().saturating_sub(before)) as f64 / 1_000.0;
    hold.add_permits(1_000);
    for handle in handles {
        handle.outcome().await.unwrap();
    }
    runtime.shutdown().await.unwrap();
    (idle, active)
}

/// Answers at once, or (while `holding`) holds each request at the model.
struct Switch {
    held: Arc<InstantModel>,
    free: Arc<InstantModel>,
    holding: AtomicBool,
    arrived: AtomicUsize,
}

#[async_trait]
impl Provider for Switch {
    fn model(&self) -> &str {
        "instant"
    }
    async fn stream(&self, request: &ChatRequest) -> Result<DeltaStream, ProviderError> {
        if self.holding.load(Ordering::SeqCst) {
            self.arrived.fetch_add(1, Ordering::SeqCst);
            return self.held.stream(request).await;
        }
        self.free.stream(request).await
    }
}

/// Streams `DELTAS` text deltas a millisecond apart, each named and stamped when it leaves.
struct Stamped {
    sent: Arc<Mutex<HashMap<String, Instant>>>,
    next: AtomicU64,
}

const DELTAS: usize = 50;

#[async_trait]
impl Provider for Stamped {
    fn model(&self) -> &str {
        "stamped"
    }
    async fn stream(&self, _request: &ChatRequest) -> Result<DeltaStream, ProviderError> {
        let base = self.next.fetch_add(DELTAS as u64, Ordering::Relaxed);
        let sent = self.sent.clone();
        let deltas = futures_util::stream::unfold(0usize, move |i| {
            let sent = sent.clone();
            async move {
                if i > DELTAS {
                    return None;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
                let delta = if i == DELTAS {
                    StreamDelta::Finish {
                        reason: FinishReason::Stop,
                    }
                } else {
                    let text = format!("<{}>", base + i as u64);
                    sent.lock().unwrap().insert(text.clone(), Instant::now());
                    StreamDelta::Text { text }
                };
                Some((Ok(delta), i + 1))
            }
        });
        Ok(Box::pin(deltas))
    }
}

/// Microseconds from a delta leaving the model to a subscriber reading its `TextDelta`.
async fn delta_latency() -> Vec<f64> {
    let (home, workspace) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let sent = Arc::new(Mutex::new(HashMap::new()));
    let model = Arc::new(Stamped {
        sent: sent.clone(),
        next: AtomicU64::new(0),
    });
    let runtime = runtime(home.path(), model, 16).await;
    let mut latencies = Vec::new();
    for n in 0..21 {
        let request = RunRequest::new(format!("stream {n}")).workspace(workspace.path());
        let mut handle = runtime.run(request).await.unwrap();
        while let Some(event) = handle.next_event().await {
            let read = Instant::now();
            if let EventKind::TextDelta { text } = &event.kind {
                if let Some(left) = sent.lock().unwrap().get(text) {
                    if n > 0 {
                        latencies.push(read.duration_since(*left).as_secs_f64() * 1e6);
                    }
                }
            }
        }
    }
    runtime.shutdown().await.unwrap();
    latencies.sort_by(|a, b| a.total_cmp(b));
    latencies
}

/// A home for the binaries, its config pointing at `server` (and `[store]` at `postgres`).
fn daemon_home_on(server: &ScriptedModelServer, postgres: Option<&str>) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let store = postgres.map_or(String::new(), |url| {
        format!("\n[store]\nbackend = \"postgres\"\nurl = \"{url}\"\npool_size = 16\n")
    });
    let config = format!(
        "[model]\nbase_url = \"{}\"\nmodel = \"scripted\"\napi_key = \"\"\n\n[agent]\nmax_turns = {}\n\n[daemon]\nmax_in_flight_runs = 256\n{store}",
        server.base_url(),
        support::TURNS_PER_RUN + 1
    );
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    home
}

/// A home for the binaries, its config pointing at `server`.
fn daemon_home(server: &ScriptedModelServer) -> tempfile::TempDir {
    daemon_home_on(server, None)
}

/// A model that calls `glob` for every turn but the last, then answers.
fn glob_turns() -> ryvos_testkit::Router {
    Arc::new(|request: &Value| {
        let messages = request["messages"].as_array()?;
        let answers = messages
            .iter()
            .rev()
            .take_while(|m| m["role"] != "user")
            .filter(|m| m["role"] == "assistant")
            .count() as u32;
        if answers + 1 >= support::TURNS_PER_RUN {
            return Some(Reply::text(&["done"]));
        }
        // A new input every turn: an agent making progress, not a doom loop.
        let (id, input) = (
            format!("g{answers}"),
            format!(r#"{{"pattern": "*{answers}*"}}"#),
        );
        Some(Reply::tool_calls(&[(&id, "glob", &input)]))
    })
}

/// Turns per second, and the machine's CPU time per turn (clients, daemons, model server and
/// database together).
struct Throughput {
    turns_per_sec: f64,
    cpu_ms_per_turn: f64,
}

/// Turns per second through ryvosd: `sessions` socket clients at once.
async fn daemon_throughput(sessions: usize) -> Throughput {
    cluster_throughput(sessions, 1, None).await
}

/// Turns per second through `daemons` ryvosd sharing the store at `postgres` (one with redb
/// when `None`): `sessions` socket clients at once, spread over them.
async fn cluster_throughput(sessions: usize, daemons: usize, postgres: Option<&str>) -> Throughput {
    let server = ScriptedModelServer::start_routed([], Some(glob_turns())).await;
    let homes: Vec<_> = (0..daemons)
        .map(|_| daemon_home_on(&server, postgres))
        .collect();
    let workspace = tempfile::tempdir().unwrap();
    let mut children = Vec::new();
    for home in &homes {
        children.push(start_daemon(home.path()).await.0);
    }
    let sockets: Vec<_> = homes.iter().map(|h| h.path().join("ryvosd.sock")).collect();
    let run = |n: usize| {
        let socket = sockets[n % sockets.len()].clone();
        let workspace = workspace.path().to_owned();
        tokio::spawn(async move {
            let mut client = Client::connect(&socket).await.unwrap();
            let params = RunParams::new(format!("task {n}"), workspace.display().to_string());
            let outcome = client.call::<Run>(&params).await.unwrap().unwrap();
            assert_eq!(outcome.status, RunStatus::Completed, "{outcome:?}");
        })
    };
    for n in 0..8 {
        run(n).await.unwrap();
    }
    let (started, busy) = (Instant::now(), support::machine_busy_ms());
    let runs: Vec<_> = (0..sessions).map(run).collect();
    for r in runs {
        r.await.unwrap();
    }
    let (secs, busy) = (
        started.elapsed().as_secs_f64(),
        support::machine_busy_ms() - busy,
    );
    for (home, child) in homes.iter().zip(children) {
        stop_daemon(home.path(), child).await;
    }
    let turns = sessions as f64 * f64::from(support::TURNS_PER_RUN);
    Throughput {
        turns_per_sec: turns / secs,
        cpu_ms_per_turn: busy / turns,
    }
}

/// The median passes of the default per-turn measurement (redb, telemetry off) and of
/// `other`, five of each alternating, so that both are measured in the same state of the
/// machine.
fn beside<F: std::future::Future<Output = support::Figures>>(
    rt: &tokio::runtime::Runtime,
    other: impl Fn() -> F,
) -> (support::Figures, support::Figures) {
    let (mut defaults, mut others) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        defaults.push(rt.block_on(measure(20, "noop", SafetyTier::T0)));
        others.push(rt.block_on(other()));
    }
    let median = |mut passes: Vec<support::Figures>| {
        passes.sort_by(|a, b| a.p50.total_cmp(&b.p50));
        passes.swap_remove(passes.len() / 2)
    };
    (median(defaults), median(others))
}

/// The PostgreSQL column: the per-turn overhead beside redb's, and turns/s through three
/// daemons sharing one database. The two stores' passes alternate, so that both are measured
/// in the same state of the machine (its speed drifts between one minute and the next), and
/// the ratio is of their median passes.
fn postgres_figures(rt: &tokio::runtime::Runtime, line: &mut impl FnMut(String)) {
    let server = match ryvos_testkit::postgres::PostgresServer::start_durable() {
        Ok(server) => server,
        Err(why) => return line(format!("PostgreSQL: not measured ({why})")),
    };
    let (redb, pg) = beside(rt, || {
        let url = server.database().unwrap();
        async move {
            let setup = support::Setup {
                postgres: Some(&url),
                ..support::Setup::default()
            };
            support::measure_on(setup, 20, "noop", SafetyTier::T0).await
        }
    });
    let ratio = pg.p50 / redb.p50;
    line(format!(
        "PostgreSQL, overhead per turn, history 20: p50 {:7.1} us  p99 {:7.1} us   redb alongside: p50 {:7.1} us   {ratio:.2}x   target <= 1.5x: {}",
        pg.p50,
        pg.p99,
        redb.p50,
        verdict(ratio <= 1.5)
    ));
    let url = server.database().unwrap();
    let cluster = rt.block_on(cluster_throughput(100, 3, Some(&url)));
    let tps = cluster.turns_per_sec;
    line(format!(
        "PostgreSQL, three ryvosd (socket + HTTP model server), 100 sessions: {tps:6.0} turns/s   target >= 2000: {}   (machine CPU {:.2} ms/turn)",
        verdict(tps >= 2000.0),
        cluster.cpu_ms_per_turn
    ));
}

/// The per-turn overhead with OpenTelemetry exporting to a collector on 127.0.0.1, beside the
/// same measurement with it off, their passes alternating (as the PostgreSQL column's do).
fn otel_figures(rt: &tokio::runtime::Runtime, line: &mut impl FnMut(String)) {
    let collector = rt.block_on(ryvos_testkit::otlp::OtlpReceiver::start());
    let endpoint = collector.endpoint();
    let (off, on) = beside(rt, || {
        let setup = support::Setup {
            otel: Some(&endpoint),
            ..support::Setup::default()
        };
        support::measure_on(setup, 20, "noop", SafetyTier::T0)
    });
    let ratio = on.p50 / off.p50;
    line(format!(
        "OpenTelemetry on (to a local collector), overhead per turn, history 20: p50 {:7.1} us  p99 {:7.1} us   off alongside: p50 {:7.1} us   {ratio:.2}x   target <= 1.3x: {}   ({} spans received)",
        on.p50,
        on.p99,
        off.p50,
        verdict(ratio <= 1.3),
        collector.spans().len()
    ));
}

/// Milliseconds from starting `ryvos run` (no daemon: the runtime in-process) to its first
/// model request arriving at the server.
async fn embedded_first_request() -> f64 {
    let server = ScriptedModelServer::start([Reply::text(&["hi"])]).await;
    let home = daemon_home(&server);
    let workspace = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let status = command(env!("CARGO_BIN_EXE_ryvos"), home.path())
        .current_dir(workspace.path())
        .args(["run", "say hi"])
        .status()
        .await
        .unwrap();
    assert!(status.success());
    let first = server.captured()[0].at;
    first.duration_since(started).as_secs_f64() * 1e3
}

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "MISSED"
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut report = format!(
        "Ryvos under load\nmachine: {}\nin-process: a model answering at once, a no-op tool, durable checkpoints\n\n",
        machine()
    );
    let mut line = |text: String| {
        println!("{text}");
        report.push_str(&text);
        report.push('\n');
    };

    // `RYVOS_LOAD_ONLY=otel`: the per-turn figure with OpenTelemetry on and off, no more.
    if std::env::var("RYVOS_LOAD_ONLY").as_deref() == Ok("otel") {
        rt.block_on(measure(20, "noop", SafetyTier::T0));
        otel_figures(&rt, &mut line);
        return;
    }
    // `RYVOS_LOAD_ONLY=postgres`: one ryvosd on redb and the PostgreSQL column, no more.
    if std::env::var("RYVOS_LOAD_ONLY").as_deref() == Ok("postgres") {
        rt.block_on(measure(20, "noop", SafetyTier::T0));
        let daemon = rt.block_on(daemon_throughput(100));
        line(format!(
            "redb, one ryvosd, 100 sessions: {:6.0} turns/s   (machine CPU {:.2} ms/turn)",
            daemon.turns_per_sec, daemon.cpu_ms_per_turn
        ));
        postgres_figures(&rt, &mut line);
        return;
    }

    // A discarded pass first; then three alternating passes of each, and the median pass of
    // each by p50, so that one noisy pass (an fsync stall) does not decide the ratio.
    rt.block_on(measure(20, "noop", SafetyTier::T0));
    let (mut smalls, mut larges) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        smalls.push(rt.block_on(measure(20, "noop", SafetyTier::T0)));
        larges.push(rt.block_on(measure(2000, "noop", SafetyTier::T0)));
    }
    let median = |mut passes: Vec<support::Figures>| {
        passes.sort_by(|a, b| a.p50.total_cmp(&b.p50));
        passes.swap_remove(1)
    };
    let (small, large) = (median(smalls), median(larges));
    line(format!(
        "overhead per turn, history 20:    p50 {:7.1} us  p99 {:7.1} us   target p50 <= 1000 us: {}",
        small.p50,
        small.p99,
        verdict(small.p50 <= 1000.0)
    ));
    line(format!(
        "overhead per turn, history 2,000: p50 {:7.1} us  p99 {:7.1} us",
        large.p50, large.p99
    ));
    let ratio = large.p50 / small.p50;
    line(format!(
        "ratio 2,000 / 20 (p50): {ratio:.2}   target <= 1.5: {}",
        verdict(ratio <= 1.5)
    ));

    for sessions in [1, 100, 1_000] {
        let tps = rt.block_on(throughput(sessions));
        let target = if sessions == 100 {
            format!("   target >= 2000: {}", verdict(tps >= 2000.0))
        } else {
            String::new()
        };
        line(format!(
            "turns/s, {sessions:5} sessions at once: {tps:8.0}{target}"
        ));
    }

    let (idle, active) = rt.block_on(memory());
    line(format!(
        "resident memory per idle session (10,000 created):   {:7.1} KB   target <= 64 KB: {}",
        idle / 1024.0,
        verdict(idle <= 64.0 * 1024.0)
    ));
    line(format!(
        "resident memory per active session (1,000 in flight): {:7.1} KB",
        active / 1024.0
    ));

    let latencies = rt.block_on(delta_latency());
    let p99 = percentile(&latencies, 0.99);
    line(format!(
        "model delta -> in-process subscriber: p50 {:6.1} us  p99 {:6.1} us  ({} deltas)   target p99 <= 2000 us: {}",
        percentile(&latencies, 0.5),
        p99,
        latencies.len(),
        verdict(p99 <= 2000.0)
    ));

    let daemon = rt.block_on(daemon_throughput(100));
    line(format!(
        "through ryvosd (socket + HTTP model server), 100 sessions: {:6.0} turns/s   (machine CPU {:.2} ms/turn)",
        daemon.turns_per_sec, daemon.cpu_ms_per_turn
    ));

    postgres_figures(&rt, &mut line);
    otel_figures(&rt, &mut line);

    let mut ready = Vec::new();
    for _ in 0..10 {
        let server = rt.block_on(ScriptedModelServer::start([]));
        let home = daemon_home(&server);
        let (daemon, ms) = rt.block_on(start_daemon(home.path()));
        ready.push(ms);
        rt.block_on(stop_daemon(home.path(), daemon));
    }
    ready.sort_by(|a, b| a.total_cmp(b));
    let ready_p50 = percentile(&ready, 0.5);
    line(format!(
        "ryvosd start -> socket answers: p50 {ready_p50:5.1} ms  max {:5.1} ms   target <= 50 ms: {}",
        ready[ready.len() - 1],
        verdict(ready_p50 <= 50.0)
    ));
    let mut first = Vec::new();
    for _ in 0..5 {
        first.push(rt.block_on(embedded_first_request()));
    }
    first.sort_by(|a, b| a.total_cmp(b));
    line(format!(
        "ryvos run (embedded) start -> first model request: p50 {:5.1} ms",
        percentile(&first, 0.5)
    ));
    support::save("load.txt", &report);
}
