//! Which steps a hook runs for: Claude Code's matchers. Empty or `*` matches everything; a
//! name, or names joined by `|` or `,`, match exactly; anything else is a regular expression,
//! found anywhere in the name as Claude Code's are (`^Edit$` to anchor it).

/// A hook's matcher, compiled.
#[derive(Clone, Debug)]
pub(crate) enum Matcher {
    All,
    Names(Vec<String>),
    Pattern(regex::Regex),
}

impl Matcher {
    /// The matcher `text` writes, or why it is not one.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() || text == "*" {
            return Ok(Matcher::All);
        }
        let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '|' | ',' | ' ');
        if text.chars().all(plain) {
            let names = text
                .split(['|', ','])
                .map(|n| n.trim().to_owned())
                .filter(|n| !n.is_empty())
                .collect();
            return Ok(Matcher::Names(names));
        }
        regex::Regex::new(text)
            .map(Matcher::Pattern)
            .map_err(|e| format!("matcher '{text}' is not a regular expression: {e}"))
    }

    /// Whether it matches any of `names` (a tool has its own name and Claude Code's).
    pub(crate) fn matches(&self, names: &[&str]) -> bool {
        match self {
            Matcher::All => true,
            Matcher::Names(listed) => names.iter().any(|n| listed.iter().any(|l| l == n)),
            Matcher::Pattern(re) => names.iter().any(|n| re.is_match(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Matcher;

    #[test]
    fn matchers_are_claude_codes() {
        let all = Matcher::parse("").unwrap();
        assert!(all.matches(&["anything"]));
        assert!(Matcher::parse("*").unwrap().matches(&["x"]));
        let list = Matcher::parse("Write | Edit").unwrap();
        assert!(list.matches(&["edit", "Edit"]));
        assert!(!list.matches(&["EditNotebook"]));
        let exact = Matcher::parse("bash").unwrap();
        assert!(exact.matches(&["bash"]) && !exact.matches(&["bashful"]));
        let re = Matcher::parse("mcp__.*").unwrap();
        assert!(re.matches(&["mcp__github__search"]) && !re.matches(&["bash"]));
        let anchored = Matcher::parse("^Edit$").unwrap();
        assert!(anchored.matches(&["Edit"]) && !anchored.matches(&["NotebookEdit"]));
        assert!(Matcher::parse("Edit.*").unwrap().matches(&["NotebookEdit"]));
        assert!(Matcher::parse("(")
            .unwrap_err()
            .contains("not a regular expression"));
    }
}
