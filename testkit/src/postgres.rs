//! A real PostgreSQL server for tests and benchmarks: `initdb` and `pg_ctl` from the system's
//! `postgresql` package, in a temporary directory, listening on a free 127.0.0.1 port, stopped
//! when dropped. PostgreSQL refuses to run as root, so as root it runs as the `postgres` user.
//!
//! Each test takes a database of its own ([`PostgresServer::database`]) on one server per test
//! binary ([`shared`]), which is stopped when the process exits.

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// The user the server runs as when the tests run as root.
const SERVER_USER: &str = "postgres";
/// The user the tests connect as (trusted: the server listens only on loopback).
const CLIENT_USER: &str = "ryvos";

/// A running server.
pub struct PostgresServer {
    bin: PathBuf,
    /// Holds the data directory; removed after the server stops.
    dir: tempfile::TempDir,
    port: u16,
    as_root: bool,
    /// Whether commits reach the disk (`fsync`); tests need not wait for it.
    durable: bool,
    /// Whether it offers TLS, with a certificate for `localhost` signed by its own test CA.
    tls: bool,
}

/// Why no server could be started.
#[derive(Debug)]
pub enum Unavailable {
    /// The server's package is not installed: tests that need it are skipped, saying so.
    NotInstalled(String),
    /// It is installed and did not start: tests that need it fail.
    Failed(String),
}

impl Unavailable {
    /// Whether a test that needs the server may skip: only where it is not installed, and
    /// never under CI (`CI` set, as `.ci/run` runs) or `RYVOS_REQUIRE_POSTGRES`, where a
    /// missing server would let the PostgreSQL tests pass without running.
    pub fn may_skip(&self) -> bool {
        let required = ["CI", "RYVOS_REQUIRE_POSTGRES"]
            .iter()
            .any(|var| std::env::var_os(var).is_some_and(|v| !v.is_empty() && v != "0"));
        matches!(self, Self::NotInstalled(_)) && !required
    }
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotInstalled(why) | Self::Failed(why) => f.write_str(why),
        }
    }
}

/// The server binaries' directory: `$RYVOS_TEST_PG_BIN`, else the newest
/// `/usr/lib/postgresql/*/bin` (Debian), else wherever `initdb` is on the PATH.
fn bin_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("RYVOS_TEST_PG_BIN") {
        return Some(PathBuf::from(dir));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Some(bin);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).find(|dir| dir.join("initdb").exists())
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl PostgresServer {
    /// Creates a cluster in a new temporary directory and starts it, without `fsync` (for
    /// tests: nothing is measured, and a stop is never a power cut).
    pub fn start() -> Result<Self, Unavailable> {
        Self::start_with(false, false)
    }

    /// As [`PostgresServer::start`], offering TLS with a certificate for the name `localhost`
    /// (not for the address 127.0.0.1) signed by a CA made for it ([`PostgresServer::ca`]);
    /// [`PostgresServer::other_ca`] signed nothing it shows. Needs `openssl`.
    pub fn start_tls() -> Result<Self, Unavailable> {
        Self::start_with(false, true)
    }

    /// As [`PostgresServer::start`], with every commit on disk as on a production server (for
    /// benchmarks).
    pub fn start_durable() -> Result<Self, Unavailable> {
        Self::start_with(true, false)
    }

    fn start_with(durable: bool, tls: bool) -> Result<Self, Unavailable> {
        let bin = bin_dir().ok_or_else(|| {
            Unavailable::NotInstalled(
                "PostgreSQL's server is not installed (no initdb): install the `postgresql` \
                 package, or point RYVOS_TEST_PG_BIN at its bin directory"
                    .into(),
            )
        })?;
        let as_root = unsafe { libc::geteuid() } == 0;
        let dir = tempfile::Builder::new()
            .prefix("ryvos-pg-")
            .tempdir()
            .map_err(|e| Unavailable::Failed(format!("creating its directory: {e}")))?;
        let port =
            free_port().map_err(|e| Unavailable::Failed(format!("finding a free port: {e}")))?;
        let server = Self {
            bin,
            dir,
            port,
            as_root,
            durable,
            tls,
        };
        server.prepare_directory()?;
        server.run(
            "initdb",
            &[
                "-D",
                &server.data().to_string_lossy(),
                "-U",
                CLIENT_USER,
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
            ],
        )?;
        if tls {
            server.make_certificates()?;
        }
        let mut server = server;
        // The free port was let go before the server took it: another test's listener may
        // have taken it meanwhile. A server that cannot start is tried on another port.
        for _ in 1..3 {
            if server.up().is_ok() {
                return Ok(server);
            }
            server.port = free_port()
                .map_err(|e| Unavailable::Failed(format!("finding a free port: {e}")))?;
        }
        server.up().map_err(|e| {
            let log = std::fs::read_to_string(server.dir.path().join("server.log"));
            let tail: Vec<String> = (log.unwrap_or_default().lines().rev().take(5))
                .map(str::to_owned)
                .collect();
            Unavailable::Failed(format!("{e}; its log ends: {}", tail.join(" / ")))
        })?;
        Ok(server)
    }

    /// The test CA's certificate, which signed the server's.
    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// A CA that signed nothing the server shows.
    pub fn other_ca(&self) -> PathBuf {
        self.dir.path().join("other-ca.crt")
    }

    /// Makes the test CA, the server's certificate and key (the server's own, mode 0600, as
    /// PostgreSQL requires), and the other CA.
    fn make_certificates(&self) -> Result<(), Unavailable> {
        let dir = self.dir.path();
        std::fs::write(
            dir.join("server.ext"),
            "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
        )
        .map_err(|e| Unavailable::Failed(format!("writing the certificate's extensions: {e}")))?;
        let key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
        let ca = "-days 2 -addext basicConstraints=critical,CA:TRUE \
                  -addext keyUsage=critical,keyCertSign,cRLSign";
        let steps = [
            format!("req -x509 {key} -keyout ca.key -out ca.crt -subj /CN=ryvos-test-ca {ca}"),
            format!("req -x509 {key} -keyout other.key -out other-ca.crt -subj /CN=other-ca {ca}"),
            format!("req {key} -keyout server.key -out server.csr -subj /CN=localhost"),
            "x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt \
             -days 2 -extfile server.ext"
                .to_owned(),
        ];
        for step in &steps {
            let args: Vec<&str> = step.split_whitespace().collect();
            let made = Command::new("openssl")
                .args(&args)
                .current_dir(dir)
                .output()
                .map_err(|e| Unavailable::NotInstalled(format!("openssl cannot run: {e}")))?;
            if !made.status.success() {
                return Err(Unavailable::Failed(format!(
                    "openssl {step}: {}",
                    String::from_utf8_lossy(&made.stderr)
                )));
            }
        }
        let key = dir.join("server.key");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| Unavailable::Failed(format!("{e}")))?;
        if self.as_root {
            let user = user_ids(SERVER_USER)
                .ok_or_else(|| Unavailable::Failed(format!("no `{SERVER_USER}` user")))?;
            for file in ["server.key", "server.crt"] {
                std::os::unix::fs::chown(dir.join(file), Some(user.0), Some(user.1))
                    .map_err(|e| Unavailable::Failed(format!("giving {file} away: {e}")))?;
            }
        }
        Ok(())
    }

    /// Gives the directory to the server's user when running as root.
    fn prepare_directory(&self) -> Result<(), Unavailable> {
        if !self.as_root {
            return Ok(());
        }
        let user = user_ids(SERVER_USER).ok_or_else(|| {
            Unavailable::Failed(format!(
                "running as root, and there is no `{SERVER_USER}` user to run PostgreSQL as \
                 (the `postgresql` package creates it)"
            ))
        })?;
        std::os::unix::fs::chown(self.dir.path(), Some(user.0), Some(user.1)).map_err(|e| {
            Unavailable::Failed(format!("giving its directory to {SERVER_USER}: {e}"))
        })?;
        std::fs::set_permissions(self.dir.path(), std::fs::Permissions::from_mode(0o700))
            .map_err(|e| Unavailable::Failed(format!("{e}")))?;
        Ok(())
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Runs a server program (as the server's user when root), failing with its output.
    fn run(&self, program: &str, args: &[&str]) -> Result<Output, Unavailable> {
        let exe = self.bin.join(program);
        let mut command = if self.as_root {
            let mut c = Command::new("runuser");
            c.args(["-u", SERVER_USER, "--"]).arg(&exe);
            c
        } else {
            Command::new(&exe)
        };
        let output = command
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .map_err(|e| Unavailable::Failed(format!("running {}: {e}", exe.display())))?;
        if !output.status.success() {
            return Err(Unavailable::Failed(format!(
                "{program} failed: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )));
        }
        Ok(output)
    }

    /// Starts the server and waits until it accepts connections.
    pub fn up(&self) -> Result<(), Unavailable> {
        let tls = match self.tls {
            true => format!(
                " -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
                self.dir.path().join("server.crt").display(),
                self.dir.path().join("server.key").display()
            ),
            false => String::new(),
        };
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {} -c max_connections=400 \
             -c shared_buffers=64MB{}{tls}",
            self.port,
            self.dir.path().display(),
            if self.durable {
                ""
            } else {
                " -c fsync=off -c full_page_writes=off"
            }
        );
        let log = self.dir.path().join("server.log");
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data().to_string_lossy(),
                "-l",
                &log.to_string_lossy(),
                "-o",
                &options,
                "-w",
                "-t",
                "60",
                "start",
            ],
        )
        .map(drop)
    }

    /// Stops the server at once (as a crash would, without a checkpoint).
    pub fn down(&self) -> Result<(), Unavailable> {
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data().to_string_lossy(),
                "-m",
                "immediate",
                "-w",
                "-t",
                "60",
                "stop",
            ],
        )
        .map(drop)
    }

    /// The port it listens on, on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A new, empty database, and its connection string.
    pub fn database(&self) -> Result<String, Unavailable> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "ryvos_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        self.run(
            "createdb",
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                CLIENT_USER,
                &name,
            ],
        )?;
        Ok(self.url(&name))
    }

    /// The connection string of database `name`.
    pub fn url(&self, name: &str) -> String {
        format!(
            "postgres://{CLIENT_USER}@127.0.0.1:{}/{name}?connect_timeout=10",
            self.port
        )
    }

    /// The server's log, for a failing test's message.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    fn directory(&self) -> &Path {
        self.dir.path()
    }

    /// Stops the server and removes its directory, saying what failed (a drop cannot return
    /// it).
    fn stop_and_remove(&self) {
        if let Err(e) = self.down() {
            eprintln!("stopping the test PostgreSQL: {e}");
        }
        if let Err(e) = std::fs::remove_dir_all(self.directory()) {
            eprintln!("removing the test PostgreSQL's directory: {e}");
        }
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        if self.data().join("postmaster.pid").exists() {
            self.stop_and_remove();
        } else if let Err(e) = std::fs::remove_dir_all(self.directory()) {
            eprintln!("removing the test PostgreSQL's directory: {e}");
        }
    }
}

/// The uid and gid of `user`.
fn user_ids(user: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.first() == Some(&user) && fields.len() > 3)
            .then(|| Some((fields[2].parse().ok()?, fields[3].parse().ok()?)))
            .flatten()
    })
}

static SHARED: OnceLock<Result<PostgresServer, Unavailable>> = OnceLock::new();

extern "C" fn stop_shared() {
    if let Some(Ok(server)) = SHARED.get() {
        server.stop_and_remove();
    }
}

/// The test binary's one server, started on first use and stopped when the process exits.
/// `None` when PostgreSQL is not installed (the caller skips, and this says so on stderr);
/// panics when it is installed and cannot start, or is required (see [`Unavailable::may_skip`]).
pub fn shared() -> Option<&'static PostgresServer> {
    let server = SHARED.get_or_init(|| {
        let started = PostgresServer::start();
        if started.is_ok() {
            // Statics are never dropped: the server is stopped at exit instead.
            unsafe { libc::atexit(stop_shared) };
        }
        started
    });
    match server {
        Ok(server) => Some(server),
        Err(unavailable) if unavailable.may_skip() => {
            eprintln!("skipped: needs a PostgreSQL server: {unavailable}");
            None
        }
        Err(unavailable) => panic!("the test PostgreSQL server: {unavailable}"),
    }
}
