//! Printing to stdout as command-line tools do: when the reader goes away
//! (`ryvos sessions | head -1`), the program ends quietly with status 0, as ripgrep does,
//! instead of panicking.

use std::io::Write;

/// Prints a line to stdout.
macro_rules! outln {
    () => {
        $crate::out::line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::out::line(format_args!($($arg)*))
    };
}
pub(crate) use outln;

/// Writes `args` and a newline to stdout; a closed stdout ends the program.
pub fn line(args: std::fmt::Arguments) {
    let mut out = std::io::stdout().lock();
    let written = out
        .write_fmt(args)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    ended_if_failed(written);
}

/// Writes `bytes` to stdout as they are; a closed stdout ends the program.
pub fn bytes(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    ended_if_failed(out.write_all(bytes).and_then(|()| out.flush()));
}

fn ended_if_failed(written: std::io::Result<()>) {
    if let Err(e) = written {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("ryvos: writing to stdout: {e}");
        std::process::exit(1);
    }
}
