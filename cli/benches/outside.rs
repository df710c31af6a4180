//! What users feel, measured from outside: the real `ryvos` and `ryvosd` binaries against a
//! scripted model server on 127.0.0.1 that logs when each request arrived and when its answer
//! ended.
//!
//! The workload is 20 file reads then an answer: W1 in a fresh session, W2 in a session that
//! already ran it 10 times. Each is run in-process (`ryvos run`, no daemon) and through a fresh
//! daemon (`ryvosd`, with `ryvos run` following the events). Reported, as medians of
//! [`REPEATS`] runs: wall time, CPU time and peak RSS of client and daemon (from `wait4` and
//! `/proc/<pid>/task/*/schedstat`, not sampled), process start to the first model request, the runtime's
//! gap per turn at the server (an answer's end to the next request), and the last request's
//! size. Also: `ryvosd` start to its socket answering, and its resident memory when idle; and
//! the transport's floor: the same gap for a bare HTTP client (reqwest, as Ryvos uses) that
//! replays a real run's requests and sends each as soon as the previous answer ended, so what
//! the loopback, the HTTP stacks and the bench's own server take is seen apart from Ryvos's
//! work.
//!
//! `cargo bench --bench outside`; `RYVOS_BENCH_BIN=<dir>` measures the binaries in another
//! build's directory instead (for before/after figures); `RYVOS_BENCH_ONLY=<names>` runs only
//! the named figures, comma-separated, of `in-process-w1`, `in-process-w2`, `daemon-w1`,
//! `daemon-w2`, `start` and `floor` (for a profiler's run).

use ryvos_testkit::{Reply, ScriptedModelServer};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Runs measured per figure.
const REPEATS: usize = 7;
/// File reads per run.
const READS: usize = 20;
/// Runs already in a W2 session.
const EARLIER_RUNS: usize = 10;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some(SPAWN) => return spawner(&args[2..]),
        Some(REPLAY) => return replayer(&args[2], Path::new(&args[3])),
        _ => {}
    }
    let binaries = Binaries::find();
    let runtime = tokio::runtime::Runtime::new().expect("a runtime for the model server");
    println!("outside: the real binaries in {}", binaries.dir.display());
    let only = std::env::var("RYVOS_BENCH_ONLY").ok();
    let wanted = |name: &str| {
        only.as_ref()
            .is_none_or(|o| o.split(',').any(|n| n == name))
    };
    // Each figure's gap per turn, by name, for the transport floor's comparison.
    let mut measured_gaps = Vec::new();
    for daemon in [false, true] {
        let mut gaps = Vec::new();
        for earlier in [0, EARLIER_RUNS] {
            if !wanted(&figure_name(daemon, earlier)) {
                continue;
            }
            let runs: Vec<Measured> = (0..REPEATS)
                .map(|_| runtime.block_on(measure(&binaries, daemon, earlier)))
                .collect();
            let gap = report(daemon, earlier, &runs);
            gaps.push(gap);
            measured_gaps.push((figure_name(daemon, earlier), gap));
        }
        if let [w1, w2] = gaps[..] {
            let ratio = w1.max(w2) / w1.min(w2);
            println!(
                "{} gap per turn, W2 against W1: {ratio:4.2}x   target <= 1.2x: {}",
                mode_name(daemon),
                verdict(ratio <= 1.2)
            );
        }
    }
    if wanted("floor") {
        let floors: Vec<Duration> = (0..REPEATS)
            .map(|_| runtime.block_on(transport_floor(&binaries)))
            .collect();
        let floor = median(floors.iter().map(|f| f.as_secs_f64() * 1e3).collect());
        println!(
            "transport floor: gap per turn p50 {floor:5.3} ms for a bare HTTP client replaying \
             the same requests"
        );
        for (name, gap) in &measured_gaps {
            println!(
                "  {name}: Ryvos's own work per turn, its gap above the floor: {:5.3} ms",
                gap - floor
            );
        }
    }
    if !wanted("start") {
        return;
    }
    let starts: Vec<(Duration, u64)> = (0..REPEATS).map(|_| daemon_start(&binaries)).collect();
    let answered = median(starts.iter().map(|s| s.0.as_secs_f64() * 1e3).collect());
    let idle = median(starts.iter().map(|s| s.1 as f64 / 1024.0).collect());
    println!(
        "ryvosd start -> socket answers: p50 {answered:6.1} ms   target <= 20 ms: {}",
        verdict(answered <= 20.0)
    );
    println!(
        "ryvosd idle resident memory:    p50 {idle:6.1} MiB  target <= 15 MiB: {}",
        verdict(idle <= 15.0)
    );
}

/// Where the binaries are.
struct Binaries {
    dir: PathBuf,
}

impl Binaries {
    fn find() -> Binaries {
        let dir = match std::env::var_os("RYVOS_BENCH_BIN") {
            Some(dir) => PathBuf::from(dir),
            None => Path::new(env!("CARGO_BIN_EXE_ryvos"))
                .parent()
                .expect("the binaries' directory")
                .to_owned(),
        };
        Binaries { dir }
    }

    fn ryvos(&self) -> PathBuf {
        self.dir.join("ryvos")
    }

    fn ryvosd(&self) -> PathBuf {
        self.dir.join("ryvosd")
    }
}

/// A home whose config points at `server`, and a workspace of [`READS`] files.
struct Home {
    home: tempfile::TempDir,
    workspace: tempfile::TempDir,
}

impl Home {
    fn new(server: &ScriptedModelServer) -> Home {
        let home = tempfile::tempdir().expect("a home");
        let workspace = tempfile::tempdir().expect("a workspace");
        let config = format!(
            "[model]\nbase_url = \"{}\"\nmodel = \"scripted\"\napi_key = \"\"\n",
            server.base_url()
        );
        std::fs::write(home.path().join("config.toml"), config).expect("the config");
        for i in 0..READS {
            let text = format!("file {i}: {}\n", "the quick brown fox jumps ".repeat(40));
            std::fs::write(workspace.path().join(format!("f{i}.txt")), text).expect("a file");
        }
        Home { home, workspace }
    }

    fn command(&self, program: &Path) -> Command {
        let mut command = Command::new(program);
        command
            .env("RYVOS_HOME", self.home.path())
            .arg("--config")
            .arg(self.home.path().join("config.toml"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        command
    }

    fn socket(&self) -> PathBuf {
        self.home.path().join("ryvosd.sock")
    }

    /// `ryvos run` in session `session`, to its end: what it used, and when it started.
    fn run(&self, binaries: &Binaries, session: &str) -> (Usage, Instant) {
        let mut command = self.command(&binaries.ryvos());
        command
            .args(["run", "--workspace"])
            .arg(self.workspace.path())
            .args(["--session", session, "read every file"]);
        let spawned = Spawned::start(&mut command);
        let started = spawned.started;
        let usage = spawned.wait();
        assert_eq!(usage.status, 0, "ryvos run failed");
        (usage, started)
    }
}

/// The replies of one run: [`READS`] reads, then an answer, each reporting the request's input
/// as a real server counts it.
fn script() -> Vec<Reply> {
    Reply::reads_then(READS, "f", "Every file is read.")
        .into_iter()
        .map(Reply::prompt_tokens_by_size)
        .collect()
}

/// The argument that makes this program a spawner: it starts the command after it, prints the
/// command's pid, waits for it, and prints what it used.
///
/// A process's peak RSS as `wait4` reports it includes the peak of the process that started it
/// (the kernel carries the high-water mark over `exec`), and this bench grows as its model
/// server keeps every request; a spawner is small, so what it reports is the command's own.
const SPAWN: &str = "--spawn";

/// What a process used, from `wait4`.
struct Usage {
    status: i32,
    cpu: Duration,
    peak_rss_kib: u64,
    wall: Duration,
}

/// A process started through a spawner.
struct Spawned {
    pid: u32,
    spawner: Child,
    started: Instant,
}

impl Spawned {
    fn start(command: &mut Command) -> Spawned {
        let mut through = Command::new(std::env::current_exe().expect("this bench's path"));
        through
            .arg(SPAWN)
            .arg(command.get_program())
            .args(command.get_args())
            .envs(
                command
                    .get_envs()
                    .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let started = Instant::now();
        let mut spawner = through.spawn().expect("the spawner starts");
        let mut line = String::new();
        let out = spawner.stdout.as_mut().expect("the spawner's stdout");
        let mut byte = [0u8; 1];
        // Read the pid line byte by byte, leaving the rest for `wait`.
        while std::io::Read::read(out, &mut byte).expect("the spawner's pid") == 1
            && byte[0] != b'\n'
        {
            line.push(byte[0] as char);
        }
        let pid = line.trim().parse().expect("a pid from the spawner");
        Spawned {
            pid,
            spawner,
            started,
        }
    }

    /// Waits for the process to end and reads what it used.
    fn wait(mut self) -> Usage {
        let mut report = String::new();
        let out = self.spawner.stdout.as_mut().expect("the spawner's stdout");
        std::io::Read::read_to_string(out, &mut report).expect("the spawner's report");
        let wall = self.started.elapsed();
        self.spawner.wait().expect("the spawner ends");
        let fields: Vec<u64> = report
            .split_whitespace()
            .map(|f| f.parse().expect("a number from the spawner"))
            .collect();
        Usage {
            status: fields[0] as i32,
            cpu: Duration::from_micros(fields[1]),
            peak_rss_kib: fields[2],
            wall,
        }
    }
}

/// The spawner: runs `command`, prints its pid, then `status cpu_us peak_rss_kib`.
// The child is waited for with `wait4`, which reads what it used too.
#[allow(clippy::zombie_processes)]
fn spawner(command: &[String]) {
    let child = Command::new(&command[0])
        .args(&command[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the command starts");
    let pid = child.id() as libc::pid_t;
    println!("{pid}");
    let mut status = 0;
    // SAFETY: `rusage` is plain data the kernel fills; the pid is our own child's.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4: {}", std::io::Error::last_os_error());
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    println!(
        "{code} {} {}",
        micros(usage.ru_utime) + micros(usage.ru_stime),
        usage.ru_maxrss
    );
}

/// CPU time `pid` has used so far: the sum of its threads' run time in
/// `/proc/<pid>/task/*/schedstat`, in nanoseconds (`/proc/<pid>/stat` counts in clock ticks,
/// 10 ms here, too coarse for a run's share). A thread that ended meanwhile is not in it; none
/// of the daemon's do during a run.
fn cpu_so_far(pid: u32) -> Duration {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the daemon's threads");
    let nanos: u64 = tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok())
        .filter_map(|line| line.split(' ').next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(nanos)
}

/// A daemon started on `home`, answering on its socket.
fn start_daemon(binaries: &Binaries, home: &Home) -> (Spawned, Duration) {
    let child = Spawned::start(&mut home.command(&binaries.ryvosd()));
    let started = child.started;
    let deadline = started + Duration::from_secs(10);
    while !status_answers(&home.socket()) {
        assert!(Instant::now() < deadline, "ryvosd did not answer in 10 s");
        std::thread::sleep(Duration::from_micros(200));
    }
    (child, started.elapsed())
}

/// Whether a daemon answers a `status` request on `socket`.
fn status_answers(socket: &Path) -> bool {
    let Ok(mut stream) = UnixStream::connect(socket) else {
        return false;
    };
    let asked = stream.write_all(b"{\"id\": 1, \"method\": \"status\"}\n");
    let mut line = String::new();
    asked.is_ok()
        && BufReader::new(stream)
            .read_line(&mut line)
            .is_ok_and(|n| n > 0)
}

/// Stops a daemon (SIGTERM) and reads what it used over its life.
fn stop_daemon(daemon: Spawned) -> Usage {
    // SAFETY: signalling a process this bench started.
    unsafe { libc::kill(daemon.pid as libc::pid_t, libc::SIGTERM) };
    daemon.wait()
}

/// One measured run.
struct Measured {
    wall: Duration,
    cpu: Duration,
    client_cpu: Duration,
    client_rss_kib: u64,
    daemon_rss_kib: Option<u64>,
    to_first_request: Duration,
    gap_p50: Duration,
    last_request_bytes: usize,
    /// The connections the run's requests came on.
    connections: usize,
}

/// Runs the workload once, after `earlier` runs in the same session, in-process or through a
/// fresh daemon.
async fn measure(binaries: &Binaries, daemon: bool, earlier: usize) -> Measured {
    let scripts = (0..=earlier).flat_map(|_| script());
    let server = ScriptedModelServer::start(scripts).await;
    let home = Home::new(&server);
    let daemon = daemon.then(|| start_daemon(binaries, &home).0);
    let session = "s_bench";
    for _ in 0..earlier {
        home.run(binaries, session);
    }
    let first = server.captured().len();
    let daemon_cpu_before = daemon.as_ref().map(|d| cpu_so_far(d.pid));
    let (client, started) = home.run(binaries, session);
    let daemon_cpu = daemon
        .as_ref()
        .zip(daemon_cpu_before)
        .map(|(d, before)| cpu_so_far(d.pid).saturating_sub(before));
    let daemon_rss_kib = daemon.map(|d| stop_daemon(d).peak_rss_kib);
    let captured = server.captured();
    let requests = &captured[first..];
    let gaps = gaps(&server, &captured, first);
    Measured {
        wall: client.wall,
        cpu: client.cpu + daemon_cpu.unwrap_or_default(),
        client_cpu: client.cpu,
        client_rss_kib: client.peak_rss_kib,
        daemon_rss_kib,
        to_first_request: requests[0].at.saturating_duration_since(started),
        gap_p50: gaps,
        last_request_bytes: requests.last().map_or(0, |r| r.bytes),
        connections: connections(requests),
    }
}

/// The median gap at `server` between an answer's end and the next request, from request
/// `first` of its `captured` requests on.
fn gaps(
    server: &ScriptedModelServer,
    captured: &[ryvos_testkit::Captured],
    first: usize,
) -> Duration {
    let gaps: Vec<f64> = (first + 1..captured.len())
        .filter_map(|i| {
            let answered = server.finished(i - 1)?;
            Some(
                captured[i]
                    .at
                    .saturating_duration_since(answered)
                    .as_secs_f64(),
            )
        })
        .collect();
    Duration::from_secs_f64(median(gaps))
}

/// How many connections `requests` came on.
fn connections(requests: &[ryvos_testkit::Captured]) -> usize {
    let peers: std::collections::HashSet<_> = requests.iter().map(|r| r.peer).collect();
    peers.len()
}

/// The argument that makes this program a replayer: it sends the requests in a file, one JSON
/// body per line, to a model server's URL, each as soon as the previous answer ended.
const REPLAY: &str = "--replay";

/// The gap per turn of a bare HTTP client: a real run's requests, replayed by a replayer.
async fn transport_floor(binaries: &Binaries) -> Duration {
    let recorded = ScriptedModelServer::start(script()).await;
    let home = Home::new(&recorded);
    home.run(binaries, "s_floor");
    let bodies: String = recorded
        .requests()
        .iter()
        .map(|body| format!("{body}\n"))
        .collect();
    let file = home.home.path().join("requests.jsonl");
    std::fs::write(&file, bodies).expect("the recorded requests");
    let replayed = ScriptedModelServer::start(script()).await;
    let mut replay = Command::new(std::env::current_exe().expect("this bench's path"));
    replay.arg(REPLAY).arg(replayed.base_url()).arg(&file);
    let usage = Spawned::start(&mut replay).wait();
    assert_eq!(usage.status, 0, "the replay failed");
    gaps(&replayed, &replayed.captured(), 0)
}

/// The replayer: posts each line of `requests` to `base_url`'s chat completions and reads the
/// answer to its end. It runs as a task on a multi-threaded runtime, as Ryvos's model calls do
/// (a future `block_on` runs itself is woken across threads at every read).
fn replayer(base_url: &str, requests: &Path) {
    let bodies = std::fs::read_to_string(requests).expect("the requests to replay");
    let url = format!("{base_url}/chat/completions");
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let replay = runtime.spawn(async move {
        let client = reqwest::Client::new();
        for body in bodies.lines() {
            let mut answer = client
                .post(&url)
                .header("content-type", "application/json")
                .body(body.to_owned())
                .send()
                .await
                .expect("the server answers");
            while answer.chunk().await.expect("the answer's body").is_some() {}
        }
    });
    runtime.block_on(replay).expect("the replay ends");
}

/// `ryvosd` start to its socket answering, and its resident memory once idle.
fn daemon_start(binaries: &Binaries) -> (Duration, u64) {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let server = runtime.block_on(ScriptedModelServer::start([]));
    let home = Home::new(&server);
    let (daemon, answered) = start_daemon(binaries, &home);
    std::thread::sleep(Duration::from_millis(500));
    let status = std::fs::read_to_string(format!("/proc/{}/status", daemon.pid)).unwrap();
    let rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    stop_daemon(daemon);
    (answered, rss_kib)
}

/// A figure's name, as `RYVOS_BENCH_ONLY` takes it.
fn figure_name(daemon: bool, earlier: usize) -> String {
    format!(
        "{}-{}",
        mode_name(daemon).trim(),
        workload_name(earlier).to_lowercase()
    )
}

fn mode_name(daemon: bool) -> &'static str {
    if daemon {
        "daemon    "
    } else {
        "in-process"
    }
}

fn workload_name(earlier: usize) -> &'static str {
    if earlier == 0 {
        "W1"
    } else {
        "W2"
    }
}

/// Prints a workload's medians, and returns its gap per turn in ms.
fn report(daemon: bool, earlier: usize, runs: &[Measured]) -> f64 {
    let ms = |f: &dyn Fn(&Measured) -> Duration| {
        median(runs.iter().map(|r| f(r).as_secs_f64() * 1e3).collect())
    };
    let mib = |kib: u64| kib as f64 / 1024.0;
    let client = median(runs.iter().map(|r| mib(r.client_rss_kib)).collect());
    let both = median(
        runs.iter()
            .map(|r| mib(r.client_rss_kib + r.daemon_rss_kib.unwrap_or(0)))
            .collect(),
    );
    let (mode, workload) = (mode_name(daemon), workload_name(earlier));
    let start = ms(&|r| r.to_first_request);
    let start_target = if daemon { 5.0 } else { 15.0 };
    let gap = ms(&|r| r.gap_p50);
    let cpu = ms(&|r| r.cpu);
    let client_cpu = ms(&|r| r.client_cpu);
    let bytes = median(runs.iter().map(|r| r.last_request_bytes as f64).collect());
    let connections = runs.iter().map(|r| r.connections).max().unwrap_or(0);
    println!(
        "{mode} {workload}: wall {:6.1} ms  cpu {cpu:6.1} ms (client {client_cpu:4.1}; target <= 24: {})  peak RSS client {client:5.1} MiB, with daemon {both:5.1} MiB (target <= 20: {})  start -> first request {start:6.2} ms (target <= {start_target}: {})  gap per turn p50 {gap:5.3} ms (target <= 0.25: {})  last request {bytes:7.0} B  HTTP connections {connections}",
        ms(&|r| r.wall),
        verdict(cpu <= 24.0),
        verdict(both <= 20.0),
        verdict(start <= start_target),
        verdict(gap <= 0.25),
    );
    gap
}

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "MISSED"
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
