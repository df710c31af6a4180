//! One tool of an MCP server, as the model sees it (`<server>__<tool>`, the server's schema,
//! the tier the config gives it) and as a call reaches the server.

use super::link::Link;
use crate::tools::{Effect, SafetyTier, Tool, ToolContext, ToolError};
use async_trait::async_trait;
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock, ResourceContents};
use std::sync::Arc;
use std::time::Duration;

/// Where a call's idempotency key goes in the request's `_meta`.
const IDEMPOTENCY_KEY: &str = "idempotencyKey";

/// Tool names models accept: `[A-Za-z0-9_-]{1,64}`.
const MAX_NAME: usize = 64;

/// A server's tool.
pub(crate) struct McpTool {
    /// `<server>__<tool>`, made safe for models.
    name: String,
    /// The tool's name on its server.
    remote: String,
    description: String,
    schema: serde_json::Value,
    tier: SafetyTier,
    /// What its calls may do, for their recovery after a crash.
    effect: Effect,
    timeout: Duration,
    link: Arc<Link>,
}

impl McpTool {
    pub(crate) fn new(
        server: &str,
        tool: &rmcp::model::Tool,
        (tier, effect): (SafetyTier, Effect),
        timeout: Duration,
        link: Arc<Link>,
    ) -> Self {
        let description = tool
            .description
            .as_deref()
            .or(tool.title.as_deref())
            .unwrap_or("")
            .to_owned();
        let mut schema = serde_json::Value::Object((*tool.input_schema).clone());
        // Some servers leave out the type of an argument-less tool; models require an object.
        if schema.get("type").is_none() {
            schema["type"] = "object".into();
        }
        Self {
            name: exposed_name(server, &tool.name),
            remote: tool.name.to_string(),
            description: format!("[{server}] {description}"),
            schema,
            tier,
            effect,
            timeout,
            link,
        }
    }
}

/// What a server says its tool's calls do (`readOnlyHint`, `idempotentHint`), if it says.
pub(crate) fn said_effect(tool: &rmcp::model::Tool) -> Option<Effect> {
    let hints = tool.annotations.as_ref()?;
    match (hints.read_only_hint, hints.idempotent_hint) {
        (Some(true), _) => Some(Effect::ReadOnly),
        (_, Some(true)) => Some(Effect::Idempotent),
        _ => None,
    }
}

/// `<server>__<tool>`, with what models refuse in a tool name replaced by `_`, at most 64 bytes.
pub(crate) fn exposed_name(server: &str, tool: &str) -> String {
    let name: String = format!("{server}__{tool}")
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '-' => c,
            _ => '_',
        })
        .collect();
    name.chars().take(MAX_NAME).collect()
}

#[async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> serde_json::Value {
        self.schema.clone()
    }

    fn tier(&self) -> SafetyTier {
        self.tier
    }

    fn effect(&self, _input: &serde_json::Value) -> Effect {
        self.effect
    }

    async fn execute(
        &self,
        input: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<String, ToolError> {
        let peer = self.link.peer().map_err(ToolError::Execution)?;
        let mut params = CallToolRequestParams::new(self.remote.clone());
        if let serde_json::Value::Object(arguments) = input {
            params = params.with_arguments(arguments);
        }
        if let Some(call) = &ctx.call {
            // MCP has no key of its own: a server that dedupes reads it here.
            let mut meta = rmcp::model::RequestMetaObject::new();
            let key = call.idempotency_key.clone();
            meta.0 .0.insert(IDEMPOTENCY_KEY.into(), key.into());
            params.meta = Some(meta);
        }
        let called = tokio::select! {
            called = tokio::time::timeout(self.timeout, peer.call_tool(params)) => called,
            () = ctx.cancel.cancelled() => {
                return Err(ToolError::Execution("cancelled: the run stopped".into()));
            }
        };
        match called {
            Err(_) => Err(ToolError::Execution(format!(
                "timed out after {}s ([mcp.servers.{}] timeout_secs)",
                self.timeout.as_secs(),
                self.link.server()
            ))),
            Ok(Err(e)) => Err(ToolError::Execution(format!(
                "the MCP server '{}' answered with an error: {e}",
                self.link.server()
            ))),
            Ok(Ok(result)) if result.is_error == Some(true) => {
                Err(ToolError::Execution(rendered(&result)))
            }
            Ok(Ok(result)) => Ok(rendered(&result)),
        }
    }
}

/// What the model is given of a result: its text, and a line describing each other item.
pub(crate) fn rendered(result: &CallToolResult) -> String {
    let mut parts: Vec<String> = result.content.iter().map(described).collect();
    if parts.is_empty() {
        if let Some(structured) = &result.structured_content {
            parts.push(structured.to_string());
        }
    }
    parts.join("\n")
}

fn described(content: &ContentBlock) -> String {
    match content {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => {
            format!(
                "[image: {} bytes, {}]",
                decoded_len(&image.data),
                image.mime_type
            )
        }
        ContentBlock::Audio(audio) => {
            format!(
                "[audio: {} bytes, {}]",
                decoded_len(&audio.data),
                audio.mime_type
            )
        }
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => {
                format!("[resource {uri}]\n{text}")
            }
            ResourceContents::BlobResourceContents {
                uri,
                blob,
                mime_type,
                ..
            } => format!(
                "[resource {uri}: {} bytes, {}]",
                decoded_len(blob),
                mime_type.as_deref().unwrap_or("binary")
            ),
            _ => "[resource of a kind Ryvos does not read]".to_owned(),
        },
        ContentBlock::ResourceLink(link) => format!("[resource link: {}]", link.uri),
        // Kinds newer than this client.
        _ => "[content of a kind Ryvos does not read]".to_owned(),
    }
}

/// The size of base64 `data` once decoded.
fn decoded_len(data: &str) -> usize {
    let padding = data.bytes().rev().take_while(|b| *b == b'=').count();
    (data.len() / 4 * 3).saturating_sub(padding)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_prefixed_and_safe_for_models() {
        assert_eq!(exposed_name("files", "read_file"), "files__read_file");
        assert_eq!(exposed_name("gh", "issues.list/all"), "gh__issues_list_all");
        assert_eq!(exposed_name("s", &"x".repeat(100)).len(), 64);
    }

    #[test]
    fn other_content_is_described_in_a_line() {
        let result: CallToolResult = serde_json::from_value(serde_json::json!({
            "content": [
                {"type": "text", "text": "hello"},
                {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///a", "text": "body"}}
            ]
        }))
        .unwrap();
        assert_eq!(
            rendered(&result),
            "hello\n[image: 5 bytes, image/png]\n[resource file:///a]\nbody"
        );
    }
}
