//! The OpenAI-compatible provider against the shapes real servers stream, over real HTTP.

use bytes::Bytes;
use ryvos::config::ModelConfig;
use ryvos::protocol::message::Message;
use ryvos::provider::{from_config, ChatRequest, ProviderError};
use ryvos::testing::{AssistantResponse, ResponseAssembler};
use ryvos::Provider;
use ryvos_testkit::{Part, Reply, ScriptedModelServer};
use std::sync::Arc;
use std::time::Duration;

fn provider(server: &ScriptedModelServer, idle_secs: u64) -> Arc<dyn Provider> {
    from_config(&ModelConfig {
        base_url: server.base_url(),
        api_key: String::new(),
        model: "scripted".into(),
        stream_idle_timeout_secs: idle_secs,
        ..ModelConfig::default()
    })
    .unwrap()
}

fn request() -> ChatRequest {
    ChatRequest {
        system: "be brief".into(),
        messages: Arc::new(vec![Arc::new(Message::user("hi"))]),
        tools: Arc::new(Vec::new()),
    }
}

async fn answer(provider: &Arc<dyn Provider>) -> Result<AssistantResponse, ProviderError> {
    use futures_util::StreamExt;
    let mut stream = provider.stream(&request()).await?;
    let mut assembler = ResponseAssembler::new();
    while let Some(delta) = stream.next().await {
        assembler.push(delta?);
    }
    assembler.finish(true)
}

fn bytes(text: &[u8]) -> Part {
    Part::Bytes(Bytes::copy_from_slice(text))
}

fn pause() -> Part {
    Part::Pause(Duration::from_millis(30))
}

#[tokio::test]
async fn crlf_comments_missing_fields_and_a_split_utf8_character_are_read_byte_exact() {
    // "é" is 0xC3 0xA9: the two bytes go out in separate writes.
    let parts = vec![
        bytes(b": keep-alive comment\r\n\r\n"),
        bytes(b"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\r\n\r\n"),
        pause(),
        bytes(b"data: {\"choices\":[{\"delta\":{\"content\":\"caf\xC3"),
        pause(),
        bytes(b"\xA9 \"}}]}\r\n\r\n"),
        bytes(b"data: {\"choices\":[{\"delta\":{\"content\":\"ol\\u00e9\"},\"finish_reason\":null}]}\n\n"),
        bytes(b"data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\r\n\r\ndata: [DONE]\r\n\r\n"),
    ];
    let server = ScriptedModelServer::start([Reply::raw(parts)]).await;
    let answer = answer(&provider(&server, 30)).await.unwrap();
    assert_eq!(answer.text, "café olé");
    assert!(answer.usage.is_none());
}

#[tokio::test]
async fn whole_calls_in_one_chunk_and_interleaved_fragments_both_assemble() {
    let server = ScriptedModelServer::start([
        Reply::events(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"read","arguments":"{\"path\":\"x\"}"}},{"index":1,"id":"b","type":"function","function":{"name":"glob","arguments":"{\"pattern\":\"*\"}"}}]},"finish_reason":"tool_calls"}]}"#,
        ]),
        Reply::tool_calls(&[("c1", "read", r#"{"path": "a"}"#), ("c2", "grep", r#"{"pattern": "fn main"}"#)]),
    ])
    .await;
    let p = provider(&server, 30);
    let whole = answer(&p).await.unwrap();
    assert_eq!(whole.tool_calls.len(), 2);
    assert_eq!(whole.tool_calls[1].arguments, r#"{"pattern":"*"}"#);
    let fragmented = answer(&p).await.unwrap();
    assert_eq!(fragmented.tool_calls[0].arguments, r#"{"path": "a"}"#);
    assert_eq!(
        fragmented.tool_calls[1].arguments,
        r#"{"pattern": "fn main"}"#
    );
    assert_eq!(fragmented.usage.map(|u| u.input_tokens), Some(12));
}

#[tokio::test]
async fn a_malformed_chunk_is_an_error_naming_the_line() {
    let server = ScriptedModelServer::start([Reply::events(&[
        r#"{"choices":[{"delta":{"content":"ok"}}]}"#,
        r#"{"choices":[{"delta":{"content": oops}}]}"#,
    ])])
    .await;
    match answer(&provider(&server, 30)).await {
        Err(ProviderError::Malformed { line, .. }) => assert!(line.contains("oops"), "{line}"),
        other => panic!("expected a malformed-chunk error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_stream_cut_mid_way_is_reported_as_cut() {
    let server =
        ScriptedModelServer::start([Reply::text(&["one", "two", "three"]).cut_after(2)]).await;
    match answer(&provider(&server, 30)).await {
        Err(ProviderError::StreamCut(_)) => {}
        other => panic!("expected a cut stream, got {other:?}"),
    }
}

#[tokio::test]
async fn http_errors_keep_the_status_message_and_retry_after() {
    let server = ScriptedModelServer::start([Reply::error(503, "overloaded").retry_after(7)]).await;
    assert_eq!(
        answer(&provider(&server, 30)).await.unwrap_err(),
        ProviderError::Http {
            status: 503,
            message: "overloaded".into(),
            retry_after: Some(Duration::from_secs(7)),
        }
    );
}

#[tokio::test]
async fn a_silent_stream_is_cut_after_its_idle_timeout() {
    let server = ScriptedModelServer::start([Reply::raw(vec![
        bytes(b"data: {\"choices\":[{\"delta\":{\"content\":\"thinking\"}}]}\n\n"),
        Part::Pause(Duration::from_secs(30)),
        bytes(b"data: [DONE]\n\n"),
    ])])
    .await;
    match answer(&provider(&server, 1)).await {
        Err(ProviderError::IdleTimeout(d)) => assert_eq!(d, Duration::from_secs(1)),
        other => panic!("expected an idle timeout, got {other:?}"),
    }
}

#[tokio::test]
async fn an_unreachable_server_is_a_connection_error() {
    let server = ScriptedModelServer::start([]).await;
    let url = server.base_url();
    drop(server);
    let p = from_config(&ModelConfig {
        base_url: url,
        api_key: String::new(),
        ..ModelConfig::default()
    })
    .unwrap();
    // The listener may take a moment to close; either way nothing answers a chat request.
    let err = answer(&p).await.unwrap_err();
    assert!(
        matches!(
            err,
            ProviderError::Connect(_) | ProviderError::StreamCut(_) | ProviderError::Http { .. }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn an_unset_api_key_variable_is_named() {
    let server = ScriptedModelServer::start([Reply::text(&["x"])]).await;
    let p = from_config(&ModelConfig {
        base_url: server.base_url(),
        api_key: "${RYVOS_TEST_KEY_THAT_IS_NOT_SET}".into(),
        ..ModelConfig::default()
    })
    .unwrap();
    let err = answer(&p).await.unwrap_err().to_string();
    assert!(err.contains("RYVOS_TEST_KEY_THAT_IS_NOT_SET"), "{err}");
    assert!(
        server.requests().is_empty(),
        "no request leaves without its key"
    );
}
