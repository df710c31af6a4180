//! Writing one reply line to a client.

use crate::protocol::Reply;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedWriteHalf;

/// How long one line may take to reach a client; a client that stops reading is dropped
/// (its runs go on) rather than holding a connection slot forever.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Writes `reply` as one line.
pub(super) async fn send(write: &mut OwnedWriteHalf, reply: &Reply) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(reply).map_err(std::io::Error::other)?;
    line.push(b'\n');
    tokio::time::timeout(WRITE_TIMEOUT, write.write_all(&line))
        .await
        .map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::TimedOut, "the client stopped reading")
        })?
}
