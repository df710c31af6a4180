//! What an editor is shown of a run: Ryvos's events and stored messages as ACP session
//! updates (the agent's text, tool calls with their kind, the paths they touch and their
//! output, a Director's plan).

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Plan as AcpPlan, PlanEntry, PlanEntryPriority, PlanEntryStatus,
    SessionUpdate, StopReason, ToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus,
    ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use ryvos::protocol::plan::{Plan, StepEvent};
use ryvos::{EventKind, Message, RunStatus};
use serde_json::Value;
use std::collections::HashSet;
use std::path::Path;

/// The most of a tool's output an update carries; the model saw it whole.
const OUTPUT_SHOWN: usize = 16 * 1024;

/// What has been told of the run so far: the calls announced, the plan and its steps.
#[derive(Default)]
pub struct Told {
    calls: HashSet<String>,
    plan: Vec<(String, String, PlanEntryStatus)>,
}

impl Told {
    /// Nothing told yet but the calls `known` (announced already, by a replayed history).
    pub fn knowing(known: impl IntoIterator<Item = String>) -> Self {
        Self {
            calls: known.into_iter().collect(),
            plan: Vec::new(),
        }
    }

    /// The updates `event` makes, in `workspace`.
    pub fn updates(&mut self, event: &EventKind, workspace: &Path) -> Vec<SessionUpdate> {
        match event {
            EventKind::TextDelta { text } => vec![agent_text(text)],
            EventKind::ApprovalRequested {
                call_id,
                tool,
                input,
                ..
            } => self.announce(
                call_id.as_str(),
                tool,
                input,
                workspace,
                ToolCallStatus::Pending,
            ),
            EventKind::ToolStart {
                call_id,
                name,
                input,
            } => self.announce(
                call_id.as_str(),
                name,
                input,
                workspace,
                ToolCallStatus::InProgress,
            ),
            EventKind::ToolEnd {
                call_id,
                is_error,
                output,
                ..
            } => vec![finished(call_id.as_str(), *is_error, output)],
            EventKind::DirectorPlan { plan, .. } => {
                self.plan = steps_of(plan);
                vec![self.plan_update()]
            }
            EventKind::DirectorStep { step, status, .. } => {
                let status = match status {
                    StepEvent::Started | StepEvent::Retrying => PlanEntryStatus::InProgress,
                    // A failed or parked step is over for this plan: ACP has no other end.
                    _ => PlanEntryStatus::Completed,
                };
                match self.plan.iter_mut().find(|(id, _, _)| id == step) {
                    Some(entry) => entry.2 = status,
                    None => return Vec::new(),
                }
                vec![self.plan_update()]
            }
            _ => Vec::new(),
        }
    }

    /// A call shown as `status`: announced the first time, updated after.
    fn announce(
        &mut self,
        call_id: &str,
        tool: &str,
        input: &Value,
        workspace: &Path,
        status: ToolCallStatus,
    ) -> Vec<SessionUpdate> {
        if !self.calls.insert(call_id.to_owned()) {
            let fields = ToolCallUpdateFields::new().status(status);
            return vec![SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                call_id.to_owned(),
                fields,
            ))];
        }
        vec![SessionUpdate::ToolCall(
            tool_call(call_id, tool, input, workspace).status(status),
        )]
    }

    fn plan_update(&self) -> SessionUpdate {
        let entries = (self.plan.iter())
            .map(|(_, goal, status)| {
                PlanEntry::new(goal.clone(), PlanEntryPriority::Medium, status.clone())
            })
            .collect();
        SessionUpdate::Plan(AcpPlan::new(entries))
    }
}

/// The steps of `plan`, none begun.
fn steps_of(plan: &Plan) -> Vec<(String, String, PlanEntryStatus)> {
    (plan.steps.iter())
        .map(|s| (s.id.clone(), s.goal.clone(), PlanEntryStatus::Pending))
        .collect()
}

/// The model's text, as the agent's message.
pub fn agent_text(text: &str) -> SessionUpdate {
    SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::from(text.to_owned())))
}

/// A tool call as an editor shows it: a title, its kind, the paths it touches, its input.
fn tool_call(call_id: &str, tool: &str, input: &Value, workspace: &Path) -> ToolCall {
    let argument = |key: &str| input.get(key).and_then(Value::as_str);
    let detail = argument("command")
        .or_else(|| argument("path"))
        .or_else(|| argument("pattern"));
    let title = match detail {
        Some(detail) => format!("{tool}: {}", first_line(detail)),
        None => tool.to_owned(),
    };
    let locations = (argument("path").into_iter())
        .map(|path| ToolCallLocation::new(workspace.join(path)))
        .collect::<Vec<_>>();
    ToolCall::new(call_id.to_owned(), title)
        .kind(kind_of(tool))
        .locations(locations)
        .raw_input(input.clone())
}

/// The first line of `text`, at most 120 bytes.
fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    match line.char_indices().nth(120) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    }
}

/// What kind of call `tool` makes, for the editor's icon.
fn kind_of(tool: &str) -> ToolKind {
    match tool {
        "read" => ToolKind::Read,
        "write" | "edit" => ToolKind::Edit,
        "bash" => ToolKind::Execute,
        "glob" | "grep" | "memory_search" => ToolKind::Search,
        _ => ToolKind::Other,
    }
}

/// A call's end: completed or failed, with what it gave the model.
fn finished(call_id: &str, is_error: bool, output: &str) -> SessionUpdate {
    let status = match is_error {
        true => ToolCallStatus::Failed,
        false => ToolCallStatus::Completed,
    };
    let shown = match output.char_indices().nth(OUTPUT_SHOWN) {
        Some((at, _)) => format!("{}\n[… {} bytes more]", &output[..at], output.len() - at),
        None => output.to_owned(),
    };
    let content = vec![ToolCallContent::from(ContentBlock::from(shown))];
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        call_id.to_owned(),
        ToolCallUpdateFields::new().status(status).content(content),
    ))
}

/// A stored conversation as the updates that tell it again (`session/load`).
pub fn replayed(messages: &[&Message], workspace: &Path) -> Vec<SessionUpdate> {
    let mut updates = Vec::new();
    for message in messages {
        match message {
            Message::User { content } => updates.push(SessionUpdate::UserMessageChunk(
                ContentChunk::new(ContentBlock::from(content.clone())),
            )),
            Message::Assistant {
                content,
                tool_calls,
                ..
            } => {
                if !content.is_empty() {
                    updates.push(agent_text(content));
                }
                for call in tool_calls {
                    let input = serde_json::from_str(&call.arguments)
                        .unwrap_or_else(|_| Value::String(call.arguments.clone()));
                    let shown = tool_call(call.id.as_str(), &call.name, &input, workspace);
                    updates.push(SessionUpdate::ToolCall(
                        shown.status(ToolCallStatus::Pending),
                    ));
                }
            }
            Message::ToolResult {
                call_id,
                content,
                is_error,
                ..
            } => updates.push(finished(call_id.as_str(), *is_error, content)),
            Message::System { .. } => {}
        }
    }
    updates
}

/// Why a turn stopped, as ACP says it, for a run that ended `status`.
pub fn stop_reason(status: RunStatus) -> StopReason {
    match status {
        RunStatus::Completed => StopReason::EndTurn,
        RunStatus::MaxTurns => StopReason::MaxTurnRequests,
        RunStatus::Cancelled | RunStatus::Interrupted => StopReason::Cancelled,
        RunStatus::Blocked => StopReason::Refusal,
        RunStatus::BudgetExceeded | RunStatus::TokenBudgetExceeded | RunStatus::Parked => {
            StopReason::MaxTokens
        }
        _ => StopReason::EndTurn,
    }
}
