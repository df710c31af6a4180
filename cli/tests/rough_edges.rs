//! Small things a person meets at the terminal, each through the real binaries: what `-q`
//! prints, the hint after `max_turns`, a workspace that holds the home.

mod common;

use common::home::Home;
use ryvos_testkit::{Reply, ScriptedModelServer};

#[tokio::test]
async fn quiet_prints_the_answer_as_given_and_nothing_for_a_run_without_one() {
    let server = ScriptedModelServer::start([
        // An answer that ends in a newline: printed as it is, no blank line after it.
        Reply::text(&["two lines\n", "of it\n"]),
        // A run that fails: nothing on stdout, not even an empty line.
        Reply::error(400, "bad request"),
    ])
    .await;
    let home = Home::new(&server, "");
    let (code, stdout, stderr) = home.ryvos(&["run", "-q", "answer"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "two lines\nof it\n");
    let (code, stdout, stderr) = home.ryvos(&["run", "-q", "fail"]).await;
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        stdout, "",
        "the reason is on stderr, not in place of an answer"
    );
    assert!(stderr.contains("bad request"), "{stderr}");
}

#[tokio::test]
async fn a_max_turns_pause_says_that_a_new_prompt_goes_on() {
    let server = ScriptedModelServer::start([
        Reply::tool_calls(&[("g1", "glob", r#"{"pattern": "*"}"#)]),
        Reply::tool_calls(&[("g2", "glob", r#"{"pattern": "*"}"#)]),
    ])
    .await;
    let home = Home::new(&server, "");
    let (code, _, stderr) = home.ryvos(&["run", "--max-turns", "1", "look"]).await;
    assert_eq!(code, 1, "{stderr}");
    // Not `--resume S` alone: the pending call would run and the run pause again.
    assert!(
        stderr.contains("max_turns") && stderr.contains("\"<next prompt>\""),
        "{stderr}"
    );
    assert!(stderr.contains("new count of turns"), "{stderr}");
}
