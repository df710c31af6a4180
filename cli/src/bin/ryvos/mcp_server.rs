//! `ryvos mcp-server`: Ryvos itself as an MCP server on stdin/stdout, so an editor or another
//! agent can hand work to a supervised, durable Ryvos run. Tools: `run` (a prompt to its end:
//! the final answer and the session id), `sessions` and `history`. It goes through the running
//! daemon when one answers, and otherwise hosts the runtime in this process.
//!
//! Stdout carries the protocol alone: everything else this process says goes to stderr.

use crate::exit::EXIT_RUN_FAILED;
use crate::host::{Fed, Host};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use ryvos::config::Config;
use ryvos::protocol::RunParams;
use ryvos::{RunOutcome, SessionId};
use serde::Deserialize;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Clone)]
struct RyvosServer {
    host: Arc<Host>,
}

/// Serves MCP on stdin/stdout until the client leaves; the exit code.
pub async fn serve(config: Config, socket: PathBuf) -> u8 {
    let host = match Host::find(config, socket, "mcp-server").await {
        Ok(host) => host,
        Err(code) => return code,
    };
    let server = RyvosServer {
        host: Arc::new(host),
    };
    let code = match server.clone().serve(rmcp::transport::stdio()).await {
        Ok(running) => match running.waiting().await {
            Ok(_) => 0,
            Err(e) => {
                eprintln!("ryvos mcp-server: {e}");
                EXIT_RUN_FAILED
            }
        },
        Err(e) => {
            eprintln!("ryvos mcp-server: the client's handshake failed: {e}");
            EXIT_RUN_FAILED
        }
    };
    if let Err(e) = server.host.close().await {
        eprintln!("ryvos mcp-server: stopping the runtime: {e}");
        return EXIT_RUN_FAILED;
    }
    code
}

/// A tool of this server, with its JSON Schema.
fn tool(name: &'static str, description: &'static str, schema: Value) -> Tool {
    let Value::Object(schema) = schema else {
        unreachable!("every schema here is an object literal")
    };
    Tool::new(name, description, Arc::new(schema))
}

fn tools() -> Vec<Tool> {
    vec![
        tool(
            "run",
            "Run a prompt with a Ryvos agent to its end (tools, approvals, limits and \
             checkpoints as configured) and return its final answer and session id. Give \
             `session` to continue a session.",
            json!({
                "type": "object",
                "properties": {
                    "prompt": {"type": "string", "description": "What the agent should do."},
                    "workspace": {"type": "string", "description": "Absolute directory the agent's file tools work in (default: this server's directory)."},
                    "session": {"type": "string", "description": "A session id to continue (or create)."}
                },
                "required": ["prompt"],
                "additionalProperties": false
            }),
        ),
        tool(
            "sessions",
            "List Ryvos's sessions, most recent first: id, status of the latest run, first prompt.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        ),
        tool(
            "history",
            "Show a Ryvos session: its messages, runs and security decisions.",
            json!({
                "type": "object",
                "properties": {"session": {"type": "string", "description": "The session id."}},
                "required": ["session"],
                "additionalProperties": false
            }),
        ),
    ]
}

/// `run`'s arguments, as its input schema says.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunArguments {
    prompt: NonEmpty,
    #[serde(default)]
    workspace: Option<String>,
    #[serde(default)]
    session: Option<String>,
}

/// `history`'s arguments.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HistoryArguments {
    session: String,
}

/// `sessions` takes none.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoArguments {}

/// A string with something in it.
#[derive(Deserialize)]
#[serde(try_from = "String")]
struct NonEmpty(String);

impl TryFrom<String> for NonEmpty {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        match text.trim().is_empty() {
            true => Err("it is empty: say what the run should do".into()),
            false => Ok(NonEmpty(text)),
        }
    }
}

impl From<NonEmpty> for String {
    fn from(text: NonEmpty) -> String {
        text.0
    }
}

/// A tool's arguments read as `T`. Input that does not fit is a tool execution error (MCP
/// 2025-11-25, SEP-1303), so the model can correct itself, naming the argument and what was
/// expected.
fn arguments_of<T: serde::de::DeserializeOwned>(tool: &str, arguments: Value) -> Result<T, String> {
    serde_path_to_error::deserialize(arguments).map_err(|e| {
        let path = e.path().to_string();
        match path.as_str() {
            "." => format!("invalid arguments for {tool}: {}", e.inner()),
            _ => format!("invalid arguments for {tool}: `{path}`: {}", e.inner()),
        }
    })
}

impl ServerHandler for RyvosServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("ryvos", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Ryvos runs LLM agents durably: `run` hands it a task and returns the answer \
                 and the session id; `history` shows what a run did.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let result = match &*request.name {
            "run" => match arguments_of::<RunArguments>("run", arguments) {
                Ok(RunArguments {
                    prompt,
                    workspace,
                    session,
                }) => {
                    self.run(prompt.into(), workspace, session, &context.ct)
                        .await
                }
                Err(invalid) => Err(invalid),
            },
            "sessions" => match arguments_of::<NoArguments>("sessions", arguments) {
                Ok(NoArguments {}) => self.sessions().await,
                Err(invalid) => Err(invalid),
            },
            "history" => match arguments_of::<HistoryArguments>("history", arguments) {
                Ok(HistoryArguments { session }) => self.history(session).await,
                Err(invalid) => Err(invalid),
            },
            other => {
                return Err(McpError::invalid_params(
                    format!("no tool named '{other}': the tools are run, sessions, history"),
                    None,
                ))
            }
        };
        Ok(result
            .unwrap_or_else(|e| CallToolResult::error(vec![ContentBlock::text(e)]))
            .into())
    }
}

impl RyvosServer {
    /// Runs `prompt` to its end; a request the client cancels cancels the run.
    async fn run(
        &self,
        prompt: String,
        workspace: Option<String>,
        session: Option<String>,
        cancelled: &tokio_util::sync::CancellationToken,
    ) -> Result<CallToolResult, String> {
        let workspace = match workspace {
            Some(w) => PathBuf::from(w),
            None => std::env::current_dir().map_err(|e| format!("no workspace: {e}"))?,
        };
        let workspace = workspace
            .canonicalize()
            .map_err(|e| format!("the workspace {}: {e}", workspace.display()))?;
        // Named here, so that a cancelled request can name the run's session.
        let session = session.map_or_else(SessionId::generate, SessionId::new);
        tokio::select! {
            outcome = self.run_to_end(prompt, workspace, session.clone()) => {
                Ok(answer(&outcome?))
            }
            () = cancelled.cancelled() => {
                if let Err(e) = self.host.cancel(&session).await {
                    eprintln!("ryvos mcp-server: cancelling the run of session {session}: {e}");
                }
                Err(format!("the request was cancelled, and with it the run (session {session})"))
            }
        }
    }

    /// Runs `prompt` on `session` to its end.
    async fn run_to_end(
        &self,
        prompt: String,
        workspace: PathBuf,
        session: SessionId,
    ) -> Result<RunOutcome, String> {
        let params = RunParams::new(prompt, workspace.display().to_string());
        let mut feed = self.host.start(params, &session).await?;
        loop {
            if let Fed::End(outcome) = feed.next().await {
                return outcome;
            }
        }
    }

    async fn sessions(&self) -> Result<CallToolResult, String> {
        as_json(&self.host.sessions().await?)
    }

    async fn history(&self, session: String) -> Result<CallToolResult, String> {
        let history = (self.host.history(&SessionId::new(session.as_str())).await?)
            .ok_or_else(|| format!("there is no session {session}"))?;
        as_json(&history)
    }
}

/// A run's end as a tool result: the answer, and a line with its session and status; an error
/// result unless it completed.
fn answer(outcome: &RunOutcome) -> CallToolResult {
    let why = outcome
        .reason
        .as_deref()
        .map(|r| format!(": {r}"))
        .unwrap_or_default();
    let text = format!(
        "{}\n\n[ryvos session {}, status {}{why}]",
        outcome.output, outcome.session_id, outcome.status
    );
    let mut result = if outcome.status == ryvos::RunStatus::Completed {
        CallToolResult::success(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::error(vec![ContentBlock::text(text)])
    };
    result.structured_content = Some(json!({
        "session_id": outcome.session_id,
        "run_id": outcome.run_id,
        "status": outcome.status,
        "output": outcome.output,
    }));
    result
}

fn as_json<T: serde::Serialize>(value: &T) -> Result<CallToolResult, String> {
    let text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
    Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
}
