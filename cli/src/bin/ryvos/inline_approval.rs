//! Answering approval requests from the terminal that started the run: when stdin is a
//! terminal (and the output is not `--json`), an `ApprovalRequested` is asked about right
//! there, and the answer goes to the runtime in this process or to the daemon. Elsewhere the
//! request waits for `ryvos approve` / `ryvos deny`, or its timeout.
//!
//! The question takes one key: `y` allows the call once, `a` allows it always (in this
//! session: for `bash`, this command), `n` (or Enter, or Esc) denies it. A `write` or `edit`
//! shows the diff of what it would change, and the question counts down the time left before
//! the request times out. Ctrl-C at the question is Ctrl-C anywhere else: it interrupts the
//! run, and the request stays for the run's next go.
//!
//! A request answered elsewhere first (another terminal, its timeout) withdraws the question:
//! its line is erased, so the resolution is shown on a clean line. A run that pauses or ends,
//! or is no longer followed, withdraws every question, and the terminal is given back (out
//! of raw mode) before anything else reads it.

use crate::style::{paint, ASK, QUIET};
use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ryvos::{Answer, Approvals};
use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Who answered, for the audit.
const BY: &str = "ryvos (terminal)";

/// Whether requests are asked about inline.
pub fn wanted(json: bool) -> bool {
    !json && std::io::stdin().is_terminal()
}

/// What a question is about.
pub struct Question {
    pub request_id: String,
    pub tool: String,
    pub input: serde_json::Value,
    /// The run's workspace, where a `write` or `edit` would change a file.
    pub workspace: Option<PathBuf>,
    /// How long the request waits for an answer (`approval_timeout_secs`).
    pub timeout: Duration,
    /// Whether "always" may be answered: not for a T4 call, nor for one a crash left in doubt.
    pub always: bool,
}

/// A person's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    Once,
    Always,
    Deny,
}

/// The questions: the one on the terminal now (its request, and the flag that withdraws it),
/// and the requests answered elsewhere before their questions came up.
struct Questions {
    open: Option<(String, Arc<AtomicBool>)>,
    answered: BTreeSet<String>,
    /// Counts [`withdraw_all`]: a question waiting its turn from before one is not asked.
    ended: u64,
}

static QUESTIONS: Mutex<Questions> = Mutex::new(Questions {
    open: None,
    answered: BTreeSet::new(),
    ended: 0,
});

fn questions() -> std::sync::MutexGuard<'static, Questions> {
    QUESTIONS.lock().unwrap_or_else(|p| p.into_inner())
}

/// One question at a time: calls of one answer may ask together.
static ASKING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Erases the question about `request_id`: it was answered elsewhere. Erased at once, before
/// whatever says how it was answered is shown; the question is drawn under the same lock, so
/// it is not drawn again after this. One still waiting its turn is not asked.
pub fn withdraw(request_id: &str) {
    let mut questions = questions();
    match questions.open.as_ref().filter(|(id, _)| id == request_id) {
        Some((_, withdrawn)) => {
            withdrawn.store(true, Ordering::SeqCst);
            erase_line();
        }
        None => {
            questions.answered.insert(request_id.to_owned());
        }
    }
}

/// Withdraws every question, open or waiting its turn (the run paused or ended, or is no
/// longer followed), and waits until the terminal is given back.
pub async fn withdraw_all() {
    {
        let mut questions = questions();
        questions.ended += 1;
        questions.answered.clear();
        if let Some((_, withdrawn)) = questions.open.as_ref() {
            withdrawn.store(true, Ordering::SeqCst);
            erase_line();
        }
    }
    // The key reader looks at its flag every 100 ms, then gives the terminal back.
    drop(ASKING.lock().await);
}

/// Whether a question is on the terminal now (the spinner leaves it alone).
pub fn is_open() -> bool {
    questions().open.is_some()
}

fn erase_line() {
    crate::style::over_line("");
}

/// Asks on the terminal; `None` when the question was withdrawn (or timed out), or the
/// terminal cannot be read.
async fn ask(question: Question) -> Option<Choice> {
    let asked_in = questions().ended;
    let _one_at_a_time = ASKING.lock().await;
    let withdrawn = Arc::new(AtomicBool::new(false));
    {
        let mut questions = questions();
        if questions.ended != asked_in || questions.answered.remove(&question.request_id) {
            return None;
        }
        questions.open = Some((question.request_id.clone(), withdrawn.clone()));
    }
    let (tool, input, workspace) = (
        question.tool.clone(),
        question.input.clone(),
        question.workspace.clone(),
    );
    let diff = tokio::task::spawn_blocking(move || {
        crate::approval_diff::of(&tool, &input, workspace.as_deref())
    });
    if let Ok(Some(diff)) = diff.await {
        crate::style::note_line(&diff);
    }
    let deadline = Instant::now() + question.timeout;
    let (tool, always) = (question.tool.clone(), question.always);
    let keyed =
        tokio::task::spawn_blocking(move || read_key((&tool, always), deadline, &withdrawn)).await;
    questions().open.take();
    match keyed {
        Ok(Ok(Key::Chose(choice))) => Some(choice),
        Ok(Ok(Key::Withdrawn)) => None,
        Ok(Ok(Key::CtrlC)) => {
            // The line discipline was off: Ctrl-C is passed on as the signal it would be.
            // SAFETY: raise only sends this process a signal its handler is set for.
            unsafe { libc::raise(libc::SIGINT) };
            None
        }
        Ok(Err(e)) => {
            eprintln!("ryvos: the terminal cannot be read ({e}); answer with `ryvos approve`");
            None
        }
        Err(_) => None,
    }
}

/// How the key read ended.
enum Key {
    Chose(Choice),
    Withdrawn,
    CtrlC,
}

/// The terminal in raw mode, given back however the read ends (an error, a panic).
struct RawMode;

impl RawMode {
    fn on() -> std::io::Result<Self> {
        crossterm::terminal::enable_raw_mode()?;
        Ok(Self)
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        crossterm::terminal::disable_raw_mode().ok();
    }
}

/// Reads the answer's key in raw mode, redrawing the question as its time runs down, until a
/// key answers it, it is withdrawn, or its time is up (the request is denied then, by the
/// runtime).
fn read_key(
    (tool, always): (&str, bool),
    deadline: Instant,
    withdrawn: &AtomicBool,
) -> std::io::Result<Key> {
    let raw = RawMode::on()?;
    let read = (|| {
        // Keys typed before the question was there answer nothing (the next prompt, typed
        // ahead, would answer it otherwise).
        while crossterm::event::poll(Duration::ZERO)? {
            crossterm::event::read()?;
        }
        let mut shown_left = None;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            {
                let _drawing = questions();
                if withdrawn.load(Ordering::SeqCst) || left.is_zero() {
                    return Ok(Key::Withdrawn);
                }
                if shown_left != Some(left.as_secs()) {
                    draw((tool, always), left.as_secs());
                    shown_left = Some(left.as_secs());
                }
            }
            if !crossterm::event::poll(Duration::from_millis(100))? {
                continue;
            }
            if let Event::Key(key) = crossterm::event::read()? {
                if let Some(answer) = answer_of(key, always) {
                    return Ok(answer);
                }
            }
        }
    })();
    drop(raw);
    let said = match &read {
        Ok(Key::Chose(Choice::Once)) => "allowed once",
        Ok(Key::Chose(Choice::Always)) => "allowed always",
        Ok(Key::Chose(Choice::Deny)) => "denied",
        Ok(Key::CtrlC) => "interrupted",
        Ok(Key::Withdrawn) | Err(_) => "",
    };
    // Answered here: the question's line becomes the answer's (a withdrawn one is erased).
    if !said.is_empty() {
        crate::style::over_line(&format!("  {} {tool}: {said}\n", paint(ASK, "[approval]")));
    }
    read
}

/// The question's line, with the time left.
fn draw((tool, always): (&str, bool), left: u64) {
    let time = paint(QUIET, &format!("· {}m {:02}s left", left / 60, left % 60));
    let always = if always { "  [a] always" } else { "" };
    crate::style::over_line(&format!(
        "  {} allow {tool}? [y] once{always}  [n] deny {time} ",
        paint(ASK, "[approval]")
    ));
}

/// What `key` answers, if anything (`a` only where "always" is offered).
fn answer_of(key: KeyEvent, always: bool) -> Option<Key> {
    if key.kind != KeyEventKind::Press {
        return None;
    }
    if key.modifiers.contains(KeyModifiers::CONTROL) {
        return matches!(key.code, KeyCode::Char('c')).then_some(Key::CtrlC);
    }
    match key.code {
        KeyCode::Char('y' | 'Y') => Some(Key::Chose(Choice::Once)),
        KeyCode::Char('a' | 'A') if always => Some(Key::Chose(Choice::Always)),
        KeyCode::Char('n' | 'N') | KeyCode::Enter | KeyCode::Esc => Some(Key::Chose(Choice::Deny)),
        _ => None,
    }
}

fn answer(choice: Choice) -> Answer {
    let approved = choice != Choice::Deny;
    Answer {
        approved,
        reason: (!approved).then(|| "denied at the terminal".to_owned()),
        by: BY.to_owned(),
        always: choice == Choice::Always,
    }
}

/// Asks `question` and answers the runtime in this process.
pub fn answer_local(approvals: Approvals, question: Question) {
    tokio::spawn(async move {
        let request_id = question.request_id.clone();
        let Some(choice) = ask(question).await else {
            return;
        };
        if let Err(e) = approvals.answer(&request_id, answer(choice)) {
            eprintln!("ryvos: {e}");
        }
    });
}

/// Asks `question` and answers the daemon at `socket`.
pub fn answer_remote(socket: PathBuf, question: Question) {
    tokio::spawn(async move {
        let request_id = question.request_id.clone();
        let Some(choice) = ask(question).await else {
            return;
        };
        let answered = crate::calling::answer(&socket, &request_id, answer(choice), BY).await;
        if let Err(e) = answered {
            eprintln!("ryvos: answering {request_id}: {e}");
        }
    });
}
