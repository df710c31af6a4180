//! The cost ledger against a scripted model: usage adds up exactly, a per-run limit stops a
//! run before its next model call, a month over its limit refuses new runs, an unknown model is
//! never free, and a restarted ledger keeps its totals.

mod common;

use common::{Harness, RUN_TIMEOUT};
use ryvos::config::{OnLimit, Pricing};
use ryvos::protocol::event::BudgetScope;
use ryvos::testing::Inspect;
use ryvos::testing::{ChildKind, SupervisorNotice};
use ryvos::{Config, EventKind, RunStatus};
use ryvos_testkit::{Gate, Reply};

/// Prices the scripted model at `input` / `output` cents per million tokens.
fn price(config: &mut Config, input: f64, output: f64) {
    config.budget.pricing_overrides.insert(
        "scripted".into(),
        Pricing {
            input_per_1m: input,
            output_per_1m: output,
        },
    );
}

/// 1,000 input and 1,000 output tokens at these prices cost 70 cents.
fn seventy_cents_a_call(config: &mut Config) {
    price(config, 20_000.0, 50_000.0);
}

const READ_ME: &[(&str, &str, &str)] = &[("r1", "glob", r#"{"pattern": "*"}"#)];

#[tokio::test]
async fn usage_of_several_calls_adds_up_exactly() {
    let h = Harness::start(
        vec![
            Reply::tool_calls(READ_ME).usage(Some((100, 50))),
            Reply::text(&["Nothing here."]).usage(Some((150, 75))),
        ],
        |c| price(c, 100.0, 200.0),
    )
    .await;
    let (events, outcome) = h.run(h.request("what is here?")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    assert_eq!((outcome.input_tokens, outcome.output_tokens), (250, 125));
    // 250 × 100 + 125 × 200 millionths of a cent.
    assert_eq!(outcome.cost_cents, Some(0.05));
    let per_call: Vec<f64> = events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::ModelUsage { cost_cents, .. } => Some(cost_cents),
            _ => None,
        })
        .collect();
    assert_eq!(per_call, [0.02, 0.03]);

    let report = h.runtime.cost_report().await.unwrap();
    assert_eq!(
        (
            report.month.calls,
            report.month.input_tokens,
            report.month.output_tokens
        ),
        (2, 250, 125)
    );
    assert_eq!(report.month.cost_cents, 0.05);
    assert_eq!(report.days.len(), 1);
    assert_eq!(report.days[0].input_tokens, 250);
    assert_eq!(report.sessions.len(), 1);
    assert_eq!(report.sessions[0].key, outcome.session_id.as_str());
    assert_eq!(report.sessions[0].output_tokens, 125);
    h.server.assert_no_orphans();
}

#[tokio::test]
async fn a_run_over_its_limit_stops_before_the_next_model_call() {
    let h = Harness::start(
        vec![
            Reply::tool_calls(READ_ME).usage(Some((1000, 1000))),
            Reply::text(&["A new run has a budget of its own."]).usage(Some((1, 1))),
        ],
        |c| {
            seventy_cents_a_call(c);
            c.budget.per_run_limit_cents = 10;
            // Today's end at a limit (a parked run is tests/parking.rs's).
            c.budget.on_limit = OnLimit::Stop;
        },
    )
    .await;
    let (events, outcome) = h.run(h.request("look around")).await;
    assert_eq!(outcome.status, RunStatus::BudgetExceeded);
    assert_eq!(h.server.requests().len(), 1, "no second model call");
    assert_eq!(outcome.turns, 1);
    assert_eq!(outcome.cost_cents, Some(70.0));
    let reason = outcome.reason.unwrap_or_default();
    assert!(
        reason.contains("$0.70") && reason.contains("$0.10"),
        "{reason}"
    );
    let exceeded = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::BudgetExceeded {
                scope,
                spent,
                limit,
                ..
            } => Some((*scope, spent.to_string(), limit.to_string())),
            _ => None,
        })
        .expect("BudgetExceeded");
    assert_eq!(exceeded, (BudgetScope::Run, "70".into(), "10".into()));
    // The turn's tool call ran and was answered once: the history stays whole, and the
    // next run on the session (with a budget of its own) sends a valid conversation.
    assert!(events.iter().any(|e| matches!(
        e.kind,
        EventKind::ToolEnd {
            is_error: false,
            ..
        }
    )));
    let (_, next) = h
        .run(h.request("go on").session(outcome.session_id.clone()))
        .await;
    assert_eq!(next.status, RunStatus::Completed, "{:?}", next.reason);
    h.server.assert_no_orphans();
}

#[tokio::test]
async fn a_run_with_a_budget_of_its_own_is_held_to_it_not_to_the_configs() {
    let h = Harness::start(
        vec![
            Reply::tool_calls(READ_ME).usage(Some((1000, 1000))),
            Reply::text(&["Done, under the raised limit."]).usage(Some((1, 1))),
            Reply::tool_calls(READ_ME).usage(Some((1000, 1000))),
            Reply::text(&["never asked"]),
        ],
        |c| {
            seventy_cents_a_call(c);
            c.budget.per_run_limit_cents = 10;
            // Today's end at a limit (a parked run is tests/parking.rs's).
            c.budget.on_limit = OnLimit::Stop;
        },
    )
    .await;
    let (_, raised) = h.run(h.request("look around").budget_cents(100)).await;
    assert_eq!(raised.status, RunStatus::Completed, "{:?}", raised.reason);
    let (_, lowered) = h.run(h.request("look again").budget_cents(5)).await;
    assert_eq!(lowered.status, RunStatus::BudgetExceeded);
    let reason = lowered.reason.unwrap_or_default();
    assert!(reason.contains("$0.05"), "{reason}");
    assert_eq!(
        h.server.requests().len(),
        3,
        "no call past the run's own limit"
    );
}

#[tokio::test]
async fn a_month_over_its_limit_refuses_new_runs_and_says_until_when() {
    let h = Harness::start(
        vec![
            Reply::text(&["First answer."]).usage(Some((1000, 1000))),
            Reply::text(&["never asked for"]),
        ],
        |c| {
            seventy_cents_a_call(c);
            c.budget.monthly_limit_cents = 50;
            c.budget.warning_threshold_cents = 40;
        },
    )
    .await;
    let (first_events, first) = h.run(h.request("one")).await;
    assert_eq!(first.status, RunStatus::Completed, "{:?}", first.reason);
    // The call that crossed the limit jumped past the warning threshold too: no warning; the
    // limit reached is said at once, though that call's answer completed the run.
    assert!(!first_events
        .iter()
        .any(|e| matches!(e.kind, EventKind::BudgetWarning { .. })));
    assert!(first_events.iter().any(|e| matches!(
        e.kind,
        EventKind::BudgetExceeded {
            scope: BudgetScope::Month,
            ..
        }
    )));

    let again = h.request("two").session(first.session_id.clone());
    let (events, refused) = h.run(again).await;
    assert_eq!(refused.status, RunStatus::BudgetExceeded);
    assert_eq!(refused.turns, 0);
    let reason = refused.reason.unwrap_or_default();
    assert!(
        reason.contains("monthly limit") && reason.contains("refused until"),
        "{reason}"
    );
    assert!(events.iter().any(|e| matches!(
        e.kind,
        EventKind::BudgetExceeded {
            scope: BudgetScope::Month,
            ..
        }
    )));
    assert_eq!(h.server.requests().len(), 1, "the refused run made no call");
    // The refused prompt never entered the conversation.
    let history = h
        .runtime
        .store()
        .load_session(&first.session_id)
        .await
        .unwrap()
        .messages;
    assert_eq!(history.len(), 2, "{history:?}");
    let report = h.runtime.cost_report().await.unwrap();
    assert!(report.refused_until.is_some());
}

#[tokio::test]
async fn a_model_with_no_known_price_is_counted_dear_and_said_so() {
    let h = Harness::start_hosted(
        vec![Reply::text(&["Hi."]).usage(Some((1000, 1000)))],
        |_| {},
    )
    .await;
    let (events, outcome) = h.run(h.request("hi")).await;
    assert_eq!(outcome.status, RunStatus::Completed);
    // The unknown-model price: 1000 × 1500 + 1000 × 7500 millionths of a cent.
    assert_eq!(outcome.cost_cents, Some(9.0));
    let alert = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::GuardianBudgetAlert { message, model } => Some((message, model)),
            _ => None,
        })
        .expect("GuardianBudgetAlert");
    assert_eq!(alert.1, "scripted");
    assert!(alert.0.contains("pricing_overrides"), "{}", alert.0);
}

#[tokio::test]
async fn a_restarted_ledger_keeps_the_runs_spending() {
    let gate = Gate::new();
    let h = Harness::start(
        vec![
            Reply::tool_calls(READ_ME).usage(Some((1000, 1000))),
            Reply::tool_calls(&[("r2", "glob", r#"{"pattern": "*.md"}"#)])
                .usage(Some((1000, 1000)))
                .held(&gate),
            Reply::text(&["never asked for"]),
        ],
        |c| {
            seventy_cents_a_call(c);
            c.budget.per_run_limit_cents = 100;
            c.budget.on_limit = OnLimit::Stop;
        },
    )
    .await;
    let mut notices = h.runtime.engine().supervisor_notices();
    let handle = h
        .runtime
        .run(h.request("look"))
        .await
        .expect("run accepted");
    let run = tokio::spawn(common::collect(handle));
    // The first call (70 cents) is recorded; the ledger dies before the second is.
    h.server.wait_for_requests(2).await;
    h.runtime.engine().inject_panic(ChildKind::CostLedger);
    tokio::time::timeout(RUN_TIMEOUT, async {
        while notices.recv().await.expect("notices")
            != (SupervisorNotice::Restarted {
                child: ChildKind::CostLedger,
            })
        {}
    })
    .await
    .expect("the ledger restarts");
    gate.open();
    let (_, outcome) = run.await.unwrap();
    // 70 + 70 passes the 100-cent limit only if the restarted ledger still knows the first 70.
    assert_eq!(
        outcome.status,
        RunStatus::BudgetExceeded,
        "{:?}",
        outcome.reason
    );
    assert_eq!(outcome.cost_cents, Some(140.0));
    assert_eq!(h.server.requests().len(), 2);
    let report = h.runtime.cost_report().await.unwrap();
    assert_eq!((report.month.calls, report.month.cost_cents), (2, 140.0));
    h.server.assert_no_orphans();
}

#[tokio::test(flavor = "multi_thread")]
async fn ryvos_run_no_park_reports_a_budget_stop_with_its_events_and_a_failing_exit_code() {
    let server = ryvos_testkit::ScriptedModelServer::start(vec![
        Reply::tool_calls(READ_ME).usage(Some((1000, 1000))),
        Reply::text(&["never asked for"]),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let config = home.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[model]\nbase_url = \"{}\"\napi_key = \"\"\nmodel = \"scripted\"\n\n\
             [budget]\nper_run_limit_cents = 10\n\n[budget.pricing_overrides]\n\
             \"scripted\" = {{ input_per_1m = 20000, output_per_1m = 50000 }}\n",
            server.base_url()
        ),
    )
    .unwrap();
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_ryvos"));
    command
        .env("RYVOS_HOME", home.path())
        .arg("--config")
        .arg(&config)
        .args(["run", "--json", "--no-park", "--workspace"])
        .arg(workspace.path())
        .arg("look around");
    let (code, stdout, stderr) = common::cli::output(&mut command).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("status budget_exceeded"), "{stderr}");
    let events = common::cli::json_lines(&stdout);
    let exceeded = events
        .iter()
        .find(|e| e["type"] == "BudgetExceeded")
        .expect("BudgetExceeded");
    assert_eq!(
        (&exceeded["scope"], &exceeded["spent"], &exceeded["limit"]),
        (&"run".into(), &70.into(), &10.into())
    );
    let last = events.last().unwrap();
    assert_eq!(last["type"], "RunComplete");
    assert_eq!(last["status"], "budget_exceeded");
    assert_eq!(last["cost_cents"], 70.0);
    assert_eq!(server.requests().len(), 1);
}
