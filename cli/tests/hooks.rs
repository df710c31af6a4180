//! Hooks through the real binaries: scripts written to Claude Code's documented contract (a
//! `rm -rf` blocker, a formatter, a prompt logger, a context injector, an auto-approver of
//! read-only commands, a Stop hook that sends the run back once) run unchanged under `ryvosd`
//! and decide what they decide there; a workspace's own hooks run only while a person trusts
//! its file as it is, and the model cannot write it; a hook is confined as the model's commands
//! are and stopped at its timeout; an HTTP hook answers as a command does and is never
//! redirected; a park, a compaction and a Director's steps are told to theirs.

mod common;

use common::cli::json_lines as events;
use common::confined::{asking, bash_call, results};
use common::home::Home;
use ryvos_protocol::hook::HookEvent;
use ryvos_testkit::{Reply, ScriptedModelServer};
use serde_json::{json, Value};
use std::path::Path;

/// Claude Code's examples, as a user would have them.
const BLOCK_RM: &str = r#"
import json, sys
data = json.load(sys.stdin)
if data.get("tool_name") != "Bash":
    sys.exit(0)
command = data.get("tool_input", {}).get("command", "")
if "rm -rf" in command:
    print("Blocked: rm -rf is not allowed here; remove files one by one", file=sys.stderr)
    sys.exit(2)
sys.exit(0)
"#;

const FORMAT: &str = r#"
import json, sys
data = json.load(sys.stdin)
path = data["tool_input"]["file_path"]
with open(path) as f:
    text = f.read()
with open(path, "w") as f:
    f.write(text.replace("\t", "    "))
"#;

const LOG_PROMPT: &str = r#"
import json, os, sys
data = json.load(sys.stdin)
with open(os.path.join(os.environ["CLAUDE_PROJECT_DIR"], "prompts.log"), "a") as f:
    f.write(data["session_id"] + " " + data["prompt"] + "\n")
if "password" in data["prompt"]:
    print(json.dumps({"decision": "block", "reason": "Prompts may not hold passwords."}))
"#;

const APPROVE_READ_ONLY: &str = r#"
import json, sys
data = json.load(sys.stdin)
command = data.get("tool_input", {}).get("command", "")
if command.split()[0] in ("ls", "cat", "git", "pwd"):
    print(json.dumps({"hookSpecificOutput": {
        "hookEventName": "PermissionRequest",
        "decision": {"behavior": "allow"}}}))
"#;

const STOP_ONCE: &str = r#"
import json, sys
data = json.load(sys.stdin)
if data.get("stop_hook_active"):
    sys.exit(0)
print(json.dumps({"decision": "block", "reason": "Run the tests first."}))
"#;

fn write_scripts(dir: &Path) {
    for (name, text) in [
        ("block_rm.py", BLOCK_RM),
        ("format.py", FORMAT),
        ("log_prompt.py", LOG_PROMPT),
        ("approve_read_only.py", APPROVE_READ_ONLY),
        ("stop_once.py", STOP_ONCE),
    ] {
        std::fs::write(dir.join(name), text).unwrap();
    }
    std::fs::write(
        dir.join("context.sh"),
        "echo 'The deploy freeze lasts until Monday.'\n",
    )
    .unwrap();
}

fn requests_text(server: &ScriptedModelServer) -> Vec<String> {
    server.requests().iter().map(Value::to_string).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_code_hook_scripts_run_unchanged_through_the_daemon() {
    let scripts = tempfile::tempdir().unwrap();
    write_scripts(scripts.path());
    let dir = scripts.path().display();
    let write = json!({"path": "app.py", "content": "def f():\n\treturn 1\n"}).to_string();
    let server = ScriptedModelServer::start([
        asking(&[
            bash_call("rm1", "rm -rf build"),
            ("w1".into(), "write".into(), write),
            bash_call("ls1", "ls"),
            bash_call("touch1", "touch made.txt"),
        ]),
        Reply::text(&["All done."]),
        Reply::text(&["Tests pass. Done."]),
    ])
    .await;
    let hooks = format!(
        r#"
[[hooks.SessionStart]]
command = "sh {dir}/context.sh"
[[hooks.UserPromptSubmit]]
command = "python3 {dir}/log_prompt.py"
[[hooks.PreToolUse]]
matcher = "Bash"
command = "python3 {dir}/block_rm.py"
[[hooks.PostToolUse]]
matcher = "Write|Edit"
command = "python3 {dir}/format.py"
[[hooks.PermissionRequest]]
matcher = "Bash"
command = "python3 {dir}/approve_read_only.py"
[[hooks.Stop]]
command = "python3 {dir}/stop_once.py"
[[hooks.SessionEnd]]
command = "cat >> \"$CLAUDE_PROJECT_DIR/ends.jsonl\"; echo >> \"$CLAUDE_PROJECT_DIR/ends.jsonl\""
"#
    );
    // Writes run; commands are asked about, and nobody answers what the hooks leave.
    let policy = "t2 = \"allow\"";
    let extra = format!("[security]\napproval_timeout_secs = 2\n{hooks}");
    let home = Home::with_sections(&server, "", policy, &extra);
    let _daemon = home.daemon().await;
    let (code, stdout, stderr) = home
        .ryvos(&["run", "--json", "--session", "h1", "tidy the project"])
        .await;
    assert_eq!(code, 0, "{stderr}\n{stdout}");
    let events = events(&stdout);
    let results = results(&events);
    let workspace = home.workspace.path();

    // PreToolUse, exit 2: the call is denied with the script's stderr.
    let (is_error, output) = &results["rm1"];
    assert!(*is_error, "{output}");
    assert!(
        output.starts_with("denied: a PreToolUse hook refused this call: Blocked: rm -rf"),
        "{output}"
    );
    // PostToolUse on Write: the formatter rewrote the file the model wrote.
    assert!(!results["w1"].0, "{:?}", results["w1"]);
    let app = std::fs::read_to_string(workspace.join("app.py")).unwrap();
    assert_eq!(app, "def f():\n    return 1\n");
    // PermissionRequest: `ls` is approved in the person's place, `touch` is left to a person
    // (nobody answered).
    assert!(!results["ls1"].0, "{:?}", results["ls1"]);
    let decided_by = |call: &str| {
        events
            .iter()
            .find(|e| e["type"] == "SecurityDecision" && e["call_id"] == call)
            .map(|e| e["decided_by"].as_str().unwrap().to_owned())
    };
    assert_eq!(decided_by("ls1").as_deref(), Some("hook"));
    assert_eq!(decided_by("touch1").as_deref(), Some("unanswered"));
    assert!(!workspace.join("made.txt").exists());
    // UserPromptSubmit: the logger saw the prompt with the session's id.
    let log = std::fs::read_to_string(workspace.join("prompts.log")).unwrap();
    assert_eq!(log, "h1 tidy the project\n");
    // SessionStart: its output is in the system prompt of every request.
    let requests = requests_text(&server);
    assert!(requests[0].contains("The deploy freeze lasts until Monday."));
    // Stop: sent back once with its reason, then let go.
    assert_eq!(requests.len(), 3, "{requests:?}");
    assert!(requests[2].contains("Run the tests first."));
    let complete = events.iter().find(|e| e["type"] == "RunComplete").unwrap();
    assert_eq!(complete["output"], "Tests pass. Done.");
    let verdicts: Vec<(&str, &str)> = (events.iter())
        .filter(|e| e["type"] == "HookDecision")
        .map(|e| (e["event"].as_str().unwrap(), e["verdict"].as_str().unwrap()))
        .collect();
    for expected in [
        ("SessionStart", "context"),
        ("PreToolUse", "deny"),
        ("PermissionRequest", "allow"),
        ("Stop", "block"),
    ] {
        assert!(verdicts.contains(&expected), "{expected:?} in {verdicts:?}");
    }
    // Every decision is in the audit: the calls' with their gate records, the rest by event.
    let (code, history, stderr) = home.ryvos(&["history", "h1", "--json"]).await;
    assert_eq!(code, 0, "{stderr}");
    let history: Value = serde_json::from_str(&history).unwrap();
    let audit = history["audit"].as_array().unwrap();
    let hooked = |call: &str, tool: &str| {
        audit.iter().any(|r| {
            r["call_id"] == call && r["tool"] == tool && !r["hooks"].as_array().unwrap().is_empty()
        })
    };
    assert!(hooked("rm1", "bash") && hooked("ls1", "bash"), "{audit:?}");
    assert!(
        hooked("", "Stop") && hooked("", "SessionStart"),
        "{audit:?}"
    );
    // SessionEnd: told how the run ended.
    let ends = std::fs::read_to_string(workspace.join("ends.jsonl")).unwrap();
    let end: Value = serde_json::from_str(ends.lines().next().unwrap()).unwrap();
    assert_eq!(end["hook_event_name"], "SessionEnd");
    assert_eq!(end["status"], "completed");

    // A prompt the logger refuses ends the run `blocked`, the prompt never stored.
    let (code, stdout, _) = home
        .ryvos(&["run", "--json", "--session", "h1", "my password is hunter2"])
        .await;
    assert_ne!(code, 0);
    let events = common::cli::json_lines(&stdout);
    let complete = events.iter().find(|e| e["type"] == "RunComplete").unwrap();
    assert_eq!(complete["status"], "blocked", "{complete}");
    let (_, history, _) = home.ryvos(&["history", "h1", "--json"]).await;
    assert!(
        !history.contains("hunter2"),
        "the refused prompt was stored"
    );
    assert_eq!(server.requests().len(), 3, "the model was not asked");
}

/// A workspace's hooks file, as a repository would bring it: a hook that counts its runs.
const PROJECT_HOOKS: &str =
    "[[hooks.SessionStart]]\ncommand = \"echo ran >> \\\"$CLAUDE_PROJECT_DIR/hook-runs.txt\\\"\"\n";

fn hook_runs(workspace: &Path) -> usize {
    std::fs::read_to_string(workspace.join("hook-runs.txt"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workspace_s_hooks_run_only_while_trusted_and_the_model_cannot_write_them() {
    let planted = "mkdir -p .ryvos && printf '[[hooks.SessionStart]]\\ncommand = \"touch pwned\"\\n' > .ryvos/hooks.toml";
    let write_hooks = json!({"path": ".ryvos/hooks.toml", "content": "[[hooks.Stop]]\ncommand = \"touch pwned\"\n"}).to_string();
    let server = ScriptedModelServer::start([
        // Before the workspace has hooks: the model makes some.
        asking(&[bash_call("plant", planted)]),
        Reply::text(&["planted"]),
        Reply::text(&["untrusted"]),
        Reply::text(&["trusted"]),
        // Once it has: the model tries to change them.
        asking(&[
            ("write".into(), "write".into(), write_hooks),
            bash_call("append", "echo '# more' >> .ryvos/hooks.toml"),
        ]),
        Reply::text(&["changed"]),
        Reply::text(&["after"]),
    ])
    .await;
    let everything = common::confined::EVERYTHING_ALLOWED;
    let home = Home::with_sections(&server, "", everything, "");
    let workspace = home.workspace.path().to_path_buf();
    let _daemon = home.daemon().await;
    let run = |prompt: &'static str| {
        let home = &home;
        async move {
            let (code, stdout, stderr) = home.ryvos(&["run", "--json", prompt]).await;
            assert_eq!(code, 0, "{prompt}: {stderr}");
            events(&stdout)
        }
    };

    let planting = run("plant").await;
    let (is_error, output) = &results(&planting)["plant"];
    assert!(!is_error, "{output}");
    assert!(output.contains("it was moved to"), "{output}");
    assert!(!workspace.join(".ryvos").exists(), "a command's hooks stay");

    std::fs::create_dir(workspace.join(".ryvos")).unwrap();
    std::fs::write(workspace.join(".ryvos/hooks.toml"), PROJECT_HOOKS).unwrap();
    let untrusted = run("untrusted").await;
    assert_eq!(hook_runs(&workspace), 0, "an untrusted hook ran");
    let warned = |events: &[Value], what: &str| {
        events
            .iter()
            .any(|e| e["type"] == "Warning" && e["message"].as_str().unwrap().contains(what))
    };
    assert!(warned(&untrusted, "is not trusted"), "{untrusted:?}");
    let (code, listed, _) = home.ryvos(&["hooks", "list"]).await;
    assert_eq!(code, 0);
    assert!(listed.contains("not trusted"), "{listed}");

    let (code, trusted, stderr) = home.ryvos(&["hooks", "trust"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(trusted.contains("SessionStart"), "{trusted}");
    run("trusted").await;
    assert_eq!(hook_runs(&workspace), 1, "a trusted hook runs");

    // The model cannot change them: the file tools refuse, commands find them read-only.
    let changing = run("change them").await;
    let results = results(&changing);
    assert!(results["write"].1.starts_with("denied:"), "{results:?}");
    assert!(results["append"].0, "{:?}", results["append"]);
    assert_eq!(
        std::fs::read_to_string(workspace.join(".ryvos/hooks.toml")).unwrap(),
        PROJECT_HOOKS
    );
    assert_eq!(hook_runs(&workspace), 2);

    // A person changes the file: untrusted again until trusted again.
    let changed = format!("{PROJECT_HOOKS}# changed\n");
    std::fs::write(workspace.join(".ryvos/hooks.toml"), changed).unwrap();
    let (code, listed, _) = home.ryvos(&["hooks", "list", "--json"]).await;
    assert_eq!(code, 0);
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed["project"]["state"], "changed", "{listed}");
    let after = run("after the change").await;
    assert!(warned(&after, "changed since it was trusted"), "{after:?}");
    assert_eq!(hook_runs(&workspace), 2, "a changed file's hooks ran");
    assert!(!workspace.join("pwned").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hook_is_confined_as_commands_are_and_stopped_at_its_timeout() {
    let user_home = tempfile::tempdir().unwrap();
    let h = user_home.path();
    std::fs::create_dir_all(h.join(".ssh")).unwrap();
    std::fs::write(h.join(".ssh/id_ed25519"), "SSH-PRIVATE-KEY-5H").unwrap();
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let port = tcp.local_addr().unwrap().port();
    let server = ScriptedModelServer::start([
        asking(&[bash_call("b1", "echo hello")]),
        Reply::text(&["Done."]),
    ])
    .await;
    // The prompt's hook tries to read the key and reach the listener, and says what it got
    // (its stdout is context for the model); the hook after the call hangs.
    let hooks = format!(
        r#"
[[hooks.UserPromptSubmit]]
command = "cat ~/.ssh/id_ed25519 2>&1; python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2)' 2>/dev/null && echo CONNECTED; echo tried"
[[hooks.PostToolUse]]
command = "sleep 30"
timeout_secs = 1
"#
    );
    let everything = common::confined::EVERYTHING_ALLOWED;
    let home = Home::with_sections(&server, "", everything, &hooks);
    let mut daemon = home.command(env!("CARGO_BIN_EXE_ryvosd"));
    daemon.env("HOME", h);
    let _daemon = home.daemon_from(daemon).await;
    let (code, stdout, stderr) = home.ryvos(&["run", "--json", "say hello"]).await;
    assert_eq!(code, 0, "{stderr}");
    let events = events(&stdout);
    let first = server.requests()[0].to_string();
    assert!(first.contains("tried"), "the hook's context: {first}");
    assert!(!first.contains("SSH-PRIVATE-KEY-5H"), "a hook read the key");
    assert!(!first.contains("CONNECTED"), "a hook connected");
    assert!(tcp.accept().is_err(), "a connection arrived");
    // The hook after the call hung, was killed at 1 s, and the run went on.
    assert!(!results(&events)["b1"].0);
    let killed = events.iter().any(|e| {
        e["type"] == "HookDecision"
            && e["event"] == "PostToolUse"
            && e["verdict"] == "failed"
            && e["reason"]
                .as_str()
                .unwrap()
                .contains("did not finish within 1s")
    });
    assert!(killed, "{events:?}");
    let complete = events.iter().find(|e| e["type"] == "RunComplete").unwrap();
    assert_eq!(complete["status"], "completed");
}

/// A server on the loopback that answers every request with `answer` (a whole HTTP response)
/// and keeps the bodies it was sent.
async fn answering(answer: String) -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let bodies: std::sync::Arc<std::sync::Mutex<Vec<String>>> = Default::default();
    let kept = bodies.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            // The headers, then as much body as they say.
            while let Ok(n) = stream.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                request.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&request).into_owned();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let length = (head.lines())
                        .find_map(|l| {
                            l.to_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    if body.len() >= length {
                        kept.lock().unwrap().push(body.to_owned());
                        break;
                    }
                }
            }
            stream.write_all(answer.as_bytes()).await.ok();
            stream.shutdown().await.ok();
        }
    });
    (port, bodies)
}

fn http_answer(status: &str, headers: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{headers}connection: close\r\n\r\n{body}",
        body.len()
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn an_http_hook_answers_as_a_command_does_and_is_never_redirected() {
    let deny = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"not from this address"}}"#;
    let (deciding, asked) = answering(http_answer("200 OK", "", deny)).await;
    let (elsewhere, reached) = answering(http_answer("200 OK", "", "{}")).await;
    let moved = format!("location: http://127.0.0.1:{elsewhere}/\r\n");
    let (redirecting, _) = answering(http_answer("302 Found", &moved, "")).await;
    let server = ScriptedModelServer::start([
        asking(&[
            bash_call("b1", "echo hi"),
            (
                "r1".into(),
                "read".into(),
                json!({"path": "a.txt"}).to_string(),
            ),
        ]),
        Reply::text(&["Done."]),
    ])
    .await;
    let hooks = format!(
        r#"
[[hooks.PreToolUse]]
matcher = "Bash"
url = "http://127.0.0.1:{deciding}/pre"
[[hooks.PostToolUseFailure]]
url = "http://localhost:{redirecting}/post"
"#
    );
    let everything = common::confined::EVERYTHING_ALLOWED;
    let home = Home::with_sections(&server, "", everything, &hooks);
    let _daemon = home.daemon().await;
    let (code, stdout, stderr) = home.ryvos(&["run", "--json", "go"]).await;
    assert_eq!(code, 0, "{stderr}");
    let events = events(&stdout);
    let results = results(&events);
    let (is_error, output) = &results["b1"];
    assert!(
        *is_error && output.contains("not from this address"),
        "{output}"
    );
    let sent: Value = serde_json::from_str(&asked.lock().unwrap()[0]).unwrap();
    assert_eq!(sent["hook_event_name"], "PreToolUse");
    assert_eq!(sent["tool_input"]["command"], "echo hi");
    // The read of a missing file failed; its hook's redirect was not followed.
    assert!(results["r1"].0);
    let failed = events.iter().any(|e| {
        e["type"] == "HookDecision"
            && e["event"] == "PostToolUseFailure"
            && e["verdict"] == "failed"
            && e["reason"].as_str().unwrap().contains("302")
    });
    assert!(failed, "{events:?}");
    assert!(
        reached.lock().unwrap().is_empty(),
        "a redirect was followed"
    );

    // An address neither on the loopback nor allowed keeps the daemon from starting.
    let far = "[[hooks.Stop]]\nurl = \"http://169.254.169.254/latest\"\n";
    let refused = Home::with_sections(&server, "", everything, far);
    let output = tokio::time::timeout(
        common::home::WAIT,
        refused.command(env!("CARGO_BIN_EXE_ryvosd")).output(),
    )
    .await
    .unwrap()
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("allowed_domains"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_that_parks_tells_its_hooks_why_and_then_that_it_ended() {
    let server = ScriptedModelServer::start(common::budget::two_appends()).await;
    let tell = |event: &str| {
        format!(
            "[[hooks.{event}]]\ncommand = 'cat >> \"$CLAUDE_PROJECT_DIR/told.jsonl\"; echo >> \"$CLAUDE_PROJECT_DIR/told.jsonl\"'\n"
        )
    };
    let extra = format!(
        "{}{}{}",
        common::budget::PRICED,
        tell("RunParked"),
        tell("SessionEnd")
    );
    let home = Home::new(&server, &extra);
    // In-process: the run parks at its budget and the command exits.
    let (_, stdout, stderr) = home.ryvos(&["run", "--json", "write", "the", "log"]).await;
    let events = events(&stdout);
    assert!(events.iter().any(|e| e["type"] == "RunParked"), "{stderr}");
    let told = std::fs::read_to_string(home.workspace.path().join("told.jsonl")).unwrap();
    let told: Vec<Value> = (told.lines())
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<&str> = (told.iter())
        .map(|t| t["hook_event_name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["RunParked", "SessionEnd"], "{told:?}");
    assert_eq!(told[0]["reason"], "budget_run");
    assert!(told[0]["message"]
        .as_str()
        .unwrap()
        .contains("ryvos continue"));
    assert_eq!(told[1]["status"], "parked");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compaction_is_told_to_its_hooks_before_and_after() {
    let router: ryvos_testkit::Router = std::sync::Arc::new(|request: &Value| {
        let asks = request["messages"][0]["content"].as_str()?;
        asks.starts_with("You summarize")
            .then(|| Reply::text(&["Pages were read."]))
    });
    let script = Reply::reads_then(30, "page", "All read.");
    let server = ScriptedModelServer::start_routed(script, Some(router)).await;
    let tell = |event: &str| {
        format!(
            "[[hooks.{event}]]\nmatcher = \"auto\"\ncommand = 'cat >> \"$CLAUDE_PROJECT_DIR/told-{event}.jsonl\"; echo >> \"$CLAUDE_PROJECT_DIR/told-{event}.jsonl\"'\n"
        )
    };
    let extra = format!(
        "[agent]\nmax_context_tokens = 3000\nmax_turns = 100\n{}{}",
        tell("PreCompact"),
        tell("PostCompact")
    );
    let home = Home::new(&server, &extra);
    let workspace = home.workspace.path().to_path_buf();
    for i in 0..30 {
        let text = format!("page {i}: {}", "the quick brown fox jumps ".repeat(20));
        std::fs::write(workspace.join(format!("page{i}.txt")), text).unwrap();
    }
    let dir = workspace.to_str().unwrap();
    let (code, out, err) = home
        .ryvos(&["run", "--json", "--workspace", dir, "read every page"])
        .await;
    assert_eq!(code, 0, "{err}");
    let compactions = events(&out)
        .iter()
        .filter(|e| e["type"] == "ContextPruned")
        .count();
    assert!(compactions > 0, "it was compacted: {out}");
    for event in ["PreCompact", "PostCompact"] {
        let told = std::fs::read_to_string(workspace.join(format!("told-{event}.jsonl")))
            .unwrap_or_default();
        let told: Vec<Value> = (told.lines())
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(told.len(), compactions, "{event}: {told:?}");
        assert!(told
            .iter()
            .all(|t| t["trigger"] == "auto" && t["hook_event_name"] == event));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_director_s_steps_are_its_hooks_subagents() {
    let router: ryvos_testkit::Router = std::sync::Arc::new(|request: &Value| {
        let prompt = common::asked(request);
        let text = if common::is_judge(request) {
            r#"{"verdict": "accept", "reason": "the step is done", "criteria": []}"#
        } else if prompt.starts_with("[Director] Plan how") {
            r#"{"steps": [{"id": "a", "goal": "count the apples"}]}"#
        } else if prompt.starts_with("[Director] You carry out step 'a'") {
            "3 apples"
        } else if prompt.starts_with("[Director] Every step of the plan is done") {
            "There are 3 apples."
        } else {
            return None;
        };
        Some(Reply::text(&[text]))
    });
    let tell = |event: HookEvent| {
        let line =
            "cat >> \"$CLAUDE_PROJECT_DIR/told.jsonl\"; echo >> \"$CLAUDE_PROJECT_DIR/told.jsonl\"";
        let spec = ryvos::config::HookSpec {
            matcher: "director_step".into(),
            command: line.into(),
            ..Default::default()
        };
        (event, vec![spec])
    };
    let h = common::Harness::start_routed(Vec::new(), router, |c| {
        c.hooks = [
            tell(HookEvent::SubagentStart),
            tell(HookEvent::SubagentStop),
        ]
        .into_iter()
        .collect();
    })
    .await;
    let request = h.request("how many apples are there?").director();
    let (_, outcome) = h.run(request).await;
    assert_eq!(
        outcome.status,
        ryvos::RunStatus::Completed,
        "{:?}",
        outcome.reason
    );
    let told = std::fs::read_to_string(h.workspace.path().join("told.jsonl")).unwrap();
    let told: Vec<Value> = (told.lines())
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<&str> = (told.iter())
        .map(|t| t["hook_event_name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["SubagentStart", "SubagentStop"], "{told:?}");
    assert!(told
        .iter()
        .all(|t| t["agent_type"] == "director_step" && t["agent_id"].is_string()));
    assert!(told[0]["task"]
        .as_str()
        .unwrap()
        .contains("count the apples"));
    assert_eq!(told[1]["last_assistant_message"], "3 apples");
}
