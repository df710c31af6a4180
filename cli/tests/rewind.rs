//! Rewind and fork through the real binaries: a scripted session whose turns change the
//! workspace with the file tools and with shell commands (create, `sed -i`, delete, rename,
//! chmod, symlinks, directories), then taken back to its run boundaries and to random turns,
//! each time compared with the tree the test itself recorded at that point; the next run's
//! request holds the window of that point; a fork diverges without touching the original;
//! a rewind killed in the middle and run again ends where it would have.

mod common;

use common::backend::Backend;
use common::home::{Home, WAIT};
use rand::{Rng, SeedableRng};
use ryvos_testkit::{tree_of, Reply, Router, ScriptedModelServer, Tree};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

fn bash(id: &str, command: &str) -> (String, String, String) {
    let arguments = json!({ "command": command }).to_string();
    (id.to_owned(), "bash".to_owned(), arguments)
}

/// Run `k`'s replies: five turns of calls that change the workspace every way, then an
/// answer.
fn run_script(k: usize) -> Vec<Reply> {
    let write = json!({ "path": format!("k{k}.txt"), "content": format!("alpha {k}\nbeta\n") });
    let edit = json!({ "path": format!("k{k}.txt"), "old_string": "beta", "new_string": "gamma" });
    let turns: Vec<Vec<(String, String, String)>> = vec![
        vec![
            (format!("w{k}"), "write".into(), write.to_string()),
            bash(
                &format!("a{k}"),
                &format!("mkdir -p dir{k}/sub && echo inner > dir{k}/sub/inner.txt && echo gone > tmp{k}.txt"),
            ),
        ],
        vec![
            (format!("e{k}"), "edit".into(), edit.to_string()),
            bash(&format!("b{k}"), &format!("rm tmp{k}.txt")),
        ],
        vec![bash(
            &format!("c{k}"),
            &format!("sed -i 's/alpha/delta/' k{k}.txt && chmod 755 k{k}.txt && ln -s k{k}.txt link{k}"),
        )],
        vec![bash(
            &format!("d{k}"),
            &format!("mv dir{k} moved{k} && mv k{k}.txt renamed{k}.txt && chmod 700 moved{k}/sub"),
        )],
        vec![bash(
            &format!("f{k}"),
            &format!("rm -rf moved{k}/sub && printf 'x\\0y' > bin{k}.dat && ln -sfn renamed{k}.txt link{k}"),
        )],
    ];
    let mut replies: Vec<Reply> = turns
        .iter()
        .map(|calls| {
            let calls: Vec<(&str, &str, &str)> = calls
                .iter()
                .map(|(i, n, a)| (i.as_str(), n.as_str(), a.as_str()))
                .collect();
            Reply::tool_calls(&calls)
        })
        .collect();
    replies.push(Reply::text(&[&format!("done {k}")]));
    replies
}

const RUNS: usize = 4;
/// Turns per run: five with calls, then the answer.
const TURNS: usize = 6;

/// A model server that records the workspace's tree as each request arrives (the state the
/// turn before left), and the home it answers.
async fn recording_home(
    script: Vec<Reply>,
    backend: Backend,
) -> (ScriptedModelServer, Home, Arc<Mutex<Vec<Tree>>>) {
    let workspace: Arc<Mutex<Option<PathBuf>>> = Arc::default();
    let trees: Arc<Mutex<Vec<Tree>>> = Arc::default();
    let (seen, recorded) = (workspace.clone(), trees.clone());
    let router: Router = Arc::new(move |_request: &Value| {
        if let Some(root) = seen.lock().unwrap().clone() {
            recorded.lock().unwrap().push(tree_of(&root));
        }
        None
    });
    let server = ScriptedModelServer::start_routed(script, Some(router)).await;
    // Parallel calls of one turn touch different files; sequential keeps each turn's
    // changes in the script's order.
    let home = Home::new(&server, "[agent]\nparallel_tools = false\n").on(backend);
    *workspace.lock().unwrap() = Some(home.workspace.path().canonicalize().unwrap());
    (server, home, trees)
}

/// What the person changes between runs: the run-start snapshot must see it.
fn person_edits(workspace: &Path, k: usize) {
    std::fs::write(
        workspace.join(format!("person{k}.txt")),
        format!("by hand {k}\n"),
    )
    .unwrap();
    if k > 0 {
        std::fs::write(
            workspace.join(format!("bin{}.dat", k - 1)),
            b"edited by hand",
        )
        .unwrap();
    }
}

async fn history(home: &Home, session: &str) -> Value {
    let (code, stdout, stderr) = home.ryvos(&["history", session, "--json"]).await;
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_str(&stdout).unwrap()
}

on_both_backends! {
    /// The session's runs, then a rewind to each of its points and to random ones (200 in all),
    /// each compared with the tree recorded then; the next run goes on from the window of the
    /// last point.
    async fn rewinds_bring_back_the_files_of_every_point_and_its_window(backend: Backend) {
        let mut script: Vec<Reply> = (0..RUNS).flat_map(run_script).collect();
        script.push(Reply::text(&["after the rewind"]));
        let (server, home, trees) = recording_home(script, backend).await;
        let workspace = home.workspace.path().canonicalize().unwrap();
        let session = "rewind-e2e";
        for k in 0..RUNS {
            person_edits(&workspace, k);
            let prompt = format!("run {k}");
            let (code, _, stderr) = home
                .ryvos(&["run", "--session", session, "-q", &prompt])
                .await;
            assert_eq!(code, 0, "run {k}: {stderr}");
        }
        let recorded = trees.lock().unwrap().clone();
        assert_eq!(recorded.len(), RUNS * TURNS, "one tree per request");
        let h = history(&home, session).await;
        let turns = h["turns"].as_array().unwrap();
        assert_eq!(turns.len(), RUNS * TURNS, "{turns:?}");
        assert!(
            turns.iter().all(|t| t.get("not_rewindable").is_none()),
            "{turns:?}"
        );
        let runs: Vec<String> = (h["runs"].as_array().unwrap().iter())
            .map(|r| r["run_id"].as_str().unwrap().to_owned())
            .collect();
        // Every point, with the tree it must bring back: after turn i of run k, the request
        // after it saw the files (the answer's turn changed none); before run k, its first.
        let mut points: Vec<(Vec<String>, &Tree)> = Vec::new();
        for (k, run) in runs.iter().enumerate() {
            points.push((vec!["--run".into(), run.clone()], &recorded[k * TURNS]));
            for i in 1..=TURNS {
                let turn = (k * TURNS + i).to_string();
                let request = k * TURNS + i.min(TURNS - 1);
                points.push((vec!["--turn".into(), turn], &recorded[request]));
            }
        }
        let daemon = home.daemon().await;
        let mut rng = rand::rngs::StdRng::seed_from_u64(54);
        let mut order: Vec<usize> = (0..points.len()).collect();
        while order.len() < 200 {
            order.push(rng.random_range(0..points.len()));
        }
        let mut matched = 0;
        for (n, &p) in order.iter().enumerate() {
            let (to, expected) = &points[p];
            let mut args = vec!["rewind", session];
            args.extend(to.iter().map(String::as_str));
            let (code, stdout, stderr) = home.ryvos(&args).await;
            assert_eq!(code, 0, "sample {n} ({to:?}): {stderr}");
            let now = tree_of(&workspace);
            assert!(
                now == **expected,
                "sample {n}: rewinding {to:?} left {now:#?}\nwhere {expected:#?} was recorded\n{stdout}"
            );
            matched += 1;
        }
        assert_eq!(matched, 200);
        // Back to turn 9 (run 1's third turn): the next run goes on from there.
        let (code, _, stderr) = home.ryvos(&["rewind", session, "--turn", "9"]).await;
        assert_eq!(code, 0, "{stderr}");
        let (code, stdout, stderr) = home
            .ryvos(&["run", "--session", session, "-q", "go on"])
            .await;
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(stdout.trim(), "after the rewind");
        home.shutdown(daemon).await;
        let requests = server.requests();
        let conversation = |request: &Value| -> Vec<Value> {
            (request["messages"].as_array().unwrap().iter())
                .filter(|m| m["role"] != "system")
                .cloned()
                .collect()
        };
        // The request after turn 9 held exactly the window of turn 9.
        let mut expected = conversation(&requests[TURNS + 3]);
        expected.push(json!({ "role": "user", "content": "go on" }));
        let last = conversation(requests.last().unwrap());
        assert_eq!(
            last, expected,
            "the next run's request holds the window of turn 9 and the prompt"
        );
        server.assert_no_orphans();
    }
}

on_both_backends! {
    /// Undo goes back to before the last rewind, files and window; undoing again goes forward.
    async fn an_undo_goes_back_and_an_undo_of_it_forward(backend: Backend) {
        let mut script: Vec<Reply> = run_script(0);
        script.push(Reply::text(&["after the undo"]));
        let (server, home, _) = recording_home(script, backend).await;
        let workspace = home.workspace.path().canonicalize().unwrap();
        let (code, _, stderr) = home.ryvos(&["run", "--session", "u", "-q", "first"]).await;
        assert_eq!(code, 0, "{stderr}");
        let at_end = tree_of(&workspace);
        let (code, stdout, stderr) = home.ryvos(&["rewind", "u", "--turn", "2"]).await;
        assert_eq!(code, 0, "{stderr}");
        assert!(stdout.contains("went back to turn 2"), "{stdout}");
        let at_two = tree_of(&workspace);
        assert_ne!(at_two, at_end);
        let (code, stdout, stderr) = home.ryvos(&["rewind", "u", "--undo"]).await;
        assert_eq!(code, 0, "{stderr}");
        assert!(stdout.contains("before the rewind to turn 2"), "{stdout}");
        assert_eq!(tree_of(&workspace), at_end);
        let (code, _, stderr) = home.ryvos(&["rewind", "u", "--undo"]).await;
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(tree_of(&workspace), at_two);
        // Nothing to undo in a session never rewound; no such turn; both say so.
        let (code, _, stderr) = home.ryvos(&["rewind", "u", "--turn", "99"]).await;
        assert_eq!(code, 1);
        assert!(
            stderr.contains("there is no turn 99: the session has 6"),
            "{stderr}"
        );
        let (code, _, stderr) = home.ryvos(&["run", "--session", "v", "-q", "other"]).await;
        assert_eq!(code, 0, "{stderr}");
        let (code, _, stderr) = home.ryvos(&["rewind", "v", "--undo"]).await;
        assert_eq!(code, 1);
        assert!(stderr.contains("was never rewound"), "{stderr}");
        drop(server);
    }
}

on_both_backends! {
    /// A fork works in a copy of the files as they were at its point; the two sessions then
    /// change their own files only.
    async fn a_fork_and_its_original_diverge_without_touching_each_other(backend: Backend) {
        let mut script: Vec<Reply> = run_script(0);
        script.push(Reply::tool_calls(&[(
            "fork1",
            "bash",
            &json!({ "command": "echo fork > only-in-fork.txt && rm renamed0.txt" }).to_string(),
        )]));
        script.push(Reply::text(&["fork done"]));
        script.push(Reply::tool_calls(&[(
            "orig1",
            "bash",
            &json!({ "command": "echo original > only-in-original.txt" }).to_string(),
        )]));
        script.push(Reply::text(&["original done"]));
        let (_server, home, trees) = recording_home(script, backend).await;
        let workspace = home.workspace.path().canonicalize().unwrap();
        let (code, _, stderr) = home.ryvos(&["run", "--session", "f", "-q", "first"]).await;
        assert_eq!(code, 0, "{stderr}");
        let at_four = trees.lock().unwrap()[4].clone();
        let original_before = tree_of(&workspace);
        let into = tempfile::tempdir().unwrap();
        let fork_dir = into.path().join("fork");
        let dir = fork_dir.to_str().unwrap();
        let (code, stdout, stderr) = home
            .ryvos(&["fork", "f", "--turn", "4", "--workspace", dir, "--json"])
            .await;
        assert_eq!(code, 0, "{stderr}");
        let forked: Value = serde_json::from_str(&stdout).unwrap();
        let fork = forked["session_id"].as_str().unwrap().to_owned();
        assert_eq!(
            tree_of(&fork_dir),
            at_four,
            "the fork holds the files of turn 4"
        );
        assert_eq!(
            tree_of(&workspace),
            original_before,
            "the original is untouched"
        );
        let (code, _, stderr) = home
            .ryvos(&[
                "run",
                "--session",
                &fork,
                "--workspace",
                dir,
                "-q",
                "in the fork",
            ])
            .await;
        assert_eq!(code, 0, "{stderr}");
        let (code, _, stderr) = home
            .ryvos(&["run", "--session", "f", "-q", "in the original"])
            .await;
        assert_eq!(code, 0, "{stderr}");
        let (fork_tree, original) = (tree_of(&fork_dir), tree_of(&workspace));
        assert!(fork_tree.contains_key("only-in-fork.txt") && !fork_tree.contains_key("renamed0.txt"));
        assert!(!fork_tree.contains_key("only-in-original.txt"));
        assert!(original.contains_key("only-in-original.txt") && original.contains_key("renamed0.txt"));
        assert!(!original.contains_key("only-in-fork.txt"));
        // The fork's conversation is the original's up to turn 4.
        let h = history(&home, &fork).await;
        let first = h["messages"][0]["message"]["content"].as_str().unwrap();
        assert_eq!(first, "first");
    }
}

/// How many times a rewind is killed.
const KILLS: u32 = 10;

/// A rewind killed at any moment, then asked again, ends in the same files and window as one
/// never killed; while it is cut off, runs are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewind_killed_in_the_middle_converges_when_run_again() {
    // A first turn that writes many files, so that bringing them back takes a while.
    let many = "mkdir many && head -c 2M /dev/urandom | split -a 3 -b 1024 - many/f";
    let script = vec![
        Reply::tool_calls(&[(
            "m1",
            "bash",
            &json!({ "command": "echo base > base.txt" }).to_string(),
        )]),
        Reply::tool_calls(&[("m2", "bash", &json!({ "command": many }).to_string())]),
        Reply::text(&["made"]),
    ];
    let (_server, home, trees) = recording_home(script, Backend::Redb).await;
    let workspace = home.workspace.path().canonicalize().unwrap();
    let (code, _, stderr) = home.ryvos(&["run", "--session", "k", "-q", "make"]).await;
    assert_eq!(code, 0, "{stderr}");
    let at_one = trees.lock().unwrap()[1].clone();
    let at_end = tree_of(&workspace);
    // How long a whole rewind to the end takes, to aim the kills across it.
    let (code, _, stderr) = home.ryvos(&["rewind", "k", "--turn", "1"]).await;
    assert_eq!(code, 0, "{stderr}");
    let started = std::time::Instant::now();
    let (code, _, stderr) = home.ryvos(&["rewind", "k", "--turn", "3"]).await;
    assert_eq!(code, 0, "{stderr}");
    let whole = started.elapsed();
    let mut cut_off = 0;
    for attempt in 0..KILLS {
        // Back to turn 1 (not killed), then a rewind to the end, which brings back the many
        // files, killed a little later each time.
        let (code, _, stderr) = home.ryvos(&["rewind", "k", "--turn", "1"]).await;
        assert_eq!(code, 0, "attempt {attempt}: {stderr}");
        assert_eq!(tree_of(&workspace), at_one);
        let mut child = home
            .command(env!("CARGO_BIN_EXE_ryvos"))
            .args(["rewind", "k", "--turn", "3"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        tokio::time::sleep(whole * (attempt + 2) / (KILLS + 2)).await;
        // It may have ended by itself before the kill: either way it is waited for below.
        child.start_kill().ok();
        tokio::time::timeout(WAIT, child.wait())
            .await
            .unwrap()
            .unwrap();
        let h = history(&home, "k").await;
        if h["session"].get("rewinding").is_some() {
            cut_off += 1;
            let (code, _, stderr) = home
                .ryvos(&["run", "--session", "k", "-q", "refused"])
                .await;
            assert_ne!(code, 0);
            assert!(stderr.contains("was cut off"), "{stderr}");
        }
        let (code, _, stderr) = home.ryvos(&["rewind", "k", "--turn", "3"]).await;
        assert_eq!(code, 0, "attempt {attempt}: {stderr}");
        assert_eq!(
            tree_of(&workspace),
            at_end,
            "attempt {attempt}: the same end state"
        );
        let h = history(&home, "k").await;
        assert!(h["session"].get("rewinding").is_none());
        let window = h["compaction"]["first_kept_seq"].as_u64().unwrap();
        let in_window: Vec<_> = (h["messages"].as_array().unwrap().iter())
            .filter(|m| m["seq"].as_u64().unwrap() >= window)
            .collect();
        // The prompt, two calls with their results, the answer.
        assert_eq!(in_window.len(), 6, "{in_window:#?}");
    }
    eprintln!("{cut_off} of {KILLS} kills landed in the middle of a rewind ({whole:?} whole)");
    assert!(cut_off > 0, "no kill landed between the intent and the end");
}

/// A rewind says which calls since the point it cannot undo: here a command, where the
/// sandbox lets commands write outside the workspace (this one did not; any could have).
#[tokio::test(flavor = "multi_thread")]
async fn a_rewind_names_the_calls_whose_effects_it_cannot_undo() {
    let outside = tempfile::tempdir().unwrap();
    let dir = outside.path().canonicalize().unwrap();
    let server = ScriptedModelServer::start([
        Reply::tool_calls(&[("b1", "bash", r#"{"command": "echo in > inside.txt"}"#)]),
        Reply::text(&["written"]),
    ])
    .await;
    let sandbox = format!(
        "[security.sandbox]\nwritable_paths = [\"{}\"]\n",
        dir.display()
    );
    let home = Home::new(&server, &sandbox);
    let (code, _, stderr) = home.ryvos(&["run", "--session", "o", "-q", "write"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(home.workspace.path().join("inside.txt").exists());
    let h = history(&home, "o").await;
    let run = h["runs"][0]["run_id"].as_str().unwrap().to_owned();
    let (code, stdout, stderr) = home.ryvos(&["rewind", "o", "--run", &run]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(!home.workspace.path().join("inside.txt").exists());
    assert!(stdout.contains("not undone"), "{stdout}");
    assert!(
        stdout.contains("bash (b1): a command, which could reach writable_paths"),
        "{stdout}"
    );
}
