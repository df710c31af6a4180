//! A daemon killed while a program it started was between fork and exec leaves its locks held
//! for a moment by that program. A new `ryvosd` waits for them (with a bound, saying so) instead
//! of refusing to start; a lock whose holder is alive is still refused at once.

mod common;

use common::home::{Home, WAIT};
use ryvos_testkit::{Reply, ScriptedModelServer};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::process::Stdio;
use tokio::io::{AsyncBufReadExt, BufReader};

/// A process id that no longer runs.
fn dead_pid() -> u32 {
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    pid
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_daemon_waits_for_the_locks_a_stopped_one_left_held_and_says_so() {
    let server = ScriptedModelServer::start([Reply::text(&["hello"])]).await;
    let home = Home::new(&server, "");
    // The stopped daemon's home lock, still held (here by the test, as its program would).
    let mut home_lock = std::fs::File::create(home.path().join("ryvosd.lock")).unwrap();
    write!(home_lock, "{}", dead_pid()).unwrap();
    // SAFETY: flock on a descriptor this test owns.
    assert_eq!(
        unsafe { libc::flock(home_lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
        0
    );
    // And its database, still locked.
    let database = ryvos::testing::Store::open(&home.path().join("ryvos.redb"), true).unwrap();

    let mut daemon = home
        .command(env!("CARGO_BIN_EXE_ryvosd"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = BufReader::new(daemon.stderr.take().unwrap()).lines();
    let mut home_lock = Some(home_lock);
    let mut database = Some(database);
    let started = async {
        while let Some(line) = log.next_line().await.unwrap() {
            if line.contains("the lock of a ryvosd that stopped is still held") {
                home_lock.take(); // closing it releases the lock
            } else if line.contains("is locked by another process") {
                database.take();
            } else if line.contains("listening on") {
                return;
            }
        }
        panic!("ryvosd exited before listening");
    };
    tokio::time::timeout(WAIT, started)
        .await
        .expect("ryvosd started once the locks were released");
    assert!(
        home_lock.is_none() && database.is_none(),
        "it said it waited for both"
    );
    tokio::spawn(async move { while let Ok(Some(_)) = log.next_line().await {} });

    let (code, stdout, stderr) = home.ryvos(&["run", "say", "hello"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("hello"), "{stdout}");
    home.shutdown(daemon).await;
}
