//! The command line's tools around runs, through the real binaries: `doctor`, `config`,
//! `completions`, `manpage`, and `sessions` as a person reads it.

mod common;

use common::home::Home;
use ryvos_testkit::{Reply, ScriptedModelServer};

/// `doctor --json`'s checks, as (check, state) pairs, with its exit code.
async fn doctor(home: &Home) -> (i32, Vec<(String, String)>, String) {
    let (code, stdout, stderr) = home.ryvos(&["doctor", "--json"]).await;
    let checks: Vec<serde_json::Value> = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("doctor --json prints JSON ({e}): {stdout}\n{stderr}"));
    let pairs = checks
        .iter()
        .map(|c| {
            (
                c["check"].as_str().unwrap().to_owned(),
                c["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    (code, pairs, stdout)
}

fn state_of<'a>(checks: &'a [(String, String)], name: &str) -> &'a str {
    checks
        .iter()
        .find(|(check, _)| check == name)
        .map(|(_, state)| state.as_str())
        .unwrap_or_else(|| panic!("no {name} check in {checks:?}"))
}

#[tokio::test]
async fn doctor_checks_each_part_and_fails_on_an_unreachable_model_server() {
    let server = ScriptedModelServer::start([]).await;
    let home = Home::new(&server, "");
    let (code, checks, shown) = doctor(&home).await;
    assert_eq!(code, 0, "{shown}");
    for part in ["config", "api key", "sandbox", "store", "model"] {
        assert_eq!(state_of(&checks, part), "ok", "{shown}");
    }
    assert_eq!(state_of(&checks, "daemon"), "note", "{shown}");

    // A model the server does not list fails, naming those it does.
    let (code, stdout, _) = home
        .ryvos(&["-c", "model.model=\"gpt-none\"", "doctor"])
        .await;
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains("does not list the model gpt-none") && stdout.contains("lists scripted"),
        "{stdout}"
    );

    // With a daemon, it speaks for the sandbox and the store.
    let daemon = home.daemon().await;
    let (code, checks, shown) = doctor(&home).await;
    assert_eq!(code, 0, "{shown}");
    assert_eq!(state_of(&checks, "daemon"), "ok", "{shown}");
    assert_eq!(state_of(&checks, "store"), "ok", "{shown}");
    home.shutdown(daemon).await;

    // A model server that is not there fails, saying what to check.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let (code, stdout, _) = home
        .ryvos(&[
            "-c",
            &format!("model.base_url=\"http://127.0.0.1:{port}/v1\""),
            "doctor",
        ])
        .await;
    assert_eq!(code, 1, "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("model"))
        .unwrap();
    assert!(
        line.starts_with("FAIL") && line.contains("base_url"),
        "{stdout}"
    );
}

#[tokio::test]
async fn config_prints_the_effective_settings_with_secrets_masked() {
    let server = ScriptedModelServer::start([]).await;
    let home = Home::new(&server, "");
    let (code, stdout, stderr) = home
        .ryvos(&[
            "-c",
            "model.api_key=sk-secret-123",
            "-c",
            "agent.max_turns=7",
            "config",
        ])
        .await;
    assert_eq!(code, 0, "{stderr}");
    assert!(!stdout.contains("sk-secret-123"), "{stdout}");
    assert!(stdout.contains("api_key = \"********\""), "{stdout}");
    // A setting that names tokens is not a secret.
    assert!(
        stdout.contains("max_tokens_field = \"max_tokens\""),
        "{stdout}"
    );
    // It is the config a run would use: valid TOML, with the file's and the flags' values.
    let text = stdout
        .lines()
        .filter(|l| !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    let shown: toml::Table = toml::from_str(&text).unwrap();
    assert_eq!(shown["agent"]["max_turns"].as_integer(), Some(7));
    assert_eq!(shown["model"]["model"].as_str(), Some("scripted"));
    assert_eq!(
        shown["model"]["base_url"].as_str(),
        Some(server.base_url().as_str())
    );
}

#[tokio::test]
async fn completions_and_the_man_page_come_from_the_commands_themselves() {
    let server = ScriptedModelServer::start([]).await;
    let home = Home::new(&server, "");
    for shell in ["bash", "zsh", "fish"] {
        let (code, script, stderr) = home.ryvos(&["completions", shell]).await;
        assert_eq!(code, 0, "{stderr}");
        for word in ["doctor", "sessions", "max-turns", "continue"] {
            assert!(script.contains(word), "{shell} completes {word}");
        }
    }
    let (code, _, stderr) = home.ryvos(&["completions", "tcsh"]).await;
    assert_eq!(code, 2, "{stderr}");
    let (code, page, stderr) = home.ryvos(&["manpage"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(page.contains(".TH ryvos 1"), "{page}");
    assert!(
        page.contains("RYVOS RUN") && page.contains("max\\-turns"),
        "{page}"
    );
}

#[tokio::test]
async fn sessions_shows_when_how_and_what_each_session_was_about() {
    let server = ScriptedModelServer::start([Reply::text(&["fine"])]).await;
    let home = Home::new(&server, "");
    let (code, _, stderr) = home
        .ryvos(&["run", "check the build\nand more details"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let (code, listed, stderr) = home.ryvos(&["sessions"]).await;
    assert_eq!(code, 0, "{stderr}");
    let line = listed.lines().next().unwrap();
    assert!(line.starts_with("s_"), "{listed}");
    assert!(line.contains("s ago"), "{listed}");
    assert!(line.contains("completed"), "{listed}");
    assert!(line.ends_with("check the build"), "{listed}");
}

#[tokio::test]
async fn a_bad_setting_names_every_choice_and_where_every_key_is_shown() {
    let server = ScriptedModelServer::start([]).await;
    let home = Home::new(&server, "");
    let (code, _, stderr) = home
        .ryvos(&["-c", "model.provider=nope", "run", "hello"])
        .await;
    assert_eq!(code, 2, "{stderr}");
    for said in [
        "\"openai\"",
        "\"openai-responses\"",
        "\"anthropic\"",
        "\"replay\"",
    ] {
        assert!(stderr.contains(said), "{said}: {stderr}");
    }
    // An installed user has no config/ryvos.toml: `ryvos config` shows every key.
    assert!(stderr.contains("`ryvos config`"), "{stderr}");
    assert!(!stderr.contains("config/ryvos.toml"), "{stderr}");
}
