//! The run's files through the editor: when the editor can read and write text files
//! (`fs/read_text_file`, `fs/write_text_file`), its runs are started with `editor_files`, and
//! each file request a run's tool makes (`FileRequested`) is asked of the editor and its
//! answer handed back, so that the run sees unsaved buffers and its edits show in the editor.
//! The run has resolved the path in its workspace and checked the gate's rules before asking.

use super::sessions::State;
use agent_client_protocol::v1::schema::{
    ReadTextFileRequest, SessionId as AcpSessionId, WriteTextFileRequest,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Client, Error};
use std::sync::Arc;

/// Asks the editor for request `request_id` (a read of `path`, or with `content` a write),
/// without holding up the turn, and gives its answer to the run.
pub fn serve(
    state: &Arc<State>,
    cx: &ConnectionTo<Client>,
    session: &AcpSessionId,
    request_id: &str,
    path: &str,
    content: Option<&str>,
) -> Result<(), Error> {
    let asked = match content {
        None => {
            let read = cx.send_request(ReadTextFileRequest::new(session.clone(), path));
            Box::pin(async move { read.block_task().await.map(|read| Some(read.content)) })
                as std::pin::Pin<Box<dyn std::future::Future<Output = _> + Send>>
        }
        Some(content) => {
            let write = WriteTextFileRequest::new(session.clone(), path, content);
            let written = cx.send_request(write);
            Box::pin(async move { written.block_task().await.map(|_| None) })
        }
    };
    let (state, request_id) = (state.clone(), request_id.to_owned());
    cx.spawn(async move {
        let answer = asked.await.map_err(|e| e.to_string());
        if let Err(e) = state.host.answer_file(&request_id, answer).await {
            // The run gave up waiting, or ended meanwhile.
            eprintln!("ryvos acp: answering file request {request_id}: {e}");
        }
        Ok(())
    })
}
