//! How an A2A request is refused: a JSON-RPC error's code and what it says.

use a2a::error_code;

/// An A2A error: its code and what it says.
pub(super) type Refusal = (i32, String);

/// No task has the id `task`.
pub(super) fn not_found(task: &str) -> Refusal {
    (
        error_code::TASK_NOT_FOUND,
        format!("there is no task {task}"),
    )
}

/// Something this agent does not serve, and why.
pub(super) fn unsupported(why: &str) -> Refusal {
    (error_code::UNSUPPORTED_OPERATION, why.to_owned())
}

/// A failure of Ryvos's own.
pub(super) fn internal(why: String) -> Refusal {
    (error_code::INTERNAL_ERROR, why)
}
