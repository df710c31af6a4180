//! The socket protocol between `ryvos` (or any client) and `ryvosd`: JSON lines.
//!
//! A client writes one request per line: `{"id": N, "method": "...", "params": {...}}`. The
//! daemon answers with zero or more event lines `{"id": N, "event": {...}}` and one final line,
//! `{"id": N, "result": {...}}` or `{"id": N, "error": {"code": "...", "message": "..."}}`.
//! A frame that is not valid JSON, not a request, or longer than [`MAX_FRAME_BYTES`] gets an
//! error line (id 0 when none could be read) and the connection is closed. See
//! docs/protocol.md.

use ryvos_actors::event::Event;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The longest line either side may send.
pub const MAX_FRAME_BYTES: usize = 1024 * 1024;

/// The protocol's version, reported by `status`.
pub const PROTOCOL_VERSION: u32 = 1;

/// A request line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    pub id: u64,
    pub method: String,
    #[serde(default)]
    pub params: Value,
}

/// The methods and their parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum Method {
    Run(Box<RunParams>),
    Status,
    Sessions,
    History {
        session_id: String,
    },
    Cost,
    /// The tool calls waiting for approval.
    Approvals,
    /// Pauses a session's run in flight after its current step.
    Interrupt {
        session_id: String,
    },
    /// Stops a session's run in flight for good.
    Cancel {
        session_id: String,
    },
    /// Answers an approval request.
    Answer(ApprovalParams),
    Shutdown,
}

/// `approve`'s and `deny`'s parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalParams {
    pub request_id: String,
    /// Set by the method: `approve` or `deny`.
    #[serde(skip)]
    pub approved: bool,
    #[serde(default)]
    pub reason: Option<String>,
    /// With `approve`: the same call needs no approval again in this session (never T4).
    #[serde(default)]
    pub always: bool,
}

/// `run`'s parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunParams {
    pub prompt: String,
    /// Use (or create) this session.
    #[serde(default)]
    pub session: Option<String>,
    /// Continue this session, which must exist.
    #[serde(default)]
    pub resume: Option<String>,
    /// The directory the file tools work in (absolute, on the daemon's machine).
    pub workspace: String,
    /// The client's current directory: context files found there come first.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Makes the run goal-driven.
    #[serde(default)]
    pub goal: Option<ryvos_actors::judge::Goal>,
    /// Runs as a Director: a planned graph of steps.
    #[serde(default)]
    pub director: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionParam {
    session: String,
}

impl Request {
    /// Reads one frame (a line, without its newline) as a request. A frame that is not one is
    /// answered with this error, under the id it gave if it gave one; the connection closes.
    pub fn decode(line: &str) -> Result<Request, (u64, ErrorBody)> {
        serde_json::from_str(line).map_err(|e| {
            let id = serde_json::from_str::<Value>(line)
                .ok()
                .and_then(|v| v["id"].as_u64())
                .unwrap_or(0);
            let message = format!(
                "not a request ({e}); send one JSON object per line: {{\"id\": N, \"method\": \"...\", \"params\": {{...}}}}; the connection is closed"
            );
            (id, ErrorBody::new(ErrorCode::BadFrame, message))
        })
    }

    /// The method, with its parameters checked.
    pub fn method(&self) -> Result<Method, ErrorBody> {
        let params = || {
            if self.params.is_null() {
                Value::Object(Default::default())
            } else {
                self.params.clone()
            }
        };
        let bad = |e: serde_json::Error| {
            ErrorBody::new(
                ErrorCode::BadRequest,
                format!("params of {}: {e}", self.method),
            )
        };
        Ok(match self.method.as_str() {
            "run" => Method::Run(serde_json::from_value(params()).map_err(bad)?),
            "status" => Method::Status,
            "sessions" => Method::Sessions,
            "history" => Method::History {
                session_id: serde_json::from_value::<SessionParam>(params()).map_err(bad)?.session,
            },
            "cost" => Method::Cost,
            "approvals" => Method::Approvals,
            "interrupt" => Method::Interrupt {
                session_id: serde_json::from_value::<SessionParam>(params()).map_err(bad)?.session,
            },
            "cancel" => Method::Cancel {
                session_id: serde_json::from_value::<SessionParam>(params()).map_err(bad)?.session,
            },
            "approve" | "deny" => {
                let mut params: ApprovalParams =
                    serde_json::from_value(params()).map_err(bad)?;
                params.approved = self.method == "approve";
                Method::Answer(params)
            }
            "shutdown" => Method::Shutdown,
            other => {
                return Err(ErrorBody::new(
                    ErrorCode::UnknownMethod,
                    format!("unknown method '{other}'; the methods are run, status, sessions, history, cost, approvals, approve, deny, interrupt, cancel, shutdown"),
                ))
            }
        })
    }
}

/// What a daemon line carries.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Reply {
    Event { id: u64, event: Event },
    Result { id: u64, result: Value },
    Error { id: u64, error: ErrorBody },
}

/// An error answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
    ShuttingDown,
    PermissionDenied,
    Internal,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn requests_parse_and_bad_params_are_named() {
        let r: Request = serde_json::from_value(
            json!({"id": 3, "method": "run", "params": {"prompt": "hi", "workspace": "/w"}}),
        )
        .unwrap();
        assert!(matches!(r.method().unwrap(), Method::Run(p) if p.prompt == "hi"));
        let r: Request =
            serde_json::from_value(json!({"id": 4, "method": "run", "params": {"promt": "hi"}}))
                .unwrap();
        let e = r.method().unwrap_err();
        assert_eq!(e.code, ErrorCode::BadRequest);
        assert!(e.message.contains("promt"), "{}", e.message);
        let r: Request = serde_json::from_value(json!({"id": 5, "method": "dance"})).unwrap();
        assert_eq!(r.method().unwrap_err().code, ErrorCode::UnknownMethod);
    }

    #[test]
    fn replies_round_trip() {
        let line = serde_json::to_string(&Reply::Error {
            id: 9,
            error: ErrorBody::new(ErrorCode::Busy, "later"),
        })
        .unwrap();
        assert_eq!(
            line,
            r#"{"id":9,"error":{"code":"busy","message":"later"}}"#
        );
        let back: Reply = serde_json::from_str(&line).unwrap();
        assert!(matches!(back, Reply::Error { id: 9, .. }));
    }
}
