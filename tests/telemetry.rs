//! OpenTelemetry end to end: the real `ryvos` binary exporting to a real OTLP/HTTP collector
//! on 127.0.0.1 (the testkit's, decoding the official protobuf messages).

mod common;

use common::home::Home;
use ryvos_testkit::otlp::{Attr, OtlpReceiver, ReceivedSpan};
use ryvos_testkit::{Reply, ScriptedModelServer};

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
        assert!(chat.attr("gen_ai.usage.output_tokens").is_some());
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
