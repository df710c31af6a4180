//! How a run begins: the session is taken (and reloaded if it must be), the ledger asked for
//! leave to spend, the system prompt assembled (context files, recalled memories), the prompt
//! stored; then the calls a paused run left run before anything else, and room is made in the
//! context before the first model call.

use super::{Driver, Step};
use crate::context::layers::Assembled;
use crate::event::{EventKind, RunStatus};
use crate::hooks::Step as HookStep;
use crate::ids::RunId;
use crate::llm_stream::ModelChain;
use crate::message::{Message, ToolCall};
use crate::session::conversation::Conversation;
use crate::session::run::ActiveRun;
use crate::session::siblings::Refusal;
use crate::session::{prompt, RunSpec, Services};
use crate::store::{Write, WriteBatch};
use crate::tools::Workspace;
use ryvos_protocol::hook::{HookEvent, HookVerdict};
use ryvos_protocol::records::refused_while_parked;
use std::path::PathBuf;
use std::sync::Arc;

/// The run `spec` asks for, asking `models`, about to begin.
pub(super) fn new_run(
    session: &Conversation,
    run_id: RunId,
    spec: &RunSpec,
    models: Arc<ModelChain>,
) -> ActiveRun {
    let parent = spec.trace_parent.as_ref();
    let events = session
        .events
        .for_run_under(session.id.clone(), run_id.clone(), parent);
    let next_seq = session.history.next_seq();
    ActiveRun::new(run_id, spec, events, models, &session.services, next_seq)
}

impl Driver {
    /// Takes the session and prepares the first call; the calls a paused run left pending,
    /// which run first.
    pub(super) async fn begin(&mut self, spec: RunSpec) -> Step<Vec<ToolCall>> {
        let leased = self.take_session().await;
        let workspace = spec.workspace.root().display().to_string();
        let previous_workspace = (self.session.workspace.as_ref())
            .filter(|w| **w != workspace && !self.session.history.is_empty())
            .cloned();
        self.run.events().emit(EventKind::RunStarted {
            workspace: workspace.clone(),
            previous_workspace,
        });
        let unready = match (&leased, &self.session.load_error) {
            (Err(e), _) => Some(format!("the session could not be taken for this run: {e}")),
            (Ok(_), Some(error)) => Some(format!("the session could not be loaded: {error}")),
            (Ok(_), None) => None,
        };
        if let Some(reason) = unready {
            // Nothing is written: the session is not this run's to write.
            return Err(self.end(RunStatus::Failed, reason));
        }
        match &spec.continues {
            Some(continuation) => {
                self.still_parked()?;
                if let Some((status, reason)) = continuation.ends_as.clone() {
                    // Ended where it parked: only its record changes.
                    self.run.holds_session();
                    return Err(self.end(status, reason));
                }
            }
            None => self.no_run_parked()?,
        }
        self.run.holds_session();
        self.no_rewind_cut_off()?;
        self.mark_start().await;
        let session = &mut self.session;
        session.last_run = Some(self.run.id().clone());
        session.last_status = None;
        session.workspace = Some(workspace);
        if session.title.is_none() {
            session.title = title_of(&spec.prompt);
        }
        let for_hooks = crate::hooks::ForRun {
            sandbox: self.run.sandbox().clone(),
            events: self.run.events().clone(),
            directed: self.run.is_directed(),
            cancel: self.run.cancel().clone(),
        };
        let question = Question {
            source: match session.history.is_empty() {
                true => "startup",
                false => "resume",
            },
            for_hooks,
            services: session.services.clone(),
            run_id: self.run.id().clone(),
            run_limit_cents: self.run.limits().per_run_limit_cents(),
            prompt: self.run.prompt_to_give().to_owned(),
            workspace: spec.workspace,
            caller_dir: spec.caller_dir,
            session_servers: self.run.session_servers().cloned(),
            doomed: self.nothing_to_continue(),
        };
        let prepared = self.wait(prepare(question)).await?;
        self.prepared(prepared)
    }

    /// Takes the session for the run. Where daemons share the store, the run holds it: nobody
    /// else writes to it meanwhile, and what this process remembers is stale if somebody did
    /// since; then its history is read back first.
    async fn take_session(&mut self) -> Result<crate::store::Lease, crate::store::StoreError> {
        let session = &mut self.session;
        session.settle_confirmations();
        let leased = session.services.store.lease(&session.id).await;
        if leased.as_ref().is_ok_and(|lease| lease.changed_hands) {
            session.needs_reload = true;
        }
        if session.needs_reload && leased.is_ok() {
            // The session's own store: the run cannot begin before its history is back.
            session.reload().await;
            self.begin_turn();
        }
        leased
    }

    /// A run without a prompt continues the conversation: it needs one to continue.
    fn nothing_to_continue(&self) -> bool {
        let history = &self.session.history;
        self.run.prompt_to_give().is_empty() && (history.is_empty() || history.ends_with_answer())
    }

    /// A session whose latest run is parked takes no other run until that one is continued
    /// or stopped: it would go on from a conversation that moved on.
    fn no_run_parked(&self) -> Step<()> {
        let session = &self.session;
        let last_run = session.last_run.as_ref();
        match refused_while_parked(&session.id, last_run, session.last_status) {
            Some(why) => Err(self.end(RunStatus::Failed, why)),
            None => Ok(()),
        }
    }

    /// A session whose rewind was cut off takes no run until the rewind is finished.
    fn no_rewind_cut_off(&self) -> Step<()> {
        match &self.session.rewinding {
            Some(intent) => {
                let cut = crate::session::RewindError::CutOff {
                    session: self.session.id.clone(),
                    label: intent.label.clone(),
                    undoing: intent.undoing,
                };
                Err(self.end(RunStatus::Failed, cut.to_string()))
            }
            None => Ok(()),
        }
    }

    /// A continued run goes on only from where it parked: its session's latest run, parked
    /// (a second continue, or one after the session moved on, is refused and writes nothing).
    fn still_parked(&self) -> Step<()> {
        let session = &self.session;
        if session.last_run.as_ref() == Some(self.run.id())
            && session.last_status == Some(RunStatus::Parked)
        {
            return Ok(());
        }
        let now = match (&session.last_run, session.last_status) {
            (Some(run), Some(status)) => format!("its session's latest run is {run}, {status}"),
            (Some(run), None) => format!("its session's latest run, {run}, is in flight"),
            _ => "its session has no run on record".into(),
        };
        Err(self.end(
            RunStatus::Failed,
            format!(
                "run {} cannot go on: it is not parked ({now})",
                self.run.id()
            ),
        ))
    }

    /// The first call is prepared: a run over budget is refused before its prompt enters the
    /// conversation; otherwise the prompt is stored (after the calls a paused run left, if
    /// any, which are returned).
    fn prepared(&mut self, prepared: Preparation) -> Step<Vec<ToolCall>> {
        let prompt_context = self.hooks_prepared(&prepared.hooked)?;
        if let Err(refusal) = prepared.admitted {
            super::spending::announce(self.run.events(), &refusal);
            // A parked run still at its limit parks again; a new one is refused, nothing done.
            if self.run.before().is_continue() {
                return Err(self.refused(refusal));
            }
            return Err(self.end(refusal.status, refusal.reason));
        }
        let Some(assembled) = prepared.assembled.filter(|_| !self.nothing_to_continue()) else {
            return Err(self.failure(
                "the run has no prompt and there is nothing to continue: the session is empty \
                 or its last run ended with an answer; give a prompt"
                    .into(),
            ));
        };
        self.run.set_system(assembled.prompt.into());
        let prompt = self.run.prompt_to_give().to_owned();
        if prompt.is_empty() && !self.run.before().is_continue() {
            // Limits hold across resumes: the turns since the last prompt count here too (a
            // continued run counts its own already).
            let turns = self.session.history.turns_since_prompt();
            self.run.before_mut().count_turns_since_prompt(turns);
        }
        // Calls a paused run left come first: their results must follow the answer that asked
        // for them, so the prompt waits until they have run.
        let left = self.session.history.pending_calls();
        // Taken up by this run: from its first batch on, a crash while they run leaves them
        // cut off (repaired on reload), never pending again.
        self.session.paused_calls.clear();
        self.prompt_context = prompt_context;
        if left.is_empty() {
            self.push_prompt(prompt);
        } else {
            self.run.hold_prompt(prompt);
        }
        self.begin_turn();
        let record = self.run.record(None);
        self.submit(None, Some(record));
        if let Some(message) = self.session.services.sandbox.run_warning() {
            self.run.events().emit(EventKind::Warning { message });
        }
        for message in assembled.warnings {
            self.run.events().emit(EventKind::Warning { message });
        }
        // Stale requests of calls no longer pending are done with.
        let left_ids: Vec<_> = left.iter().map(|c| c.id.clone()).collect();
        self.drop_stale_approvals(&left_ids);
        Ok(left)
    }

    /// Runs the calls a paused run left (once this run is on record: after a crash from here
    /// on, the run is found unfinished and their results are repaired rather than run again);
    /// then the prompt follows them.
    pub(super) async fn run_left_calls(&mut self, left: Vec<ToolCall>) -> Step<()> {
        // An interrupt asked while the run was prepared pauses it before they run.
        self.pause_if_interrupted()?;
        self.run_tools(left, true).await?;
        self.pause_if_interrupted()?;
        let prompt = self.run.take_held_prompt().unwrap_or_default();
        self.push_prompt(prompt);
        self.submit(None, None);
        self.begin_turn();
        Ok(())
    }

    /// Appends the run's prompt (none when it continues without one), shown to the host first,
    /// and what its hooks gave to read with it.
    pub(super) fn push_prompt(&mut self, prompt: String) {
        if prompt.is_empty() {
            return;
        }
        let message = Message::user(prompt);
        self.run.observe(&message);
        self.session.history.push(message);
        let context = self.prompt_context.take();
        self.push_hook_context(HookEvent::UserPromptSubmit, context);
    }

    /// The run's hooks, armed; what they decided at its start and about its prompt audited. A
    /// refused prompt ends the run `blocked` before it is stored. The context for the prompt.
    fn hooks_prepared(&mut self, hooked: &Hooked) -> Step<Option<String>> {
        self.run.set_hooks(hooked.hooks.clone());
        let start = crate::hooks::start_event(self.run.is_directed());
        self.audit_hooks(start, &hooked.started);
        self.audit_hooks(HookEvent::UserPromptSubmit, &hooked.prompted);
        self.stopped_by_hook(start, &hooked.started)?;
        self.stopped_by_hook(HookEvent::UserPromptSubmit, &hooked.prompted)?;
        if hooked.prompted.decided() == Some(HookVerdict::Block) {
            let given = self.run.prompt_to_give().to_owned();
            self.run.withhold_prompt();
            if self.session.title == title_of(&given) {
                self.session.title = None;
            }
            let why = hooked.prompted.reason_or(HookEvent::UserPromptSubmit);
            let reason = format!("a UserPromptSubmit hook refused the prompt: {why}");
            return Err(self.end(RunStatus::Blocked, reason));
        }
        Ok(hooked.prompted.context.clone())
    }

    /// Forgets the approval requests this session's paused runs left for calls that are not
    /// pending any more (they got results another way), in memory and in the store.
    fn drop_stale_approvals(&mut self, pending: &[crate::ids::CallId]) {
        let session = &mut self.session;
        let stale = session.services.approvals.drop_paused(&session.id, pending);
        if stale.is_empty() {
            return;
        }
        let forget = stale.into_iter().map(|request_id| Write::Approval {
            request_id,
            kept: None,
        });
        let batch = WriteBatch::of(session.id.clone(), forget);
        session.submit_batch(batch);
    }

    /// Before the first model call: a prompt that brings the conversation past its budget is
    /// made room for.
    pub(super) async fn before_first_call(&mut self) -> Step<()> {
        self.count_near_limits();
        self.prompt_memory_flush();
        self.make_room().await
    }
}

/// What a run's first call needs.
struct Preparation {
    /// Whether the ledger lets the run spend.
    admitted: Result<(), Refusal>,
    /// Its hooks, and what they said at its start.
    hooked: Hooked,
    /// The system prompt and what went wrong assembling it; `None` when the run goes no
    /// further (refused, or with nothing to continue).
    assembled: Option<Assembled>,
}

/// A run's hooks, armed, and what they said at its start and about its prompt.
#[derive(Default)]
struct Hooked {
    hooks: crate::hooks::RunHooks,
    /// `SessionStart` (a Director's step: `SubagentStart`): its context is in the system
    /// prompt.
    started: crate::hooks::Fired,
    prompted: crate::hooks::Fired,
}

/// What [`prepare`] is asked about.
struct Question {
    /// How `SessionStart` hooks are told the run began: `startup` or `resume`.
    source: &'static str,
    /// What the run's hooks run with.
    for_hooks: crate::hooks::ForRun,
    services: Services,
    run_id: RunId,
    /// The run's own per-run limit in cents, when it set one.
    run_limit_cents: Option<u64>,
    prompt: String,
    workspace: Workspace,
    caller_dir: Option<PathBuf>,
    /// The MCP servers the session brought, when it has some.
    session_servers: Option<crate::mcp::McpServers>,
    /// The run cannot go on whatever the answers: the prompt is not worth assembling.
    doomed: bool,
}

/// Asks the ledger, the memory and the context files what the run's first call needs.
async fn prepare(question: Question) -> Preparation {
    let services = &question.services;
    let admitted = (services.ledger)
        .authorize(&question.run_id, question.run_limit_cents)
        .await;
    if admitted.is_err() || question.doomed {
        return Preparation {
            admitted,
            hooked: Hooked::default(),
            assembled: None,
        };
    }
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
    for servers in std::iter::once(&services.mcp).chain(&question.session_servers) {
        servers.settled().await;
        assembled
            .warnings
            .extend(servers.unavailable().into_iter().map(|(server, why)| {
                format!("the MCP server '{server}' is unavailable ({why}); its tools cannot be called until it is back")
            }));
    }
    let hooked = hook_start(&question, &mut assembled).await;
    Preparation {
        admitted,
        hooked,
        assembled: Some(assembled),
    }
}

/// Arms the run's hooks (the person's, and the workspace's once trusted; a workspace's that
/// are not is warned of) and asks them at its start and about its prompt.
async fn hook_start(question: &Question, assembled: &mut Assembled) -> Hooked {
    let services = &question.services;
    let root = question.workspace.root();
    let (theirs, warning) = crate::hooks::project::for_run(root, &services.store).await;
    assembled.warnings.extend(warning);
    let mut hooks = services.hooks.to_vec();
    hooks.extend(theirs);
    let hooks = crate::hooks::RunHooks::arm(hooks, question.for_hooks.clone());
    let start = match question.for_hooks.directed {
        true => HookStep::SubagentStart {
            task: &question.prompt,
        },
        false => HookStep::SessionStart {
            source: question.source,
        },
    };
    let started = hooks.fire(&start).await;
    if let Some(context) = &started.context {
        let event = start.event();
        assembled
            .prompt
            .push_str(&format!("\n\n# Context from {event} hooks\n\n{context}"));
    }
    let prompted = match question.prompt.is_empty() {
        true => crate::hooks::Fired::default(),
        false => {
            let prompt = HookStep::UserPromptSubmit {
                prompt: &question.prompt,
            };
            hooks.fire(&prompt).await
        }
    };
    Hooked {
        hooks,
        started,
        prompted,
    }
}

/// What a session is shown by: the first line of its first prompt, up to 80 bytes.
fn title_of(prompt: &str) -> Option<String> {
    let line = prompt.trim().lines().next()?.trim();
    Some(crate::text::truncate(line, 80)).filter(|t| !t.is_empty())
}
