//! Which lines of a git config run a program, and the config with them commented out.

/// Config keys (section, key; `*` for any subsection) whose value git runs as a program, or
/// that bring in config from elsewhere. Every key of `[pager]` runs one too, as does an alias
/// that starts with `!`.
const RUNS_A_PROGRAM: &[(&str, &str)] = &[
    ("core", "hookspath"),
    ("core", "fsmonitor"),
    ("core", "sshcommand"),
    ("core", "pager"),
    ("core", "editor"),
    ("core", "askpass"),
    ("sequence", "editor"),
    ("diff", "external"),
    ("diff.*", "textconv"),
    ("diff.*", "command"),
    ("merge.*", "driver"),
    ("filter.*", "clean"),
    ("filter.*", "smudge"),
    ("filter.*", "process"),
    ("credential", "helper"),
    ("credential.*", "helper"),
    ("gpg", "program"),
    ("gpg.*", "program"),
    ("core", "gitproxy"),
    ("core", "alternaterefscommand"),
    ("remote.*", "uploadpack"),
    ("remote.*", "receivepack"),
    ("difftool.*", "cmd"),
    ("mergetool.*", "cmd"),
    ("interactive", "difffilter"),
    ("include", "path"),
    ("includeif.*", "path"),
    ("uploadpack", "packobjectshook"),
];

/// `text` (a git config) with every line that sets a key of [`RUNS_A_PROGRAM`], or an alias
/// that runs a shell command (`!…`), commented out; and those keys, as `section.key`.
pub(super) fn comment_out_programs(text: &str) -> (String, Vec<String>) {
    let mut section = String::new();
    let mut keys = Vec::new();
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut trimmed = line.trim();
        let mut kept = line;
        if trimmed.starts_with('[') {
            section = section_name(trimmed);
            // A key may follow the header on its line (`[core] fsmonitor = …`).
            let (header, rest) =
                trimmed.split_at(trimmed.find(']').map_or(trimmed.len(), |i| i + 1));
            if rest.trim().is_empty() {
                out.push_str(line);
                out.push('\n');
                continue;
            }
            out.push_str(header);
            out.push('\n');
            trimmed = rest.trim();
            kept = trimmed;
        }
        if let Some(key) = key_of(trimmed) {
            let value = trimmed.split_once('=').map(|(_, v)| v.trim()).unwrap_or("");
            let runs = (section == "alias" && value.trim_matches('"').starts_with('!'))
                || section == "pager"
                || section.starts_with("pager.")
                || RUNS_A_PROGRAM
                    .iter()
                    .any(|(s, k)| *k == key && (*s == section || matches_subsection(s, &section)));
            if runs {
                keys.push(format!("{section}.{key}"));
                out.push_str("# disabled by ryvos: a command the model ran set this: ");
                out.push_str(trimmed);
                out.push('\n');
                continue;
            }
        }
        out.push_str(kept);
        out.push('\n');
    }
    (out, keys)
}

/// `[filter "lfs"]` → `filter.lfs`; `[core]` → `core` (lowercased but for the subsection).
fn section_name(header: &str) -> String {
    let inner = header
        .trim_start_matches('[')
        .split(']')
        .next()
        .unwrap_or("");
    match inner.split_once(char::is_whitespace) {
        Some((name, sub)) => format!("{}.{}", name.to_lowercase(), sub.trim().trim_matches('"')),
        None => inner.to_lowercase(),
    }
}

/// The key a config line sets, lowercased (`key = value`, or a bare `key` meaning true).
fn key_of(line: &str) -> Option<String> {
    if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
        return None;
    }
    let key = line.split('=').next()?.trim();
    Some(key.to_lowercase()).filter(|k| k.chars().all(|c| c.is_alphanumeric() || c == '-'))
}

/// Whether `pattern` (`filter.*`) covers `section` (`filter.lfs`).
fn matches_subsection(pattern: &str, section: &str) -> bool {
    match pattern.strip_suffix(".*") {
        Some(name) => section
            .strip_prefix(name)
            .is_some_and(|rest| rest.starts_with('.')),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_that_run_programs_are_commented_out_and_nothing_else() {
        let config = "[core]\n\tbare = false\n\tfsmonitor = touch /tmp/x\n\
                      [alias]\n\tst = status\n\tevil = !touch /tmp/x\n\
                      [filter \"lfs\"]\n\tsmudge = sh -c x\n[user]\n\tname = M\n\
                      [core] hooksPath = elsewhere\n[credential \"https://x\"]\n\thelper = !x\n";
        let (out, keys) = comment_out_programs(config);
        assert_eq!(
            keys,
            [
                "core.fsmonitor",
                "alias.evil",
                "filter.lfs.smudge",
                "core.hookspath",
                "credential.https://x.helper"
            ]
        );
        assert!(out.contains("[core]\n# disabled by ryvos"), "{out}");
        assert!(out.contains("bare = false") && out.contains("st = status"));
        assert!(out.contains("# disabled by ryvos: a command the model ran set this: fsmonitor"));
        assert!(!out.lines().any(|l| l.trim_start().starts_with("evil")));
        assert!(out.contains("name = M"));
    }
}
