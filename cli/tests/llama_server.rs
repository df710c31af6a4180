//! A real llama.cpp server and a real small model, driven by the real `ryvos` binary: a strict
//! server that Ryvos's requests (tools, output limit, replayed history) must satisfy, an
//! answer cut off at the output limit, and a local model that costs nothing.
//!
//! Optional: it runs only when `RYVOS_TEST_LLAMA_SERVER` names a `llama-server` binary and
//! `RYVOS_TEST_LLAMA_MODEL` a GGUF model (the README says how to get both); otherwise it says
//! it was skipped and passes.

mod common;

use common::cli::{json_lines, output};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

/// How long a model server may take to load its model and answer `/health`.
const LOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// The server binary and the model, when both are configured.
fn configured() -> Option<(PathBuf, PathBuf)> {
    let server = std::env::var_os("RYVOS_TEST_LLAMA_SERVER")?;
    let model = std::env::var_os("RYVOS_TEST_LLAMA_MODEL")?;
    Some((server.into(), model.into()))
}

/// A free port on loopback (released for the server to take).
fn free_port() -> u16 {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a probe");
    probe.local_addr().expect("probe address").port()
}

/// Starts `llama-server` with `model` on `port`: chat templates rendered by `--jinja`, as
/// tool-using setups run it, and greedy sampling so that the run repeats.
fn start_llama(server: &Path, model: &Path, port: u16) -> Child {
    Command::new(server)
        .args([
            "--jinja",
            "--temp",
            "0",
            "--seed",
            "1",
            "--ctx-size",
            "8192",
        ])
        .arg("--model")
        .arg(model)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", server.display()))
}

/// Waits until the server answers `GET /health` with 200 (the model is loaded).
async fn wait_until_healthy(port: u16) {
    let healthy = async {
        loop {
            if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)).await {
                let request =
                    "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
                let mut answer = String::new();
                if stream.write_all(request.as_bytes()).await.is_ok()
                    && stream.read_to_string(&mut answer).await.is_ok()
                    && answer.starts_with("HTTP/1.1 200")
                {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    };
    tokio::time::timeout(LOAD_TIMEOUT, healthy)
        .await
        .expect("llama-server loaded its model in time");
}

/// Runs `ryvos ARGS` in `workspace` with `home` as its home: (exit code, events, stderr).
async fn ryvos(home: &Path, workspace: &Path, args: &[&str]) -> (i32, Vec<Value>, String) {
    let (code, stdout, stderr) = output(
        Command::new(env!("CARGO_BIN_EXE_ryvos"))
            .env("RYVOS_HOME", home)
            .env("RUST_LOG", "warn")
            .current_dir(workspace)
            .stdin(Stdio::null())
            .args(args),
    )
    .await;
    (code, json_lines(&stdout), stderr)
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_real_llama_cpp_server_takes_every_request_and_its_limits_are_reported() {
    let Some((server, model)) = configured() else {
        eprintln!(
            "skipped: set RYVOS_TEST_LLAMA_SERVER (a llama-server binary) and \
             RYVOS_TEST_LLAMA_MODEL (a GGUF model) to run this test; see the README"
        );
        return;
    };
    let port = free_port();
    let _llama = start_llama(&server, &model, port);
    wait_until_healthy(port).await;

    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    // A small output limit: a small model talks until it is cut off there.
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[model]\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"local-gguf\"\n\
             api_key = \"\"\nmax_output_tokens = 24\n[agent]\nmax_turns = 4\n"
        ),
    )
    .unwrap();
    let (code, events, stderr) = ryvos(
        home.path(),
        workspace.path(),
        &["run", "--json", "Describe the files of this directory."],
    )
    .await;
    let end = of_type(&events, "RunComplete")[0].clone();
    assert_eq!(code, 0, "{end}\n{stderr}");
    assert_eq!(end["status"], "completed", "{end}");
    // The request carried the tools' specs and the limit, which the server kept to.
    assert_eq!(end["truncated"], true, "{end}");
    assert_eq!(of_type(&events, "OutputTruncated").len(), 1, "{events:?}");
    // Usage came from the server; a model on loopback costs nothing and raises no alert.
    let usage = of_type(&events, "ModelUsage");
    assert!(!usage.is_empty());
    for u in usage {
        assert_eq!(
            (&u["estimated"], &u["cost_cents"]),
            (&false.into(), &0.0.into()),
            "{u}"
        );
        assert_eq!(u["output_tokens"], 24, "{u}");
    }
    assert!(of_type(&events, "GuardianBudgetAlert").is_empty());

    // The stored conversation replays to the server as it is.
    let session = end["session_id"].as_str().unwrap();
    let (code, events, stderr) = ryvos(
        home.path(),
        workspace.path(),
        &["run", "--json", "--resume", session, "Go on."],
    )
    .await;
    let end = of_type(&events, "RunComplete")[0].clone();
    assert_eq!(
        (code, &end["status"]),
        (0, &"completed".into()),
        "{end}\n{stderr}"
    );
    assert!(
        end["input_tokens"].as_u64().unwrap() > 48,
        "the history was sent: {end}"
    );
}
