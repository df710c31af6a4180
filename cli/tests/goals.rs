//! Goal-driven runs against the scripted model: the Judge retries an answer that misses a
//! criterion with a hint naming it, accepts one that meets it, runs a real command in the
//! workspace, never takes an unreadable judge verdict for acceptance, and escalates past the
//! retry bound. Every verdict is published and stored.

mod common;

use common::cli;
use common::Harness;
use ryvos::testing::Inspect;
use ryvos::{CallPurpose, EventKind, Goal, RunStatus, Verdict};
use ryvos_testkit::{Reply, Router, ScriptedModelServer};
use serde_json::Value;
use std::sync::Arc;

fn goal(criteria: &[&str]) -> Goal {
    Goal {
        description: "Find the answer to the question".into(),
        criteria: criteria.iter().map(|c| c.parse().unwrap()).collect(),
        ..Goal::default()
    }
}

fn verdicts(events: &[Arc<ryvos::Event>]) -> Vec<Verdict> {
    events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::JudgeVerdict { verdict, .. } => Some(verdict),
            _ => None,
        })
        .collect()
}

/// The runtime's notes in a request after its system prompt (sent as user messages marked
/// `[System]`, as strict chat templates accept them).
fn notes(request: &Value) -> Vec<String> {
    request["messages"].as_array().unwrap()[1..]
        .iter()
        .filter_map(|m| m["content"].as_str()?.strip_prefix("[System] "))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn an_answer_missing_a_criterion_is_retried_with_a_hint_then_accepted() {
    let h = Harness::start(
        vec![
            Reply::text(&["The answer is 41."]),
            Reply::text(&["Sorry: the answer is 42."]),
        ],
        |_| {},
    )
    .await;
    let request = h
        .request("What is six times seven?")
        .goal(goal(&["contains:42"]));
    let (events, outcome) = h.run(request).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    assert_eq!(outcome.output, "Sorry: the answer is 42.");
    assert_eq!(verdicts(&events), [Verdict::Retry, Verdict::Accept]);
    let requests = h.server.requests();
    assert_eq!(
        requests.len(),
        2,
        "no judge model call for a free criterion"
    );
    let system = |i: usize| {
        requests[i]["messages"][0]["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(
        system(0).contains("## Goal\nFind the answer"),
        "{}",
        system(0)
    );
    assert!(system(0).contains("the final answer contains \"42\""));
    assert!(
        system(1).contains("Evaluation so far: retry 1 of 3"),
        "{}",
        system(1)
    );
    let hint = notes(&requests[1]);
    assert_eq!(hint.len(), 1, "{hint:?}");
    assert!(
        hint[0].starts_with("[Judge]") && hint[0].contains("'contains:42' is not met"),
        "{hint:?}"
    );
    // Both verdicts are stored with the run, and the goal with its record.
    let stored = h.runtime.store().verdicts(&outcome.run_id).await.unwrap();
    let stored: Vec<Verdict> = stored.iter().map(|v| v.judgement.verdict).collect();
    assert_eq!(stored, [Verdict::Retry, Verdict::Accept]);
    let runs = h
        .runtime
        .store()
        .session_runs(&outcome.session_id)
        .await
        .unwrap();
    assert_eq!(runs[0].goal.as_ref().unwrap().criteria.len(), 1);
    // Every message the run added after its prompt is in a turn's checkpoint: the Judge's
    // note too, with the turn it prompted.
    let checkpoints = (h.runtime.store().checkpoints(&outcome.session_id).await).unwrap();
    let history = h
        .runtime
        .history(&outcome.session_id)
        .await
        .unwrap()
        .unwrap();
    let covered = |seq: u64| {
        checkpoints
            .iter()
            .any(|c| (c.first_seq..=c.last_seq).contains(&seq))
    };
    for stored in &history.messages {
        let prompt = matches!(*stored.message, ryvos::Message::User { .. });
        assert!(
            prompt || covered(stored.seq),
            "message {} ({:?}) is in no checkpoint: {checkpoints:?}",
            stored.seq,
            stored.message
        );
    }
    h.server.assert_no_orphans();
}

#[tokio::test]
async fn a_command_criterion_runs_a_real_check_in_the_workspace() {
    let h = Harness::start(
        vec![
            Reply::text(&["Done, I think."]),
            Reply::tool_calls(&[(
                "w1",
                "write",
                r#"{"path": "status.txt", "content": "fixed\n"}"#,
            )]),
            Reply::text(&["Now it is fixed."]),
        ],
        |_| {},
    )
    .await;
    // The project's "test": a script that passes only once status.txt says fixed.
    std::fs::write(
        h.workspace.path().join("check.sh"),
        "#!/bin/sh\ngrep -qx fixed status.txt || { echo 'status.txt does not say fixed' >&2; exit 1; }\n",
    )
    .unwrap();
    let request = h
        .request("fix the status")
        .goal(goal(&["command:sh check.sh"]));
    let (events, outcome) = h.run(request).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    assert_eq!(verdicts(&events), [Verdict::Retry, Verdict::Accept]);
    let first = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::JudgeVerdict { criteria, .. } => Some(criteria.clone()),
            _ => None,
        })
        .unwrap();
    assert!(!first[0].met);
    assert!(
        first[0].reason.contains("status.txt does not say fixed"),
        "{:?}",
        first[0]
    );
    h.server.assert_no_orphans();
}

/// Answers every judge request with `reply`.
fn judge_answers(reply: impl Fn() -> Reply + Send + Sync + 'static) -> Router {
    Arc::new(move |request: &Value| {
        let system = request["messages"][0]["content"]
            .as_str()
            .unwrap_or_default();
        system.starts_with("You are the Judge").then(&reply)
    })
}

#[tokio::test]
async fn a_garbage_judge_verdict_is_never_acceptance_and_retries_past_the_bound_escalate() {
    let h = Harness::start_routed(
        vec![
            Reply::text(&["All done."]),
            Reply::text(&["Really, all done."]),
        ],
        judge_answers(|| Reply::text(&["ACCEPT!!! This looks great to me."])),
        |c| c.agent.judge.max_retries = 1,
    )
    .await;
    let request = h
        .request("tidy the notes")
        .goal(goal(&["llm:the notes are tidy"]));
    let (events, outcome) = h.run(request).await;
    assert_eq!(outcome.status, RunStatus::Escalated, "{:?}", outcome.reason);
    assert_eq!(verdicts(&events), [Verdict::Continue, Verdict::Continue]);
    let reason = outcome.reason.unwrap_or_default();
    assert!(reason.contains("not met after 1 retries"), "{reason}");
    // Each judge call was billed like any model call, and marked: 2 answers + 2 judgements.
    let purposes: Vec<CallPurpose> = events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::ModelUsage { purpose, .. } => Some(purpose),
            _ => None,
        })
        .collect();
    use CallPurpose::{Judge, Turn};
    assert_eq!(purposes, [Turn, Judge, Turn, Judge]);
}

#[tokio::test]
async fn a_well_formed_judge_verdict_accepts() {
    let h = Harness::start_routed(
        vec![Reply::text(&["The notes are sorted by date."])],
        judge_answers(|| {
            Reply::text(&[r#"{"verdict": "accept", "reason": "sorted and deduplicated", "criteria": [{"index": 1, "met": true, "reason": "sorted"}]}"#])
        }),
        |_| {},
    )
    .await;
    let request = h
        .request("tidy the notes")
        .goal(goal(&["llm:the notes are tidy"]));
    let (events, outcome) = h.run(request).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    assert_eq!(verdicts(&events), [Verdict::Accept]);
    // The judge read the goal, the criterion and the answer.
    let judged = h
        .server
        .requests()
        .into_iter()
        .find(|r| {
            r["messages"][0]["content"]
                .as_str()
                .unwrap()
                .starts_with("You are the Judge")
        })
        .unwrap();
    let asked = judged["messages"][1]["content"].as_str().unwrap();
    assert!(asked.contains("1. the notes are tidy") && asked.contains("sorted by date"));
}

#[tokio::test]
async fn a_run_that_never_meets_its_goal_escalates_after_max_retries() {
    let h = Harness::start((0..3).map(|_| Reply::text(&["41"])).collect(), |c| {
        c.agent.judge.max_retries = 2
    })
    .await;
    let request = h.request("six times seven?").goal(goal(&["equals:42"]));
    let (events, outcome) = h.run(request).await;
    assert_eq!(outcome.status, RunStatus::Escalated, "{:?}", outcome.reason);
    assert_eq!(verdicts(&events), [Verdict::Retry; 3]);
    assert_eq!(h.server.requests().len(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_takes_a_goal_and_criteria_and_refuses_a_bad_one() {
    let server = ScriptedModelServer::start([Reply::text(&["It is 42."])]).await;
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[model]\nbase_url = \"{}\"\nmodel = \"scripted\"\napi_key = \"\"\n",
            server.base_url()
        ),
    )
    .unwrap();
    // A workspace apart from the home: one that holds it is refused.
    let workspace = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_ryvos"));
        c.env("RYVOS_HOME", home.path())
            .arg("--config")
            .arg(&config)
            .arg("run")
            .args(args)
            .current_dir(workspace.path());
        c
    };
    let (code, stdout, stderr) = cli::output(&mut run(&[
        "--json",
        "--goal",
        "compute it",
        "--criterion",
        "contains:42@2",
        "what is six times seven?",
    ]))
    .await;
    assert_eq!(code, 0, "{stderr}");
    let events = cli::json_lines(&stdout);
    let verdict = events.iter().find(|e| e["type"] == "JudgeVerdict").unwrap();
    assert_eq!(verdict["verdict"], "Accept");
    assert_eq!(verdict["criteria"][0]["criterion"], "contains:42@2");
    let (code, _, stderr) = cli::output(&mut run(&["--criterion", "has:42", "x"])).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("unknown kind 'has'"), "{stderr}");
}

#[tokio::test]
async fn a_goals_cost_constraint_stops_the_run_like_a_budget() {
    let h = Harness::start(
        vec![Reply::text(&["41"]), Reply::text(&["never asked"])],
        |c| {
            // A dear model: the first call (12 tokens in) costs 12 cents.
            c.budget.pricing_overrides.insert(
                "scripted".into(),
                ryvos::config::Pricing {
                    input_per_1m: 1_000_000.0,
                    output_per_1m: 0.0,
                },
            );
        },
    )
    .await;
    let mut g = goal(&["contains:42"]);
    g.constraints.cost_cents = Some(5);
    let (events, outcome) = h.run(h.request("six times seven?").goal(g)).await;
    assert_eq!(
        outcome.status,
        RunStatus::BudgetExceeded,
        "{:?}",
        outcome.reason
    );
    assert!(outcome.reason.unwrap().contains("goal's cost constraint"));
    assert!(events
        .iter()
        .any(|e| matches!(e.kind, EventKind::BudgetExceeded { .. })));
    assert_eq!(h.server.requests().len(), 1, "no call after the limit");
}

#[tokio::test]
async fn a_goals_time_constraint_is_the_runs_deadline_when_tighter() {
    let never = ryvos_testkit::Gate::new();
    let h = Harness::start(vec![Reply::text(&["late"]).held(&never)], |_| {}).await;
    let mut g = goal(&["contains:42"]);
    g.constraints.time_secs = Some(1);
    let (_, outcome) = h.run(h.request("six times seven?").goal(g)).await;
    assert_eq!(outcome.status, RunStatus::Timeout);
    let reason = outcome.reason.unwrap();
    assert!(reason.contains("goal's time constraint (1s)"), "{reason}");
}

#[tokio::test]
async fn an_escalate_verdict_stops_the_run_with_its_reason() {
    let h = Harness::start_routed(
        vec![Reply::text(&["I cannot reach the server."])],
        judge_answers(|| {
            Reply::text(&[r#"{"verdict": "escalate", "reason": "the server is out of reach", "criteria": [{"index": 1, "met": false, "reason": "no deploy"}]}"#])
        }),
        |_| {},
    )
    .await;
    let request = h
        .request("deploy it")
        .goal(goal(&["llm:the service is deployed"]));
    let (events, outcome) = h.run(request).await;
    assert_eq!(outcome.status, RunStatus::Escalated);
    assert_eq!(verdicts(&events), [Verdict::Escalate]);
    let reason = outcome.reason.unwrap_or_default();
    assert!(reason.contains("the server is out of reach"), "{reason}");
}
