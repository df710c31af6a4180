//! The Responses provider's request and stream parsing, without a server.

use super::events::EventParser;
use super::request::WireRequest;
use crate::ids::CallId;
use crate::message::{Message, Reasoning, ToolCall};
use crate::provider::{ChatRequest, FinishReason, ResponseAssembler, StreamDelta, ToolSpec};
use serde_json::{json, Value};
use std::sync::Arc;

fn call(id: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: CallId::new(id),
        name: "read".into(),
        arguments: arguments.into(),
    }
}

fn request(messages: Vec<Message>) -> Value {
    let request = ChatRequest {
        system: "be exact".into(),
        messages: Arc::new(messages.into_iter().map(Arc::new).collect()),
        tools: Arc::new(vec![ToolSpec {
            name: "read".into(),
            description: "reads a file".into(),
            parameters: json!({"type": "object"}),
        }]),
    };
    serde_json::to_value(WireRequest::new("gpt-test", 100, &request)).unwrap()
}

#[test]
fn the_conversation_is_input_items_with_reasoning_passed_back_before_its_output() {
    let thought = Reasoning {
        id: "rs_1".into(),
        summary: vec!["look at a first".into()],
        encrypted_content: Some("gAAA-opaque".into()),
    };
    let got = request(vec![
        Message::user("read a.txt and b.txt"),
        Message::Assistant {
            content: "Reading.".into(),
            tool_calls: vec![
                call("call_1", r#"{"path":"a.txt"}"#),
                call("call 2", "{\"pa"),
            ],
            reasoning: vec![thought],
        },
        Message::ToolResult {
            call_id: CallId::new("call_1"),
            name: "read".into(),
            content: "alpha".into(),
            is_error: false,
        },
        Message::ToolResult {
            call_id: CallId::new("call 2"),
            name: "read".into(),
            content: "error: the arguments are not JSON".into(),
            is_error: true,
        },
        Message::System {
            content: "be brief".into(),
        },
    ]);
    assert_eq!(got["instructions"], "be exact");
    assert_eq!(got["store"], false);
    assert_eq!(got["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(got["max_output_tokens"], 100);
    assert_eq!(got["stream"], true);
    assert_eq!(
        got["tools"],
        json!([{"type": "function", "name": "read", "description": "reads a file",
                "parameters": {"type": "object"}, "strict": false}])
    );
    assert_eq!(
        got["input"],
        json!([
            {"type": "message", "role": "user", "content": "read a.txt and b.txt"},
            {"type": "reasoning", "id": "rs_1",
             "summary": [{"type": "summary_text", "text": "look at a first"}],
             "encrypted_content": "gAAA-opaque"},
            {"type": "message", "role": "assistant", "content": "Reading."},
            {"type": "function_call", "call_id": "call_1", "name": "read",
             "arguments": "{\"path\":\"a.txt\"}"},
            // A garbled call is replayed as every server accepts it, its result with it.
            {"type": "function_call", "call_id": "call_2", "name": "read", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "alpha"},
            {"type": "function_call_output", "call_id": "call_2",
             "output": "error: the arguments are not JSON"},
            {"type": "message", "role": "user", "content": "[System] be brief"},
        ])
    );
}

#[test]
fn reasoning_without_the_output_that_followed_it_is_not_sent() {
    let got = request(vec![
        Message::user("hi"),
        Message::Assistant {
            content: String::new(),
            tool_calls: Vec::new(),
            reasoning: vec![Reasoning {
                id: "rs_9".into(),
                summary: Vec::new(),
                encrypted_content: Some("x".into()),
            }],
        },
        Message::user("again"),
    ]);
    let kinds: Vec<&str> = got["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["message", "message"]);
}

fn parse(events: &[Value]) -> (Vec<StreamDelta>, bool) {
    let mut parser = EventParser::default();
    let mut deltas = Vec::new();
    let mut ended = false;
    for event in events {
        let decoded = parser.parse(&event.to_string()).unwrap();
        deltas.extend(decoded.deltas);
        ended |= decoded.end;
    }
    (deltas, ended)
}

fn assembled(deltas: Vec<StreamDelta>) -> crate::provider::AssistantResponse {
    let mut assembler = ResponseAssembler::new();
    for delta in deltas {
        assembler.push(delta);
    }
    assembler.finish(true).unwrap()
}

#[test]
fn a_streamed_answer_with_reasoning_text_and_parallel_calls_is_assembled() {
    let (deltas, ended) = parse(&[
        json!({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}}),
        json!({"type": "response.output_item.added", "output_index": 0,
               "item": {"type": "reasoning", "id": "rs_1", "summary": []}}),
        json!({"type": "response.output_item.done", "output_index": 0,
               "item": {"type": "reasoning", "id": "rs_1",
                        "summary": [{"type": "summary_text", "text": "two files"}],
                        "encrypted_content": "enc"}}),
        json!({"type": "response.output_item.added", "output_index": 1,
               "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []}}),
        json!({"type": "response.output_text.delta", "output_index": 1, "delta": "Read"}),
        json!({"type": "response.output_text.delta", "output_index": 1, "delta": "ing."}),
        json!({"type": "response.output_item.done", "output_index": 1,
               "item": {"type": "message", "content": [{"type": "output_text", "text": "Reading."}]}}),
        json!({"type": "response.output_item.added", "output_index": 2,
               "item": {"type": "function_call", "call_id": "call_a", "name": "read", "arguments": ""}}),
        json!({"type": "response.output_item.added", "output_index": 3,
               "item": {"type": "function_call", "call_id": "call_b", "name": "read", "arguments": ""}}),
        json!({"type": "response.function_call_arguments.delta", "output_index": 2, "delta": "{\"path\":"}),
        json!({"type": "response.function_call_arguments.delta", "output_index": 3, "delta": "{\"path\":\"b\"}"}),
        json!({"type": "response.function_call_arguments.delta", "output_index": 2, "delta": "\"a\"}"}),
        json!({"type": "response.output_item.done", "output_index": 2,
               "item": {"type": "function_call", "call_id": "call_a", "name": "read",
                        "arguments": "{\"path\":\"a\"}"}}),
        // A server that sends a call whole at its end is taken at its word.
        json!({"type": "response.output_item.done", "output_index": 4,
               "item": {"type": "function_call", "call_id": "call_c", "name": "glob",
                        "arguments": "{\"pattern\":\"*\"}"}}),
        json!({"type": "response.completed", "response": {"id": "resp_1", "status": "completed",
               "usage": {"input_tokens": 40, "output_tokens": 12,
                         "output_tokens_details": {"reasoning_tokens": 8}}}}),
    ]);
    assert!(ended);
    let answer = assembled(deltas);
    assert_eq!(answer.id.as_deref(), Some("resp_1"));
    assert_eq!(answer.text, "Reading.");
    assert_eq!(answer.finish, Some(FinishReason::ToolCalls));
    assert_eq!(
        answer.usage.map(|u| (u.input_tokens, u.output_tokens)),
        Some((40, 12))
    );
    let calls: Vec<(&str, &str)> = answer
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.arguments.as_str()))
        .collect();
    assert_eq!(
        calls,
        [
            ("call_a", "{\"path\":\"a\"}"),
            ("call_b", "{\"path\":\"b\"}"),
            ("call_c", "{\"pattern\":\"*\"}")
        ]
    );
    assert_eq!(
        answer.reasoning,
        [Reasoning {
            id: "rs_1".into(),
            summary: vec!["two files".into()],
            encrypted_content: Some("enc".into()),
        }]
    );
}

#[test]
fn an_answer_cut_at_the_output_limit_says_so_and_a_failure_is_an_error() {
    let (deltas, ended) = parse(&[
        json!({"type": "response.output_item.added", "output_index": 0,
               "item": {"type": "function_call", "call_id": "call_a", "name": "write", "arguments": ""}}),
        json!({"type": "response.function_call_arguments.delta", "output_index": 0, "delta": "{\"pa"}),
        json!({"type": "response.incomplete", "response": {"status": "incomplete",
               "incomplete_details": {"reason": "max_output_tokens"},
               "usage": {"input_tokens": 5, "output_tokens": 100}}}),
    ]);
    assert!(ended);
    let answer = assembled(deltas);
    assert_eq!(answer.finish, Some(FinishReason::Length));
    assert_eq!(answer.tool_calls[0].arguments, "{\"pa");

    let mut parser = EventParser::default();
    let failed = json!({"type": "response.failed", "response": {"status": "failed",
        "error": {"code": "server_error", "message": "The server had an error"}}});
    let error = parser.parse(&failed.to_string()).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("The server had an error (server_error)"),
        "{error}"
    );
    let error = parser
        .parse(r#"{"type": "error", "code": "rate_limit_exceeded", "message": "slow down"}"#)
        .unwrap_err();
    assert!(error.to_string().contains("slow down"), "{error}");
    assert!(parser.parse("not json").is_err());
    // Events it does not know are passed over.
    assert_eq!(
        parser
            .parse(r#"{"type": "response.content_part.added", "output_index": 0}"#)
            .unwrap(),
        Default::default()
    );
}
