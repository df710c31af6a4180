//! Showing a run's events to a person (or, with `--json`, to a script).

use crate::measures::{duration, seconds, Summary};
use crate::style::{paint, ASK, ERASE_LINE, FAIL, QUIET, TOOL};
use ryvos::protocol::event::GuardianAction;
use ryvos::protocol::records::ApprovalKind;
use ryvos::{Event, EventKind, RunStatus};
use std::io::{IsTerminal, Write};

/// Writes a line to stderr in one system call ([`crate::style::note_line`]).
macro_rules! note {
    ($($arg:tt)*) => {
        crate::style::note_line(&format!($($arg)*))
    };
}

// After `note!`: the macro is in scope for what follows it.
mod ending;

const SPINNER: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// How events are shown.
pub struct Renderer {
    json: bool,
    /// Whether the answer so far ends mid-line on stdout.
    open_line: bool,
    /// A spinner is drawn only for a person: stderr is a terminal and this is not `--json`.
    spin: bool,
    /// The run is waiting on the model (nothing streaming, no tool running), since when.
    waiting: Option<std::time::Instant>,
    /// The tool calls running, and since when: the spinner names the oldest.
    running: Vec<(ryvos::CallId, String, std::time::Instant)>,
    /// How long the call that just ended took, for its line.
    took: Option<String>,
    /// What the run's end said of its turns, tokens, cost and time.
    summary: Option<Summary>,
    frame: usize,
    spinner_drawn: bool,
    /// The spinner's pace.
    ticks: tokio::time::Interval,
    /// Notes for stderr that arrived while the answer's line was open.
    held_notes: Vec<String>,
    /// The run is hosted by ryvosd, so `ryvos approve` from another terminal can answer it.
    answerable_elsewhere: bool,
    /// `-q`: only the final answer, on stdout at the end, and errors on stderr.
    quiet: bool,
    /// In a chat: the next prompt goes on with the session, no command needs saying.
    in_chat: bool,
    /// The last error shown: a run that ends for it points to it rather than saying it again.
    last_error: Option<String>,
    /// The last retried failure shown, without its "trying again" part.
    last_retry: Option<String>,
}

impl Renderer {
    /// `json`: one event per line on stdout; otherwise the answer on stdout, the rest on stderr.
    pub fn new(json: bool) -> Self {
        Self {
            json,
            open_line: false,
            spin: !json && std::io::stderr().is_terminal(),
            waiting: None,
            running: Vec::new(),
            took: None,
            summary: None,
            frame: 0,
            spinner_drawn: false,
            ticks: {
                let mut ticks = tokio::time::interval(std::time::Duration::from_millis(100));
                ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                ticks
            },
            held_notes: Vec::new(),
            answerable_elsewhere: true,
            quiet: false,
            in_chat: false,
            last_error: None,
            last_retry: None,
        }
    }

    /// `-q`: shows only the final answer (on stdout, once the run ends) and errors.
    pub fn quiet(mut self, quiet: bool) -> Self {
        self.quiet = quiet;
        self.spin &= !quiet;
        self
    }

    /// For a run of a chat: its end says no command to go on with (the next prompt does).
    pub fn in_chat(mut self, in_chat: bool) -> Self {
        self.in_chat = in_chat;
        self
    }

    /// For a run hosted in this process: no other terminal can answer its approval requests.
    pub fn in_process(mut self) -> Self {
        self.answerable_elsewhere = false;
        self
    }

    /// Awaits `next` (the run's next event or reply) while the spinner turns.
    pub async fn wait<T>(&mut self, next: impl std::future::Future<Output = T>) -> T {
        tokio::pin!(next);
        loop {
            tokio::select! {
                value = &mut next => return value,
                _ = self.ticks.tick() => self.tick(),
            }
        }
    }

    /// Advances the spinner, when the run waits on the model or a tool, saying for how long.
    fn tick(&mut self) {
        // A question on the terminal is not drawn over.
        if !self.spin || self.open_line || crate::inline_approval::is_open() {
            return;
        }
        let doing = match (self.running.first(), self.waiting) {
            (Some((_, name, since)), _) => format!("running {name}{}", seconds(*since)),
            (None, Some(since)) => "waiting for the model".to_owned() + &seconds(since),
            (None, None) => return,
        };
        self.frame = (self.frame + 1) % SPINNER.len();
        eprint!("{ERASE_LINE}{} {doing}", SPINNER[self.frame]);
        self.spinner_drawn = true;
    }

    /// Keeps up with what the run waits on: the model, or tool calls (each timed).
    fn track(&mut self, kind: &EventKind) {
        let now = std::time::Instant::now();
        match kind {
            EventKind::ToolStart { call_id, name, .. } => {
                self.running.push((call_id.clone(), name.clone(), now));
            }
            EventKind::ToolEnd { call_id, .. } => {
                let at = self.running.iter().position(|(id, ..)| id == call_id);
                self.took = at.map(|at| duration(self.running.remove(at).2.elapsed()));
            }
            EventKind::RunComplete {
                turns,
                input_tokens,
                output_tokens,
                cost_cents,
                duration_ms,
                ..
            } => {
                self.summary = Some(Summary {
                    turns: *turns,
                    tokens: (*input_tokens, *output_tokens),
                    cost_cents: *cost_cents,
                    duration: std::time::Duration::from_millis(*duration_ms),
                });
            }
            _ => {}
        }
        let waits_on_model = matches!(
            kind,
            EventKind::RunStarted { .. }
                | EventKind::ToolEnd { .. }
                | EventKind::CheckpointSaved { .. }
        ) && self.running.is_empty();
        self.waiting = match waits_on_model {
            true => Some(self.waiting.unwrap_or(now)),
            false => None,
        };
    }

    fn clear_spinner(&mut self) {
        if self.spinner_drawn {
            eprint!("{ERASE_LINE}");
            self.spinner_drawn = false;
        }
    }

    /// Shows one event.
    ///
    /// Long because it is a table: an arm per kind of event, each a line or two of output.
    pub fn show(&mut self, event: &Event) {
        self.clear_spinner();
        self.track(&event.kind);
        // Said in every mode: a script waiting on the run is told why it waits.
        if let EventKind::RunParked { reason, message } = &event.kind {
            self.end_line();
            let waiting = match self.answerable_elsewhere {
                true => {
                    "; waiting until it goes on (Ctrl-C twice stops waiting; the run stays parked)"
                }
                false => "",
            };
            note!(
                "ryvos: run {} parked ({reason}): {message}{waiting}",
                event.run_id
            );
        }
        // Said in every mode: the history the model reads speaks of files elsewhere.
        if let EventKind::RunStarted {
            workspace,
            previous_workspace: Some(previous),
        } = &event.kind
        {
            note!(
                "ryvos: warning: session {} worked in {previous}; this run works in {workspace}, \
                 so the files its history speaks of may not be there",
                event.session_id
            );
        }
        // Said in every mode: a weakened sandbox, a tool server that did not start.
        if let EventKind::Warning { message } = &event.kind {
            self.end_line();
            note!("ryvos: {} {message}", paint(ASK, "warning:"));
        }
        if self.json {
            let mut out = std::io::stdout().lock();
            if let Ok(line) = serde_json::to_string(event) {
                writeln!(out, "{line}").and_then(|_| out.flush()).ok();
            }
            return;
        }
        // Quiet or not, what is asked for approval is shown before anyone is asked.
        if self.quiet && !matches!(event.kind, EventKind::ApprovalRequested { .. }) {
            match &event.kind {
                // The answer alone, as it was given: nothing when there is none, and no
                // reason for an end in its place (stderr says how the run ended).
                EventKind::RunComplete { output, status, .. }
                    if *status == RunStatus::Completed && !output.is_empty() =>
                {
                    crate::out::bytes(output.as_bytes());
                    if !output.ends_with('\n') {
                        crate::out::bytes(b"\n");
                    }
                }
                EventKind::Error { message } => {
                    note!("ryvos: {} {message}", paint(FAIL, "error:"));
                    self.last_error = Some(message.clone());
                }
                _ => {}
            }
            return;
        }
        match &event.kind {
            EventKind::TextDelta { text } => {
                let mut out = std::io::stdout().lock();
                write!(out, "{text}").and_then(|_| out.flush()).ok();
                self.open_line = !text.ends_with('\n');
            }
            EventKind::ToolStart { name, input, .. } => {
                self.end_line();
                note!(
                    "  {} {}",
                    paint(TOOL, &format!("[{name}]")),
                    clip(&input.to_string(), 100)
                );
            }
            EventKind::ToolEnd {
                name,
                is_error,
                output,
                ..
            } => {
                let first = output.lines().next().unwrap_or_default();
                let mark = match is_error {
                    true => paint(FAIL, "failed"),
                    false => "done".to_owned(),
                };
                let took = self
                    .took
                    .take()
                    .map(|t| format!(" in {t}"))
                    .unwrap_or_default();
                let tag = paint(TOOL, &format!("[{name}]"));
                note!("  {tag} {mark}{took}: {}", clip(first, 100));
            }
            EventKind::CheckpointSaved { turn } => {
                // A turn's commit overlaps the next model call, so this can arrive mid-answer;
                // the answer on stdout is never broken for it.
                let note = paint(QUIET, &format!("  [checkpoint] turn {turn} saved"));
                if self.open_line {
                    self.held_notes.push(note);
                } else {
                    note!("{note}");
                }
            }
            EventKind::Error { message } => {
                self.end_line();
                note!("ryvos: {} {message}", paint(FAIL, "error:"));
                self.last_error = Some(message.clone());
            }
            EventKind::GuardianStall {
                message, action, ..
            } => {
                // A retried call streams its answer again: the cut text ends here, marked.
                self.end_line();
                if *action == GuardianAction::Retry {
                    note!("  [guardian] {message}; the answer starts again below");
                } else {
                    note!("  [guardian] {message}");
                }
            }
            EventKind::ModelRetry {
                message,
                discarded_text,
                ..
            }
            | EventKind::ModelFallback {
                message,
                discarded_text,
                ..
            } => {
                // A retried call streams its answer again: the cut text ends here, marked.
                self.end_line();
                // A failure like the last one is not told again, only the next try.
                let (failure, next) = message.rsplit_once("; ").unwrap_or((message, ""));
                let again = self.last_retry.as_deref() == Some(failure);
                self.last_retry = Some(failure.to_owned());
                if again && !*discarded_text && !next.is_empty() {
                    note!("  [model] failed the same way; {next}");
                } else if *discarded_text {
                    note!("  [model] {message}; the text above is discarded, the answer starts again below");
                } else {
                    note!("  [model] {message}");
                }
            }
            EventKind::JudgeVerdict {
                verdict,
                reason,
                score,
                periodic,
                ..
            } => {
                self.end_line();
                let when = if *periodic { " (progress check)" } else { "" };
                note!("  [judge] {verdict:?}{when}, score {score:.2}: {reason}");
            }
            EventKind::DirectorPlan {
                plan,
                revision,
                resumed,
            } => {
                self.end_line();
                let what = match (resumed, revision) {
                    (true, _) => "resumed".to_owned(),
                    (false, 0) => "plan".to_owned(),
                    (false, n) => format!("plan, revision {n}"),
                };
                note!("  [director] {what}:");
                for step in &plan.steps {
                    let after = if step.depends_on.is_empty() {
                        String::new()
                    } else {
                        format!(" (after {})", step.depends_on.join(", "))
                    };
                    note!("    {}: {}{after}", step.id, clip(&step.goal, 80));
                }
            }
            EventKind::DirectorStep {
                step,
                status,
                detail,
                ..
            } => {
                self.end_line();
                let first = detail.lines().next().unwrap_or_default();
                note!("  [director] step {step} {status:?}: {}", clip(first, 100));
            }
            EventKind::CallRecovered {
                call_id,
                tool,
                effect,
                action,
            } => {
                self.end_line();
                let what = match action.as_str() {
                    "run_again" => "runs again, with the same idempotency key",
                    "found_done" => "had taken effect: its result is recorded, it is not run again",
                    "not_done" => "had not taken effect: it runs",
                    "in_doubt" => "may or may not have taken effect: a person is asked",
                    _ => "had not started: it runs",
                };
                note!(
                    "  [recovered] {tool} ({call_id}, {}) cut off by a crash {what}",
                    effect.as_str()
                );
            }
            EventKind::ApprovalRequested {
                request_id,
                tool,
                input,
                tier,
                reasons,
                kind,
                ..
            } => {
                self.end_line();
                let mut why = if reasons.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", reasons.join("; "))
                };
                if *kind == ApprovalKind::InDoubt {
                    why.push_str(
                        " [in doubt: a crash cut it off, it may have taken effect; approving \
                         runs it again with the same idempotency key]",
                    );
                }
                let how = if self.answerable_elsewhere {
                    format!(
                        "\n             `ryvos approve {request_id}` or `ryvos deny {request_id} \
                         --reason …`"
                    )
                } else {
                    String::new()
                };
                note!(
                    "  {} {tool} {} needs approval, {tier:?}{why}{how}",
                    paint(ASK, "[approval]"),
                    clip(&input.to_string(), 100)
                );
            }
            EventKind::SecurityDecision {
                tool,
                tier,
                allowed: false,
                decided_by,
                ..
            } if decided_by == "policy" => {
                self.end_line();
                note!(
                    "  {} {tool} ({tier:?}) denied by the policy",
                    paint(FAIL, "[security]")
                );
            }
            EventKind::HookDecision {
                event,
                hook,
                verdict,
                reason,
                ..
            } if *verdict != ryvos_protocol::hook::HookVerdict::Context => {
                self.end_line();
                let why = reason.as_deref().map(|r| format!(": {}", clip(r, 200)));
                note!(
                    "  [hook] {event} {}{} ({})",
                    verdict.as_str(),
                    why.unwrap_or_default(),
                    clip(hook, 80)
                );
            }
            EventKind::EgressDecision {
                host,
                port,
                allowed,
                ..
            } => {
                self.end_line();
                let what = if *allowed { "allowed" } else { "refused" };
                note!("  [egress] {host}:{port} {what}");
            }
            EventKind::ApprovalResolved {
                approved,
                reason,
                by,
                ..
            } => {
                self.end_line();
                let what = if *approved { "approved" } else { "denied" };
                let why = reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default();
                note!("  {} {what} by {by}{why}", paint(ASK, "[approval]"));
            }
            EventKind::GuardianHint { message, .. } => {
                self.end_line();
                note!(
                    "  [guardian hint] {}",
                    message.trim_start_matches("[Guardian] ")
                );
            }
            EventKind::GuardianDoomLoop {
                tool,
                repeats,
                action,
                ..
            } => {
                self.end_line();
                note!("  [guardian] '{tool}' repeated {repeats} times with the same input and result ({action:?})");
            }
            EventKind::ContextPruned {
                dropped_messages,
                summarized,
                tokens_before,
                tokens_after,
                facts_kept,
                ..
            } => {
                let how = if *summarized { "summarized and " } else { "" };
                let facts = match facts_kept.len() {
                    0 => String::new(),
                    n => format!("; {n} exact facts the summary left out are kept below it"),
                };
                let note = format!(
                    "  [context] the {dropped_messages} oldest messages were {how}left out: \
                     {tokens_before} -> {tokens_after} tokens{facts}"
                );
                if self.open_line {
                    self.held_notes.push(note);
                } else {
                    note!("{note}");
                }
            }
            EventKind::GuardianBudgetAlert { message, .. } => {
                self.end_line();
                note!("  {} {message}", paint(ASK, "[budget]"));
            }
            EventKind::BudgetWarning { message, .. } => {
                self.end_line();
                note!("  {} warning: {message}", paint(ASK, "[budget]"));
            }
            EventKind::BudgetExceeded { message, .. } => {
                self.end_line();
                note!("  {} limit reached: {message}", paint(ASK, "[budget]"));
            }
            EventKind::Interrupt { pending_calls, .. } if !pending_calls.is_empty() => {
                self.end_line();
                let next = match self.in_chat {
                    true => "your next prompt",
                    false => "`ryvos run --resume SESSION PROMPT`",
                };
                note!(
                    "  [paused] {} tool call(s) left pending; {next} runs them first",
                    pending_calls.len()
                );
            }
            EventKind::OutputTruncated { message, .. } => {
                self.end_line();
                note!("  [truncated] {message}");
            }
            EventKind::RunComplete { truncated, .. } => {
                self.end_line();
                if *truncated {
                    note!(
                        "ryvos: the answer was cut off at the model's output limit \
                         ([model] max_output_tokens)"
                    );
                }
            }
            _ => {}
        }
    }

    fn end_line(&mut self) {
        if self.open_line {
            // A run goes on (and is stored) whoever reads its output: a closed stdout is
            // ignored here, as it is for the text itself.
            let mut out = std::io::stdout().lock();
            writeln!(out).and_then(|()| out.flush()).ok();
            self.open_line = false;
        }
        for note in self.held_notes.drain(..) {
            note!("{note}");
        }
    }
}

/// `text`, cut after `max` characters with an ellipsis.
pub(crate) fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}
