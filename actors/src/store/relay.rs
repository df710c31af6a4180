//! Messages between the daemons sharing a store: an answer to an approval request that the
//! daemon it reached is not waiting for goes to all of them, and the one waiting replies.
//!
//! A message is only as trustworthy as the store's write rights: a store keeps it where only
//! those allowed to write may put it, and tells the others where to find it.

use serde::{Deserialize, Serialize};

/// One message between daemons; each names its sender.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Relay {
    /// A person answered approval request `request_id` through daemon `from`.
    Answer {
        /// Matches the replies to this answer.
        token: String,
        from: String,
        request_id: String,
        approved: bool,
        /// Approve this tool for the rest of the session.
        always: bool,
        reason: Option<String>,
        /// Who answered, as the run's events will say.
        by: String,
    },
    /// Daemon `from`'s reply to answer `token`, for daemon `to`.
    Reply {
        token: String,
        from: String,
        to: String,
        delivered: Delivery,
    },
}

/// What became of a relayed answer at one daemon.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "to", content = "error", rename_all = "snake_case")]
pub enum Delivery {
    /// The call waiting for it has it.
    Delivered,
    /// This daemon is not waiting for that request.
    NotWaiting,
    /// This daemon was waiting for it, and the answer failed (the message says why).
    Failed(String),
}
