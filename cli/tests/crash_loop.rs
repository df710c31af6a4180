//! The crash loop: `ryvosd` is killed with SIGKILL while runs are in flight, restarted, and
//! every session resumed. The first kill lands at a random moment; each after it is aimed at a
//! point of a call's life ([`aim::Point`]: before its intent is durable, between intent and
//! start, during, after it ended and before its result is durable, after), for each effect
//! class's tool in turn.
//!
//! After every kill the database must open; every turn a client was told is durable
//! (`CheckpointSaved`) must be stored, once; no tool call and no tool result may be stored
//! twice. At the end every session resumes to completion, and its whole stored history pairs
//! each call with exactly one result. The calls take turns among the effect classes: a `bash`
//! append (unsafe: one a kill cut off after it started is in doubt, and a person's stand-in
//! decides by its evidence, [`decide`]), a `write` (reconcilable), a `glob` (read-only) and a
//! charge of an MCP server that says it is idempotent: no append happens twice, no charge runs under two keys, and
//! every call whose success is stored took effect.
//!
//! CI runs one kill per point and tool. For a long run, and to replay a failure by its seed:
//!
//!     RYVOS_CRASH_ITERATIONS=100 cargo test --release --test crash_loop -- --nocapture
//!     RYVOS_CRASH_SEED=1234 cargo test --test crash_loop -- --nocapture

#[path = "crash_loop/aim.rs"]
mod aim;
mod common;

use aim::{Aim, Holds, Point};
use common::home::{Home, WAIT};
use rand::{Rng, SeedableRng};
use ryvos::config::StoreBackend;
use ryvos::protocol::message::Message;
use ryvos::protocol::records::ApprovalKind;
use ryvos::protocol::Reply as Line;
use ryvos::protocol::{AnswerParams, Approve, Deny, Run, RunParams};
use ryvos::testing::{repair, Store};
use ryvos::{Config, EventKind, RunId, SessionId};
use ryvos_client::Client;
use ryvos_testkit::{Reply, ScriptedModelServer};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Sessions driven at once.
const SESSIONS: usize = 4;
/// Tool turns the model takes after each prompt before it answers.
const TOOL_TURNS: usize = 3;

/// The model: after each prompt, `TOOL_TURNS` turns that each make one call (text streamed
/// first, so a kill can land mid-stream), then an answer. The calls take turns among the
/// effect classes: an append to a file through bash (unsafe), a `write` (reconcilable), a
/// `glob` (read-only) and, with `keyed`, a charge of the keyed MCP server (idempotent). Call
/// ids are unique across the whole test, so a stored duplicate is a real one.
fn model(keyed: bool, holds: &Holds) -> ryvos_testkit::Router {
    let next_call = Arc::new(AtomicU64::new(1));
    let kinds = if keyed { 4 } else { 3 };
    let pause_ms = holds.pause_ms.clone();
    Arc::new(move |request: &Value| {
        let pause = Duration::from_millis(pause_ms.load(Ordering::Relaxed));
        let messages = request["messages"].as_array()?;
        let since_prompt = common::answers_since_prompt(request);
        let prompt = messages
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default();
        if prompt == "finish" || since_prompt >= TOOL_TURNS {
            return Some(Reply::text(&["All ", "done."]).pause_between(pause));
        }
        let n = next_call.fetch_add(1, Ordering::Relaxed);
        let id = format!("c{n}");
        let (tool, arguments) = match n % kinds {
            // Held while `go` is missing: every other command before its append, the rest
            // after it.
            0 if (n / kinds).is_multiple_of(2) => (
                "bash",
                format!(r#"{{"command": "{HELD} echo {id} >> trail.txt"}}"#),
            ),
            0 => (
                "bash",
                format!(r#"{{"command": "echo {id} >> trail.txt; {HELD}"}}"#),
            ),
            1 => (
                "write",
                format!(r#"{{"path": "w/{id}.txt", "content": "{id}"}}"#),
            ),
            2 => ("glob", r#"{"pattern": "w/*"}"#.to_owned()),
            _ => ("keyed__charge", format!(r#"{{"id": "{id}"}}"#)),
        };
        Some(
            Reply::text_then_tools(&["Calling ", "once ", "more."], &[(&id, tool, &arguments)])
                .pause_between(pause),
        )
    })
}

/// What makes a command wait while the workspace's `go` file is missing (a kill ends it).
const HELD: &str = "until [ -e go ]; do sleep 0.02; done;";

/// The keyed MCP server's `[mcp.servers]` table, recording its calls in `keys` (a call waits
/// while `go` is missing); `None` where npm's MCP servers are not installed.
fn keyed_server(dir: &std::path::Path, go: &std::path::Path) -> Option<String> {
    common::mcp::server_entry("server-everything")?;
    let keys = dir.join("keys");
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/keyed_mcp_server.cjs"
    );
    Some(format!(
        "\n[mcp.servers.keyed]\ncommand = \"node\"\nargs = [\"{fixture}\"]\nenv = {{ NODE_PATH = \
         \"{}\", KEYS_FILE = \"{}\", GO_FILE = \"{}\" }}\n",
        common::mcp::node_modules().display(),
        keys.display(),
        go.display()
    ))
}

/// What the clients saw: the turns confirmed durable, per session and run.
#[derive(Default)]
struct Seen {
    durable: HashSet<(String, String, u32)>,
    sessions: Vec<String>,
    kills: Vec<Landed>,
    /// What the runs after the kills did with the calls cut off: (tool, action).
    recovered: Vec<(String, String)>,
}

impl Seen {
    fn report(&self) {
        let mut kills: Vec<_> = self
            .kills
            .iter()
            .copied()
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        kills.sort();
        for landed in kills {
            let n = self.kills.iter().filter(|k| **k == landed).count();
            eprintln!("kills {landed:?}: {n}");
        }
        let mut recovered: HashMap<&(String, String), usize> = HashMap::new();
        for r in &self.recovered {
            *recovered.entry(r).or_default() += 1;
        }
        let mut recovered: Vec<_> = recovered.into_iter().collect();
        recovered.sort();
        for ((tool, action), n) in recovered {
            eprintln!("recovered {tool} {action}: {n}");
        }
    }

    /// The kills that are held at their point reached it, and left what each must: a command
    /// cut off in doubt, a charge run again under its key.
    fn covered(&self, iterations: usize, tools: usize) {
        let held = [Point::BeforeIntent, Point::BeforeStart, Point::During];
        for (n, landed) in self.kills.iter().skip(1).enumerate() {
            let aim = Aim::nth(n, tools);
            if held.contains(&aim.point) && (aim.tool == "bash" || aim.point != Point::During) {
                assert_eq!(*landed, Landed::At(aim.point, aim.tool), "kill {n} missed");
            }
        }
        let recovered = |tool: &str, action: &str| {
            (self.recovered.iter()).any(|(t, a)| t == tool && a == action)
        };
        if iterations > 1 + Point::During as usize {
            assert!(
                recovered("bash", "in_doubt"),
                "no command was left in doubt"
            );
        }
        let charged_during = 1 + aim::POINTS.len() * 3 + Point::During as usize;
        if tools == 4 && iterations > charged_during {
            assert!(
                recovered("keyed__charge", "run_again"),
                "no charge ran again"
            );
        }
    }
}

/// Starts a run over the socket and forwards its events until it ends or the daemon dies.
async fn drive(
    home: &Home,
    session: Option<String>,
    prompt: &str,
    events: mpsc::UnboundedSender<Value>,
    asks_held: Arc<AtomicBool>,
) -> Option<String> {
    let mut client = Client::connect(&home.socket()).await.ok()?;
    let mut params = RunParams::new(prompt, home.workspace.path().display().to_string());
    params.resume = session;
    client.send::<Run>(&params).await.ok()?;
    let mut status = None;
    while let Ok(line) = client.next().await {
        match line {
            Line::Event { event, .. } => {
                if let EventKind::RunComplete { status: s, .. } = &event.kind {
                    status = Some(s.to_string());
                }
                match &event.kind {
                    EventKind::ApprovalRequested {
                        request_id,
                        call_id,
                        kind: ApprovalKind::InDoubt,
                        ..
                    } => decide(home, request_id, call_id.as_str()).await,
                    EventKind::ApprovalRequested { request_id, .. }
                        if !asks_held.load(Ordering::Relaxed) =>
                    {
                        answer(home, request_id, None).await
                    }
                    _ => {}
                }
                // Whoever listens may be done already; the run is followed to its end anyway.
                events.send(serde_json::to_value(&event).ok()?).ok();
            }
            Line::Result { .. } | Line::Error { .. } => break,
        }
    }
    status
}

/// A person's stand-in for a call a kill left in doubt: it looks for the call's effect (its
/// id in the trail), and denies running it again if it is there, approves it if not.
async fn decide(home: &Home, request_id: &str, call: &str) {
    let trail = home.workspace.path().join("trail.txt");
    let ran = (std::fs::read_to_string(trail).unwrap_or_default().lines()).any(|l| l == call);
    answer(
        home,
        request_id,
        ran.then(|| "its line is in the trail".to_owned()),
    )
    .await
}

/// Approves request `request_id`, or denies it for `denial`. The daemon may be killed
/// meanwhile: then the next resume asks again.
async fn answer(home: &Home, request_id: &str, denial: Option<String>) {
    let denied = denial.is_some();
    let params = AnswerParams {
        request_id: request_id.to_owned(),
        reason: denial,
        always: false,
        by: Some("the crash loop".to_owned()),
    };
    let Ok(mut client) = Client::connect(&home.socket()).await else {
        return;
    };
    let answered = match denied {
        true => client.call::<Deny>(&params).await.map(drop),
        false => client.call::<Approve>(&params).await.map(drop),
    };
    if let Err(e) = answered {
        eprintln!("answering {request_id}: {e}");
    }
}

/// Checks the store as a kill left it: it opens, holds every durable turn once, and no call
/// or result twice.
async fn check_after_kill(config: &Config, seen: &Seen) {
    let store = opened(config).await;
    let mut by_session: HashMap<&str, Vec<(String, u32)>> = HashMap::new();
    for (session, run, turn) in &seen.durable {
        by_session
            .entry(session)
            .or_default()
            .push((run.clone(), *turn));
    }
    for session in &seen.sessions {
        let id = SessionId::new(session.as_str());
        let checkpoints = store.checkpoints(&id).await.unwrap();
        let mut unique = HashSet::new();
        for c in &checkpoints {
            assert!(
                unique.insert((c.run_id.clone(), c.turn)),
                "turn {} of {} stored twice",
                c.turn,
                c.run_id
            );
        }
        for (run, turn) in by_session.get(session.as_str()).into_iter().flatten() {
            assert!(
                unique.contains(&(RunId::new(run.as_str()), *turn)),
                "turn {turn} of run {run} was confirmed durable but is not stored"
            );
        }
        let history = store.load_session(&id).await.unwrap();
        let stored_seqs: HashSet<u64> = history.messages.iter().map(|m| m.seq).collect();
        for c in &checkpoints {
            for seq in c.first_seq..=c.last_seq {
                assert!(
                    stored_seqs.contains(&seq),
                    "message {seq} of a stored turn is missing"
                );
            }
        }
        no_duplicates(session, history.messages.iter().map(|m| m.message.as_ref()));
    }
}

/// The store `config` names, as a kill left it: it must open.
async fn opened(config: &Config) -> Store {
    match config.store.backend {
        StoreBackend::Redb => {
            Store::open(&config.database_path(), true).expect("the database opens after a kill")
        }
        StoreBackend::Postgres => {
            let lease = std::time::Duration::from_secs(config.store.lease_secs);
            Store::connect(&config.store.url, 2, true, lease, "crash-loop-check")
                .await
                .expect("the database opens after a kill")
        }
    }
}

fn no_duplicates<'a>(session: &str, messages: impl Iterator<Item = &'a Message>) {
    let (mut calls, mut results) = (HashSet::new(), HashSet::new());
    for m in messages {
        for call in m.tool_calls() {
            assert!(
                calls.insert(call.id.clone()),
                "call {} stored twice in {session}",
                call.id
            );
        }
        if let Message::ToolResult { call_id, .. } = m {
            assert!(
                results.insert(call_id.clone()),
                "result of {call_id} stored twice in {session}"
            );
        }
    }
}

on_both_backends! {
    async fn killed_at_every_point_of_a_calls_life_the_daemon_loses_and_repeats_nothing(backend: Backend) {
    let iterations =
        common::env_setting("RYVOS_CRASH_ITERATIONS", 1 + (aim::POINTS.len() * aim::TOOLS.len()) as u64);
    let seed = common::env_setting("RYVOS_CRASH_SEED", rand::random::<u32>() as u64);
    eprintln!("crash loop: {iterations} iterations, seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let scratch = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let holds = Holds::new(workspace.path());
    let keyed = keyed_server(scratch.path(), &holds.go);
    let tools = if keyed.is_some() { 4 } else { 3 };
    let server = ScriptedModelServer::start_routed([], Some(model(keyed.is_some(), &holds))).await;
    // Every call that may change something asks, so that one can be held before it starts.
    let asking = "t1 = \"ask\"\nt2 = \"ask\"\nt3 = \"ask\"";
    let mut home = Home::with_sections(&server, "", asking, keyed.as_deref().unwrap_or(""));
    home.workspace = workspace;
    let home = Arc::new(home.on(backend));
    let mut config = Config::with_home(home.path());
    // The store the home's daemon uses (its config file names it).
    config.store = (Config::load(Some(&home.path().join("config.toml"))).unwrap()).store;
    let mut seen = Seen::default();
    let mut kills_mid_run = 0;
    for iteration in 0..iterations {
        let mut daemon = home.daemon().await;
        let (events, mut incoming) = mpsc::unbounded_channel();
        let mut runs = Vec::new();
        for n in 0..SESSIONS {
            let session = seen.sessions.get(n).cloned();
            let (home, events, held) = (home.clone(), events.clone(), holds.asks.clone());
            runs.push(tokio::spawn(async move {
                drive(&home, session, "go on", events, held).await
            }));
        }
        drop(events);
        // The first kill comes after a random number of events, late enough for turns to
        // have become durable before it; each after it is aimed.
        let aimed = (iteration > 0).then(|| Aim::nth(iteration as usize - 1, tools));
        if let Some(aim) = &aimed {
            holds.hold(aim);
        }
        let landed = kill_when(aimed, rng.random_range(60..=120), &mut incoming, &mut seen).await;
        seen.kills.push(landed);
        daemon.start_kill().unwrap();
        tokio::time::timeout(WAIT, daemon.wait())
            .await
            .expect("the daemon dies")
            .unwrap();
        holds.release();
        while let Ok(Some(event)) = tokio::time::timeout(WAIT, incoming.recv()).await {
            record(&mut seen, &event);
        }
        for run in runs {
            let status = tokio::time::timeout(WAIT, run)
                .await
                .expect("no client hangs")
                .unwrap();
            kills_mid_run += usize::from(status.is_none());
        }
        check_after_kill(&config, &seen).await;
    }
    eprintln!(
        "crash loop: {kills_mid_run} runs were cut off by a kill; {} turns were confirmed durable \
         before their kill",
        seen.durable.len()
    );
    assert!(
        !seen.durable.is_empty(),
        "the loop stored nothing: it proved nothing"
    );

    // Every session resumes to the end, on a daemon that is not killed.
    let daemon = home.daemon().await;
    for session in seen.sessions.clone() {
        let (events, mut incoming) = mpsc::unbounded_channel();
        let held = holds.asks.clone();
        let status =
            tokio::time::timeout(WAIT, drive(&home, Some(session.clone()), "finish", events, held))
                .await
                .expect("a resumed session finishes");
        while let Ok(event) = incoming.try_recv() {
            record(&mut seen, &event);
        }
        assert_eq!(
            status.as_deref(),
            Some("completed"),
            "session {session} resumes"
        );
    }
    home.shutdown(daemon).await;
    seen.report();
    let store = opened(&config).await;
    for session in &seen.sessions {
        let history = store
            .load_session(&SessionId::new(session.as_str()))
            .await
            .unwrap();
        let messages: Vec<&Message> = history
            .messages
            .iter()
            .map(|m| m.message.as_ref())
            .collect();
        let fault = repair::check(messages.iter().copied());
        assert!(fault.is_clean(), "session {session}: {fault:?}");
        no_duplicates(session, messages.into_iter());
    }
    server.assert_no_orphans();
    let stored = stored_results(&store, &seen.sessions).await;
    exactly_once(home.workspace.path(), &stored);
    if keyed.is_some() {
        same_keys(&scratch.path().join("keys"), &stored);
    }
    assert!(
        kills_mid_run > 0,
        "no kill landed while a run was in flight"
    );
    seen.covered(iterations as usize, tools);
}
}

/// Waits until the daemon is where `aimed` points (or, unaimed, for `events` events), reading
/// `incoming` into `seen`; where the kill lands. An aim the runs never reach (they ended, or
/// wait elsewhere) is missed after [`AIM_WAIT`].
async fn kill_when(
    aimed: Option<Aim>,
    events: usize,
    incoming: &mut mpsc::UnboundedReceiver<Value>,
    seen: &mut Seen,
) -> Landed {
    let mut count = 0;
    let Some(mut aim) = aimed else {
        while count < events {
            let Ok(Some(event)) = tokio::time::timeout(WAIT, incoming.recv()).await else {
                break;
            };
            count += 1;
            record(seen, &event);
        }
        return Landed::Random;
    };
    while let Ok(Some(event)) = tokio::time::timeout(AIM_WAIT, incoming.recv()).await {
        record(seen, &event);
        if aim.reached(&event) {
            return Landed::At(aim.point, aim.tool);
        }
    }
    Landed::Missed(aim.point, aim.tool)
}

/// How long an aimed kill waits for its point after the last event.
const AIM_WAIT: Duration = Duration::from_secs(10);

/// Where a kill landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Landed {
    Random,
    At(Point, &'static str),
    Missed(Point, &'static str),
}

/// The results the store holds, of calls that succeeded: (call, tool).
async fn stored_results(store: &Store, sessions: &[String]) -> Vec<(String, String)> {
    let mut succeeded = Vec::new();
    for session in sessions {
        let history = store
            .load_session(&SessionId::new(session.as_str()))
            .await
            .unwrap();
        for m in &history.messages {
            if let Message::ToolResult {
                call_id,
                name,
                is_error: false,
                ..
            } = m.message.as_ref()
            {
                succeeded.push((call_id.to_string(), name.clone()));
            }
        }
    }
    succeeded
}

/// No unsafe call ran twice (every bash call appended its id to the trail at most once), and
/// each call that succeeded took effect: its append, its file.
fn exactly_once(workspace: &std::path::Path, succeeded: &[(String, String)]) {
    let trail = std::fs::read_to_string(workspace.join("trail.txt")).unwrap_or_default();
    let mut ran: HashMap<&str, usize> = HashMap::new();
    for id in trail.lines() {
        *ran.entry(id).or_default() += 1;
    }
    assert!(ran.values().all(|n| *n == 1), "a call ran twice: {ran:?}");
    for (call, tool) in succeeded {
        match tool.as_str() {
            "bash" => assert!(
                ran.contains_key(call.as_str()),
                "{call} succeeded but never ran"
            ),
            "write" => assert_eq!(
                std::fs::read_to_string(workspace.join(format!("w/{call}.txt"))).ok(),
                Some(call.clone()),
                "{call} succeeded but its file is not written"
            ),
            _ => {}
        }
    }
}

/// Every call of the idempotent tool, however often it ran, ran under one key; each that
/// succeeded ran.
fn same_keys(keys: &std::path::Path, succeeded: &[(String, String)]) {
    let text = std::fs::read_to_string(keys).unwrap_or_default();
    let mut by_call: HashMap<&str, HashSet<&str>> = HashMap::new();
    for line in text.lines() {
        let (call, key) = line.split_once(' ').expect("a call's id and its key");
        by_call.entry(call).or_default().insert(key);
    }
    for (call, keys) in &by_call {
        assert_eq!(keys.len(), 1, "{call} ran under two keys: {keys:?}");
    }
    for (call, tool) in succeeded {
        if tool == "keyed__charge" {
            assert!(
                by_call.contains_key(call.as_str()),
                "{call} succeeded but never ran"
            );
        }
    }
}

fn record(seen: &mut Seen, event: &Value) {
    let session = event["session_id"].as_str().unwrap_or_default().to_owned();
    if event["type"] == "RunStarted" && !seen.sessions.contains(&session) {
        seen.sessions.push(session.clone());
    }
    if event["type"] == "CallRecovered" {
        let field = |f: &str| event[f].as_str().unwrap_or_default().to_owned();
        seen.recovered.push((field("tool"), field("action")));
    }
    if event["type"] == "CheckpointSaved" {
        let run = event["run_id"].as_str().unwrap_or_default().to_owned();
        let turn = event["turn"].as_u64().unwrap_or_default() as u32;
        seen.durable.insert((session, run, turn));
    }
}
