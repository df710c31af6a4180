//! The database file, kept usable across I/O errors.
//!
//! After an I/O error (a full disk, a failing one) redb refuses every later operation until the
//! database is closed and opened again ("Previous I/O error occurred"). The store does that
//! itself: the write that meets the error closes the file, and the next use opens it again,
//! at once and then with backoff while the error persists. Meanwhile every use fails with the
//! error that closed it, and [`DatabaseFile::fault`] says why the store cannot write, until a
//! write succeeds.

use crate::store::{Context, StoreError};
use redb::{Database, DatabaseError, StorageError, TransactionError};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The first wait before the database is opened again after a failed attempt; it doubles up
/// to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// How long a closing database waits for the reads still using it.
const CLOSE_PATIENCE: Duration = Duration::from_secs(2);
/// How long opening waits for the file's lock while another process holds it. A process that
/// stopped abruptly can leave the lock held for a moment: a program it was starting holds the
/// database's descriptor between its fork and its exec.
const LOCK_PATIENCE: Duration = Duration::from_secs(10);

/// The store's database file and what is known of its health.
pub(super) struct DatabaseFile {
    path: PathBuf,
    state: Mutex<State>,
}

struct State {
    /// The open database; `None` while it is closed after an I/O error.
    db: Option<Arc<Database>>,
    /// Why the store cannot write, while it cannot: set by an I/O error, cleared by the next
    /// write that succeeds.
    fault: Option<String>,
    /// When the database, closed, may be opened again.
    next_attempt: Instant,
    /// One caller is opening it again (without the lock held): the others do not wait.
    opening: bool,
    backoff: Duration,
}

impl DatabaseFile {
    /// Opens (or creates) the database at `path`.
    pub(super) fn open(path: &Path) -> Result<DatabaseFile, StoreError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .doing(|| format!("creating the directory {}", dir.display()))?;
        }
        let db = open_waiting(path)?;
        make_private(path)?;
        Ok(DatabaseFile {
            path: path.to_path_buf(),
            state: Mutex::new(State {
                db: Some(Arc::new(db)),
                fault: None,
                next_attempt: Instant::now(),
                opening: false,
                backoff: FIRST_BACKOFF,
            }),
        })
    }

    /// The open database; if an I/O error closed it, it is opened again first (when its
    /// backoff has passed), or the error says why it cannot be.
    pub(super) fn get(&self) -> Result<Arc<Database>, StoreError> {
        let mut state = self.state();
        if let Some(db) = &state.db {
            return Ok(db.clone());
        }
        let fault = state.fault.clone().unwrap_or_default();
        let closed = |why: &str| {
            StoreError::from_cause(
                "the store is closed after an I/O error and is being opened again",
                why,
            )
        };
        let now = Instant::now();
        if state.opening || now < state.next_attempt {
            let wait = state.next_attempt.saturating_duration_since(now);
            return Err(closed(&format!(
                "{fault} (next try in {} ms)",
                wait.as_millis()
            )));
        }
        // Opening may repair the file: nobody else waits on the lock meanwhile.
        state.opening = true;
        drop(state);
        let opened = create(&self.path).doing(|| format!("opening {}", self.path.display()));
        let mut state = self.state();
        state.opening = false;
        match opened {
            Ok(db) => {
                tracing::info!(path = %self.path.display(), "the store is open again");
                let db = Arc::new(db);
                state.db = Some(db.clone());
                state.backoff = FIRST_BACKOFF;
                Ok(db)
            }
            Err(e) => {
                let wait = state.backoff;
                state.next_attempt = Instant::now() + wait;
                state.backoff = (wait * 2).min(MAX_BACKOFF);
                tracing::warn!("the store could not be opened again (next try in {wait:?}): {e}");
                Err(closed(&format!("{fault}; opening it again: {e}")))
            }
        }
    }

    /// Called after a write to `db` failed with `error`: if the database now refuses every
    /// operation (an I/O error), it is closed, to be opened again by the next use.
    pub(super) fn write_failed(&self, db: Arc<Database>, error: &StoreError) {
        let poisoned = matches!(
            db.begin_write(),
            Err(TransactionError::Storage(
                StorageError::PreviousIo | StorageError::Io(_)
            ))
        );
        if !poisoned {
            return;
        }
        tracing::error!("the store met an I/O error and is closed, to be opened again: {error}");
        {
            let mut state = self.state();
            state.fault = Some(error.to_string());
            if state.db.as_ref().is_some_and(|open| Arc::ptr_eq(open, &db)) {
                state.db = None;
                state.next_attempt = Instant::now();
            }
        }
        close(db);
    }

    /// A write succeeded: the store can write.
    pub(super) fn write_succeeded(&self) {
        let mut state = self.state();
        if state.fault.take().is_some() {
            tracing::info!("the store writes again");
        }
    }

    /// Why the store cannot write, while it cannot.
    pub(super) fn fault(&self) -> Option<String> {
        self.state().fault.clone()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The state is a few fields set whole: a panic elsewhere cannot leave it half-written.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Opens (or creates) the database at `path`, waiting (at most [`LOCK_PATIENCE`], and saying
/// so) while another process holds its lock.
/// The store holds every transcript and tool output: only its owner may read it.
fn make_private(path: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)
        .doing(|| format!("reading the mode of {}", path.display()))?
        .permissions()
        .mode();
    if mode & 0o077 == 0 {
        return Ok(());
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o700))
        .doing(|| format!("making {} private (0600)", path.display()))
}

fn open_waiting(path: &Path) -> Result<Database, StoreError> {
    let deadline = Instant::now() + LOCK_PATIENCE;
    let mut waiting = false;
    loop {
        match create(path) {
            Err(DatabaseError::DatabaseAlreadyOpen) if Instant::now() < deadline => {
                if !waiting {
                    // A live holder keeps it for as long as it runs: said at once, not waited
                    // for. Looked for once: a holder that starts later is waited for.
                    if let Some((pid, command)) = super::holder::live_holder(path) {
                        return Err(StoreError::from_cause(
                            format!("opening {}", path.display()),
                            format!(
                                "it is in use by `{command}` (pid {pid}), which keeps it until \
                                 it ends. A run hosted in-process holds its store alone: start \
                                 ryvosd, and every terminal reaches the store through it"
                            ),
                        ));
                    }
                    tracing::warn!(
                        "the store {} is locked by another process (a program started by a \
                         process that stopped may hold it for a moment); waiting up to \
                         {LOCK_PATIENCE:?}",
                        path.display()
                    );
                    waiting = true;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(DatabaseError::DatabaseAlreadyOpen) => {
                return Err(StoreError::from_cause(
                    format!("opening {}", path.display()),
                    format!(
                        "another process has held it for {LOCK_PATIENCE:?}: is another ryvosd \
                         (or `ryvos run`) using this $RYVOS_HOME?"
                    ),
                ))
            }
            Err(e) => return Err(e).doing(|| format!("opening {}", path.display())),
            Ok(db) => {
                if waiting {
                    tracing::info!("the store's lock was released; it is open");
                }
                return Ok(db);
            }
        }
    }
}

/// Opens (or creates) the database file at `path`.
fn create(path: &Path) -> Result<Database, DatabaseError> {
    #[cfg(feature = "testing")]
    {
        let backend = super::faults::Backend::open(path)?;
        Database::builder().create_with_backend(backend)
    }
    #[cfg(not(feature = "testing"))]
    Database::create(path)
}

/// Closes `db` once the reads still using it are done (within [`CLOSE_PATIENCE`]); after that
/// it closes when the last of them ends, and opening it again waits until then.
fn close(mut db: Arc<Database>) {
    let deadline = Instant::now() + CLOSE_PATIENCE;
    loop {
        match Arc::try_unwrap(db) {
            Ok(database) => {
                if let Err(e) = database.close() {
                    tracing::warn!("closing the store after an I/O error: {e}");
                }
                return;
            }
            Err(shared) if Instant::now() < deadline => {
                db = shared;
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(_) => {
                tracing::warn!(
                    "reads still hold the store {CLOSE_PATIENCE:?} after an I/O error; it \
                     closes when they end"
                );
                return;
            }
        }
    }
}
