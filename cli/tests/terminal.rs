//! `ryvos run` in a real (pseudo-)terminal, as a person uses it: Ctrl-C typed at the terminal
//! in both modes, and an approval question answered from another terminal.

mod common;

use common::home::Home;
use common::terminal::Terminal;
use ryvos_testkit::{Gate, Reply, ScriptedModelServer};

/// A model whose first answer (a tool call) is held at `gate`, then answers "done".
async fn held_model(gate: &Gate) -> ScriptedModelServer {
    ScriptedModelServer::start([
        Reply::tool_calls(&[("c1", "glob", r#"{"pattern": "*"}"#)]).held(gate),
        Reply::text(&["done"]),
    ])
    .await
}

/// The `last_status` `ryvos sessions --json` gives `session`.
async fn last_status(home: &Home, session: &str) -> String {
    let (code, listed, stderr) = home.ryvos(&["sessions", "--json"]).await;
    assert_eq!(code, 0, "{stderr}");
    let sessions: Vec<serde_json::Value> = serde_json::from_str(&listed).unwrap();
    let found = sessions
        .iter()
        .find(|s| s["session_id"] == session)
        .unwrap();
    found["last_status"].as_str().unwrap_or("").to_owned()
}

/// The session id the screen's resume hint names.
fn resumed_session(screen: &str) -> String {
    let at = screen
        .find("--resume s_")
        .expect("a resume command is shown")
        + "--resume ".len();
    screen[at..]
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .next()
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_typed_at_the_terminal_pauses_an_in_process_run_which_resumes() {
    let gate = Gate::new();
    let server = held_model(&gate).await;
    let home = Home::new(&server, "");
    let mut terminal = Terminal::start(&home, &["run", "look", "around"]);
    terminal.shows("running in-process").await;
    server.wait_for_requests(1).await;
    terminal.ctrl_c();
    terminal.shows("interrupting the run").await;
    gate.open();
    let (code, screen) = terminal.ended().await;
    assert_eq!(code, Some(130), "{screen}");
    assert!(screen.contains("paused"), "{screen}");
    let session = resumed_session(&screen);
    assert_eq!(last_status(&home, &session).await, "interrupted");

    let (code, stdout, stderr) = home.ryvos(&["run", "--resume", &session]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("done"), "{stdout}");
}

/// A run through the daemon whose model call is held, and Ctrl-C typed once while it waits:
/// the client's terminal, once it has asked the daemon to interrupt.
async fn pressed_once_mid_call(home: &Home, server: &ScriptedModelServer) -> Terminal {
    let mut terminal = Terminal::start(home, &["run", "look", "around"]);
    server.wait_for_requests(1).await;
    terminal.ctrl_c();
    terminal.shows("asked ryvosd to interrupt").await;
    terminal
}

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_typed_at_the_terminal_interrupts_the_run_in_the_daemon_and_twice_detaches() {
    let gate = Gate::new();
    let server = held_model(&gate).await;
    let home = Home::new(&server, "");
    let daemon = home.daemon().await;

    // Once: the daemon pauses the run, and the client reports how it ended.
    let terminal = pressed_once_mid_call(&home, &server).await;
    gate.open();
    let (code, screen) = terminal.ended().await;
    assert_eq!(code, Some(130), "{screen}");
    let session = resumed_session(&screen);
    assert_eq!(last_status(&home, &session).await, "interrupted");
    home.shutdown(daemon).await;

    // Twice: the client detaches at once, and the run is left to the daemon.
    let second = Gate::new();
    let server = held_model(&second).await;
    let home = Home::new(&server, "");
    let daemon = home.daemon().await;
    let mut terminal = pressed_once_mid_call(&home, &server).await;
    terminal.ctrl_c();
    let (code, screen) = terminal.ended().await;
    assert_eq!(code, Some(130), "{screen}");
    assert!(screen.contains("detached"), "{screen}");
    second.open();
    home.shutdown(daemon).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_answered_elsewhere_withdraws_the_question_and_its_line() {
    let asked = asked_at_a_terminal().await;
    let (home, terminal, pending) = (&asked.home, asked.terminal, &asked.pending);
    let request = pending[0]["request_id"].as_str().unwrap().to_owned();
    let (code, _, stderr) = home.ryvos(&["approve", &request]).await;
    assert_eq!(code, 0, "{stderr}");
    // Nothing is typed: the question was withdrawn, and the run goes on.
    let (code, screen) = terminal.ended().await;
    assert_eq!(code, Some(0), "{screen}");
    // The question's line is erased (the countdown redraws it so too) before the answer is
    // shown, and not drawn again.
    let question = screen.rfind("[n] deny").unwrap();
    let after = &screen[question..];
    let erased = after.find("\r\x1b[2K").expect("the question is erased");
    assert!(
        after[erased..].contains("approved by ryvos approve")
            && !after[erased..].contains("[n] deny"),
        "the question's line is erased before the answer is shown: {after:?}"
    );
    assert!(screen.contains("ran it"), "{screen}");
    home.shutdown(asked.daemon).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_at_a_parked_daemon_run_detaches_at_once_saying_how_it_goes_on() {
    let server = ScriptedModelServer::start(common::budget::two_appends()).await;
    let home = Home::new(&server, common::budget::PRICED);
    let daemon = home.daemon().await;
    let mut terminal = Terminal::start(&home, &["run", "write", "the", "log"]);
    terminal.shows("parked (budget_run)").await;
    terminal.ctrl_c();
    let (code, screen) = terminal.ended().await;
    assert_eq!(code, Some(130), "{screen}");
    // Not "no run in flight", nor `ryvos cancel`: the commands a parked run takes.
    assert!(
        screen.contains("stays parked until `ryvos continue r_")
            && screen.contains("`ryvos stop r_"),
        "{screen}"
    );
    assert!(!screen.contains("no run in flight"), "{screen}");
    home.shutdown(daemon).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_question_whose_run_pauses_elsewhere_gives_the_terminal_back() {
    let asked = asked_at_a_terminal().await;
    let (home, terminal, pending) = (&asked.home, asked.terminal, &asked.pending);
    let session = pending[0]["session_id"].as_str().unwrap().to_owned();
    // Paused from another terminal while the question waits for a key: nobody answered it.
    let (code, _, stderr) = home.ryvos(&["interrupt", &session]).await;
    assert_eq!(code, 0, "{stderr}");
    terminal.shows("status interrupted").await;
    // The question's reader let go of the terminal: it is no longer raw.
    terminal.becomes_cooked().await;
    let (code, screen) = terminal.ended().await;
    assert_eq!(code, Some(1), "{screen}");
    home.shutdown(asked.daemon).await;
}

/// A run through the daemon whose `bash` call is asked about at the terminal that started it:
/// the question is on the screen, and the request is listed.
struct Asked {
    /// Kept so that it goes on answering while the test runs.
    _server: ScriptedModelServer,
    home: Home,
    daemon: tokio::process::Child,
    terminal: Terminal,
    pending: Vec<serde_json::Value>,
}

async fn asked_at_a_terminal() -> Asked {
    let (server, home) = Home::asking_bash("echo hi", "ran it").await;
    let daemon = home.daemon().await;
    let terminal = Terminal::start(&home, &["run", "run", "it"]);
    terminal.shows("[n] deny").await;
    let (code, pending, stderr) = home.ryvos(&["approvals", "--json"]).await;
    assert_eq!(code, 0, "{stderr}");
    Asked {
        pending: serde_json::from_str(&pending).unwrap(),
        _server: server,
        home,
        daemon,
        terminal,
    }
}
