//! `ryvos run`'s settings from the command line, through the real binaries: `--model`,
//! `--max-turns` and `-c` (checked like the file), `-q`, the prompt from stdin, and `${VAR}`
//! checked by the process that sends the key.

mod common;

use common::home::Home;
use ryvos_testkit::{Reply, ScriptedModelServer};
use std::process::Stdio;
use tokio::io::AsyncWriteExt;

#[tokio::test]
async fn model_and_max_turns_and_settings_apply_to_an_in_process_run() {
    let server = ScriptedModelServer::start([
        Reply::tool_calls(&[("c1", "glob", r#"{"pattern": "*"}"#)]),
        Reply::text(&["never asked"]),
    ])
    .await;
    let home = Home::new(&server, "");
    let (code, _, stderr) = home
        .ryvos(&[
            "run",
            "--model",
            "other-model",
            "--max-turns",
            "1",
            "-c",
            "agent.parallel_tools=false",
            "look",
        ])
        .await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("max_turns"), "{stderr}");
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "one turn only");
    assert_eq!(requests[0]["model"], "other-model");
}

#[tokio::test]
async fn a_bad_setting_is_refused_by_its_flag_before_anything_runs() {
    let server = ScriptedModelServer::start([]).await;
    let home = Home::new(&server, "");
    for (args, says) in [
        (
            vec!["-c", "agent.max_turns=0", "run", "x"],
            "agent.max_turns=0: agent.max_turns: must be at least 1",
        ),
        (vec!["-c", "agent.max_tunrs=3", "run", "x"], "max_tunrs"),
        (vec!["-c", "max_turns", "run", "x"], "KEY=VALUE"),
        (vec!["run", "--max-turns", "0", "x"], "must be at least 1"),
    ] {
        let (code, _, stderr) = home.ryvos(&args).await;
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert_eq!(
            stderr.lines().filter(|l| l.contains(says)).count(),
            1,
            "said once: {stderr}"
        );
    }
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn a_run_through_the_daemon_takes_its_model_and_limits_and_nothing_else() {
    let server = ScriptedModelServer::start([
        Reply::tool_calls(&[("c1", "glob", r#"{"pattern": "*"}"#)]),
        Reply::text(&["hi"]),
    ])
    .await;
    let home = Home::new(&server, "");
    let daemon = home.daemon().await;
    // A key only the daemon's config can set is refused, by name, before anything runs.
    let (code, _, stderr) = home
        .ryvos(&[
            "-c",
            "agent.parallel_tools=false",
            "run",
            "--model",
            "m2",
            "x",
        ])
        .await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("-c agent.parallel_tools"), "{stderr}");
    assert!(
        stderr.contains("model.model (--model)"),
        "the allowed keys are listed: {stderr}"
    );
    assert!(server.requests().is_empty());

    let (code, out, stderr) = home
        .ryvos(&[
            "run",
            "--json",
            "--model",
            "other-model",
            "--max-turns",
            "1",
            "look",
        ])
        .await;
    assert_eq!(code, 1, "{stderr}");
    assert!(out.contains("max_turns"), "{out}");
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "one turn only");
    assert_eq!(requests[0]["model"], "other-model");
    let session = first_session(&out);

    // The next run, without settings, goes on with the session's model (its limit is its
    // own); history says which each used.
    let (code, _, stderr) = home.ryvos(&["run", "--resume", &session, "and now?"]).await;
    assert_eq!(code, 0, "{stderr}");
    let requests = server.requests();
    assert_eq!(requests[1]["model"], "other-model");
    let (code, history, stderr) = home.ryvos(&["history", &session, "--json"]).await;
    assert_eq!(code, 0, "{stderr}");
    let history: serde_json::Value = serde_json::from_str(&history).unwrap();
    assert_eq!(history["runs"][0]["model"], "other-model");
    assert_eq!(history["runs"][1]["model"], requests[1]["model"]);
    home.shutdown(daemon).await;
}

/// The session id of the first event of `--json` output.
fn first_session(json_lines: &str) -> String {
    json_lines
        .lines()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .and_then(|e| e["session_id"].as_str().map(str::to_owned))
        .expect("a run's events name its session")
}

#[tokio::test]
async fn quiet_prints_only_the_final_answer() {
    let server = ScriptedModelServer::start([
        Reply::tool_calls(&[("c1", "glob", r#"{"pattern": "*"}"#)]),
        Reply::text(&["the ", "answer"]),
    ])
    .await;
    let home = Home::new(&server, "");
    let (code, stdout, stderr) = home.ryvos(&["run", "-q", "look"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "the answer\n");
    assert_eq!(stderr, "", "nothing but errors on stderr");
}

#[tokio::test]
async fn the_prompt_comes_from_stdin_when_it_is_dash_or_left_out() {
    for args in [&["run", "-q", "-"][..], &["run", "-q"][..]] {
        let server = ScriptedModelServer::start([Reply::text(&["ok"])]).await;
        let home = Home::new(&server, "");
        let mut child = home
            .command(env!("CARGO_BIN_EXE_ryvos"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(b"summarize this\nsecond line\n")
            .await
            .unwrap();
        drop(stdin);
        let out = tokio::time::timeout(common::cli::COMMAND_TIMEOUT, child.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert_eq!(
            common::asked(&server.requests()[0]),
            "summarize this\nsecond line"
        );
    }
}

#[tokio::test]
async fn an_unset_key_variable_is_checked_by_the_process_that_sends_the_key() {
    let server = ScriptedModelServer::start([Reply::text(&["hi"])]).await;
    let home = Home::with_model(&server, "", "");
    let config = home.path().join("config.toml");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("api_key = \"\"", "api_key = \"${RYVOS_TEST_DAEMON_KEY}\"");
    std::fs::write(&config, text).unwrap();

    // In-process, this process sends it: refused before the run, naming the variable.
    let (code, _, stderr) = home.ryvos(&["run", "hello"]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("RYVOS_TEST_DAEMON_KEY"), "{stderr}");
    // So does ryvosd without it, at start.
    let (code, _, stderr) =
        common::cli::output(&mut home.command(env!("CARGO_BIN_EXE_ryvosd"))).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("RYVOS_TEST_DAEMON_KEY"), "{stderr}");

    // A daemon that has it serves a client that does not.
    let mut daemon_command = home.command(env!("CARGO_BIN_EXE_ryvosd"));
    daemon_command.env("RYVOS_TEST_DAEMON_KEY", "k");
    let daemon = home.daemon_from(daemon_command).await;
    let (code, stdout, stderr) = home.ryvos(&["run", "hello"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("hi"), "{stdout}");
    assert_eq!(
        server.captured()[0].header("authorization"),
        Some("Bearer k")
    );
    home.shutdown(daemon).await;
}

/// A goal run given its own model through the daemon is judged by that model too, when
/// `[agent.judge] model` is left empty ("the run's"): the configured model is never asked.
#[tokio::test(flavor = "multi_thread")]
async fn a_runs_model_judges_its_goal() {
    let router: ryvos_testkit::Router = std::sync::Arc::new(|request: &serde_json::Value| {
        (request["model"] != "chosen").then(|| Reply::error(400, "the configured model was asked"))
    });
    let verdict = r#"{"verdict": "accept", "reason": "it is done", "criteria": [{"index": 1, "met": true, "reason": "done"}]}"#;
    let server = ScriptedModelServer::start_routed(
        [Reply::text(&["Done."]), Reply::text(&[verdict])],
        Some(router),
    )
    .await;
    let home = Home::new(&server, "");
    let daemon = home.daemon().await;
    let (code, stdout, stderr) = home
        .ryvos(&[
            "run",
            "--json",
            "--model",
            "chosen",
            "--goal",
            "finish it",
            "--criterion",
            "llm:the work is done",
            "finish",
        ])
        .await;
    assert_eq!(code, 0, "{stderr}\n{stdout}");
    assert!(stdout.contains(r#""verdict":"Accept""#), "{stdout}");
    let asked: Vec<String> = server
        .requests()
        .iter()
        .map(|r| r["model"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(asked, ["chosen", "chosen"]);
    home.shutdown(daemon).await;
}

/// A session resumed without `--model` goes on with the model its latest run was given, through
/// the daemon and in-process alike; `--model` on the resume changes it.
#[tokio::test(flavor = "multi_thread")]
async fn a_resumed_session_keeps_the_model_it_was_given() {
    let server = ScriptedModelServer::start([
        Reply::text(&["one"]),
        Reply::text(&["two"]),
        Reply::text(&["three"]),
        Reply::text(&["four"]),
    ])
    .await;
    let home = Home::new(&server, "");
    let session = |stdout: &str| {
        let last = stdout.lines().last().unwrap_or_default();
        let event: serde_json::Value = serde_json::from_str(last).unwrap();
        event["session_id"].as_str().unwrap().to_owned()
    };
    let (code, stdout, stderr) = home
        .ryvos(&["run", "--json", "--model", "chosen", "first"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let id = session(&stdout);
    // In-process, then through a daemon.
    let (code, _, stderr) = home
        .ryvos(&["run", "--json", "--resume", &id, "second"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let daemon = home.daemon().await;
    let (code, _, stderr) = home
        .ryvos(&["run", "--json", "--resume", &id, "third"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let (code, _, stderr) = home
        .ryvos(&[
            "run", "--json", "--resume", &id, "--model", "other", "fourth",
        ])
        .await;
    assert_eq!(code, 0, "{stderr}");
    home.shutdown(daemon).await;
    let asked: Vec<String> = server
        .requests()
        .iter()
        .map(|r| r["model"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(asked, ["chosen", "chosen", "chosen", "other"]);
}
