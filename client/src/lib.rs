//! A client of `ryvosd`'s socket, as the `ryvos` command line uses it.

use futures_util::StreamExt;
use ryvos_protocol::socket::{Call, ErrorBody, Reply, Request};
use serde_json::Value;
use std::path::Path;
use tokio::io::AsyncWriteExt;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use tokio_util::codec::{FramedRead, LinesCodec};

/// The longest reply line accepted (events carry tool outputs, already compacted).
const MAX_REPLY_BYTES: usize = 16 * 1024 * 1024;

/// A connection to the daemon.
pub struct Client {
    replies: FramedRead<OwnedReadHalf, LinesCodec>,
    requests: OwnedWriteHalf,
    next_id: u64,
}

/// What went wrong talking to the daemon.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("no ryvosd is answering at {path}: {cause}")]
    NoDaemon { path: String, cause: std::io::Error },
    #[error("the connection to ryvosd was lost: {0}")]
    Lost(String),
    #[error("ryvosd sent a line that is not a reply ({0})")]
    BadReply(String),
}

impl Client {
    /// Connects to the daemon at `socket`.
    pub async fn connect(socket: &Path) -> Result<Client, ClientError> {
        let stream = UnixStream::connect(socket)
            .await
            .map_err(|cause| ClientError::NoDaemon {
                path: socket.display().to_string(),
                cause,
            })?;
        let (read, write) = stream.into_split();
        Ok(Client {
            replies: FramedRead::new(read, LinesCodec::new_with_max_length(MAX_REPLY_BYTES)),
            requests: write,
            next_id: 1,
        })
    }

    /// Sends a request of `C`; returns its id.
    pub async fn send<C: Call>(&mut self, params: &C::Params) -> Result<u64, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let request = Request::of::<C>(id, params).map_err(|e| ClientError::Lost(e.to_string()))?;
        let mut line =
            serde_json::to_vec(&request).map_err(|e| ClientError::Lost(e.to_string()))?;
        line.push(b'\n');
        self.requests
            .write_all(&line)
            .await
            .map_err(|e| ClientError::Lost(e.to_string()))?;
        Ok(id)
    }

    /// The next reply line; an error if the daemon closed the connection.
    pub async fn next(&mut self) -> Result<Reply, ClientError> {
        match self.replies.next().await {
            Some(Ok(line)) => {
                serde_json::from_str(&line).map_err(|e| ClientError::BadReply(e.to_string()))
            }
            Some(Err(e)) => Err(ClientError::Lost(e.to_string())),
            None => Err(ClientError::Lost("ryvosd closed the connection".into())),
        }
    }

    /// Sends a request of `C` and waits for its final line (events, if any, are skipped): the
    /// result as `C`'s, or the daemon's error.
    pub async fn call<C: Call>(
        &mut self,
        params: &C::Params,
    ) -> Result<Result<C::Result, ErrorBody>, ClientError> {
        self.send::<C>(params).await?;
        loop {
            match self.next().await? {
                Reply::Event { .. } => continue,
                Reply::Result { result, .. } => return Self::read::<C>(result).map(Ok),
                Reply::Error { error, .. } => return Ok(Err(error)),
            }
        }
    }

    /// A final line's result, read as `C`'s.
    pub fn read<C: Call>(result: Value) -> Result<C::Result, ClientError> {
        serde_json::from_value(result)
            .map_err(|e| ClientError::BadReply(format!("the result of {}: {e}", C::METHOD)))
    }
}
