//! How a run begins: the session reloaded if it must be, the budget asked, memories recalled
//! into the layered system prompt, the prompt stored, and room made before the first call.

use super::{next_step, SessionMsg, SessionState};
use crate::event::{EventKind, RunStatus};
use crate::ids::RunId;
use crate::session::oversight;
use crate::session::prompt;
use crate::session::run::{ActiveRun, AfterCompaction, Ending, Phase};
use crate::session::RunSpec;
use ractor::ActorRef;
use std::sync::Arc;

impl SessionState {
    pub(super) async fn start_run(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        run_id: RunId,
        spec: RunSpec,
    ) {
        self.idle_epoch += 1;
        if self.needs_reload {
            self.reload(myself).await;
        }
        // A commit failure left from between runs belongs to no run; the reload that follows
        // it (needs_reload) has dealt with the store.
        if let Some(stale) = self.commits.take_error() {
            tracing::warn!(session = %self.id, "a commit failed between runs: {stale}");
        }
        let events = self.events.for_run(self.id.clone(), run_id.clone());
        let next_seq = self.history.next_seq();
        let run_without_prompt = |spec: RunSpec| {
            let mut run = ActiveRun::new(
                run_id.clone(),
                spec.prompt,
                events.clone(),
                spec.workspace,
                &self.services.sandbox,
                Arc::from(""),
                next_seq,
            );
            run.step = next_step();
            run
        };
        if let Some(error) = self.load_error.clone() {
            let mut run = run_without_prompt(spec);
            run.phase = Phase::Finishing(Ending {
                status: RunStatus::Failed,
                output: String::new(),
                reason: Some(format!("the session could not be loaded: {error}")),
            });
            events.emit(EventKind::RunStarted);
            self.run = Some(run);
            return self.complete(myself);
        }
        // A run over budget is refused before its prompt enters the conversation.
        let admitted = oversight::authorize(&self.services, &run_id).await;
        self.last_run = Some(run_id.clone());
        if let Err(refusal) = admitted {
            self.run = Some(run_without_prompt(spec));
            events.emit(EventKind::RunStarted);
            return self.refuse(myself, refusal, false);
        }
        // A run without a prompt continues the conversation: it needs one to continue.
        let continuing = spec.prompt.is_empty();
        if continuing && (self.history.is_empty() || self.history.ends_with_answer()) {
            self.run = Some(run_without_prompt(spec));
            events.emit(EventKind::RunStarted);
            return self.fail(
                myself,
                "the run has no prompt and there is nothing to continue: the session is empty \
                 or its last run ended with an answer; give a prompt"
                    .into(),
            );
        }
        let mut recall_warnings = Vec::new();
        let recalled = if continuing {
            Vec::new()
        } else {
            prompt::recall(&self.services.memory, &spec.prompt, &mut recall_warnings).await
        };
        let mut assembled = prompt::assemble(
            &spec.workspace,
            spec.caller_dir.as_deref(),
            &self.services.home,
            &recalled,
        )
        .await;
        assembled.warnings.extend(recall_warnings);
        let mut run = ActiveRun::new(
            run_id.clone(),
            spec.prompt.clone(),
            events.clone(),
            spec.workspace,
            &self.services.sandbox,
            assembled.prompt.into(),
            next_seq,
        )
        .with_goal(spec.goal);
        run.step = next_step();
        run.on_message = spec.on_message;
        if continuing {
            // Limits hold across resumes: the turns since the last prompt count here too.
            run.turns_before = self.history.turns_since_prompt();
        }
        // Calls a paused run left come first: their results must follow the answer that asked
        // for them, so the prompt waits until they have run.
        let pending = self.history.pending_calls();
        // Taken up by this run: from its first batch on, a crash while they run leaves them
        // cut off (repaired on reload), never pending again.
        self.paused_calls.clear();
        let prompt = spec.prompt;
        self.run = Some(run);
        if pending.is_empty() {
            self.push_prompt(prompt);
        } else if let Some(run) = self.run.as_mut() {
            run.held_prompt = Some(prompt);
        }
        let Some(run) = self.run.as_mut() else { return };
        run.turn_first_seq = self.history.next_seq();
        let record = run.record(None);
        let limit = self.services.agent.max_duration_secs;
        let mut why = format!("the run reached max_duration_secs ({limit}s) and was stopped");
        let mut deadline = self.services.agent.max_duration();
        // A goal's time constraint is a limit too, when it is the tighter one.
        let goal_secs = run.goal.as_ref().and_then(|g| g.constraints.time_secs);
        if let Some(secs) = goal_secs.filter(|s| *s > 0 && *s < limit) {
            deadline = std::time::Duration::from_secs(secs);
            why = format!("the run reached its goal's time constraint ({secs}s) and was stopped");
        }
        self.submit(myself, None, Some(record));
        events.emit(EventKind::RunStarted);
        if self.services.sandbox.mode() == crate::config::SandboxMode::Off {
            events.emit(EventKind::Warning {
                message: "the sandbox is off ([security.sandbox] mode = \"off\"): the model's \
                          commands can write anywhere this user can"
                    .into(),
            });
        }
        for message in assembled.warnings {
            events.emit(EventKind::Warning { message });
        }
        myself.send_after(deadline, move || SessionMsg::Deadline { run_id, why });
        if !pending.is_empty() {
            // Stale requests of calls no longer pending are done with.
            let pending_ids: Vec<_> = pending.iter().map(|c| c.id.clone()).collect();
            self.drop_stale_approvals(myself, &pending_ids);
            // They run once this run is on record: after a crash from here on, the run is
            // found unfinished and their results are repaired rather than run again.
            if let Some(run) = self.run.as_mut() {
                run.phase = Phase::AwaitingDurability { calls: pending };
            }
            return self.advance(myself);
        }
        self.drop_stale_approvals(myself, &[]);
        self.first_call(myself).await;
    }

    /// The run's first model call; a prompt that brings the conversation past its budget is
    /// made room for first.
    pub(super) async fn first_call(&mut self, myself: &ActorRef<SessionMsg>) {
        self.prompt_memory_flush();
        if let Some(cut) = self.cut_needed() {
            return self
                .compact_then(myself, cut, AfterCompaction::CallModel)
                .await;
        }
        self.begin_turn(myself);
    }
}
