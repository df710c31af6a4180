//! OpenTelemetry end to end: the real `ryvos` binary exporting to a real OTLP/HTTP collector
//! on 127.0.0.1 (the testkit's, decoding the official protobuf messages).

mod common;

use common::backend::Backend;
use common::home::Home;
use common::{asked, is_judge, Harness};
use ryvos_testkit::otlp::{Attr, OtlpReceiver, ReceivedSpan};
use ryvos_testkit::{Reply, ScriptedModelServer};
use std::sync::Arc;

/// A model that calls two tools in its first turn, then answers.
async fn two_tool_calls() -> ScriptedModelServer {
    ScriptedModelServer::start([
        Reply::tool_calls(&[
            ("c1", "write", r#"{"path": "a.txt", "content": "secret-1"}"#),
            ("c2", "read", r#"{"path": "b.txt"}"#),
        ]),
        Reply::text(&["Done."]),
    ])
    .await
}

fn otel(endpoint: &str, capture: bool) -> String {
    format!("[otel]\nenabled = true\nendpoint = \"{endpoint}\"\ncapture_content = {capture}\n")
}

/// Runs `request` to completion, then stops the runtime: its last flush exports every span.
async fn completes_then_stops(h: &Harness, request: ryvos::RunRequest) {
    let (_, outcome) = h.run(request).await;
    assert_eq!(
        outcome.status,
        ryvos::RunStatus::Completed,
        "{:?}",
        outcome.reason
    );
    h.runtime.shutdown().await.unwrap();
}

fn named<'a>(spans: &'a [ReceivedSpan], name: &str) -> Vec<&'a ReceivedSpan> {
    spans.iter().filter(|s| s.name == name).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_is_one_span_with_a_chat_span_per_model_call_and_a_tool_span_per_call() {
    let collector = OtlpReceiver::start().await;
    let server = two_tool_calls().await;
    let home = Home::with_model(&server, "", &otel(&collector.endpoint(), false));
    let (code, _, err) = home.ryvos(&["run", "write and read it"]).await;
    assert_eq!(code, 0, "{err}");

    let spans = collector.spans();
    let runs = named(&spans, "invoke_agent ryvos");
    assert_eq!(runs.len(), 1, "{spans:#?}");
    let run = runs[0];
    assert!(run.parent_span_id.is_empty(), "the run span is a root");
    assert_eq!(run.text("gen_ai.operation.name"), Some("invoke_agent"));
    assert_eq!(run.text("gen_ai.agent.name"), Some("ryvos"));
    assert!(run
        .text("gen_ai.conversation.id")
        .unwrap()
        .starts_with("s_"));
    assert_eq!(run.text("ryvos.run.status"), Some("completed"));
    assert!(matches!(run.attr("gen_ai.usage.input_tokens"), Some(Attr::Int(n)) if *n > 0));
    assert_eq!(run.service_name.as_deref(), Some("ryvos"));

    let chats = named(&spans, "chat scripted");
    assert_eq!(chats.len(), 2, "one per model call: {spans:#?}");
    for chat in &chats {
        assert_eq!(chat.parent_span_id, run.span_id);
        assert_eq!(chat.trace_id, run.trace_id);
        assert_eq!(chat.kind, 3, "a client span");
        assert_eq!(chat.text("gen_ai.operation.name"), Some("chat"));
        assert_eq!(chat.text("gen_ai.provider.name"), Some("openai"));
        assert_eq!(chat.text("gen_ai.request.model"), Some("scripted"));
        assert_eq!(chat.text("gen_ai.response.model"), Some("scripted"));
        assert_eq!(chat.text("gen_ai.response.id"), Some("chatcmpl-scripted"));
        assert!(chat.attr("gen_ai.usage.output_tokens").is_some());
        assert!(
            chat.attr("gen_ai.input.messages").is_none(),
            "content is off by default"
        );
        assert!(chat.attr("gen_ai.output.messages").is_none());
    }
    let reasons: Vec<_> = chats
        .iter()
        .map(|c| c.attr("gen_ai.response.finish_reasons").cloned())
        .collect();
    assert!(
        reasons.contains(&Some(Attr::List(vec![Attr::Text("tool_calls".into())]))),
        "{reasons:?}"
    );

    for (name, call) in [("execute_tool write", "c1"), ("execute_tool read", "c2")] {
        let tools = named(&spans, name);
        assert_eq!(tools.len(), 1, "{name}: {spans:#?}");
        let tool = tools[0];
        assert_eq!(tool.parent_span_id, run.span_id);
        assert_eq!(tool.text("gen_ai.tool.call.id"), Some(call));
        // The security gate's decision on the call.
        assert!(tool.text("ryvos.tool.decided_by").is_some(), "{tool:?}");
        assert!(tool.text("ryvos.tool.tier").is_some(), "{tool:?}");
        assert_eq!(tool.attr("ryvos.tool.allowed"), Some(&Attr::Bool(true)));
        assert!(
            tool.attr("gen_ai.tool.call.arguments").is_none(),
            "content is off by default"
        );
        assert!(tool.attr("gen_ai.tool.call.result").is_none());
    }

    let metrics = collector.metric_names();
    for name in [
        "gen_ai.client.token.usage",
        "gen_ai.client.operation.duration",
        "ryvos.tool.duration",
        "ryvos.runs",
    ] {
        assert!(metrics.iter().any(|m| m == name), "{name}: {metrics:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_arguments_and_results_are_on_spans_only_with_capture_content() {
    let collector = OtlpReceiver::start().await;
    let server = two_tool_calls().await;
    let home = Home::with_model(&server, "", &otel(&collector.endpoint(), true));
    std::fs::write(home.workspace.path().join("b.txt"), "secret-2").unwrap();
    let (code, _, err) = home.ryvos(&["run", "write and read it"]).await;
    assert_eq!(code, 0, "{err}");
    let spans = collector.spans();
    let chats = named(&spans, "chat scripted");
    let first = chats
        .iter()
        .find(|c| {
            c.text("gen_ai.output.messages")
                .unwrap()
                .contains("tool_call")
        })
        .expect("the answer with the calls");
    let sent: serde_json::Value =
        serde_json::from_str(first.text("gen_ai.input.messages").unwrap()).unwrap();
    assert_eq!(sent[0]["role"], "user", "{sent}");
    assert_eq!(sent[0]["parts"][0]["content"], "write and read it");
    let answered: serde_json::Value =
        serde_json::from_str(first.text("gen_ai.output.messages").unwrap()).unwrap();
    assert_eq!(answered[0]["parts"][0]["type"], "tool_call", "{answered}");
    assert_eq!(answered[0]["parts"][0]["arguments"]["content"], "secret-1");
    assert_eq!(answered[0]["finish_reason"], "tool_calls");
    assert!(first.text("gen_ai.system_instructions").is_some());
    // The second call was sent the tool results.
    let second = chats.iter().find(|c| c.span_id != first.span_id).unwrap();
    let sent = second.text("gen_ai.input.messages").unwrap();
    assert!(
        sent.contains("tool_call_response") && sent.contains("secret-2"),
        "{sent}"
    );

    let write = named(&spans, "execute_tool write")[0];
    let arguments = write.text("gen_ai.tool.call.arguments").unwrap();
    assert!(arguments.contains("secret-1"), "{arguments}");
    let read = named(&spans, "execute_tool read")[0];
    let result = read.text("gen_ai.tool.call.result").unwrap();
    assert!(result.contains("secret-2"), "{result}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_collector_that_refuses_connections_leaves_runs_unaffected() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = two_tool_calls().await;
    let home = Home::with_model(
        &server,
        "",
        &otel(&format!("http://127.0.0.1:{port}"), false),
    );
    let (code, out, err) = home.ryvos(&["run", "write and read it"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Done."), "{out}");
    assert_eq!(
        std::fs::read_to_string(home.workspace.path().join("a.txt")).unwrap(),
        "secret-1"
    );
}

/// A caller's span, as a W3C trace context.
const CALLER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_started_through_the_socket_with_a_traceparent_is_a_child_of_the_callers_span() {
    let collector = OtlpReceiver::start().await;
    let server = two_tool_calls().await;
    let home = Home::with_model(&server, "", &otel(&collector.endpoint(), false));
    let daemon = home.daemon().await;
    let mut run = home.command(env!("CARGO_BIN_EXE_ryvos"));
    run.args(["run", "write and read it"])
        .env("TRACEPARENT", CALLER);
    let out = run.output().await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut bad = home.command(env!("CARGO_BIN_EXE_ryvos"));
    bad.args(["run", "again"]).env("TRACEPARENT", "not-a-trace");
    let refused = bad.output().await.unwrap();
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("traceparent") && said.contains("W3C"),
        "{said}"
    );
    // The daemon's last flush sends what is still queued.
    home.shutdown(daemon).await;

    let spans = collector.spans();
    let runs = named(&spans, "invoke_agent ryvos");
    assert_eq!(runs.len(), 1, "{spans:#?}");
    assert_eq!(hex(&runs[0].trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(hex(&runs[0].parent_span_id), "00f067aa0ba902b7");
    for span in &spans {
        assert_eq!(
            hex(&span.trace_id),
            "4bf92f3577b34da6a3ce929d0e0e4736",
            "{span:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_director_runs_steps_hang_under_its_run_span() {
    let collector = OtlpReceiver::start().await;
    let router: ryvos_testkit::Router = Arc::new(|request: &serde_json::Value| {
        let prompt = asked(request);
        Some(if is_judge(request) {
            Reply::text(&[r#"{"verdict": "accept", "reason": "done", "criteria": []}"#])
        } else if prompt.starts_with("[Director] Plan how") {
            Reply::text(&[
                r#"{"steps": [{"id": "a", "goal": "count"}, {"id": "b", "goal": "sum", "depends_on": ["a"]}]}"#,
            ])
        } else if prompt.starts_with("[Director] You carry out step") {
            Reply::text(&["3"])
        } else {
            Reply::text(&["It is 3."])
        })
    });
    let endpoint = collector.endpoint();
    let h = Harness::start_routed(Vec::new(), router, |config| {
        config.otel.enabled = true;
        config.otel.endpoint = endpoint;
    })
    .await;
    completes_then_stops(&h, h.request("count them").director()).await;

    let spans = collector.spans();
    let runs = named(&spans, "invoke_agent ryvos");
    let director = runs
        .iter()
        .find(|r| r.parent_span_id.is_empty())
        .expect("the Director's run is the root");
    // Every other run (planning, each step, the final answer) hangs under the Director's.
    assert!(runs.len() >= 3, "{runs:#?}");
    for run in runs.iter().filter(|r| r.span_id != director.span_id) {
        assert_eq!(run.parent_span_id, director.span_id, "{run:?}");
        assert_eq!(run.trace_id, director.trace_id);
    }
    // The steps ran in sessions of their own.
    let in_other_sessions = runs
        .iter()
        .filter(|r| r.text("gen_ai.conversation.id") != director.text("gen_ai.conversation.id"))
        .count();
    assert_eq!(in_other_sessions, 2, "one per step: {runs:#?}");
    // The Judge's evaluations hang under the runs they judged, each with its model call.
    let judges = named(&spans, "ryvos.judge");
    assert!(!judges.is_empty(), "{spans:#?}");
    for judge in &judges {
        assert!(
            runs.iter().any(|r| r.span_id == judge.parent_span_id),
            "{judge:?}"
        );
        assert_eq!(judge.text("ryvos.judge.verdict"), Some("Accept"));
        let asked = spans
            .iter()
            .filter(|s| s.parent_span_id == judge.span_id && s.name.starts_with("chat "))
            .count();
        assert_eq!(asked, 1, "{judge:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_summary_is_a_span_of_its_own_with_its_model_call_under_it() {
    const TURNS: usize = 60;
    let collector = OtlpReceiver::start().await;
    let script = Reply::reads_then(TURNS, "page", "All pages read.");
    let summaries: ryvos_testkit::Router = Arc::new(|request: &serde_json::Value| {
        let summary = request["messages"][0]["content"]
            .as_str()
            .is_some_and(|s| s.starts_with("You summarize"));
        summary.then(|| Reply::text(&["Pages were read."]))
    });
    let endpoint = collector.endpoint();
    let h = Harness::start_routed(script, summaries, |config| {
        config.agent.max_context_tokens = 3000;
        config.agent.max_turns = TURNS as u32 + 10;
        config.otel.enabled = true;
        config.otel.endpoint = endpoint;
    })
    .await;
    for i in 0..TURNS {
        let text = format!("page {i}: {}", "the quick brown fox jumps ".repeat(20));
        std::fs::write(h.workspace.path().join(format!("page{i}.txt")), text).unwrap();
    }
    completes_then_stops(&h, h.request("read every page")).await;

    let spans = collector.spans();
    let run = named(&spans, "invoke_agent ryvos")[0];
    let summaries = named(&spans, "ryvos.summarize");
    assert!(!summaries.is_empty(), "the budget forced a summary");
    for summary in &summaries {
        assert_eq!(summary.parent_span_id, run.span_id);
        assert!(matches!(summary.attr("ryvos.summary.messages"), Some(Attr::Int(n)) if *n > 0));
        let asked = spans
            .iter()
            .filter(|s| s.parent_span_id == summary.span_id && s.name == "chat scripted")
            .count();
        assert_eq!(asked, 1, "{summary:?}");
    }
    // Each compaction is an event of the run's span.
    let compactions = run
        .events
        .iter()
        .filter(|e| *e == "ryvos.compaction")
        .count();
    assert_eq!(compactions, summaries.len(), "{:?}", run.events);
    // The turns' own calls hang under the run.
    let turns = named(&spans, "chat scripted")
        .into_iter()
        .filter(|c| c.parent_span_id == run.span_id)
        .count();
    assert_eq!(turns, TURNS + 1);
}

on_both_backends! {
    /// Gauges: runs in flight and approvals waiting always; the queue's depth on a shared store.
    async fn the_gauges_report_runs_approvals_and_the_shared_queue(backend: Backend) {
        let collector = OtlpReceiver::start().await;
        let server = two_tool_calls().await;
        let home =
            Home::with_model(&server, "", &otel(&collector.endpoint(), false)).on(backend);
        let (code, _, err) = home.ryvos(&["run", "write and read it"]).await;
        assert_eq!(code, 0, "{err}");
        let metrics = collector.metric_names();
        for name in ["ryvos.runs.in_flight", "ryvos.approvals.waiting"] {
            assert!(metrics.iter().any(|m| m == name), "{name}: {metrics:?}");
        }
        let queue = metrics.iter().any(|m| m == "ryvos.queue.depth");
        assert_eq!(queue, backend == Backend::Postgres, "{metrics:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_park_is_an_event_of_the_runs_span_and_counted_by_reason() {
    let collector = OtlpReceiver::start().await;
    let look = [("g1", "glob", r#"{"pattern": "*"}"#)];
    let script = vec![
        Reply::tool_calls(&look).usage(Some((1000, 1000))),
        Reply::text(&["never asked"]),
    ];
    let endpoint = collector.endpoint();
    let h = Harness::start(script, |config| {
        common::budget::priced(config);
        config.otel.enabled = true;
        config.otel.endpoint = endpoint;
    })
    .await;
    let (_, outcome) = h.run(h.request("look around")).await;
    assert_eq!(
        outcome.status,
        ryvos::RunStatus::Parked,
        "{:?}",
        outcome.reason
    );
    h.runtime.shutdown().await.unwrap();

    let spans = collector.spans();
    let run = named(&spans, "invoke_agent ryvos")[0];
    assert!(
        run.events.iter().any(|e| e == "ryvos.run.parked"),
        "{:?}",
        run.events
    );
    assert_eq!(run.text("ryvos.run.status"), Some("parked"));
    assert!(run.attr("error.type").is_none(), "a park is not an error");
    let metrics = collector.metric_names();
    assert!(
        metrics.iter().any(|m| m == "ryvos.runs.parked"),
        "{metrics:?}"
    );
}
