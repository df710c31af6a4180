//! docs/protocol.md against the protocol's types: the checked-in schema is what the types
//! generate, every example line in the document is valid against it, and a real `ryvosd`
//! answers every documented request with lines valid against it.

mod common;

use common::home::{Home, WAIT};
use ryvos::protocol::{schema, METHODS};
use ryvos_testkit::{Reply, ScriptedModelServer};
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

fn docs() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs"))
}

/// The JSON lines of each code block of docs/protocol.md (other lines, like a shell prompt or
/// the example of a bad frame, are left out).
fn documented_blocks() -> Vec<Vec<Value>> {
    let text = std::fs::read_to_string(docs().join("protocol.md")).unwrap();
    let mut blocks = Vec::new();
    let mut current: Option<Vec<Value>> = None;
    for line in text.lines() {
        if line.starts_with("```") {
            match current.take() {
                Some(block) => blocks.push(block),
                None => current = Some(Vec::new()),
            }
            continue;
        }
        if let Some(block) = current.as_mut() {
            if let Ok(value @ Value::Object(_)) = serde_json::from_str(line) {
                block.push(value);
            }
        }
    }
    blocks.retain(|b| !b.is_empty());
    blocks
}

/// The schemas, compiled: what each line of the protocol must be.
struct Schemas {
    request: jsonschema::Validator,
    params: HashMap<String, jsonschema::Validator>,
    result: HashMap<String, jsonschema::Validator>,
    event: jsonschema::Validator,
    error: jsonschema::Validator,
}

impl Schemas {
    fn new() -> Self {
        let schema = schema();
        let compile = |s: &Value| jsonschema::validator_for(s).expect("a valid JSON Schema");
        let methods = schema["methods"].as_object().unwrap();
        Self {
            request: compile(&schema["request"]),
            params: methods
                .iter()
                .map(|(m, s)| (m.clone(), compile(&s["params"])))
                .collect(),
            result: methods
                .iter()
                .map(|(m, s)| (m.clone(), compile(&s["result"])))
                .collect(),
            event: compile(&schema["event"]),
            error: compile(&schema["error"]),
        }
    }

    /// Why `request` is not a valid request, if it is not.
    fn check_request(&self, request: &Value) -> Result<(), String> {
        check(&self.request, request, "request")?;
        let method = request["method"].as_str().unwrap_or_default();
        let params = match &request["params"] {
            Value::Null => serde_json::json!({}),
            p => p.clone(),
        };
        let schema = self
            .params
            .get(method)
            .ok_or(format!("no method {method}"))?;
        check(schema, &params, &format!("params of {method}"))
    }

    /// Why `line`, an answer to a request of `method`, is not valid, if it is not.
    fn check_answer(&self, method: &str, line: &Value) -> Result<(), String> {
        if let Some(event) = line.get("event") {
            check(&self.event, event, "event")
        } else if let Some(error) = line.get("error") {
            check(&self.error, error, "error")
        } else if let Some(result) = line.get("result") {
            let schema = self
                .result
                .get(method)
                .ok_or(format!("no method {method}"))?;
            check(schema, result, &format!("result of {method}"))
        } else {
            Err(format!("not an answer: {line}"))
        }
    }
}

fn check(schema: &jsonschema::Validator, value: &Value, what: &str) -> Result<(), String> {
    let errors: Vec<String> = schema
        .iter_errors(value)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!("{what} {value}: {}", errors.join("; ")))
    }
}

#[test]
fn the_schema_file_is_what_the_types_generate() {
    let path = docs().join("protocol.schema.json");
    let generated = serde_json::to_string_pretty(&schema()).unwrap() + "\n";
    if std::env::var_os("RYVOS_WRITE_SCHEMA").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let stored = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        stored == generated,
        "docs/protocol.schema.json is not what the protocol's types generate; after changing \
         them, run `RYVOS_WRITE_SCHEMA=1 cargo test --test protocol` and commit the file"
    );
}

#[test]
fn every_documented_line_is_valid_against_the_schema() {
    let schemas = Schemas::new();
    let mut documented = Vec::new();
    for block in documented_blocks() {
        let mut methods: HashMap<u64, String> = HashMap::new();
        for line in &block {
            if let Some(method) = line["method"].as_str() {
                schemas.check_request(line).unwrap();
                methods.insert(line["id"].as_u64().unwrap(), method.to_owned());
                documented.push(method.to_owned());
            } else {
                let id = line["id"].as_u64().unwrap();
                let method = methods.get(&id).map_or("", String::as_str);
                schemas.check_answer(method, line).unwrap();
            }
        }
    }
    for method in METHODS {
        assert!(
            documented.iter().any(|d| d == method),
            "docs/protocol.md has no example request of `{method}`"
        );
    }
}

/// One connection to the daemon.
struct Connection {
    lines: tokio::io::Lines<BufReader<tokio::net::unix::OwnedReadHalf>>,
    write: tokio::net::unix::OwnedWriteHalf,
}

impl Connection {
    async fn open(home: &Home) -> Self {
        let (read, write) = UnixStream::connect(home.socket())
            .await
            .unwrap()
            .into_split();
        Self {
            lines: BufReader::new(read).lines(),
            write,
        }
    }

    /// Sends `line` and reads the answer up to its final line.
    async fn ask(&mut self, line: &str) -> Vec<Value> {
        self.write
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        let mut answer = Vec::new();
        loop {
            let next = tokio::time::timeout(WAIT, self.lines.next_line())
                .await
                .expect("the daemon answers")
                .unwrap()
                .expect("the daemon sends the final line before closing");
            let value: Value = serde_json::from_str(&next).unwrap();
            let last = value.get("event").is_none();
            answer.push(value);
            if last {
                return answer;
            }
        }
    }
}

/// Methods that answer the same whatever else is going on: a documented result of theirs must
/// be a result from the daemon too. (`approve`, `deny`, `interrupt` and `cancel` answer
/// `not_found` unless a call waits or a run is in flight; for them only the shape is checked.)
const ANSWER_AS_DOCUMENTED: &[&str] = &[
    "run",
    "status",
    "sessions",
    "history",
    "cost",
    "approvals",
    "shutdown",
];

#[tokio::test]
async fn a_real_daemon_answers_every_documented_request_as_the_schema_says() {
    let server = ScriptedModelServer::start([
        Reply::text(&["hello"]),
        Reply::tool_calls(&[("call_1", "read", r#"{"path":"notes.md"}"#)]),
        Reply::text(&["It holds ", "one heading."]),
    ])
    .await;
    let home = Home::new(&server, "");
    std::fs::write(home.workspace.path().join("notes.md"), "# Notes\n").unwrap();
    let mut daemon = home.daemon().await;
    let schemas = Schemas::new();
    let workspace = home.workspace.path().display().to_string();
    let mut session: Option<String> = None;
    let mut shutdowns = Vec::new();
    let mut conn = Connection::open(&home).await;
    for block in documented_blocks() {
        let documented: HashMap<u64, &Value> = block
            .iter()
            .filter(|l| l.get("method").is_none())
            .filter(|l| l.get("event").is_none())
            .map(|l| (l["id"].as_u64().unwrap(), l))
            .collect();
        for request in block.iter().filter(|l| l.get("method").is_some()) {
            let method = request["method"].as_str().unwrap().to_owned();
            let mut line = request.to_string().replace("/home/me/project", &workspace);
            if let Some(session) = &session {
                line = line.replace("s_01k…", session.as_str());
            }
            if method == "shutdown" {
                shutdowns.push(line);
                continue;
            }
            let answer = conn.ask(&line).await;
            for answered in &answer {
                schemas
                    .check_answer(&method, answered)
                    .unwrap_or_else(|e| panic!("{line} was answered with {e}"));
            }
            let last = answer.last().unwrap();
            if method == "run" {
                session.get_or_insert_with(|| {
                    last["result"]["session_id"].as_str().unwrap().to_owned()
                });
            }
            let id = request["id"].as_u64().unwrap();
            if let Some(expected) = documented.get(&id) {
                if ANSWER_AS_DOCUMENTED.contains(&method.as_str()) {
                    assert_eq!(
                        expected.get("result").is_some(),
                        last.get("result").is_some(),
                        "{line}: documented {expected}, answered {last}"
                    );
                }
                if let Some(code) = expected["error"]["code"].as_str() {
                    assert_eq!(last["error"]["code"], code, "{line}: answered {last}");
                }
            }
        }
    }
    // Every method refuses a parameter it does not know, naming it.
    for (n, method) in METHODS.iter().enumerate() {
        let line = format!(
            r#"{{"id": {}, "method": "{method}", "params": {{"surprise": 1}}}}"#,
            100 + n
        );
        let answer = conn.ask(&line).await;
        assert_eq!(answer.len(), 1, "{line}: {answer:?}");
        assert_eq!(
            answer[0]["error"]["code"], "bad_request",
            "{line}: {answer:?}"
        );
        let message = answer[0]["error"]["message"].as_str().unwrap();
        assert!(message.contains("surprise"), "{line}: {message}");
    }
    // The documented bad frame closes its connection with a `bad_frame` error.
    let bad = Connection::open(&home).await.ask("this is not json").await;
    assert_eq!(bad[0]["error"]["code"], "bad_frame");
    schemas.check_answer("", &bad[0]).unwrap();
    assert!(!shutdowns.is_empty(), "shutdown is documented");
    let answer = conn.ask(&shutdowns[0]).await;
    schemas.check_answer("shutdown", &answer[0]).unwrap();
    assert!(answer[0].get("result").is_some(), "{answer:?}");
    tokio::time::timeout(WAIT, daemon.wait())
        .await
        .expect("the daemon stops")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_sessions_cwd_stands_for_its_workspace() {
    let server = ScriptedModelServer::start([Reply::text(&["here"])]).await;
    let home = Home::new(&server, "");
    let _daemon = home.daemon().await;
    let dir = home.workspace.path().canonicalize().unwrap();
    let line =
        serde_json::json!({"id": 1, "method": "run", "params": {"prompt": "hello", "cwd": dir}});
    let answer = Connection::open(&home).await.ask(&line.to_string()).await;
    let last = answer.last().unwrap();
    assert_eq!(last["result"]["status"], "completed", "{answer:?}");
    let started = answer
        .iter()
        .find(|l| l["event"]["type"] == "RunStarted")
        .expect("RunStarted");
    assert_eq!(
        started["event"]["workspace"],
        dir.display().to_string(),
        "{started}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn requests_that_cannot_be_served_as_asked_are_refused_and_the_connection_stays_open() {
    let server = ScriptedModelServer::start([]).await;
    let home = Home::new(&server, "");
    let _daemon = home.daemon().await;
    let file = home.path().join("config.toml");
    let stream = UnixStream::connect(home.socket()).await.unwrap();
    let (read, mut write) = stream.into_split();
    let mut answers = BufReader::new(read).lines();
    let refusals = [
        (r#"{"id": 1, "method": "sessions", "params": {"x": 1}}"#.to_owned(), "bad_request", "`x`"),
        (
            r#"{"id": 2, "method": "run", "params": {"prompt": "p", "workspace": "."}}"#.to_owned(),
            "bad_request", "relative",
        ),
        (
            r#"{"id": 2, "method": "run", "params": {"prompt": "p", "cwd": "here"}}"#.to_owned(),
            "bad_request", "cwd 'here' is relative",
        ),
        (
            r#"{"id": 2, "method": "run", "params": {"prompt": "p"}}"#.to_owned(),
            "bad_request", "or cwd, which then stands for it",
        ),
        (
            serde_json::json!({"id": 3, "method": "run", "params": {"prompt": "p", "workspace": file}})
                .to_string(),
            "bad_request", "not a directory",
        ),
        (
            r#"{"id": 4, "method": "run", "params": {"prompt": "p", "workspace": "/", "session": "a", "resume": "b"}}"#
                .to_owned(),
            "bad_request", "not both",
        ),
        (
            r#"{"id": 7, "method": "submit", "params": {"prompt": "p", "workspace": "/", "config": "/etc/ryvos.toml"}}"#
                .to_owned(),
            "bad_request", "config is for run",
        ),
        // A run meant for another config file is refused as such, naming it.
        (
            r#"{"id": 8, "method": "run", "params": {"prompt": "p", "workspace": "/", "config": "/elsewhere/other.toml"}}"#
                .to_owned(),
            "config_mismatch", "names the config file /elsewhere/other.toml",
        ),
        (
            r#"{"id": 9, "method": "run", "params": {"prompt": "p", "workspace": "/", "config": "other.toml"}}"#
                .to_owned(),
            "bad_request", "config 'other.toml' is relative",
        ),
        // A parameter of the wrong type is named.
        (
            r#"{"id": 10, "method": "run", "params": {"prompt": 5, "workspace": "/"}}"#.to_owned(),
            "bad_request", "`prompt`: invalid type: integer `5`, expected a string",
        ),
        (
            r#"{"id": 11, "method": "run", "params": {"prompt": "p", "workspace": "/", "director": "yes"}}"#
                .to_owned(),
            "bad_request", "`director`",
        ),
        (
            r#"{"id": 12, "method": "run", "params": {"prompt": "p", "workspace": "/", "session": 3}}"#
                .to_owned(),
            "bad_request", "`session`",
        ),
        (r#"{"id": 13, "method": "history", "params": {"session": 1}}"#.to_owned(), "bad_request", "`session`"),
        (
            r#"{"id": 14, "method": "approve", "params": {"request_id": "ap_x", "always": "yes"}}"#
                .to_owned(),
            "bad_request", "`always`",
        ),
        (
            r#"{"id": 15, "method": "deny", "params": {"request_id": "ap_x", "by": ""}}"#.to_owned(),
            "bad_request", "`by`",
        ),
        (r#"{"id": 16, "method": "run", "params": [1, 2]}"#.to_owned(), "bad_request", "must be an object"),
        (r#"{"id": 0, "method": "status"}"#.to_owned(), "bad_request", "id 0 is reserved"),
        (r#"{"id": 5, "method": "status", "extra": 1}"#.to_owned(), "bad_request", "`extra`"),
    ];
    for (line, code, says) in &refusals {
        write
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        let answer = tokio::time::timeout(WAIT, answers.next_line())
            .await
            .expect("answered")
            .unwrap()
            .expect("the connection stays open");
        let answer: Value = serde_json::from_str(&answer).unwrap();
        let sent: Value = serde_json::from_str(line).unwrap();
        assert_eq!(answer["id"], sent["id"], "{answer}");
        assert_eq!(answer["error"]["code"], *code, "{line}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{line}: {message}");
    }
    // The same connection still serves.
    write
        .write_all(b"{\"id\": 6, \"method\": \"status\"}\n")
        .await
        .unwrap();
    let answer = answers.next_line().await.unwrap().unwrap();
    assert!(
        answer.contains(r#""id":6"#) && answer.contains("result"),
        "{answer}"
    );
    assert!(server.requests().is_empty(), "no run was started");
}

#[tokio::test(flavor = "multi_thread")]
async fn after_shutdown_every_request_is_answered_shutting_down() {
    let server = ScriptedModelServer::start([]).await;
    let home = Home::new(&server, "");
    let mut daemon = home.daemon().await;
    let workspace = home.workspace.path().display().to_string();
    let stream = UnixStream::connect(home.socket()).await.unwrap();
    let (read, mut write) = stream.into_split();
    let mut answers = BufReader::new(read).lines();
    // All three at once, as a client that does not wait would send them.
    let lines = format!(
        "{{\"id\": 1, \"method\": \"shutdown\"}}\n{{\"id\": 2, \"method\": \"status\"}}\n{}\n",
        serde_json::json!({"id": 3, "method": "run", "params": {"prompt": "p", "workspace": workspace}})
    );
    write.write_all(lines.as_bytes()).await.unwrap();
    let mut seen = Vec::new();
    while let Ok(Some(line)) = tokio::time::timeout(WAIT, answers.next_line())
        .await
        .expect("answered or closed")
    {
        seen.push(serde_json::from_str::<Value>(&line).unwrap());
    }
    assert_eq!(seen.len(), 3, "one final line per request: {seen:?}");
    assert_eq!(seen[0]["result"]["stopping"], true);
    for answer in &seen[1..] {
        assert_eq!(answer["error"]["code"], "shutting_down", "{answer}");
    }
    tokio::time::timeout(WAIT, daemon.wait())
        .await
        .expect("the daemon stops")
        .unwrap();
    assert!(server.requests().is_empty(), "no run was started");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_empty_line_is_a_bad_frame() {
    let server = ScriptedModelServer::start([]).await;
    let home = Home::new(&server, "");
    let _daemon = home.daemon().await;
    let stream = UnixStream::connect(home.socket()).await.unwrap();
    let (read, mut write) = stream.into_split();
    let mut answers = BufReader::new(read).lines();
    write.write_all(b"\n").await.unwrap();
    let answer = tokio::time::timeout(WAIT, answers.next_line())
        .await
        .expect("answered")
        .unwrap()
        .expect("an answer before the close");
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(answer["id"], 0);
    assert_eq!(answer["error"]["code"], "bad_frame", "{answer}");
    let closed = tokio::time::timeout(WAIT, answers.next_line())
        .await
        .expect("closed");
    assert!(matches!(closed, Ok(None)), "the connection closes");
}

/// Sends `line` on a connection of its own and returns the final answer.
async fn ask_once(home: &Home, line: &Value) -> Value {
    let stream = UnixStream::connect(home.socket()).await.unwrap();
    let (read, mut write) = stream.into_split();
    write
        .write_all(format!("{line}\n").as_bytes())
        .await
        .unwrap();
    let mut answers = BufReader::new(read).lines();
    let answer = tokio::time::timeout(WAIT, answers.next_line())
        .await
        .expect("answered")
        .unwrap()
        .expect("an answer");
    serde_json::from_str(&answer).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_always_approval_keeps_its_reason_and_names_who_answered() {
    let write = r#"{"path": "notes.txt", "content": "x"}"#;
    let server = ScriptedModelServer::start([
        Reply::tool_calls(&[("w1", "write", write)]),
        Reply::tool_calls(&[("w2", "write", write)]),
        Reply::text(&["Written twice."]),
    ])
    .await;
    let home = Home::with_sections(&server, "", "t2 = \"ask\"", "");
    let _daemon = home.daemon().await;
    let mut run = home.follow(&["run", "--json", "write twice"]);
    let request_id = run
        .until(|e| (e["type"] == "ApprovalRequested").then(|| e["request_id"].clone()))
        .await;
    let answer = ask_once(
        &home,
        &serde_json::json!({"id": 1, "method": "approve", "params": {
            "request_id": request_id, "always": true, "reason": "looks fine", "by": "review-bot"
        }}),
    )
    .await;
    assert_eq!(answer["result"]["approved"], true, "{answer}");
    let ended = run.rest().await;
    assert_eq!(ended.code, Some(0), "{}", ended.stderr);
    let resolved = ended
        .events
        .iter()
        .find(|e| e["type"] == "ApprovalResolved")
        .expect("resolved");
    assert_eq!(resolved["reason"], "looks fine", "{resolved}");
    assert_eq!(
        resolved["by"], "review-bot (always, this session)",
        "{resolved}"
    );
    let session = ended.events.last().unwrap()["session_id"].clone();
    let history = ask_once(
        &home,
        &serde_json::json!({"id": 2, "method": "history", "params": {"session": session}}),
    )
    .await;
    let audit = history["result"]["audit"].as_array().unwrap();
    assert_eq!(audit[0]["reason"], "looks fine", "{audit:?}");
    assert_eq!(audit[0]["decided_by"], "review-bot (always, this session)");
    assert_eq!(audit[1]["decided_by"], "always_in_session", "{audit:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_title_is_at_most_80_bytes() {
    let server = ScriptedModelServer::start([Reply::text(&["ok"])]).await;
    let home = Home::new(&server, "");
    let _daemon = home.daemon().await;
    let prompt = "é".repeat(100);
    let (code, _, stderr) = home.ryvos(&["run", "-q", &prompt]).await;
    assert_eq!(code, 0, "{stderr}");
    let sessions = ask_once(&home, &serde_json::json!({"id": 1, "method": "sessions"})).await;
    let title = sessions["result"][0]["title"].as_str().unwrap();
    assert!(
        title.len() <= 80 && title.ends_with('…'),
        "{} bytes: {title}",
        title.len()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_peer_that_already_sent_a_request_reads_its_refusal() {
    let server = ScriptedModelServer::start([]).await;
    let home = Home::new(&server, "");
    let _daemon = home.daemon().await;
    // A client with no_new_privs, as a sandboxed command would be, sends at once and reads.
    let client = "import socket, sys\n\
        s = socket.socket(socket.AF_UNIX)\n\
        s.connect(sys.argv[1])\n\
        s.sendall(b'{\"id\": 1, \"method\": \"status\"}\\n' * 50)\n\
        print(s.makefile().readline().strip())";
    for _ in 0..4 {
        let out = tokio::process::Command::new("setpriv")
            .args(["--no-new-privs", "python3", "-c", client])
            .arg(home.socket())
            .output()
            .await
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        let answer: Value = serde_json::from_str(said.trim())
            .unwrap_or_else(|e| panic!("{e}: {said}{}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(answer["error"]["code"], "permission_denied", "{answer}");
    }
}

#[test]
fn results_and_events_are_closed_in_the_schema() {
    let schemas = Schemas::new();
    let event = serde_json::json!({"event": {"type": "TextDelta", "text": "hi", "session_id": "s_1", "run_id": "r_1"}});
    schemas.check_answer("run", &event).unwrap();
    let mut extra = event.clone();
    extra["event"]["undocumented"] = Value::from(1);
    assert!(schemas.check_answer("run", &extra).is_err(), "{extra}");
    let result = serde_json::json!({"result": {"interrupting": true}});
    schemas.check_answer("interrupt", &result).unwrap();
    let extra = serde_json::json!({"result": {"interrupting": true, "undocumented": 1}});
    assert!(schemas.check_answer("interrupt", &extra).is_err());
    let zero = serde_json::json!({"id": 0, "method": "status"});
    assert!(
        check(&schemas.request, &zero, "request").is_err(),
        "ids start at 1"
    );
}

/// Every object schema in `schema` that has property `name`: that property's schema.
fn properties_named<'a>(schema: &'a Value, name: &str, found: &mut Vec<&'a Value>) {
    match schema {
        Value::Object(map) => {
            if let Some(property) = map.get("properties").and_then(|p| p.get(name)) {
                found.push(property);
            }
            map.values().for_each(|v| properties_named(v, name, found));
        }
        Value::Array(items) => items.iter().for_each(|v| properties_named(v, name, found)),
        _ => {}
    }
}

#[test]
fn the_schemas_bounds_are_the_daemons() {
    let schema = schema();
    for (method, name, bound, value) in [
        ("run", "max_turns", "minimum", 1),
        ("run", "max_duration_secs", "minimum", 1),
        ("submit", "max_turns", "minimum", 1),
        ("approve", "by", "minLength", 1),
        (
            "deny",
            "by",
            "maxLength",
            ryvos::protocol::MAX_BY_BYTES as u64,
        ),
    ] {
        let mut found = Vec::new();
        properties_named(&schema["methods"][method]["params"], name, &mut found);
        let params: Vec<_> = found.iter().filter(|p| p.get(bound).is_some()).collect();
        assert!(!params.is_empty(), "{name} has no {bound} in the schema");
        for property in params {
            assert_eq!(property[bound], value, "{name}.{bound}");
        }
    }
}
