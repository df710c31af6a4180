//! The shape the stateless actors share (the LlmStreamActor, the ToolExecutorActor and the
//! JudgeActor): each message is a job, run as a task of its own so that the actor takes the
//! next one at once; the actor's state is only what it was started with, given again when it
//! is restarted. A job answers through its own callback, which answers with a loss if the job
//! is dropped unanswered (its task failed, or the actor did before starting it).

use ractor::{Actor, ActorProcessingErr, ActorRef};
use std::future::Future;
use std::marker::PhantomData;

/// What a [`JobActor`] does with each job.
pub(crate) trait Work: Send + Sync + 'static {
    /// One piece of work, carrying the callback it answers through.
    type Job: Send + 'static;
    /// What the actor is started (and restarted) with.
    type Args: Clone + Send + Sync + 'static;
    /// The actor, as the logs name it.
    const NAME: &'static str;

    /// The task that does `job`, with what it needs of `args` taken along.
    fn run(args: &Self::Args, job: Self::Job) -> impl Future<Output = ()> + Send + 'static;
}

/// Messages of a [`JobActor`].
pub(crate) enum JobMsg<J> {
    /// Do this job.
    Do(Box<J>),
    /// Test hook: panic inside the handler.
    #[cfg(feature = "testing")]
    Panic,
}

/// An actor doing `W`'s jobs, each in a task of its own.
pub(crate) struct JobActor<W>(PhantomData<W>);

impl<W> JobActor<W> {
    pub(crate) fn new() -> Self {
        Self(PhantomData)
    }
}

impl<W: Work> Actor for JobActor<W> {
    type Msg = JobMsg<W::Job>;
    type State = W::Args;
    type Arguments = W::Args;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: W::Args,
    ) -> Result<Self::State, ActorProcessingErr> {
        // Seen again after each restart.
        tracing::debug!("{} is ready", W::NAME);
        Ok(args)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        args: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            JobMsg::Do(job) => {
                tokio::spawn(W::run(args, *job));
            }
            #[cfg(feature = "testing")]
            JobMsg::Panic => panic!("injected fault in {}", W::NAME),
        }
        Ok(())
    }
}
