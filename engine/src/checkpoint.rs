//! CheckpointActor: the only writer of the store.
//!
//! Sessions cast their batches here and go on; a dedicated writer thread takes every batch
//! waiting at the moment it is free and commits them together (group commit: one fsync for
//! many sessions' turns), then tells each session its batch is durable. Commits never run on
//! the async workers, and a session never waits for one unless it is about to do something
//! with side effects or to report a run finished.

use crate::callback::Callback;
use crate::ids::SessionId;
use crate::store::{Store, StoreError, WriteBatch};
use crate::supervision::ChildSlot;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use std::sync::mpsc;
use std::time::Duration;

/// Answered once a batch is durable, or with the error that stopped it (also when the batch is
/// lost with a failed actor or writer).
pub(crate) type CommitNotify = Callback<Result<(), StoreError>>;

/// The most batches put in one transaction.
const MAX_GROUP: usize = 1024;

/// Messages of the [`CheckpointActor`].
pub(crate) enum CheckpointMsg {
    /// Store `batch`; `notify` is called when it is durable.
    Append {
        batch: Box<WriteBatch>,
        notify: CommitNotify,
    },
    /// Answers once everything appended before it is durable.
    Flush(RpcReplyPort<Result<(), StoreError>>),
    /// Test hook: panic inside the handler.
    #[cfg(feature = "testing")]
    Panic,
}

struct Job {
    batch: Option<Box<WriteBatch>>,
    notify: CommitNotify,
}

/// The actor; see the module documentation.
pub(crate) struct CheckpointActor;

/// Its state: the queue to the writer thread. Dropping it lets the thread finish what it has
/// and exit.
pub(crate) struct CheckpointState {
    jobs: Option<mpsc::Sender<Job>>,
    writer: Option<std::thread::JoinHandle<()>>,
}

impl Actor for CheckpointActor {
    type Msg = CheckpointMsg;
    type State = CheckpointState;
    type Arguments = Store;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        store: Store,
    ) -> Result<Self::State, ActorProcessingErr> {
        let (jobs, queue) = mpsc::channel();
        // The writer waits on the store's futures with the runtime's reactor and blocking pool.
        let runtime = tokio::runtime::Handle::current();
        let writer = std::thread::Builder::new()
            .name("ryvos-writer".into())
            .spawn(move || write_loop(&runtime, &store, &queue))?;
        Ok(CheckpointState {
            jobs: Some(jobs),
            writer: Some(writer),
        })
    }

    /// A clean stop lets the writer commit what it holds and waits for it, so the database is
    /// released when the actor is gone. (After a panic the writer finishes on its own.)
    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.jobs = None;
        if let Some(writer) = state.writer.take() {
            let joined = tokio::task::spawn_blocking(move || writer.join()).await;
            if !matches!(joined, Ok(Ok(()))) {
                tracing::error!("the store's writer thread ended abnormally");
            }
        }
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let job = match msg {
            CheckpointMsg::Append { batch, notify } => Job {
                batch: Some(batch),
                notify,
            },
            CheckpointMsg::Flush(reply) => Job {
                batch: None,
                notify: Callback::new(
                    move |result| {
                        if reply.send(result).is_err() {
                            tracing::debug!("a flush's caller left before it finished");
                        }
                    },
                    || Err(writer_gone()),
                ),
            },
            #[cfg(feature = "testing")]
            CheckpointMsg::Panic => panic!("injected fault in the checkpoint actor"),
        };
        let Some(jobs) = &state.jobs else {
            job.notify.answer(Err(writer_gone()));
            return Ok(());
        };
        if let Err(mpsc::SendError(job)) = jobs.send(job) {
            // The writer thread is gone (it panicked): fail the job, and this actor, so that the
            // supervisor restarts both.
            job.notify.answer(Err(writer_gone()));
            return Err("the store's writer thread stopped".into());
        }
        Ok(())
    }
}

/// How long [`flush`] waits for the writer, through a restart of the CheckpointActor.
const FLUSH_PATIENCE: Duration = Duration::from_secs(30);

/// Waits until every batch handed to the store's writer before now is durable, so that what
/// is read next is not stale: called by an actor that reads back what it (or the incarnation
/// before it) wrote.
pub(crate) async fn flush(checkpoint: &ChildSlot<CheckpointMsg>) -> Result<(), StoreError> {
    match checkpoint.call(CheckpointMsg::Flush, FLUSH_PATIENCE).await {
        Ok(flushed) => flushed,
        Err(e) => Err(StoreError::from_cause("waiting for the store's writer", e)),
    }
}

/// Stores `batch` and waits until it is durable (riding out a restart of the writer).
pub(crate) async fn store(
    checkpoint: &ChildSlot<CheckpointMsg>,
    batch: WriteBatch,
) -> Result<(), StoreError> {
    let (done, durable) = tokio::sync::oneshot::channel();
    let notify = Callback::new(
        move |result| {
            // The waiter may have timed out; then nobody needs the answer.
            done.send(result).ok();
        },
        || Err(writer_gone()),
    );
    let writer = checkpoint
        .get()
        .map_err(|e| StoreError::from_cause("handing a batch to the store's writer", e))?;
    writer
        .cast(CheckpointMsg::Append {
            batch: Box::new(batch),
            notify,
        })
        .map_err(|e| StoreError::from_cause("handing a batch to the store's writer", e))?;
    match tokio::time::timeout(FLUSH_PATIENCE, durable).await {
        Ok(Ok(result)) => result,
        Ok(Err(_)) => Err(writer_gone()),
        Err(_) => Err(StoreError::from_cause(
            "waiting for a batch to be stored",
            format!("no confirmation within {FLUSH_PATIENCE:?}"),
        )),
    }
}

/// The error a batch gets when the writer is gone before committing it.
pub(crate) fn writer_gone() -> StoreError {
    StoreError::from_cause(
        "handing a batch to the store's writer",
        "the writer thread has stopped",
    )
}

/// Commits whatever is waiting, as one transaction, until the actor's queue is dropped.
fn write_loop(runtime: &tokio::runtime::Handle, store: &Store, queue: &mpsc::Receiver<Job>) {
    while let Ok(first) = queue.recv() {
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match queue.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        // A batch that would leave a hole in its session's history is refused, and the
        // session's later batches with it: an earlier batch was lost (its actor failed), and
        // what follows it must not be stored past the gap.
        let mut refused: std::collections::HashMap<usize, StoreError> =
            runtime.block_on(holes(store, &group)).into_iter().collect();
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
            runtime.block_on(store.write(&batches))
        };
        if let Err(e) = &result {
            tracing::error!("group commit of {} batch(es) failed: {e}", batches.len());
        }
        for job in group {
            job.notify.answer(result.clone());
        }
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
        }
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
