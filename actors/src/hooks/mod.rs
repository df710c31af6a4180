//! Hooks: a person's programs run at each step of a run, in Claude Code's contract, so hooks
//! written for it work unchanged (docs/hooks.md).
//!
//! A step's matching hooks run at once, each confined as the model's commands are (the run's
//! sandbox, with no network but the hook's own `allowed_domains`) and stopped at its timeout;
//! then their answers are put together: for a call, `deny` over `ask` over `allow`; a `block`
//! by any; every context given. A hook that fails changes nothing: the step goes on as if it
//! had not run, and the failure is published. `config.toml`'s hooks are the person's own; a
//! workspace's `.ryvos/hooks.toml` runs only once trusted, by its content's hash ([`project`]).
//! A run with no hooks pays nothing: [`RunHooks`] is then empty and every step skips it.

mod calls;
mod command;
mod http;
pub(crate) mod input;
mod matcher;
pub(crate) mod project;
mod reply;

pub(crate) use input::{Asker, Called, Step};

use crate::config::{HookSpec, HooksConfig};
use crate::event::{EventKind, RunEvents};
use crate::sandbox::{AllowedDomains, RunSandbox};
use matcher::Matcher;
use reply::{Ended, Reply};
use ryvos_protocol::hook::{HookDecision, HookEvent, HookVerdict};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// A hook's timeout when it sets none.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest a hook may be given.
const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// The longest hook label kept in events and the audit, in bytes.
const LABEL_BYTES: usize = 200;

/// One hook, compiled.
#[derive(Debug)]
pub(crate) struct Hook {
    pub event: HookEvent,
    matcher: Matcher,
    handler: Handler,
    timeout: Duration,
    /// Its matcher as written.
    pub matcher_text: String,
    /// Where it is configured and what it runs: `config.toml: python3 check.py`.
    pub label: String,
}

#[derive(Debug)]
enum Handler {
    Command { line: String, reach: AllowedDomains },
    Http(http::Address),
}

impl Hook {
    /// The hook `spec` configures for `event`, in the file `origin`; or what is wrong with it.
    fn compile(event: HookEvent, spec: &HookSpec, origin: &str) -> Result<Self, String> {
        let at = format!("hooks.{event}");
        let (line, url) = (spec.command.trim(), spec.url.trim());
        let reach = AllowedDomains::parse(&spec.allowed_domains)
            .map_err(|e| format!("{at}.allowed_domains: {e}"))?;
        let handler = match (line.is_empty(), url.is_empty()) {
            (true, true) => return Err(format!("{at}: a hook needs a `command` or a `url`")),
            (false, false) => {
                return Err(format!("{at}: a hook has a `command` or a `url`, not both"))
            }
            (false, true) => Handler::Command {
                line: line.to_owned(),
                reach,
            },
            (true, false) => Handler::Http(
                http::Address::parse(url, &reach).map_err(|e| format!("{at}.url: {e}"))?,
            ),
        };
        let matcher = Matcher::parse(&spec.matcher).map_err(|e| format!("{at}: {e}"))?;
        let timeout = match spec.timeout_secs {
            Some(0) => return Err(format!("{at}.timeout_secs: give at least 1 second")),
            Some(secs) if secs > MAX_TIMEOUT.as_secs() => {
                return Err(format!(
                    "{at}.timeout_secs: at most {} (a run waits for its hooks)",
                    MAX_TIMEOUT.as_secs()
                ))
            }
            Some(secs) => Duration::from_secs(secs),
            None => DEFAULT_TIMEOUT,
        };
        let what = match &handler {
            Handler::Command { line, .. } => line.clone(),
            Handler::Http(address) => format!("POST {}", address.as_str()),
        };
        Ok(Hook {
            event,
            matcher,
            handler,
            timeout,
            matcher_text: spec.matcher.clone(),
            label: crate::text::truncate(&format!("{origin}: {what}"), LABEL_BYTES),
        })
    }

    /// How long it may take.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }
}

/// The event a run's start is told as: a Director's step is a subagent.
pub(crate) fn start_event(directed: bool) -> HookEvent {
    match directed {
        true => HookEvent::SubagentStart,
        false => HookEvent::SessionStart,
    }
}

/// The event a run about to end with its answer is told as.
pub(crate) fn stop_event(directed: bool) -> HookEvent {
    match directed {
        true => HookEvent::SubagentStop,
        false => HookEvent::Stop,
    }
}

/// The person's own hooks, `config.toml`'s, compiled.
pub(crate) fn configured(config: &HooksConfig) -> Result<Arc<Vec<Arc<Hook>>>, String> {
    compile(config, "config.toml").map(Arc::new)
}

/// Hooks as a file configures them, compiled.
pub(crate) fn compile(config: &HooksConfig, origin: &str) -> Result<Vec<Arc<Hook>>, String> {
    let mut hooks = Vec::new();
    for (event, specs) in config {
        for spec in specs {
            hooks.push(Arc::new(Hook::compile(*event, spec, origin)?));
        }
    }
    Ok(hooks)
}

/// The hooks of one run, ready to fire; empty (and free) when it has none.
#[derive(Clone, Default)]
pub(crate) struct RunHooks(Option<Arc<Armed>>);

struct Armed {
    hooks: Vec<Arc<Hook>>,
    /// The run's directory, as hooks are told it.
    cwd: String,
    /// A Director's step: its run is what hooks see as the subagent.
    directed: bool,
    sandbox: RunSandbox,
    events: RunEvents,
    /// Made at the first HTTP hook: most runs have none.
    client: std::sync::OnceLock<reqwest::Client>,
    /// The run's end: hooks still running then are stopped (but those told of the end).
    cancel: tokio_util::sync::CancellationToken,
}

/// Who a run's hooks run for.
#[derive(Clone)]
pub(crate) struct ForRun {
    pub sandbox: RunSandbox,
    pub events: RunEvents,
    pub directed: bool,
    pub cancel: tokio_util::sync::CancellationToken,
}

impl RunHooks {
    /// `hooks` armed for the run `for_run` describes.
    pub(crate) fn arm(hooks: Vec<Arc<Hook>>, for_run: ForRun) -> Self {
        if hooks.is_empty() {
            return RunHooks(None);
        }
        RunHooks(Some(Arc::new(Armed {
            hooks,
            directed: for_run.directed,
            cwd: for_run.sandbox.workspace().display().to_string(),
            sandbox: for_run.sandbox,
            events: for_run.events,
            client: std::sync::OnceLock::new(),
            cancel: for_run.cancel,
        })))
    }

    /// Whether any hook runs at `event`.
    pub(crate) fn any(&self, event: HookEvent) -> bool {
        (self.0.as_ref()).is_some_and(|armed| armed.hooks.iter().any(|h| h.event == event))
    }

    /// The run's directory, as hooks are told it.
    pub(crate) fn cwd(&self) -> &str {
        self.0.as_ref().map_or("", |armed| armed.cwd.as_str())
    }

    /// Runs the hooks that match `step`, all at once, and puts their answers together; every
    /// hook that said something (or failed) is published as a `HookDecision`.
    pub(crate) async fn fire(&self, step: &Step<'_>) -> Fired {
        let Some(armed) = &self.0 else {
            return Fired::default();
        };
        let event = step.event();
        let names = step.match_names();
        let names: Option<Vec<&str>> =
            (names.as_ref()).map(|n| n.iter().map(String::as_str).collect());
        let mut matched: Vec<&Arc<Hook>> = Vec::new();
        for hook in armed.hooks.iter().filter(|h| h.event == event) {
            let matches = (names.as_ref()).is_none_or(|names| hook.matcher.matches(names));
            // The same handler configured twice runs once.
            if matches && !matched.iter().any(|m| same_handler(m, hook)) {
                matched.push(hook);
            }
        }
        if matched.is_empty() {
            return Fired::default();
        }
        let (session_id, run_id) = (armed.events.session_id(), armed.events.run_id());
        let asker = Asker {
            session_id: session_id.as_str(),
            run_id: run_id.as_str(),
            cwd: &armed.cwd,
            agent_id: armed.directed.then_some(run_id.as_str()),
        };
        let body = serde_json::to_vec(&input::input(step, &asker)).unwrap_or_default();
        let env = [
            ("CLAUDE_PROJECT_DIR", armed.cwd.clone()),
            ("RYVOS_SESSION_ID", session_id.to_string()),
            ("RYVOS_RUN_ID", run_id.to_string()),
            ("RYVOS_HOOK_EVENT", event.as_str().to_owned()),
        ];
        let all =
            futures_util::future::join_all(matched.iter().map(|hook| armed.run(hook, &body, &env)));
        // A run that ends stops its hooks (dropped, each is killed), but for those told of
        // its end, which come after it.
        let told_of_end = matches!(event, HookEvent::RunParked | HookEvent::SessionEnd);
        let replies = match told_of_end {
            true => all.await,
            false => tokio::select! {
                replies = all => replies,
                _ = armed.cancel.cancelled() => return Fired::default(),
            },
        };
        let call_id = step.call().map(|c| crate::ids::CallId::new(c.call_id));
        let mut fired = Fired::default();
        for (hook, reply) in matched.into_iter().zip(replies) {
            if reply.verdict == HookVerdict::Failed {
                tracing::warn!(hook = %hook.label, event = %event, reason = ?reply.reason, "a hook failed");
            }
            // A hook that said nothing is not published, but is kept with the others: that it
            // was asked is what keeps it from being asked twice.
            if reply.says_something() {
                armed.events.emit(EventKind::HookDecision {
                    event,
                    hook: hook.label.clone(),
                    verdict: reply.verdict,
                    reason: reply.reason.clone(),
                    call_id: call_id.clone(),
                });
            }
            fired.take(event, &hook.label, reply);
        }
        fired
    }
}

impl Armed {
    async fn run(&self, hook: &Hook, body: &[u8], env: &[(&'static str, String)]) -> Reply {
        let ended = match &hook.handler {
            Handler::Command { line, reach } => {
                let sandbox = self.sandbox.for_hook(reach.clone());
                let running = command::Running {
                    sandbox: &sandbox,
                    input: body,
                    timeout: hook.timeout,
                    env,
                };
                command::run(line, running).await
            }
            Handler::Http(address) => {
                let client = self.client.get_or_init(http::client);
                http::post(client, address, body.to_vec(), hook.timeout).await
            }
        };
        if let Ended::Failed(why) = &ended {
            tracing::debug!(hook = %hook.label, "{why}");
        }
        reply::read(hook.event, ended)
    }
}

fn same_handler(a: &Hook, b: &Hook) -> bool {
    match (&a.handler, &b.handler) {
        (Handler::Command { line: x, .. }, Handler::Command { line: y, .. }) => x == y,
        (Handler::Http(x), Handler::Http(y)) => x.as_str() == y.as_str(),
        _ => false,
    }
}

/// What the hooks of one step decided, put together.
#[derive(Debug, Default)]
pub(crate) struct Fired {
    /// Each hook's decision (a silent one's too), for the audit.
    pub decisions: Vec<HookDecision>,
    /// The strongest decision: a `stop`; a call's `deny` over `ask` over `allow`; any `block`.
    pub verdict: Option<HookVerdict>,
    /// Why, as the deciding hooks said it.
    pub reason: Option<String>,
    /// The call's input as a hook changed it (the first hook that did).
    pub updated_input: Option<Value>,
    /// Everything the hooks gave the model to read.
    pub context: Option<String>,
    /// A hook said `"continue": false`: the run stops, for this reason.
    pub stop: Option<String>,
}

impl Fired {
    fn take(&mut self, event: HookEvent, label: &str, reply: Reply) {
        self.decisions.push(HookDecision {
            event,
            hook: label.to_owned(),
            verdict: reply.verdict,
            reason: reply.reason.clone(),
            updated_input: reply.updated_input.clone(),
            context: reply.context.clone(),
        });
        if let Some(stop) = &reply.stop {
            self.stop.get_or_insert(stop.clone());
        }
        if let Some(context) = reply.context {
            self.context = Some(match self.context.take() {
                Some(before) => format!("{before}\n\n{context}"),
                None => context,
            });
        }
        if self.updated_input.is_none() && reply.verdict != HookVerdict::Deny {
            self.updated_input = reply.updated_input;
        }
        let rank = |v: Option<HookVerdict>| match v {
            Some(HookVerdict::Stop) => 4,
            Some(HookVerdict::Deny | HookVerdict::Block) => 3,
            Some(HookVerdict::Ask) => 2,
            Some(HookVerdict::Allow) => 1,
            _ => 0,
        };
        let verdict = Some(reply.verdict);
        if rank(verdict) > rank(self.verdict) {
            self.verdict = verdict;
            self.reason = reply.reason.or(reply.stop);
        } else if rank(verdict) == rank(self.verdict) && rank(verdict) > 0 {
            if let Some(more) = reply.reason {
                self.reason = Some(match self.reason.take() {
                    Some(before) => format!("{before}; {more}"),
                    None => more,
                });
            }
        }
    }

    /// The decisions `recorded` in the audit, put together again.
    pub(crate) fn recorded(recorded: Vec<HookDecision>) -> Self {
        let mut fired = Fired::default();
        for decision in recorded {
            let reply = Reply {
                verdict: decision.verdict,
                stop: (decision.verdict == HookVerdict::Stop).then(|| {
                    (decision.reason.clone()).unwrap_or_else(|| "a hook stopped the run".into())
                }),
                reason: decision.reason,
                updated_input: decision.updated_input,
                context: decision.context,
            };
            fired.take(decision.event, &decision.hook, reply);
        }
        fired
    }

    /// Whether any hook decided or gave something (or failed), beyond being asked.
    pub(crate) fn said_something(&self) -> bool {
        (self.decisions.iter()).any(|d| {
            d.verdict != HookVerdict::Context || d.context.is_some() || d.updated_input.is_some()
        })
    }

    /// The decision, when one was made (`allow`, `deny`, `ask`, `block`).
    pub(crate) fn decided(&self) -> Option<HookVerdict> {
        self.verdict
    }

    /// The reason given, or a plain one naming the event.
    pub(crate) fn reason_or(&self, event: HookEvent) -> String {
        self.reason
            .clone()
            .unwrap_or_else(|| format!("a {event} hook decided so"))
    }
}

#[cfg(test)]
mod tests {
    use super::{Fired, Reply};
    use ryvos_protocol::hook::{HookEvent, HookVerdict};

    fn reply(verdict: HookVerdict, reason: &str) -> Reply {
        Reply {
            verdict,
            reason: Some(reason.into()),
            updated_input: None,
            context: Some(format!("from {reason}")),
            stop: None,
        }
    }

    #[test]
    fn a_deny_outweighs_an_ask_which_outweighs_an_allow_and_every_context_is_given() {
        let mut fired = Fired::default();
        for (verdict, who) in [
            (HookVerdict::Allow, "a"),
            (HookVerdict::Deny, "b"),
            (HookVerdict::Ask, "c"),
        ] {
            fired.take(HookEvent::PreToolUse, who, reply(verdict, who));
        }
        assert_eq!(fired.decided(), Some(HookVerdict::Deny));
        assert_eq!(fired.reason.as_deref(), Some("b"));
        assert_eq!(fired.context.as_deref(), Some("from a\n\nfrom b\n\nfrom c"));
        assert_eq!(fired.decisions.len(), 3);
        let again = Fired::recorded(fired.decisions.clone());
        assert_eq!(again.decided(), Some(HookVerdict::Deny));
        let mut stopped = Fired::default();
        stopped.take(HookEvent::PreToolUse, "d", reply(HookVerdict::Deny, "d"));
        let stop = Reply {
            stop: Some("enough".into()),
            ..reply(HookVerdict::Stop, "e")
        };
        stopped.take(HookEvent::PreToolUse, "e", stop);
        assert_eq!(stopped.decided(), Some(HookVerdict::Stop));
        assert_eq!(stopped.stop.as_deref(), Some("enough"));
    }
}
