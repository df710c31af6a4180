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
use std::collections::{HashMap, HashSet};

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
    /// Keys whose last write failed: kept in memory and written again with the next batch.
    unwritten: HashSet<String>,
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
            store: args.store,
            checkpoint: args.checkpoint,
            prices: PriceBook::new(
                &args.budget.pricing_overrides,
                args.local_models.iter().map(String::as_str),
            ),
            limits: Limits::new(&args.budget),
            totals: HashMap::new(),
            unwritten: HashSet::new(),
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
            CostLedgerMsg::Authorize { run_id, reply } => {
                let authorization = state.authorize(&run_id).await;
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
                    if !state.unwritten.contains(&key) {
                        state.totals.remove(&key);
                    }
                }
            }
            CostLedgerMsg::CommitFailed { keys, error } => {
                tracing::error!("the cost ledger's totals could not be stored: {error}");
                state.unwritten.extend(keys);
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

    async fn authorize(&mut self, run_id: &RunId) -> Authorization {
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
                &self.limits,
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
        let keys = [
            run_key(&report.run_id),
            session_key(&report.session_id),
            format!("day:{}", period.day),
            format!("month:{}", period.month),
        ];
        let (price, price_source) = self.prices.price_of(&report.model);
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
                next_call: self.authorize(&report.run_id).await,
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
            &self.limits,
            (run_before.cost_microcents, run_after.cost_microcents),
            (before[3].cost_microcents, month_after.cost_microcents),
            &period,
        );
        self.persist(myself, &report.session_id, after);
        Ok(Receipt {
            call_microcents: call.cost_microcents,
            run: run_after,
            price,
            price_source,
            warnings,
            next_call: self.authorize(&report.run_id).await,
            store_error: self.commit_error.take(),
        })
    }

    /// Hands the new totals to the store's writer, with any whose last write failed; a failure
    /// comes back as `CommitFailed`.
    fn persist(
        &mut self,
        myself: &ActorRef<CostLedgerMsg>,
        session: &SessionId,
        mut totals: Vec<(String, CostTotals)>,
    ) {
        for key in self.unwritten.drain() {
            if let Some(kept) = self.totals.get(&key) {
                if !totals.iter().any(|(k, _)| *k == key) {
                    totals.push((key, *kept));
                }
            }
        }
        let keys: Vec<String> = totals.iter().map(|(k, _)| k.clone()).collect();
        let batch = WriteBatch::of(
            session.clone(),
            totals
                .into_iter()
                .map(|(key, totals)| Write::Cost { key, totals }),
        );
        let me = myself.clone();
        let notify = Callback::new(
            move |result: Result<(), StoreError>| {
                if let Err(error) = result {
                    if me
                        .cast(CostLedgerMsg::CommitFailed { keys, error })
                        .is_err()
                    {
                        tracing::error!("a failed write of the cost totals found no ledger");
                    }
                }
            },
            || Err(crate::checkpoint::writer_gone()),
        );
        self.checkpoint.append(batch, notify);
    }
}
