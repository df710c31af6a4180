//! ryvosd: the Ryvos daemon. Runs in the foreground (systemd-friendly); logs go to stderr,
//! filtered by RUST_LOG (default `info`).

use clap::Parser;
use ryvos::config::Config;
use std::path::PathBuf;
use std::process::ExitCode;

/// Run the Ryvos daemon: sessions, runs and the store, served on a private unix socket.
#[derive(Parser)]
#[command(version, about)]
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
        .init();
    let config = match Config::load(args.config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ryvosd: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ryvosd: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let served = runtime.block_on(ryvos::daemon::serve(config, |socket| {
        eprintln!("ryvosd: listening on {}", socket.display());
    }));
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ryvosd: {e}");
            ExitCode::FAILURE
        }
    }
}
