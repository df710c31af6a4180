//! What a model call costs: a built-in table of published prices, overridable per model.
//!
//! Prices are in cents per million tokens. A model is matched by name, or by the name it extends
//! with a date or version, so a dated variant (`gpt-4o-mini-2024-07-18`) takes its family's
//! price while `o1-pro` is not priced as `o1`. A model served on this machine (its endpoint on
//! loopback) with no price of its own is free. Any other model with no known price is never
//! free: budget checks price it at [`UNKNOWN_MODEL_PRICE`] and the run is told so.

use crate::config::Pricing;
use std::collections::{BTreeMap, BTreeSet};

/// The price assumed for a model nobody priced: as dear as the dearest model in the table,
/// so that a budget errs toward stopping early.
pub(super) const UNKNOWN_MODEL_PRICE: Pricing = Pricing {
    input_per_1m: 1500.0,
    output_per_1m: 7500.0,
};

/// What a local model costs.
const FREE: Pricing = Pricing {
    input_per_1m: 0.0,
    output_per_1m: 0.0,
};

/// Published list prices (standard tier), cents per million input / output tokens.
const BUILT_IN: &[(&str, f64, f64)] = &[
    ("gpt-5", 125.0, 1000.0),
    ("gpt-5-mini", 25.0, 200.0),
    ("gpt-5-nano", 5.0, 40.0),
    ("gpt-4.1", 200.0, 800.0),
    ("gpt-4.1-mini", 40.0, 160.0),
    ("gpt-4.1-nano", 10.0, 40.0),
    ("gpt-4o", 250.0, 1000.0),
    ("gpt-4o-mini", 15.0, 60.0),
    ("gpt-4-turbo", 1000.0, 3000.0),
    ("gpt-3.5-turbo", 50.0, 150.0),
    ("o1", 1500.0, 6000.0),
    ("o3", 200.0, 800.0),
    ("o3-mini", 110.0, 440.0),
    ("o4-mini", 110.0, 440.0),
    ("claude-opus-4", 1500.0, 7500.0),
    ("claude-opus-4-1", 1500.0, 7500.0),
    ("claude-opus-4-5", 500.0, 2500.0),
    ("claude-sonnet-4", 300.0, 1500.0),
    ("claude-sonnet-4-5", 300.0, 1500.0),
    ("claude-haiku-4-5", 100.0, 500.0),
    ("claude-3-7-sonnet", 300.0, 1500.0),
    ("claude-3-5-sonnet", 300.0, 1500.0),
    ("claude-3-5-haiku", 80.0, 400.0),
    ("claude-3-opus", 1500.0, 7500.0),
    ("claude-3-haiku", 25.0, 125.0),
];

/// Where a price came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PriceSource {
    /// `[budget.pricing_overrides]`.
    Override,
    /// The built-in table.
    BuiltIn,
    /// A model served on this machine, which nobody priced: free.
    Local,
    /// Nobody priced the model: [`UNKNOWN_MODEL_PRICE`] is assumed.
    Unknown,
}

/// The prices in force: the built-in table with the configured overrides on top.
#[derive(Clone, Debug)]
pub(super) struct PriceBook {
    prices: BTreeMap<String, (Pricing, PriceSource)>,
    /// Models served on loopback: free when neither table prices them. A published price still
    /// wins, so a local proxy to a paid API (`gpt-4o` through 127.0.0.1) is still counted.
    local: BTreeSet<String>,
}

impl PriceBook {
    /// The built-in table, with `overrides` replacing or adding models; `local` models are
    /// free unless one of the two prices them.
    pub(super) fn new<'a>(
        overrides: &BTreeMap<String, Pricing>,
        local: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        let mut prices: BTreeMap<String, (Pricing, PriceSource)> = BUILT_IN
            .iter()
            .map(|&(model, input_per_1m, output_per_1m)| {
                let price = Pricing {
                    input_per_1m,
                    output_per_1m,
                };
                (model.to_owned(), (price, PriceSource::BuiltIn))
            })
            .collect();
        for (model, price) in overrides {
            prices.insert(model.clone(), (price.clone(), PriceSource::Override));
        }
        let local = local.into_iter().map(str::to_owned).collect();
        Self { prices, local }
    }

    /// The price of `model`: its own entry, else the entry it extends with a date or version
    /// (`gpt-4o-2024-08-06`, `claude-opus-4-5-20251101`, `…-latest`), else the unknown-model
    /// price, or nothing for a local model (one `served_locally`, or named local when the
    /// ledger started). Any other suffix (`o1-pro`) is another model, with
    /// a price of its own.
    pub(super) fn price_of(&self, model: &str, served_locally: bool) -> (Pricing, PriceSource) {
        let mut candidate = model;
        loop {
            if let Some((price, source)) = self.prices.get(candidate) {
                return (price.clone(), *source);
            }
            match candidate.rfind('-') {
                Some(cut) if is_version(&candidate[cut + 1..]) => candidate = &candidate[..cut],
                _ if served_locally || self.local.contains(model) => {
                    return (FREE, PriceSource::Local)
                }
                _ => return (UNKNOWN_MODEL_PRICE, PriceSource::Unknown),
            }
        }
    }
}

/// A segment naming a release of a model rather than another model: digits, or `latest`.
fn is_version(segment: &str) -> bool {
    segment == "latest" || (!segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()))
}

/// The cost of a call, in millionths of a cent (exact for whole-cent prices).
pub(super) fn cost_microcents(price: &Pricing, input_tokens: u64, output_tokens: u64) -> u64 {
    let cost =
        input_tokens as f64 * price.input_per_1m + output_tokens as f64 * price.output_per_1m;
    cost.round().max(0.0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dated_variants_take_their_family_price_and_overrides_win() {
        let mut overrides = BTreeMap::new();
        overrides.insert(
            "gpt-4o".to_owned(),
            Pricing {
                input_per_1m: 1.0,
                output_per_1m: 2.0,
            },
        );
        let book = PriceBook::new(&overrides, []);
        let (mini, source) = book.price_of("gpt-4o-mini-2024-07-18", false);
        assert_eq!((mini.input_per_1m, source), (15.0, PriceSource::BuiltIn));
        let (big, source) = book.price_of("gpt-4o-2024-08-06", false);
        assert_eq!((big.input_per_1m, source), (1.0, PriceSource::Override));
        let (opus, _) = book.price_of("claude-opus-4-5-20251101", false);
        assert_eq!(opus.input_per_1m, 500.0);
        assert_eq!(
            book.price_of("claude-3-5-haiku-latest", false)
                .0
                .input_per_1m,
            80.0
        );
        for dearer in ["o1-pro", "gpt-5-pro", "o3-pro-2025-06-10"] {
            assert_eq!(
                book.price_of(dearer, false).1,
                PriceSource::Unknown,
                "{dearer} is not priced as its cheaper namesake"
            );
        }
        assert_eq!(
            book.price_of("my-local-model", false).1,
            PriceSource::Unknown,
            "an unknown model is never free"
        );
    }

    #[test]
    fn local_models_are_free_unless_priced() {
        let mut overrides = BTreeMap::new();
        overrides.insert(
            "priced-local".to_owned(),
            Pricing {
                input_per_1m: 1.0,
                output_per_1m: 1.0,
            },
        );
        let book = PriceBook::new(&overrides, ["gemma3", "priced-local", "gpt-4o"]);
        let (price, source) = book.price_of("gemma3", false);
        assert_eq!(
            (price.input_per_1m, price.output_per_1m, source),
            (0.0, 0.0, PriceSource::Local)
        );
        assert_eq!(
            book.price_of("priced-local", false).1,
            PriceSource::Override
        );
        assert_eq!(
            book.price_of("gpt-4o", false).1,
            PriceSource::BuiltIn,
            "a local proxy to a paid model is still counted"
        );
        assert_eq!(book.price_of("llama3", false).1, PriceSource::Unknown);
        // A model a run chose, on the local endpoint: free, unless priced.
        assert_eq!(book.price_of("llama3", true).1, PriceSource::Local);
        assert_eq!(book.price_of("gpt-4o", true).1, PriceSource::BuiltIn);
    }

    #[test]
    fn costs_are_exact_for_whole_cent_prices() {
        let price = Pricing {
            input_per_1m: 15.0,
            output_per_1m: 60.0,
        };
        // 1,000,000 input tokens at 15 cents per million is 15 cents.
        assert_eq!(cost_microcents(&price, 1_000_000, 0), 15_000_000);
        assert_eq!(cost_microcents(&price, 100, 50), 100 * 15 + 50 * 60);
    }
}
