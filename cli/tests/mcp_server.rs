//! `ryvos mcp-server` driven by a real MCP client (rmcp's), through the daemon and in-process;
//! and `ryvos mcp list`.

mod common;

use common::home::Home;
use common::mcp::{server_entry, server_table};
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use ryvos_testkit::{Reply, ScriptedModelServer};

/// The text of a tool result.
fn text_of(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| match c {
            rmcp::model::ContentBlock::Text(t) => Some(t.text.clone()),
            _ => None,
        })
        .collect()
}

async fn call(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    tool: &'static str,
    arguments: serde_json::Value,
) -> rmcp::model::CallToolResult {
    let serde_json::Value::Object(arguments) = arguments else {
        panic!("arguments are an object")
    };
    let params = CallToolRequestParams::new(tool).with_arguments(arguments);
    tokio::time::timeout(common::home::WAIT, client.call_tool(params))
        .await
        .expect("answered in time")
        .expect("a tool result")
}

#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_client_runs_a_prompt_through_ryvos_mcp_server_with_and_without_a_daemon() {
    for with_daemon in [false, true] {
        let model = ScriptedModelServer::start([Reply::text(&["the answer"])]).await;
        let home = Home::new(&model, "");
        let daemon = match with_daemon {
            true => Some(home.daemon().await),
            false => None,
        };
        let mut command = home.command(env!("CARGO_BIN_EXE_ryvos"));
        command.arg("mcp-server");
        let transport = TokioChildProcess::new(command).unwrap();
        let client = ().serve(transport).await.expect("the handshake");
        let mut names: Vec<String> = client
            .list_all_tools()
            .await
            .unwrap()
            .iter()
            .map(|t| t.name.to_string())
            .collect();
        names.sort();
        assert_eq!(names, ["history", "run", "sessions"]);

        let ran = call(&client, "run", serde_json::json!({"prompt": "say it"})).await;
        assert_ne!(ran.is_error, Some(true), "{ran:?}");
        let text = text_of(&ran);
        assert!(text.starts_with("the answer"), "{text}");
        let session = ran.structured_content.as_ref().unwrap()["session_id"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            text.contains(&session) && text.contains("completed"),
            "{text}"
        );

        let listed = text_of(&call(&client, "sessions", serde_json::json!({})).await);
        assert!(listed.contains(&session), "{listed}");
        let history =
            text_of(&call(&client, "history", serde_json::json!({"session": session})).await);
        assert!(
            history.contains("say it") && history.contains("the answer"),
            "{history}"
        );
        let missing = call(&client, "history", serde_json::json!({"session": "s_none"})).await;
        assert_eq!(missing.is_error, Some(true), "{missing:?}");
        // Input that does not fit the schema is a tool error the model can act on, naming the
        // argument and what was expected.
        for (tool, arguments, says) in [
            (
                "run",
                serde_json::json!({"prompt": 5}),
                "`prompt`: invalid type: integer `5`, expected a string",
            ),
            ("run", serde_json::json!({}), "missing field `prompt`"),
            (
                "run",
                serde_json::json!({"prompt": "  "}),
                "`prompt`: it is empty",
            ),
            ("history", serde_json::json!({"session": 1}), "`session`"),
            ("sessions", serde_json::json!({"x": 1}), "unknown field `x`"),
        ] {
            let invalid = call(&client, tool, arguments).await;
            assert_eq!(invalid.is_error, Some(true), "{invalid:?}");
            let text = text_of(&invalid);
            assert!(text.contains(says), "{tool}: {text}");
        }

        client.cancel().await.unwrap();
        if let Some(daemon) = daemon {
            home.shutdown(daemon).await;
        }
    }
}

/// `ryvos mcp-server` as the MCP server `ryvos` of a config (the table to add), in a home of
/// its own (kept alive by the directory returned) whose model is `model`.
fn ryvos_as_a_server(model: &ScriptedModelServer) -> (tempfile::TempDir, String) {
    let its_home = tempfile::tempdir().unwrap();
    let config = format!(
        "[model]\nbase_url = \"{}\"\napi_key = \"\"\n",
        model.base_url()
    );
    std::fs::write(its_home.path().join("config.toml"), config).unwrap();
    let table = format!(
        "\n[mcp.servers.ryvos]\ncommand = \"{}\"\nargs = [\"mcp-server\"]\nenv = {{ RYVOS_HOME = \"{}\" }}\n",
        env!("CARGO_BIN_EXE_ryvos"),
        its_home.path().display()
    );
    (its_home, table)
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_list_shows_each_server_its_state_and_tools() {
    let Some(everything) = server_entry("server-everything") else {
        return;
    };
    let model = ScriptedModelServer::start([]).await;
    let tag = format!("list-{}", std::process::id());
    // Ryvos's own MCP server, reached by MCP as any server is: it speaks 2026-07-28.
    let (_its_home, ryvos) = ryvos_as_a_server(&model);
    let table = server_table("everything", &everything, &["stdio"], &tag, "")
        + "\n[mcp.servers.broken]\ncommand = \"/nonexistent/server\"\n"
        + &ryvos;
    let home = Home::new(&model, &table);
    let (code, listed, stderr) = home.ryvos(&["mcp", "list", "--json"]).await;
    assert_eq!(code, 0, "{stderr}");
    let servers: Vec<serde_json::Value> = serde_json::from_str(&listed).unwrap();
    let by_name = |name: &str| servers.iter().find(|s| s["name"] == name).unwrap().clone();
    assert_eq!(by_name("everything")["state"], "ready", "{listed}");
    eprintln!(
        "server-everything speaks MCP {}",
        by_name("everything")["revision"]
    );
    assert!(by_name("everything")["revision"].is_string(), "{listed}");
    assert_eq!(by_name("ryvos")["state"], "ready", "{listed}");
    assert_eq!(by_name("ryvos")["revision"], "2026-07-28", "{listed}");
    assert!(by_name("everything")["tools"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!("everything__echo")));
    assert_eq!(by_name("broken")["state"], "down", "{listed}");
    assert!(by_name("broken")["reason"]
        .as_str()
        .unwrap()
        .contains("/nonexistent/server"));
    let (_, shown, _) = home.ryvos(&["mcp", "list"]).await;
    assert!(shown.contains("mcp: broken DOWN"), "{shown}");
    // doctor fails on the server that cannot start, and names it.
    let (code, report, _) = home.ryvos(&["doctor"]).await;
    assert_eq!(code, 1, "{report}");
    assert!(
        report
            .lines()
            .any(|l| l.starts_with("FAIL") && l.contains("mcp broken")),
        "{report}"
    );
    assert!(report
        .lines()
        .any(|l| l.starts_with("ok") && l.contains("mcp everything")));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_request_the_client_cancels_cancels_the_run() {
    let gate = ryvos_testkit::Gate::new();
    let model = ScriptedModelServer::start([Reply::text(&["too late"]).held(&gate)]).await;
    let home = Home::new(&model, "");
    let daemon = home.daemon().await;
    let mut command = home.command(env!("CARGO_BIN_EXE_ryvos"));
    command.arg("mcp-server");
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    let serde_json::Value::Object(arguments) =
        serde_json::json!({"prompt": "wait", "session": "s_cancelled_by_mcp"})
    else {
        unreachable!()
    };
    let params = CallToolRequestParams::new("run").with_arguments(arguments);
    // Dropping the call cancels the request (notifications/cancelled).
    tokio::select! {
        _ = client.call_tool(params) => panic!("the held run answered"),
        () = model.wait_for_requests(1) => {}
    }
    let cancelled = async {
        loop {
            let (_, history, _) = home
                .ryvos(&["history", "s_cancelled_by_mcp", "--json"])
                .await;
            if history.contains("\"cancelled\"") {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(common::home::WAIT, cancelled)
        .await
        .expect("the run was cancelled");
    gate.open();
    client.cancel().await.unwrap();
    home.shutdown(daemon).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_speaking_2026_07_28_is_called_without_a_session() {
    // Ryvos's own MCP server speaks the stateless revision: discovered, not initialized.
    let model = ScriptedModelServer::start([
        Reply::tool_calls(&[("c1", "ryvos__sessions", "{}")]),
        Reply::text(&["listed"]),
    ])
    .await;
    let (_its_home, table) = ryvos_as_a_server(&model);
    let home = Home::new(&model, &table);
    let (code, stdout, stderr) = home.ryvos(&["run", "--json", "list the sessions"]).await;
    assert_eq!(code, 0, "{stderr}");
    let ended = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["type"] == "ToolEnd" && e["call_id"] == "c1")
        .expect("the call ended");
    assert_eq!(ended["is_error"], false, "{ended}");
}
