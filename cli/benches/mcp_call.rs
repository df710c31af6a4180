//! What a call to an MCP tool costs, as a run feels it: the time from a call's `ToolStart` to
//! its `ToolEnd`, for `echo` of the real `@modelcontextprotocol/server-everything` (stdio, one
//! node process) and for a built-in tool that does nothing, over 100 calls each in one run.
//! The difference of the medians is what MCP adds to a call.
//!
//!     cargo bench --bench mcp_call
//!
//! Needs node and npm (the server is installed into target/tmp once). Results are printed and
//! written to target/ryvos-bench/mcp_call.txt.

mod support;

#[path = "../tests/common/mcp.rs"]
#[allow(dead_code)]
mod mcp;

use ryvos::config::McpServerConfig;
use ryvos::{Config, EventKind, RunRequest, Runtime, SafetyTier};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use support::{machine, percentile, publish, InstantModel, Noop};

const CALLS: u32 = 100;

/// The ToolStart -> ToolEnd times of a run of `CALLS` calls to `tool`, in ms, sorted.
async fn call_times(
    entry: &std::path::Path,
    tool: &'static str,
    argument: &'static str,
) -> Vec<f64> {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let mut config = Config::with_home(home.path());
    config.agent.max_turns = CALLS + 2;
    config.agent.max_context_tokens = 10_000_000;
    config.agent.guardian.enabled = false;
    config.security.auto_approve.push(tool.to_owned());
    config.mcp.servers.insert(
        "everything".into(),
        McpServerConfig {
            command: Some("node".into()),
            args: vec![entry.display().to_string(), "stdio".into()],
            tier: SafetyTier::T0,
            ..McpServerConfig::default()
        },
    );
    let marks = Arc::new(Mutex::new(Vec::new()));
    let runtime = Runtime::builder(config)
        .provider(Arc::new(InstantModel {
            marks: marks.clone(),
            tool,
            argument,
            turns_per_run: CALLS + 1,
            record: false,
            hold: None,
        }))
        .tool(Arc::new(Noop {
            name: "noop",
            tier: SafetyTier::T0,
            marks,
        }))
        .start()
        .await
        .unwrap();
    let mut handle = runtime
        .run(RunRequest::new("call it").workspace(workspace.path()))
        .await
        .unwrap();
    let mut started = Instant::now();
    let mut times = Vec::new();
    while let Some(event) = handle.next_event().await {
        match &event.kind {
            EventKind::ToolStart { .. } => started = Instant::now(),
            EventKind::ToolEnd {
                is_error, output, ..
            } => {
                assert!(!is_error, "{output}");
                times.push(started.elapsed().as_secs_f64() * 1000.0);
            }
            EventKind::RunComplete { status, .. } => {
                assert_eq!(status.to_string(), "completed");
            }
            _ => {}
        }
    }
    runtime.shutdown().await.unwrap();
    times.sort_by(|a, b| a.total_cmp(b));
    times
}

fn main() {
    let Some(entry) = mcp::server_entry("server-everything") else {
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    // A discarded pass first: node's and the runtime's warm-up are not a call's cost.
    rt.block_on(call_times(&entry, "everything__echo", "message"));
    let mcp = rt.block_on(call_times(&entry, "everything__echo", "message"));
    let builtin = rt.block_on(call_times(&entry, "noop", "note"));
    let line = |label: &str, t: &[f64]| {
        format!(
            "{label}  p50 {:>7.3} ms  p90 {:>7.3} ms  max {:>7.3} ms  ({} calls)\n",
            percentile(t, 0.5),
            percentile(t, 0.9),
            t.last().copied().unwrap_or_default(),
            t.len()
        )
    };
    let mut report = format!(
        "A tool call, ToolStart -> ToolEnd, within one run of {CALLS} calls\nmachine: {}\n\n",
        machine()
    );
    report.push_str(&line("MCP (server-everything echo, stdio)", &mcp));
    report.push_str(&line("built-in tool that does nothing    ", &builtin));
    report.push_str(&format!(
        "\nadded by MCP (median): {:.3} ms\n",
        percentile(&mcp, 0.5) - percentile(&builtin, 0.5)
    ));
    publish("mcp_call.txt", &report);
}
