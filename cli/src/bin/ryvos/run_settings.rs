//! The settings a run through the daemon takes for itself. `ryvosd` hosts runs on its own
//! config, but a run may choose its model and its limits (`--model`, `--max-turns` and these
//! keys given with `-c`); any other key would be ignored there, so it is refused, by name.

use ryvos::config::{Config, Override};
use ryvos::RunSettings;

/// The keys a run may set for itself, and the flag that stands for each, if any.
const PER_RUN_KEYS: [(&str, &str); 5] = [
    ("model.model", "--model"),
    ("agent.max_turns", "--max-turns"),
    ("agent.max_duration_secs", ""),
    ("budget.per_run_limit_cents", ""),
    ("budget.on_limit", "--no-park"),
];

/// The run's own settings among `given` (their values as `config` holds them, checked as
/// the file's are); why the daemon cannot take them, when some key is the daemon's alone.
pub fn for_the_daemon(config: &Config, given: &[Override]) -> Result<RunSettings, String> {
    let keys: Vec<String> = given.iter().map(Override::key).collect();
    let daemon_wide: Vec<&str> = keys
        .iter()
        .map(String::as_str)
        .filter(|key| !PER_RUN_KEYS.iter().any(|(k, _)| k == key))
        .collect();
    if !daemon_wide.is_empty() {
        let allowed: Vec<String> = PER_RUN_KEYS
            .iter()
            .map(|(key, flag)| match flag {
                &"" => (*key).to_owned(),
                flag => format!("{key} ({flag})"),
            })
            .collect();
        return Err(format!(
            "ryvosd hosts runs on this RYVOS_HOME with its own config, so -c {} would be \
             ignored; a run may set only {}. Put the others in the daemon's config file and \
             restart it, or stop it with `ryvos shutdown` to run in-process with them",
            daemon_wide.join(", -c "),
            allowed.join(", ")
        ));
    }
    Ok(per_run(config, given))
}

/// The run's own settings among `given`, their values as `config` holds them; the other keys
/// are left to the config (in-process, where they apply). On both roads the run records them,
/// so a `continue` or a resume goes on with them.
pub fn per_run(config: &Config, given: &[Override]) -> RunSettings {
    let keys: Vec<String> = given.iter().map(Override::key).collect();
    let set = |key: &str| keys.iter().any(|k| k == key);
    RunSettings {
        model: set("model.model").then(|| config.model.model.clone()),
        max_turns: set("agent.max_turns").then_some(config.agent.max_turns),
        max_duration_secs: set("agent.max_duration_secs").then_some(config.agent.max_duration_secs),
        per_run_limit_cents: set("budget.per_run_limit_cents")
            .then_some(config.budget.per_run_limit_cents),
        on_limit: set("budget.on_limit").then_some(config.budget.on_limit),
    }
}
