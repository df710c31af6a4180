//! The store's writer: one thread and its queue, which outlive any incarnation of the
//! CheckpointActor. The thread takes every batch waiting at the moment it is free and commits
//! them together (group commit: one fsync for many sessions' turns), then tells each session
//! its batch is durable. A panic inside a commit fails that group, and the thread goes on.
//!
//! A batch only recorded (a call's cost, a security decision: nothing acts on its being
//! durable) waits up to [`LAZY_WAIT`] for company: the turn it belongs to is usually handed
//! over within that time, and one commit (one fsync) then carries them all.

use super::{writer_gone, CommitNotify};
use crate::ids::SessionId;
use crate::store::{Store, StoreError, WriteBatch};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

/// The most batches put in one transaction.
const MAX_GROUP: usize = 1024;

/// The longest a lazy batch waits for another to be committed with.
pub(super) const LAZY_WAIT: Duration = Duration::from_millis(10);

/// A batch to store (none for a flush), and whom to tell when it is durable.
pub(super) struct Job {
    pub batch: Option<Box<WriteBatch>>,
    pub notify: CommitNotify,
    /// Nothing waits on it: it may wait [`LAZY_WAIT`] to be committed with the next batch.
    pub lazy: bool,
}

/// The writer thread and its queue.
pub(crate) struct Writer {
    /// The queue; closed (`None`) when the writer is finished.
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Writer {
    /// Starts the writer thread on `store`; it waits on the store's futures with the current
    /// runtime's reactor and blocking pool.
    pub(crate) fn start(store: Store) -> std::io::Result<Writer> {
        let (jobs, queue) = mpsc::channel();
        let runtime = tokio::runtime::Handle::current();
        let thread = std::thread::Builder::new()
            .name("ryvos-writer".into())
            .spawn(move || write_loop(&runtime, &store, &queue))?;
        Ok(Writer {
            jobs: Mutex::new(Some(jobs)),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Queues `job`; it is answered with an error if the writer is finished.
    pub(super) fn submit(&self, job: Job) {
        let jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        let refused = match jobs.as_ref() {
            Some(jobs) => jobs.send(job).err().map(|mpsc::SendError(job)| job),
            None => Some(job),
        };
        if let Some(job) = refused {
            job.notify.answer(Err(writer_gone()));
        }
    }

    /// Closes the queue and waits until everything queued is committed and the thread is
    /// gone, so that the database is released. Blocks: call it off the async workers.
    pub(super) fn finish(&self) {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner()).take();
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(thread) = thread {
            if thread.join().is_err() {
                tracing::error!("the store's writer thread ended abnormally");
            }
        }
    }
}

/// Commits `batches` as one transaction; a panic inside the store fails them, and is reported.
fn commit(
    runtime: &tokio::runtime::Handle,
    store: &Store,
    batches: &[WriteBatch],
) -> Result<(), StoreError> {
    let written = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runtime.block_on(store.write(batches))
    }));
    written.unwrap_or_else(|panic| {
        let why = crate::supervision::panic_message(&*panic);
        tracing::error!("the store's writer panicked while committing: {why}");
        Err(StoreError::from_cause(
            format!("writing {} batch(es) to the store", batches.len()),
            format!("the writer panicked: {why}"),
        ))
    })
}

/// Commits whatever is waiting, as one transaction, until the queue is closed.
fn write_loop(runtime: &tokio::runtime::Handle, store: &Store, queue: &mpsc::Receiver<Job>) {
    let mut gathering = Gathering::default();
    while let Some(group) = gathering.next_group(queue) {
        // A panic anywhere in a group drops its jobs, which answers each with the loss; the
        // thread goes on with the next group.
        let handled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            commit_group(runtime, store, group)
        }));
        if handled.is_err() {
            tracing::error!("the store's writer panicked on a group; its batches failed");
        }
    }
}

/// The jobs taken from the queue and not yet committed.
#[derive(Default)]
struct Gathering {
    /// Lazy jobs waiting for company, in the order they came.
    held: Vec<Job>,
    /// When the first of them came.
    since: Option<Instant>,
}

impl Gathering {
    /// The next group to commit: every job waiting, once one is not lazy or the lazy ones have
    /// waited [`LAZY_WAIT`]; `None` once the queue is closed and nothing is held.
    fn next_group(&mut self, queue: &mpsc::Receiver<Job>) -> Option<Vec<Job>> {
        loop {
            let next = match self.since {
                None => queue.recv().ok(),
                Some(since) => queue
                    .recv_timeout(LAZY_WAIT.saturating_sub(since.elapsed()))
                    .ok(),
            };
            let Some(job) = next else {
                // Waited long enough, or closed: what is held goes now.
                self.since = None;
                let held = std::mem::take(&mut self.held);
                return (!held.is_empty()).then_some(held);
            };
            let mut group = std::mem::take(&mut self.held);
            group.push(job);
            while group.len() < MAX_GROUP {
                match queue.try_recv() {
                    Ok(job) => group.push(job),
                    Err(_) => break,
                }
            }
            if group.len() < MAX_GROUP && group.iter().all(|job| job.lazy) {
                self.held = group;
                self.since.get_or_insert_with(Instant::now);
                continue;
            }
            self.since = None;
            return Some(group);
        }
    }
}

/// Commits `group` as one transaction, refusing the batches that would leave a hole, and
/// answers every job.
fn commit_group(runtime: &tokio::runtime::Handle, store: &Store, group: Vec<Job>) {
    // A batch that would leave a hole in its session's history is refused, and the
    // session's later batches with it: an earlier batch was lost (its actor failed), and
    // what follows it must not be stored past the gap.
    let mut refused: std::collections::HashMap<usize, StoreError> =
        runtime.block_on(holes(store, &group)).into_iter().collect();
    // A batch of a session another daemon took over is refused alone.
    for (at, job) in group.iter().enumerate() {
        if let Some(why) = job
            .batch
            .as_ref()
            .and_then(|b| store.taken_over(&b.session_id))
        {
            refused.entry(at).or_insert(why);
        }
    }
    let mut group: Vec<Job> = group
        .into_iter()
        .enumerate()
        .filter_map(|(at, job)| match refused.remove(&at) {
            Some(why) => {
                job.notify.answer(Err(why));
                None
            }
            None => Some(job),
        })
        .collect();
    let batches: Vec<WriteBatch> = group
        .iter_mut()
        .filter_map(|j| j.batch.take().map(|b| *b))
        .collect();
    let result = if batches.is_empty() {
        Ok(())
    } else {
        commit(runtime, store, &batches)
    };
    if let Err(e) = &result {
        tracing::error!("group commit of {} batch(es) failed: {e}", batches.len());
    }
    for job in group {
        job.notify.answer(result.clone());
    }
}

/// The batches of `group` (by index) that would leave a hole in their session's history,
/// with why.
async fn holes(store: &Store, group: &[Job]) -> Vec<(usize, StoreError)> {
    let batches: Vec<(usize, &WriteBatch)> = group
        .iter()
        .enumerate()
        .filter_map(|(at, j)| j.batch.as_deref().map(|b| (at, b)))
        .filter(|(_, b)| b.messages().next().is_some())
        .collect();
    if batches.is_empty() {
        return Vec::new();
    }
    // Where each session stands, advanced batch by batch as the group would write it.
    let sessions: Vec<SessionId> = batches.iter().map(|(_, b)| b.session_id.clone()).collect();
    let mut next = match store.next_seqs(&sessions).await {
        Ok(next) => next,
        // The write itself will meet and report the same failure.
        Err(_) => return Vec::new(),
    };
    let mut refused = std::collections::HashSet::new();
    let mut out = Vec::new();
    for (at, batch) in batches {
        let sid = &batch.session_id;
        let (Some(first), Some(last)) = (batch.messages().next(), batch.messages().last()) else {
            continue;
        };
        let stored = next.get(sid).copied().unwrap_or(0);
        let floor = stored.max(batch.compaction().map_or(0, |c| c.first_kept_seq));
        if refused.contains(sid) || first.seq > floor {
            refused.insert(sid.clone());
            out.push((
                at,
                StoreError::from_cause(
                    format!("storing session {sid}'s messages from {}", first.seq),
                    format!(
                        "the store holds them only up to {floor}: an earlier batch was lost, \
                         and nothing is stored past the gap"
                    ),
                ),
            ));
            continue;
        }
        next.insert(sid.clone(), floor.max(last.seq + 1));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callback::Callback;
    use crate::message::Message;
    use crate::store::{StoredMessage, Write};
    use std::sync::Arc;

    fn batch(session: &str, seqs: std::ops::Range<u64>) -> Job {
        let batch = WriteBatch::of(
            SessionId::new(session),
            seqs.map(|seq| {
                Write::Message(StoredMessage {
                    seq,
                    tokens: 1,
                    message: Arc::new(Message::user("m")),
                })
            }),
        );
        Job {
            batch: Some(Box::new(batch)),
            notify: Callback::new(|_| {}, || Ok(())),
            lazy: false,
        }
    }

    fn lazy(session: &str, seqs: std::ops::Range<u64>) -> Job {
        Job {
            lazy: true,
            ..batch(session, seqs)
        }
    }

    fn sessions(group: &[Job]) -> Vec<&str> {
        group
            .iter()
            .map(|job| job.batch.as_ref().unwrap().session_id.as_str())
            .collect()
    }

    #[test]
    fn lazy_batches_wait_for_the_next_one_and_are_committed_with_it_in_order() {
        let (jobs, queue) = mpsc::channel();
        let mut gathering = Gathering::default();
        let waiter = std::thread::spawn(move || {
            let first = gathering.next_group(&queue);
            let second = gathering.next_group(&queue);
            (first, second)
        });
        jobs.send(lazy("cost", 0..0)).unwrap();
        jobs.send(lazy("audit", 0..0)).unwrap();
        // Given after the lazy ones were taken and held, however long that takes.
        std::thread::sleep(LAZY_WAIT / 4);
        jobs.send(batch("turn", 0..1)).unwrap();
        drop(jobs);
        let (first, second) = waiter.join().unwrap();
        let first = first.unwrap();
        // Held until the turn came (one group), unless the machine was slow enough for the
        // lazy ones to go alone first: either way nothing is lost or reordered.
        let mut all = sessions(&first);
        if let Some(second) = &second {
            all.extend(sessions(second));
        }
        assert_eq!(all, ["cost", "audit", "turn"]);
        assert!(first.len() == 3 || second.is_some());
    }

    #[test]
    fn a_lazy_batch_alone_is_committed_after_its_wait_and_at_the_close() {
        let (jobs, queue) = mpsc::channel();
        let mut gathering = Gathering::default();
        jobs.send(lazy("cost", 0..0)).unwrap();
        let alone = gathering.next_group(&queue).unwrap();
        assert_eq!(sessions(&alone), ["cost"]);
        jobs.send(lazy("audit", 0..0)).unwrap();
        drop(jobs);
        let closing = gathering.next_group(&queue).unwrap();
        assert_eq!(sessions(&closing), ["audit"]);
        assert!(gathering.next_group(&queue).is_none());
    }

    #[tokio::test]
    async fn a_batch_past_a_hole_is_refused_with_its_sessions_later_ones() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db.redb"), false).unwrap();
        let stored = batch("s", 0..2);
        store.write(&[*stored.batch.unwrap()]).await.unwrap();
        let group = [
            batch("s", 5..6), // 2..5 was lost
            batch("t", 0..3),
            batch("s", 6..7),
            batch("s", 2..3), // the same session, but after a refused batch
        ];
        let refused: Vec<usize> = holes(&store, &group)
            .await
            .into_iter()
            .map(|(at, _)| at)
            .collect();
        assert_eq!(refused, [0, 2, 3]);
        let in_order = [batch("s", 2..4), batch("s", 4..5)];
        assert!(holes(&store, &in_order).await.is_empty());
    }
}
