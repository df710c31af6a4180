//! Fitting the conversation to the model as its server really is. Ryvos's tokenizer is not
//! every model's, and `max_context_tokens` is not every server's window: what the server
//! reports is learned and kept with the session (see [`ModelFit`]): how it counts (the ratio of
//! its input count to Ryvos's count of the same request), and its window when an overflow says
//! it is smaller. A request it refuses as too large is answered by making room (the largest
//! tool results trimmed, then the oldest messages compacted) and asking again, a few times a
//! turn at most: a session is never left in a state that fails every resume.

use super::context::PRUNE_TARGET_PERCENT;
use super::{Driver, Step};
use crate::event::EventKind;
use crate::provider::overflow::Overflow;
use ryvos_protocol::records::ModelFit;

/// Times a turn's request may be refused as too large before the run fails.
const MAX_OVERFLOWS: u32 = 3;

/// A trimmed tool result keeps this share of the window, at most.
const TRIMMED_KEEP_DIVISOR: u64 = 8;

impl Driver {
    /// The window the conversation must fit, as the model's server counts: `max_context_tokens`,
    /// or the model's own where its server said it is smaller.
    pub(super) fn window(&self) -> u64 {
        let max = self.session.services.agent.max_context_tokens;
        self.fit()
            .and_then(|fit| fit.window)
            .map_or(max, |window| window.min(max))
    }

    /// What the session learned of the model asked now, if anything.
    fn fit(&self) -> Option<&ModelFit> {
        let model = self.run.call().model();
        self.session.model_fit.as_ref().filter(|f| f.model == model)
    }

    /// `counted` tokens (Ryvos's count) as the model's server counts them.
    pub(super) fn as_served(&self, counted: u64) -> u64 {
        self.fit().map_or(counted, |fit| fit.scale(counted))
    }

    /// `served` tokens (the server's count) as Ryvos counts them.
    pub(super) fn as_counted(&self, served: u64) -> u64 {
        self.fit().map_or(served, |fit| {
            served.saturating_mul(1000) / u64::from(fit.tokens_per_1000.max(1))
        })
    }

    /// The fit of the model asked now, made if there is none.
    fn fit_mut(&mut self) -> &mut ModelFit {
        let model = self.run.call().model().to_owned();
        let fit = self
            .session
            .model_fit
            .get_or_insert_with(|| ModelFit::of(&model));
        if fit.model != model {
            *fit = ModelFit::of(&model);
        }
        fit
    }

    /// Takes in the server's count of the request just answered (`server` input tokens),
    /// where Ryvos had counted it exactly.
    pub(super) fn learn_count(&mut self, server: u64) {
        if let Some(counted) = self.run.call_mut().take_counted() {
            self.fit_mut().learn(server, counted);
        }
    }

    /// The model refused the request as too large: what its server said is learned, room is
    /// made, and the call is to be made again; the run fails when no room can be made, or
    /// after [`MAX_OVERFLOWS`] refusals in a turn.
    pub(super) async fn make_room_for_overflow(&mut self, overflow: Overflow) -> Step<()> {
        let overflows = self.run.call_mut().overflowed();
        let max = self.session.services.agent.max_context_tokens;
        if let Some(window) = overflow.window.filter(|w| *w < max) {
            self.fit_mut().window = Some(window);
        }
        if let Some(server) = overflow.prompt_tokens {
            self.learn_count(server);
        }
        let why = &overflow.message;
        if overflows > MAX_OVERFLOWS {
            return Err(self.failure(format!(
                "the request is too large for the model's context window ({why}), still after \
                 making room {MAX_OVERFLOWS} times; lower [agent] max_context_tokens or min_tail"
            )));
        }
        self.count_exactly();
        let window = self.window();
        // The server's count, where it gave one, is the size it refused.
        let size = self
            .context_tokens()
            .max(overflow.prompt_tokens.unwrap_or(0));
        let target = match window.saturating_mul(PRUNE_TARGET_PERCENT) / 100 {
            // Counted to fit, refused all the same: the count is off; aim lower.
            target if target >= size => size.saturating_mul(PRUNE_TARGET_PERCENT) / 100,
            target => target,
        };
        self.run.events().emit(EventKind::Warning {
            message: format!(
                "the model refused the request as too large for its context window ({why}); \
                 room is made (the largest tool results trimmed, then the oldest messages \
                 compacted) and the call is made again. The window is {window} tokens"
            ),
        });
        let before = self.context_tokens();
        self.trim_largest_results(size.saturating_sub(target), window);
        if self.context_tokens() > target {
            if let Some(cut) = self.cut_down_to(target) {
                self.compact(cut).await?;
            }
        }
        if self.context_tokens() >= before {
            return Err(self.failure(format!(
                "the request is too large for the model's context window and no room can be \
                 made ({why}); lower [agent] max_context_tokens or min_tail"
            )));
        }
        Ok(())
    }

    /// Trims the largest tool results until about `need` tokens (as the server counts) are
    /// freed, each kept to an eighth of `window`; says which.
    fn trim_largest_results(&mut self, need: u64, window: u64) {
        let keep = self.as_counted(window / TRIMMED_KEEP_DIVISOR).max(64);
        let need = self.as_counted(need);
        let note = |bytes: usize| {
            format!(
                "[… {bytes} more bytes trimmed by Ryvos: this result did not fit the model's \
                 context window ({window} tokens). Read only the part you need: read with \
                 offset and limit, grep, or head.]"
            )
        };
        let trimmed = self.session.history.trim_results(need, keep, note);
        if trimmed.is_empty() {
            return;
        }
        let listed: Vec<String> = trimmed
            .iter()
            .map(|(tool, before, after)| format!("{tool} ({before} → {after} tokens)"))
            .collect();
        self.run.events().emit(EventKind::Warning {
            message: format!(
                "tool results too large for the model's window were trimmed in the context \
                 (the store keeps them whole): {}",
                listed.join(", ")
            ),
        });
    }
}
