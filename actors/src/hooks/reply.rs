//! What a hook answered, read as Claude Code reads it: the JSON object it printed, whatever its
//! exit status (`continue`, `stopReason`, `decision`, `reason`, `hookSpecificOutput`); exit 2
//! blocks where the step can be blocked (the JSON's reason, else stderr, says why); another
//! status without JSON is a failure that changes nothing; plain stdout on 0 is context where
//! Claude Code takes it so.

use ryvos_protocol::hook::{HookEvent, HookVerdict};
use serde_json::Value;

/// How a hook ended, before it is read.
pub(crate) enum Ended {
    /// It exited with `code` (`None`: killed by a signal).
    Exited {
        code: Option<i32>,
        stdout: String,
        stderr: String,
    },
    /// It did not answer in time, or could not be started or reached; why.
    Failed(String),
}

/// One hook's answer, read.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Reply {
    pub verdict: HookVerdict,
    pub reason: Option<String>,
    pub updated_input: Option<Value>,
    pub context: Option<String>,
    /// `"continue": false`: the run stops, for this reason.
    pub stop: Option<String>,
}

impl Reply {
    fn of(verdict: HookVerdict) -> Self {
        Reply {
            verdict,
            reason: None,
            updated_input: None,
            context: None,
            stop: None,
        }
    }

    fn failed(why: String) -> Self {
        Reply {
            reason: Some(why),
            ..Reply::of(HookVerdict::Failed)
        }
    }

    /// Whether it says anything at all (a hook that exits 0 with no output does not).
    pub(crate) fn says_something(&self) -> bool {
        self.verdict != HookVerdict::Context
            || self.context.is_some()
            || self.updated_input.is_some()
    }
}

/// The longest reason or context kept, in bytes (Claude Code's cap is 10,000 characters).
const REASON_BYTES: usize = 10_000;

/// How the hook of `event` that ended as `ended` is read.
pub(crate) fn read(event: HookEvent, ended: Ended) -> Reply {
    let (code, stdout, stderr) = match ended {
        Ended::Failed(why) => return Reply::failed(why),
        Ended::Exited {
            code,
            stdout,
            stderr,
        } => (code, stdout, stderr),
    };
    let stdout = stdout.trim();
    let json = match stdout.starts_with('{') {
        true => serde_json::from_str::<Value>(stdout).ok(),
        false => None,
    };
    let stops = json
        .as_ref()
        .is_some_and(|j| j.get("continue").and_then(Value::as_bool) == Some(false));
    match (code, json) {
        // `"continue": false` comes before everything else, exit 2 included.
        (_, Some(Value::Object(json))) if stops => from_json(event, &json),
        (Some(2), json) => {
            let said = json
                .as_ref()
                .and_then(|j| j.get("reason"))
                .and_then(Value::as_str);
            on_block(event, said.map_or_else(|| clip(stderr.trim()), clip))
        }
        (_, Some(Value::Object(json))) => from_json(event, &json),
        (Some(0), _) => on_success(event, stdout),
        (Some(code), _) => Reply::failed(format!(
            "it exited with status {code}{}",
            said(stderr.trim())
        )),
        (None, _) => Reply::failed(format!("it was killed by a signal{}", said(stderr.trim()))),
    }
}

/// Exit 2: the step is refused where the event can be, with `reason` (else stderr) as why.
fn on_block(event: HookEvent, reason: String) -> Reply {
    let reason = Some(reason).filter(|s| !s.is_empty());
    let verdict = match event {
        HookEvent::PreToolUse => HookVerdict::Deny,
        HookEvent::UserPromptSubmit
        | HookEvent::PostToolUse
        | HookEvent::PostToolUseFailure
        | HookEvent::Stop
        | HookEvent::SubagentStop => HookVerdict::Block,
        // Nothing to refuse (a `PermissionRequest` denies only through its JSON): Claude Code
        // shows stderr to the user, and so is it published.
        _ => {
            return Reply {
                reason,
                ..Reply::of(HookVerdict::Failed)
            }
        }
    };
    Reply {
        reason: reason.or_else(|| Some("a hook refused it (exit status 2)".into())),
        ..Reply::of(verdict)
    }
}

/// Exit 0 without a JSON object: its plain output (text that only looks like JSON too, as
/// Claude Code takes it).
fn on_success(event: HookEvent, stdout: &str) -> Reply {
    let mut reply = Reply::of(HookVerdict::Context);
    // Plain stdout is context only where Claude Code adds it to the conversation.
    if matches!(event, HookEvent::SessionStart | HookEvent::UserPromptSubmit) && !stdout.is_empty()
    {
        reply.context = Some(clip(stdout));
    }
    reply
}

/// The JSON output's fields, as they apply to `event`.
fn from_json(event: HookEvent, json: &serde_json::Map<String, Value>) -> Reply {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(clip);
    let specific = json.get("hookSpecificOutput").and_then(Value::as_object);
    let mut reply = Reply::of(HookVerdict::Context);
    reply.reason = text(json.get("reason"));
    reply.context = text(specific.and_then(|s| s.get("additionalContext")));
    if json.get("continue").and_then(Value::as_bool) == Some(false) {
        let why = text(json.get("stopReason"));
        reply.stop = Some(why.unwrap_or_else(|| "a hook stopped the run".into()));
        reply.verdict = HookVerdict::Stop;
        return reply;
    }
    match event {
        HookEvent::PreToolUse => {
            let decision = specific
                .and_then(|s| s.get("permissionDecision"))
                .and_then(Value::as_str)
                // Claude Code's older top-level form.
                .or_else(|| match json.get("decision").and_then(Value::as_str) {
                    Some("approve") => Some("allow"),
                    Some("block") => Some("deny"),
                    _ => None,
                });
            reply.verdict = permission(decision);
            if let Some(why) = text(specific.and_then(|s| s.get("permissionDecisionReason"))) {
                reply.reason = Some(why);
            }
            reply.updated_input = specific.and_then(|s| s.get("updatedInput")).cloned();
        }
        HookEvent::PermissionRequest => {
            let decision = specific.and_then(|s| s.get("decision"));
            let behavior = decision
                .and_then(|d| d.get("behavior"))
                .and_then(Value::as_str);
            reply.verdict = permission(behavior);
            if let Some(message) = text(decision.and_then(|d| d.get("message"))) {
                reply.reason = Some(message);
            }
            reply.updated_input = decision.and_then(|d| d.get("updatedInput")).cloned();
        }
        // Only where a step can be refused; elsewhere Claude Code reads no decision.
        HookEvent::UserPromptSubmit
        | HookEvent::PostToolUse
        | HookEvent::PostToolUseFailure
        | HookEvent::Stop
        | HookEvent::SubagentStop
            if json.get("decision").and_then(Value::as_str) == Some("block") =>
        {
            reply.verdict = HookVerdict::Block;
        }
        _ => {}
    }
    reply
}

/// A permission decision's word; anything else decides nothing.
fn permission(word: Option<&str>) -> HookVerdict {
    match word {
        Some("allow") => HookVerdict::Allow,
        Some("deny") => HookVerdict::Deny,
        Some("ask") => HookVerdict::Ask,
        _ => HookVerdict::Context,
    }
}

fn said(stderr: &str) -> String {
    match stderr.is_empty() {
        true => String::new(),
        false => format!(": {}", clip(stderr)),
    }
}

fn clip(text: &str) -> String {
    crate::text::truncate(text, REASON_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exited(code: i32, stdout: &str, stderr: &str) -> Ended {
        Ended::Exited {
            code: Some(code),
            stdout: stdout.into(),
            stderr: stderr.into(),
        }
    }

    #[test]
    fn exit_codes_are_claude_codes() {
        let denied = read(HookEvent::PreToolUse, exited(2, "", "no rm -rf\n"));
        assert_eq!(denied.verdict, HookVerdict::Deny);
        assert_eq!(denied.reason.as_deref(), Some("no rm -rf"));
        let blocked = read(HookEvent::Stop, exited(2, "", "tests fail"));
        assert_eq!(blocked.verdict, HookVerdict::Block);
        let warned = read(HookEvent::PreToolUse, exited(1, "", "oops"));
        assert_eq!(warned.verdict, HookVerdict::Failed);
        let start = read(HookEvent::SessionStart, exited(0, "Today is Friday\n", ""));
        assert_eq!(start.context.as_deref(), Some("Today is Friday"));
        let post = read(HookEvent::PostToolUse, exited(0, "formatted", ""));
        assert!(!post.says_something());
        let start_blocked = read(HookEvent::SessionStart, exited(2, "", "x"));
        assert_eq!(start_blocked.verdict, HookVerdict::Failed);
        let not_by_exit = read(HookEvent::PermissionRequest, exited(2, "", "x"));
        assert_eq!(not_by_exit.verdict, HookVerdict::Failed);
        let allow_but_2 = r#"{"hookSpecificOutput":{"permissionDecision":"allow"}}"#;
        let still_denied = read(HookEvent::PreToolUse, exited(2, allow_but_2, "no"));
        assert_eq!(still_denied.verdict, HookVerdict::Deny);
        let json_on_1 = r#"{"hookSpecificOutput":{"permissionDecision":"deny"}}"#;
        let json_decides = read(HookEvent::PreToolUse, exited(1, json_on_1, ""));
        assert_eq!(json_decides.verdict, HookVerdict::Deny);
    }

    #[test]
    fn json_output_is_claude_codes() {
        let out = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"why","updatedInput":{"command":"ls"}}}"#;
        let reply = read(HookEvent::PreToolUse, exited(0, out, ""));
        assert_eq!(reply.verdict, HookVerdict::Ask);
        assert_eq!(reply.reason.as_deref(), Some("why"));
        assert_eq!(
            reply.updated_input,
            Some(serde_json::json!({"command": "ls"}))
        );
        let out = r#"{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}"#;
        let reply = read(HookEvent::PermissionRequest, exited(0, out, ""));
        assert_eq!(reply.verdict, HookVerdict::Allow);
        let out = r#"{"decision":"block","reason":"run the tests first"}"#;
        let reply = read(HookEvent::Stop, exited(0, out, ""));
        assert_eq!(reply.verdict, HookVerdict::Block);
        assert_eq!(reply.reason.as_deref(), Some("run the tests first"));
        let out = r#"{"continue":false,"stopReason":"enough"}"#;
        let reply = read(HookEvent::PostToolUse, exited(0, out, ""));
        assert_eq!(reply.stop.as_deref(), Some("enough"));
        let reply = read(HookEvent::UserPromptSubmit, exited(0, "{not json", ""));
        assert_eq!(reply.context.as_deref(), Some("{not json"));
        let out = r#"{"continue":false,"stopReason":"enough"}"#;
        let reply = read(HookEvent::PreToolUse, exited(2, out, "no"));
        assert_eq!(reply.verdict, HookVerdict::Stop);
        let reply = read(
            HookEvent::SessionStart,
            exited(0, r#"{"decision":"block"}"#, ""),
        );
        assert_eq!(reply.verdict, HookVerdict::Context);
        let old = read(
            HookEvent::PreToolUse,
            exited(0, r#"{"decision":"block","reason":"x"}"#, ""),
        );
        assert_eq!(old.verdict, HookVerdict::Deny);
    }
}
