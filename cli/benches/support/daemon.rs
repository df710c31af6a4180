//! The real `ryvosd` for the benches: started on a home, timed until its socket answers, and
//! stopped as a person would.

use ryvos::protocol::{NoParams, Shutdown, Status};
use ryvos_client::Client;
use std::time::{Duration, Instant};

/// `binary` on `home`, quiet, killed with its handle.
pub fn command(binary: &str, home: &std::path::Path) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(binary);
    c.env("RYVOS_HOME", home)
        .env("RUST_LOG", "error")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    c
}

/// Starts ryvosd; returns it and the milliseconds until its socket answered `status`.
pub async fn start_daemon(home: &std::path::Path) -> (tokio::process::Child, f64) {
    let socket = home.join("ryvosd.sock");
    let started = Instant::now();
    let child = command(env!("CARGO_BIN_EXE_ryvosd"), home).spawn().unwrap();
    loop {
        if let Ok(mut client) = Client::connect(&socket).await {
            if let Ok(Ok(_)) = client.call::<Status>(&NoParams {}).await {
                return (child, started.elapsed().as_secs_f64() * 1e3);
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "ryvosd never answered"
        );
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
}

/// Stops ryvosd with `shutdown` and waits for it to exit.
pub async fn stop_daemon(home: &std::path::Path, mut child: tokio::process::Child) {
    let mut client = Client::connect(&home.join("ryvosd.sock")).await.unwrap();
    client
        .call::<Shutdown>(&NoParams {})
        .await
        .unwrap()
        .unwrap();
    child.wait().await.unwrap();
}
