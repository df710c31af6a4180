//! `ryvos chat` in a real (pseudo-)terminal, as a person types into it: two prompts in one
//! session, an approval answered "always" inline (with the diff of the write it asks about),
//! Ctrl-C interrupting a run and the next prompt going on, through ryvosd and in-process.

mod common;

use common::home::Home;
use common::terminal::Terminal;
use ryvos_testkit::{Gate, Reply, ScriptedModelServer};
use serde_json::Value;

/// The model: a write (asked about), an answer; another write (allowed "always" by then), an
/// answer; a glob held at `gate` (the run is interrupted before it runs), and a last answer.
async fn model(gate: &Gate) -> ScriptedModelServer {
    ScriptedModelServer::start([
        Reply::tool_calls(&[("w1", "write", r#"{"path": "a.txt", "content": "one\n"}"#)]),
        Reply::text(&["wrote ", "a.txt"]),
        Reply::tool_calls(&[("w2", "write", r#"{"path": "b.txt", "content": "two\n"}"#)]),
        Reply::text(&["second ", "done"]),
        Reply::tool_calls(&[("g1", "glob", r#"{"pattern": "*.txt"}"#)]).held(gate),
        Reply::text(&["back ", "again"]),
    ])
    .await
}

/// The user messages of `request`, in order.
fn prompts(request: &Value) -> Vec<String> {
    let messages = request["messages"].as_array().unwrap();
    (messages.iter())
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Types `line` and Enter, once the prompt is shown for it (a person sees the prompt before
/// typing; what is typed before it, the terminal's line discipline may take otherwise).
async fn enter(terminal: &mut Terminal, line: &str) {
    prompted(terminal).await;
    terminal.types(line.as_bytes());
    terminal.types(b"\r");
}

/// Waits for the prompt to be shown once more than lines were typed at it.
async fn prompted(terminal: &mut Terminal) {
    let typed = terminal.typed_lines;
    let shown = async {
        while terminal.screen().matches(PROMPT).count() <= typed {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    if tokio::time::timeout(common::home::WAIT, shown)
        .await
        .is_err()
    {
        panic!("the prompt never came back:\n{}", terminal.screen());
    }
    terminal.typed_lines += 1;
}

const PROMPT: &str = "ryvos› ";

/// The whole chat, on a home whose runs go through ryvosd when `daemon` is started.
async fn chatted(home: &Home, server: &ScriptedModelServer, gate: &Gate) {
    let mut terminal = Terminal::start(home, &["chat"]);

    // The first prompt: its write is asked about, with its diff, and allowed always.
    enter(&mut terminal, "write a").await;
    terminal.shows("[a] always").await;
    assert!(terminal.screen().contains("+one"), "{}", terminal.screen());
    terminal.types(b"a");
    terminal.shows("wrote a.txt").await;
    terminal.shows("2 turns · ").await;
    // The second, in the same session: its write is not asked about again.
    let before = terminal.screen().matches("[a] always").count();
    enter(&mut terminal, "write b").await;
    terminal.shows("second done").await;
    assert_eq!(terminal.screen().matches("[a] always").count(), before);
    // The third is interrupted by Ctrl-C while the model is asked: it pauses with the call
    // the model asked for pending, and the chat stays; the next prompt runs that call first.
    enter(&mut terminal, "wait").await;
    server.wait_for_requests(5).await;
    terminal.ctrl_c();
    terminal.shows("the run after its current step").await;
    gate.open();
    terminal.shows("your next prompt goes on").await;
    enter(&mut terminal, "go on").await;
    terminal.shows("back again").await;
    assert!(
        terminal.screen().contains("[glob]"),
        "{}",
        terminal.screen()
    );
    prompted(&mut terminal).await;
    terminal.types(b"\x04");
    let (code, screen) = terminal.ended().await;
    assert_eq!(code, Some(0), "{screen}");
    assert!(screen.contains("ryvos chat --resume s_"), "{screen}");

    let workspace = home.workspace.path();
    assert_eq!(
        std::fs::read_to_string(workspace.join("a.txt")).unwrap(),
        "one\n"
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join("b.txt")).unwrap(),
        "two\n"
    );
    // One session throughout: the last request holds every prompt typed.
    let requests = server.requests();
    assert_eq!(
        prompts(requests.last().unwrap()),
        ["write a", "write b", "wait", "go on"]
    );
    // What was typed is in the history, for the next chat.
    let history = std::fs::read_to_string(home.path().join("chat_history")).unwrap();
    assert!(
        history.contains("write b") && history.contains("go on"),
        "{history}"
    );
    server.assert_no_orphans();
}

/// Writes are asked about (T1), so "always" has something to answer.
fn asking_home(server: &ScriptedModelServer) -> Home {
    Home::with_sections(server, "", "t1 = \"ask\"", "")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_chat_through_the_daemon_keeps_its_session_asks_inline_and_survives_ctrl_c() {
    let gate = Gate::new();
    let server = model(&gate).await;
    let home = asking_home(&server);
    let daemon = home.daemon().await;
    chatted(&home, &server, &gate).await;
    home.shutdown(daemon).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_chat_in_process_keeps_its_session_asks_inline_and_survives_ctrl_c() {
    let gate = Gate::new();
    let server = model(&gate).await;
    let home = asking_home(&server);
    chatted(&home, &server, &gate).await;
}

#[tokio::test]
async fn chat_without_a_terminal_says_to_use_run() {
    let server = ScriptedModelServer::start([]).await;
    let home = Home::new(&server, "");
    let (code, _, stderr) = home.ryvos(&["chat"]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("ryvos run PROMPT"), "{stderr}");
    // Nothing asked, and not at a terminal: the usage, not a chat.
    let (code, _, stderr) = home.ryvos(&[]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("Usage"), "{stderr}");
}
