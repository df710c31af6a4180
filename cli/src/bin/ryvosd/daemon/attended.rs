//! Waits on a client's behalf that end when the daemon stops or the client leaves, whatever
//! they wait for.

use super::Shared;
use ryvos::protocol::{ErrorBody, ErrorCode};
use tokio::net::unix::OwnedWriteHalf;

/// `until`'s end, unless the daemon stops or the client leaves first.
pub(super) async fn attended<T>(
    until: impl std::future::Future<Output = T>,
    shared: &Shared,
    write: &OwnedWriteHalf,
) -> Result<T, ErrorBody> {
    tokio::select! {
        done = until => Ok(done),
        () = shared.shutdown.cancelled() => Err(ErrorBody::new(
            ErrorCode::ShuttingDown,
            "the daemon is stopping; wait again through another one",
        )),
        () = client_left(write) => Err(ErrorBody::new(ErrorCode::Internal, "the client left")),
    }
}

/// Ends when the client closed the connection. One that only stopped sending (a script's
/// half-close) still reads the answer, and one that sends more (it may pipeline requests) is
/// still there: for them this never ends, and a leaving is noticed at the next reply.
async fn client_left(write: &OwnedWriteHalf) {
    use tokio::io::Interest;
    let stream: &tokio::net::UnixStream = write.as_ref();
    match stream.ready(Interest::READABLE).await {
        Ok(ready) if ready.is_read_closed() => {}
        Err(_) => return,
        Ok(_) => return std::future::pending().await,
    }
    // Closed both ways (a hang-up), or only the client's sending side?
    match stream.ready(Interest::READABLE | Interest::WRITABLE).await {
        Ok(ready) if ready.is_write_closed() => {}
        Err(_) => {}
        Ok(_) => std::future::pending().await,
    }
}
