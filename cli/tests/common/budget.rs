//! A priced model and a run that outspends its budget, for the tests of parked runs.

use ryvos::config::{Config, Pricing};
use ryvos_testkit::Reply;

/// Each call costs 70 cents (1,000 input and 1,000 output tokens at these prices); a run may
/// spend 50. As a config file's sections.
pub const PRICED: &str = "[budget]\nper_run_limit_cents = 50\n\
    [budget.pricing_overrides.scripted]\ninput_per_1m = 20000.0\noutput_per_1m = 50000.0\n";

/// [`PRICED`], set on `config`.
pub fn priced(config: &mut Config) {
    config.budget.per_run_limit_cents = 50;
    config.budget.pricing_overrides.insert(
        "scripted".into(),
        Pricing {
            input_per_1m: 20_000.0,
            output_per_1m: 50_000.0,
        },
    );
}

/// A turn that appends `line` to `log.txt` (call `id`), at 70 cents.
pub fn append(id: &str, line: &str) -> Reply {
    let command = format!(r#"{{"command": "echo {line} >> log.txt"}}"#);
    Reply::tool_calls(&[(id, "bash", &command)]).usage(Some((1000, 1000)))
}

/// Two turns that each append a line to `log.txt`, then the answer: a run under [`PRICED`]
/// parks after the first (70 cents of its 50).
pub fn two_appends() -> Vec<Reply> {
    vec![
        append("b1", "one"),
        append("b2", "two"),
        Reply::text(&["Both lines are written."]).usage(Some((1000, 1000))),
    ]
}
