//! The A2A door on `ryvosd`'s HTTP listener, driven by the official Python SDK (a2a-sdk) as
//! another agent would: the card, a message answered with its completed task, the task read and
//! listed, a task waiting for approval (input required) cancelled, streamed tasks answered
//! `approve` and `deny: …` on the task, a finished task subscribed to, and refusals without a
//! token and to a read-only token's message. And what a person gets when the door cannot open.

mod common;

use common::console::login_link;
use common::home::{Home, WAIT};
use ryvos_testkit::{Reply, ScriptedModelServer};
use serde_json::Value;

/// A home whose daemon serves the console and the A2A door, its tasks in its workspace; the
/// default policy, under which `write`'s edits are allowed and `bash` asks.
fn a2a_home(server: &ScriptedModelServer) -> Home {
    let home = Home::with_sections(server, "", "t2 = \"ask\"", "");
    let workspace = home.workspace.path().display().to_string();
    let extra = format!(
        "\n[http]\nlisten = \"127.0.0.1:0\"\n[a2a]\nworkspace = \"{workspace}\"\nname = \"Tester\"\n"
    );
    let config = home.path().join("config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&extra);
    std::fs::write(config, text).unwrap();
    home
}

/// `ryvos token create NAME --scope SCOPE`'s token.
async fn token(home: &Home, name: &str, scope: &str) -> String {
    let (code, out, err) = home
        .ryvos(&["token", "create", name, "--scope", scope])
        .await;
    assert_eq!(code, 0, "{err}");
    out.trim().to_owned()
}

/// What the caller `fixture` (a Python script of tests/fixtures) saw of the daemon at
/// `origin`, given an operate and a read token.
async fn caller(home: &Home, python: &std::path::Path, fixture: &str, origin: &str) -> Value {
    let operate = token(home, "caller", "operate").await;
    let read = token(home, "watcher", "read").await;
    let script = format!("{}/tests/fixtures/{fixture}", env!("CARGO_MANIFEST_DIR"));
    let mut client = home.command(python);
    client.arg(script).args([origin, &operate, &read]);
    let ran = tokio::time::timeout(WAIT * 2, client.output())
        .await
        .unwrap()
        .unwrap();
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(ran.status.success(), "{stderr}");
    serde_json::from_slice(&ran.stdout).expect("the client's report")
}

#[tokio::test(flavor = "multi_thread")]
async fn another_agent_hands_ryvos_work_over_a2a_through_the_official_python_sdk() {
    let Some(python) = common::python::python() else {
        return;
    };
    let model = ScriptedModelServer::start([
        Reply::text(&["the ", "answer"]),
        Reply::tool_calls(&[("w1", "write", r#"{"path": "a.txt", "content": "one"}"#)]),
        Reply::tool_calls(&[("w2", "write", r#"{"path": "b.txt", "content": "two"}"#)]),
        Reply::text(&["wrote b"]),
        Reply::tool_calls(&[("w3", "write", r#"{"path": "c.txt", "content": "three"}"#)]),
        Reply::text(&["left c alone"]),
    ])
    .await;
    let home = a2a_home(&model);
    let daemon = home.daemon().await;
    let (origin, _) = login_link(&home).await;
    let seen = caller(&home, &python, "a2a_client.py", &origin).await;

    let card = &seen["card"];
    assert_eq!(card["name"], "Tester", "{seen}");
    assert_eq!(card["url"], format!("{origin}/a2a"), "{seen}");
    assert_eq!(card["binding"], "JSONRPC", "{seen}");
    assert_eq!(seen["first"]["state"], "TASK_STATE_COMPLETED", "{seen}");
    assert_eq!(seen["first"]["answer"], "the answer", "{seen}");
    assert!(
        seen["first"]["context"].as_str().unwrap().starts_with("s_"),
        "{seen}"
    );
    assert_eq!(seen["got"], "TASK_STATE_COMPLETED", "{seen}");
    let first = seen["first_id"].as_str().unwrap();
    assert!(
        seen["listed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == first),
        "{seen}"
    );
    assert_eq!(seen["waiting"], "TASK_STATE_INPUT_REQUIRED", "{seen}");
    assert_eq!(seen["canceled"], "TASK_STATE_CANCELED", "{seen}");
    assert!(
        !home.workspace.path().join("a.txt").exists(),
        "the cancelled write never ran"
    );
    // Streamed: the task, working, then waiting for the write's approval, where it closes.
    let kinds: Vec<&str> = (seen["streamed"].as_array().unwrap().iter())
        .map(|k| k.as_str().unwrap())
        .collect();
    assert_eq!(kinds.first(), Some(&"task"), "{seen}");
    assert!(
        kinds.contains(&"status_update:TASK_STATE_WORKING"),
        "{seen}"
    );
    assert_eq!(
        kinds.last(),
        Some(&"status_update:TASK_STATE_INPUT_REQUIRED"),
        "{seen}"
    );
    // Answered on the task: the same task completes, the write done.
    let approved = &seen["approved"];
    assert_eq!(approved["same_task"], true, "{seen}");
    assert_eq!(approved["state"], "TASK_STATE_COMPLETED", "{seen}");
    assert_eq!(approved["answer"], "wrote b", "{seen}");
    assert_eq!(
        std::fs::read_to_string(home.workspace.path().join("b.txt")).unwrap(),
        "two"
    );
    assert_eq!(seen["denied"], "TASK_STATE_COMPLETED", "{seen}");
    assert!(
        !home.workspace.path().join("c.txt").exists(),
        "the denied write never ran"
    );
    assert_eq!(
        seen["subscribed_to_finished"],
        serde_json::json!(["task"]),
        "{seen}"
    );
    assert_eq!(seen["without_token"], 401, "{seen}");
    assert_eq!(seen["read_token_sends"], 403, "{seen}");
    assert_eq!(seen["read_token_reads"], "TASK_STATE_COMPLETED", "{seen}");

    // What was done is Ryvos's as any run is: the task's run is in its session's history.
    let session = seen["first"]["context"].as_str().unwrap();
    let (code, history, _) = home.ryvos(&["history", session]).await;
    assert_eq!(code, 0);
    assert!(
        history.contains("say it") && history.contains("the answer"),
        "{history}"
    );
    home.shutdown(daemon).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_a2a_door_without_its_listener_or_workspace_stops_the_daemon_at_start() {
    let model = ScriptedModelServer::start([]).await;
    for (extra, says) in [
        ("[a2a]\nworkspace = \"/tmp\"\n", "[http] listen"),
        (
            "[http]\nlisten = \"127.0.0.1:0\"\n[a2a]\nworkspace = \"relative/dir\"\n",
            "[a2a] workspace",
        ),
    ] {
        let home = Home::new(&model, extra);
        let ran = home
            .command(env!("CARGO_BIN_EXE_ryvosd"))
            .output()
            .await
            .unwrap();
        assert_eq!(ran.status.code(), Some(2), "{extra}");
        let stderr = String::from_utf8_lossy(&ran.stderr);
        assert!(stderr.contains(says), "{stderr}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_a2a_door_takes_a_bearer_token_speaking_a2a_1_0_and_no_console_cookie() {
    use common::console::{client, log_in};
    let model = ScriptedModelServer::start([]).await;
    // A console without [a2a] serves no A2A door: neither the card nor the endpoint.
    let console_only = common::console::console_home(&model);
    let daemon = console_only.daemon().await;
    let (origin, _) = login_link(&console_only).await;
    let operator = token(&console_only, "caller", "operate").await;
    let card = client()
        .get(format!("{origin}/.well-known/agent-card.json"))
        .send()
        .await;
    assert_eq!(card.unwrap().status(), 404);
    let rpc = client()
        .post(format!("{origin}/a2a"))
        .bearer_auth(&operator);
    let list = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}});
    let rpc = rpc.header("A2A-Version", "1.0").json(&list).send().await;
    assert_eq!(rpc.unwrap().status(), 404);
    console_only.shutdown(daemon).await;

    let home = a2a_home(&model);
    let daemon = home.daemon().await;
    let (origin, code) = login_link(&home).await;
    let cookie = log_in(&origin, &code).await.unwrap();
    let token = token(&home, "caller", "operate").await;
    let post = || client().post(format!("{origin}/a2a")).json(&list);

    // A browser's console session is not an A2A caller, even from the console's own origin.
    let as_browser = post()
        .header("Cookie", &cookie)
        .header("Origin", &origin)
        .header("A2A-Version", "1.0")
        .send()
        .await
        .unwrap();
    assert_eq!(as_browser.status(), 401);

    // Without A2A-Version (read as 0.3): refused as a version the agent does not speak.
    let unversioned = post().bearer_auth(&token).send().await.unwrap();
    let answer: Value = unversioned.json().await.unwrap();
    assert_eq!(answer["error"]["code"], -32009, "{answer}");

    let listed = post()
        .bearer_auth(&token)
        .header("A2A-Version", "1.0")
        .send()
        .await
        .unwrap();
    let answer: Value = listed.json().await.unwrap();
    assert_eq!(answer["result"]["tasks"], serde_json::json!([]), "{answer}");

    // A push target inside the daemon's network is refused, naming the knob, before anything
    // starts: no task is begun.
    let inside = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {
        "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "say it"}]},
        "configuration": {"taskPushNotificationConfig": {"url": "http://127.0.0.1:9/hook"}}
    }});
    let sent = (client().post(format!("{origin}/a2a")).bearer_auth(&token))
        .header("A2A-Version", "1.0")
        .json(&inside)
        .send()
        .await
        .unwrap();
    let answer: Value = sent.json().await.unwrap();
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let said = answer["error"]["message"].as_str().unwrap();
    assert!(said.contains("[a2a] allow_private_push_urls"), "{said}");
    let listed = post()
        .bearer_auth(&token)
        .header("A2A-Version", "1.0")
        .send()
        .await
        .unwrap();
    let answer: Value = listed.json().await.unwrap();
    assert_eq!(answer["result"]["tasks"], serde_json::json!([]), "{answer}");
    home.shutdown(daemon).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_pushes_its_updates_to_the_callers_webhook_through_the_official_python_sdk() {
    let Some(python) = common::python::python() else {
        return;
    };
    let model = ScriptedModelServer::start([
        Reply::tool_calls(&[("w1", "write", r#"{"path": "a.txt", "content": "one"}"#)]),
        Reply::text(&["wrote it"]),
    ])
    .await;
    let home = a2a_home(&model);
    // The caller's webhook listens on 127.0.0.1: this daemon's operator allows that.
    let config = home.path().join("config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    let text = text.replace(
        "name = \"Tester\"",
        "name = \"Tester\"\nallow_private_push_urls = true",
    );
    std::fs::write(&config, text).unwrap();
    let daemon = home.daemon().await;
    let (origin, _) = login_link(&home).await;
    let seen = caller(&home, &python, "a2a_push.py", &origin).await;

    assert_eq!(seen["capable"], true, "{seen}");
    assert_eq!(
        seen["made"],
        serde_json::json!({"id": "second", "task": true}),
        "{seen}"
    );
    assert_eq!(
        seen["listed"],
        serde_json::json!(["default", "second"]),
        "{seen}"
    );
    assert_eq!(seen["got"]["token"], "task-token", "{seen}");
    assert_eq!(seen["got"]["scheme"], "Bearer", "{seen}");
    assert_eq!(
        seen["after_delete"],
        serde_json::json!(["default"]),
        "{seen}"
    );
    assert_eq!(seen["read_token_lists"], 403, "{seen}");

    // Every push went to the first target, with its token and credentials, about this task;
    // the second target was deleted before the task went on, and was told nothing.
    let pushes = seen["pushes"].as_array().unwrap();
    for push in pushes {
        assert_eq!(push["path"], "/first", "{seen}");
        assert_eq!(push["token"], "task-token", "{seen}");
        assert_eq!(push["authorization"], "Bearer hook-secret", "{seen}");
        assert_eq!(push["same_task"], true, "{seen}");
    }
    // In order: waiting for approval, then the answer, then completed last.
    let told: Vec<String> = (pushes.iter())
        .map(|p| {
            format!(
                "{}:{}",
                p["kind"].as_str().unwrap(),
                p["state"].as_str().unwrap_or("")
            )
        })
        .collect();
    let at = |wanted: &str| told.iter().position(|t| t == wanted);
    let waited = at("statusUpdate:TASK_STATE_INPUT_REQUIRED").expect("told it waited");
    let answered = at("artifactUpdate:").expect("told its answer");
    assert!(waited < answered, "{told:?}");
    assert_eq!(
        told.last().unwrap(),
        "statusUpdate:TASK_STATE_COMPLETED",
        "{told:?}"
    );
    assert_eq!(
        std::fs::read_to_string(home.workspace.path().join("a.txt")).unwrap(),
        "one"
    );
    home.shutdown(daemon).await;
}
