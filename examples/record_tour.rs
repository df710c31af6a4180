//! Makes examples/tour/recording.jsonl, the recording the README's first command replays.
//!
//! A scripted OpenAI-compatible model server on 127.0.0.1 plays the model's side of a short
//! session (look at the project with `glob` and `read`, then answer); the real runtime drives
//! it, and `record_model_traffic` (what `ryvos run --record` uses) writes the traffic down.
//!
//!     cargo run --example record_tour

use ryvos::{Config, EventKind, RunRequest, RunStatus, Runtime};
use ryvos_testkit::{Reply, ScriptedModelServer};
use std::path::Path;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tour = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/tour");
    let server = ScriptedModelServer::start([
        Reply::text_then_tools(
            &["I'll look ", "at the project first."],
            &[("call_1", "glob", r#"{"pattern": "**/*"}"#)],
        ),
        Reply::tool_calls(&[("call_2", "read", r#"{"path": "notes.md"}"#)]),
        Reply::text(&[
            "The project has ",
            "two files. ",
            "The latest release, 0.2, ",
            "made checkpoints faster.",
        ]),
    ])
    .await;
    let home = tempfile::tempdir()?;
    let mut config = Config::with_home(home.path());
    config.model.base_url = server.base_url();
    config.model.model = "recorded-model".into();
    config.model.api_key = String::new();
    let recording = tour.join("recording.jsonl");
    if recording.exists() {
        std::fs::remove_file(&recording)?;
    }
    let runtime = Runtime::builder(config)
        .record_model_traffic(&recording)
        .start()
        .await?;
    let request =
        RunRequest::new("What changed in the latest release?").workspace(tour.join("workspace"));
    let mut run = runtime.run(request).await?;
    let mut status = RunStatus::Failed;
    while let Some(event) = run.next_event().await {
        if let EventKind::RunComplete { status: s, .. } = &event.kind {
            status = *s;
        }
    }
    runtime.shutdown().await?;
    server.assert_no_orphans();
    eprintln!("wrote {} ({status})", recording.display());
    if status != RunStatus::Completed {
        std::process::exit(1);
    }
    Ok(())
}
