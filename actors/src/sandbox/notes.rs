//! How refusals show in a program's output, and the notes that tell the model why.

use super::limits::Limits;

/// How a command meeting its limits shows in its output: a fork refused, an allocation
/// refused, a process killed.
pub(super) const LIMIT_MET: &[&str] = &[
    "resource temporarily unavailable",
    "cannot allocate memory",
    "memoryerror",
    "out of memory",
    "killed",
];

/// The note for a command that met its limits.
pub(super) fn limit_note(limits: &Limits) -> String {
    format!(
        "[sandbox] This command is limited to {} processes and {} MiB of memory, all its \
         processes together: a fork past the limit fails and a command past the memory limit \
         is killed ([security.sandbox] max_processes, max_memory_mb).",
        limits.max_processes,
        limits.max_memory / (1024 * 1024)
    )
}

/// How a refused write shows in a program's output (lowercased): errno names and messages.
pub(super) const WRITE_REFUSED: &[&str] = &[
    "permission denied",
    "eacces",
    "operation not permitted",
    "eperm",
    "cross-device link",
    "exdev",
    "read-only file system",
];
/// How a refused connection shows, under `network = false`.
pub(super) const CONNECT_REFUSED: &[&str] = &[
    "couldn't connect",
    "could not connect",
    "failed to connect",
    "unable to connect",
    "connection refused",
    "econnrefused",
    "network is unreachable",
    "could not resolve",
    "temporary failure in name resolution",
    "name or service not known",
];
