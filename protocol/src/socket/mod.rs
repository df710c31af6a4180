//! The socket protocol between `ryvos` (or any client) and `ryvosd`: JSON lines.
//!
//! A client writes one request per line: `{"id": N, "method": "...", "params": {...}}`. The
//! daemon answers with zero or more event lines `{"id": N, "event": {...}}` and one final line,
//! `{"id": N, "result": {...}}` or `{"id": N, "error": {"code": "...", "message": "..."}}`.
//! A frame that is not valid JSON, not a request, or longer than [`MAX_FRAME_BYTES`] gets an
//! error line (id 0 when none could be read) and the connection is closed; ids start at 1.
//!
//! Every method is a [`Call`]: its name, its parameters and its result, as types. The daemon
//! reads the parameters and writes the result through them, clients read the result through
//! them, and [`schema`] derives the protocol's JSON Schema from them.

mod calls;
mod hooks;
mod rewinds;
mod schema;

pub use calls::*;
pub use hooks::*;
pub use rewinds::*;
pub use schema::schema;

use crate::event::Event;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A line that is not a request the daemon can serve, and its answer.
#[derive(Debug)]
pub struct Undecodable {
    /// The id the answer goes under: the line's, or 0 when it gave none that can be read.
    pub id: u64,
    pub error: ErrorBody,
    /// The connection closes after the answer: what follows cannot be trusted to be framed.
    pub closes: bool,
}

/// The longest line either side may send.
pub const MAX_FRAME_BYTES: usize = 1024 * 1024;

/// The protocol's version, reported by `status`.
pub const PROTOCOL_VERSION: u32 = 1;

/// A method: its name on the wire, what it takes and what it answers.
pub trait Call {
    const METHOD: &'static str;
    type Params: Serialize + DeserializeOwned + JsonSchema;
    type Result: Serialize + DeserializeOwned + JsonSchema;
}

/// A request line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// From 1: 0 answers lines that could not be read.
    #[schemars(range(min = 1))]
    pub id: u64,
    pub method: String,
    /// May be left out (or `null`) for a method without parameters.
    #[serde(default)]
    pub params: Value,
}

impl Request {
    /// A request of `C` with `params`.
    pub fn of<C: Call>(id: u64, params: &C::Params) -> Result<Request, serde_json::Error> {
        Ok(Request {
            id,
            method: C::METHOD.to_owned(),
            params: serde_json::to_value(params)?,
        })
    }

    /// Reads one frame (a line, without its newline) as a request. A line that is not a JSON
    /// object with a numeric `id` and a `method` is a bad frame, answered under the id it gave
    /// (0 if none) before the connection closes; a request that only has unknown fields or the
    /// reserved id 0 is a `bad_request`, and the connection stays open.
    pub fn decode(line: &str) -> Result<Request, Undecodable> {
        let shape =
            "send one JSON object per line: {\"id\": N, \"method\": \"...\", \"params\": {...}}";
        let value: Value = serde_json::from_str(line).map_err(|e| Undecodable {
            id: 0,
            error: ErrorBody::new(
                ErrorCode::BadFrame,
                format!("not JSON ({e}); {shape}; the connection is closed"),
            ),
            closes: true,
        })?;
        let id = value.get("id").and_then(Value::as_u64);
        let (Some(id), Some(_)) = (id, value.get("method").and_then(Value::as_str)) else {
            return Err(Undecodable {
                id: id.unwrap_or(0),
                error: ErrorBody::new(
                    ErrorCode::BadFrame,
                    format!("not a request (it needs a numeric id and a method); {shape}; the connection is closed"),
                ),
                closes: true,
            });
        };
        let bad_request = |message: String| Undecodable {
            id,
            error: ErrorBody::new(ErrorCode::BadRequest, message),
            closes: false,
        };
        if id == 0 {
            return Err(bad_request(
                "id 0 is reserved (it answers lines that could not be read): number requests from 1"
                    .into(),
            ));
        }
        serde_json::from_value(value).map_err(|e| bad_request(format!("{e}; {shape}")))
    }

    /// The parameters, read as `C`'s: unknown ones are an error naming them.
    pub fn params<C: Call>(&self) -> Result<C::Params, ErrorBody> {
        // Left out or `null` reads as `{}`; anything else is read in place, without a copy.
        let empty = Value::Object(Default::default());
        let params = if self.params.is_null() {
            &empty
        } else {
            &self.params
        };
        let bad = |message: String| ErrorBody::new(ErrorCode::BadRequest, message);
        if !params.is_object() {
            return Err(bad(format!(
                "params of {} must be an object ({{\"name\": value, ...}}), not {}",
                C::METHOD,
                kind_of(params)
            )));
        }
        serde_path_to_error::deserialize(params).map_err(|e| {
            let path = e.path().to_string();
            match path.as_str() {
                // Missing and unknown fields name themselves.
                "." => bad(format!("params of {}: {}", C::METHOD, e.inner())),
                _ => bad(format!("params of {}: `{path}`: {}", C::METHOD, e.inner())),
            }
        })
    }

    /// The method, with its parameters checked.
    pub fn method(&self) -> Result<Method, ErrorBody> {
        Ok(match self.method.as_str() {
            Run::METHOD => Method::Run(Box::new(self.params::<Run>()?)),
            Status::METHOD => Method::Status(self.params::<Status>()?),
            Sessions::METHOD => Method::Sessions(self.params::<Sessions>()?),
            History::METHOD => Method::History(self.params::<History>()?),
            Cost::METHOD => Method::Cost(self.params::<Cost>()?),
            Approvals::METHOD => Method::Approvals(self.params::<Approvals>()?),
            Approve::METHOD => Method::Answer {
                params: self.params::<Approve>()?,
                approved: true,
            },
            Deny::METHOD => Method::Answer {
                params: self.params::<Deny>()?,
                approved: false,
            },
            FileAnswer::METHOD => Method::FileAnswer(self.params::<FileAnswer>()?),
            Interrupt::METHOD => Method::Interrupt(self.params::<Interrupt>()?),
            Cancel::METHOD => Method::Cancel(self.params::<Cancel>()?),
            CompactUndo::METHOD => Method::CompactUndo(self.params::<CompactUndo>()?),
            Rewind::METHOD => Method::Rewind(self.params::<Rewind>()?),
            Fork::METHOD => Method::Fork(self.params::<Fork>()?),
            Continue::METHOD => Method::Continue(self.params::<Continue>()?),
            Stop::METHOD => Method::Stop(self.params::<Stop>()?),
            Shutdown::METHOD => Method::Shutdown(self.params::<Shutdown>()?),
            Submit::METHOD => Method::Submit(Box::new(self.params::<Submit>()?)),
            Runs::METHOD => Method::Runs(self.params::<Runs>()?),
            Wait::METHOD => Method::Wait(self.params::<Wait>()?),
            Follow::METHOD => Method::Follow(self.params::<Follow>()?),
            Console::METHOD => Method::Console(self.params::<Console>()?),
            TokenCreate::METHOD => Method::TokenCreate(self.params::<TokenCreate>()?),
            Tokens::METHOD => Method::Tokens(self.params::<Tokens>()?),
            TokenRevoke::METHOD => Method::TokenRevoke(self.params::<TokenRevoke>()?),
            Hooks::METHOD => Method::Hooks(self.params::<Hooks>()?),
            HooksTrust::METHOD => Method::HooksTrust(self.params::<HooksTrust>()?),
            other => {
                return Err(ErrorBody::new(
                    ErrorCode::UnknownMethod,
                    format!(
                        "unknown method '{other}'; the methods are {}",
                        METHODS.join(", ")
                    ),
                ))
            }
        })
    }
}

/// What kind of JSON value `value` is, for an error.
fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Every method's name, in the order the documentation gives them.
pub const METHODS: &[&str] = &[
    Run::METHOD,
    Status::METHOD,
    Sessions::METHOD,
    History::METHOD,
    Cost::METHOD,
    Approvals::METHOD,
    Approve::METHOD,
    Deny::METHOD,
    FileAnswer::METHOD,
    Interrupt::METHOD,
    Cancel::METHOD,
    CompactUndo::METHOD,
    Rewind::METHOD,
    Fork::METHOD,
    Continue::METHOD,
    Stop::METHOD,
    Shutdown::METHOD,
    Submit::METHOD,
    Runs::METHOD,
    Wait::METHOD,
    Follow::METHOD,
    Console::METHOD,
    TokenCreate::METHOD,
    Tokens::METHOD,
    TokenRevoke::METHOD,
    Hooks::METHOD,
    HooksTrust::METHOD,
];

/// A request's method with its parameters, as the daemon dispatches it.
#[derive(Clone, Debug, PartialEq)]
pub enum Method {
    Run(Box<RunParams>),
    Status(NoParams),
    Sessions(NoParams),
    History(SessionParams),
    Cost(NoParams),
    Approvals(NoParams),
    /// `approve` or `deny`.
    Answer {
        params: AnswerParams,
        approved: bool,
    },
    FileAnswer(FileAnswerParams),
    Interrupt(SessionParams),
    Cancel(SessionParams),
    CompactUndo(SessionParams),
    Rewind(RewindParams),
    Fork(ForkParams),
    Continue(ContinueParams),
    Stop(RunIdParams),
    Shutdown(NoParams),
    Submit(Box<RunParams>),
    Runs(RunsParams),
    Wait(QueuedRunParams),
    Follow(QueuedRunParams),
    Console(NoParams),
    TokenCreate(TokenCreateParams),
    Tokens(NoParams),
    TokenRevoke(TokenParams),
    Hooks(HooksParams),
    HooksTrust(HooksParams),
}

/// What a daemon line carries.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Reply {
    Event { id: u64, event: Event },
    Result { id: u64, result: Value },
    Error { id: u64, error: ErrorBody },
}

impl Reply {
    /// The final line answering request `id` with `result`.
    pub fn result<T: Serialize>(id: u64, result: &T) -> Reply {
        match serde_json::to_value(result) {
            Ok(result) => Reply::Result { id, result },
            Err(e) => Reply::Error {
                id,
                error: ErrorBody::new(ErrorCode::Internal, format!("encoding the result: {e}")),
            },
        }
    }
}

/// An error answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
}

impl ErrorBody {
    /// An error of `code`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// What kind of error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The frame was not a request (bad JSON, missing fields, too long). The connection closes.
    BadFrame,
    /// The request's parameters are wrong.
    BadRequest,
    UnknownMethod,
    /// Too many runs in flight, or the session has one; try again later.
    Busy,
    NotFound,
    /// A `run` named a config file (`config`) the daemon does not run on.
    ConfigMismatch,
    ShuttingDown,
    PermissionDenied,
    Internal,
}

#[cfg(test)]
mod tests;
