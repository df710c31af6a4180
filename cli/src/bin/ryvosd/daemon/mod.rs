//! `ryvosd`: the runtime behind a private unix socket.
//!
//! One daemon per `RYVOS_HOME`, guarded by a lock file, so a second one refuses to start
//! instead of fighting over the database. The socket is mode 0600 inside the home directory,
//! which is made 0700, and every peer's uid is checked. Connections are bounded; runs in flight
//! are bounded by the engine ("busy" past it). SIGTERM, SIGINT and the `shutdown` request stop
//! it gracefully: runs in flight are paused (status `interrupted`) once their turns are durable.

mod approvals;
mod attended;
mod between_runs;
mod connection;
mod console;
mod file_answers;
mod lock;
mod month_parks;
mod notify;
mod peer;
mod queue_methods;
mod queue_worker;
mod reads;
mod reply;
mod run_request;
mod status;
mod streaming;
mod tokens;
mod watching;
mod webhook;

use lock::HomeLock;
use ryvos::config::Config;
use ryvos::{Runtime, RuntimeError};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use tokio::net::UnixListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Connections served at once; the next waits to be accepted.
const MAX_CONNECTIONS: usize = 256;

/// Why the daemon could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("{0}")]
    Setup(String),
    #[error(transparent)]
    Config(#[from] ryvos::config::ConfigError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

/// What every connection handler shares.
pub(crate) struct Shared {
    pub runtime: Runtime,
    pub config: Config,
    /// The file `config` was read from, resolved once (symlinks too), to compare the file a
    /// run names with.
    pub config_file: Option<PathBuf>,
    pub socket: PathBuf,
    pub started: Instant,
    /// Cancelled to stop the daemon.
    pub shutdown: CancellationToken,
    /// The queued runs this daemon runs.
    pub local: queue_worker::LocalRuns,
    /// The console's door, when `[http] listen` opens one.
    pub console: Option<console::Console>,
    /// Where the A2A door's tasks work, when it is served (`[a2a] workspace`, on the
    /// console's listener); resolved once, at start.
    pub a2a: Option<PathBuf>,
}

/// Runs the daemon until it is told to stop. `ready` is called once the socket answers.
pub async fn serve(
    config: Config,
    ready: impl FnOnce(&std::path::Path),
) -> Result<(), DaemonError> {
    let setup = |what: &str, e: std::io::Error| DaemonError::Setup(format!("{what}: {e}"));
    // Only the owner may enter the home, so only the owner can reach the socket.
    for path in
        ryvos::make_home_private(&config.home).map_err(|e| DaemonError::Setup(e.to_string()))?
    {
        tracing::warn!(
            "{} was open to other users; it is private now",
            path.display()
        );
    }
    let _lock = HomeLock::acquire(&config.home).map_err(DaemonError::Setup)?;
    let socket = config.socket_path()?;
    // Holding the lock, any socket file left here is from a daemon that died.
    if socket.exists() {
        tracing::warn!(
            "removing the stale socket {} left by a daemon that stopped",
            socket.display()
        );
        std::fs::remove_file(&socket).map_err(|e| {
            setup(
                &format!("removing the stale socket {}", socket.display()),
                e,
            )
        })?;
    }
    let a2a_workspace = config.a2a.workspace().map_err(DaemonError::Setup)?;
    let door = config.http.door().map_err(DaemonError::Setup)?;
    let runtime = Runtime::start(config.clone()).await?;
    let (opened, console) = console::open(door).await?.unzip();
    let listener = UnixListener::bind(&socket)
        .map_err(|e| setup(&format!("listening on {}", socket.display()), e))?;
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| setup(&format!("restricting {}", socket.display()), e))?;
    let shared = Arc::new(Shared {
        runtime,
        config_file: config.source.as_deref().map(canonical),
        config,
        socket: socket.clone(),
        started: Instant::now(),
        shutdown: CancellationToken::new(),
        local: queue_worker::LocalRuns::default(),
        a2a: a2a_workspace.filter(|_| console.is_some()),
        console,
    });
    tracing::info!(
        socket = %socket.display(),
        pid = std::process::id(),
        store = shared.runtime.store_backend(),
        daemon = shared.runtime.shared_store().node().unwrap_or("-"),
        console = shared.console.as_ref().map_or("-", |c| c.origin.as_str()),
        "ryvosd is ready"
    );
    ready(&socket);
    let worker = queue_worker::spawn(shared.clone());
    let relayer = approvals::spawn(shared.clone());
    let month_parks = Some(month_parks::spawn(shared.clone()));
    let notifier = notify::spawn(shared.clone());
    let console = opened.map(|opened| console::spawn(opened, shared.clone()));

    let mut connections = tokio::task::JoinSet::new();
    let accepted = accept_until_stopped(&listener, &shared, &mut connections).await;
    tracing::info!("ryvosd is stopping: ending runs in flight and committing their turns");
    drop(listener);
    if let Err(e) = std::fs::remove_file(&socket) {
        tracing::warn!("removing the socket {}: {e}", socket.display());
    }
    let stopped = stop(
        shared,
        [worker, relayer, month_parks, notifier, console],
        connections,
    )
    .await;
    tracing::info!("ryvosd stopped");
    accepted?;
    stopped
}

/// Ends the runs in flight, returns their queued runs to the queue, lets the connections finish
/// and closes the runtime, which writes out the run logs.
async fn stop(
    shared: Arc<Shared>,
    [worker, relayer, month_parks, notifier, console]: [Option<tokio::task::JoinHandle<()>>; 5],
    mut connections: tokio::task::JoinSet<()>,
) -> Result<(), DaemonError> {
    // An answer relayed from now on finds this daemon gone: as good as not waiting; and a
    // parked run is continued by whichever daemon runs next.
    for task in [relayer, month_parks, notifier, console]
        .into_iter()
        .flatten()
    {
        task.abort();
        task.await.ok();
    }
    let stopped = shared.runtime.shutdown().await;
    if let Some(worker) = worker {
        // Its runs have paused with the runtime: they go back in the queue.
        if let Err(e) = worker.await {
            tracing::error!("the queue worker failed: {e}");
        }
    }
    // The runs have ended, so their connections finish; then the runtime can be closed, which
    // writes out the run logs.
    let finished = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(CONNECTIONS_DRAIN, finished)
        .await
        .is_err()
    {
        tracing::warn!("some connections were still open at shutdown");
        connections.abort_all();
    }
    match Arc::try_unwrap(shared) {
        Ok(shared) => shared.runtime.close().await?,
        Err(_) => tracing::warn!(
            "the runtime was still shared at shutdown; run logs may miss their last lines"
        ),
    }
    Ok(stopped?)
}

/// How long shutdown waits for open connections to finish.
const CONNECTIONS_DRAIN: std::time::Duration = std::time::Duration::from_secs(10);

/// Cancels `shared.shutdown` on SIGTERM, SIGINT, or the runtime stopping by itself (an actor
/// failed past the restart intensity); answers whether it was the latter.
fn watch_for_stop(shared: Arc<Shared>) -> Result<tokio::task::JoinHandle<bool>, DaemonError> {
    use tokio::signal::unix::{signal, SignalKind};
    let install = |kind, name: &str| {
        signal(kind).map_err(|e| DaemonError::Setup(format!("installing the {name} handler: {e}")))
    };
    let mut terminate = install(SignalKind::terminate(), "SIGTERM")?;
    let mut interrupt = install(SignalKind::interrupt(), "SIGINT")?;
    Ok(tokio::spawn(async move {
        let runtime_died = tokio::select! {
            _ = terminate.recv() => false,
            _ = interrupt.recv() => false,
            _ = shared.shutdown.cancelled() => false,
            _ = shared.runtime.stopped() => true,
        };
        shared.shutdown.cancel();
        runtime_died
    }))
}

async fn accept_until_stopped(
    listener: &UnixListener,
    shared: &Arc<Shared>,
    connections: &mut tokio::task::JoinSet<()>,
) -> Result<(), DaemonError> {
    let stop = watch_for_stop(shared.clone())?;
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut backoff = std::time::Duration::from_millis(10);
    loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => p.map_err(|e| DaemonError::Setup(e.to_string()))?,
            _ = shared.shutdown.cancelled() => break,
        };
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    backoff = std::time::Duration::from_millis(10);
                    let shared = shared.clone();
                    // Finished connections are reaped as new ones come, so the set stays small.
                    while connections.try_join_next().is_some() {}
                    connections.spawn(async move {
                        connection::serve(stream, &shared).await;
                        drop(permit);
                    });
                }
                Err(e) => {
                    // Out of file descriptors and the like: wait a little, never spin.
                    tracing::error!("accepting a connection failed: {e}; retrying in {backoff:?}");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(std::time::Duration::from_secs(1));
                }
            },
            _ = shared.shutdown.cancelled() => break,
        }
    }
    if stop.await.unwrap_or(false) {
        return Err(DaemonError::Setup(
            "the runtime stopped after an actor failed too often; see the log above".into(),
        ));
    }
    Ok(())
}

/// `path` with its symlinks resolved, or as it is when it cannot be (it was removed).
pub(crate) fn canonical(path: &std::path::Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}
