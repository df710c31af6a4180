//! The console's costs, as a person or an operator feels them, from the real `ryvosd`:
//!
//!     cargo bench --bench console
//!
//! - the HTTP door's resident memory and CPU while idle, on against off (two fresh daemons);
//! - the page's weight: everything a browser loads, uncompressed (nothing is external);
//! - `GET /api/sessions` (the first 100, and a status filter over all) with 10,000 sessions
//!   stored, through a logged-in session.
//!
//! Each figure is printed beside its target and written to target/ryvos-bench/console.txt.

mod support;

use reqwest::header::{COOKIE, ORIGIN, SET_COOKIE};
use ryvos::protocol::records::SessionRecord;
use ryvos::protocol::{Console, NoParams};
use ryvos::testing::{Store, Write, WriteBatch};
use ryvos::SessionId;
use ryvos_client::Client;
use std::path::Path;
use std::time::{Duration, Instant};
use support::daemon::{start_daemon, stop_daemon};
use support::{machine, percentile, resident_kib, verdict};

/// Sessions stored for the listing's figure.
const SESSIONS: usize = 10_000;
/// Requests timed per listing figure.
const REQUESTS: usize = 30;
/// How long an idle daemon is watched for CPU.
const IDLE: Duration = Duration::from_secs(5);

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut report = format!("console: {}\n", machine());
    runtime.block_on(async {
        let (off, on) = (idle(false).await, idle(true).await);
        let grown = on.rss_kib.saturating_sub(off.rss_kib);
        report += &format!(
            "idle ryvosd, door off: {} KiB resident, {} ms CPU in {}s\n",
            off.rss_kib,
            off.cpu_ms,
            IDLE.as_secs()
        );
        report += &format!(
            "idle ryvosd, door on:  {} KiB resident (+{grown} KiB, target <= 2048: {}), {} ms CPU in {}s (target 0: {})\n",
            on.rss_kib,
            verdict(grown <= 2048),
            on.cpu_ms,
            IDLE.as_secs(),
            verdict(on.cpu_ms == 0)
        );
        report += &listing().await;
    });
    support::publish("console.txt", &report);
}

/// A home whose ryvosd serves the console (`door`) or not; the model is never asked.
fn home(door: bool) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let http = if door {
        "[http]\nlisten = \"127.0.0.1:0\"\n"
    } else {
        ""
    };
    let config = format!(
        "[model]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\napi_key = \"\"\n{http}"
    );
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    home
}

struct Idle {
    rss_kib: u64,
    cpu_ms: u64,
}

/// A fresh daemon left alone: its resident memory once settled, and its CPU over [`IDLE`].
async fn idle(door: bool) -> Idle {
    let home = home(door);
    let (child, _) = start_daemon(home.path()).await;
    let pid = child.id().unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = cpu_ms(pid);
    tokio::time::sleep(IDLE).await;
    let cpu_ms = cpu_ms(pid) - before;
    let rss_kib = resident_kib(pid);
    stop_daemon(home.path(), child).await;
    Idle { rss_kib, cpu_ms }
}

/// The CPU process `pid` has used (user and system), in ms.
fn cpu_ms(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command's name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf only reads a configuration value.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    ticks * 1000 / per_second
}

/// The page's weight and the sessions list's latency with [`SESSIONS`] sessions stored.
async fn listing() -> String {
    let home = home(true);
    seed(&home.path().join("ryvos.redb")).await;
    let (child, _) = start_daemon(home.path()).await;
    let mut client = Client::connect(&home.path().join("ryvosd.sock"))
        .await
        .unwrap();
    let login = client.call::<Console>(&NoParams {}).await.unwrap().unwrap();
    let (origin, code) = login.url.split_once("/#code=").unwrap();
    let http = reqwest::Client::new();
    let stranger = http.get(format!("{origin}/")).send().await.unwrap();
    let mut weight = stranger.bytes().await.unwrap().len();
    weight += get(&http, origin, "/login.js", "").await.len();
    let answer = http
        .post(format!("{origin}/api/login"))
        .header(ORIGIN, origin)
        .json(&serde_json::json!({ "code": code }))
        .send()
        .await
        .unwrap();
    let cookie = answer.headers()[SET_COOKIE].to_str().unwrap();
    let cookie = cookie.split(';').next().unwrap().to_owned();
    for page in ["/", "/console.js", "/costs.js", "/console.css"] {
        weight += get(&http, origin, page, &cookie).await.len();
    }
    let mut report = format!(
        "the page, all of it: {} KB uncompressed, 0 external requests (target <= 200 KB: {})\n",
        weight / 1000,
        verdict(weight <= 200_000)
    );
    for (what, path) in [
        ("the first 100", "/api/sessions?limit=100"),
        ("parked ones, over all", "/api/sessions?status=parked"),
    ] {
        let mut ms = Vec::new();
        for _ in 0..REQUESTS {
            let started = Instant::now();
            let body = get(&http, origin, path, &cookie).await;
            ms.push(started.elapsed().as_secs_f64() * 1e3);
            assert!(body.starts_with(b"["), "{}", String::from_utf8_lossy(&body));
        }
        ms.sort_by(f64::total_cmp);
        let p50 = percentile(&ms, 0.5);
        report += &format!(
            "GET /api/sessions, {SESSIONS} stored, {what}: p50 {p50:.1} ms, max {:.1} ms (target p50 <= 50 ms: {})\n",
            ms[ms.len() - 1],
            verdict(p50 <= 50.0)
        );
    }
    stop_daemon(home.path(), child).await;
    report
}

async fn get(http: &reqwest::Client, origin: &str, path: &str, cookie: &str) -> Vec<u8> {
    let mut request = http.get(format!("{origin}{path}"));
    if !cookie.is_empty() {
        request = request.header(COOKIE, cookie);
    }
    let answer = request.send().await.unwrap();
    answer.bytes().await.unwrap().to_vec()
}

/// Stores [`SESSIONS`] session records (no history: the listing reads records only).
async fn seed(path: &Path) {
    let store = Store::open(path, false).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    for chunk in (0..SESSIONS).collect::<Vec<_>>().chunks(1_000) {
        let batches: Vec<WriteBatch> = chunk
            .iter()
            .map(|n| {
                let id = SessionId::generate();
                let record: SessionRecord = serde_json::from_value(serde_json::json!({
                    "session_id": id,
                    "created_at_ms": now - *n as u64,
                    "updated_at_ms": now - *n as u64,
                    "message_count": 0,
                    "title": format!("session {n}"),
                    "workspace": "/srv/work",
                    "last_status": if n % 10 == 0 { "parked" } else { "completed" },
                }))
                .unwrap();
                WriteBatch::of(id, [Write::Session(record)])
            })
            .collect();
        store.write(&batches).await.unwrap();
    }
}
