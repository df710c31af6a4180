//! Effects across a kill, end to end through `ryvosd`: an MCP server built with the official
//! SDK whose `charge` tool says it is idempotent sees the same idempotency key before and
//! after the daemon is killed inside the call; a shell command cut off by a kill is in doubt,
//! listed by `ryvos approvals` as soon as the daemon is back, not run again until a person
//! approves, and then runs again with the same `RYVOS_IDEMPOTENCY_KEY`.

mod common;

use common::home::{Home, WAIT};
use ryvos_testkit::{Reply, ScriptedModelServer};
use serde_json::Value;
use std::path::Path;

/// The lines of `path` (none while it does not exist).
fn lines(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().map(str::to_owned).collect()
}

/// Waits until `path` has `n` lines.
async fn until_lines(path: &Path, n: usize) {
    let waited = async {
        while lines(path).len() < n {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(WAIT, waited)
        .await
        .unwrap_or_else(|_| panic!("{} never had {n} lines", path.display()));
}

/// Starts a run of `prompt` through the daemon, waits until its call has begun (`begun` has a
/// line), and kills the daemon with SIGKILL; the run's session.
async fn killed_mid_call(home: &Home, prompt: &str, begun: &Path) -> String {
    let mut daemon = home.daemon().await;
    let mut client = home.follow(&["run", "--json", prompt]);
    let session = client
        .until(|e| e["session_id"].as_str().map(str::to_owned))
        .await;
    until_lines(begun, 1).await;
    daemon.start_kill().unwrap();
    tokio::time::timeout(WAIT, daemon.wait())
        .await
        .expect("the daemon dies")
        .unwrap();
    client.rest().await;
    session
}

/// The actions `CallRecovered` events of `events` tell.
fn recovered(events: &[Value]) -> Vec<String> {
    (events.iter())
        .filter(|e| e["type"] == "CallRecovered")
        .map(|e| e["action"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idempotent_mcp_call_cut_off_by_a_kill_runs_again_with_the_same_key() {
    if common::mcp::server_entry("server-everything").is_none() {
        return;
    }
    let model = ScriptedModelServer::start([
        Reply::tool_calls(&[("p1", "keyed__charge", "{}")]),
        Reply::text(&["charged once"]),
    ])
    .await;
    let scratch = tempfile::tempdir().unwrap();
    let (keys, go) = (scratch.path().join("keys"), scratch.path().join("go"));
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/keyed_mcp_server.cjs"
    );
    let server = format!(
        "\n[mcp.servers.keyed]\ncommand = \"node\"\nargs = [\"{fixture}\"]\nenv = {{ NODE_PATH = \
         \"{}\", KEYS_FILE = \"{}\", GO_FILE = \"{}\" }}\n",
        common::mcp::node_modules().display(),
        keys.display(),
        go.display()
    );
    let home = Home::new(&model, &server);
    let session = killed_mid_call(&home, "charge it", &keys).await;

    std::fs::write(&go, "").unwrap();
    let daemon = home.daemon().await;
    let resumed = home.follow(&["run", "--json", "--resume", &session, "go on"]);
    let ended = resumed.rest().await;
    assert_eq!(ended.code, Some(0), "{}", ended.stderr);
    assert_eq!(recovered(&ended.events), ["run_again"]);
    let seen = lines(&keys);
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0], seen[1], "the same key before and after the kill");
    assert!(seen[0].starts_with(&format!("{session}:")), "{seen:?}");
    home.shutdown(daemon).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_shell_command_cut_off_by_a_kill_waits_in_doubt_and_runs_again_with_its_key() {
    let command = r#"{"command": "echo $RYVOS_IDEMPOTENCY_KEY >> keys.txt; while [ ! -f go ]; do sleep 0.05; done"}"#;
    let model = ScriptedModelServer::start([
        Reply::tool_calls(&[("b1", "bash", command)]),
        Reply::text(&["ran it again"]),
    ])
    .await;
    // A hook asked about the call before it started: a crash after does not ask it again.
    let hook =
        "[[hooks.PreToolUse]]\ncommand = 'echo asked >> \"$CLAUDE_PROJECT_DIR/asked.txt\"'\n";
    let home = Home::new(&model, hook);
    let workspace = home.workspace.path().to_owned();
    let keys = workspace.join("keys.txt");
    let session = killed_mid_call(&home, "append a key", &keys).await;

    // Listed as in doubt as soon as the daemon is back, before anyone resumes the session.
    let daemon = home.daemon().await;
    let listed = async {
        loop {
            let (_, out, _) = home.ryvos(&["approvals", "--json"]).await;
            let pending: Vec<Value> = serde_json::from_str(&out).unwrap_or_default();
            if let Some(asked) = pending.iter().find(|p| p["kind"] == "in_doubt") {
                return asked.clone();
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    };
    let asked = tokio::time::timeout(WAIT, listed)
        .await
        .expect("the call is listed in doubt");
    assert_eq!(asked["tool"], "bash");
    // With when and where it started: the daemon that was killed.
    assert!(asked["started_at_ms"].as_u64().unwrap() <= asked["asked_at_ms"].as_u64().unwrap());
    assert!(
        asked["started_on"].as_str().unwrap().starts_with("pid "),
        "{asked}"
    );
    let (_, listed, _) = home.ryvos(&["approvals"]).await;
    assert!(listed.contains("(started "), "{listed}");
    // Resumed, the session asks again under the same id, and waits: not run meanwhile.
    let mut resumed = home.follow(&["run", "--json", "--resume", &session, "go on"]);
    let mut before = Vec::new();
    let asked_again = resumed
        .until(|e| {
            before.push(e.clone());
            (e["type"] == "ApprovalRequested").then(|| e["request_id"].clone())
        })
        .await;
    assert_eq!(recovered(&before), ["in_doubt"]);
    assert_eq!(asked_again, asked["request_id"]);
    assert_eq!(
        lines(&keys).len(),
        1,
        "not run again before a person decides"
    );

    std::fs::write(workspace.join("go"), "").unwrap();
    let id = asked["request_id"].as_str().unwrap();
    let (code, _, err) = home.ryvos(&["approve", id]).await;
    assert_eq!(code, 0, "{err}");
    let ended = resumed.rest().await;
    assert_eq!(ended.code, Some(0), "{}", ended.stderr);
    let seen = lines(&keys);
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0], seen[1], "run again with the same key");
    assert!(seen[0].starts_with(&format!("{session}:")), "{seen:?}");
    assert_eq!(
        lines(&workspace.join("asked.txt")).len(),
        1,
        "the hook was asked again"
    );
    home.shutdown(daemon).await;
}
