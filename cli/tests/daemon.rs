//! ryvosd and ryvos end to end: the real binaries, a real socket, real redb, real HTTP to a
//! scripted model server; the tests that keep records run on redb and on a real PostgreSQL.

mod common;

use common::backend::Backend;
use common::cli::json_lines as events;
use common::home::{Ended, Home, WAIT};
use common::is_judge;
use rstest::rstest;
use ryvos_testkit::{Reply, ScriptedModelServer};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[rstest]
#[tokio::test(flavor = "multi_thread")]
async fn a_run_streams_its_events_as_json_through_the_daemon(
    #[values(Backend::Redb, Backend::Postgres)] backend: Backend,
) {
    if !backend.available() {
        return;
    }
    let server = ScriptedModelServer::start([
        Reply::tool_calls(&[("c1", "write", r#"{"path": "out.txt", "content": "hello"}"#)]),
        Reply::text(&["Wrote ", "it."]),
    ])
    .await;
    let home = Home::new(
        &server,
        "[budget.pricing_overrides]\nscripted = { input_per_1m = 1500, output_per_1m = 7500 }",
    )
    .on(backend);
    let mut daemon = home.daemon().await;
    let (code, stdout, stderr) = home.ryvos(&["run", "--json", "write", "a", "file"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        !stderr.contains("in-process"),
        "it used the daemon: {stderr}"
    );
    let events = events(&stdout);
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"RunStarted"));
    assert_eq!(types.last(), Some(&"RunComplete"));
    for t in ["ToolStart", "ToolEnd", "TextDelta", "CheckpointSaved"] {
        assert!(types.contains(&t), "{t} in {types:?}");
    }
    let last = events.last().unwrap();
    assert_eq!(last["status"], "completed");
    assert_eq!(last["output"], "Wrote it.");
    assert!(events
        .iter()
        .all(|e| e["session_id"] == last["session_id"] && e["run_id"] == last["run_id"]));
    assert_eq!(
        std::fs::read_to_string(home.workspace.path().join("out.txt")).unwrap(),
        "hello"
    );
    server.assert_no_orphans();

    let (code, out, _) = home.ryvos(&["status"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("ryvosd is running"));
    let kept_by = match backend {
        Backend::Redb => "store: redb",
        Backend::Postgres => "store: postgres",
    };
    assert!(out.contains(kept_by), "{out}");
    assert_eq!(
        home.path().join("ryvos.redb").exists(),
        backend == Backend::Redb,
        "only the embedded store has a file in the home"
    );
    let (code, out, _) = home
        .ryvos(&["history", last["session_id"].as_str().unwrap()])
        .await;
    assert_eq!(code, 0);
    assert!(
        out.contains("user: write a file") && out.contains("completed"),
        "{out}"
    );
    let (code, cost, _) = home.ryvos(&["cost"]).await;
    assert_eq!(code, 0);
    // The scripted model is priced in the config: 24 × 1500 + 10 × 7500 millionths of a cent.
    assert!(
        cost.contains("2 calls  24 in / 10 out tokens") && cost.contains("$0.0011"),
        "{cost}"
    );
    let (code, _, _) = home.ryvos(&["shutdown"]).await;
    assert_eq!(code, 0);
    let status = tokio::time::timeout(WAIT, daemon.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success());
    assert!(
        !home.socket().exists(),
        "the socket is removed on a clean stop"
    );
    let (code, _, _) = home.ryvos(&["status"]).await;
    assert_ne!(code, 0, "no daemon, status fails");
}

#[rstest]
#[tokio::test(flavor = "multi_thread")]
async fn forty_concurrent_runs_through_one_daemon_all_complete_in_their_own_sessions(
    #[values(Backend::Redb, Backend::Postgres)] backend: Backend,
) {
    if !backend.available() {
        return;
    }
    let server = ScriptedModelServer::start((0..40).map(|_| Reply::text(&["done"]))).await;
    let home = Home::new(&server, "").on(backend);
    let _daemon = home.daemon().await;
    let runs = (0..40).map(|i| {
        let prompt = format!("task {i}");
        let home = &home;
        async move { home.ryvos(&["run", "--json", &prompt]).await }
    });
    let results = futures_util::future::join_all(runs).await;
    let mut sessions = std::collections::HashSet::new();
    for (code, stdout, stderr) in results {
        assert_eq!(code, 0, "{stderr}");
        let last = events(&stdout).pop().unwrap();
        assert_eq!(last["status"], "completed");
        sessions.insert(last["session_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(sessions.len(), 40);
    server.assert_no_orphans();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_socket_is_private_and_bad_frames_do_not_stop_the_daemon() {
    let server = ScriptedModelServer::start([]).await;
    let home = Home::new(&server, "");
    let _daemon = home.daemon().await;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&home.socket()), 0o600);
    assert_eq!(mode(home.path()), 0o700);

    async fn exchange(socket: &Path, bytes: &[u8], close_write: bool) -> String {
        let mut s = tokio::net::UnixStream::connect(socket).await.unwrap();
        s.write_all(bytes).await.ok();
        if close_write {
            s.shutdown().await.ok();
        }
        let mut answer = String::new();
        tokio::time::timeout(WAIT, s.read_to_string(&mut answer))
            .await
            .expect("answered")
            .ok();
        answer
    }
    let garbage = exchange(&home.socket(), b"\x00\xffnot json at all\n", false).await;
    assert!(garbage.contains("bad_frame"), "{garbage}");
    let mut huge = vec![b'a'; 10 * 1024 * 1024];
    huge.push(b'\n');
    let too_long = exchange(&home.socket(), &huge, false).await;
    assert!(
        too_long.contains("bad_frame") && too_long.contains("longer than"),
        "{too_long}"
    );
    let half = exchange(&home.socket(), br#"{"id": 7, "method": "sta"#, true).await;
    assert!(half.contains("bad_frame"), "{half}");
    let unknown = exchange(
        &home.socket(),
        b"{\"id\": 8, \"method\": \"dance\"}\n",
        true,
    )
    .await;
    assert!(
        unknown.contains(r#""id":8"#) && unknown.contains("unknown_method"),
        "{unknown}"
    );

    let (code, out, _) = home.ryvos(&["status"]).await;
    assert_eq!(code, 0, "the daemon still answers");
    assert!(out.contains("ryvosd is running"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_config_with_a_wrong_type_is_refused_naming_the_key() {
    let server = ScriptedModelServer::start([]).await;
    let home = Home::new(&server, "\n[agent]\nmax_turns = \"lots\"\n");
    let out = home
        .command(env!("CARGO_BIN_EXE_ryvosd"))
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("agent.max_turns") && stderr.contains("config.toml:14"),
        "{stderr}"
    );
    assert!(!home.socket().exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_daemon_on_the_same_home_refuses_to_start() {
    let server = ScriptedModelServer::start([]).await;
    let home = Home::new(&server, "");
    let _first = home.daemon().await;
    let out = home
        .command(env!("CARGO_BIN_EXE_ryvosd"))
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("another ryvosd is already running"),
        "{stderr}"
    );
    let (code, _, _) = home.ryvos(&["status"]).await;
    assert_eq!(code, 0, "the first one is unharmed");
}

#[rstest]
#[tokio::test(flavor = "multi_thread")]
async fn after_kill_9_mid_run_the_client_fails_and_a_resume_sees_every_completed_turn_once(
    #[values(Backend::Redb, Backend::Postgres)] backend: Backend,
) {
    if !backend.available() {
        return;
    }
    let server = ScriptedModelServer::start([
        Reply::tool_calls(&[("t1", "write", r#"{"path": "a.txt", "content": "1"}"#)]),
        Reply::text(&["never arrives"]).delay(Duration::from_secs(120)),
        Reply::text(&["continuing"]),
    ])
    .await;
    let home = Home::new(&server, "").on(backend);
    let mut daemon = home.daemon().await;
    let mut run = home.follow(&["run", "--json", "first"]);
    let session = run
        .until(|event| {
            (event["type"] == "CheckpointSaved" && event["turn"] == 1)
                .then(|| event["session_id"].as_str().unwrap().to_owned())
        })
        .await;
    // The held answer is taken by the killed run, never by the resume.
    tokio::time::timeout(WAIT, server.wait_for_requests(2))
        .await
        .expect("the second request arrived");
    daemon.start_kill().unwrap(); // SIGKILL
    daemon.wait().await.unwrap();

    let Ended { code, stderr, .. } = run.rest().await;
    assert_eq!(code, Some(3));
    assert!(
        stderr.contains("lost ryvosd") && stderr.contains(&session),
        "{stderr}"
    );

    let _daemon = home.daemon().await; // replaces the stale socket
    let (code, stdout, stderr) = home
        .ryvos(&["run", "--json", "--resume", &session, "continue"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(events(&stdout).pop().unwrap()["output"], "continuing");
    let resumed = server.requests().pop().unwrap();
    let messages = resumed["messages"].as_array().unwrap();
    let summary: Vec<String> = messages
        .iter()
        .map(|m| {
            format!(
                "{}:{}",
                m["role"].as_str().unwrap(),
                m["content"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        &summary[1..],
        [
            "user:first",
            "assistant:",
            "tool:wrote 1 bytes to a.txt",
            "user:continue"
        ],
        "{summary:?}"
    );
    server.assert_no_orphans();
    let (_, history, _) = home.ryvos(&["history", &session]).await;
    // Alone on its store, the daemon that came back ended the killed run as it started, with
    // the turn it stored; where daemons share the store, the resume that took it up did.
    let ended = match backend {
        Backend::Redb => "interrupted (1 turns",
        Backend::Postgres => "failed",
    };
    assert!(
        history.contains(ended),
        "the killed run is recorded: {history}"
    );
}

#[rstest]
#[tokio::test(flavor = "multi_thread")]
async fn without_a_daemon_run_hosts_the_runtime_in_process_and_says_so(
    #[values(Backend::Redb, Backend::Postgres)] backend: Backend,
) {
    if !backend.available() {
        return;
    }
    let server = ScriptedModelServer::start([Reply::text(&["local answer"])]).await;
    let home = Home::new(&server, "").on(backend);
    let (code, stdout, stderr) = home.ryvos(&["run", "hello"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("running in-process"), "{stderr}");
    assert_eq!(stdout.trim(), "local answer");
}

#[rstest]
#[tokio::test(flavor = "multi_thread")]
async fn a_model_that_always_answers_503_fails_the_run_listing_every_attempt_and_the_daemon_serves_on(
    #[values(Backend::Redb, Backend::Postgres)] backend: Backend,
) {
    if !backend.available() {
        return;
    }
    let always_503: ryvos_testkit::Router = std::sync::Arc::new(|request: &Value| {
        let prompt = request["messages"][1]["content"]
            .as_str()
            .unwrap_or_default();
        prompt
            .contains("doomed")
            .then(|| Reply::error(503, "the model is overloaded"))
    });
    let server =
        ScriptedModelServer::start_routed([Reply::text(&["Still here."])], Some(always_503)).await;
    let home = Home::with_model(&server, "retry_base_ms = 10", "").on(backend);
    let _daemon = home.daemon().await;
    let (code, _, stderr) = home.ryvos(&["run", "a", "doomed", "task"]).await;
    assert_eq!(code, 1, "{stderr}");
    // max_retries = 3 means 4 attempts, failing the same way: told once.
    assert!(
        stderr.contains("4 attempts failed: scripted: the model server answered HTTP 503"),
        "{stderr}"
    );
    // Once as it first happened, once as the run's error: not per attempt, nor again at the
    // run's end.
    assert_eq!(stderr.matches("answered HTTP 503").count(), 2, "{stderr}");
    assert!(stderr.contains("failed the same way"), "{stderr}");
    assert!(stderr.contains("(the error above)"), "{stderr}");
    assert_eq!(server.requests().len(), 4);
    // The daemon goes on serving.
    let (code, stdout, stderr) = home.ryvos(&["run", "another", "task"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("Still here."), "{stdout}");
}

#[rstest]
#[tokio::test(flavor = "multi_thread")]
async fn a_director_run_killed_mid_plan_resumes_without_redoing_finished_steps(
    #[values(Backend::Redb, Backend::Postgres)] backend: Backend,
) {
    if !backend.available() {
        return;
    }
    let plan = r#"{"steps": [
        {"id": "a", "goal": "count the apples"},
        {"id": "b", "goal": "count the bananas"},
        {"id": "c", "goal": "add the counts", "depends_on": ["a", "b"]},
        {"id": "d", "goal": "write the report", "depends_on": ["c"]}
    ]}"#;
    let restarted = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let after_restart = restarted.clone();
    let never = ryvos_testkit::Gate::new();
    let router: ryvos_testkit::Router = std::sync::Arc::new(move |request: &Value| {
        let prompt = request["messages"]
            .as_array()?
            .iter()
            .rev()
            .find(|m| m["role"] == "user")?["content"]
            .as_str()?
            .to_owned();
        let step = prompt
            .strip_prefix("[Director] You carry out step '")
            .and_then(|rest| rest.split('\'').next());
        Some(match step {
            _ if is_judge(request) => {
                Reply::text(&[r#"{"verdict": "accept", "reason": "done", "criteria": []}"#])
            }
            _ if prompt.starts_with("[Director] Plan how") => Reply::text(&[plan]),
            Some("a") => Reply::text(&["3 apples"]),
            Some("b") => Reply::text(&["4 bananas"]),
            // Before the crash, step c never answers.
            Some("c") if !after_restart.load(std::sync::atomic::Ordering::SeqCst) => {
                Reply::text(&["never"]).held(&never)
            }
            Some("c") => Reply::text(&["7 fruits"]),
            Some(_) => Reply::text(&["The report: 7 fruits."]),
            None => Reply::text(&["There are 7 fruits."]),
        })
    });
    let server = ScriptedModelServer::start_routed([], Some(router)).await;
    let home = Home::new(&server, "").on(backend);
    let mut daemon = home.daemon().await;
    let mut run = home.follow(&["run", "--json", "--director", "how many fruits?"]);
    let session = run
        .until(|event| {
            (event["type"] == "DirectorStep" && event["step"] == "c")
                .then(|| event["session_id"].as_str().unwrap().to_owned())
        })
        .await;
    // Wait until step c's request is in: c is in flight.
    let c_asked = |requests: Vec<Value>| {
        requests
            .iter()
            .any(|r| r.to_string().contains("You carry out step 'c'") && !is_judge(r))
    };
    tokio::time::timeout(WAIT, async {
        let mut n = 1;
        while !c_asked(server.requests()) {
            server.wait_for_requests(n).await;
            n = server.requests().len() + 1;
        }
    })
    .await
    .unwrap();
    daemon.start_kill().unwrap(); // SIGKILL
    daemon.wait().await.unwrap();
    assert_eq!(run.rest().await.code, Some(3));

    restarted.store(true, std::sync::atomic::Ordering::SeqCst);
    let _daemon = home.daemon().await;
    let (code, stdout, stderr) = home
        .ryvos(&[
            "run",
            "--json",
            "--director",
            "--resume",
            &session,
            "how many fruits?",
        ])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let events = events(&stdout);
    assert_eq!(events.last().unwrap()["output"], "There are 7 fruits.");
    assert!(events
        .iter()
        .any(|e| e["type"] == "DirectorPlan" && e["resumed"] == true));
    let started: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "DirectorStep" && e["status"] == "started")
        .map(|e| e["step"].as_str().unwrap())
        .collect();
    assert_eq!(started, ["c", "d"], "finished steps are not run again");
    // Requests by what their last user message asks (the judge's quote the conversation).
    let asked = |what: &str| {
        server
            .requests()
            .iter()
            .filter(|r| !is_judge(r))
            .filter_map(|r| {
                r["messages"]
                    .as_array()?
                    .iter()
                    .rev()
                    .find(|m| m["role"] == "user")
                    .cloned()
            })
            .filter(|m| m["content"].as_str().unwrap_or_default().contains(what))
            .count()
    };
    assert_eq!(asked("step 'a'"), 1);
    assert_eq!(asked("step 'b'"), 1);
    assert_eq!(
        asked("[Director] Plan how"),
        1,
        "the plan is not asked for again"
    );
    server.assert_no_orphans();
}

#[rstest]
#[tokio::test(flavor = "multi_thread")]
async fn a_call_waiting_for_approval_runs_once_ryvos_approve_answers_from_another_terminal(
    #[values(Backend::Redb, Backend::Postgres)] backend: Backend,
) {
    if !backend.available() {
        return;
    }
    let server = ScriptedModelServer::start([
        Reply::tool_calls(&[("b1", "bash", r#"{"command": "echo approved > proof.txt"}"#)]),
        Reply::text(&["Done."]),
    ])
    .await;
    // The default policy: T3 (bash) asks.
    let home = Home::with_sections(&server, "", "", "").on(backend);
    let _daemon = home.daemon().await;
    let mut run = home.follow(&["run", "--json", "make the proof"]);
    let request_id = run
        .until(|event| {
            (event["type"] == "ApprovalRequested").then(|| {
                assert_eq!(event["tier"], "T3");
                event["request_id"].as_str().unwrap().to_owned()
            })
        })
        .await;
    assert!(
        !home.workspace.path().join("proof.txt").exists(),
        "nothing ran before the answer"
    );
    let (code, listed, _) = home.ryvos(&["approvals"]).await;
    assert_eq!(code, 0);
    assert!(
        listed.contains(&request_id) && listed.contains("bash"),
        "{listed}"
    );
    let (code, _, stderr) = home.ryvos(&["approve", &request_id]).await;
    assert_eq!(code, 0, "{stderr}");
    // Answering twice is refused: the request is gone.
    let (code, _, stderr) = home.ryvos(&["approve", &request_id]).await;
    assert_ne!(code, 0);
    assert!(stderr.contains("no approval request"), "{stderr}");
    let Ended {
        events: rest, code, ..
    } = run.rest().await;
    assert_eq!(code, Some(0));
    assert!(rest.iter().any(|e| e["type"] == "ApprovalResolved"
        && e["approved"] == true
        && e["by"] == "ryvos approve"));
    assert_eq!(
        std::fs::read_to_string(home.workspace.path().join("proof.txt")).unwrap(),
        "approved\n"
    );
}

#[rstest]
#[tokio::test(flavor = "multi_thread")]
async fn an_interrupted_run_keeps_its_waiting_call_across_a_restart_and_resumes_with_it(
    #[values(Backend::Redb, Backend::Postgres)] backend: Backend,
) {
    if !backend.available() {
        return;
    }
    let server = ScriptedModelServer::start([
        Reply::tool_calls(&[
            ("a", "write", r#"{"path": "a.txt", "content": "first"}"#),
            ("b", "bash", r#"{"command": "echo second > b.txt"}"#),
        ]),
        Reply::text(&["Both done."]),
    ])
    .await;
    // The default policy (T3 asks), with `write` auto-approved.
    let home = Home::with_sections(&server, "", "", "[security]\nauto_approve = [\"write\"]\n")
        .on(backend);
    let mut daemon = home.daemon().await;
    let mut run = home.follow(&["run", "--json", "make", "two", "files"]);
    let (request_id, session) = run
        .until(|event| {
            (event["type"] == "ApprovalRequested").then(|| {
                assert_eq!(event["call_id"], "b");
                (
                    event["request_id"].as_str().unwrap().to_owned(),
                    event["session_id"].as_str().unwrap().to_owned(),
                )
            })
        })
        .await;
    let (code, _, stderr) = home.ryvos(&["interrupt", &session]).await;
    assert_eq!(code, 0, "{stderr}");
    let Ended {
        events: rest, code, ..
    } = run.rest().await;
    assert_eq!(code, Some(1), "an interrupted run is not completed");
    let interrupt = rest.iter().find(|e| e["type"] == "Interrupt").unwrap();
    assert_eq!(interrupt["pending_calls"], serde_json::json!(["b"]));
    assert_eq!(rest.last().unwrap()["status"], "interrupted");
    assert!(home.workspace.path().join("a.txt").exists());
    assert!(!home.workspace.path().join("b.txt").exists());

    // The daemon restarts; the waiting request is still there, and is answered.
    let (code, _, stderr) = home.ryvos(&["shutdown"]).await;
    assert_eq!(code, 0, "{stderr}");
    tokio::time::timeout(WAIT, daemon.wait())
        .await
        .unwrap()
        .unwrap();
    let _daemon = home.daemon().await;
    let (code, listed, _) = home.ryvos(&["approvals"]).await;
    assert_eq!(code, 0);
    assert!(
        listed.contains(&request_id) && listed.contains("run paused"),
        "{listed}"
    );
    let (code, _, stderr) = home.ryvos(&["approve", &request_id]).await;
    assert_eq!(code, 0, "{stderr}");

    let (code, stdout, stderr) = home
        .ryvos(&["run", "--json", "--resume", &session, "carry", "on"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let resumed = events(&stdout);
    let types: Vec<&str> = resumed
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert!(!types.contains(&"ApprovalRequested"), "not asked twice");
    let first_tool = resumed.iter().find(|e| e["type"] == "ToolStart").unwrap();
    assert_eq!(first_tool["call_id"], "b");
    assert!(resumed.iter().any(|e| e["type"] == "ApprovalResolved"
        && e["request_id"] == request_id.as_str()
        && e["by"] == "ryvos approve"));
    assert_eq!(
        std::fs::read_to_string(home.workspace.path().join("b.txt")).unwrap(),
        "second\n"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let roles: Vec<&str> = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "tool", "user"]
    );
    let (_, listed, _) = home.ryvos(&["approvals"]).await;
    assert!(!listed.contains(&request_id), "{listed}");
    server.assert_no_orphans();
}

#[tokio::test(flavor = "multi_thread")]
async fn status_and_doctor_say_the_store_is_encrypted_and_verified() {
    use ryvos_testkit::postgres::PostgresServer;
    let db = match PostgresServer::start_tls() {
        Ok(db) => db,
        Err(unavailable) if unavailable.may_skip() => {
            eprintln!("skipped: needs a PostgreSQL server and openssl: {unavailable}");
            return;
        }
        Err(unavailable) => panic!("the TLS test server: {unavailable}"),
    };
    let url = format!(
        "{}&sslmode=verify-full&sslrootcert={}",
        db.database().unwrap().replace("127.0.0.1", "localhost"),
        db.ca().display()
    );
    let server = ScriptedModelServer::start([]).await;
    let home = Home::new(&server, "").sharing(&url, 30);
    let daemon = home.daemon().await;
    let (code, status, stderr) = home.ryvos(&["status"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        status.contains("store: postgres (encrypted, the server's certificate and name verified (sslmode=verify-full))"),
        "{status}"
    );
    let (_, doctor, _) = home.ryvos(&["doctor"]).await;
    assert!(doctor.contains("name verified"), "{doctor}");
    home.shutdown(daemon).await;
}
