//! How a run waits: every wait of the driver hears, besides what it waits for, the session's
//! control channel (a stop, an interrupt), the run's deadline and the store's confirmations.

use super::{Driver, Step};
use crate::event::{EventKind, RunStatus};
use crate::session::run::ActiveRun;
use std::future::Future;
use tokio::time::Instant;

/// What the session actor tells the run it drives.
pub(in crate::session) enum Control {
    /// End the run with `status`.
    Stop { status: RunStatus, reason: String },
    /// Pause the run (status `interrupted`) after its current step, or at once (`now`: the
    /// daemon is stopping).
    Interrupt { reason: String, now: bool },
    /// Test hook: panic inside the driver.
    #[cfg(feature = "testing")]
    Panic,
}

/// What an interrupt does to the step waiting.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum OnInterrupt {
    /// The step finishes first (a model answer in flight is awaited); `now` pauses at once.
    AfterStep,
    /// Nothing has started (calls waiting for durability): the run pauses at once.
    AtOnce,
    /// Tools are running: they finish (those not started stay pending); `now` stops them and
    /// they report why.
    StopTools,
}

/// When the run must end, and what its end says then.
pub(super) struct Deadline {
    at: Instant,
    why: String,
}

impl Deadline {
    /// `max_duration_secs` from now, or the goal's time constraint when that is the tighter
    /// one. The run's time counts from its start, its preparation included, and across its
    /// continues (the time it was parked left out).
    pub(super) fn of(run: &ActiveRun) -> Self {
        let limit = run.limits().max_duration_secs();
        let goal_secs = run.goal().and_then(|g| g.constraints.time_secs);
        let (after, why) = match goal_secs.filter(|s| *s > 0 && *s < limit) {
            Some(secs) => (
                std::time::Duration::from_secs(secs),
                format!("the run reached its goal's time constraint ({secs}s) and was stopped"),
            ),
            None => (
                std::time::Duration::from_secs(limit),
                format!("the run reached max_duration_secs ({limit}s) and was stopped"),
            ),
        };
        let ran = std::time::Duration::from_millis(run.before().active_ms());
        Self {
            at: Instant::now() + after.saturating_sub(ran),
            why,
        }
    }
}

/// How a wait with a tick ended.
pub(super) enum Waited<T> {
    Done(T),
    /// The tick came first; the work goes on.
    Tick,
}

impl Driver {
    /// Waits for `work`, pausing after the step on an interrupt.
    pub(super) async fn wait<T>(&mut self, work: impl Future<Output = T>) -> Step<T> {
        self.wait_as(work, OnInterrupt::AfterStep).await
    }

    /// Waits for `work`, an interrupt doing what `on_interrupt` says.
    pub(super) async fn wait_as<T>(
        &mut self,
        work: impl Future<Output = T>,
        on_interrupt: OnInterrupt,
    ) -> Step<T> {
        let mut work = std::pin::pin!(work);
        loop {
            if let Waited::Done(value) = self.wait_until(&mut work, None, on_interrupt).await? {
                return Ok(value);
            }
        }
    }

    /// Waits for `work` until `tick` at most (the work goes on; it can be waited for again).
    pub(super) async fn wait_until<F: Future + Unpin>(
        &mut self,
        work: &mut F,
        tick: Option<Instant>,
        on_interrupt: OnInterrupt,
    ) -> Step<Waited<F::Output>> {
        let ticking = async {
            match tick {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let mut ticking = std::pin::pin!(ticking);
        loop {
            tokio::select! {
                biased;
                control = self.control.recv() => self.on_control(control, on_interrupt)?,
                _ = tokio::time::sleep_until(self.deadline.at) => return Err(self.timed_out()),
                confirmed = self.session.commits.next() => self.on_confirmed(confirmed)?,
                value = &mut *work => return Ok(Waited::Done(value)),
                _ = &mut ticking => return Ok(Waited::Tick),
            }
        }
    }

    /// Acts on what the session actor said while nothing waited, as between two steps.
    pub(super) fn take_control(&mut self) -> Step<()> {
        while let Ok(control) = self.control.try_recv() {
            self.on_control(Some(control), OnInterrupt::AtOnce)?;
        }
        Ok(())
    }

    /// Acts on what the session actor said; `None` means the actor is gone (the run is being
    /// torn down with it), and the run stops.
    fn on_control(&mut self, control: Option<Control>, on_interrupt: OnInterrupt) -> Step<()> {
        let control = control.unwrap_or(Control::Interrupt {
            reason: "the session stopped".into(),
            now: true,
        });
        match control {
            Control::Stop { status, reason } => Err(self.end(status, reason)),
            #[cfg(feature = "testing")]
            Control::Panic => panic!("injected fault in the driver of run {}", self.run.id()),
            Control::Interrupt { reason, now } => {
                self.run.interrupter().interrupt(reason);
                match on_interrupt {
                    OnInterrupt::AtOnce => self.pause_if_interrupted(),
                    OnInterrupt::AfterStep if now => self.pause_if_interrupted(),
                    OnInterrupt::StopTools if now => {
                        self.run.cancel().cancel();
                        Ok(())
                    }
                    OnInterrupt::AfterStep | OnInterrupt::StopTools => Ok(()),
                }
            }
        }
    }

    /// A batch was committed (or failed): turns now durable are announced; a failure ends
    /// the run, and the session reloads before its next one.
    fn on_confirmed(&mut self, result: Result<(), crate::store::StoreError>) -> Step<()> {
        let confirmation = self.session.commits.confirmed(result);
        for turn in confirmation.durable_turns {
            self.run.events().emit(EventKind::CheckpointSaved { turn });
        }
        match confirmation.failure {
            Some(e) => {
                tracing::error!(session = %self.session.id, "commit failed: {e}");
                self.session.needs_reload = true;
                Err(self.failure(format!("the turn could not be stored: {e}")))
            }
            None => Ok(()),
        }
    }

    /// Waits until everything handed to the store is durable.
    pub(super) async fn durable(&mut self, on_interrupt: OnInterrupt) -> Step<()> {
        while !self.session.commits.all_confirmed() {
            tokio::select! {
                biased;
                control = self.control.recv() => self.on_control(control, on_interrupt)?,
                _ = tokio::time::sleep_until(self.deadline.at) => return Err(self.timed_out()),
                confirmed = self.session.commits.next() => self.on_confirmed(confirmed)?,
            }
        }
        Ok(())
    }

    /// The end of a run past its deadline.
    fn timed_out(&self) -> super::Ending {
        self.end(RunStatus::Timeout, self.deadline.why.clone())
    }
}
