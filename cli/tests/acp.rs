//! `ryvos acp` driven as an editor drives it, through the Agent Client Protocol crate's own
//! client side: in-process and through the daemon, a prompt whose tool call is streamed and
//! allowed once, one rejected, one cancelled while its permission is asked, the sessions
//! listed, one loaded again on a new connection, and closed.

mod common;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    CancelNotification, ClientCapabilities, CloseSessionRequest, ContentBlock, ForkSessionRequest,
    Implementation, InitializeRequest, ListSessionsRequest, LoadSessionRequest, NewSessionRequest,
    PermissionOptionKind, PromptRequest, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SelectedPermissionOutcome, SessionId, SessionNotification,
    SessionUpdate, SetSessionModeRequest, StopReason, ToolCallStatus, ToolKind,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{AcpAgent, AcpAgentConfig, Agent, Client, Error};
use common::home::{Home, WAIT};
use ryvos_testkit::{Reply, ScriptedModelServer};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

type Asked = (
    RequestPermissionRequest,
    Responder<RequestPermissionResponse>,
);

/// What the editor saw: every update, in order.
type Seen = Arc<Mutex<Vec<SessionUpdate>>>;

/// `ryvos acp` in `home`, as an editor starts it.
fn agent(home: &Home) -> AcpAgent {
    let config = AcpAgentConfig::new(env!("CARGO_BIN_EXE_ryvos"))
        .arg("acp")
        .env("RYVOS_HOME", home.path().display().to_string())
        .env("RUST_LOG", "warn");
    AcpAgent::new(config)
}

/// Connects to `agent` as an editor, records the updates in `seen`, hands each permission
/// request to `asked`, and runs `test` on the connection.
async fn as_editor(
    agent: AcpAgent,
    seen: Seen,
    asked: mpsc::UnboundedSender<Asked>,
    test: impl AsyncFnOnce(ConnectionTo<Agent>) -> Result<(), Error>,
) {
    let connected = Client
        .v1()
        .name("test-editor")
        .on_receive_notification(
            async move |n: SessionNotification, _: ConnectionTo<Agent>| {
                seen.lock().unwrap().push(n.update);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |r: RequestPermissionRequest,
                        to: Responder<RequestPermissionResponse>,
                        _| { asked.send((r, to)).map_err(Error::into_internal_error) },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(agent, async |cx: ConnectionTo<Agent>| {
            let init = InitializeRequest::new(ProtocolVersion::V1)
                .client_capabilities(ClientCapabilities::new())
                .client_info(Implementation::new("test-editor", "0"));
            let init = cx.send_request(init).block_task().await?;
            assert!(init.agent_capabilities.load_session);
            let sessions = &init.agent_capabilities.session_capabilities;
            assert!(
                sessions.list.is_some() && sessions.resume.is_some() && sessions.close.is_some()
            );
            assert!(sessions.fork.is_some(), "session/fork is offered");
            test(cx).await
        });
    tokio::time::timeout(WAIT * 4, connected)
        .await
        .expect("the editor's session ended in time")
        .expect("the connection worked");
}

/// Answers the next permission request with the option of `kind` (or cancelled when
/// `None`); the call it asked about.
async fn answer(
    asked: &mut mpsc::UnboundedReceiver<Asked>,
    kind: Option<PermissionOptionKind>,
) -> String {
    let (request, to) = tokio::time::timeout(WAIT, asked.recv())
        .await
        .expect("a permission request in time")
        .expect("the editor is connected");
    let outcome = match kind {
        Some(kind) => {
            let option = request
                .options
                .iter()
                .find(|o| o.kind == kind)
                .expect("the option");
            RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(
                option.option_id.clone(),
            ))
        }
        None => RequestPermissionOutcome::Cancelled,
    };
    to.respond(RequestPermissionResponse::new(outcome)).unwrap();
    request.tool_call.tool_call_id.0.to_string()
}

fn text_of(updates: &[SessionUpdate], user: bool) -> String {
    updates
        .iter()
        .filter_map(|u| match (u, user) {
            (SessionUpdate::AgentMessageChunk(c), false)
            | (SessionUpdate::UserMessageChunk(c), true) => match &c.content {
                ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

fn prompt(session: &SessionId, text: &str) -> PromptRequest {
    PromptRequest::new(session.clone(), vec![text.into()])
}

/// The model's side of both tests: a write allowed, one rejected, one cancelled.
fn three_writes() -> Vec<Reply> {
    vec![
        Reply::tool_calls(&[("w1", "write", r#"{"path": "a.txt", "content": "one"}"#)]),
        Reply::text(&["wrote ", "a.txt"]),
        Reply::tool_calls(&[("w2", "write", r#"{"path": "b.txt", "content": "two"}"#)]),
        Reply::text(&["left b.txt alone"]),
        Reply::tool_calls(&[("w3", "write", r#"{"path": "c.txt", "content": "three"}"#)]),
    ]
}

/// A home whose model makes [`three_writes`], each asked about; its daemon, if `with_daemon`.
async fn three_writes_asked(
    with_daemon: bool,
) -> (ScriptedModelServer, Home, Option<tokio::process::Child>) {
    let model = ScriptedModelServer::start(three_writes()).await;
    let home = Home::with_sections(&model, "", "t2 = \"ask\"", "");
    let daemon = match with_daemon {
        true => Some(home.daemon().await),
        false => None,
    };
    (model, home, daemon)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_editor_drives_ryvos_over_acp_in_process_and_through_the_daemon() {
    for with_daemon in [false, true] {
        let (_model, home, daemon) = three_writes_asked(with_daemon).await;
        let workspace = home.workspace.path().canonicalize().unwrap();
        let seen = Seen::default();
        let (asking, mut asked) = mpsc::unbounded_channel();
        let mut session = None;
        as_editor(agent(&home), seen.clone(), asking, async |cx| {
            let new = cx
                .send_request(NewSessionRequest::new(workspace.clone()))
                .block_task()
                .await?;
            let id = new.session_id;
            session = Some(id.clone());

            // Allowed once: the call runs, and the editor sees it go by.
            let turn = cx.send_request(prompt(&id, "write a"));
            assert_eq!(
                answer(&mut asked, Some(PermissionOptionKind::AllowOnce)).await,
                "w1"
            );
            assert_eq!(turn.block_task().await?.stop_reason, StopReason::EndTurn);
            assert_eq!(
                std::fs::read_to_string(workspace.join("a.txt")).unwrap(),
                "one"
            );

            // Rejected once: the model hears the denial and goes on.
            let turn = cx.send_request(prompt(&id, "write b"));
            assert_eq!(
                answer(&mut asked, Some(PermissionOptionKind::RejectOnce)).await,
                "w2"
            );
            assert_eq!(turn.block_task().await?.stop_reason, StopReason::EndTurn);
            assert!(!workspace.join("b.txt").exists());

            // Cancelled while the permission is asked: the turn ends cancelled, nothing runs.
            let turn = cx.send_request(prompt(&id, "write c"));
            let (request, to) = tokio::time::timeout(WAIT, asked.recv())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(&*request.tool_call.tool_call_id.0, "w3");
            cx.send_notification(CancelNotification::new(id.clone()))?;
            to.respond(RequestPermissionResponse::new(
                RequestPermissionOutcome::Cancelled,
            ))?;
            assert_eq!(turn.block_task().await?.stop_reason, StopReason::Cancelled);
            assert!(!workspace.join("c.txt").exists());

            let listed = cx
                .send_request(ListSessionsRequest::new())
                .block_task()
                .await?;
            let info = listed
                .sessions
                .iter()
                .find(|s| s.session_id == id)
                .expect("listed");
            assert_eq!(info.cwd, workspace);
            assert_eq!(info.title.as_deref(), Some("write a"));

            cx.send_request(CloseSessionRequest::new(id.clone()))
                .block_task()
                .await?;
            let closed = cx.send_request(prompt(&id, "again")).block_task().await;
            assert!(
                closed.is_err(),
                "a closed session takes no prompt: {closed:?}"
            );
            Ok(())
        })
        .await;
        let session = session.unwrap();
        let updates = std::mem::take(&mut *seen.lock().unwrap());
        let write = updates.iter().find_map(|u| match u {
            SessionUpdate::ToolCall(call) if &*call.tool_call_id.0 == "w1" => Some(call.clone()),
            _ => None,
        });
        let write = write.expect("the write was announced");
        assert_eq!(write.kind, ToolKind::Edit);
        assert_eq!(write.locations[0].path, workspace.join("a.txt"));
        let ended = |id: &str, status: ToolCallStatus| {
            updates.iter().any(|u| {
                matches!(u, SessionUpdate::ToolCallUpdate(t)
                    if &*t.tool_call_id.0 == id && t.fields.status == Some(status))
            })
        };
        assert!(ended("w1", ToolCallStatus::Completed), "{updates:?}");
        assert!(ended("w2", ToolCallStatus::Failed), "{updates:?}");
        let said = text_of(&updates, false);
        assert!(
            said.contains("wrote a.txt") && said.contains("left b.txt alone"),
            "{said}"
        );

        // A new connection (the editor restarted) loads the session: its conversation is told
        // again before the load answers.
        let (asking, _asked) = mpsc::unbounded_channel();
        let loaded = Seen::default();
        as_editor(agent(&home), loaded.clone(), asking, async |cx| {
            let load = LoadSessionRequest::new(session.clone(), workspace.clone());
            cx.send_request(load).block_task().await?;
            let missing = LoadSessionRequest::new(SessionId::new("s_none"), workspace.clone());
            assert!(cx.send_request(missing).block_task().await.is_err());
            Ok(())
        })
        .await;
        let loaded = std::mem::take(&mut *loaded.lock().unwrap());
        let asked_for = text_of(&loaded, true);
        assert!(
            asked_for.contains("write a") && asked_for.contains("write b"),
            "{asked_for}"
        );
        assert!(
            text_of(&loaded, false).contains("wrote a.txt"),
            "{loaded:?}"
        );
        if let Some(daemon) = daemon {
            home.shutdown(daemon).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_official_python_sdk_drives_ryvos_acp_as_an_editor() {
    let Some(python) = common::python::python() else {
        return;
    };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/acp_editor.py");
    for with_daemon in [false, true] {
        let (_model, home, daemon) = three_writes_asked(with_daemon).await;
        let workspace = home.workspace.path().canonicalize().unwrap();
        let mut editor = home.command(&python);
        editor
            .arg(script)
            .arg(env!("CARGO_BIN_EXE_ryvos"))
            .arg(&workspace);
        let ran = tokio::time::timeout(WAIT * 4, editor.output())
            .await
            .expect("the editor ended in time")
            .unwrap();
        let stderr = String::from_utf8_lossy(&ran.stderr);
        assert!(ran.status.success(), "{stderr}");
        let seen: Value = serde_json::from_slice(&ran.stdout).expect("the editor's report");
        let capabilities = &seen["capabilities"];
        assert_eq!(capabilities["load_session"], true, "{seen}");
        assert_eq!(capabilities["list"], true, "{seen}");
        assert_eq!(
            seen["stops"],
            serde_json::json!(["end_turn", "end_turn", "cancelled"])
        );
        assert_eq!(seen["asked"], serde_json::json!(["w1", "w2", "w3"]));
        assert_eq!(
            std::fs::read_to_string(workspace.join("a.txt")).unwrap(),
            "one"
        );
        assert!(!workspace.join("b.txt").exists() && !workspace.join("c.txt").exists());
        let updates = seen["updates"].as_array().unwrap();
        let kinds: Vec<&str> = updates
            .iter()
            .filter_map(|u| u["sessionUpdate"].as_str())
            .collect();
        assert!(
            kinds.contains(&"tool_call") && kinds.contains(&"tool_call_update"),
            "{kinds:?}"
        );
        let write = updates
            .iter()
            .find(|u| u["sessionUpdate"] == "tool_call" && u["toolCallId"] == "w1")
            .expect("the write was announced");
        assert_eq!(write["kind"], "edit", "{write}");
        let failed = updates.iter().any(|u| {
            u["sessionUpdate"] == "tool_call_update"
                && u["toolCallId"] == "w2"
                && u["status"] == "failed"
        });
        assert!(failed, "{updates:?}");
        let session = seen["session"].as_str().unwrap();
        let listed = seen["listed"].as_array().unwrap();
        assert!(
            listed.iter().any(|s| s["session_id"] == session),
            "{listed:?}"
        );
        let loaded = seen["loaded"].to_string();
        assert!(
            loaded.contains("write a") && loaded.contains("wrote "),
            "{loaded}"
        );
        if let Some(daemon) = daemon {
            home.shutdown(daemon).await;
        }
    }
}

/// Waits until the editor has seen an update that `wanted` picks.
async fn sees(seen: &Seen, wanted: impl Fn(&SessionUpdate) -> bool) {
    let waited = async {
        while !seen.lock().unwrap().iter().any(&wanted) {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    if tokio::time::timeout(WAIT, waited).await.is_err() {
        panic!("never seen: {:?}", seen.lock().unwrap());
    }
}

/// A home whose model writes a.txt, asked about, then answers `done`; its daemon.
async fn one_write_asked() -> (ScriptedModelServer, Home, tokio::process::Child) {
    let model = ScriptedModelServer::start([
        Reply::tool_calls(&[("w1", "write", r#"{"path": "a.txt", "content": "one"}"#)]),
        Reply::text(&["done"]),
    ])
    .await;
    let home = Home::with_sections(&model, "", "t2 = \"ask\"", "");
    let daemon = home.daemon().await;
    (model, home, daemon)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_permission_asked_when_the_daemon_was_killed_is_asked_again_when_the_session_is_loaded() {
    let (_model, home, mut daemon) = one_write_asked().await;
    let workspace = home.workspace.path().canonicalize().unwrap();

    // The editor's prompt waits for its permission when the daemon is killed (-9).
    let (asking, mut asked) = mpsc::unbounded_channel();
    let mut session = None;
    as_editor(agent(&home), Seen::default(), asking, async |cx| {
        let id = cx
            .send_request(NewSessionRequest::new(workspace.clone()))
            .block_task()
            .await?
            .session_id;
        session = Some(id.clone());
        let turn = cx.send_request(prompt(&id, "write a"));
        let (request, _unanswered) = tokio::time::timeout(WAIT, asked.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&*request.tool_call.tool_call_id.0, "w1");
        daemon.start_kill().unwrap();
        daemon.wait().await.unwrap();
        let lost = turn.block_task().await;
        assert!(lost.is_err(), "the turn fails with its daemon: {lost:?}");
        Ok(())
    })
    .await;
    assert!(!workspace.join("a.txt").exists());
    let session = session.unwrap();

    // The editor comes back to a new daemon and loads the session: its conversation, then the
    // same call asked again; allowed, the run goes on to its answer.
    let daemon = home.daemon().await;
    let seen = Seen::default();
    let (asking, mut asked) = mpsc::unbounded_channel();
    as_editor(agent(&home), seen.clone(), asking, async |cx| {
        let load = LoadSessionRequest::new(session.clone(), workspace.clone());
        cx.send_request(load).block_task().await?;
        assert_eq!(
            answer(&mut asked, Some(PermissionOptionKind::AllowOnce)).await,
            "w1"
        );
        sees(&seen, |u| {
            matches!(u, SessionUpdate::ToolCallUpdate(t)
            if &*t.tool_call_id.0 == "w1" && t.fields.status == Some(ToolCallStatus::Completed))
        })
        .await;
        sees(&seen, |u| {
            text_of(std::slice::from_ref(u), false).contains("done")
        })
        .await;
        cx.send_request(CloseSessionRequest::new(session.clone()))
            .block_task()
            .await?;
        Ok(())
    })
    .await;
    assert_eq!(
        std::fs::read_to_string(workspace.join("a.txt")).unwrap(),
        "one"
    );
    let updates = seen.lock().unwrap().clone();
    assert!(
        text_of(&updates, true).contains("write a"),
        "the history was told: {updates:?}"
    );
    home.shutdown(daemon).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_official_python_sdk_is_asked_again_after_a_kill_when_it_loads_the_session() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let Some(python) = common::python::python() else {
        return;
    };
    let (_model, home, mut daemon) = one_write_asked().await;
    let workspace = home.workspace.path().canonicalize().unwrap();
    let mut editor = home.command(&python);
    editor
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/acp_editor.py"
        ))
        .arg(env!("CARGO_BIN_EXE_ryvos"))
        .arg(&workspace)
        .arg("killed")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut editor = editor.spawn().unwrap();
    let mut said = BufReader::new(editor.stdout.take().unwrap()).lines();
    let asked = tokio::time::timeout(WAIT, said.next_line())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(asked.as_deref(), Some("asked"));
    daemon.start_kill().unwrap(); // SIGKILL
    daemon.wait().await.unwrap();
    let daemon = home.daemon().await;
    let mut go_on = editor.stdin.take().unwrap();
    go_on.write_all(b"go\n").await.unwrap();
    drop(go_on);
    let report = tokio::time::timeout(WAIT * 2, said.next_line())
        .await
        .unwrap()
        .unwrap();
    let status = tokio::time::timeout(WAIT, editor.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(
        status.success(),
        "the editor failed; its report: {report:?}"
    );
    let seen: Value = serde_json::from_str(&report.expect("a report")).unwrap();
    assert_ne!(seen["first_turn"], "answered", "{seen}");
    assert_eq!(seen["asked_again"], serde_json::json!(["w1"]), "{seen}");
    assert_eq!(
        std::fs::read_to_string(workspace.join("a.txt")).unwrap(),
        "one"
    );
    let loaded = seen["loaded"].to_string();
    assert!(
        loaded.contains("write a") && loaded.contains("done"),
        "{loaded}"
    );
    home.shutdown(daemon).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_mode_answers_what_the_policy_asks_about_as_far_as_it_goes() {
    let model = ScriptedModelServer::start([
        Reply::tool_calls(&[("w1", "write", r#"{"path": "a.txt", "content": "one"}"#)]),
        Reply::text(&["wrote it"]),
        Reply::tool_calls(&[("b1", "bash", r#"{"command": "echo two > b.txt"}"#)]),
        Reply::text(&["ran it"]),
    ])
    .await;
    // Edits (T2) and programs (T3) are asked about.
    let home = Home::with_sections(&model, "", "t2 = \"ask\"\nt3 = \"ask\"", "");
    let workspace = home.workspace.path().canonicalize().unwrap();
    let seen = Seen::default();
    let (asking, mut asked) = mpsc::unbounded_channel();
    as_editor(agent(&home), seen.clone(), asking, async |cx| {
        let new = cx
            .send_request(NewSessionRequest::new(workspace.clone()))
            .block_task()
            .await?;
        let modes = new.modes.expect("modes offered");
        assert_eq!(&*modes.current_mode_id.0, "ask");
        let ids: Vec<&str> = modes.available_modes.iter().map(|m| &*m.id.0).collect();
        assert_eq!(ids, ["ask", "auto-edit", "full-auto"]);
        let id = new.session_id;
        let unknown = SetSessionModeRequest::new(id.clone(), "yolo");
        assert!(cx.send_request(unknown).block_task().await.is_err());
        cx.send_request(SetSessionModeRequest::new(id.clone(), "auto-edit"))
            .block_task()
            .await?;

        // The edit goes without asking.
        let turn = cx.send_request(prompt(&id, "write a"));
        assert_eq!(turn.block_task().await?.stop_reason, StopReason::EndTurn);
        assert_eq!(
            std::fs::read_to_string(workspace.join("a.txt")).unwrap(),
            "one"
        );
        assert!(asked.try_recv().is_err(), "nothing was asked");

        // The program is asked about.
        let turn = cx.send_request(prompt(&id, "run it"));
        assert_eq!(
            answer(&mut asked, Some(PermissionOptionKind::AllowOnce)).await,
            "b1"
        );
        assert_eq!(turn.block_task().await?.stop_reason, StopReason::EndTurn);
        Ok(())
    })
    .await;
    let updates = seen.lock().unwrap().clone();
    assert!(updates
        .iter()
        .any(|u| matches!(u, SessionUpdate::CurrentModeUpdate(m)
        if &*m.current_mode_id.0 == "auto-edit")));
}

/// What the editor with buffers was asked: each read's path, each write's path and text.
#[derive(Default)]
struct FilesAsked {
    reads: Vec<std::path::PathBuf>,
    writes: Vec<(std::path::PathBuf, String)>,
}

/// Connects to `agent` as an editor that reads and writes files for its agent: a read gets
/// the open buffer (`buffers`) or else the disk, a write goes to a buffer, not to the disk.
/// Runs `test` on the connection; what the editor was asked.
async fn as_editor_with_buffers(
    agent: AcpAgent,
    buffers: std::collections::HashMap<std::path::PathBuf, String>,
    test: impl AsyncFnOnce(ConnectionTo<Agent>) -> Result<(), Error>,
) -> FilesAsked {
    use agent_client_protocol::v1::schema::{
        FileSystemCapabilities, ReadTextFileRequest, ReadTextFileResponse, WriteTextFileRequest,
        WriteTextFileResponse,
    };
    let buffers = Arc::new(Mutex::new(buffers));
    let asked = Arc::new(Mutex::new(FilesAsked::default()));
    let (read_buffers, read_asked) = (buffers.clone(), asked.clone());
    let (write_buffers, write_asked) = (buffers, asked.clone());
    let connected = Client
        .v1()
        .name("test-editor-with-buffers")
        .on_receive_request(
            async move |r: ReadTextFileRequest, to: Responder<ReadTextFileResponse>, _| {
                read_asked.lock().unwrap().reads.push(r.path.clone());
                let open = read_buffers.lock().unwrap().get(&r.path).cloned();
                match open.map_or_else(|| std::fs::read_to_string(&r.path), Ok) {
                    Ok(text) => to.respond(ReadTextFileResponse::new(text)),
                    Err(e) => to.respond_with_error(Error::internal_error().data(e.to_string())),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |r: WriteTextFileRequest, to: Responder<WriteTextFileResponse>, _| {
                write_asked
                    .lock()
                    .unwrap()
                    .writes
                    .push((r.path.clone(), r.content.clone()));
                write_buffers.lock().unwrap().insert(r.path, r.content);
                to.respond(WriteTextFileResponse::new())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(agent, async |cx: ConnectionTo<Agent>| {
            let fs = FileSystemCapabilities::new()
                .read_text_file(true)
                .write_text_file(true);
            let init = InitializeRequest::new(ProtocolVersion::V1)
                .client_capabilities(ClientCapabilities::new().fs(fs));
            cx.send_request(init).block_task().await?;
            test(cx).await
        });
    tokio::time::timeout(WAIT * 4, connected)
        .await
        .expect("the editor's session ended in time")
        .expect("the connection worked");
    Arc::into_inner(asked).unwrap().into_inner().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_file_tools_read_the_editors_buffers_and_write_through_it_confined_to_the_workspace() {
    for with_daemon in [false, true] {
        let model = ScriptedModelServer::start([
            Reply::tool_calls(&[("r1", "read", r#"{"path": "a.txt"}"#)]),
            Reply::tool_calls(&[("r2", "read", r#"{"path": "../outside.txt"}"#)]),
            Reply::tool_calls(&[(
                "e1",
                "edit",
                r#"{"path": "a.txt", "old_string": "unsaved", "new_string": "edited"}"#,
            )]),
            Reply::tool_calls(&[("w1", "write", r#"{"path": "b.txt", "content": "new file"}"#)]),
            Reply::text(&["done"]),
        ])
        .await;
        // Edits are allowed without asking.
        let home = Home::new(&model, "");
        let daemon = match with_daemon {
            true => Some(home.daemon().await),
            false => None,
        };
        let workspace = home.workspace.path().canonicalize().unwrap();
        std::fs::write(workspace.join("a.txt"), "saved text\n").unwrap();
        let outside = workspace.parent().unwrap().join("outside.txt");
        let buffers = [
            (workspace.join("a.txt"), "unsaved text\n".to_owned()),
            (outside.clone(), "not for the agent".to_owned()),
        ];
        let asked = as_editor_with_buffers(agent(&home), buffers.into(), async |cx| {
            let new = cx
                .send_request(NewSessionRequest::new(workspace.clone()))
                .block_task()
                .await?;
            let turn = cx.send_request(prompt(&new.session_id, "work on a and b"));
            assert_eq!(turn.block_task().await?.stop_reason, StopReason::EndTurn);
            Ok(())
        })
        .await;

        // The read saw the unsaved buffer; the path leading out was refused before the editor
        // was asked.
        let requests = model
            .requests()
            .iter()
            .map(Value::to_string)
            .collect::<String>();
        assert!(
            requests.contains("unsaved text"),
            "{with_daemon}: {requests}"
        );
        assert!(
            requests.contains("leads outside the workspace"),
            "{requests}"
        );
        assert!(!requests.contains("not for the agent"), "{requests}");
        assert!(!asked.reads.contains(&outside), "{:?}", asked.reads);
        // The edit and the write went to the editor, not to the disk under it.
        assert_eq!(
            asked.writes,
            [
                (workspace.join("a.txt"), "edited text\n".to_owned()),
                (workspace.join("b.txt"), "new file".to_owned()),
            ],
            "{with_daemon}"
        );
        assert_eq!(
            std::fs::read_to_string(workspace.join("a.txt")).unwrap(),
            "saved text\n"
        );
        assert!(!workspace.join("b.txt").exists());
        if let Some(daemon) = daemon {
            home.shutdown(daemon).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_editors_mcp_server_serves_its_sessions_runs_alone_and_stops_with_the_daemon() {
    use agent_client_protocol::v1::schema::{EnvVariable, McpServer, McpServerStdio};
    let Some(everything) = common::mcp::server_entry("server-everything") else {
        return;
    };
    let model = ScriptedModelServer::start([
        Reply::tool_calls(&[("c1", "my_tools__echo", r#"{"message": "from the editor"}"#)]),
        Reply::text(&["echoed"]),
        Reply::text(&["no tools of the editor's here"]),
    ])
    .await;
    let home = Home::new(&model, "");
    let daemon = home.daemon().await;
    let workspace = home.workspace.path().canonicalize().unwrap();
    let tag = format!("acp-mcp-{}", home.path().display());
    let server = McpServer::Stdio(
        McpServerStdio::new("my tools", "node")
            .args(vec![everything.display().to_string(), "stdio".into()])
            .env(vec![EnvVariable::new("RYVOS_TEST_TAG", &tag)]),
    );
    let (asking, _asked) = mpsc::unbounded_channel();
    as_editor(agent(&home), Seen::default(), asking, async |cx| {
        let new = NewSessionRequest::new(workspace.clone()).mcp_servers(vec![server]);
        let with_servers = cx.send_request(new).block_task().await?.session_id;
        let turn = cx.send_request(prompt(&with_servers, "echo it"));
        assert_eq!(turn.block_task().await?.stop_reason, StopReason::EndTurn);
        // Another session has no servers of its own.
        let new = NewSessionRequest::new(workspace.clone());
        let without = cx.send_request(new).block_task().await?.session_id;
        let turn = cx.send_request(prompt(&without, "plain"));
        assert_eq!(turn.block_task().await?.stop_reason, StopReason::EndTurn);
        Ok(())
    })
    .await;

    let offered = |n: usize| -> Vec<String> {
        (model.requests()[n]["tools"].as_array().unwrap().iter())
            .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
            .collect()
    };
    assert!(
        offered(0).contains(&"my_tools__echo".to_owned()),
        "{:?}",
        offered(0)
    );
    let results: Vec<_> = model
        .requests()
        .iter()
        .flat_map(common::tool_results)
        .collect();
    assert!(
        results.contains(&("c1".into(), "Echo: from the editor".into())),
        "{results:?}"
    );
    assert!(
        !offered(2).iter().any(|t| t.starts_with("my_tools__")),
        "{:?}",
        offered(2)
    );
    // The server runs in the daemon, for the session, past the editor's leaving; it stops
    // with the daemon.
    assert!(!common::mcp::tagged_processes(&tag).is_empty());
    home.shutdown(daemon).await;
    assert!(common::mcp::tagged_processes(&tag).is_empty());
}

/// `session/fork`, as an editor asks it: a new session with the conversation so far, in a new
/// directory holding a copy of the files (or in the original's, sharing them).
#[tokio::test(flavor = "multi_thread")]
async fn an_editor_forks_a_session_into_a_copy_of_its_files() {
    let model = ScriptedModelServer::start([
        Reply::tool_calls(&[("w1", "write", r#"{"path": "a.txt", "content": "one"}"#)]),
        Reply::text(&["wrote a.txt"]),
        Reply::tool_calls(&[(
            "w2",
            "write",
            r#"{"path": "b.txt", "content": "in the fork"}"#,
        )]),
        Reply::text(&["wrote b.txt"]),
    ])
    .await;
    let home = Home::new(&model, "");
    let daemon = home.daemon().await;
    let workspace = home.workspace.path().canonicalize().unwrap();
    let copies = tempfile::tempdir().unwrap();
    let elsewhere = copies.path().join("fork");
    let (asking, _asked) = mpsc::unbounded_channel();
    as_editor(agent(&home), Seen::default(), asking, async |cx| {
        let id = cx
            .send_request(NewSessionRequest::new(workspace.clone()))
            .block_task()
            .await?
            .session_id;
        let turn = cx.send_request(prompt(&id, "write a")).block_task().await?;
        assert_eq!(turn.stop_reason, StopReason::EndTurn);
        let fork = ForkSessionRequest::new(id.clone(), elsewhere.clone());
        let forked = cx.send_request(fork).block_task().await?.session_id;
        assert_ne!(forked, id);
        assert_eq!(
            std::fs::read_to_string(elsewhere.join("a.txt")).unwrap(),
            "one"
        );
        let turn = cx
            .send_request(prompt(&forked, "write b"))
            .block_task()
            .await?;
        assert_eq!(turn.stop_reason, StopReason::EndTurn);
        assert!(
            elsewhere.join("b.txt").exists(),
            "the fork works in its copy"
        );
        assert!(
            !workspace.join("b.txt").exists(),
            "the original is untouched"
        );
        // In the original's own directory, only the conversation forks.
        let shared = ForkSessionRequest::new(id.clone(), workspace.clone());
        let shared = cx.send_request(shared).block_task().await?.session_id;
        assert_ne!(shared, id);
        Ok(())
    })
    .await;
    home.shutdown(daemon).await;
    // The fork's first request held the original's conversation, then its own prompt.
    let requests = model.requests();
    let users: Vec<&str> = (requests[2]["messages"].as_array().unwrap().iter())
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(users, ["write a", "write b"], "{:#}", requests[2]);
    model.assert_no_orphans();
}
