//! The chat's `/` commands: what they are, and what each does.

use super::Chat;
use crate::print::money;
use crate::style::{note_line, paint, FAIL, QUIET};
use ryvos::protocol::records::RunRecord;
use ryvos::SessionId;

/// What the chat does after a command.
pub enum Flow {
    /// Reads the next line.
    Next,
    /// Ends the chat.
    Leave,
}

/// The commands, as `/help` lists them.
const HELP: [(&str, &str); 8] = [
    ("/help", "this list"),
    ("/session", "the session the next prompt continues"),
    ("/new", "start a new session with the next prompt"),
    (
        "/model [NAME]",
        "the model the runs ask, or ask NAME from now on",
    ),
    ("/cost", "the session's turns, tokens and cost so far"),
    (
        "/compact undo",
        "set the session's window back to before its last compaction",
    ),
    ("/history", "the session's runs, one line each"),
    ("/exit", "leave (Ctrl-D too)"),
];

/// Runs `/command` (given without its slash).
pub async fn run(command: &str, chat: &mut Chat) -> Flow {
    let (name, rest) = command.split_once(' ').unwrap_or((command, ""));
    let rest = rest.trim();
    match name {
        "help" | "?" => {
            for (command, what) in HELP {
                note_line(&format!("  {command:<16} {}", paint(QUIET, what)));
            }
        }
        "exit" | "quit" => return Flow::Leave,
        "new" => {
            chat.session = None;
            say(&format!(
                "the next prompt starts a new session in {}",
                chat.workspace.display()
            ));
        }
        "session" => say(&match chat.session.as_deref() {
            None | Some("") => "no session yet: the next prompt starts it".to_owned(),
            Some(id) => format!("session {id}"),
        }),
        "model" if rest.is_empty() => say(&format!(
            "the runs ask {}",
            chat.model.as_deref().unwrap_or(&chat.configured_model)
        )),
        "model" => {
            chat.model = Some(rest.to_owned());
            say(&format!("the next runs ask {rest}"));
        }
        "cost" => cost(chat).await,
        "history" => history(chat).await,
        "compact" if rest == "undo" => undo_compaction(chat).await,
        "compact" => say(
            "Ryvos compacts a session by itself as its window nears [agent] \
             max_context_tokens; `/compact undo` sets the last compaction back",
        ),
        _ => fail(&format!("there is no /{name}; /help lists the commands")),
    }
    Flow::Next
}

fn say(text: &str) {
    note_line(&paint(QUIET, text));
}

fn fail(text: &str) {
    note_line(&format!("{} {text}", paint(FAIL, "ryvos:")));
}

/// The session, once there is one; says so when there is not.
fn session(chat: &Chat) -> Option<&str> {
    let session = chat.session.as_deref().filter(|s| !s.is_empty());
    if session.is_none() {
        say("no session yet: the next prompt starts it");
    }
    session
}

/// The runs of the chat's session, once there is one; `None` (said why) otherwise.
async fn runs(chat: &Chat) -> Option<(&str, Vec<RunRecord>)> {
    let id = session(chat)?;
    match chat.host.history(&SessionId::new(id)).await {
        Ok(Some(history)) => Some((id, history.runs)),
        Ok(None) => {
            fail(&format!("there is no session {id}"));
            None
        }
        Err(e) => {
            fail(&e);
            None
        }
    }
}

/// The session's runs added up: turns, tokens and cost.
async fn cost(chat: &Chat) {
    let Some((id, runs)) = runs(chat).await else {
        return;
    };
    let turns: u32 = runs.iter().map(|r| r.turns).sum();
    let input: u64 = runs.iter().map(|r| r.input_tokens).sum();
    let output: u64 = runs.iter().map(|r| r.output_tokens).sum();
    let cents: f64 = runs.iter().map(RunRecord::cost_cents).sum();
    say(&format!(
        "session {id}: {} runs, {turns} turns, {input} in / {output} out tokens, {}",
        runs.len(),
        money(cents)
    ));
}

/// The session's runs, a line each: status, turns, and the prompt.
async fn history(chat: &Chat) {
    let Some((_, runs)) = runs(chat).await else {
        return;
    };
    for run in &runs {
        let status = run.status.map_or("in flight".to_owned(), |s| s.to_string());
        let prompt = crate::render::clip(run.prompt.lines().next().unwrap_or(""), 60);
        note_line(&format!(
            "  {}  {status:<16} {:>3} turns  {prompt}",
            run.run_id, run.turns
        ));
    }
}

async fn undo_compaction(chat: &Chat) {
    let Some(id) = session(chat) else { return };
    match chat.host.undo_compaction(&SessionId::new(id)).await {
        Ok(undone) => say(&format!(
            "the window starts at message {} again: {} messages are back in it",
            undone.first_kept_seq, undone.restored_messages
        )),
        Err(e) => fail(&e),
    }
}
