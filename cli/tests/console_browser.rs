//! The console in a real headless Chromium with a phone's window, against the real `ryvosd`:
//! a stranger sees only the login page; the link `ryvos console` prints logs in; a call waiting
//! for approval shows with its tool, approving it by keyboard lets the run finish, and the
//! session's events appear as they happen; a parked run is continued with a new budget, and
//! the month's cost is charted (a screenshot shows its bars).

mod common;

use common::browser::Browser;
use common::budget::{two_appends, PRICED};
use common::home::{Home, WAIT};
use fantoccini::key::Key;
use fantoccini::Locator;
use ryvos_testkit::{Reply, ScriptedModelServer};

#[tokio::test(flavor = "multi_thread")]
async fn a_person_logs_in_with_the_link_and_approves_a_call_by_keyboard() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let server = ScriptedModelServer::start(common::bash_proof_then_done()).await;
    // The default policy: bash asks.
    let home = Home::with_sections(&server, "", "", "[http]\nlisten = \"127.0.0.1:0\"\n");
    let daemon = home.daemon().await;
    let mut run = home.follow(&["run", "--json", "make the proof"]);
    let session = run
        .until(|e| (e["type"] == "ApprovalRequested").then(|| e["session_id"].clone()))
        .await;
    let session = session.as_str().unwrap().to_owned();
    let (code, link, err) = home.ryvos(&["console"]).await;
    assert_eq!(code, 0, "{err}");
    let link = link.trim();
    let origin = link.split("/#").next().unwrap();

    // A stranger: the login page, nothing of the run.
    browser.client.goto(origin).await.unwrap();
    let stranger = browser.text_with("main", "Log in").await;
    assert!(!stranger.contains(&session), "{stranger}");
    assert!(!stranger.contains("bash"), "{stranger}");

    // The link logs in, and the code leaves the address bar.
    browser.client.goto(link).await.unwrap();
    let waiting = browser.text_with("#approvals li", "bash").await;
    assert!(waiting.contains("echo approved > proof.txt"), "{waiting}");
    let address = browser.client.current_url().await.unwrap();
    assert!(!address.as_str().contains("code"), "{address}");
    browser.text_with("#sessions tr", "make the proof").await;
    assert!(!home.workspace.path().join("proof.txt").exists());

    // The session opened: its stored prompt, and its events from now on.
    let open = browser.find(Locator::Css("#sessions button.open")).await;
    open.click().await.unwrap();
    browser.text_with("#messages li", "make the proof").await;
    browser.text_with("#live-state", "Following").await;

    // Approved by keyboard: the button takes Enter.
    let approve = browser
        .find(Locator::Css("#approvals li button.approve"))
        .await;
    approve.send_keys(&Key::Enter.to_string()).await.unwrap();
    let ended = tokio::time::timeout(WAIT, run.rest()).await.unwrap();
    assert_eq!(ended.code, Some(0), "{}", ended.stderr);
    assert!(home.workspace.path().join("proof.txt").exists());
    // Seen as it happened: the answer, the tool, the end.
    browser
        .text_with("#live li", "approved by the console")
        .await;
    browser.text_with("#live li", "tool bash").await;
    browser.text_with("#live li", "run completed").await;
    browser.text_with("#live-text", "Done.").await;
    browser
        .text_with("#no-approvals", "No call is waiting")
        .await;
    browser.text_with("#sessions tr", "completed").await;
    browser.close().await;
    home.shutdown(daemon).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_parked_run_is_continued_from_the_console_with_a_new_budget() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let server = ScriptedModelServer::start(two_appends()).await;
    // Each call costs 70 cents, the run may spend 50: it parks after its first turn.
    let config = format!("{PRICED}[http]\nlisten = \"127.0.0.1:0\"\n");
    let home = Home::new(&server, &config);
    let daemon = home.daemon().await;
    let mut run = home.follow(&["run", "--json", "write", "the", "log"]);
    let run_id = run
        .until(|e| (e["type"] == "RunParked").then(|| e["run_id"].clone()))
        .await;
    let run_id = run_id.as_str().unwrap().to_owned();
    let (code, link, err) = home.ryvos(&["console"]).await;
    assert_eq!(code, 0, "{err}");
    browser.client.goto(link.trim()).await.unwrap();
    let parked = browser.text_with("#parked li", &run_id).await;
    assert!(parked.contains("budget_run"), "{parked}");
    let budget = browser.find(Locator::Css("#parked li input")).await;
    budget.send_keys("500").await.unwrap();
    let go = browser
        .find(Locator::Css("#parked li button.approve"))
        .await;
    go.click().await.unwrap();
    // The attached client waited through the park, and sees the same run end.
    let ended = tokio::time::timeout(WAIT, run.rest()).await.unwrap();
    assert_eq!(ended.code, Some(0), "{}", ended.stderr);
    let end = ended.events.last().unwrap();
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(end["run_id"], run_id.as_str());
    browser.text_with("#no-parked", "No run is parked").await;

    // The month's cost, charted: the model in the legend, its bars drawn in its colour.
    browser.text_with("#cost-legend li", "scripted").await;
    browser.text_with("#cost-total", "50.00¢ a run").await;
    let chart = browser.find(Locator::Css("svg#cost-chart")).await;
    let drawn = coloured_pixels(&chart.screenshot().await.unwrap(), [0x3b, 0x82, 0xf6]);
    assert!(
        drawn > 20,
        "the chart's bars are drawn: {drawn} pixels in the model's colour"
    );
    browser.close().await;
    home.shutdown(daemon).await;
}

/// How many pixels of the PNG `image` are (nearly) `rgb`.
fn coloured_pixels(image: &[u8], rgb: [u8; 3]) -> usize {
    let mut reader = png::Decoder::new(std::io::Cursor::new(image))
        .read_info()
        .unwrap();
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let frame = reader.next_frame(&mut pixels).unwrap();
    let step = frame.color_type.samples();
    pixels[..frame.buffer_size()]
        .chunks(step)
        .filter(|p| p.len() >= 3 && (0..3).all(|i| p[i].abs_diff(rgb[i]) <= 8))
        .count()
}

#[tokio::test(flavor = "multi_thread")]
async fn after_a_kill_of_the_daemon_the_open_page_shows_the_waiting_call_again() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let server = ScriptedModelServer::start([Reply::tool_calls(&[(
        "b1",
        "bash",
        r#"{"command": "echo approved > proof.txt"}"#,
    )])])
    .await;
    // A fixed port, as a real console has: the page goes on at the same address.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let http = format!("[http]\nlisten = \"127.0.0.1:{port}\"\n");
    let home = Home::with_sections(&server, "", "", &http);
    let mut daemon = home.daemon().await;
    let mut run = home.follow(&["run", "--json", "make the proof"]);
    let request = run
        .until(|e| (e["type"] == "ApprovalRequested").then(|| e["request_id"].clone()))
        .await;
    let (code, link, err) = home.ryvos(&["console"]).await;
    assert_eq!(code, 0, "{err}");
    browser.client.goto(link.trim()).await.unwrap();
    browser.text_with("#approvals li", "bash").await;

    daemon.start_kill().unwrap(); // SIGKILL
    daemon.wait().await.unwrap();
    run.rest().await;
    // The page says it lost the daemon, and goes on asking.
    browser.text_with("#problem", "fetch").await;
    let daemon = home.daemon().await;
    // Never reloaded, and its session kept: its next read succeeds and finds the request.
    let problem = browser.find(Locator::Css("#problem")).await;
    let cleared = tokio::time::timeout(WAIT, async {
        while !problem.text().await.unwrap().is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    });
    assert!(cleared.await.is_ok(), "the page reads the restarted daemon");
    let shown = browser.text_with("#approvals li", "echo approved").await;
    assert!(shown.contains("bash"), "{shown}");
    let (_, listed, _) = home.ryvos(&["approvals", "--json"]).await;
    assert!(listed.contains(request.as_str().unwrap()), "{listed}");
    browser.close().await;
    home.shutdown(daemon).await;
}

/// A session rewound from the console, by keyboard, a turn at a time: the page asks once more
/// before it acts, then the file is as it was and the page says what changed; the rewind is
/// undone the same way, and a fork made.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_is_rewound_and_forked_from_the_console() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let server = ScriptedModelServer::start([
        Reply::tool_calls(&[("w1", "write", r#"{"path": "a.txt", "content": "one"}"#)]),
        Reply::text(&["wrote one"]),
        Reply::tool_calls(&[(
            "e1",
            "edit",
            r#"{"path": "a.txt", "old_string": "one", "new_string": "two"}"#,
        )]),
        Reply::text(&["made it two"]),
    ])
    .await;
    let home = Home::new(&server, "[http]\nlisten = \"127.0.0.1:0\"\n");
    let daemon = home.daemon().await;
    let (code, _, err) = home.ryvos(&["run", "-q", "write one"]).await;
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = home
        .ryvos(&["run", "-q", "--continue", "make it two"])
        .await;
    assert_eq!(code, 0, "{err}");
    let file = home.workspace.path().join("a.txt");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "two");
    let (code, link, err) = home.ryvos(&["console"]).await;
    assert_eq!(code, 0, "{err}");
    browser.client.goto(link.trim()).await.unwrap();
    browser.text_with("#sessions tr", "write one").await;
    let open = browser.find(Locator::Css("#sessions button.open")).await;
    open.click().await.unwrap();
    browser.text_with("#messages li.turn", "Turn 2").await;
    let rewind = browser
        .client
        .find(Locator::XPath("//button[contains(., 'Rewind to turn 2')]"))
        .await
        .unwrap();
    // The first press asks; nothing has changed yet.
    rewind.send_keys(&Key::Enter.to_string()).await.unwrap();
    browser.text_with("button.rewind", "Confirm").await;
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "two");
    rewind.send_keys(&Key::Enter.to_string()).await.unwrap();
    let said = browser
        .text_with("#rewind-state", "Went back to turn 2")
        .await;
    assert!(said.contains("1 written"), "{said}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "one");

    // Undone: back to "two".
    let undo = browser.find(Locator::Css("#undo-rewind")).await;
    undo.click().await.unwrap();
    undo.click().await.unwrap();
    browser
        .text_with("#rewind-state", "before the rewind to turn 2")
        .await;
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "two");

    // A fork at turn 1, beside the workspace: the copy holds "one".
    browser.text_with("#messages li.turn", "Turn 1").await;
    let fork = browser
        .client
        .find(Locator::XPath("//button[contains(., 'Fork at turn 1')]"))
        .await
        .unwrap();
    fork.click().await.unwrap();
    let said = browser.text_with("#rewind-state", "Forked at turn 1").await;
    let dir = said
        .split("working in ")
        .nth(1)
        .and_then(|rest| rest.split(" (").next())
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(std::path::Path::new(dir).join("a.txt")).unwrap(),
        "one"
    );
    std::fs::remove_dir_all(dir).unwrap();
    browser.close().await;
    home.shutdown(daemon).await;
}
