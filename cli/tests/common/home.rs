//! A Ryvos home for the tests that drive the real binaries: a config pointing at a scripted
//! model server, a workspace, and ways to start `ryvosd` and run `ryvos`.

use super::cli;
use ryvos_testkit::ScriptedModelServer;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};

/// The longest a test waits for the daemon or a client; longer is a hang.
pub const WAIT: Duration = Duration::from_secs(60);

/// A home directory with its config, and a workspace.
pub struct Home {
    pub dir: tempfile::TempDir,
    pub workspace: tempfile::TempDir,
}

impl Home {
    pub fn new(server: &ScriptedModelServer, extra: &str) -> Self {
        Self::with_model(server, "", extra)
    }

    /// A home whose `[model]` section has `model_extra` too.
    pub fn with_model(server: &ScriptedModelServer, model_extra: &str, extra: &str) -> Self {
        let tools_run = "t1 = \"allow\"\nt2 = \"allow\"\nt3 = \"allow\"";
        Self::with_sections(server, model_extra, tools_run, extra)
    }

    /// A model that runs `command` through bash once, then answers `answer`; and a home on
    /// the default policy, where that call (T3) is asked about.
    pub async fn asking_bash(command: &str, answer: &str) -> (ScriptedModelServer, Self) {
        let arguments = serde_json::json!({ "command": command }).to_string();
        let server = ScriptedModelServer::start([
            ryvos_testkit::Reply::tool_calls(&[("b1", "bash", &arguments)]),
            ryvos_testkit::Reply::text(&[answer]),
        ])
        .await;
        let home = Self::with_sections(&server, "", "", "");
        (server, home)
    }

    /// A home with `model_extra` in `[model]` and `policy` as `[security.policy]`.
    pub fn with_sections(
        server: &ScriptedModelServer,
        model_extra: &str,
        policy: &str,
        extra: &str,
    ) -> Self {
        // Private, as Ryvos makes a home it creates (a temporary directory is open to all).
        let dir = tempfile::Builder::new()
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir()
            .unwrap();
        let config = format!(
            "[model]\nbase_url = \"{}\"\nmodel = \"scripted\"\napi_key = \"\"\n{model_extra}\n[supervision]\nbackoff_initial_ms = 20\n[security.policy]\n{policy}\n{extra}",
            server.base_url()
        );
        std::fs::write(dir.path().join("config.toml"), config).unwrap();
        Self {
            dir,
            workspace: tempfile::tempdir().unwrap(),
        }
    }

    /// The same home with its records kept by `backend`.
    pub fn on(self, backend: super::backend::Backend) -> Self {
        let config = self.path().join("config.toml");
        let mut text = std::fs::read_to_string(&config).unwrap();
        text.push_str(&backend.section());
        std::fs::write(config, text).unwrap();
        self
    }

    /// The same home with its records in the PostgreSQL database at `url`, shared with other
    /// homes: leases lapse after `lease_secs`.
    pub fn sharing(self, url: &str, lease_secs: u64) -> Self {
        let config = self.path().join("config.toml");
        let mut text = std::fs::read_to_string(&config).unwrap();
        text.push_str(&format!(
            "\n[store]\nbackend = \"postgres\"\nurl = \"{url}\"\npool_size = 8\nlease_secs = {lease_secs}\n"
        ));
        std::fs::write(config, text).unwrap();
        self
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn socket(&self) -> PathBuf {
        self.path().join("ryvosd.sock")
    }

    pub fn command(&self, binary: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(binary);
        c.env("RYVOS_HOME", self.path())
            .env("RUST_LOG", "warn")
            .current_dir(self.workspace.path())
            .stdin(Stdio::null())
            .kill_on_drop(true);
        c
    }

    /// Starts ryvosd and waits until it says it is listening.
    pub async fn daemon(&self) -> Child {
        self.daemon_from(self.command(env!("CARGO_BIN_EXE_ryvosd")))
            .await
    }

    /// Starts ryvosd as `command` (from [`Home::command`]) and waits until it listens.
    pub async fn daemon_from(&self, mut command: Command) -> Child {
        let mut child = command.stderr(Stdio::piped()).spawn().unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let ready = async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if line.contains("listening on") {
                    return;
                }
            }
            panic!("ryvosd exited before listening");
        };
        tokio::time::timeout(WAIT, ready)
            .await
            .expect("ryvosd became ready");
        // Keep reading its log so that it never blocks on a full pipe (shown with
        // RYVOS_TEST_DAEMON_LOG set, to see what a failing test's daemons did).
        let shown = std::env::var_os("RYVOS_TEST_DAEMON_LOG").is_some();
        let pid = child.id().unwrap_or_default();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if shown {
                    eprintln!("ryvosd[{pid}]: {line}");
                }
            }
        });
        child
    }

    /// Stops `daemon` with `ryvos shutdown` and waits until it has exited.
    pub async fn shutdown(&self, mut daemon: Child) {
        let (code, _, stderr) = self.ryvos(&["shutdown"]).await;
        assert_eq!(code, 0, "{stderr}");
        tokio::time::timeout(WAIT, daemon.wait())
            .await
            .expect("the daemon stops")
            .unwrap();
    }

    /// Runs `ryvos ARGS` to its end: (exit code, stdout, stderr).
    pub async fn ryvos(&self, args: &[&str]) -> (i32, String, String) {
        cli::output(self.command(env!("CARGO_BIN_EXE_ryvos")).args(args)).await
    }

    /// Runs `ryvos ARGS` as the user `ids` (uid, gid), or as this process's user.
    pub async fn ryvos_as(&self, ids: Option<(u32, u32)>, args: &[&str]) -> (i32, String, String) {
        let Some((uid, gid)) = ids else {
            return self.ryvos(args).await;
        };
        let mut command = self.command(super::unprivileged::program("ryvos"));
        command.uid(uid).gid(gid);
        cli::output(command.args(args)).await
    }
}

/// A `ryvos run --json …` going on in the background, read event by event.
pub struct Follower {
    child: Child,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Home {
    /// Starts `ryvos ARGS` (a `run --json`) and follows its events.
    pub fn follow(&self, args: &[&str]) -> Follower {
        let mut child = self
            .command(env!("CARGO_BIN_EXE_ryvos"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Follower { child, lines }
    }
}

impl Follower {
    /// What `pick` makes of the first event it takes; fails the test if the run ends first.
    pub async fn until<T>(&mut self, mut pick: impl FnMut(&serde_json::Value) -> Option<T>) -> T {
        tokio::time::timeout(WAIT, async {
            while let Some(line) = self.lines.next_line().await.unwrap() {
                let event: serde_json::Value = serde_json::from_str(&line).unwrap();
                if let Some(found) = pick(&event) {
                    return found;
                }
            }
            panic!("the run ended before the event looked for");
        })
        .await
        .expect("the event came in time")
    }

    /// How the client ended: the events left, its exit code and what it said on stderr.
    pub async fn rest(mut self) -> Ended {
        let mut events = Vec::new();
        while let Some(line) = self.lines.next_line().await.unwrap() {
            events.push(serde_json::from_str(&line).unwrap());
        }
        let exit = tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("the client never hangs")
            .unwrap();
        let mut stderr = String::new();
        if let Some(mut pipe) = self.child.stderr.take() {
            pipe.read_to_string(&mut stderr).await.unwrap();
        }
        Ended {
            events,
            code: exit.code(),
            stderr,
        }
    }
}

/// How a followed client ended.
pub struct Ended {
    pub events: Vec<serde_json::Value>,
    pub code: Option<i32>,
    pub stderr: String,
}
