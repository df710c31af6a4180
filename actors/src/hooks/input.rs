//! What a hook is given on stdin (or as an HTTP hook's body): the step as JSON, in Claude Code's
//! field names, so that hooks written for it read it unchanged; Ryvos's own ids beside them.

use ryvos_protocol::hook::HookEvent;
use serde_json::{json, Map, Value};

/// One step hooks run at, with what they are told about it.
pub(crate) enum Step<'a> {
    SessionStart {
        /// `startup` for a session's first run, `resume` for a later one.
        source: &'a str,
    },
    UserPromptSubmit {
        prompt: &'a str,
    },
    /// `PreToolUse` and `PermissionRequest`.
    Call {
        event: HookEvent,
        call: Called<'a>,
    },
    PostToolUse {
        call: Called<'a>,
        output: &'a str,
    },
    PostToolUseFailure {
        call: Called<'a>,
        error: &'a str,
    },
    /// `PreCompact` and `PostCompact`.
    Compact {
        event: HookEvent,
        /// `auto` (the context filled up) or `manual`.
        trigger: &'a str,
    },
    /// `Stop` and `SubagentStop`: the run is about to end with `answer`.
    Stop {
        event: HookEvent,
        /// Whether a hook already sent this run back to work once.
        active: bool,
        answer: &'a str,
    },
    SubagentStart {
        /// What the Director's step is to do.
        task: &'a str,
    },
    RunParked {
        reason: &'a str,
        message: &'a str,
    },
    SessionEnd {
        /// The run's status.
        status: &'a str,
    },
}

/// A Director's step, as subagent hooks name its kind (`agent_type`).
const DIRECTOR_STEP: &str = "director_step";

/// A tool call, as its hooks see it.
#[derive(Clone, Copy)]
pub(crate) struct Called<'a> {
    pub call_id: &'a str,
    /// Ryvos's name of the tool.
    pub name: &'a str,
    pub input: &'a Value,
}

impl Step<'_> {
    pub(crate) fn event(&self) -> HookEvent {
        match self {
            Step::SessionStart { .. } => HookEvent::SessionStart,
            Step::UserPromptSubmit { .. } => HookEvent::UserPromptSubmit,
            Step::Call { event, .. } | Step::Compact { event, .. } | Step::Stop { event, .. } => {
                *event
            }
            Step::PostToolUse { .. } => HookEvent::PostToolUse,
            Step::PostToolUseFailure { .. } => HookEvent::PostToolUseFailure,
            Step::SubagentStart { .. } => HookEvent::SubagentStart,
            Step::RunParked { .. } => HookEvent::RunParked,
            Step::SessionEnd { .. } => HookEvent::SessionEnd,
        }
    }

    /// The call it is about, if any.
    pub(crate) fn call(&self) -> Option<Called<'_>> {
        match self {
            Step::Call { call, .. }
            | Step::PostToolUse { call, .. }
            | Step::PostToolUseFailure { call, .. } => Some(*call),
            _ => None,
        }
    }

    /// What matchers are held against: a tool's names (Ryvos's and Claude Code's), a session
    /// start's source, a compaction's trigger, a run's end status; nothing for the rest, which
    /// every matcher matches.
    pub(crate) fn match_names(&self) -> Option<Vec<String>> {
        match self {
            Step::SessionStart { source } => Some(vec![source.to_string()]),
            Step::Compact { trigger, .. } => Some(vec![trigger.to_string()]),
            // Claude Code's reason (always `other` here), or the run's status.
            Step::SessionEnd { status } => Some(vec!["other".into(), status.to_string()]),
            Step::SubagentStart { .. } => Some(vec![DIRECTOR_STEP.into()]),
            Step::Stop {
                event: HookEvent::SubagentStop,
                ..
            } => Some(vec![DIRECTOR_STEP.into()]),
            _ => self
                .call()
                .map(|c| vec![c.name.to_owned(), claude_name(c.name)]),
        }
    }

    /// The fields of this step, after the common ones.
    fn fields(&self, cwd: &str) -> Map<String, Value> {
        let value = match self {
            Step::SessionStart { source } => json!({"source": source}),
            Step::UserPromptSubmit { prompt } => json!({"prompt": prompt}),
            Step::Call { call, event } => {
                let mut fields = call_fields(call, cwd);
                if *event == HookEvent::PermissionRequest {
                    fields.insert("permission_suggestions".into(), json!([]));
                }
                Value::Object(fields)
            }
            Step::PostToolUse { call, output } => {
                let mut fields = call_fields(call, cwd);
                fields.insert("tool_response".into(), response(call, output, cwd));
                Value::Object(fields)
            }
            Step::PostToolUseFailure { call, error } => {
                let mut fields = call_fields(call, cwd);
                fields.insert("error".into(), json!(error));
                fields.insert("is_interrupt".into(), json!(false));
                Value::Object(fields)
            }
            Step::Compact { trigger, .. } => {
                json!({"trigger": trigger, "custom_instructions": ""})
            }
            Step::Stop {
                active,
                answer,
                event,
            } => {
                let mut fields =
                    json!({"stop_hook_active": active, "last_assistant_message": answer});
                if *event == HookEvent::SubagentStop {
                    fields["agent_type"] = json!(DIRECTOR_STEP);
                }
                fields
            }
            Step::SubagentStart { task } => json!({"agent_type": DIRECTOR_STEP, "task": task}),
            Step::RunParked { reason, message } => json!({"reason": reason, "message": message}),
            Step::SessionEnd { status } => json!({"reason": "other", "status": status}),
        };
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }
}

/// Who is asking: the run's ids and directory.
pub(crate) struct Asker<'a> {
    pub session_id: &'a str,
    pub run_id: &'a str,
    pub cwd: &'a str,
    /// A Director's step: the step's run is the subagent.
    pub agent_id: Option<&'a str>,
}

/// The JSON a hook is given for `step`.
pub(crate) fn input(step: &Step<'_>, asker: &Asker<'_>) -> Value {
    let mut fields = Map::new();
    fields.insert("session_id".into(), json!(asker.session_id));
    // Ryvos keeps no transcript file; the run's history is `ryvos history SESSION`.
    fields.insert("transcript_path".into(), json!(""));
    fields.insert("cwd".into(), json!(asker.cwd));
    fields.insert("permission_mode".into(), json!("default"));
    fields.insert("hook_event_name".into(), json!(step.event().as_str()));
    fields.insert("ryvos_run_id".into(), json!(asker.run_id));
    if let Some(agent) = asker.agent_id {
        fields.insert("agent_id".into(), json!(agent));
    }
    fields.extend(step.fields(asker.cwd));
    Value::Object(fields)
}

/// A call's own fields: its tool by Claude Code's name (Ryvos's beside it), its input with a
/// file tool's `path` also as Claude Code's absolute `file_path`, and its id.
fn call_fields(call: &Called<'_>, cwd: &str) -> Map<String, Value> {
    let mut input = call.input.clone();
    if let Some(object) = input.as_object_mut() {
        if let Some(path) = object.get("path").and_then(Value::as_str) {
            let file_path = absolute(path, cwd);
            object.insert("file_path".into(), json!(file_path));
        }
    }
    let mut fields = Map::new();
    fields.insert("tool_name".into(), json!(claude_name(call.name)));
    fields.insert("ryvos_tool_name".into(), json!(call.name));
    fields.insert("tool_input".into(), input);
    fields.insert("tool_use_id".into(), json!(call.call_id));
    fields
}

/// A successful call's result, shaped as Claude Code's tools give theirs where they differ.
fn response(call: &Called<'_>, output: &str, cwd: &str) -> Value {
    let mut response = json!({"output": output});
    let object = response.as_object_mut().expect("an object");
    match call.name {
        "bash" => {
            object.insert("stdout".into(), json!(output));
            object.insert("stderr".into(), json!(""));
            object.insert("interrupted".into(), json!(false));
        }
        _ => {
            if let Some(path) = call.input.get("path").and_then(Value::as_str) {
                object.insert("filePath".into(), json!(absolute(path, cwd)));
                object.insert("success".into(), json!(true));
            }
        }
    }
    response
}

fn absolute(path: &str, cwd: &str) -> String {
    match path.starts_with('/') {
        true => path.to_owned(),
        false => format!("{}/{}", cwd.trim_end_matches('/'), path),
    }
}

/// A tool's name as Claude Code calls it: its built-in tools capitalized, an MCP server's
/// `server__tool` as `mcp__server__tool`; others as they are.
pub(crate) fn claude_name(name: &str) -> String {
    let builtin = match name {
        "bash" => "Bash",
        "read" => "Read",
        "write" => "Write",
        "edit" => "Edit",
        "glob" => "Glob",
        "grep" => "Grep",
        _ if name.contains("__") && !name.starts_with("mcp__") => {
            return format!("mcp__{name}");
        }
        _ => name,
    };
    builtin.to_owned()
}

/// The input a hook gave back (`updatedInput`) as the tool takes it: Claude Code's `file_path`
/// becomes the `path` it stands for.
pub(crate) fn as_tool_input(mut updated: Value, cwd: &str) -> Value {
    if let Some(object) = updated.as_object_mut() {
        if let Some(Value::String(file_path)) = object.remove("file_path") {
            let path = file_path
                .strip_prefix(cwd.trim_end_matches('/'))
                .and_then(|p| p.strip_prefix('/'))
                .map_or(file_path.clone(), str::to_owned);
            object.insert("path".into(), json!(path));
        }
    }
    updated
}
