//! Admission through the daemon: past `max_in_flight_runs`, a client is refused at once, however
//! long the admitted runs' model calls take.

mod common;

use common::home::{Home, WAIT};
use futures_util::stream::{FuturesUnordered, StreamExt};
use ryvos_testkit::{Gate, Reply, ScriptedModelServer};
use std::time::Instant;

#[tokio::test(flavor = "multi_thread")]
async fn five_clients_at_once_past_a_limit_of_two_are_refused_while_the_admitted_runs_are_mid_call()
{
    // The admitted runs' model calls are held until the test opens the gate: every refusal
    // must come while both are still waiting on the model.
    let gate = Gate::new();
    let server = ScriptedModelServer::start([
        Reply::text(&["one"]).held(&gate),
        Reply::text(&["two"]).held(&gate),
    ])
    .await;
    let home = Home::new(&server, "[daemon]\nmax_in_flight_runs = 2");
    let daemon = home.daemon().await;

    let started = Instant::now();
    let mut clients: FuturesUnordered<_> = (0..5)
        .map(|i| {
            let prompt = format!("task {i}");
            let home = &home;
            async move {
                let (code, stdout, stderr) = home.ryvos(&["run", "--json", &prompt]).await;
                (code, stdout, stderr, started.elapsed())
            }
        })
        .collect();
    let refusals = async {
        let mut refused = Vec::new();
        while refused.len() < 3 {
            let (code, stdout, stderr, took) = clients.next().await.expect("five clients");
            assert_ne!(code, 0, "only two runs are admitted: {stdout}");
            assert!(stderr.contains("busy"), "refused as busy: {stderr}");
            refused.push(took);
        }
        refused
    };
    let refused = tokio::time::timeout(WAIT, refusals)
        .await
        .expect("the refusals come while the admitted runs wait on the model");
    // Both admitted runs are mid-call: their requests are at the server, held.
    server.wait_for_requests(2).await;
    eprintln!("refused after {refused:?}");

    gate.open();
    let rest = tokio::time::timeout(WAIT, async {
        let mut done = Vec::new();
        while let Some((code, _, stderr, _)) = clients.next().await {
            done.push((code, stderr));
        }
        done
    })
    .await
    .expect("the admitted runs finish once the model answers");
    assert_eq!(rest.len(), 2);
    for (code, stderr) in rest {
        assert_eq!(code, 0, "{stderr}");
    }
    drop(clients);
    home.shutdown(daemon).await;
}
