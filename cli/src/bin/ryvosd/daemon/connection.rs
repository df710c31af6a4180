//! One client connection: read request lines, answer each with events and a final line.

use super::reply::send;
use super::streaming;
use super::Shared;
use futures_util::StreamExt;
use ryvos::protocol::{
    CancelResult, ErrorBody, ErrorCode, InterruptResult, Method, Reply, Request, ShutdownResult,
    Undecodable, MAX_FRAME_BYTES,
};
use ryvos_protocol::ids::SessionId;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use tokio_util::codec::{FramedRead, LinesCodec, LinesCodecError};

/// Serves one connection until the client leaves, sends a bad frame, or the daemon stops.
pub(super) async fn serve(stream: UnixStream, shared: &Shared) {
    let refused = super::peer::refusal(&stream);
    let (read, write) = stream.into_split();
    let mut frames = FramedRead::new(read, LinesCodec::new_with_max_length(MAX_FRAME_BYTES));
    if let Some(why) = refused {
        tracing::warn!("refused a connection: {why}");
        let error = ErrorBody::new(ErrorCode::PermissionDenied, why);
        // What the peer already sent is read before closing: unread input would make the
        // kernel reset the connection and lose the answer.
        return close_with(Reply::Error { id: 0, error }, frames, write).await;
    }
    let mut write = write;
    loop {
        let frame = tokio::select! {
            f = frames.next() => f,
            _ = shared.shutdown.cancelled() => {
                return answer_the_rest_stopping(frames, write).await;
            }
        };
        let line = match frame {
            None => return,
            Some(Ok(line)) => line,
            Some(Err(e)) => {
                let error = unreadable(e);
                tracing::warn!("bad frame: {}", error.message);
                return close_with(Reply::Error { id: 0, error }, frames, write).await;
            }
        };
        if line.trim().is_empty() {
            let error = ErrorBody::new(
                ErrorCode::BadFrame,
                "an empty line is not a request; send one JSON object per line; the connection \
                 is closed"
                    .to_owned(),
            );
            return close_with(Reply::Error { id: 0, error }, frames, write).await;
        }
        let request = match Request::decode(&line) {
            Ok(r) => r,
            Err(Undecodable {
                id,
                error,
                closes: true,
            }) => {
                tracing::warn!("bad frame: {}", error.message);
                return close_with(Reply::Error { id, error }, frames, write).await;
            }
            Err(Undecodable { id, error, .. }) => {
                if send(&mut write, &Reply::Error { id, error }).await.is_err() {
                    return; // the client left
                }
                continue;
            }
        };
        let answered = answer(request, &mut write, shared).await;
        if answered.is_err() {
            return; // the client left
        }
    }
}

/// Why a frame could not be read.
fn unreadable(e: LinesCodecError) -> ErrorBody {
    let message = match e {
        LinesCodecError::MaxLineLengthExceeded => {
            format!("the frame is longer than {MAX_FRAME_BYTES} bytes; the connection is closed")
        }
        LinesCodecError::Io(e) => {
            format!("the frame could not be read ({e}); the connection is closed")
        }
    };
    ErrorBody::new(ErrorCode::BadFrame, message)
}

/// How long a connection of a stopping daemon waits for more requests already on their way.
const STOPPING_PATIENCE: Duration = Duration::from_millis(200);

/// The daemon is stopping: every request the client already sent is answered `shutting_down`
/// (each request is owed one final line), until it sends nothing more for a moment.
async fn answer_the_rest_stopping(
    mut frames: FramedRead<OwnedReadHalf, LinesCodec>,
    mut write: OwnedWriteHalf,
) {
    while let Ok(Some(Ok(line))) = tokio::time::timeout(STOPPING_PATIENCE, frames.next()).await {
        let id = match Request::decode(&line) {
            Ok(request) => request.id,
            Err(Undecodable { id, .. }) => id,
        };
        if send(
            &mut write,
            &Reply::Error {
                id,
                error: stopping(),
            },
        )
        .await
        .is_err()
        {
            return;
        }
    }
    if let Err(e) = write.shutdown().await {
        tracing::debug!("closing a connection of a stopping daemon: {e}");
    }
}

fn stopping() -> ErrorBody {
    ErrorBody::new(
        ErrorCode::ShuttingDown,
        "the daemon is stopping: no new work is taken; start it again and retry".to_owned(),
    )
}

/// How long a connection closed for a bad frame keeps swallowing what the client still sends.
const DRAIN_BEFORE_CLOSE: Duration = Duration::from_secs(2);

/// Sends a last error and closes. Unread input at close would make the kernel reset the
/// connection and lose the answer, so what the client is still sending is read and dropped
/// (for a bounded time) after the answer is out.
async fn close_with(
    reply: Reply,
    frames: FramedRead<OwnedReadHalf, LinesCodec>,
    mut write: OwnedWriteHalf,
) {
    if send(&mut write, &reply).await.is_err() || write.shutdown().await.is_err() {
        return;
    }
    let mut read = frames.into_inner();
    let mut sink = vec![0u8; 64 * 1024];
    let drain = async { while matches!(read.read(&mut sink).await, Ok(n) if n > 0) {} };
    if tokio::time::timeout(DRAIN_BEFORE_CLOSE, drain)
        .await
        .is_err()
    {
        tracing::debug!("closing a connection that kept sending after a bad frame");
    }
}

/// Answers one request (a stopping daemon takes no new work, whatever the request).
///
/// Long because it is the table of methods: an arm each, calling the one function that
/// answers it.
async fn answer(
    request: Request,
    write: &mut OwnedWriteHalf,
    shared: &Shared,
) -> std::io::Result<()> {
    let id = request.id;
    if shared.shutdown.is_cancelled() {
        return send(
            write,
            &Reply::Error {
                id,
                error: stopping(),
            },
        )
        .await;
    }
    let reply = match request.method() {
        Err(error) => Err(error),
        Ok(method @ (Method::Run(_) | Method::Continue(_) | Method::Stop(_))) => {
            return streaming::answer(id, method, write, shared).await
        }
        Ok(Method::Status(_)) => Ok(Reply::result(id, &super::status::status(shared).await)),
        Ok(Method::Sessions(_)) => super::reads::sessions(shared)
            .await
            .map(|sessions| Reply::result(id, &sessions)),
        Ok(Method::History(params)) => {
            super::reads::history(&SessionId::new(params.session), shared)
                .await
                .map(|found| Reply::result(id, &found))
        }
        Ok(Method::Cost(_)) => super::reads::cost(shared)
            .await
            .map(|report| Reply::result(id, &report)),
        Ok(Method::Approvals(_)) => Ok(Reply::result(id, &super::approvals::pending(shared).await)),
        Ok(Method::Interrupt(params)) => {
            match shared
                .runtime
                .interrupt(&SessionId::new(params.session))
                .await
            {
                Ok(true) => Ok(Reply::result(id, &InterruptResult { interrupting: true })),
                Ok(false) => Err(no_run_in_flight()),
                Err(e) => Err(ErrorBody::new(ErrorCode::Internal, e.to_string())),
            }
        }
        Ok(Method::Cancel(params)) => {
            match shared.runtime.cancel(&SessionId::new(params.session)).await {
                Ok(true) => Ok(Reply::result(id, &CancelResult { cancelled: true })),
                Ok(false) => Err(no_run_in_flight()),
                Err(e) => Err(ErrorBody::new(ErrorCode::Internal, e.to_string())),
            }
        }
        Ok(Method::CompactUndo(params)) => {
            super::between_runs::compact_undo(&SessionId::new(params.session), shared)
                .await
                .map(|undone| Reply::result(id, &undone))
        }
        Ok(Method::Rewind(params)) => super::between_runs::rewind(params, shared)
            .await
            .map(|rewound| Reply::result(id, &rewound)),
        Ok(Method::Fork(params)) => super::between_runs::fork(params, shared)
            .await
            .map(|forked| Reply::result(id, &forked)),
        Ok(Method::Answer { params, approved }) => {
            super::approvals::answer(params, approved, shared)
                .await
                .map(|answered| Reply::result(id, &answered))
        }
        Ok(Method::FileAnswer(params)) => {
            super::file_answers::answer(params, shared).map(|answered| Reply::result(id, &answered))
        }
        Ok(Method::Shutdown(_)) => {
            shared.shutdown.cancel();
            Ok(Reply::result(id, &ShutdownResult { stopping: true }))
        }
        Ok(Method::Submit(params)) => super::queue_methods::submit(*params, shared)
            .await
            .map(|run| Reply::result(id, &run)),
        Ok(Method::Runs(params)) => super::queue_methods::runs(params, shared)
            .await
            .map(|runs| Reply::result(id, &runs)),
        Ok(Method::Wait(params)) if super::watching::watches(&params) => {
            super::watching::follow(id, params, false, shared, write)
                .await
                .map(|outcome| Reply::result(id, &outcome))
        }
        Ok(Method::Follow(params)) if super::watching::watches(&params) => {
            super::watching::follow(id, params, true, shared, write)
                .await
                .map(|outcome| Reply::result(id, &outcome))
        }
        Ok(Method::Wait(params)) => super::queue_methods::wait(id, params, shared, write)
            .await
            .map(|outcome| Reply::result(id, &outcome)),
        Ok(Method::Follow(params)) => super::queue_methods::follow(id, params, shared, write)
            .await
            .map(|outcome| Reply::result(id, &outcome)),
        Ok(Method::Console(_)) => {
            super::console::login(shared).map(|login| Reply::result(id, &login))
        }
        Ok(Method::TokenCreate(params)) => super::tokens::create(params, shared)
            .await
            .map(|made| Reply::result(id, &made)),
        Ok(Method::Tokens(_)) => super::tokens::list(shared)
            .await
            .map(|tokens| Reply::result(id, &tokens)),
        Ok(Method::TokenRevoke(params)) => super::tokens::revoke(params, shared)
            .await
            .map(|revoked| Reply::result(id, &revoked)),
        Ok(Method::Hooks(params)) => super::between_runs::hooks(params, shared)
            .await
            .map(|listed| Reply::result(id, &listed)),
        Ok(Method::HooksTrust(params)) => super::between_runs::trust_hooks(params, shared)
            .await
            .map(|trusted| Reply::result(id, &trusted)),
    };
    let reply = reply.unwrap_or_else(|error| Reply::Error { id, error });
    send(write, &reply).await
}

fn no_run_in_flight() -> ErrorBody {
    ErrorBody::new(ErrorCode::NotFound, "that session has no run in flight")
}
