//! The command line's rough edges, through the real binaries: a reader that goes away, the
//! daemon's own name and help, an empty prompt, plain logs off a terminal, and `history`
//! showing the audit the manual promises.

mod common;

use common::home::Home;
use ryvos_testkit::{Reply, ScriptedModelServer};
use std::process::Stdio;
use tokio::io::{AsyncBufReadExt, BufReader};

/// Runs `ryvos run --json PROMPT…` to completion: its session and what it said on stderr.
async fn completed_run(home: &Home, prompt: &[&str]) -> (String, String) {
    let args: Vec<&str> = ["run", "--json"].iter().chain(prompt).copied().collect();
    let (code, stdout, stderr) = home.ryvos(&args).await;
    assert_eq!(code, 0, "{stderr}");
    let session = common::cli::json_lines(&stdout)
        .pop()
        .and_then(|e| e["session_id"].as_str().map(str::to_owned))
        .expect("the run's last event names its session");
    (session, stderr)
}

/// Runs `ryvos ARGS` with its stdout a pipe whose reader is already gone: (exit code, stderr).
async fn into_a_closed_pipe(home: &Home, args: &[&str]) -> (i32, String) {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut ends = [0; 2];
    // SAFETY: pipe2 fills `ends` with two new descriptors, each owned once below.
    assert_eq!(
        unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC) },
        0
    );
    // SAFETY: both descriptors were just created and are owned nowhere else.
    let (reader, writer) =
        unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) };
    drop(reader);
    let out = home
        .command(env!("CARGO_BIN_EXE_ryvos"))
        .args(args)
        .stdout(writer)
        .stderr(Stdio::piped())
        .output();
    let out = tokio::time::timeout(common::home::WAIT, out)
        .await
        .expect("the command ends")
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reader_that_goes_away_ends_the_read_commands_quietly() {
    let server = ScriptedModelServer::start([Reply::text(&["hello"])]).await;
    let home = Home::new(&server, "");
    let daemon = home.daemon().await;
    let (code, _, stderr) = home.ryvos(&["run", "say", "hello"]).await;
    assert_eq!(code, 0, "{stderr}");
    for command in [&["sessions"][..], &["status"], &["cost"], &["approvals"]] {
        let (code, stderr) = into_a_closed_pipe(&home, command).await;
        assert_eq!(code, 0, "{command:?}: {stderr}");
        assert!(stderr.is_empty(), "{command:?} says nothing: {stderr}");
    }
    home.shutdown(daemon).await;
}

#[tokio::test]
async fn ryvosd_names_itself_and_has_its_own_help() {
    let server = ScriptedModelServer::start([]).await;
    let home = Home::new(&server, "");
    let ryvosd = |arg: &'static str| {
        let mut command = home.command(env!("CARGO_BIN_EXE_ryvosd"));
        command.arg(arg);
        command
    };
    let (code, version, _) = common::cli::output(&mut ryvosd("--version")).await;
    assert_eq!(code, 0);
    assert!(version.starts_with("ryvosd "), "{version}");
    let (_, daemon_help, _) = common::cli::output(&mut ryvosd("--help")).await;
    let (_, cli_help, _) = home.ryvos(&["--help"]).await;
    assert!(daemon_help.contains("daemon"), "{daemon_help}");
    assert_ne!(
        daemon_help.lines().next(),
        cli_help.lines().next(),
        "each binary says what it is"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_empty_prompt_is_bad_usage_and_creates_nothing() {
    let server = ScriptedModelServer::start([]).await;
    let home = Home::new(&server, "");
    // In-process (no daemon), then through one.
    let (code, _, stderr) = home.ryvos(&["run", " "]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("the prompt is empty"), "{stderr}");
    let daemon = home.daemon().await;
    let (code, _, stderr) = home.ryvos(&["run", ""]).await;
    assert_eq!(code, 2, "{stderr}");
    let (code, sessions, _) = home.ryvos(&["sessions"]).await;
    assert_eq!(code, 0);
    assert!(sessions.contains("no sessions yet"), "{sessions}");
    // Errors name what they are about.
    let (code, _, stderr) = home.ryvos(&["history", "s_nope"]).await;
    assert_ne!(code, 0);
    assert!(stderr.contains("no session s_nope"), "{stderr}");
    let (code, _, stderr) = home
        .ryvos(&["run", "--workspace", "/no/such/dir", "hello"])
        .await;
    assert_eq!(code, 2);
    assert!(stderr.contains("/no/such/dir"), "{stderr}");
    assert!(server.requests().is_empty());
    home.shutdown(daemon).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workspace_whose_path_is_not_utf8_is_refused_saying_so() {
    use std::os::unix::ffi::OsStrExt;
    let server = ScriptedModelServer::start([]).await;
    let home = Home::new(&server, "");
    let odd = home
        .workspace
        .path()
        .join(std::ffi::OsStr::from_bytes(b"ws-\xff"));
    std::fs::create_dir(&odd).unwrap();
    let ran = home
        .command(env!("CARGO_BIN_EXE_ryvos"))
        .args(["run", "--workspace"])
        .arg(&odd)
        .arg("hello")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert_eq!(ran.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("not valid UTF-8"), "{stderr}");
    assert!(server.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn ryvosd_logs_plain_text_off_a_terminal_with_a_line_per_run_start_and_end() {
    let server = ScriptedModelServer::start([Reply::text(&["hello"])]).await;
    let home = Home::new(&server, "");
    let mut daemon = home
        .command(env!("CARGO_BIN_EXE_ryvosd"))
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (lines, mut arrived) = tokio::sync::mpsc::unbounded_channel();
    let mut log = BufReader::new(daemon.stderr.take().unwrap()).lines();
    tokio::spawn(async move {
        while let Ok(Some(line)) = log.next_line().await {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let mut until = async |wanted: &str| {
        let found = async {
            while let Some(line) = arrived.recv().await {
                let hit = line.contains(wanted);
                seen.push(line);
                if hit {
                    return;
                }
            }
            panic!("ryvosd's log ended before {wanted:?}");
        };
        tokio::time::timeout(common::home::WAIT, found)
            .await
            .expect("the line came");
    };
    until("listening on").await;
    let (code, _, stderr) = home.ryvos(&["run", "say", "hello"]).await;
    assert_eq!(code, 0, "{stderr}");
    until("run ended").await;
    let ended = seen.last().unwrap().clone();
    assert!(
        ended.contains("INFO") && ended.contains("status=completed") && ended.contains("session="),
        "{ended}"
    );
    assert!(seen.iter().any(|l| l.contains("run started")), "{seen:?}");
    assert!(
        seen.iter().all(|l| !l.contains('\u{1b}')),
        "no colour codes: {seen:?}"
    );
    home.shutdown(daemon).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn history_shows_the_security_gates_decisions() {
    let server = ScriptedModelServer::start([
        Reply::tool_calls(&[("c1", "write", r#"{"path": "a.txt", "content": "1"}"#)]),
        Reply::text(&["Wrote it."]),
    ])
    .await;
    let home = Home::new(&server, "");
    let daemon = home.daemon().await;
    let (session, _) = completed_run(&home, &["write", "it"]).await;
    let (code, history, _) = home.ryvos(&["history", &session]).await;
    assert_eq!(code, 0);
    assert!(
        history.contains("audit c1 write (T2) allowed by policy"),
        "{history}"
    );
    home.shutdown(daemon).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_says_how_to_continue_and_continue_takes_up_the_workspaces_latest_session() {
    let server = ScriptedModelServer::start([
        Reply::text(&["first answer"]),
        Reply::text(&["second answer"]),
        Reply::text(&["third answer"]),
    ])
    .await;
    let home = Home::new(&server, "");
    // Nothing to continue yet; a missing session is not created by resuming it (in-process).
    let (code, _, stderr) = home.ryvos(&["run", "--continue", "go", "on"]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("no session has run in"), "{stderr}");
    let (code, _, stderr) = home.ryvos(&["run", "--resume", "s_missing", "hi"]).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("no session s_missing to resume"),
        "{stderr}"
    );

    // In-process: the end of the run names the session and the command that continues it.
    let (session, stderr) = completed_run(&home, &["first"]).await;
    assert!(
        stderr.contains(&format!("ryvos run --resume {session}")),
        "{stderr}"
    );
    let (code, stdout, stderr) = home.ryvos(&["run", "--json", "--continue", "second"]).await;
    assert_eq!(code, 0, "{stderr}");
    let continued = common::cli::json_lines(&stdout).pop().unwrap();
    assert_eq!(continued["session_id"], session.as_str());
    assert_eq!(continued["output"], "second answer");

    // Through the daemon, the same.
    let daemon = home.daemon().await;
    let (code, stdout, stderr) = home.ryvos(&["run", "--json", "--continue", "third"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        common::cli::json_lines(&stdout).pop().unwrap()["session_id"],
        session.as_str()
    );
    let last = server.requests().pop().unwrap();
    let prompts: Vec<String> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(prompts, ["first", "second", "third"]);
    let (_, sessions, _) = home.ryvos(&["sessions"]).await;
    assert!(!sessions.contains("s_missing"), "{sessions}");
    home.shutdown(daemon).await;
}

#[tokio::test]
async fn both_binaries_refuse_a_bad_value_at_load_with_its_file_line_and_key() {
    let server = ScriptedModelServer::start([]).await;
    let home = Home::new(&server, "");
    let bad = home.path().join("bad.toml");
    std::fs::write(&bad, "[model]\nbase_url = \"ftp://example.com/v1\"\n").unwrap();
    let bad = bad.display().to_string();
    let (code, _, stderr) = home.ryvos(&["--config", &bad, "run", "hello"]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("bad.toml:2: model.base_url:") && stderr.contains("ftp URL"),
        "{stderr}"
    );
    let mut ryvosd = home.command(env!("CARGO_BIN_EXE_ryvosd"));
    ryvosd.args(["--config", &bad]);
    let (code, _, stderr) = common::cli::output(&mut ryvosd).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("bad.toml:2: model.base_url:"), "{stderr}");
    assert!(server.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn another_config_is_refused_while_a_daemon_serves_the_home_on_its_own() {
    let server = ScriptedModelServer::start([Reply::text(&["hello"])]).await;
    let home = Home::new(&server, "");
    let own = home.path().join("config.toml");
    let other = home.path().join("other.toml");
    std::fs::copy(&own, &other).unwrap();
    let daemon = home.daemon().await;
    let (code, _, stderr) = home
        .ryvos(&["--config", &other.display().to_string(), "run", "hello"])
        .await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("this daemon read") && stderr.contains("other.toml"),
        "{stderr}"
    );
    assert!(server.requests().is_empty(), "nothing ran");
    // The daemon's own file is fine.
    let (code, _, stderr) = home
        .ryvos(&["--config", &own.display().to_string(), "run", "hello"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    home.shutdown(daemon).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_read_commands_print_json_with_json() {
    let server = ScriptedModelServer::start([Reply::text(&["hello"])]).await;
    let home = Home::new(&server, "");
    let daemon = home.daemon().await;
    let (session, _) = completed_run(&home, &["say", "hello"]).await;
    let json = |stdout: &str| -> serde_json::Value {
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
    };
    let (code, out, _) = home.ryvos(&["status", "--json"]).await;
    assert_eq!(code, 0);
    assert_eq!(json(&out)["store"], "redb");
    let (_, out, _) = home.ryvos(&["sessions", "--json"]).await;
    assert_eq!(json(&out)[0]["session_id"], session.as_str());
    let (_, out, _) = home.ryvos(&["history", &session, "--json"]).await;
    assert_eq!(json(&out)["runs"][0]["status"], "completed");
    let (_, out, _) = home.ryvos(&["cost", "--json"]).await;
    assert!(json(&out).is_object(), "{out}");
    let (_, out, _) = home.ryvos(&["approvals", "--json"]).await;
    assert_eq!(json(&out), serde_json::json!([]));
    home.shutdown(daemon).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn ryvosd_tells_systemd_it_is_ready_once_its_socket_answers() {
    let server = ScriptedModelServer::start([]).await;
    let home = Home::new(&server, "");
    // The service manager's side: a datagram socket named in NOTIFY_SOCKET.
    let manager_dir = tempfile::tempdir().unwrap();
    let manager_path = manager_dir.path().join("notify.sock");
    let manager = tokio::net::UnixDatagram::bind(&manager_path).unwrap();
    let mut daemon = home
        .command(env!("CARGO_BIN_EXE_ryvosd"))
        .env("NOTIFY_SOCKET", &manager_path)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut message = vec![0u8; 256];
    let n = tokio::time::timeout(common::home::WAIT, manager.recv(&mut message))
        .await
        .expect("ryvosd said it is ready")
        .unwrap();
    let message = String::from_utf8_lossy(&message[..n]).into_owned();
    assert!(message.contains("READY=1"), "{message}");
    // Ready means the socket answers.
    let (code, _, stderr) = home.ryvos(&["status"]).await;
    assert_eq!(code, 0, "{stderr}");
    daemon.start_kill().unwrap();
    daemon.wait().await.unwrap();
}

#[tokio::test]
async fn in_process_off_a_terminal_an_approval_is_not_offered_to_ryvos_approve() {
    // Bash asks; nobody can answer, so it is denied at once.
    let (_server, home) = Home::asking_bash("echo hi", "could not run it").await;
    let (_, _, stderr) = home.ryvos(&["run", "run", "it"]).await;
    assert!(stderr.contains("needs approval"), "{stderr}");
    assert!(stderr.contains("nobody can answer"), "{stderr}");
    assert!(
        !stderr.contains("ryvos approve"),
        "no other terminal can reach an in-process run: {stderr}"
    );
}

#[tokio::test]
async fn the_run_log_has_one_line_per_turn_with_its_own_model_tokens_and_tools() {
    let server = ScriptedModelServer::start([
        Reply::tool_calls(&[("c1", "glob", r#"{"pattern": "*"}"#)]),
        Reply::tool_calls(&[("c2", "write", r#"{"path": "a.txt", "content": "1"}"#)]),
        Reply::tool_calls(&[("c3", "read", r#"{"path": "a.txt"}"#)]),
        Reply::text(&["done"]),
    ])
    .await;
    let home = Home::new(&server, "");
    let (session, _) = completed_run(&home, &["four", "turns"]).await;
    let (code, logs, stderr) = home.ryvos(&["logs", &session]).await;
    assert_eq!(code, 0, "{stderr}");
    let lines = common::cli::json_lines(&logs);
    let turns: Vec<&serde_json::Value> = lines.iter().filter(|l| l["level"] == 2).collect();
    assert_eq!(turns.len(), 4, "{logs}");
    let tools: Vec<&serde_json::Value> = turns.iter().map(|t| &t["tools"]).collect();
    assert_eq!(
        tools,
        [
            &serde_json::json!(["glob"]),
            &serde_json::json!(["write"]),
            &serde_json::json!(["read"]),
            &serde_json::json!([]),
        ]
    );
    for turn in &turns {
        assert_eq!(turn["model"], "scripted", "{turn}");
        assert!(turn["input_tokens"].as_u64().unwrap() > 0, "{turn}");
    }
    assert_eq!(
        lines.last().unwrap()["level"],
        1,
        "the run's line comes last: {logs}"
    );
}

/// The long flags (`--name`) in `text`.
fn flags(text: &str) -> std::collections::BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn the_manuals_synopsis_matches_the_commands_and_flags_of_ryvos_help() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/cli.md")).unwrap();
    let block = readme
        .split("```")
        .find(|b| b.contains("ryvosd [--config PATH]"))
        .expect("docs/cli.md has a synopsis block");
    // The synopsis, command by command: each `ryvos` line with its continuation lines.
    let mut synopsis: Vec<String> = Vec::new();
    for line in block.lines() {
        if line.starts_with("ryvos ") {
            synopsis.push(line.to_owned());
        } else if line.starts_with(' ') {
            if let Some(last) = synopsis.last_mut() {
                last.push_str(line);
            }
        }
    }
    // Subcommands: the first word of each alternative separated by a `|` outside brackets.
    let mut documented: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for line in &synopsis {
        let mut depth = 0i32;
        let mut alternatives = vec![String::new()];
        for c in line["ryvos ".len()..].chars() {
            match c {
                '[' => depth += 1,
                ']' => depth -= 1,
                '|' if depth == 0 => {
                    alternatives.push(String::new());
                    continue;
                }
                _ => {}
            }
            alternatives.last_mut().unwrap().push(c);
        }
        for alternative in &alternatives {
            let mut words = alternative.split_whitespace();
            let Some(name) = words.next() else { continue };
            let entry = documented.entry(name.to_owned()).or_default();
            entry.push(alternative.to_owned());
        }
    }
    // The flags every command takes are written once.
    let global = flags(
        block
            .lines()
            .find(|l| l.starts_with("every command:"))
            .expect("the synopsis names the flags every command takes"),
    );
    assert!(global.contains("--config") && global.contains("--set"));
    // `[--json]` after the last alternative of a line applies to the line's read commands.
    let json_line = synopsis.iter().find(|l| l.ends_with("[--json]")).unwrap();
    let server = ScriptedModelServer::start([]).await;
    let home = Home::new(&server, "");
    let (_, help, _) = home.ryvos(&["--help"]).await;
    let commands: std::collections::BTreeSet<String> = help
        .split("Commands:")
        .nth(1)
        .unwrap()
        .split("Options:")
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect();
    let in_readme: std::collections::BTreeSet<String> = documented.keys().cloned().collect();
    assert_eq!(
        in_readme, commands,
        "the synopsis in docs/cli.md lists every command, and only those"
    );
    for command in &commands {
        // A command's flags, and those of the subcommands its alternatives name
        // (`hooks list [--workspace DIR]`).
        let mut actual = std::collections::BTreeSet::new();
        let mut asked = vec![vec![command.as_str()]];
        for alternative in &documented[command] {
            let sub = alternative.split_whitespace().nth(1);
            if let Some(sub) = sub.filter(|w| w.chars().all(|c| c.is_ascii_lowercase())) {
                asked.push(vec![command.as_str(), sub]);
            }
        }
        for args in asked {
            let args: Vec<&str> = args.into_iter().chain(["--help"]).collect();
            let (_, help, _) = home.ryvos(&args).await;
            // The flags are the options the help lists, not those its prose mentions.
            let options = help.split("Options:").nth(1).unwrap_or_default();
            actual.extend(
                options
                    .lines()
                    .filter(|l| l.trim_start().starts_with('-'))
                    .filter_map(|l| l.split_whitespace().find(|w| w.starts_with("--")))
                    .map(|w| w.trim_end_matches(',').to_owned()),
            );
        }
        actual.retain(|f| f != "--help" && !global.contains(f));
        let mut written: std::collections::BTreeSet<String> =
            documented[command].iter().flat_map(|a| flags(a)).collect();
        if json_line.contains(&format!(" {command} "))
            || json_line.contains(&format!("| {command} ["))
        {
            written.insert("--json".to_owned());
        }
        assert_eq!(
            written, actual,
            "the flags of `ryvos {command}` in docs/cli.md"
        );
    }
}

#[tokio::test]
async fn the_read_commands_read_the_store_when_no_daemon_runs() {
    let server = ScriptedModelServer::start([Reply::text(&["hello"])]).await;
    let home = Home::new(&server, "");
    let (session, _) = completed_run(&home, &["say", "hello"]).await;
    let (code, sessions, stderr) = home.ryvos(&["sessions"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(sessions.contains(&session), "{sessions}");
    let (code, history, stderr) = home.ryvos(&["history", &session]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        history.contains("user: say hello") && history.contains("completed"),
        "{history}"
    );
    let (code, _, stderr) = home.ryvos(&["history", "s_nope"]).await;
    assert_eq!(code, 1);
    assert!(stderr.contains("no session s_nope"), "{stderr}");
    let (code, cost, stderr) = home.ryvos(&["cost", "--json"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(cost.trim_start().starts_with('{'), "{cost}");
    let (code, approvals, stderr) = home.ryvos(&["approvals"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(approvals.contains("no tool call is waiting"), "{approvals}");
    // status still means "is a daemon running".
    let (code, _, _) = home.ryvos(&["status"]).await;
    assert_eq!(code, 3);
}
