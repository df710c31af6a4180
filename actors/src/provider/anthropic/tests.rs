//! The Anthropic provider's conversion and stream parsing, without a server.

use super::events::EventParser;
use super::request::{wire_messages, WireRequest, WireTool};
use super::*;
use crate::ids::CallId;
use crate::message::Message;
use crate::message::ToolCall;
use crate::provider::sse::decode_events;
use crate::provider::{FinishReason, ResponseAssembler, ToolSpec, Usage};
use eventsource_stream::EventStreamError;
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::time::Duration;

fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: CallId::new(id),
        name: name.into(),
        arguments: arguments.into(),
    }
}

fn result(id: &str, content: &str, is_error: bool) -> Message {
    Message::ToolResult {
        call_id: CallId::new(id),
        name: "read".into(),
        content: content.into(),
        is_error,
    }
}

fn wire(messages: Vec<Message>) -> Value {
    let messages: Vec<Arc<Message>> = messages.into_iter().map(Arc::new).collect();
    serde_json::to_value(wire_messages(&messages)).unwrap()
}

#[test]
fn tool_results_and_a_hint_share_one_user_message_results_first() {
    let got = wire(vec![
        Message::user("read a.txt and b.txt"),
        Message::assistant(
            "Reading.",
            vec![
                call("toolu_1", "read", r#"{"path":"a.txt"}"#),
                call("toolu_2", "read", r#"{"path": "b.t"#),
            ],
        ),
        result("toolu_1", "alpha", false),
        Message::System {
            content: "be brief".into(),
        },
        result("toolu_2", "no such file", true),
        Message::Assistant {
            content: String::new(),
            tool_calls: Vec::new(),
            reasoning: Vec::new(),
        },
    ]);
    let expected = json!([
        {"role": "user", "content": [{"type": "text", "text": "read a.txt and b.txt"}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.txt"}},
            {"type": "tool_use", "id": "toolu_2", "name": "read", "input": {}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "alpha"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "no such file",
             "is_error": true},
            {"type": "text", "text": "[System] be brief"},
        ]},
        {"role": "assistant", "content": [{"type": "text", "text": "(no answer)"}]},
    ]);
    assert_eq!(got, expected);
}

#[test]
fn a_conversation_never_starts_with_the_assistant() {
    let got = wire(vec![
        Message::Assistant {
            content: "Earlier answer.".into(),
            tool_calls: vec![call("toolu_1", "glob", "")],
            reasoning: Vec::new(),
        },
        result("toolu_1", "a.rs", false),
    ]);
    assert_eq!(got[0]["role"], "user");
    assert_eq!(got[0]["content"][0]["text"], "(conversation continues)");
    assert_eq!(got[1]["role"], "assistant");
    assert_eq!(got[1]["content"][1]["input"], json!({}));
    assert_eq!(got[2]["content"][0]["type"], "tool_result");
}

#[test]
fn the_request_omits_an_empty_system_and_tools_but_not_the_limit() {
    let request = ChatRequest {
        system: "".into(),
        messages: Arc::new(vec![Arc::new(Message::user("hi"))]),
        tools: Arc::new(Vec::new()),
    };
    let body = serde_json::to_value(WireRequest::new("claude", 1024, &request)).unwrap();
    assert_eq!(body["max_tokens"], 1024);
    assert_eq!(body["stream"], true);
    assert!(
        body.get("system").is_none() && body.get("tools").is_none(),
        "{body}"
    );
    let spec = ToolSpec {
        name: "read".into(),
        description: "Reads a file.".into(),
        parameters: json!({"type": "object"}),
    };
    let tool = serde_json::to_value(WireTool::from(&spec)).unwrap();
    assert_eq!(tool["input_schema"], json!({"type": "object"}));
}

const TOOL_TURN: &[(&str, &str)] = &[
    (
        "message_start",
        r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}"#,
    ),
    (
        "content_block_start",
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
    ),
    ("ping", r#"{"type":"ping"}"#),
    (
        "content_block_delta",
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me "}}"#,
    ),
    (
        "content_block_delta",
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"look."}}"#,
    ),
    (
        "content_block_stop",
        r#"{"type":"content_block_stop","index":0}"#,
    ),
    (
        "content_block_start",
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01","name":"read","input":{}}}"#,
    ),
    (
        "content_block_delta",
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}"#,
    ),
    (
        "content_block_delta",
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"path\": \"a"}}"#,
    ),
    (
        "content_block_delta",
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":".txt\"}"}}"#,
    ),
    (
        "content_block_stop",
        r#"{"type":"content_block_stop","index":1}"#,
    ),
    (
        "message_delta",
        r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":42}}"#,
    ),
    ("message_stop", r#"{"type":"message_stop"}"#),
];

#[test]
fn a_tool_turn_assembles_into_text_one_call_and_usage() {
    let mut parser = EventParser::default();
    let mut assembler = ResponseAssembler::new();
    for (i, (_, data)) in TOOL_TURN.iter().enumerate() {
        let parsed = parser.parse(data).unwrap();
        assert_eq!(parsed.end, i == TOOL_TURN.len() - 1, "event {i}");
        for delta in parsed.deltas {
            assembler.push(delta);
        }
    }
    let r = assembler.finish(true).unwrap();
    assert_eq!(r.text, "Let me look.");
    assert_eq!(r.tool_calls.len(), 1);
    assert_eq!(r.tool_calls[0].id.as_str(), "toolu_01");
    assert_eq!(r.tool_calls[0].name, "read");
    assert_eq!(r.tool_calls[0].arguments, r#"{"path": "a.txt"}"#);
    assert_eq!(r.finish, Some(FinishReason::ToolCalls));
    assert_eq!(r.id.as_deref(), Some("msg_1"));
    assert_eq!(
        r.usage,
        Some(Usage {
            input_tokens: 25,
            output_tokens: 42
        })
    );
}

#[test]
fn a_call_without_input_gets_an_empty_object_and_unknown_events_are_ignored() {
    let mut parser = EventParser::default();
    let mut assembler = ResponseAssembler::new();
    for data in [
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_9","name":"now","input":{}}}"#,
        r#"{"type":"content_block_stop","index":1}"#,
        r#"{"type":"some_future_event","x":1}"#,
    ] {
        for delta in parser.parse(data).unwrap().deltas {
            assembler.push(delta);
        }
    }
    let r = assembler.finish(true).unwrap();
    assert_eq!(r.text, "");
    assert_eq!(r.tool_calls.len(), 1);
    assert_eq!(r.tool_calls[0].arguments, "{}");
}

#[test]
fn an_error_event_is_a_stream_error() {
    let data = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    assert_eq!(
        EventParser::default().parse(data),
        Err(ProviderError::Stream("Overloaded".into()))
    );
}

#[test]
fn a_malformed_event_names_the_line() {
    match EventParser::default().parse(r#"{"type":"content_block_delta", oops"#) {
        Err(ProviderError::Malformed { line, .. }) => assert!(line.contains("oops")),
        other => panic!("{other:?}"),
    }
}

fn events(items: &[(&str, &str)]) -> crate::provider::sse::SseEvents {
    let items: Vec<Result<eventsource_stream::Event, EventStreamError<reqwest::Error>>> = items
        .iter()
        .map(|(name, data)| {
            Ok(eventsource_stream::Event {
                event: name.to_string(),
                data: data.to_string(),
                ..eventsource_stream::Event::default()
            })
        })
        .collect();
    Box::pin(futures_util::stream::iter(items))
}

#[tokio::test]
async fn the_stream_ends_at_message_stop_and_is_cut_without_it() {
    let decode = || {
        let mut parser = EventParser::default();
        move |data: &str| parser.parse(data)
    };
    let whole: Vec<_> = decode_events(events(TOOL_TURN), Duration::from_secs(1), decode())
        .collect()
        .await;
    assert!(whole.iter().all(Result::is_ok), "{whole:?}");
    let cut: Vec<_> = decode_events(events(&TOOL_TURN[..6]), Duration::from_secs(1), decode())
        .collect()
        .await;
    assert!(
        matches!(cut.last(), Some(Err(ProviderError::StreamCut(_)))),
        "{cut:?}"
    );
}
