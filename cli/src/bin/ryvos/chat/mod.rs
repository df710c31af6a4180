//! `ryvos chat` (and `ryvos` alone at a terminal): a session typed into. Each prompt is a run
//! of the same session, through ryvosd when one answers, else in this process; its answer
//! streams as `ryvos run`'s does, approvals are asked inline, and Ctrl-C interrupts the run,
//! never the chat. A few `/` commands look at the session or change what the next run uses.

mod commands;
mod host;
mod line_editor;

use crate::cli::ChatArgs;
use crate::ctrl_c::CtrlC;
use crate::exit::{exit_for, EXIT_USAGE};
use crate::following::Following;
use crate::host::Host;
use crate::starting::{Asked, Given};
use crate::style::{note_line, paint, QUIET};
use line_editor::{LineEditor, Typed};
use ryvos::config::Config;
use ryvos::RunSettings;
use std::io::IsTerminal;
use std::path::PathBuf;

/// The prompt's text.
const PROMPT: &str = "ryvos› ";

/// A chat: where its runs go, and what the next one continues.
pub struct Chat {
    host: Host,
    /// The session the next prompt continues; `None` starts a new one, `Some("")` the
    /// workspace's latest (`--continue`) until the first run says which it is.
    session: Option<String>,
    /// Where a new session works.
    workspace: PathBuf,
    /// The model the next runs ask (`/model`), over the configured one.
    model: Option<String>,
    /// The configured model, as `/model` shows it.
    configured_model: String,
    following: Following,
    /// The settings given on the command line (`-c`), for every run.
    settings: RunSettings,
}

impl Chat {
    /// Runs `prompt` in the chat's session, and follows it to its end.
    async fn ask(&mut self, prompt: String, ctrl_c: &mut CtrlC) {
        let asked = Asked {
            prompt,
            resume: self.session.clone(),
            goal: None,
            // A session goes on where it worked.
            workspace: self.session.is_none().then(|| self.workspace.clone()),
        };
        let settings = RunSettings {
            model: self.model.clone().or(self.settings.model.clone()),
            ..self.settings.clone()
        };
        let params = asked.into_params(None, false, settings);
        ctrl_c.reset();
        let followed = host::run(&self.host, params, &self.following, ctrl_c).await;
        match followed.session {
            Some(session) => self.session = Some(session),
            // `--continue` where no session ran yet: the next prompt starts one.
            None if self.session.as_deref() == Some("") => self.session = None,
            None => {}
        }
    }
}

/// Runs the chat; its exit code (0 once the person leaves it).
pub async fn chat(args: ChatArgs, given: Given, config: Config, socket: PathBuf) -> u8 {
    if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
        eprintln!(
            "ryvos: `ryvos chat` needs a terminal; `ryvos run PROMPT` runs one prompt (stdin \
             with `-`)"
        );
        return EXIT_USAGE;
    }
    let workspace = match crate::workspace_dir::workspace_of(args.workspace) {
        Ok(dir) => dir,
        Err(e) => {
            eprintln!("ryvos: {e}");
            return EXIT_USAGE;
        }
    };
    let settings = match crate::run_settings::for_the_daemon(&config, &given.settings) {
        Ok(settings) => settings,
        Err(why) => {
            eprintln!("ryvos: {why}");
            return EXIT_USAGE;
        }
    };
    let mut editor = match LineEditor::open(config.home.join("chat_history")) {
        Ok(editor) => editor,
        Err(e) => {
            eprintln!("ryvos: the terminal cannot be used for a chat: {e}");
            return EXIT_USAGE;
        }
    };
    let host = match Host::find(config.clone(), socket, "chat").await {
        Ok(host) => host,
        Err(code) => return code,
    };
    let mut chat = Chat {
        session: args.resume.or(args.continue_latest.then(String::new)),
        workspace,
        model: args.model,
        configured_model: config.model.model.clone(),
        following: Following {
            in_chat: true,
            ..Following::new(&config, (false, false), exit_for)
        },
        settings,
        host,
    };
    greet(&chat);
    let mut ctrl_c = CtrlC::listen();
    loop {
        let line = match editor.read(PROMPT.to_owned()).await {
            Typed::Line(line) => line,
            Typed::Interrupted => {
                note_line(&paint(QUIET, "(Ctrl-D or /exit leaves the chat)"));
                continue;
            }
            Typed::Done => break,
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(command) = line.strip_prefix('/') {
            match commands::run(command, &mut chat).await {
                commands::Flow::Next => continue,
                commands::Flow::Leave => break,
            }
        }
        chat.ask(line.to_owned(), &mut ctrl_c).await;
    }
    if let Some(session) = chat.session.as_deref().filter(|s| !s.is_empty()) {
        let again = format!("session {session}: `ryvos chat --resume {session}` goes on with it");
        note_line(&paint(QUIET, &again));
    }
    match chat.host.close().await {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("ryvos: stopping the runtime: {e}");
            crate::exit::EXIT_RUN_FAILED
        }
    }
}

/// Says where the chat's runs go, and how to use it.
fn greet(chat: &Chat) {
    let session = match chat.session.as_deref() {
        None => format!("a new session in {}", chat.workspace.display()),
        Some("") => format!("the latest session of {}", chat.workspace.display()),
        Some(id) => format!("session {id}"),
    };
    let lines = [
        format!("ryvos chat: {session}, {}", host::described(&chat.host)),
        "/help lists the commands; Ctrl-C interrupts a run; Ctrl-D leaves".to_owned(),
    ];
    for line in lines {
        note_line(&paint(QUIET, &line));
    }
}
