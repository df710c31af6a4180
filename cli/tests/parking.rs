//! A run at its budget parks rather than ends: durably (through a kill -9 of the daemon),
//! holding nothing, and goes on as the same run when it is continued with a raised budget, its
//! turns and spending counted on; or it is stopped. In-process and through the daemon.

mod common;

use common::budget::{priced, two_appends, PRICED};
use common::home::{Ended, Home};
use common::Harness;
use ryvos::protocol::event::ParkReason;
use ryvos::{EventKind, RunStatus};
use ryvos_testkit::{Reply, ScriptedModelServer};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread")]
async fn a_run_parked_at_its_budget_survives_a_kill_and_goes_on_as_the_same_run() {
    let server = ScriptedModelServer::start(two_appends()).await;
    let home = Home::new(&server, PRICED);
    let mut daemon = home.daemon().await;
    let mut run = home.follow(&["run", "--json", "write", "the", "log"]);
    // What the limit means is said as it is reached: the calls asked for still run, then the
    // run parks.
    let exceeded = run
        .until(|e| (e["type"] == "BudgetExceeded").then(|| e["message"].clone()))
        .await;
    assert!(
        exceeded
            .as_str()
            .unwrap()
            .contains("the calls the model asked for still run"),
        "{exceeded}"
    );
    let parked = run
        .until(|e| (e["type"] == "RunParked").then(|| e.clone()))
        .await;
    assert_eq!(parked["reason"], "budget_run", "{parked}");
    let run_id = parked["run_id"].as_str().unwrap().to_owned();
    let session = parked["session_id"].as_str().unwrap().to_owned();
    assert!(
        parked["message"]
            .as_str()
            .unwrap()
            .contains(&format!("ryvos continue {run_id}")),
        "{parked}"
    );

    // The attached client waits through the park; the daemon dies under it.
    daemon.start_kill().unwrap();
    daemon.wait().await.unwrap();
    let Ended { code, stderr, .. } = run.rest().await;
    assert_eq!(code, Some(3), "{stderr}");
    assert!(stderr.contains("parked (budget_run)"), "{stderr}");

    let daemon = home.daemon().await;
    // `status` says how it goes on: with a budget above what it spent, in dollars.
    let (_, status, _) = home.ryvos(&["status"]).await;
    assert!(
        status.contains(&format!(
            "`ryvos continue {run_id} --budget-cents N`, N above 70"
        )) && status.contains("$0.70 spent"),
        "{status}"
    );
    let listed = session_record(&home, &session).await;
    assert_eq!(listed["last_status"], "parked", "{listed}");
    assert_eq!(listed["last_run"], run_id.as_str());
    // A new run on the session is refused while its run is parked: it would go on from a
    // conversation that moved on.
    let (code, _, stderr) = home.ryvos(&["run", "--resume", &session, "other"]).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!("ryvos continue {run_id}")),
        "{stderr}"
    );
    // Continued without more budget, it would park again at once: refused, saying why.
    let (code, _, stderr) = home.ryvos(&["continue", &run_id]).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("larger budget to go on, in cents, above 70")
            && stderr.contains("--budget-cents N")
            && !stderr.contains("budget_cents"),
        "{stderr}"
    );

    let (code, out, stderr) = home
        .ryvos(&["continue", &run_id, "--budget-cents", "500", "--json"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let events = common::cli::json_lines(&out);
    assert!(
        events.iter().all(|e| e["run_id"] == run_id.as_str()),
        "one run id throughout"
    );
    let end = events.last().unwrap();
    assert_eq!(end["type"], "RunComplete");
    assert_eq!(end["status"], "completed", "{end}");
    // Its totals are the sum of both stretches: three calls at 70 cents, three turns.
    assert_eq!(end["cost_cents"], 210.0, "{end}");
    assert_eq!(end["turns"], 3, "{end}");
    let (code, history, stderr) = home.ryvos(&["history", &session, "--json"]).await;
    assert_eq!(code, 0, "{stderr}");
    let history: Value = serde_json::from_str(&history).unwrap();
    // Each tool ran once: the first before the park, the second after.
    let log = std::fs::read_to_string(home.workspace.path().join("log.txt")).unwrap();
    assert_eq!(log, "one\ntwo\n", "{:#}", history["messages"]);
    assert_eq!(server.requests().len(), 3);
    server.assert_no_orphans();

    let runs = history["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["status"], "completed");
    assert_eq!(runs[0]["cost_microcents"], 210_000_000);
    // Continued twice, it is refused: it is not parked any more.
    let (code, _, stderr) = home.ryvos(&["continue", &run_id]).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("not parked"), "{stderr}");
    home.shutdown(daemon).await;
}

#[tokio::test]
async fn in_process_a_parked_run_exits_4_and_is_continued_or_stopped() {
    let server = ScriptedModelServer::start(two_appends()).await;
    let home = Home::new(&server, PRICED);
    let (code, out, stderr) = home.ryvos(&["run", "--json", "write", "the", "log"]).await;
    assert_eq!(code, 4, "{stderr}");
    let events = common::cli::json_lines(&out);
    let parked = events.iter().find(|e| e["type"] == "RunParked").unwrap();
    let end = events.last().unwrap();
    assert_eq!(
        (&end["type"], &end["status"]),
        (&"RunComplete".into(), &"parked".into())
    );
    let run_id = parked["run_id"].as_str().unwrap().to_owned();
    assert!(
        stderr.contains(&format!("run {run_id} parked (budget_run)")),
        "{stderr}"
    );

    // A stop that ends its run succeeds (exit 0), whatever status the run ended with; one
    // of a run that has ended already is refused.
    let (code, out, stderr) = home.ryvos(&["stop", &run_id, "--json"]).await;
    assert_eq!(code, 0, "{stderr}");
    let end = common::cli::json_lines(&out).pop().unwrap();
    assert_eq!(end["status"], "budget_exceeded", "{end}");
    let (code, _, stderr) = home.ryvos(&["stop", &run_id]).await;
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(end["run_id"], run_id.as_str());
    assert_eq!(end["cost_cents"], 70.0);
    let (code, _, stderr) = home
        .ryvos(&["continue", &run_id, "--budget-cents", "500"])
        .await;
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("has ended already") || stderr.contains("not parked"),
        "{stderr}"
    );
    assert_eq!(server.requests().len(), 1, "stopping made no call");
}

#[tokio::test]
async fn a_parked_run_holds_nothing_and_counts_its_budget_across_continues() {
    let h = Harness::start(two_appends(), priced).await;
    let (events, parked) = h.run(h.request("write the log")).await;
    assert_eq!(parked.status, RunStatus::Parked, "{:?}", parked.reason);
    assert!(events.iter().any(|e| matches!(
        e.kind,
        EventKind::RunParked {
            reason: ParkReason::BudgetRun,
            ..
        }
    )));
    assert_eq!(h.runtime.runs_in_flight(), 0, "no run is held while parked");

    // Raised to 100 cents in all: the second call (140 in all) parks it again.
    let handle = h
        .runtime
        .continue_run(&parked.run_id, Some(100))
        .await
        .unwrap();
    let (_, again) = common::collect(handle).await;
    assert_eq!(again.status, RunStatus::Parked, "{:?}", again.reason);
    assert_eq!(again.run_id, parked.run_id);
    assert_eq!(again.cost_cents, Some(140.0));
    assert_eq!(h.server.requests().len(), 2);

    let handle = h
        .runtime
        .continue_run(&parked.run_id, Some(1000))
        .await
        .unwrap();
    let (_, done) = common::collect(handle).await;
    assert_eq!(done.status, RunStatus::Completed, "{:?}", done.reason);
    assert_eq!((done.turns, done.cost_cents), (3, Some(210.0)));
    h.server.assert_no_orphans();
}

/// The session's record as `ryvos sessions --json` lists it.
async fn session_record(home: &Home, session: &str) -> Value {
    let (code, out, stderr) = home.ryvos(&["sessions", "--json"]).await;
    assert_eq!(code, 0, "{stderr}");
    let sessions: Value = serde_json::from_str(&out).unwrap();
    sessions
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["session_id"] == session)
        .cloned()
        .expect("the session is listed")
}

/// Two steps, b after a, each held to its criterion (no judge model is asked).
const TWO_STEPS: &str = r#"{"steps": [
    {"id": "a", "goal": "look around", "criteria": ["contains:a done"]},
    {"id": "b", "goal": "sum it up", "depends_on": ["a"], "criteria": ["contains:b done"]}
]}"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_director_run_parks_between_steps_and_finishes_its_plan_after_continue() {
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = log.clone();
    let router: ryvos_testkit::Router = std::sync::Arc::new(move |request: &Value| {
        let prompt = common::asked(request);
        let last_is_result = request["messages"]
            .as_array()
            .and_then(|m| m.last())
            .is_some_and(|m| m["role"] == "tool");
        let (name, reply) = if prompt.starts_with("[Director] Plan how") {
            ("plan", Reply::text(&[TWO_STEPS]).usage(Some((1, 1))))
        } else if prompt.starts_with("[Director] You carry out step 'a'") {
            if last_is_result {
                ("a: answer", Reply::text(&["a done"]).usage(Some((1, 1))))
            } else {
                // 70 cents: step a parks before its next call.
                let look = [("g1", "glob", r#"{"pattern": "*"}"#)];
                (
                    "a: look",
                    Reply::tool_calls(&look).usage(Some((1000, 1000))),
                )
            }
        } else if prompt.starts_with("[Director] You carry out step 'b'") {
            ("b", Reply::text(&["b done"]).usage(Some((1, 1))))
        } else if prompt.starts_with("[Director] Every step of the plan is done") {
            ("final", Reply::text(&["All done."]).usage(Some((1, 1))))
        } else {
            return None;
        };
        seen.lock().unwrap().push(name.to_owned());
        Some(reply)
    });
    let h = Harness::start_routed(Vec::new(), router, priced).await;
    let (events, parked) = h.run(h.request("look, then sum up").director()).await;
    assert_eq!(parked.status, RunStatus::Parked, "{:?}", parked.reason);
    assert_eq!(parked.park_reason, Some(ParkReason::BudgetRun));
    assert!(events
        .iter()
        .any(|e| matches!(e.kind, EventKind::RunParked { .. })));
    assert!(parked
        .reason
        .as_deref()
        .unwrap_or_default()
        .contains("step 'a'"));
    assert_eq!(*log.lock().unwrap(), ["plan", "a: look"], "b never started");
    assert_eq!(
        h.runtime.runs_in_flight(),
        0,
        "nothing is held while parked"
    );
    // The parked step stands for its Director: it is continued through it, never alone.
    let step_run = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::DirectorStep {
                status: ryvos::protocol::plan::StepEvent::Parked,
                step_run_id,
                ..
            } => step_run_id.clone(),
            _ => None,
        })
        .expect("the step's run parked");
    let alone = h.runtime.continue_run(&step_run, Some(500)).await;
    let refused = alone.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        refused.contains(&format!("ryvos continue {}", parked.run_id)),
        "{refused}"
    );
    let listed = h.runtime.parked_runs().await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].run_id, parked.run_id);

    let handle = h
        .runtime
        .continue_run(&parked.run_id, Some(500))
        .await
        .unwrap();
    let (events, done) = common::collect(handle).await;
    assert_eq!(done.status, RunStatus::Completed, "{:?}", done.reason);
    assert_eq!(done.run_id, parked.run_id, "the same run");
    assert_eq!(done.output, "All done.");
    // Step a went on where it parked (its look is not made again), then b, then the answer.
    assert_eq!(
        *log.lock().unwrap(),
        ["plan", "a: look", "a: answer", "b", "final"]
    );
    assert!(events.iter().any(|e| matches!(
        &e.kind,
        EventKind::DirectorStep { step, detail, .. } if step == "a" && detail.contains("continued")
    )));
    // Its totals are over both stretches, each call counted once: the look's 70 cents and
    // four calls of 0.07 cents (the plan, a's answer, b, the final answer).
    let cents = done.cost_cents.unwrap_or_default();
    assert!((cents - 70.28).abs() < 1e-6, "{cents}");
    // Continued again, it is refused: it is not parked any more.
    let again = h.runtime.continue_run(&parked.run_id, Some(500)).await;
    assert!(again.is_err());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_parked_on_the_months_limit_goes_on_by_itself_once_the_limit_is_raised() {
    let server = ScriptedModelServer::start(two_appends()).await;
    let month = "[budget]\nmonthly_limit_cents = 50\nper_run_limit_cents = 0\n\
        [budget.pricing_overrides.scripted]\ninput_per_1m = 20000.0\noutput_per_1m = 50000.0\n";
    let home = Home::new(&server, month);
    let daemon = home.daemon().await;
    let mut run = home.follow(&["run", "--json", "write", "the", "log"]);
    let parked = run
        .until(|e| (e["type"] == "RunParked").then(|| e.clone()))
        .await;
    assert_eq!(parked["reason"], "budget_month", "{parked}");
    let run_id = parked["run_id"].as_str().unwrap().to_owned();
    let session = parked["session_id"].as_str().unwrap().to_owned();
    let (code, status, stderr) = home.ryvos(&["status", "--json"]).await;
    assert_eq!(code, 0, "{stderr}");
    let status: Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["parked"][0]["run_id"], run_id.as_str(), "{status}");
    assert_eq!(status["parked"][0]["reason"], "budget_month");
    home.shutdown(daemon).await;
    let Ended { stderr, .. } = run.rest().await;
    assert!(stderr.contains("stays parked"), "{stderr}");

    // The limit raised, the next daemon goes on with the run by itself.
    let config = home.path().join("config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("monthly_limit_cents = 50", "monthly_limit_cents = 1000"),
    )
    .unwrap();
    let daemon = home.daemon().await;
    let mut last_status = Value::Null;
    for _ in 0..300 {
        last_status = session_record(&home, &session).await["last_status"].clone();
        if last_status == "completed" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(last_status, "completed");
    let log = std::fs::read_to_string(home.workspace.path().join("log.txt")).unwrap();
    assert_eq!(log, "one\ntwo\n");
    let (_, history, _) = home.ryvos(&["history", &session, "--json"]).await;
    let history: Value = serde_json::from_str(&history).unwrap();
    assert_eq!(history["runs"][0]["run_id"], run_id.as_str());
    assert_eq!(history["runs"][0]["cost_microcents"], 210_000_000);
    home.shutdown(daemon).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_daemon_tells_its_command_and_webhook_when_a_run_parks() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let hook = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/parked", hook.local_addr().unwrap());
    let (told, heard) = tokio::sync::oneshot::channel::<String>();
    tokio::spawn(async move {
        let (mut stream, _) = hook.accept().await.unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 4096];
        // The whole request: its headers, then a body that ends the JSON object.
        while !String::from_utf8_lossy(&request).trim_end().ends_with('}') {
            let n = stream.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            request.extend_from_slice(&buf[..n]);
        }
        stream
            .write_all(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n")
            .await
            .unwrap();
        told.send(String::from_utf8_lossy(&request).into_owned())
            .ok();
    });
    let server = ScriptedModelServer::start(two_appends()).await;
    let notify = format!(
        "{PRICED}[daemon]\nnotify_url = \"{url}\"\nnotify_command = [\"sh\", \"-c\", \
         \"cat > parked.json && echo $RYVOS_RUN_ID $RYVOS_PARK_REASON > parked.env\"]\n"
    );
    let home = Home::new(&server, &notify);
    let daemon = home.daemon().await;
    let mut run = home.follow(&["run", "--json", "write", "the", "log"]);
    let run_id = run
        .until(|e| (e["type"] == "RunParked").then(|| e["run_id"].as_str().unwrap().to_owned()))
        .await;

    let request = tokio::time::timeout(std::time::Duration::from_secs(30), heard)
        .await
        .expect("the webhook is called")
        .unwrap();
    assert!(request.starts_with("POST /parked"), "{request}");
    assert!(request.contains("\"type\":\"RunParked\""), "{request}");
    assert!(request.contains(&run_id), "{request}");
    let env = home.workspace.path().join("parked.env");
    for _ in 0..300 {
        if std::fs::read_to_string(&env).is_ok_and(|s| s.ends_with('\n')) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let said = std::fs::read_to_string(&env).unwrap();
    assert_eq!(said, format!("{run_id} budget_run\n"));
    let event: Value = serde_json::from_str(
        &std::fs::read_to_string(home.workspace.path().join("parked.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(event["type"], "RunParked");
    assert_eq!(event["run_id"], run_id.as_str());
    let (code, _, stderr) = home.ryvos(&["stop", &run_id]).await;
    assert_eq!(code, 0, "{stderr}");
    let Ended { code, .. } = run.rest().await;
    assert_eq!(code, Some(1), "the attached run ends as it was stopped");
    home.shutdown(daemon).await;
}

#[tokio::test]
async fn an_escalated_run_parks_for_a_person_and_goes_back_to_work_when_continued() {
    let h = Harness::start(vec![Reply::text(&["41"]), Reply::text(&["42"])], |c| {
        c.agent.judge.max_retries = 0;
        c.agent.judge.park_on_escalate = true;
    })
    .await;
    let goal = ryvos::Goal {
        description: "six times seven".into(),
        criteria: vec!["contains:42".parse().unwrap()],
        ..ryvos::Goal::default()
    };
    let (_, parked) = h.run(h.request("six times seven?").goal(goal)).await;
    assert_eq!(parked.status, RunStatus::Parked, "{:?}", parked.reason);
    assert_eq!(parked.park_reason, Some(ParkReason::Escalated));
    assert!(parked
        .reason
        .as_deref()
        .unwrap_or_default()
        .contains("person"));

    let handle = h.runtime.continue_run(&parked.run_id, None).await.unwrap();
    let (_, done) = common::collect(handle).await;
    assert_eq!(done.status, RunStatus::Completed, "{:?}", done.reason);
    assert_eq!(done.output, "42");
    let requests = h.server.requests();
    assert_eq!(requests.len(), 2);
    assert!(common::asked(&requests[1]).contains("A person reviewed the escalation"));
    h.server.assert_no_orphans();
}

/// A run given its model (`--model`) parks at its budget; continued, it asks that model again,
/// not the configured one: in-process and through the daemon alike.
#[tokio::test(flavor = "multi_thread")]
async fn a_continued_run_asks_the_model_it_was_started_with() {
    for through_daemon in [false, true] {
        let server = ScriptedModelServer::start(two_appends()).await;
        let priced = PRICED.replace("pricing_overrides.scripted", "pricing_overrides.chosen");
        let home = Home::new(&server, &priced);
        let daemon = match through_daemon {
            true => Some(home.daemon().await),
            false => None,
        };
        let args = ["run", "--json", "--model", "chosen", "write", "the", "log"];
        let run_id = match &daemon {
            None => {
                let (code, out, stderr) = home.ryvos(&args).await;
                assert_eq!(code, 4, "{stderr}");
                let events = common::cli::json_lines(&out);
                let parked = events.iter().find(|e| e["type"] == "RunParked").unwrap();
                parked["run_id"].as_str().unwrap().to_owned()
            }
            Some(_) => {
                let mut run = home.follow(&args);
                let parked = run
                    .until(|e| (e["type"] == "RunParked").then(|| e.clone()))
                    .await;
                parked["run_id"].as_str().unwrap().to_owned()
            }
        };
        let (code, _, stderr) = home
            .ryvos(&["continue", &run_id, "--budget-cents", "500"])
            .await;
        assert_eq!(code, 0, "daemon: {through_daemon}: {stderr}");
        if let Some(daemon) = daemon {
            home.shutdown(daemon).await;
        }
        let asked: Vec<Value> = server
            .requests()
            .iter()
            .map(|r| r["model"].clone())
            .collect();
        assert_eq!(asked, ["chosen"; 3], "daemon: {through_daemon}");
    }
}
