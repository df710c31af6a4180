//! The sandbox launcher on the real machine (bubblewrap, the kernel, and `ryvos-sandbox` as
//! built beside the test program): what a confined command can and cannot write, read, reach
//! and leave behind.

use super::*;
use ryvos_testkit::runaway;
use std::collections::BTreeSet;
use std::process::Output;

fn config(mode: SandboxMode, network: bool, writable: &[&Path]) -> SandboxConfig {
    SandboxConfig {
        mode,
        network,
        writable_paths: writable.iter().map(|p| p.display().to_string()).collect(),
        ..SandboxConfig::default()
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
    let sandbox = Sandbox::new(config, Site::home(&ryvos_home())).unwrap();
    assert_eq!(
        sandbox.unenforceable(),
        None,
        "these tests need bubblewrap and ryvos-sandbox (built by cargo test --workspace)"
    );
    sandbox
}

/// A machine missing `missing` (the other pieces as detected).
fn machine_without(missing: &str) -> Machine {
    let mut machine = Machine::detect(None);
    match missing {
        "bubblewrap" => machine.bubblewrap = Err("bubblewrap (bwrap) is not installed".into()),
        _ => machine.inner = Err("ryvos-sandbox is not installed".into()),
    }
    machine
}

/// Whether the output says a write was refused, as either layer refuses it.
fn refused_write(out: &Output) -> bool {
    let said = stderr(out);
    said.contains("Permission denied") || said.contains("Read-only file system")
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
        assert!(refused_write(&out), "{escape}: {}", stderr(&out));
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
async fn network_false_refuses_tcp_udp_and_dns() {
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

    // A datagram to a listener on the host's loopback never arrives; names do not resolve.
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let port = udp.local_addr().unwrap().port();
    let send = format!(
        "python3 -c \"import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); \
         s.sendto(b'leak', ('127.0.0.1', {port}))\"; getent hosts example.com"
    );
    let out = bash(&run, &send).await;
    assert!(!out.status.success(), "the lookup fails");
    let mut buf = [0u8; 16];
    assert!(udp.recv_from(&mut buf).is_err(), "nothing arrived");
}

#[tokio::test]
async fn secrets_are_neither_readable_nor_in_the_environment() {
    let d = dirs();
    let home = d.outside.join("ryvos-home");
    std::fs::create_dir(&home).unwrap();
    std::fs::write(home.join("config.toml"), "api_key = \"sk-in-home\"").unwrap();
    let config_file = d.outside.join("elsewhere.toml");
    std::fs::write(&config_file, "api_key = \"sk-elsewhere\"").unwrap();
    let denied = d.workspace.root().join("deploy.key");
    std::fs::write(&denied, "DENIED-SECRET").unwrap();
    let mut config = config(SandboxMode::WorkspaceWrite, false, &[]);
    config.deny_read = vec![denied.display().to_string()];
    config.env_keep = vec!["RYVOS_TEST_KEPT_TOKEN".into()];
    let site = Site {
        ryvos_home: home.clone(),
        config_file: Some(config_file.clone()),
        config_vars: BTreeSet::from(["RYVOS_TEST_NAMED".to_owned()]),
    };
    let sandbox = Sandbox::new(&config, site).unwrap();
    let run = sandbox.for_run(&d.workspace);
    // The daemon's environment, as the command would inherit it.
    let parent_env = [
        ("RYVOS_TEST_NAMED", "named-value"),
        ("RYVOS_TEST_API_KEY", "sk-env"),
        ("RYVOS_TEST_KEPT_TOKEN", "kept-value"),
    ];
    for (name, value) in parent_env {
        std::env::set_var(name, value);
    }
    let script = format!(
        "cat {h}/config.toml {c} deploy.key; ls {h}; env",
        h = home.display(),
        c = config_file.display()
    );
    let out = bash(&run, &script).await;
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    for secret in [
        "sk-in-home",
        "sk-elsewhere",
        "DENIED-SECRET",
        "sk-env",
        "named-value",
    ] {
        assert!(!said.contains(secret), "{secret} leaked: {said}");
    }
    assert!(said.contains("kept-value"), "env_keep passes it: {said}");
    // The file tools follow the same rules.
    let rules = run.file_rules();
    assert!(rules.refuses_read(&denied).unwrap().contains("allow_read"));
    assert!(rules.refuses_write(&denied).is_some());
    assert!(rules
        .refuses_read(&d.workspace.root().join("fine.txt"))
        .is_none());
    // The workspace itself is still there to work in.
    assert!(bash(&run, "echo ok > fine.txt").await.status.success());
}

#[tokio::test]
async fn git_hooks_and_config_stay_read_only_while_commits_work() {
    let d = dirs();
    let git = |script: &str| {
        std::process::Command::new("bash")
            .arg("-c")
            .arg(script)
            .current_dir(d.workspace.root())
            .status()
            .unwrap()
    };
    assert!(git("git init -q . && git config user.email a@b && git config user.name a").success());
    let run =
        kernel_sandbox(&config(SandboxMode::WorkspaceWrite, false, &[])).for_run(&d.workspace);
    let config_before = std::fs::read(d.workspace.root().join(".git/config")).unwrap();
    for plant in [
        "echo 'touch /tmp/pwned' > .git/hooks/pre-commit",
        "git config core.fsmonitor 'touch /tmp/pwned'",
        "printf '[alias]\\n\\tst = !touch /tmp/pwned\\n' >> .git/config",
        "mv .git .git-old",
        "rm -rf .git/hooks",
        "mkdir -p evil/hooks && echo 'touch /tmp/pwned' > evil/hooks/pre-commit && chmod +x \
         evil/hooks/pre-commit && echo ../evil > .git/commondir && false",
    ] {
        let out = bash(&run, plant).await;
        assert!(!out.status.success(), "{plant} worked");
    }
    assert_eq!(
        std::fs::read(d.workspace.root().join(".git/config")).unwrap(),
        config_before
    );
    assert!(!d.workspace.root().join(".git/hooks/pre-commit").exists());
    assert!(
        !d.workspace.root().join(".git/commondir").exists(),
        "a planted commondir is taken away"
    );
    let rules = run.file_rules();
    let root = d.workspace.root();
    assert!(rules
        .refuses_write(&root.join(".git/hooks/pre-commit"))
        .is_some());
    assert!(rules.refuses_write(&root.join(".git/config")).is_some());
    assert!(rules.refuses_write(&root.join(".git/objects/x")).is_none());
    assert!(rules.refuses_read(&root.join(".git/config")).is_none());
    let commit = bash(
        &run,
        "echo a > a.txt && git add a.txt && git commit -qm first",
    )
    .await;
    assert!(commit.status.success(), "{}", stderr(&commit));
    assert!(git("git log --oneline | grep -q first").success());
}

#[tokio::test]
async fn a_machine_missing_a_piece_refuses_commands_instead_of_running_them() {
    let d = dirs();
    let marker = d.outside.join("ran");
    for missing in ["bubblewrap", "ryvos-sandbox"] {
        let sandbox = Sandbox::on_machine(
            &config(SandboxMode::WorkspaceWrite, false, &[]),
            Site::home(&ryvos_home()),
            machine_without(missing),
        )
        .unwrap();
        let why = sandbox.unenforceable().expect("cannot be enforced");
        assert!(why.contains(missing), "{why}");
        assert!(sandbox.describe().contains("refused"), "{why}");
        let refused = sandbox.for_run(&d.workspace).command("touch").unwrap_err();
        let text = refused.to_string();
        assert!(text.contains("mode = \"off\""), "{text}");
        assert!(text.contains(missing), "{text}");
    }
    // mode = "off" runs anywhere, unconfined.
    let off = Sandbox::on_machine(
        &config(SandboxMode::Off, true, &[]),
        Site::home(&ryvos_home()),
        machine_without("bubblewrap"),
    )
    .unwrap();
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
    let err = Sandbox::new(&missing, Site::home(&ryvos_home())).unwrap_err();
    assert!(err.to_string().contains("/no/such/dir/ryvos"));
    let relative = SandboxConfig {
        writable_paths: vec!["cache".into()],
        ..SandboxConfig::default()
    };
    assert!(Sandbox::new(&relative, Site::home(&ryvos_home()))
        .unwrap_err()
        .to_string()
        .contains("absolute"));
}

#[tokio::test]
async fn commands_run_in_their_own_session_without_unix_sockets_unless_allowed() {
    let d = dirs();
    let sandbox = kernel_sandbox(&config(SandboxMode::WorkspaceWrite, true, &[]));
    let run = sandbox.for_run(&d.workspace);
    // A session led inside the sandbox (a leader outside its PID namespace shows as 0), with
    // no terminal.
    let own_session =
        "read -ra stat < /proc/$$/stat; [ \"${stat[5]}\" != 0 ] && [ \"${stat[6]}\" = 0 ]";
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
    // io_uring, which makes sockets without the socket call, is refused either way.
    let io_uring = format!(
        "python3 -c \"import ctypes; assert ctypes.CDLL(None, use_errno=True).syscall({}, 8, \
         None) == -1 and ctypes.get_errno() == 13\"",
        libc::SYS_io_uring_setup
    );
    let out = bash(&run, &io_uring).await;
    assert!(out.status.success(), "{}", stderr(&out));
}

#[tokio::test]
async fn a_writable_workspace_holding_ryvos_home_or_the_home_is_refused() {
    let d = dirs();
    let home = d.workspace.root().join(".ryvos");
    std::fs::create_dir(&home).unwrap();
    let config = config(SandboxMode::WorkspaceWrite, true, &[]);
    let sandbox = Sandbox::new(&config, Site::home(&home)).unwrap();
    let refused = sandbox.for_run(&d.workspace).command("true").unwrap_err();
    assert!(refused.to_string().contains("--workspace"), "{refused}");
    let root = Workspace::new(Path::new("/")).unwrap();
    assert!(sandbox.for_run(&root).command("true").is_err());
    // Read-only is fine: nothing there can be written.
    let read_only = SandboxConfig {
        mode: SandboxMode::ReadOnly,
        ..config
    };
    let sandbox = Sandbox::new(&read_only, Site::home(&home)).unwrap();
    assert!(sandbox.for_run(&d.workspace).command("true").is_ok());
}

#[tokio::test]
async fn a_command_cannot_start_more_processes_or_take_more_memory_than_its_limits() {
    let d = dirs();
    let mut limited = config(SandboxMode::WorkspaceWrite, false, &[]);
    limited.max_processes = 64;
    limited.max_memory_mb = 256;
    let sandbox = kernel_sandbox(&limited);
    assert!(sandbox
        .describe()
        .contains("at most 64 processes and 256 MiB"));
    let run = sandbox.for_run(&d.workspace);
    let out = bash(&run, runaway::FORK_MANY).await;
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let started = runaway::started(&said).unwrap_or_else(|| panic!("{said}{}", stderr(&out)));
    assert!(started < 64, "{started} started under max_processes = 64");
    assert!(said.contains("fork failed"), "{said}");
    assert!(run.explain(&said).unwrap().contains("max_processes"));

    let mut command = run.command("bash").unwrap();
    let out = command
        .arg("-c")
        .arg(runaway::allocate(1024))
        .output()
        .await
        .unwrap();
    assert!(!out.status.success(), "1 GiB under max_memory_mb = 256");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    // The cgroup counts the kill; under rlimits the allocation fails with MemoryError.
    let notes = [
        command.finish().await,
        run.explain(&said).into_iter().collect(),
    ]
    .concat();
    assert!(notes.join("\n").contains("max_memory_mb"), "{said}");
}

/// A plain HTTP server on this machine's loopback answering every request with `body`.
fn http_server(body: &'static str) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            use std::io::{Read, Write};
            let mut stream = stream;
            let mut request = [0u8; 4096];
            let _request_read = stream.read(&mut request);
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _answered = stream.write_all(response.as_bytes());
        }
    });
    port
}

#[tokio::test]
async fn allowed_domains_are_reached_through_the_proxy_and_nothing_else_is() {
    let d = dirs();
    let port = http_server("reached-through-the-proxy");
    let mut allowing = config(SandboxMode::WorkspaceWrite, false, &[]);
    allowing.allowed_domains = vec!["localhost".into()];
    let sandbox = kernel_sandbox(&allowing);
    assert!(sandbox
        .describe()
        .contains("localhost through the egress proxy"));
    let run = sandbox.for_run(&d.workspace);
    let out = bash(&run, &format!("curl -sS -m 10 http://localhost:{port}/ok")).await;
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("reached-through-the-proxy"),
        "{said}{}",
        stderr(&out)
    );
    assert!(run.explain(&said).is_none(), "nothing was refused");
    // A tunnel (CONNECT, as HTTPS goes) too.
    let tunnel = format!("curl -fsS -p -m 10 http://localhost:{port}/tunnel");
    let out = bash(&run, &tunnel).await;
    assert!(out.status.success(), "{}", stderr(&out));

    let mut command = run.command("bash").unwrap();
    let refused = "curl -fsS -m 10 http://example.com/";
    let out = command.arg("-c").arg(refused).output().await.unwrap();
    assert!(!out.status.success());
    let notes = command.finish().await.join("\n");
    assert!(
        notes.contains("example.com") && notes.contains("allowed_domains"),
        "{notes}"
    );
    // Around the proxy, nothing gets out at all.
    let direct = format!("curl -sS -m 5 --noproxy '*' http://127.0.0.1:{port}/");
    assert!(!bash(&run, &direct).await.status.success());
    // Tracing the bridge is refused.
    let trace = "python3 -c \"import ctypes; assert ctypes.CDLL(None).ptrace(16, 1, 0, 0) != 0\"";
    assert!(bash(&run, trace).await.status.success());
}

/// Run as root (as CI runs), the daemon lends its commands nobody: a file only root may read is
/// refused wherever it is, the workspace is theirs to write, and what they make there is
/// root's afterwards. Run as another user, there is nothing to lend and nothing to check.
#[tokio::test]
async fn a_root_daemon_lends_its_commands_nothing_of_root() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    // SAFETY: geteuid only reads the caller's id.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    let d = dirs();
    let secret = d.outside.join("root-only.txt");
    std::fs::write(&secret, "ROOT-ONLY-5T").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mine = d.workspace.root().join("mine.txt");
    std::fs::write(&mine, "the user's own").unwrap();
    std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o600)).unwrap();
    let sandbox = kernel_sandbox(&config(SandboxMode::WorkspaceWrite, false, &[]));
    assert!(
        sandbox.identity().contains("nobody"),
        "{}",
        sandbox.identity()
    );
    let run = sandbox.for_run(&d.workspace);

    let out = bash(&run, &format!("cat {}", secret.display())).await;
    assert!(!out.status.success(), "a root-only file was read");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("ROOT-ONLY-5T"));
    let shadow = bash(&run, "head -c 300 /etc/shadow").await;
    assert!(!shadow.status.success(), "/etc/shadow was read");

    let work = bash(
        &run,
        "id -u && cat mine.txt && echo more >> mine.txt && mkdir -p made/deep \
         && echo new > made/deep/file && echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"",
    )
    .await;
    assert!(work.status.success(), "{}", stderr(&work));
    let said = String::from_utf8_lossy(&work.stdout);
    assert!(said.starts_with("65534\n"), "{said}");
    assert!(said.contains("the user's own"), "{said}");
    for made in ["made", "made/deep", "made/deep/file", "mine.txt"] {
        let meta = std::fs::metadata(d.workspace.root().join(made)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (0, 0), "{made} is root's");
    }
}

/// A workspace under a directory the lent user cannot enter (`/root`, 0700) is reached through
/// a cover that shows nothing else of it.
#[tokio::test]
async fn a_workspace_behind_a_closed_directory_is_reached_and_nothing_beside_it() {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid only reads the caller's id.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let closed = root.path().join("closed");
    std::fs::create_dir_all(closed.join("ws")).unwrap();
    std::fs::write(closed.join("beside.txt"), "BESIDE-2Q").unwrap();
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
    let workspace = Workspace::new(&closed.join("ws")).unwrap();
    let sandbox = kernel_sandbox(&config(SandboxMode::WorkspaceWrite, false, &[]));
    let run = sandbox.for_run(&workspace);
    let out = bash(
        &run,
        "pwd && echo x > here.txt && ls -a .. && cat ../beside.txt",
    )
    .await;
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.starts_with(&format!("{}\n", workspace.root().display())),
        "{said}"
    );
    assert!(!said.contains("beside.txt"), "{said}");
    assert!(
        workspace.root().join("here.txt").exists(),
        "{}",
        stderr(&out)
    );
}
