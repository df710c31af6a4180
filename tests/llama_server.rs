//! A real llama.cpp server and a real small model, driven by the real `ryvos` binary: the
//! strict server Ryvos's requests must satisfy, the streamed tool calls it assembles, and a
//! local model that costs nothing.
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

/// Starts `llama-server` with `model` on `port`: the model's own chat template through
/// `--jinja` (which gives it OpenAI-style tools), greedy sampling so that the run repeats.
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

#[tokio::test(flavor = "multi_thread")]
async fn a_real_llama_cpp_server_runs_a_tool_call_end_to_end() {
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
    std::fs::write(
        workspace.path().join("notes.txt"),
        "The code word is PELICAN.\n",
    )
    .unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[model]\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"local-gguf\"\n\
             api_key = \"\"\nmax_output_tokens = 256\n[agent]\nmax_turns = 4\n"
        ),
    )
    .unwrap();
    let (code, stdout, stderr) = output(
        Command::new(env!("CARGO_BIN_EXE_ryvos"))
            .env("RYVOS_HOME", home.path())
            .env("RUST_LOG", "warn")
            .current_dir(workspace.path())
            .stdin(Stdio::null())
            .args([
                "run",
                "--json",
                "Call the read tool with path notes.txt, then tell me the code word.",
            ]),
    )
    .await;
    let events = json_lines(&stdout);
    let of_type =
        |kind: &str| -> Vec<&Value> { events.iter().filter(|e| e["type"] == kind).collect() };
    let read = of_type("ToolEnd")
        .into_iter()
        .find(|e| e["name"] == "read")
        .unwrap_or_else(|| panic!("the model called read: {stdout}\n{stderr}"));
    assert_eq!(read["is_error"], false, "{read}");
    assert!(
        read["output"].as_str().unwrap().contains("PELICAN"),
        "{read}"
    );
    // The call was replayed to llama.cpp, which parses every replayed call, and it answered.
    let end = of_type("RunComplete")[0];
    assert_ne!(end["status"], "failed", "{end}\n{stderr}");
    assert!(end["turns"].as_u64().unwrap() >= 2, "{end}");
    assert!(
        code == 0 || end["status"] == "max_turns",
        "{code}: {stderr}"
    );
    // Usage came from the server; a model on loopback costs nothing and raises no alert.
    assert!(of_type("ModelUsage")
        .iter()
        .all(|u| u["estimated"] == false && u["cost_cents"] == 0.0));
    assert!(of_type("GuardianBudgetAlert").is_empty(), "{stdout}");
}
