//! Tools from real MCP servers (from npm), through the real binaries: a call reaches the
//! server and its result the model; arguments are checked first; the gate applies; a server
//! that fails to start leaves the run working with a warning; a killed one is restarted; and
//! nothing a server started outlives the daemon.

mod common;

use common::home::{Home, WAIT};
use common::mcp::{server_entry, server_table, tagged_processes};
use ryvos_testkit::{Gate, Reply, ScriptedModelServer};

/// A tag for this test's server processes.
fn tag(home: &Home) -> String {
    home.path().display().to_string()
}

/// The result the model was given for `call_id`, in any request.
fn result_of(server: &ScriptedModelServer, call_id: &str) -> String {
    server
        .requests()
        .iter()
        .flat_map(common::tool_results)
        .find(|(id, _)| id == call_id)
        .map(|(_, result)| result)
        .unwrap_or_else(|| panic!("no result for {call_id}"))
}

/// Runs `ryvos run --json PROMPT` to its end: (exit code, events, stderr).
async fn run(home: &Home, prompt: &str) -> (i32, Vec<serde_json::Value>, String) {
    let (code, stdout, stderr) = home.ryvos(&["run", "--json", prompt]).await;
    (code, common::cli::json_lines(&stdout), stderr)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_tool_call_reaches_the_server_and_its_result_the_model() {
    let Some(everything) = server_entry("server-everything") else {
        return;
    };
    let model = ScriptedModelServer::start([
        Reply::tool_calls(&[
            ("c1", "everything__echo", r#"{"message": "over MCP"}"#),
            ("c2", "everything__echo", r#"{"text": 5}"#),
        ]),
        Reply::text(&["done"]),
    ])
    .await;
    let home = Home::new(&model, "");
    let config = home.path().join("config.toml");
    let table = server_table("everything", &everything, &["stdio"], &tag(&home), "");
    std::fs::write(&config, std::fs::read_to_string(&config).unwrap() + &table).unwrap();
    let (code, _, stderr) = run(&home, "echo it").await;
    assert_eq!(code, 0, "{stderr}");
    // The server's tools are offered, named after it.
    let offered = offered(&model, 0);
    assert!(
        offered.contains(&"everything__echo".to_owned()),
        "{offered:?}"
    );
    assert_eq!(result_of(&model, "c1"), "Echo: over MCP");
    assert!(
        result_of(&model, "c2").starts_with("validation_error:"),
        "{}",
        result_of(&model, "c2")
    );
    // In-process, the runtime's close stopped the server.
    assert!(tagged_processes(&tag(&home)).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_cannot_start_leaves_the_run_working_with_a_warning() {
    let model = ScriptedModelServer::start([Reply::text(&["fine without it"])]).await;
    let home = Home::new(
        &model,
        "\n[mcp.servers.broken]\ncommand = \"/nonexistent/mcp-server\"\n",
    );
    let (code, events, stderr) = run(&home, "go").await;
    assert_eq!(code, 0, "{stderr}");
    let warning = events
        .iter()
        .find(|e| e["type"] == "Warning")
        .expect("a Warning event");
    let message = warning["message"].as_str().unwrap();
    assert!(
        message.contains("'broken'") && message.contains("/nonexistent/mcp-server"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_t4_mcp_tool_is_denied_under_the_default_policy() {
    let Some(everything) = server_entry("server-everything") else {
        return;
    };
    let model = ScriptedModelServer::start([
        Reply::tool_calls(&[("c1", "everything__echo", r#"{"message": "x"}"#)]),
        Reply::text(&["ok"]),
    ])
    .await;
    let tag = format!("t4-{}", std::process::id());
    let table = server_table("everything", &everything, &["stdio"], &tag, "tier = \"T4\"");
    let home = Home::with_sections(&model, "", "", &table);
    let (code, _, stderr) = run(&home, "echo").await;
    assert_eq!(code, 0, "{stderr}");
    let result = result_of(&model, "c1");
    assert!(result.starts_with("denied:"), "{result}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_server_is_restarted_and_the_next_call_works_and_shutdown_ends_it() {
    let Some(everything) = server_entry("server-everything") else {
        return;
    };
    let gate = Gate::new();
    let model = ScriptedModelServer::start([
        Reply::tool_calls(&[("c1", "everything__echo", r#"{"message": "one"}"#)]),
        Reply::tool_calls(&[("c2", "everything__echo", r#"{"message": "two"}"#)]).held(&gate),
        Reply::text(&["done"]),
    ])
    .await;
    let home = Home::new(&model, "");
    let tag = tag(&home);
    let config = home.path().join("config.toml");
    let table = server_table("everything", &everything, &["stdio"], &tag, "");
    std::fs::write(&config, std::fs::read_to_string(&config).unwrap() + &table).unwrap();
    let daemon = home.daemon().await;
    let mut client = home.follow(&["run", "--json", "echo twice"]);
    // The first call has run; the model's second answer is held.
    model.wait_for_requests(2).await;
    let before = tagged_processes(&tag);
    assert!(!before.is_empty());
    for pid in &before {
        // SAFETY: kill only signals the test's own MCP server processes.
        unsafe { libc::kill(*pid, libc::SIGKILL) };
    }
    // Back once it is ready again, restarted.
    let restarted = async {
        loop {
            let (_, status, _) = home.ryvos(&["status", "--json"]).await;
            let status: serde_json::Value = serde_json::from_str(&status).unwrap();
            let server = &status["mcp"][0];
            if server["state"] == "ready" && server["restarts"].as_u64() >= Some(1) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(WAIT, restarted)
        .await
        .expect("the server was started again");
    assert!(tagged_processes(&tag).iter().all(|p| !before.contains(p)));
    gate.open();
    client
        .until(|e| (e["type"] == "RunComplete").then_some(()))
        .await;
    assert_eq!(result_of(&model, "c1"), "Echo: one");
    // The restarted server lists its tools again before a call can reach it.
    let second = async {
        loop {
            if model.requests().len() >= 3 {
                return result_of(&model, "c2");
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    let second = tokio::time::timeout(WAIT, second).await.unwrap();
    assert_eq!(second, "Echo: two");
    home.shutdown(daemon).await;
    assert!(
        tagged_processes(&tag).is_empty(),
        "no server process outlives the daemon"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_filesystem_server_offers_only_the_enabled_tools_and_reads_the_workspace() {
    let Some(files) = server_entry("server-filesystem") else {
        return;
    };
    // The server reads paths relative to its directory, the workspace Ryvos runs in.
    let model = ScriptedModelServer::start([
        Reply::tool_calls(&[("c1", "files__read_text_file", r#"{"path": "notes.txt"}"#)]),
        Reply::text(&["read it"]),
    ])
    .await;
    let home = Home::new(&model, "");
    let workspace = home.workspace.path().canonicalize().unwrap();
    std::fs::write(workspace.join("notes.txt"), "kept in the workspace").unwrap();
    let table = server_table(
        "files",
        &files,
        &[&workspace.display().to_string()],
        &tag(&home),
        "enabled_tools = [\"read_text_file\", \"list_directory\"]",
    );
    let config = home.path().join("config.toml");
    std::fs::write(&config, std::fs::read_to_string(&config).unwrap() + &table).unwrap();
    let (code, _, stderr) = run(&home, "read the notes").await;
    assert_eq!(code, 0, "{stderr}");
    let mut offered: Vec<String> = offered(&model, 0)
        .into_iter()
        .filter(|n| n.starts_with("files__"))
        .collect();
    offered.sort();
    assert_eq!(offered, ["files__list_directory", "files__read_text_file"]);
    assert_eq!(result_of(&model, "c1"), "kept in the workspace");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_streamable_http_server_is_reached_at_its_url_and_its_header_variables_are_needed() {
    use tokio::io::AsyncBufReadExt;
    let Some(everything) = server_entry("server-everything") else {
        return;
    };
    let port = {
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        free.local_addr().unwrap().port()
    };
    let model = ScriptedModelServer::start([
        Reply::tool_calls(&[("c1", "web__echo", r#"{"message": "over HTTP"}"#)]),
        Reply::text(&["done"]),
        Reply::text(&["done without it"]),
    ])
    .await;
    let home = Home::new(
        &model,
        &format!(
            "\n[mcp.servers.web]\nurl = \"http://127.0.0.1:{port}/mcp\"\n\
             headers = {{ Authorization = \"Bearer ${{RYVOS_TEST_MCP_TOKEN}}\" }}\n"
        ),
    );
    let mut http_server = tokio::process::Command::new("node")
        .arg(&everything)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut said = tokio::io::BufReader::new(http_server.stderr.take().unwrap()).lines();
    let listening = async {
        while let Some(line) = said.next_line().await.unwrap() {
            if line.contains("listening on port") {
                return;
            }
        }
        panic!("the HTTP server exited");
    };
    tokio::time::timeout(WAIT, listening)
        .await
        .expect("the HTTP server listens");
    let (code, stdout, stderr) = common::cli::output(
        home.command(env!("CARGO_BIN_EXE_ryvos"))
            .env("RYVOS_TEST_MCP_TOKEN", "secret")
            .args(["run", "--json", "echo it"]),
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert!(!stdout.contains("\"Warning\""), "{stdout}");
    assert_eq!(result_of(&model, "c1"), "Echo: over HTTP");
    // Without the header's variable, the server is not reached, and the run says why.
    let (code, stdout, stderr) = home.ryvos(&["run", "--json", "again"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        model.requests().len(),
        3,
        "one model call, without the server's tools"
    );
    let warning = common::cli::json_lines(&stdout)
        .into_iter()
        .find(|e| e["type"] == "Warning")
        .expect("a Warning event");
    assert!(
        warning["message"]
            .as_str()
            .unwrap()
            .contains("RYVOS_TEST_MCP_TOKEN"),
        "{warning}"
    );
    http_server.kill().await.ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_says_its_tools_changed_has_them_listed_again() {
    // The fixture is built on the official SDK, installed with the servers.
    if server_entry("server-everything").is_none() {
        return;
    }
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/growing_mcp_server.cjs"
    );
    let gate = Gate::new();
    let model = ScriptedModelServer::start([
        Reply::tool_calls(&[("c1", "growing__grow", "{}")]),
        Reply::tool_calls(&[("c2", "growing__grown", "{}")]).held(&gate),
        Reply::text(&["done"]),
    ])
    .await;
    let home = Home::new(
        &model,
        &format!(
            "\n[mcp.servers.growing]\ncommand = \"node\"\nargs = [\"{fixture}\"]\n\
             env = {{ NODE_PATH = \"{}\" }}\n",
            common::mcp::node_modules().display()
        ),
    );
    let daemon = home.daemon().await;
    let mut client = home.follow(&["run", "--json", "grow"]);
    model.wait_for_requests(2).await;
    assert!(!offered(&model, 0).contains(&"growing__grown".to_owned()));
    let listed_again = async {
        loop {
            let (_, status, _) = home.ryvos(&["status", "--json"]).await;
            let status: serde_json::Value = serde_json::from_str(&status).unwrap();
            if status["mcp"][0]["tools"]
                .as_array()
                .is_some_and(|t| t.contains(&serde_json::json!("growing__grown")))
            {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(WAIT, listed_again)
        .await
        .expect("the new tool was listed");
    gate.open();
    client
        .until(|e| (e["type"] == "RunComplete").then_some(()))
        .await;
    assert_eq!(result_of(&model, "c1"), "grew");
    assert_eq!(result_of(&model, "c2"), "I am grown");
    assert!(offered(&model, 2).contains(&"growing__grown".to_owned()));
    home.shutdown(daemon).await;
}

/// The tool names offered in the model request number `n`.
fn offered(model: &ScriptedModelServer, n: usize) -> Vec<String> {
    model.requests()[n]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_shutdown_while_a_server_is_still_starting_leaves_nothing_behind() {
    let model = ScriptedModelServer::start([]).await;
    let tag = format!("starting-{}", std::process::id());
    // A program that never answers the handshake.
    let home = Home::new(
        &model,
        &format!(
            "\n[mcp.servers.silent]\ncommand = \"sleep\"\nargs = [\"1000\"]\n\
             env = {{ RYVOS_TEST_TAG = \"{tag}\" }}\n"
        ),
    );
    let daemon = home.daemon().await;
    let started = async {
        while tagged_processes(&tag).is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(WAIT, started)
        .await
        .expect("the server was started");
    home.shutdown(daemon).await;
    assert!(
        tagged_processes(&tag).is_empty(),
        "no server process outlives the daemon"
    );
}
