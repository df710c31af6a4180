//! ryvosd: the Ryvos daemon. Runs in the foreground (systemd-friendly); logs go to stderr,
//! filtered by RUST_LOG (default `info`).

mod daemon;

use clap::Parser;
use ryvos::config::Config;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

/// ryvosd: the Ryvos daemon. It keeps the sessions, runs and the store, and serves them to
/// `ryvos` (and other clients) on a private unix socket.
#[derive(Parser)]
#[command(name = "ryvosd", version)]
struct Args {
    /// The config file (default: $RYVOS_HOME/config.toml, else built-in defaults).
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colour only for a person at a terminal: the journal and files get plain text.
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
        .init();
    let config = match Config::load(args.config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ryvosd: {e}");
            return ExitCode::from(2);
        }
    };
    // A console door that cannot be opened safely is a config error too, and so is an A2A
    // door with no workspace to work in or no listener to be served on.
    if let Err(e) = doors_as_configured(&config) {
        eprintln!("ryvosd: {e}");
        return ExitCode::from(2);
    }
    // The daemon sends the model's API keys: their variables must be set in its environment,
    // and a unit that cannot work is refused at start (exit 2, not restarted), not at a run.
    if let Err(e) = ryvos::provider::keys_set(&config.model) {
        eprintln!("ryvosd: {e}");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ryvosd: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let served = runtime.block_on(daemon::serve(config, |socket| {
        eprintln!("ryvosd: listening on {}", socket.display());
        // Under systemd (Type=notify) the unit is started only now, so a `ryvos run` right
        // after `systemctl start` finds the socket; elsewhere this does nothing.
        if let Err(e) = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]) {
            tracing::warn!("telling the service manager that ryvosd is ready failed: {e}");
        }
    }));
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ryvosd: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Why the HTTP doors `config` asks for cannot be opened, if they cannot.
fn doors_as_configured(config: &Config) -> Result<(), String> {
    let console = config.http.door()?;
    if config.a2a.workspace()?.is_some() && console.is_none() {
        return Err("[a2a] is served on the console's listener: set [http] listen (for example                     \"127.0.0.1:7420\") too, or leave [a2a] workspace empty"
            .into());
    }
    Ok(())
}
