//! Forking a session: a new session whose conversation is the old one's window at a point,
//! working in a copy of the workspace's files as they were then (in a directory of the
//! caller's choosing, or beside the original). Nothing of the original changes. Asked to work
//! in the original workspace itself, the fork shares its files: only the conversation forks.

use super::{summary_of, target, window, RewindError, RewindTo};
use crate::ids::SessionId;
use crate::session::Services;
use crate::store::{now_ms, SessionRecord, Write, WriteBatch};
use std::path::{Path, PathBuf};

/// A fork made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Forked {
    pub session_id: SessionId,
    /// Where the fork's files are.
    pub workspace: PathBuf,
    /// Where in the original it was forked from.
    pub label: String,
    pub files: usize,
}

/// Forks session `id` at `at` into a new session working in `into` (by default beside the
/// original workspace).
pub(crate) async fn fork(
    services: &Services,
    id: &SessionId,
    at: &RewindTo,
    into: Option<PathBuf>,
) -> Result<Forked, RewindError> {
    if *at == RewindTo::Undo {
        return Err(RewindError::Refused(
            "a fork is made at a turn or a run".into(),
        ));
    }
    let store = &services.store;
    let (stored, record) = target::load(store, id).await?;
    let found = target::find(store, id, &stored, at).await?;
    let mark = found.mark()?;
    let summary = summary_of(services, &found.point)?;
    let session_id = SessionId::generate();
    let original = PathBuf::from(&mark.workspace);
    let into = into.unwrap_or_else(|| beside(&original, &session_id));
    let copied = match same_dir(&into, &original) {
        // Asked to work in the original's own files (an editor forking its conversation).
        true => 0,
        false => copy(services, &mark, &into).await?,
    };
    let into = into.canonicalize().unwrap_or(into);
    let mut new = window::at(&stored, &found.point, summary, &found.label, now_ms());
    renumber(&mut new);
    let title = format!(
        "{} (fork of {id} at {})",
        record.title.clone().unwrap_or_default(),
        found.label
    );
    let batch = first_batch(&session_id, new, &into, title, record.model_fit);
    store.write(&[batch]).await?;
    Ok(Forked {
        session_id,
        workspace: into,
        label: found.label,
        files: copied,
    })
}

/// Whether `a` and `b` are one directory.
fn same_dir(a: &Path, b: &Path) -> bool {
    matches!((a.canonicalize(), b.canonicalize()), (Ok(a), Ok(b)) if a == b)
}

/// Copies `mark`'s files into `into`, new or empty; how many paths.
async fn copy(
    services: &Services,
    mark: &ryvos_protocol::records::WorkspaceMark,
    into: &Path,
) -> Result<usize, RewindError> {
    let empty = std::fs::read_dir(into).map_or(true, |mut d| d.next().is_none());
    if !empty {
        return Err(RewindError::Refused(format!(
            "{} is not empty: a fork's files go in a new or empty directory",
            into.display()
        )));
    }
    let snapshots = services.snapshots.clone();
    let (to, copy) = (into.to_path_buf(), mark.clone());
    super::blocking(move || {
        let copied = snapshots.copy_to(&copy, &to)?;
        share_repository_objects(Path::new(&copy.workspace), &to)?;
        Ok::<_, String>(copied.written)
    })
    .await
    .map_err(RewindError::Files)
}

/// What a fork's session starts with: the window's messages, its summary, its record.
fn first_batch(
    session_id: &SessionId,
    new: window::NewWindow,
    workspace: &Path,
    title: String,
    model_fit: Option<ryvos_protocol::records::ModelFit>,
) -> WriteBatch {
    let now = now_ms();
    let count = new.messages.len() as u64;
    let mut batch = WriteBatch::of(
        session_id.clone(),
        new.messages
            .into_iter()
            .map(Write::Message)
            .collect::<Vec<_>>(),
    );
    if new.compaction.summary.is_some() {
        batch.push(Write::Compaction(new.compaction));
    }
    batch.push(Write::Session(SessionRecord {
        session_id: session_id.clone(),
        created_at_ms: now,
        updated_at_ms: now,
        message_count: count,
        last_run: None,
        paused_calls: Vec::new(),
        workspace: Some(workspace.display().to_string()),
        title: Some(title),
        last_status: None,
        measured: None,
        model_fit,
        rewinding: None,
        last_rewind: None,
    }));
    batch
}

/// The new session's messages start at 0, its window at the first.
fn renumber(new: &mut window::NewWindow) {
    for (seq, m) in (0..).zip(new.messages.iter_mut()) {
        m.seq = seq;
    }
    new.compaction.first_kept_seq = 0;
    new.compaction.first_seq = 0;
    new.compaction.earlier.clear();
}

/// `workspace-fork-<id>` beside `workspace`.
fn beside(workspace: &Path, session: &SessionId) -> PathBuf {
    let name = workspace
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let short: String = session
        .as_str()
        .chars()
        .rev()
        .take(6)
        .collect::<String>()
        .chars()
        .rev()
        .collect();
    workspace.with_file_name(format!("{name}-fork-{}", short.to_lowercase()))
}

/// Snapshots leave a repository's objects out; a fork's repository borrows the original's
/// (as `git clone --shared` does), so its refs resolve.
fn share_repository_objects(original: &Path, fork: &Path) -> Result<(), String> {
    let objects = original.join(".git/objects");
    if !fork.join(".git").is_dir() || !objects.is_dir() {
        return Ok(());
    }
    let info = fork.join(".git/objects/info");
    std::fs::create_dir_all(fork.join(".git/objects/pack"))
        .and_then(|()| std::fs::create_dir_all(&info))
        .and_then(|()| std::fs::write(info.join("alternates"), format!("{}\n", objects.display())))
        .map_err(|e| format!("the fork's repository could not borrow the original's objects: {e}"))
}
