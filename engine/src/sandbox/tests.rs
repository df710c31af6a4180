//! The sandbox launcher on the real kernel: what a confined command can and cannot write.

use super::*;
use std::process::Output;

fn config(mode: SandboxMode, network: bool, writable: &[&Path]) -> SandboxConfig {
    SandboxConfig {
        mode,
        network,
        writable_paths: writable.iter().map(|p| p.display().to_string()).collect(),
        unix_sockets: false,
    }
}

/// A workspace and a directory beside it that is outside.
struct Dirs {
    _root: tempfile::TempDir,
    workspace: Workspace,
    outside: PathBuf,
}

fn dirs() -> Dirs {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("ws")).unwrap();
    std::fs::create_dir(root.path().join("outside")).unwrap();
    Dirs {
        workspace: Workspace::new(&root.path().join("ws")).unwrap(),
        outside: root.path().join("outside").canonicalize().unwrap(),
        _root: root,
    }
}

/// A `$RYVOS_HOME` apart from every workspace of these tests.
fn ryvos_home() -> PathBuf {
    std::env::temp_dir().join("ryvos-sandbox-tests-home")
}

fn kernel_sandbox(config: &SandboxConfig) -> Sandbox {
    let sandbox = Sandbox::new(config, &ryvos_home()).unwrap();
    assert_eq!(
        sandbox.unenforceable(),
        None,
        "these tests need Linux Landlock ABI 4 or later"
    );
    sandbox
}

async fn bash(run: &RunSandbox, script: &str) -> Output {
    run.command("bash")
        .unwrap()
        .arg("-c")
        .arg(script)
        .output()
        .await
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test]
async fn workspace_write_allows_the_workspace_and_tmpdir_and_refuses_the_rest() {
    let d = dirs();
    let sandbox = kernel_sandbox(&config(SandboxMode::WorkspaceWrite, true, &[]));
    let run = sandbox.for_run(&d.workspace);

    let ok = bash(
        &run,
        "echo a > in.txt && mkdir sub && echo b > sub/x && echo c > \"$TMPDIR/t\" \
         && echo d > /dev/null && cat /etc/hostname > /dev/null && echo e >&2",
    )
    .await;
    assert!(ok.status.success(), "{}", stderr(&ok));
    assert!(d.workspace.root().join("sub/x").exists());

    for escape in [
        format!("echo x > {}/a", d.outside.display()),
        "echo x > ../outside/b".to_owned(),
        "cd .. && touch outside/c".to_owned(),
        format!("ln -s {} link && echo x > link/d", d.outside.display()),
        format!(
            "python3 -c \"open('{}/e','w').write('x')\"",
            d.outside.display()
        ),
        "TMPDIR=$(dirname \"$TMPDIR\"); echo x > \"$TMPDIR/ryvos-escape\"".to_owned(),
    ] {
        let out = bash(&run, &escape).await;
        assert!(!out.status.success(), "{escape} ran");
        assert!(
            stderr(&out).contains("Permission denied"),
            "{escape}: {}",
            stderr(&out)
        );
        assert!(run.explain(&stderr(&out)).is_some());
    }
    assert_eq!(std::fs::read_dir(&d.outside).unwrap().count(), 0);
    assert!(!std::env::temp_dir().join("ryvos-escape").exists());
}

#[tokio::test]
async fn the_private_tmpdir_is_removed_with_the_run() {
    let d = dirs();
    let sandbox = kernel_sandbox(&config(SandboxMode::WorkspaceWrite, true, &[]));
    let run = sandbox.for_run(&d.workspace);
    let out = bash(&run, "echo -n \"$TMPDIR\"").await;
    let tmp = PathBuf::from(String::from_utf8(out.stdout).unwrap());
    assert!(tmp.is_dir());
    assert_ne!(tmp, std::env::temp_dir());
    drop(run);
    // Removed off the async workers: wait for it, a while at most.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while tmp.exists() && std::time::Instant::now() < deadline {
        tokio::task::yield_now().await;
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(!tmp.exists());
}

#[tokio::test]
async fn read_only_allows_only_tmpdir_and_writable_paths_widen_workspace_write() {
    let d = dirs();
    let read_only = kernel_sandbox(&config(SandboxMode::ReadOnly, true, &[]));
    let run = read_only.for_run(&d.workspace);
    let out = bash(&run, "echo x > in.txt").await;
    assert!(!out.status.success());
    assert!(run.explain(&stderr(&out)).unwrap().contains("read-only"));
    assert!(bash(&run, "echo x > \"$TMPDIR/t\"").await.status.success());

    let cache = d.outside.join("cache");
    std::fs::create_dir(&cache).unwrap();
    let wider = kernel_sandbox(&config(SandboxMode::WorkspaceWrite, true, &[&cache]));
    let run = wider.for_run(&d.workspace);
    let out = bash(&run, &format!("echo x > {}/hit", cache.display())).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !bash(&run, &format!("echo x > {}/miss", d.outside.display()))
            .await
            .status
            .success()
    );
}

#[tokio::test]
async fn network_false_refuses_tcp() {
    let d = dirs();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port}");

    let open = kernel_sandbox(&config(SandboxMode::WorkspaceWrite, true, &[]));
    let out = bash(&open.for_run(&d.workspace), &connect).await;
    assert!(out.status.success(), "{}", stderr(&out));

    let closed = kernel_sandbox(&config(SandboxMode::WorkspaceWrite, false, &[]));
    let run = closed.for_run(&d.workspace);
    let out = bash(&run, &connect).await;
    assert!(!out.status.success());
    assert!(run.explain(&stderr(&out)).unwrap().contains("network"));
}

#[tokio::test]
async fn a_kernel_without_landlock_refuses_commands_instead_of_running_them() {
    let d = dirs();
    let marker = d.outside.join("ran");
    for abi in [0, 2] {
        let sandbox = Sandbox::with_kernel_abi(
            &config(SandboxMode::WorkspaceWrite, true, &[]),
            &ryvos_home(),
            abi,
        )
        .unwrap();
        let why = sandbox.unenforceable().expect("cannot be enforced");
        assert!(sandbox.describe().contains("refused"), "{why}");
        let refused = sandbox.for_run(&d.workspace).command("touch").unwrap_err();
        let text = refused.to_string();
        assert!(text.contains("mode = \"off\""), "{text}");
    }
    // network = false needs ABI 4.
    let sandbox = Sandbox::with_kernel_abi(
        &config(SandboxMode::WorkspaceWrite, false, &[]),
        &ryvos_home(),
        3,
    )
    .unwrap();
    assert!(sandbox.unenforceable().unwrap().contains("network"));
    // mode = "off" runs anywhere, unconfined.
    let off =
        Sandbox::with_kernel_abi(&config(SandboxMode::Off, true, &[]), &ryvos_home(), 0).unwrap();
    let out = off
        .for_run(&d.workspace)
        .command("touch")
        .unwrap()
        .arg(&marker)
        .output()
        .await
        .unwrap();
    assert!(out.status.success());
    assert!(marker.exists());
}

#[test]
fn writable_paths_must_exist_and_be_absolute() {
    let missing = config(
        SandboxMode::WorkspaceWrite,
        true,
        &[Path::new("/no/such/dir/ryvos")],
    );
    let err = Sandbox::with_kernel_abi(&missing, &ryvos_home(), 7).unwrap_err();
    assert!(err.to_string().contains("/no/such/dir/ryvos"));
    let relative = SandboxConfig {
        writable_paths: vec!["cache".into()],
        ..SandboxConfig::default()
    };
    assert!(Sandbox::with_kernel_abi(&relative, &ryvos_home(), 7)
        .unwrap_err()
        .to_string()
        .contains("absolute"));
}

#[tokio::test]
async fn commands_run_in_their_own_session_without_unix_sockets_unless_allowed() {
    let d = dirs();
    let sandbox = kernel_sandbox(&config(SandboxMode::WorkspaceWrite, true, &[]));
    let run = sandbox.for_run(&d.workspace);
    let own_session = "read -ra stat < /proc/$$/stat; [ \"${stat[5]}\" = \"$$\" ]";
    assert!(bash(&run, own_session).await.status.success());

    let unix = "python3 -c 'import socket; socket.socket(socket.AF_UNIX)'";
    let out = bash(&run, unix).await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("Permission denied"),
        "{}",
        stderr(&out)
    );
    // Pipes to its own children still work.
    let pair = "python3 -c 'import socket; socket.socketpair()' && echo x | cat";
    assert!(bash(&run, pair).await.status.success());

    let mut allowing = config(SandboxMode::WorkspaceWrite, true, &[]);
    allowing.unix_sockets = true;
    let run = kernel_sandbox(&allowing).for_run(&d.workspace);
    assert!(bash(&run, unix).await.status.success());
}

#[tokio::test]
async fn a_writable_workspace_holding_ryvos_home_or_the_home_is_refused() {
    let d = dirs();
    let home = d.workspace.root().join(".ryvos");
    std::fs::create_dir(&home).unwrap();
    let config = config(SandboxMode::WorkspaceWrite, true, &[]);
    let sandbox = Sandbox::new(&config, &home).unwrap();
    let refused = sandbox.for_run(&d.workspace).command("true").unwrap_err();
    assert!(refused.to_string().contains("--workspace"), "{refused}");
    let root = Workspace::new(Path::new("/")).unwrap();
    assert!(sandbox.for_run(&root).command("true").is_err());
    // Read-only is fine: nothing there can be written.
    let read_only = SandboxConfig {
        mode: SandboxMode::ReadOnly,
        ..config
    };
    let sandbox = Sandbox::new(&read_only, &home).unwrap();
    assert!(sandbox.for_run(&d.workspace).command("true").is_ok());
}
