//! Shell completions and the man page, generated from the same definitions as `--help`, so
//! they can never tell another story.

use crate::cli::Cli;
use crate::exit::EXIT_RUN_FAILED;
use clap::CommandFactory;
use std::io::Write;
use std::process::ExitCode;

/// Prints the completion script for `shell`.
pub fn completions(shell: clap_complete::Shell) -> ExitCode {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "ryvos", &mut script);
    crate::out::bytes(&script);
    ExitCode::SUCCESS
}

/// Prints the man page of `ryvos` and its subcommands, as roff.
pub fn manpage() -> ExitCode {
    let command = Cli::command();
    let mut page = Vec::new();
    let rendered = clap_mangen::Man::new(command.clone())
        .render(&mut page)
        .and_then(|()| {
            // One page for the whole tool: each subcommand's section after the main one.
            for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
                writeln!(page, ".SH \"RYVOS {}\"", sub.get_name().to_uppercase())?;
                let sub = clap_mangen::Man::new(sub.clone());
                sub.render_description_section(&mut page)?;
                sub.render_options_section(&mut page)?;
            }
            Ok(())
        });
    match rendered {
        Ok(()) => {
            crate::out::bytes(&page);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ryvos: cannot render the man page: {e}");
            ExitCode::from(EXIT_RUN_FAILED)
        }
    }
}
