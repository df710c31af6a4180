//! What a person is told, and what stays private, when the sandbox is weakened or a run starts
//! on a new home: through the real binaries, in-process (as the README's first command runs).

mod common;

use common::cli::json_lines as events;
use common::confined::{asking, results, EVERYTHING_ALLOWED};
use common::home::Home;
use ryvos_testkit::{Reply, ScriptedModelServer};
use serde_json::json;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().mode() & 0o777
}

/// Every path under `dir` (itself included) that group or others may use.
fn open_to_others(dir: &Path) -> Vec<String> {
    let mut open = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(path) = pending.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.file_type().is_socket() || meta.file_type().is_symlink() {
            continue;
        }
        if meta.mode() & 0o077 != 0 {
            open.push(format!("{} {:o}", path.display(), meta.mode() & 0o777));
        }
        if meta.is_dir() {
            pending.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        }
    }
    open
}

#[tokio::test(flavor = "multi_thread")]
async fn read_only_means_read_only_for_the_file_tools_too() {
    let write = (
        "write".to_owned(),
        "write".to_owned(),
        json!({"path": "big.txt", "content": "x".repeat(20_000)}).to_string(),
    );
    let edit = (
        "edit".to_owned(),
        "edit".to_owned(),
        json!({"path": "kept.txt", "old_string": "kept", "new_string": "changed"}).to_string(),
    );
    let server =
        ScriptedModelServer::start([asking(&[write, edit]), Reply::text(&["I could not."])]).await;
    let home = Home::with_sections(
        &server,
        "",
        EVERYTHING_ALLOWED,
        "[security]\nauto_approve = [\"write\", \"edit\"]\n[security.sandbox]\nmode = \"read-only\"\n",
    );
    std::fs::write(home.workspace.path().join("kept.txt"), "kept").unwrap();
    let (code, stdout, stderr) = home.ryvos(&["run", "--json", "write", "it"]).await;
    assert_eq!(code, 0, "{stderr}");
    let results = results(&events(&stdout));
    for id in ["write", "edit"] {
        let (is_error, output) = &results[id];
        assert!(*is_error && output.starts_with("denied:"), "{id}: {output}");
        assert!(output.contains("read-only"), "{id}: {output}");
    }
    assert!(!home.workspace.path().join("big.txt").exists());
    assert_eq!(
        std::fs::read_to_string(home.workspace.path().join("kept.txt")).unwrap(),
        "kept"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_first_run_makes_a_private_home_and_an_open_one_is_tightened() {
    let server =
        ScriptedModelServer::start([Reply::text(&["Hello."]), Reply::text(&["Again."])]).await;
    let home = Home::new(&server, "");
    // A home that does not exist yet, as the README's first command makes it.
    let fresh = home.path().join("new/.ryvos");
    let config = home.path().join("config.toml");
    let run_on_fresh = |prompt: &'static str| {
        let mut command = home.command(env!("CARGO_BIN_EXE_ryvos"));
        command
            .env("RYVOS_HOME", &fresh)
            .arg("--config")
            .arg(&config)
            .args(["run", prompt]);
        async move { common::cli::output(&mut command).await }
    };
    let (code, _, stderr) = run_on_fresh("hello").await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(mode(&fresh), 0o700);
    assert!(fresh.join("ryvos.redb").exists());
    assert_eq!(open_to_others(&fresh), Vec::<String>::new());

    // One left open (by an older Ryvos, or by hand) is made private, and said so.
    std::fs::set_permissions(&fresh, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(
        fresh.join("ryvos.redb"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let (code, _, stderr) = run_on_fresh("again").await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("private now"), "{stderr}");
    assert_eq!(open_to_others(&fresh), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn every_warning_reaches_stderr_in_every_output_mode_and_doctor_warns() {
    let sandbox = "[security.sandbox]\nmode = \"off\"\n\
                   [mcp.servers.broken]\ncommand = \"/nonexistent/mcp-server\"\n\
                   startup_timeout_secs = 5\n";
    let server = ScriptedModelServer::start([
        Reply::text(&["one"]),
        Reply::text(&["two"]),
        Reply::text(&["three"]),
    ])
    .await;
    let home = Home::with_sections(&server, "", EVERYTHING_ALLOWED, sandbox);
    for flags in [&["run"][..], &["run", "-q"], &["run", "--json"]] {
        let mut args = flags.to_vec();
        args.push("hello");
        let (code, _, stderr) = home.ryvos(&args).await;
        assert_eq!(code, 0, "{flags:?}: {stderr}");
        assert!(
            stderr.contains("ryvos: warning: the sandbox is off"),
            "{flags:?}: {stderr}"
        );
        assert!(
            stderr.contains("ryvos: warning: the MCP server 'broken' is unavailable"),
            "{flags:?}: {stderr}"
        );
    }
    let (_, doctor, _) = home.ryvos(&["doctor"]).await;
    let line = doctor.lines().find(|l| l.contains("sandbox")).unwrap();
    assert!(line.starts_with("WARN"), "{doctor}");
    assert!(line.contains("the sandbox is off"), "{line}");

    // The network opened: a warning too.
    let open = Home::with_sections(
        &server,
        "",
        EVERYTHING_ALLOWED,
        "[security.sandbox]\nnetwork = true\n",
    );
    let (_, doctor, _) = open.ryvos(&["doctor"]).await;
    let line = doctor.lines().find(|l| l.contains("sandbox")).unwrap();
    assert!(
        line.starts_with("WARN") && line.contains("network"),
        "{doctor}"
    );
}
