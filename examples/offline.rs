//! A full Ryvos run with no network and no API key.
//!
//! A scripted OpenAI-compatible model server runs on 127.0.0.1 and plays a short agent session:
//! the model looks at a small project with `glob` and `read`, then answers. Everything else is
//! the real runtime: HTTP streaming, the actors, the tools, and redb checkpoints in a temporary
//! home. The answer streams to stdout; tool activity and checkpoints go to stderr.
//!
//!     cargo run --example offline

use ryvos::{Config, EventKind, RunRequest, RunStatus, Runtime};
use ryvos_testkit::{Reply, ScriptedModelServer};
use std::io::Write;
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let workspace = tempfile::tempdir()?;
    std::fs::write(
        workspace.path().join("notes.md"),
        "# Release notes\n\n- 0.2: faster checkpoints\n- 0.1: first release\n",
    )?;
    std::fs::create_dir(workspace.path().join("src"))?;
    std::fs::write(workspace.path().join("src/main.rs"), "fn main() {}\n")?;

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
        ])
        .pause_between(Duration::from_millis(40)),
    ])
    .await;

    let home = tempfile::tempdir()?;
    let mut config = Config::with_home(home.path());
    config.model.base_url = server.base_url();
    config.model.model = "scripted-demo".into();
    config.model.api_key = String::new();
    let runtime = Runtime::start(config).await?;

    eprintln!(
        "ryvos: offline example (scripted model at {})",
        server.base_url()
    );
    let request =
        RunRequest::new("What changed in the latest release?").workspace(workspace.path());
    let mut run = runtime.run(request).await?;
    let mut status = RunStatus::Failed;
    while let Some(event) = run.next_event().await {
        match &event.kind {
            EventKind::TextDelta { text } => {
                print!("{text}");
                std::io::stdout().flush()?;
            }
            EventKind::ToolStart { name, input, .. } => eprintln!("\n  [tool] {name} {input}"),
            EventKind::ToolEnd {
                is_error, output, ..
            } => {
                let first = output.lines().next().unwrap_or_default();
                let mark = if *is_error { "failed" } else { "ok" };
                eprintln!(
                    "  [tool] {mark}: {first} ({} lines)",
                    output.lines().count()
                );
            }
            EventKind::CheckpointSaved { turn } => eprintln!("  [checkpoint] turn {turn} saved"),
            EventKind::RunComplete {
                status: s,
                turns,
                input_tokens,
                output_tokens,
                duration_ms,
                ..
            } => {
                println!();
                eprintln!(
                    "ryvos: run {} ({turns} turns, {input_tokens} in / {output_tokens} out tokens, {duration_ms} ms) in session {}",
                    s, event.session_id
                );
                status = *s;
            }
            _ => {}
        }
    }
    runtime.shutdown().await?;
    if status != RunStatus::Completed {
        std::process::exit(1);
    }
    Ok(())
}
