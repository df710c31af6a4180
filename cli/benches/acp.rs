//! `ryvos acp` as an editor feels it, through the real `ryvosd` and a scripted model server on
//! 127.0.0.1, driven by the Agent Client Protocol crate's own client side:
//!
//!     cargo bench --bench acp
//!
//! - from `session/prompt` sent to the model's request arriving (the model's own time left
//!   out: the request is timed as it arrives), median and p90 of [`PROMPTS`] prompts;
//! - what an idle session the editor opened and prompted once costs in the daemon: its resident
//!   memory grown over [`SESSIONS`] of them, per session.
//!
//! Each figure is printed beside its target and written to target/ryvos-bench/acp.txt.

mod support;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{InitializeRequest, NewSessionRequest, PromptRequest};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{AcpAgent, AcpAgentConfig, Agent, Client};
use ryvos_testkit::{Reply, ScriptedModelServer};
use std::time::{Duration, Instant};
use support::daemon::{start_daemon, stop_daemon};
use support::{machine, percentile, resident_kib, verdict};

/// Prompts timed, one after the other, on one session.
const PROMPTS: usize = 30;
/// Sessions opened and prompted once, for the memory figure.
const SESSIONS: usize = 200;

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let report = runtime.block_on(measure());
    support::publish("acp.txt", &report);
}

async fn measure() -> String {
    let replies = (0..PROMPTS + SESSIONS).map(|_| Reply::text(&["ok"]));
    let model = ScriptedModelServer::start(replies).await;
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let config = format!(
        "[model]\nbase_url = \"{}\"\nmodel = \"scripted\"\napi_key = \"\"\n[agent]\nsession_idle_secs = 3600\n",
        model.base_url()
    );
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let (daemon, _) = start_daemon(home.path()).await;
    let pid = daemon.id().unwrap();
    let agent = AcpAgent::new(
        AcpAgentConfig::new(env!("CARGO_BIN_EXE_ryvos"))
            .arg("acp")
            .env("RYVOS_HOME", home.path().display().to_string())
            .env("RUST_LOG", "error"),
    );
    let cwd = workspace.path().canonicalize().unwrap();
    let mut latencies = Vec::new();
    let mut grown_kib = 0.0;
    Client
        .v1()
        .connect_with(agent, async |cx: ConnectionTo<Agent>| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let new = NewSessionRequest::new(cwd.clone());
            let session = cx.send_request(new).block_task().await?.session_id;
            for i in 0..PROMPTS {
                let sent = Instant::now();
                let prompt = PromptRequest::new(session.clone(), vec!["say ok".into()]);
                cx.send_request(prompt).block_task().await?;
                let arrived = model.captured()[i].at;
                latencies.push(arrived.saturating_duration_since(sent).as_secs_f64() * 1e3);
            }
            let before = resident_kib(pid);
            for _ in 0..SESSIONS {
                let new = NewSessionRequest::new(cwd.clone());
                let session = cx.send_request(new).block_task().await?.session_id;
                let prompt = PromptRequest::new(session, vec!["say ok".into()]);
                cx.send_request(prompt).block_task().await?;
            }
            // Let the last commits and the sessions' tasks settle.
            tokio::time::sleep(Duration::from_millis(500)).await;
            grown_kib = resident_kib(pid).saturating_sub(before) as f64 / SESSIONS as f64;
            Ok(())
        })
        .await
        .expect("the editor's connection");
    stop_daemon(home.path(), daemon).await;
    latencies.sort_by(f64::total_cmp);
    let p50 = percentile(&latencies, 0.5);
    let p90 = percentile(&latencies, 0.9);
    format!(
        "acp: {}\nsession/prompt -> model request, through ryvosd: p50 {p50:5.2} ms  p90 {p90:5.2} ms  ({PROMPTS} prompts; target p50 <= 5 ms: {})\nidle session opened and prompted once, in the daemon: {grown_kib:5.1} KiB each ({SESSIONS} sessions; target <= 100 KiB: {})\n",
        machine(),
        verdict(p50 <= 5.0),
        verdict(grown_kib <= 100.0),
    )
}
