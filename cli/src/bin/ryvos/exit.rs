//! The exit codes of `ryvos`: 0 the run completed (or the command succeeded: `stop` ended its
//! run); 1 the run ended otherwise, or the command failed; 2 bad usage or config; 3 the daemon was lost or could not
//! be reached; 4 the run parked where nothing waits through it (in-process).

use ryvos::RunStatus;

pub const EXIT_RUN_FAILED: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_DAEMON: u8 = 3;
pub const EXIT_PARKED: u8 = 4;

/// How a followed run's end becomes the exit code: [`exit_for`] for a run asked to go on;
/// [`stopped`] for one asked to end.
pub type ExitFor = fn(RunStatus) -> u8;

/// The exit code of `ryvos stop`, whose run ended as asked (whatever status it ended with).
pub fn stopped(_status: RunStatus) -> u8 {
    0
}

/// The exit code of a run that ended with `status`.
pub fn exit_for(status: RunStatus) -> u8 {
    match status {
        RunStatus::Completed => 0,
        RunStatus::Parked => EXIT_PARKED,
        _ => EXIT_RUN_FAILED,
    }
}
