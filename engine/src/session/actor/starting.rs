//! How a run begins, in two steps so that the mailbox never waits: [`SessionState::start_run`]
//! puts the run in flight ([`Phase::Preparing`]) and asks, off the mailbox, for what its first
//! call needs (the ledger's leave to spend, the memories its prompt recalls, the context files
//! of its system prompt); [`SessionState::on_prepared`] takes the answers, stores the prompt,
//! and makes room before the first call.

use super::asking::ask;
use super::{next_step, SessionMsg, SessionState};
use crate::context::layers::Assembled;
use crate::event::{EventKind, RunStatus};
use crate::ids::RunId;
use crate::session::oversight::{self, Refusal};
use crate::session::run::{ActiveRun, AfterCompaction, Ending, Phase};
use crate::session::{prompt, RunSpec, Services};
use crate::tools::Workspace;
use ractor::ActorRef;
use std::path::PathBuf;
use std::sync::Arc;

/// What a run's first call needs, as asked off the mailbox.
pub(in crate::session) struct Preparation {
    /// Whether the ledger lets the run spend.
    admitted: Result<(), Refusal>,
    /// The system prompt and what went wrong assembling it; `None` when the run goes no
    /// further (refused, or with nothing to continue).
    assembled: Option<Assembled>,
}

/// What [`prepare`] is asked about.
struct Question {
    services: Services,
    run_id: RunId,
    prompt: String,
    workspace: Workspace,
    caller_dir: Option<PathBuf>,
    /// The run cannot go on whatever the answers: the prompt is not worth assembling.
    doomed: bool,
}

impl SessionState {
    pub(super) async fn start_run(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        run_id: RunId,
        spec: RunSpec,
    ) {
        self.idle_epoch += 1;
        let leased = self.take_session(myself).await;
        let parent = spec.trace_parent.as_ref();
        let events = self
            .events
            .for_run_under(self.id.clone(), run_id.clone(), parent);
        let mut run = ActiveRun::new(
            run_id.clone(),
            spec.prompt.clone(),
            events.clone(),
            spec.workspace.clone(),
            &self.services.sandbox,
            Arc::from(""),
            self.history.next_seq(),
        );
        // The focus layer joins the system prompt once it is assembled (no tokenizer here).
        run.goal = spec.goal;
        run.step = next_step();
        run.on_message = spec.on_message;
        events.emit(EventKind::RunStarted);
        let unready = match (&leased, &self.load_error) {
            (Err(e), _) => Some(format!("the session could not be taken for this run: {e}")),
            (Ok(_), Some(error)) => Some(format!("the session could not be loaded: {error}")),
            (Ok(_), None) => None,
        };
        if let Some(reason) = unready {
            // Nothing is written: the session is not this run's to write.
            run.phase = Phase::Finishing(Ending {
                status: RunStatus::Failed,
                output: String::new(),
                reason: Some(reason),
            });
            self.run = Some(run);
            return self.complete(myself);
        }
        self.last_run = Some(run_id.clone());
        self.last_status = None;
        self.workspace = Some(spec.workspace.root().display().to_string());
        if self.title.is_none() {
            self.title = title_of(&spec.prompt);
        }
        // The run's time counts from here, its preparation included.
        let (deadline, why) = deadline(&self.services, &run);
        let deadline_run = run_id.clone();
        myself.send_after(deadline, move || SessionMsg::Deadline {
            run_id: deadline_run,
            why,
        });
        let step = run.step;
        run.phase = Phase::Preparing;
        self.run = Some(run);
        let question = Question {
            services: self.services.clone(),
            run_id,
            prompt: spec.prompt,
            workspace: spec.workspace,
            caller_dir: spec.caller_dir,
            doomed: self.nothing_to_continue(),
        };
        ask(myself, prepare(question), move |prepared| {
            SessionMsg::Prepared { step, prepared }
        });
    }

    /// Takes the session for a run. Where daemons share the store, the run holds it: nobody
    /// else writes to it meanwhile, and what this actor remembers is stale if somebody did
    /// since; then its history is read back first.
    async fn take_session(
        &mut self,
        myself: &ActorRef<SessionMsg>,
    ) -> Result<crate::store::Lease, crate::store::StoreError> {
        let leased = self.services.store.lease(&self.id).await;
        if leased.as_ref().is_ok_and(|lease| lease.changed_hands) {
            self.needs_reload = true;
        }
        if self.needs_reload && leased.is_ok() {
            // The session's own store: the run cannot begin before its history is back.
            self.reload(myself).await;
        }
        // A commit failure left from between runs belongs to no run; the reload that follows
        // it (needs_reload) has dealt with the store.
        if let Some(stale) = self.commits.take_error() {
            tracing::warn!(session = %self.id, "a commit failed between runs: {stale}");
        }
        leased
    }

    /// A run without a prompt continues the conversation: it needs one to continue.
    fn nothing_to_continue(&self) -> bool {
        let continuing = self.run.as_ref().is_some_and(|r| r.prompt.is_empty());
        continuing && (self.history.is_empty() || self.history.ends_with_answer())
    }

    /// The run's first call is prepared: a run over budget is refused before its prompt enters
    /// the conversation; otherwise the prompt is stored (after the calls a paused run left, if
    /// any) and the first call made.
    pub(super) fn on_prepared(&mut self, myself: &ActorRef<SessionMsg>, prepared: Preparation) {
        if let Err(refusal) = prepared.admitted {
            return self.refuse(myself, refusal, false);
        }
        let Some(assembled) = prepared.assembled.filter(|_| !self.nothing_to_continue()) else {
            return self.fail(
                myself,
                "the run has no prompt and there is nothing to continue: the session is empty \
                 or its last run ended with an answer; give a prompt"
                    .into(),
            );
        };
        let Some(run) = self.run.as_mut() else { return };
        run.phase = Phase::AwaitingModel;
        run.set_system(assembled.prompt.into());
        let prompt = run.prompt.clone();
        if prompt.is_empty() {
            // Limits hold across resumes: the turns since the last prompt count here too.
            run.turns_before = self.history.turns_since_prompt();
        }
        // Calls a paused run left come first: their results must follow the answer that asked
        // for them, so the prompt waits until they have run.
        let pending = self.history.pending_calls();
        // Taken up by this run: from its first batch on, a crash while they run leaves them
        // cut off (repaired on reload), never pending again.
        self.paused_calls.clear();
        if pending.is_empty() {
            self.push_prompt(prompt);
        } else {
            run.held_prompt = Some(prompt);
        }
        let Some(run) = self.run.as_mut() else { return };
        run.turn_first_seq = self.history.next_seq();
        let record = run.record(None);
        let events = run.events.clone();
        self.submit(myself, None, Some(record));
        if let Some(message) = self.services.sandbox.run_warning() {
            events.emit(EventKind::Warning { message });
        }
        for message in assembled.warnings {
            events.emit(EventKind::Warning { message });
        }
        if !pending.is_empty() {
            // Stale requests of calls no longer pending are done with.
            let pending_ids: Vec<_> = pending.iter().map(|c| c.id.clone()).collect();
            self.drop_stale_approvals(myself, &pending_ids);
            // An interrupt asked while the run was prepared pauses it before they run.
            if self.pause_if_interrupted(myself) {
                return;
            }
            // They run once this run is on record: after a crash from here on, the run is
            // found unfinished and their results are repaired rather than run again.
            if let Some(run) = self.run.as_mut() {
                run.phase = Phase::AwaitingDurability { calls: pending };
            }
            return self.advance(myself);
        }
        self.drop_stale_approvals(myself, &[]);
        self.first_call(myself);
    }

    /// The run's first model call; a prompt that brings the conversation past its budget is
    /// made room for first.
    pub(super) fn first_call(&mut self, myself: &ActorRef<SessionMsg>) {
        self.count_near_limits();
        self.prompt_memory_flush();
        if let Some(cut) = self.cut_needed() {
            return self.compact_then(myself, cut, AfterCompaction::CallModel);
        }
        self.begin_turn(myself);
    }
}

/// Asks the ledger, the memory and the context files what the run's first call needs.
async fn prepare(question: Question) -> Preparation {
    let admitted = oversight::authorize(&question.services, &question.run_id).await;
    if admitted.is_err() || question.doomed {
        return Preparation {
            admitted,
            assembled: None,
        };
    }
    let services = &question.services;
    let mut recall_warnings = Vec::new();
    let recalled = if question.prompt.is_empty() {
        Vec::new()
    } else {
        prompt::recall(&services.memory, &question.prompt, &mut recall_warnings).await
    };
    let mut assembled = prompt::assemble(
        &question.workspace,
        question.caller_dir.as_deref(),
        &services.home,
        &recalled,
    )
    .await;
    assembled.warnings.extend(recall_warnings);
    // The first call offers every MCP tool there will be: servers still starting are waited
    // for (bounded), and those that cannot run are named.
    services.mcp.settled().await;
    assembled
        .warnings
        .extend(services.mcp.unavailable().into_iter().map(|(server, why)| {
            format!("the MCP server '{server}' is unavailable ({why}); its tools cannot be called until it is back")
        }));
    Preparation {
        admitted,
        assembled: Some(assembled),
    }
}

/// How long the run may take, and what its end says if it takes longer: `max_duration_secs`,
/// or its goal's time constraint when that is the tighter one.
fn deadline(services: &Services, run: &ActiveRun) -> (std::time::Duration, String) {
    let limit = services.agent.max_duration_secs;
    let goal_secs = run.goal.as_ref().and_then(|g| g.constraints.time_secs);
    match goal_secs.filter(|s| *s > 0 && *s < limit) {
        Some(secs) => (
            std::time::Duration::from_secs(secs),
            format!("the run reached its goal's time constraint ({secs}s) and was stopped"),
        ),
        None => (
            services.agent.max_duration(),
            format!("the run reached max_duration_secs ({limit}s) and was stopped"),
        ),
    }
}

/// What a session is shown by: the first line of its first prompt, up to 80 bytes.
fn title_of(prompt: &str) -> Option<String> {
    let line = prompt.trim().lines().next()?.trim();
    Some(crate::text::truncate(line, 80)).filter(|t| !t.is_empty())
}
