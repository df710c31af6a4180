//! Sessions cut off by a crash mid-turn, as the store holds them after a kill: on resume the
//! unfinished run is recorded as failed, and each call the crash cut off is taken up as what
//! it may do allows (its effect class): a read-only call runs again; an idempotent one runs
//! again with the same idempotency key; a reconcilable one (a write) is checked, recorded as
//! done when it was, run when it was not; an unsafe one that started is in doubt, for a
//! person to decide (or, with `in_doubt = "tell_model"`, the model is told it may or may not
//! have run); one that never started runs as any call does. No orphan reaches the model.
//! Each on redb and on PostgreSQL, where the daemon that resumes the session may be another
//! than the one killed: the keys and the in-doubt requests come from the store alone.

mod common;

use async_trait::async_trait;
use common::backend::Backend;
use common::{config_for, run_on, tool_results};
use ryvos::config::{Config, InDoubt};
use ryvos::protocol::ids::{CallId, RunId};
use ryvos::protocol::message::{Message, ToolCall};
use ryvos::protocol::records::{ApprovalKind, AuditRecord, RunRecord};
use ryvos::testing::Inspect;
use ryvos::testing::{StoredMessage, Write, WriteBatch};
use ryvos::{
    Effect, EventKind, RunRequest, RunStatus, Runtime, SafetyTier, SessionId, Tool, ToolContext,
    ToolError,
};
use ryvos_testkit::{Reply, ScriptedModelServer};
use serde_json::Value;
use std::sync::{Arc, Mutex};

const SESSION: &str = "s_crashed";
const CRASHED: &str = "r_crashed";

fn stored(seq: u64, message: Message) -> StoredMessage {
    StoredMessage {
        seq,
        tokens: 10,
        message: Arc::new(message),
    }
}

fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: CallId::new(id),
        name: name.into(),
        arguments: arguments.into(),
    }
}

/// What a kill leaves in `runtime`'s store (before the session is loaded): the prompt, the
/// model's `calls` (message seq 1), the results of `answered` of them, the run unfinished, and
/// the gate's decision on record for the calls that `started`.
async fn crashed(
    runtime: &Runtime,
    calls: Vec<ToolCall>,
    answered: &[(&str, &str)],
    started: &[&str],
) {
    let store = runtime.store();
    let session = SessionId::new(SESSION);
    let mut messages = vec![
        stored(0, Message::user("do it")),
        stored(
            1,
            Message::Assistant {
                content: "doing".into(),
                tool_calls: calls.clone(),
                reasoning: Vec::new(),
            },
        ),
    ];
    for (i, (id, content)) in answered.iter().enumerate() {
        let name = calls
            .iter()
            .find(|c| c.id.as_str() == *id)
            .unwrap()
            .name
            .clone();
        let result = Message::ToolResult {
            call_id: CallId::new(*id),
            name,
            content: (*content).into(),
            is_error: false,
        };
        messages.push(stored(2 + i as u64, result));
    }
    let mut batch = WriteBatch::of(session.clone(), messages.into_iter().map(Write::Message));
    let run = RunRecord::begun(RunId::new(CRASHED), session.clone(), "do it", 1);
    batch.push(Write::Run(RunRecord { turns: 1, ..run }));
    for id in started {
        let call = calls.iter().find(|c| c.id.as_str() == *id).unwrap();
        batch.push(Write::Audit(AuditRecord {
            at_ms: 2,
            session_id: session.clone(),
            run_id: RunId::new(CRASHED),
            call_id: call.id.clone(),
            tool: call.name.clone(),
            input: call.arguments.clone(),
            tier: SafetyTier::T2,
            reasons: Vec::new(),
            allowed: true,
            decided_by: "policy".into(),
            reason: None,
            request_id: None,
            node: Some("pid 4242".into()),
            hooks: Vec::new(),
        }));
    }
    store.write(&[batch]).await.unwrap();
}

/// `config_for` on `backend` (a new database of the test server for PostgreSQL).
fn config_on(server: &ScriptedModelServer, home: &std::path::Path, backend: Backend) -> Config {
    let mut config = config_for(server, home);
    backend.configure(&mut config);
    config
}

/// A host tool of the given effect class that records the idempotency key of every call.
struct Charge {
    effect: Effect,
    keys: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl Tool for Charge {
    fn name(&self) -> &str {
        "charge"
    }
    fn description(&self) -> &str {
        "charges a card"
    }
    fn parameters(&self) -> Value {
        serde_json::json!({"type": "object"})
    }
    fn tier(&self) -> SafetyTier {
        SafetyTier::T2
    }
    fn effect(&self, _input: &Value) -> Effect {
        self.effect
    }
    async fn execute(&self, _input: Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let key = ctx
            .call
            .as_ref()
            .expect("a call's identity")
            .idempotency_key
            .clone();
        self.keys.lock().unwrap().push(key);
        Ok("charged".into())
    }
}

/// A runtime on `config` with a `charge` tool of `effect`; the keys its calls were given.
async fn with_charge(config: Config, effect: Effect) -> (Runtime, Arc<Mutex<Vec<String>>>) {
    let keys = Arc::default();
    let charge = Charge {
        effect,
        keys: Arc::clone(&keys),
    };
    let runtime = Runtime::builder(config)
        .tool(Arc::new(charge))
        .start()
        .await
        .unwrap();
    (runtime, keys)
}

fn resume(workspace: &std::path::Path) -> RunRequest {
    RunRequest::new("go on")
        .session(SessionId::new(SESSION))
        .workspace(workspace)
}

/// How the calls were taken up, by call: the `CallRecovered` events' actions.
fn recovered(events: &[Arc<ryvos::Event>]) -> Vec<(String, String)> {
    (events.iter())
        .filter_map(|e| match &e.kind {
            EventKind::CallRecovered {
                call_id, action, ..
            } => Some((call_id.to_string(), action.clone())),
            _ => None,
        })
        .collect()
}

on_both_backends! {
    async fn read_only_and_reconcilable_calls_are_run_again_or_found_done_and_the_run_is_ended(backend: Backend) {
    let server = ScriptedModelServer::start([Reply::text(&["picking up"])]).await;
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join("log"), "built").unwrap();
    std::fs::write(workspace.path().join("done.txt"), "written").unwrap();
    let config = config_on(&server, home.path(), backend);
    let calls = vec![
        call("k1", "bash", r#"{"command":"make"}"#),
        call("k2", "read", r#"{"path":"log"}"#),
        call("w1", "write", r#"{"path":"done.txt","content":"written"}"#),
        call("w2", "write", r#"{"path":"new.txt","content":"fresh"}"#),
    ];
    let runtime = Runtime::start(config).await.unwrap();
    crashed(&runtime, calls, &[("k1", "ok")], &["w1", "w2"]).await;
    let (events, outcome) = run_on(&runtime, resume(workspace.path())).await;
    assert_eq!(outcome.status, RunStatus::Completed);
    let mut actions = recovered(&events);
    // The calls run at once: in any order.
    actions.sort();
    assert_eq!(
        actions,
        [
            ("k2".into(), "run_again".into()),
            ("w1".into(), "found_done".into()),
            ("w2".into(), "not_done".into()),
        ]
    );
    let results = tool_results(&server.requests()[0]);
    let result = |id: &str| results.iter().find(|(c, _)| c == id).unwrap().1.clone();
    assert_eq!(result("k1"), "ok");
    assert!(result("k2").contains("built"), "{}", result("k2"));
    assert!(result("w1").contains("found written"), "{}", result("w1"));
    assert_eq!(
        std::fs::read_to_string(workspace.path().join("new.txt")).unwrap(),
        "fresh"
    );
    server.assert_no_orphans();

    let session = SessionId::new(SESSION);
    let runs = runtime.store().session_runs(&session).await.unwrap();
    let old = runs.iter().find(|r| r.run_id.as_str() == CRASHED).unwrap();
    assert_eq!(old.status, Some(RunStatus::Failed));
    assert!(old.reason.as_deref().unwrap().contains("interrupted"));
    // Everything is stored: reloading finds nothing left to mend.
    let history = runtime.store().load_session(&session).await.unwrap();
    assert!(
        ryvos::testing::repair::check(history.messages.iter().map(|m| m.message.as_ref()))
            .is_clean()
    );
    assert!(history.unfinished_runs.is_empty());
    // The call found done is on record, saying why it did not run.
    let audit = runtime.store().audit(&session).await.unwrap();
    let w1 = (audit.iter().rev()).find(|a| a.call_id.as_str() == "w1").unwrap();
    assert_eq!((w1.allowed, w1.decided_by.as_str()), (false, "reconciled"));
    assert!(w1.node.is_some());
    runtime.shutdown().await.unwrap();
}
}

on_both_backends! {
    async fn an_idempotent_call_runs_again_with_the_key_it_had(backend: Backend) {
    let server = ScriptedModelServer::start([Reply::text(&["charged once"])]).await;
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let config = config_on(&server, home.path(), backend);
    let (runtime, keys) = with_charge(config, Effect::Idempotent).await;
    crashed(&runtime, vec![call("p1", "charge", "{}")], &[], &["p1"]).await;
    let (events, outcome) = run_on(&runtime, resume(workspace.path())).await;
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(recovered(&events), [("p1".into(), "run_again".into())]);
    // The key names the session, the message that made the call and the call: the same as
    // the cut-off attempt had, whichever daemon or run makes the next.
    assert_eq!(*keys.lock().unwrap(), [format!("{SESSION}:1:p1")]);
    runtime.shutdown().await.unwrap();
}
}

on_both_backends! {
    async fn an_unsafe_call_that_started_is_in_doubt_until_a_person_decides(backend: Backend) {
    for approve in [true, false] {
        let server = ScriptedModelServer::start([Reply::text(&["told"])]).await;
        let home = tempfile::tempdir().unwrap();
        let workspace = tempfile::tempdir().unwrap();
        let config = config_on(&server, home.path(), backend);
        let (runtime, keys) = with_charge(config, Effect::Unsafe).await;
        crashed(&runtime, vec![call("p1", "charge", "{}")], &[], &["p1"]).await;
        let mut run = runtime.run(resume(workspace.path())).await.unwrap();
        // Asked of a person whatever the policy (which allows such calls), as in doubt.
        let asked = loop {
            let event = run.next_event().await.expect("the run waits");
            if let EventKind::ApprovalRequested {
                request_id, kind, ..
            } = &event.kind
            {
                assert_eq!(*kind, ApprovalKind::InDoubt);
                break request_id.clone();
            }
        };
        let listed = runtime.pending_approvals();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].kind, ApprovalKind::InDoubt);
        assert!(
            keys.lock().unwrap().is_empty(),
            "not run before the decision"
        );
        let reason = (!approve).then(|| "it went through".to_owned());
        runtime
            .answer_approval(&asked, approve, reason, "ops")
            .await
            .unwrap();
        let (_, outcome) = common::collect(run).await;
        assert_eq!(outcome.status, RunStatus::Completed);
        let results = tool_results(&server.requests()[0]);
        match approve {
            true => {
                assert_eq!(*keys.lock().unwrap(), [format!("{SESSION}:1:p1")]);
                assert_eq!(results, [("p1".into(), "charged".into())]);
            }
            false => {
                assert!(keys.lock().unwrap().is_empty(), "never run again");
                assert!(
                    results[0].1.contains("must not be run again")
                        && results[0].1.contains("it went through"),
                    "{results:?}"
                );
            }
        }
        runtime.shutdown().await.unwrap();
    }
}
}

on_both_backends! {
    async fn an_unsafe_call_that_never_started_runs_as_any_call_does(backend: Backend) {
    let server = ScriptedModelServer::start([Reply::text(&["charged"])]).await;
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let config = config_on(&server, home.path(), backend);
    // No decision on record: it never passed the gate, so it never ran.
    let (runtime, keys) = with_charge(config, Effect::Unsafe).await;
    crashed(&runtime, vec![call("p1", "charge", "{}")], &[], &[]).await;
    let (events, outcome) = run_on(&runtime, resume(workspace.path())).await;
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(recovered(&events), [("p1".into(), "not_started".into())]);
    assert_eq!(keys.lock().unwrap().len(), 1);
    runtime.shutdown().await.unwrap();
}
}

on_both_backends! {
    async fn told_to_the_model_an_unsafe_call_in_doubt_gets_a_result_saying_so(backend: Backend) {
    let server = ScriptedModelServer::start([Reply::text(&["checking"])]).await;
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let mut config = config_on(&server, home.path(), backend);
    config.agent.in_doubt = InDoubt::TellModel;
    let (runtime, keys) = with_charge(config, Effect::Unsafe).await;
    crashed(&runtime, vec![call("p1", "charge", "{}")], &[], &["p1"]).await;
    let (events, outcome) = run_on(&runtime, resume(workspace.path())).await;
    assert_eq!(outcome.status, RunStatus::Completed);
    assert!(recovered(&events).is_empty());
    assert!(keys.lock().unwrap().is_empty());
    let results = tool_results(&server.requests()[0]);
    assert!(
        results[0].1.contains("may or may not have run"),
        "{results:?}"
    );
    runtime.shutdown().await.unwrap();
}
}
