//! Colour for what `ryvos` tells a person on stderr. Written through anstream, which leaves
//! the colour out where it does not belong: `NO_COLOR` set, or stderr not a terminal (a log,
//! a pipe, a script reading it).

use anstyle::{AnsiColor, Style};

/// A tool call and its end.
pub const TOOL: Style = AnsiColor::Cyan.on_default();
/// An approval question, a warning, a budget.
pub const ASK: Style = AnsiColor::Yellow.on_default().bold();
/// An error, a denial.
pub const FAIL: Style = AnsiColor::Red.on_default().bold();
/// What is said by the way: checkpoints, the end of a run.
pub const QUIET: Style = Style::new().dimmed();

/// `text` in `style`.
pub fn paint(style: Style, text: &str) -> String {
    format!("{style}{text}{style:#}")
}

/// Writes `line` (and a newline) to stderr in one system call (stderr is unbuffered, and a
/// line written in pieces interleaves with others), its colour stripped where it does not
/// belong. A failure to write stderr has nowhere left to be reported: it is ignored, and the
/// run goes on (`eprintln!` would panic and take an in-process run down with it).
pub fn note_line(line: &str) {
    write_stderr("", line, "\n");
}

/// Writes `text` over the line the cursor is on (erased first), without a newline: a line
/// drawn again in place, or (empty) erased. Written as [`note_line`] writes.
pub fn over_line(text: &str) {
    write_stderr(ERASE_LINE, text, "");
}

/// Back to the line's start, and the line erased.
pub const ERASE_LINE: &str = "\r\x1b[2K";

/// `control` (kept whatever the colour choice: it moves the cursor), `text` (its colour
/// stripped where it does not belong) and `end`, to stderr in one system call.
fn write_stderr(control: &str, text: &str, end: &str) {
    use std::io::Write;
    let text = match coloured() {
        true => std::borrow::Cow::Borrowed(text),
        false => std::borrow::Cow::Owned(anstream::adapter::strip_str(text).to_string()),
    };
    let written = [control, &text, end].concat();
    std::io::stderr().write_all(written.as_bytes()).ok();
}

/// Whether stderr shows colour, as anstream decides it (`NO_COLOR`, `CLICOLOR_FORCE`, a
/// terminal or not).
pub fn coloured() -> bool {
    static COLOURED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *COLOURED.get_or_init(|| {
        anstream::AutoStream::choice(&std::io::stderr()) != anstream::ColorChoice::Never
    })
}
