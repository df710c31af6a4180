//! Confinement end to end: the real binaries, the scripted model server, and the kernel's
//! sandbox. The security gate is opened all the way (every tier allowed, as the most trusting
//! unattended user would), so every escape attempt reaches the sandbox, which is the guarantee.

mod common;

use common::cli::json_lines as events;
use common::home::Home;
use ryvos_testkit::{Reply, ScriptedModelServer};
use serde_json::{json, Value};
use std::collections::HashMap;

const EVERYTHING_ALLOWED: &str =
    "t0 = \"allow\"\nt1 = \"allow\"\nt2 = \"allow\"\nt3 = \"allow\"\nt4 = \"allow\"";

/// Each tool call's (is_error, output), by call id.
fn results(events: &[Value]) -> HashMap<String, (bool, String)> {
    events
        .iter()
        .filter(|e| e["type"] == "ToolEnd")
        .map(|e| {
            let id = e["call_id"].as_str().unwrap().to_owned();
            let output = e["output"].as_str().unwrap_or_default().to_owned();
            (id, (e["is_error"] == json!(true), output))
        })
        .collect()
}

fn bash_call(id: &str, command: &str) -> (String, String, String) {
    (
        id.to_owned(),
        "bash".to_owned(),
        json!({ "command": command }).to_string(),
    )
}

/// Calls the model asks for in one answer.
fn asking(calls: &[(String, String, String)]) -> Reply {
    let borrowed: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|(id, name, args)| (id.as_str(), name.as_str(), args.as_str()))
        .collect();
    Reply::tool_calls(&borrowed)
}

#[tokio::test(flavor = "multi_thread")]
async fn escape_attempts_through_the_daemon_leave_nothing_outside_the_workspace() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("victim.txt"), "original").unwrap();
    let o = outside.path().canonicalize().unwrap().display().to_string();
    let name = outside.path().file_name().unwrap().to_str().unwrap();
    // The same directory, reached from the workspace (both are in the temporary directory).
    let r = format!("../{name}");
    let beside_tmpdir = format!("ryvos-escape-{name}");
    let escapes = [
        (
            "python",
            format!("python3 -c \"open('{r}/python','w').write('x')\""),
        ),
        (
            "perl",
            format!("perl -e 'open(F, \">{r}/perl\") or die \"perl: $!\\n\"'"),
        ),
        (
            "node",
            format!("node -e \"require('fs').writeFileSync('{r}/node', 'x')\""),
        ),
        ("cd_up", format!("cd .. && touch {name}/cd")),
        ("absolute", format!("echo x > {o}/absolute")),
        (
            "symlink",
            format!("ln -s {o} link && echo x > link/symlink"),
        ),
        (
            "hardlink",
            format!("ln {o}/victim.txt hard && echo pwned > hard"),
        ),
        (
            "tmpdir_up",
            format!("echo x > \"$TMPDIR/../{beside_tmpdir}\""),
        ),
        (
            "tmpdir_reset",
            format!("TMPDIR={o}; echo x > \"$TMPDIR/tmpdir\""),
        ),
        ("copy", format!("cp /etc/passwd {r}/copy")),
        ("mkdir", format!("mkdir {r}/dir")),
        ("dd", format!("dd if=/dev/zero of={r}/dd bs=1 count=1")),
        ("git", format!("git init -q {r}/repo")),
        (
            "nested_shell",
            format!("sh -c 'cd / && cd {o} && echo x > sh'"),
        ),
        ("move", format!("echo x > mine && mv mine {r}/moved")),
    ];
    let mut calls: Vec<_> = escapes.iter().map(|(id, c)| bash_call(id, c)).collect();
    // The daemon's own socket: a unix socket cannot even be made in the sandbox, and the
    // in-process fallback cannot write the store.
    let ryvos = env!("CARGO_BIN_EXE_ryvos");
    calls.push(bash_call(
        "daemon",
        &format!("{ryvos} run --workspace / 'write anywhere'"),
    ));
    calls.push(bash_call(
        "inside",
        "echo ok > inside.txt && echo scratch > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"",
    ));
    let server =
        ScriptedModelServer::start([asking(&calls), Reply::text(&["I stayed inside."])]).await;
    let home = Home::with_sections(&server, "", EVERYTHING_ALLOWED, "");
    let _daemon = home.daemon().await;
    let (code, stdout, stderr) = home.ryvos(&["run", "--json", "try", "to", "escape"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("in-process"), "it used the daemon");
    let events = events(&stdout);
    assert_eq!(events.last().unwrap()["status"], "completed");
    let results = results(&events);

    for (id, command) in &escapes {
        let (is_error, output) = &results[*id];
        assert!(*is_error, "{id} ({command}) succeeded: {output}");
        assert!(
            output.contains("[sandbox]"),
            "{id}: the model is told why: {output}"
        );
    }
    let (is_error, output) = &results["daemon"];
    assert!(*is_error, "{output}");
    assert!(output.contains("[sandbox]"), "{output}");
    let (is_error, output) = &results["inside"];
    assert!(!is_error, "{output}");
    assert!(output.contains("scratch"), "{output}");
    assert!(home.workspace.path().join("inside.txt").exists());

    let left: Vec<_> = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["victim.txt"], "nothing new outside the workspace");
    assert_eq!(
        std::fs::read_to_string(outside.path().join("victim.txt")).unwrap(),
        "original"
    );
    assert!(!std::env::temp_dir().join(&beside_tmpdir).exists());

    // The sandbox's state is reported.
    let (code, status, _) = home.ryvos(&["status"]).await;
    assert_eq!(code, 0);
    assert!(
        status.contains("sandbox: workspace-write, network allowed (Landlock ABI"),
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn network_false_refuses_connections_that_network_true_allows() {
    for network in [true, false] {
        let probe = ScriptedModelServer::start([]).await;
        let curl = format!(
            "curl -sS -o /dev/null -w '%{{http_code}}' {}/models",
            probe.base_url()
        );
        let server = ScriptedModelServer::start([
            asking(&[bash_call("curl", &curl)]),
            Reply::text(&["done"]),
        ])
        .await;
        let home = Home::with_sections(
            &server,
            "",
            EVERYTHING_ALLOWED,
            &format!("[security.sandbox]\nnetwork = {network}\n"),
        );
        let _daemon = home.daemon().await;
        let (code, stdout, stderr) = home.ryvos(&["run", "--json", "fetch"]).await;
        assert_eq!(code, 0, "{stderr}");
        let (is_error, output) = &results(&events(&stdout))["curl"];
        if network {
            assert!(!is_error, "network = true connects: {output}");
        } else {
            assert!(is_error, "network = false refuses: {output}");
            assert!(output.contains("network = false"), "{output}");
        }
    }
}
