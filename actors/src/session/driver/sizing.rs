//! The context's size, as every decision about it takes it: bounded while no decision is near
//! (no tokenizer needed), counted exactly once one is, and the server's own count of the last
//! request where that is smaller; the system prompt and the tools' specs with it.

use super::context::FLUSH_PERCENT;
use super::Driver;

impl Driver {
    /// The smallest context at which its size decides something: the memory flush, the
    /// Guardian's warning and its hard limit (where pruning starts).
    fn decision_floor(&self) -> u64 {
        let agent = &self.session.services.agent;
        let guardian = &agent.guardian;
        let percent = u64::from(guardian.token_budget_soft.min(guardian.token_budget_hard))
            .min(FLUSH_PERCENT);
        self.window().saturating_mul(percent) / 100
    }

    /// Counts the context exactly once its bound reaches [`Self::decision_floor`], so that
    /// every decision is made on counts; from half of it the tokenizer is built in the
    /// background, so that the count rarely waits for it.
    pub(super) fn count_near_limits(&mut self) {
        let floor = self.decision_floor();
        let bound = self.context_tokens();
        if self.is_counted() || bound < floor / 2 {
            return;
        }
        if bound < floor {
            return crate::tokens::warm_up();
        }
        self.count_exactly();
    }

    /// Whether the context's sizes are all counted, none only bounded.
    pub(super) fn is_counted(&self) -> bool {
        self.session.history.is_counted() && self.run.system().size().counted().is_some()
    }

    /// Counts every size only bounded so far: the conversation's and the system prompt's.
    pub(super) fn count_exactly(&mut self) {
        if self.is_counted() {
            return;
        }
        crate::tokens::blocking(|| {
            self.session.history.count_exactly();
            let run = &mut self.run;
            run.count_system_exactly();
        })
    }

    /// The conversation's size as the next request would carry it, as the model's server
    /// counts it (see [`Driver::as_served`]): counted, or (while no decision depends on it)
    /// bounded; the server's own last count where it is smaller.
    pub(super) fn context_tokens(&self) -> u64 {
        let history = &self.session.history;
        let bound = self.as_served(history.total_tokens() + self.system_tokens());
        if self.is_counted() {
            return bound;
        }
        history
            .measured_tokens(self.system_tokens())
            .map_or(bound, |measured| measured.min(bound))
    }

    /// The next request's size as Ryvos's tokenizer counts it (the conversation, the system
    /// prompt and the tools' specs), all of it counted: what a server's count is set against.
    pub(super) fn raw_request_tokens(&self) -> u64 {
        let history = &self.session.history;
        history.total_tokens() + self.system_tokens() + self.run.tools().specs_tokens()
    }

    /// The system prompt's size: counted, or bounded.
    pub(super) fn system_tokens(&self) -> u64 {
        self.run.system().size().tokens().into()
    }

    /// What the next request weighs, counted: the conversation, the system prompt and the
    /// tools' specs. A call cut after the server began answering is billed this much input.
    pub(super) fn request_tokens(&mut self) -> u64 {
        self.count_exactly();
        self.context_tokens() + self.run.tools().specs_tokens()
    }

    /// What the next request weighs, when every part of it is counted already.
    pub(super) fn counted_request_tokens(&self) -> Option<u64> {
        // The tools' specs are counted with the tokenizer: only once it is needed anyway.
        let specs = || self.run.tools().specs_tokens();
        self.is_counted().then(|| self.context_tokens() + specs())
    }
}
