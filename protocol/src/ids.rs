//! Identifiers. Each is a newtype so a session id can never be passed where a run id is meant.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// A new, unique, time-ordered id.
            pub fn generate() -> Self {
                Self(format!(concat!($prefix, "{}"), ulid::Ulid::new().to_string().to_lowercase()))
            }

            /// Wraps an id given from outside (a user, a socket request, the store).
            pub fn new(id: impl Into<String>) -> Self {
                Self(id.into())
            }

            /// True for an id made only of ASCII letters, digits, `_` and `-` (at most 128): safe as
            /// a file name, which session ids become in the run logs.
            pub fn is_well_formed(id: &str) -> bool {
                !id.is_empty()
                    && id.len() <= 128
                    && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(id: &str) -> Self {
                Self(id.to_owned())
            }
        }
    };
}

string_id!(
    /// A conversation that outlives runs: its history is stored and resumed by this id.
    SessionId,
    "s_"
);
string_id!(
    /// One run: a prompt driven through the loop until an answer or a limit.
    RunId,
    "r_"
);
string_id!(
    /// A run submitted to the run queue, whichever daemon runs it (and runs it again after a
    /// takeover).
    QueuedRunId,
    "q_"
);

string_id!(
    /// A tool call's id, as given by the model; pairs a call with its result.
    CallId,
    "call_"
);
