//! CostLedgerActor: the owner of the spending totals.

use super::budget::{self, Limits};
use super::period::Period;
use super::pricing::{cost_microcents, PriceBook};
use super::{Authorization, CostLedgerMsg, Receipt, UsageReport};
use crate::callback::Callback;
use crate::checkpoint::Checkpoint;
use crate::config::BudgetConfig;
use crate::ids::{RunId, SessionId};
use crate::store::{now_ms, CostTotals, Store, StoreError, Write, WriteBatch};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use std::collections::HashMap;

/// What the ledger is started with.
#[derive(Clone)]
pub(crate) struct CostLedgerArgs {
    pub store: Store,
    pub checkpoint: Checkpoint,
    pub budget: BudgetConfig,
    /// Models served on this machine: free unless priced.
    pub local_models: Vec<String>,
}

/// The actor; see the module documentation of [`crate::cost_ledger`].
pub(crate) struct CostLedgerActor;

/// Its state: prices, limits, and the totals read or written so far.
pub(crate) struct LedgerState {
    store: Store,
    checkpoint: Checkpoint,
    prices: PriceBook,
    limits: Limits,
    /// Totals by ledger key; a key not here is read from the store when first needed.
    totals: HashMap<String, CostTotals>,
    /// Amounts whose write failed, by key: added again with the next batch.
    unwritten: HashMap<String, CostTotals>,
    /// Whether other daemons add to the same totals (so the month's is read back).
    shared: bool,
    /// The month whose total was last read back, and when.
    month_read: Option<(String, std::time::Instant)>,
    commit_error: Option<StoreError>,
    /// Test hook: answers of the kind it names wait while this is held.
    #[cfg(feature = "testing")]
    held: Option<super::hold::Held>,
}

impl Actor for CostLedgerActor {
    type Msg = CostLedgerMsg;
    type State = LedgerState;
    type Arguments = CostLedgerArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: CostLedgerArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(LedgerState {
            shared: args.store.node().is_some(),
            checkpoint: args.checkpoint,
            store: args.store,
            prices: PriceBook::new(
                &args.budget.pricing_overrides,
                args.local_models.iter().map(String::as_str),
            ),
            limits: Limits::new(&args.budget),
            totals: HashMap::new(),
            unwritten: HashMap::new(),
            month_read: None,
            commit_error: None,
            #[cfg(feature = "testing")]
            held: None,
        })
    }

    /// A restarted ledger reads totals from the store; first it lets every write its
    /// predecessor handed over land, so none is read stale.
    async fn post_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        Ok(crate::checkpoint::flush(&state.checkpoint).await?)
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            CostLedgerMsg::Authorize {
                run_id,
                run_limit_cents,
                reply,
            } => {
                let authorization = state.authorize(&run_id, run_limit_cents).await;
                #[cfg(feature = "testing")]
                if let Some(held) = &mut state.held {
                    held.wait(super::LedgerAnswer::BudgetCheck).await;
                }
                if reply.send(authorization).is_err() {
                    tracing::debug!(run = %run_id, "a budget check's caller left");
                }
            }
            CostLedgerMsg::Record { report, reply } => {
                let receipt = state.record(&myself, &report).await;
                #[cfg(feature = "testing")]
                if let Some(held) = &mut state.held {
                    held.wait(super::LedgerAnswer::Receipt).await;
                }
                if reply.send(receipt).is_err() {
                    tracing::debug!(run = %report.run_id, "a usage record's caller left");
                }
            }
            CostLedgerMsg::RunEnded { session_id, run_id } => {
                for key in [run_key(&run_id), session_key(&session_id)] {
                    if !state.unwritten.contains_key(&key) {
                        state.totals.remove(&key);
                    }
                }
            }
            CostLedgerMsg::CommitFailed { adds, error } => {
                tracing::error!("the cost ledger's totals could not be stored: {error}");
                for (key, add) in adds {
                    state.unwritten.entry(key).or_default().add(&add);
                }
                state.commit_error = Some(error);
            }
            #[cfg(feature = "testing")]
            CostLedgerMsg::Panic => panic!("injected fault in the cost ledger"),
            #[cfg(feature = "testing")]
            CostLedgerMsg::Hold(held) => state.held = Some(held),
        }
        Ok(())
    }
}

/// How often a ledger on a shared store reads the month's total back.
const MONTH_READ_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The ledger key of a run's totals.
pub(crate) fn run_key(run: &RunId) -> String {
    format!("run:{run}")
}

fn session_key(session: &SessionId) -> String {
    format!("session:{session}")
}

impl LedgerState {
    async fn totals(&mut self, key: &str) -> Result<CostTotals, StoreError> {
        if let Some(t) = self.totals.get(key) {
            return Ok(*t);
        }
        let t = self.store.cost_totals(key).await?.unwrap_or_default();
        self.totals.insert(key.to_owned(), t);
        Ok(t)
    }

    /// Takes in what other daemons sharing the store added to the month's total, when a limit
    /// watches it, at most every [`MONTH_READ_EVERY`] (a read per call would put a round trip
    /// to the database before every model call). This daemon's own latest additions may still
    /// be in a commit, so the larger of the two totals is the truer.
    async fn catch_up_on_the_month(&mut self, period: &Period) -> Result<(), StoreError> {
        if !(self.shared && self.limits.watch_month()) {
            return Ok(());
        }
        let key = format!("month:{}", period.month);
        if let Some((month, at)) = &self.month_read {
            if *month == key && at.elapsed() < MONTH_READ_EVERY {
                return Ok(());
            }
        }
        let stored = self.store.cost_totals(&key).await?.unwrap_or_default();
        self.month_read = Some((key.clone(), std::time::Instant::now()));
        let known = self.totals.entry(key).or_default();
        if stored.cost_microcents > known.cost_microcents {
            *known = stored;
        }
        Ok(())
    }

    /// Whether run `run_id` may make another model call, with the month's total caught up.
    async fn authorize(&mut self, run_id: &RunId, run_limit_cents: Option<u64>) -> Authorization {
        match self.catch_up_on_the_month(&Period::of(now_ms())).await {
            Ok(()) => self.check(run_id, run_limit_cents).await,
            Err(e) => Authorization::Unverifiable(e),
        }
    }

    /// Whether run `run_id` may make another model call, by the totals known.
    async fn check(&mut self, run_id: &RunId, run_limit_cents: Option<u64>) -> Authorization {
        let period = Period::of(now_ms());
        let spent = match self.totals(&run_key(run_id)).await {
            Ok(run) => self
                .totals(&format!("month:{}", period.month))
                .await
                .map(|month| (run, month)),
            Err(e) => Err(e),
        };
        match spent {
            Ok((run, month)) => match budget::check(
                &self.limits.for_run(run_limit_cents),
                run.cost_microcents,
                month.cost_microcents,
                &period,
            ) {
                Ok(()) => Authorization::Allowed,
                Err(notice) => Authorization::Refused(notice),
            },
            Err(e) => Authorization::Unverifiable(e),
        }
    }

    async fn record(
        &mut self,
        myself: &ActorRef<CostLedgerMsg>,
        report: &UsageReport,
    ) -> Result<Receipt, StoreError> {
        let period = Period::of(now_ms());
        // The call was made: a failed read must not keep it from being counted (the next
        // call's check reads again, and refuses if it still cannot).
        if let Err(e) = self.catch_up_on_the_month(&period).await {
            tracing::warn!("reading the month's spending back: {e}");
        }
        let keys = [
            run_key(&report.run_id),
            session_key(&report.session_id),
            format!("day:{}", period.day),
            format!("month:{}", period.month),
        ];
        let (price, price_source) = self.prices.price_of(&report.model, report.served_locally);
        let mut before = Vec::with_capacity(keys.len());
        for key in &keys {
            before.push(self.totals(key).await?);
        }
        let run_before = before[0];
        if u64::from(report.call) <= run_before.calls {
            // Already counted: this is a report repeated after a restart of the ledger.
            return Ok(Receipt {
                call_microcents: 0,
                run: run_before,
                price,
                price_source,
                warnings: Vec::new(),
                next_call: self.check(&report.run_id, report.run_limit_cents).await,
                store_error: self.commit_error.take(),
            });
        }
        let call = CostTotals {
            calls: 1,
            input_tokens: report.usage.input_tokens,
            output_tokens: report.usage.output_tokens,
            cost_microcents: cost_microcents(
                &price,
                report.usage.input_tokens,
                report.usage.output_tokens,
            ),
            estimated_calls: u64::from(report.estimated),
        };
        let mut after = Vec::with_capacity(keys.len());
        for (key, mut totals) in keys.iter().cloned().zip(before.iter().copied()) {
            totals.add(&call);
            self.totals.insert(key.clone(), totals);
            after.push((key, totals));
        }
        let (run_after, month_after) = (after[0].1, after[3].1);
        let warnings = budget::warnings_crossed(
            &self.limits.for_run(report.run_limit_cents),
            (run_before.cost_microcents, run_after.cost_microcents),
            (before[3].cost_microcents, month_after.cost_microcents),
            &period,
        );
        let mut adds: Vec<(String, CostTotals)> =
            keys.iter().map(|key| (key.clone(), call)).collect();
        // What the console charts, each model's spending per day: only added to, never
        // checked, so it is neither read back nor kept here.
        adds.push((format!("model-day:{}:{}", period.day, report.model), call));
        self.persist(myself, &report.session_id, adds);
        Ok(Receipt {
            call_microcents: call.cost_microcents,
            run: run_after,
            price,
            price_source,
            warnings,
            next_call: self.authorize(&report.run_id, report.run_limit_cents).await,
            store_error: self.commit_error.take(),
        })
    }

    /// Hands the amounts to add to the store's writer, with any whose last write failed; a
    /// failure comes back as `CommitFailed`.
    fn persist(
        &mut self,
        myself: &ActorRef<CostLedgerMsg>,
        session: &SessionId,
        mut adds: Vec<(String, CostTotals)>,
    ) {
        for (key, unwritten) in self.unwritten.drain() {
            match adds.iter_mut().find(|(k, _)| *k == key) {
                Some((_, add)) => add.add(&unwritten),
                None => adds.push((key, unwritten)),
            }
        }
        let batch = WriteBatch::of(
            session.clone(),
            adds.iter().map(|(key, add)| Write::Cost {
                key: key.clone(),
                add: *add,
            }),
        );
        let me = myself.clone();
        let notify = Callback::new(
            move |result: Result<(), StoreError>| {
                if let Err(error) = result {
                    if me
                        .cast(CostLedgerMsg::CommitFailed { adds, error })
                        .is_err()
                    {
                        tracing::error!("a failed write of the cost totals found no ledger");
                    }
                }
            },
            || Err(crate::checkpoint::writer_gone()),
        );
        self.checkpoint.record(batch, notify);
    }
}
