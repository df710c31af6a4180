//! Ryvos's runs as A2A tasks: a task is a run, its context the run's session. A task's id
//! names both (`r_…@s_…`), so any daemon on the store finds it without an index of its own.

use a2a::{Artifact, Message, Part, Role, Task, TaskState, TaskStatus};
use ryvos::protocol::records::{RunRecord, SessionRecord};
use ryvos::{RunId, RunStatus, SessionId};

/// The task id of run `run` of `session`.
pub(super) fn task_id(run: &RunId, session: &SessionId) -> String {
    format!("{run}@{session}")
}

/// The run and session a task id names; `None` for one that is not a Ryvos task's.
pub(super) fn named(task: &str) -> Option<(RunId, SessionId)> {
    let (run, session) = task.split_once('@')?;
    let ours = run.starts_with("r_") && session.starts_with("s_");
    ours.then(|| (RunId::new(run), SessionId::new(session)))
}

/// What a run looks like to another agent, as far as it has gone: `waiting` when a call of it
/// waits for a person's approval.
pub(super) fn task_of(run: &RunRecord, waiting: bool) -> Task {
    let (state, why) = match run.status {
        None if waiting => (
            TaskState::InputRequired,
            Some("a call waits for approval: `ryvos approvals` lists it".to_owned()),
        ),
        None => (TaskState::Working, None),
        Some(status) => state_of(status, run.reason.as_deref()),
    };
    let context = run.session_id.to_string();
    let id = task_id(&run.run_id, &run.session_id);
    let said = |role: Role, text: &str| Message {
        context_id: Some(context.clone()),
        task_id: Some(id.clone()),
        ..Message::new(role, vec![Part::text(text)])
    };
    let answered = run.status == Some(RunStatus::Completed);
    let artifacts = answered.then(|| {
        vec![Artifact {
            artifact_id: "answer".into(),
            name: Some("answer".into()),
            description: None,
            parts: vec![Part::text(run.output.clone())],
            metadata: None,
            extensions: None,
        }]
    });
    let mut history = vec![said(Role::User, &run.prompt)];
    if !run.output.is_empty() {
        history.push(said(Role::Agent, &run.output));
    }
    let at = run.ended_at_ms.unwrap_or(run.started_at_ms);
    Task {
        id: id.clone(),
        context_id: context.clone(),
        status: TaskStatus {
            state,
            message: why.map(|why| said(Role::Agent, &why)),
            timestamp: chrono::DateTime::from_timestamp_millis(at as i64),
        },
        artifacts,
        history: Some(history),
        metadata: None,
    }
}

/// The task of `session`'s latest run as its record tells it, without history or artifacts
/// (`GetTask` gives them): `waiting` when a call of it waits for approval. `None` for a session
/// that has no run.
pub(super) fn latest_of(session: &SessionRecord, waiting: bool) -> Option<Task> {
    let run = session.last_run.as_ref()?;
    let (state, why) = match session.last_status {
        None if waiting => (TaskState::InputRequired, None),
        None => (TaskState::Working, None),
        Some(status) => state_of(status, None),
    };
    let context = session.session_id.to_string();
    let id = task_id(run, &session.session_id);
    let message = why.map(|why| Message {
        context_id: Some(context.clone()),
        task_id: Some(id.clone()),
        ..Message::new(Role::Agent, vec![Part::text(why)])
    });
    Some(Task {
        id,
        context_id: context,
        status: TaskStatus {
            state,
            message,
            timestamp: chrono::DateTime::from_timestamp_millis(session.updated_at_ms as i64),
        },
        artifacts: None,
        history: None,
        metadata: None,
    })
}

/// The task of run `run` of `session`, just begun on `prompt` (its record may not be stored
/// yet).
pub(super) fn begun(run: &RunId, session: &SessionId, prompt: &str) -> Task {
    let id = task_id(run, session);
    let asked = Message {
        context_id: Some(session.to_string()),
        task_id: Some(id.clone()),
        ..Message::new(Role::User, vec![Part::text(prompt)])
    };
    Task {
        id,
        context_id: session.to_string(),
        status: TaskStatus {
            state: TaskState::Working,
            message: None,
            timestamp: Some(chrono::Utc::now()),
        },
        artifacts: None,
        history: Some(vec![asked]),
        metadata: None,
    }
}

/// The task state a run that ended `status` is in, and why, when it did not complete.
pub(super) fn state_of(status: RunStatus, reason: Option<&str>) -> (TaskState, Option<String>) {
    let why = || {
        let reason = reason.unwrap_or("no reason was given");
        Some(format!("the run ended {status}: {reason}"))
    };
    match status {
        RunStatus::Completed => (TaskState::Completed, None),
        RunStatus::Cancelled | RunStatus::Interrupted => (TaskState::Canceled, why()),
        RunStatus::Parked => (TaskState::InputRequired, why()),
        RunStatus::Blocked => (TaskState::Rejected, why()),
        _ => (TaskState::Failed, why()),
    }
}
