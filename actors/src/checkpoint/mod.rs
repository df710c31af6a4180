//! The store's writer, and the CheckpointActor that owns it.
//!
//! Everyone who writes (sessions, the ledger, the gate, the memory, the Director) hands batches
//! to the [`Writer`] through a [`Checkpoint`] handle and goes on; the writer's thread commits
//! whatever is waiting together and tells each writer when its batch is durable. Commits never
//! run on the async workers, and a session never waits for one unless it is about to do
//! something with side effects or to report a run finished.
//!
//! Batches go straight into the writer's queue, never through an actor's mailbox: the writer
//! and its queue outlive the CheckpointActor, its supervised owner, so a panic of the actor
//! loses nothing and reorders nothing. The actor's part is to finish the writer (commit what
//! it holds, release the database) when the runtime stops.

mod writer;

pub(crate) use writer::Writer;

use crate::callback::Callback;
use crate::store::{StoreError, WriteBatch};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use std::sync::Arc;
use std::time::Duration;
use writer::Job;

/// Answered once a batch is durable, or with the error that stopped it (also when the batch is
/// lost with a failed writer).
pub(crate) type CommitNotify = Callback<Result<(), StoreError>>;

/// The way to the store's writer: cheap to clone, and the same for the runtime's whole life.
#[derive(Clone)]
pub(crate) struct Checkpoint {
    writer: Arc<Writer>,
}

impl Checkpoint {
    /// The handle on `writer`.
    pub(crate) fn new(writer: Arc<Writer>) -> Self {
        Self { writer }
    }

    /// Hands `batch` to the writer; `notify` is answered once it is durable (or failed).
    pub(crate) fn append(&self, batch: WriteBatch, notify: CommitNotify) {
        self.writer.submit(Job {
            batch: Some(Box::new(batch)),
            notify,
            lazy: false,
        });
    }

    /// Hands `batch`, a record nothing acts on (a call's cost, a security decision), to the
    /// writer, which may hold it a few milliseconds to commit it with the next batch (see
    /// [`writer`]); `notify` is answered once it is durable (or failed).
    pub(crate) fn record(&self, batch: WriteBatch, notify: CommitNotify) {
        self.writer.submit(Job {
            batch: Some(Box::new(batch)),
            notify,
            lazy: true,
        });
    }

    /// The writer, for the actor that owns it.
    pub(crate) fn writer(&self) -> Arc<Writer> {
        self.writer.clone()
    }
}

/// Messages of the [`CheckpointActor`].
pub(crate) enum CheckpointMsg {
    /// Test hook: panic inside the handler.
    #[cfg(feature = "testing")]
    Panic,
}

/// The actor; see the module documentation.
pub(crate) struct CheckpointActor;

impl Actor for CheckpointActor {
    type Msg = CheckpointMsg;
    type State = Arc<Writer>;
    type Arguments = Arc<Writer>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        writer: Arc<Writer>,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(writer)
    }

    /// A clean stop (the runtime is stopping) lets the writer commit what it holds and waits
    /// for it, so the database is released when the actor is gone. After a panic the writer
    /// goes on, for the next incarnation.
    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        writer: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let writer = writer.clone();
        if tokio::task::spawn_blocking(move || writer.finish())
            .await
            .is_err()
        {
            tracing::error!("waiting for the store's writer failed");
        }
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        _writer: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            #[cfg(feature = "testing")]
            CheckpointMsg::Panic => panic!("injected fault in the checkpoint actor"),
        }
    }
}

/// How long [`flush`] and [`store`] wait for the writer.
const FLUSH_PATIENCE: Duration = Duration::from_secs(30);

/// Waits until every batch handed to the store's writer before now is durable, so that what
/// is read next is not stale: called by an actor that reads back what it (or the incarnation
/// before it) wrote.
pub(crate) async fn flush(checkpoint: &Checkpoint) -> Result<(), StoreError> {
    submit_and_wait(checkpoint, None).await
}

/// Stores `batch` and waits until it is durable.
pub(crate) async fn store(checkpoint: &Checkpoint, batch: WriteBatch) -> Result<(), StoreError> {
    submit_and_wait(checkpoint, Some(Box::new(batch))).await
}

async fn submit_and_wait(
    checkpoint: &Checkpoint,
    batch: Option<Box<WriteBatch>>,
) -> Result<(), StoreError> {
    let (done, durable) = tokio::sync::oneshot::channel();
    let notify = Callback::new(
        move |result| {
            // The waiter may have timed out; then nobody needs the answer.
            done.send(result).ok();
        },
        || Err(writer_gone()),
    );
    checkpoint.writer.submit(Job {
        batch,
        notify,
        lazy: false,
    });
    match tokio::time::timeout(FLUSH_PATIENCE, durable).await {
        Ok(Ok(result)) => result,
        Ok(Err(_)) => Err(writer_gone()),
        Err(_) => Err(StoreError::from_cause(
            "waiting for the store's writer",
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
