//! The command line's grammar: every subcommand and flag, with the help text people read.

use clap::{Args, Parser, Subcommand};
use ryvos::config::Override;
use std::path::PathBuf;

/// Ryvos: run LLM agents, follow them, resume them.
#[derive(Parser)]
#[command(name = "ryvos", version, about)]
pub struct Cli {
    /// The config file (default: $RYVOS_HOME/config.toml, else built-in defaults).
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Set a config key for this command, over the file's value, e.g. -c agent.max_turns=10
    /// (repeatable; VALUE is TOML, else a string). An in-process run uses it; a daemon runs on
    /// its own config.
    #[arg(short = 'c', long = "set", global = true, value_name = "KEY=VALUE")]
    pub set: Vec<Override>,
    /// What to do; at a terminal, nothing opens a chat (`ryvos chat`).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// What a run is asked to do, where, and under which limits: the flags `run` and `submit`
/// share.
#[derive(Args)]
pub struct RunFlags {
    /// The directory the file tools work in (default: a resumed session's own, else the current
    /// directory; for `submit`, on the daemons' machines).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Use this session id (created if new).
    #[arg(long, value_name = "ID", conflicts_with = "resume")]
    pub session: Option<String>,
    /// Continue an existing session.
    #[arg(long, value_name = "ID")]
    pub resume: Option<String>,
    /// The model to ask (as -c model.model=M).
    #[arg(long, value_name = "M")]
    pub model: Option<String>,
    /// Stop after N turns (as -c agent.max_turns=N).
    #[arg(long, value_name = "N")]
    pub max_turns: Option<u32>,
    /// End the run at its budget or the month's limit (budget_exceeded) instead of parking it
    /// (as -c budget.on_limit=stop).
    #[arg(long)]
    pub no_park: bool,
    /// Make the run goal-driven: the Judge holds each final answer to this goal, and the
    /// run completes only when it is accepted.
    #[arg(long, value_name = "TEXT")]
    pub goal: Option<String>,
    /// A success criterion of the goal, KIND:VALUE[@WEIGHT] (repeatable). KIND: contains,
    /// equals, regex (the final answer), command (exit 0 in the workspace), llm (the judge
    /// model decides). Without --goal, the prompt is the goal.
    #[arg(long, value_name = "KIND:VALUE[@WEIGHT]")]
    pub criterion: Vec<String>,
    /// Run as a Director: the model plans a graph of steps (each with its own goal), the
    /// independent ones run at the same time in their own sessions, and the final answer is
    /// judged. With --resume, a plan cut off by a crash goes on where it stood.
    #[arg(long)]
    pub director: bool,
    /// What to do; `-` (or nothing, when stdin is not a terminal) reads it from stdin. With
    /// --resume (or `run --continue`) it may be left out: the session goes on from where it
    /// paused, its pending tool calls first, its turns still counted against max_turns.
    pub prompt: Vec<String>,
}

impl RunFlags {
    /// `--model`, `--max-turns` and `--no-park`, as the config settings they stand for.
    pub fn settings(&self) -> Vec<Override> {
        let mut settings = Vec::new();
        if self.no_park {
            settings.extend(Override::new("budget.on_limit", "stop".into()).ok());
        }
        if let Some(model) = &self.model {
            settings.extend(Override::new("model.model", model.as_str().into()).ok());
        }
        if let Some(turns) = self.max_turns {
            settings.extend(Override::new("agent.max_turns", i64::from(turns).into()).ok());
        }
        settings
    }
}

/// `ryvos run`'s flags.
#[derive(Args)]
pub struct RunArgs {
    /// Print every event as one JSON object per line instead.
    #[arg(long, conflicts_with = "quiet")]
    pub json: bool,
    /// Print only the final answer, on stdout, once the run ends; stderr only for errors.
    #[arg(short, long)]
    pub quiet: bool,
    /// Continue the most recent session of the workspace.
    #[arg(long = "continue", conflicts_with_all = ["session", "resume"])]
    pub continue_latest: bool,
    /// Save the run's model traffic to FILE (JSON lines), for `provider = "replay"`.
    /// Runs in-process.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    #[command(flatten)]
    pub run: RunFlags,
}

/// `ryvos submit`'s flags: `run`'s, less those only a run hosted here can honour.
#[derive(Args)]
pub struct SubmitArgs {
    /// Print the queued run as one JSON object.
    #[arg(long, conflicts_with = "quiet")]
    pub json: bool,
    /// Print only the queued run's id.
    #[arg(short, long)]
    pub quiet: bool,
    #[command(flatten)]
    pub run: RunFlags,
}

impl SubmitArgs {
    /// The same run, as `run`'s flags.
    pub fn into_run(self) -> RunArgs {
        RunArgs {
            json: self.json,
            quiet: self.quiet,
            continue_latest: false,
            record: None,
            run: self.run,
        }
    }
}

/// `ryvos chat`'s flags.
#[derive(Args, Default)]
pub struct ChatArgs {
    /// The directory the file tools work in (default: the current directory; a resumed
    /// session works in its own).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Go on with this session.
    #[arg(long, value_name = "ID")]
    pub resume: Option<String>,
    /// Go on with the most recent session of the workspace.
    #[arg(long = "continue", conflicts_with = "resume")]
    pub continue_latest: bool,
    /// The model to ask (`/model` changes it in the chat).
    #[arg(long, value_name = "M")]
    pub model: Option<String>,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run a prompt to its end; the answer streams to stdout, tool activity to stderr.
    Run(RunArgs),
    /// Open a session to type into: each prompt a run, answers streamed, approvals asked
    /// inline, Ctrl-C interrupting the run and not the chat (Ctrl-D leaves).
    Chat(ChatArgs),
    /// Queue a run for whichever daemon has room (a store daemons share); prints its id at
    /// once.
    Submit(SubmitArgs),
    /// List the runs of the queue, across every daemon: queued, running, finished.
    Runs {
        /// Only the runs in this state: queued, running, parked or finished.
        #[arg(long, value_parser = queue_state)]
        state: Option<ryvos_protocol::records::QueueState>,
        /// At most this many, the most recently submitted first.
        #[arg(long, value_name = "N")]
        limit: Option<u32>,
        /// Print them as one JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Wait for a run's end and print its answer; exits as `run` would.
    Wait {
        /// A run (r_…, from `status`, `sessions` or a run's end), a session (s_…: its run in
        /// flight, or its latest), or a queued run (q_…, from `submit` or `runs`).
        run: String,
        /// Print the outcome as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Follow a run's progress until it ends: its events live on the daemon running it (a
    /// queued run's turn by turn from the store elsewhere).
    Follow {
        /// A run (r_…), a session (s_…: its run in flight, or its latest), or a queued run
        /// (q_…).
        run: String,
        /// Print every event as one JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Continue a parked run from where it parked (the same run, its turns and spending
    /// counted on) and follow it as `run` does; exits as `run` would.
    Continue {
        /// The parked run's id (r_…, from `RunParked`, `sessions` or `history`).
        run: String,
        /// The run's budget from now on, in cents: its total, counted from its start.
        #[arg(long, value_name = "N")]
        budget_cents: Option<u64>,
        /// Print every event as one JSON object per line.
        #[arg(long, conflicts_with = "quiet")]
        json: bool,
        /// Print only the final answer, on stdout, once the run ends.
        #[arg(short, long)]
        quiet: bool,
    },
    /// End a run: a parked one where it parked (status budget_exceeded), one in flight
    /// cancelled.
    Stop {
        /// The run's id (r_…).
        run: String,
        /// Print every event as one JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Print the daemon's console address with a one-time login code (`[http] listen` must
    /// be set).
    Console {
        /// Open it in the desktop's browser too (xdg-open).
        #[arg(long)]
        open: bool,
    },
    /// Bearer tokens for programs using the HTTP door (stored hashed, on every daemon sharing
    /// the store).
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// The hooks runs in a workspace get, and a workspace's own `.ryvos/hooks.toml`, which
    /// runs only once trusted.
    Hooks {
        #[command(subcommand)]
        command: HooksCommand,
    },
    /// Is a daemon running? Exits 0 if one answers.
    Status {
        /// Print the answer as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// List the sessions, most recent first.
    Sessions {
        /// Print them as one JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Show a session's messages, runs and security decisions.
    History {
        /// The session id.
        id: String,
        /// Print it as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// What the runs cost: by day and by session, with the monthly limit's state.
    Cost {
        /// Print the report as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Print a session's run logs (runs, turns, tool calls) as JSON lines, oldest first.
    Logs {
        /// The session id.
        id: String,
    },
    /// List the tool calls waiting for approval.
    Approvals {
        /// Print them as one JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Pause a session's run in flight after its current step (status `interrupted`); tool
    /// calls it did not start stay pending, and `run --resume ID` runs them first.
    Interrupt {
        /// The session id.
        id: String,
    },
    /// Stop a session's run in flight for good (status `cancelled`; its turns stay stored).
    Cancel {
        /// The session id.
        id: String,
    },
    /// Approve a tool call waiting for approval (REQ from `ApprovalRequested` or `approvals`).
    Approve {
        /// The request id.
        request_id: String,
        /// Also approve the same call (the tool; for bash, the same command) for the rest of
        /// the session. Never covers a T4 call.
        #[arg(long)]
        always: bool,
    },
    /// Deny a tool call waiting for approval; the model is told, with the reason.
    Deny {
        /// The request id.
        request_id: String,
        /// Why, for the model and the audit.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Stop the daemon gracefully (runs in flight are paused: they end `interrupted`, and
    /// resume with their sessions).
    Shutdown,
    /// Check what Ryvos needs: the config, the model server, the sandbox, the store, the
    /// daemon. Exits 0 when nothing failed.
    Doctor {
        /// Print the checks as one JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Print the effective config (the file, -c settings and defaults), secrets masked.
    Config,
    /// Print a completion script for SHELL, e.g. `ryvos completions bash >
    /// ~/.local/share/bash-completion/completions/ryvos`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// The MCP servers whose tools runs may call.
    Mcp {
        #[command(subcommand)]
        command: McpCommand,
    },
    /// Serve Ryvos over MCP on stdin/stdout, for editors and other agents: tools `run`,
    /// `sessions` and `history`, through the running daemon or in-process.
    McpServer,
    /// Serve Ryvos as an Agent Client Protocol agent on stdin/stdout: the command an editor
    /// (Zed, JetBrains IDEs, Neovim, Emacs) starts as its agent, through the running daemon
    /// or in-process. See docs/editors.md.
    Acp,
    /// Print the man page (roff), e.g. `ryvos manpage > ~/.local/share/man/man1/ryvos.1`.
    Manpage,
    /// The store's records.
    Store {
        #[command(subcommand)]
        command: StoreCommand,
    },
    /// A session's context window.
    Compact {
        #[command(subcommand)]
        command: CompactCommand,
    },
    /// Take a session back to a turn (or to before a run): the model's window and the
    /// workspace's files as they were then, whatever changed them. `--undo` goes back to
    /// before the last rewind.
    #[command(group(clap::ArgGroup::new("point").required(true).args(["turn", "run", "undo"])))]
    Rewind {
        #[command(flatten)]
        point: Point,
        /// Back to before the session's last rewind.
        #[arg(long)]
        undo: bool,
        /// Print the result as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// A new session from a session's turn (or from before one of its runs), working in a
    /// copy of the workspace's files as they were then; the original is left as it is.
    #[command(group(clap::ArgGroup::new("point").required(true).args(["turn", "run"])))]
    Fork {
        #[command(flatten)]
        point: Point,
        /// A new or empty directory for the fork's files (default: beside the original,
        /// `<workspace>-fork-<id>`).
        #[arg(long)]
        workspace: Option<std::path::PathBuf>,
        /// Print the result as one JSON object.
        #[arg(long)]
        json: bool,
    },
}

/// A point of a session, for `rewind` and `fork`: a turn, or a run's start.
#[derive(clap::Args)]
pub struct Point {
    /// The session id.
    pub session: String,
    /// Right after this turn, as `ryvos history` numbers them.
    #[arg(long)]
    pub turn: Option<u32>,
    /// Just before this run started.
    #[arg(long)]
    pub run: Option<String>,
}

/// `ryvos hooks`'s subcommands.
#[derive(Subcommand)]
pub enum HooksCommand {
    /// List the hooks a run in the workspace gets: config.toml's, and the workspace's own
    /// with whether its file is trusted as it is.
    List {
        /// The workspace (default: the current directory).
        #[arg(long)]
        workspace: Option<std::path::PathBuf>,
        /// Print the listing as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Trust the workspace's .ryvos/hooks.toml as it is now (read it first): its hooks run
    /// until the file changes.
    Trust {
        /// The workspace (default: the current directory).
        #[arg(long)]
        workspace: Option<std::path::PathBuf>,
        /// Print the result as one JSON object.
        #[arg(long)]
        json: bool,
    },
}

/// `ryvos token`'s subcommands.
#[derive(Subcommand)]
pub enum TokenCommand {
    /// Make a token; it is printed once, on stdout, and cannot be shown again.
    Create {
        /// What it is for: letters, digits, `-`, `_` or `.`; unique.
        name: String,
        /// `read` sees everything and changes nothing; `operate` may also approve, continue
        /// and stop.
        #[arg(long, default_value = "operate", value_parser = scope)]
        scope: ryvos_protocol::records::Scope,
    },
    /// List the tokens (never their secrets).
    List {
        /// Print them as one JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a token at once.
    Revoke {
        /// The token's name.
        name: String,
    },
}

/// A token scope as `--scope` takes it.
fn scope(text: &str) -> Result<ryvos_protocol::records::Scope, String> {
    use ryvos_protocol::records::Scope;
    [Scope::Read, Scope::Operate]
        .into_iter()
        .find(|s| s.as_str() == text)
        .ok_or_else(|| format!("'{text}' is not a scope: use read or operate"))
}

/// `ryvos compact`'s subcommands.
#[derive(Subcommand)]
pub enum CompactCommand {
    /// Set a session's window back to before its last compaction: the messages it took out
    /// (still stored) are sent to the model again from its next run on.
    Undo {
        /// The session id.
        id: String,
        /// Print the result as one JSON object.
        #[arg(long)]
        json: bool,
    },
}

/// `ryvos store`'s subcommands.
#[derive(Subcommand)]
pub enum StoreCommand {
    /// Copy this home's redb records (the daemon stopped) into the empty PostgreSQL database
    /// at URL, e.g. postgres://ryvos:secret@db:5432/ryvos.
    Copy {
        /// The database's connection string.
        url: String,
    },
}

/// `ryvos mcp`'s subcommands.
#[derive(Subcommand)]
pub enum McpCommand {
    /// List the configured servers: state, tools, restarts (from the daemon, or started here).
    List {
        /// Print them as one JSON array.
        #[arg(long)]
        json: bool,
    },
}

/// A queue state as `--state` takes it.
fn queue_state(text: &str) -> Result<ryvos_protocol::records::QueueState, String> {
    ryvos_protocol::records::QueueState::parse(text)
        .ok_or_else(|| format!("'{text}' is not a state: use queued, running, parked or finished"))
}
