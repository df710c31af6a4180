//! The protocol's JSON Schema, derived from its types: `docs/protocol.schema.json` is this,
//! written out, and a test keeps the two the same.

use super::{calls::each_call, ErrorBody, Request, PROTOCOL_VERSION};
use crate::event::Event;
use serde_json::{json, Map, Value};

/// The schema of every line of the protocol: a request's frame, each method's parameters and
/// result, an event line's event, and an error.
pub fn schema() -> Value {
    let mut methods = Map::new();
    for (name, params, result) in each_call() {
        methods.insert(
            name.to_owned(),
            json!({"params": params.to_value(), "result": result.to_value()}),
        );
    }
    json!({
        "title": "The ryvosd socket protocol",
        "protocol": PROTOCOL_VERSION,
        "request": schemars::schema_for!(Request).to_value(),
        "methods": methods,
        "event": schemars::schema_for!(Event).to_value(),
        "error": schemars::schema_for!(ErrorBody).to_value(),
    })
}
